"""The binary capture (capture.tg) read natively by the CLI, and `threadgraph export`.

The captures are made by capture_encode.py (an encoder written from
docs/formats.md, independent of the C reader) from text dumps; then:
- export(encode(text)) gives back the text byte for byte;
- every command gives on the capture exactly what it gives on the text files;
- a capture cut at any byte is read up to the cut, with a warning;
- a broken capture is refused with a message that says what and where.
"""
import json
import os
import random
import shutil
import sys
import struct

import pytest

import capture_encode as ce
from clisupport import FIXTURES, TUTORIAL

PEAK_OPTS = ["--peak=20", "--peak_delta_time=0", "--peak_delta_value=50"]


def canonical_copy(src, dst, names=None):
    """The dumps of src with six-decimal times (what the recorder and export write)."""
    os.makedirs(dst, exist_ok=True)
    for n in sorted(names or os.listdir(src)):
        out = []
        with open(os.path.join(src, n), "rb") as f:
            lines = f.read().split(b"\n")[:-1]
        for ln in lines:
            s = ln.lstrip(b" ")
            t, _, rest = s.partition(b"#")
            sec, _, fr = t.partition(b".")
            out.append(ln[:len(ln) - len(s)] + sec + b"." + (fr + b"000000")[:6] + b"#" + rest)
        with open(os.path.join(dst, n), "wb") as f:
            f.write(b"".join(x + b"\n" for x in out))


def gen_run(dst, seed=7, threads=("MainThread", "worker 1.a", "Thread-2"), calls=700,
            timed=True):
    """A generated run: nested Python and C calls, odd names, zero and peak deltas."""
    rng = random.Random(seed)
    py = [(b"/app/main.py", 10, b"main"), (b"/app/w:ork#er=>x.py", 3, b"step"),
          (b"/usr/lib/python3.11/json/encoder.py", 183, b"encode"),
          (b"/app/esc\\x1bq.py", 5, b"f\\x7f"), (b"/app/main.py", 40, b"<lambda>")]
    cfun = [(b"builtins", b"len"), (b"None", b"append"), (b"time", b"sleep")]
    os.makedirs(dst, exist_ok=True)
    t = 1700000000000000
    proc = []
    rss = 30000000
    for name in threads:
        stack, mem, open_ = [], [], []
        n = 0
        while n < calls or open_:
            if n < calls and (not open_ or rng.random() < 0.55 - 0.05 * len(open_)) \
                    and len(open_) < 9:
                t += rng.randint(0, 40)
                if rng.random() < 0.7:
                    f, first, fn = rng.choice(py)
                    line, ret = first, first + rng.randint(0, 6)
                else:
                    f, fn = rng.choice(cfun)
                    line = ret = rng.randint(1, 300)
                ts = b"%d.%06d#" % divmod(t, 1000000) if timed else b""
                stack.append(b" " * len(open_) + ts + b"%s:%d:%s" % (f, line, fn))
                open_.append((f, ret, fn))
                n += 1
            else:
                f, ret, fn = open_.pop()
                t += rng.randint(0, 40)
                r = rng.random()
                delta = 0 if r < 0.35 else (rng.randint(300000, 3000000) * rng.choice((-1, 1))
                                            if r > 0.97 else rng.randint(-5000, 5000))
                ts = b"%d.%06d#" % divmod(t, 1000000) if timed else b""
                mem.append(ts + b"%s:%d:%s=>%d" % (f, ret, fn, delta))
                if rng.random() < 0.05:
                    rss += rng.randint(-100000, 120000)
                    proc.append((t, rss))
        for suffix, lines in ((".mem", mem), (".stack", stack)):
            with open(os.path.join(dst, name + suffix), "wb") as fh:
                fh.write(b"".join(x + b"\n" for x in lines))
    proc.sort()
    with open(os.path.join(dst, "process.mem"), "wb") as fh:
        for pt, b in proc:
            fh.write((b"%d.%06d#%d\n" % (pt // 1000000, pt % 1000000, b)) if timed
                     else b"%d\n" % b)


def make_capture(run_dir, files, **kw):
    data = ce.encode([os.path.join(run_dir, f) for f in files], **kw)
    with open(os.path.join(run_dir, "capture.tg"), "wb") as f:
        f.write(data)
    return data


def read(path):
    with open(path, "rb") as f:
        return f.read()


def text_files(d):
    return sorted(f for f in os.listdir(d) if f.endswith((".mem", ".stack")))


@pytest.fixture
def tut_run(tmp_path):
    """Canonical tutorial dumps of Thread-7 (with stacks) and process.mem, and the
    capture encoded from them, in tmp_path/text; an empty run dir with only the
    capture in tmp_path/run."""
    text = tmp_path / "text"
    canonical_copy(TUTORIAL, str(text), ["Thread-7.mem", "Thread-7.stack", "process.mem"])
    make_capture(str(text), ["Thread-7.mem", "Thread-7.stack", "process.mem"], chunk=60)
    run = tmp_path / "run"
    run.mkdir()
    shutil.move(str(text / "capture.tg"), str(run / "capture.tg"))
    return text, run


@pytest.fixture
def gen(tmp_path):
    text = tmp_path / "gtext"
    gen_run(str(text))
    files = text_files(str(text)) + ["process.mem"]
    data = ce.encode([str(text / f) for f in files], chunk=300)
    run = tmp_path / "grun"
    run.mkdir()
    (run / "capture.tg").write_bytes(data)
    return text, run


# ---- export ---------------------------------------------------------------------

def export(tg, src, out=None):
    args = ["export", src] + (["-o", out] if out else [])
    return tg(*args)


def check_export_equal(tg, text, run, out):
    r = export(tg, run, out)
    assert r.returncode == 0, r.stderr
    want = sorted(f for f in os.listdir(text) if f.endswith(".mem") or f.endswith(".stack"))
    got = sorted(os.listdir(out))
    # the dumps, and runinfo.json: the threads' native ids (report's gc marks)
    assert got == sorted(want + ["runinfo.json"])
    for f in want:
        assert read(os.path.join(out, f)) == read(os.path.join(text, f)), f


def test_export_tutorial_byte_identical(tg, tut_run, tmp_path):
    text, run = tut_run
    check_export_equal(tg, str(text), str(run), str(tmp_path / "out" / "deeper"))


def test_export_generated_run_byte_identical(tg, gen, tmp_path):
    text, run = gen
    check_export_equal(tg, str(text), str(run), str(tmp_path / "out"))
    for chunk in (16, 65536):  # records packed one per chunk, or all in one
        d = tmp_path / ("c%d" % chunk)
        d.mkdir()
        files = text_files(str(text)) + ["process.mem"]
        (d / "capture.tg").write_bytes(ce.encode([str(text / f) for f in files], chunk=chunk))
        check_export_equal(tg, str(text), str(d / "capture.tg"), str(tmp_path / ("o%d" % chunk)))


def test_export_memory_only_and_stack_only(tg, tmp_path):
    text = tmp_path / "t"
    canonical_copy(TUTORIAL, str(text))
    mems = sorted(f for f in os.listdir(text) if f.endswith(".mem"))
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "capture.tg").write_bytes(ce.encode([str(text / f) for f in mems]))
    r = export(tg, tmp_path / "m", tmp_path / "mo")
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path / "mo")) == sorted(mems + ["runinfo.json"])
    for f in mems:
        assert read(tmp_path / "mo" / f) == read(text / f)
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "capture.tg").write_bytes(ce.encode([str(text / "Thread-7.stack")]))
    r = export(tg, tmp_path / "s", tmp_path / "so")
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path / "so")) == ["Thread-7.stack", "runinfo.json"]
    assert read(tmp_path / "so" / "Thread-7.stack") == read(text / "Thread-7.stack")


def test_export_without_timestamps(tg, tmp_path):
    nt = os.path.join(FIXTURES, "notime")
    d = tmp_path / "nt"
    d.mkdir()
    # (its Worker.stack does not pair with Worker.mem: left out)
    (d / "capture.tg").write_bytes(ce.encode(
        [os.path.join(nt, f) for f in ("Worker.mem", "process.mem")], timed=False, chunk=40))
    r = export(tg, d)
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(d)) == ["Worker.mem", "capture.tg", "process.mem", "runinfo.json"]
    for f in ("Worker.mem", "process.mem"):
        assert read(d / f) == read(os.path.join(nt, f))
    a = tg("--no_time", "peaks", "--peak=1", *[str(d / f) for f in ("Worker.mem", "process.mem")])
    b = tg("peaks", "--peak=1", d)
    same_peaks(a, b)
    assert a.stdout


def test_export_never_overwrites(tg, tut_run):
    text, run = tut_run
    r = export(tg, run)
    assert r.returncode == 0, r.stderr
    assert (run / "Thread-7.mem").exists()
    before = {f: read(run / f) for f in os.listdir(run)}
    (run / "Thread-7.stack").write_bytes(b"mine\n")
    os.unlink(run / "Thread-7.mem")
    r = export(tg, run)
    assert r.returncode == 1
    assert "exists" in r.stderr and "Thread-7.stack" in r.stderr
    assert not (run / "Thread-7.mem").exists()  # nothing written before refusing
    assert read(run / "Thread-7.stack") == b"mine\n"
    assert read(run / "process.mem") == before["process.mem"]


def test_export_refuses_a_text_dump(tg, tut_run):
    text, run = tut_run
    r = export(tg, text / "Thread-7.mem")
    assert r.returncode == 1 and "not a capture" in r.stderr


# ---- every command: capture == text ---------------------------------------------

def same(a, b):
    assert a.returncode == b.returncode, (a.stderr, b.stderr)
    assert a.stdout == b.stdout
    assert a.stderr == b.stderr


def as_run_dir(out):
    """peaks' output on text dumps with each MEMFILE replaced by its directory, as
    peaks gives it for a binary capture (what decorate-stack RUN_DIR THREAD LINE takes)."""
    if out.startswith("["):
        rows = json.loads(out)
        for row in rows:
            row["mem_file"] = os.path.dirname(row["mem_file"])
        return rows
    rows = [ln.split("\t") for ln in out.splitlines()]
    for row in rows:
        row[4] = os.path.dirname(row[4])
    return rows


def same_peaks(text, cap):
    """peaks on the text dumps and on the capture: the same but for MEMFILE."""
    assert text.returncode == cap.returncode, (text.stderr, cap.stderr)
    assert text.stderr == cap.stderr
    assert as_run_dir(text.stdout) == (json.loads(cap.stdout) if cap.stdout.startswith("[")
                                       else [ln.split("\t") for ln in cap.stdout.splitlines()])


def exported(tg, run):
    r = export(tg, run)
    assert r.returncode == 0, r.stderr
    return sorted(os.path.join(str(run), f) for f in os.listdir(run) if f.endswith(".mem")), \
        sorted(os.path.join(str(run), f) for f in os.listdir(run) if f.endswith(".stack"))


def graph_outputs(d):
    """Every file under D (the graph's legend, and its script and data in the
    NAME-plot folder), by path relative to D."""
    out = {}
    for root, _, names in os.walk(d):
        for f in names:
            path = os.path.join(root, f)
            out[os.path.relpath(path, d)] = read(path)
    return out


@pytest.mark.parametrize("which", ["tut", "gen"])
def test_commands_same_on_capture_and_text(tg, tut_run, gen, tmp_path, which):
    text, run = tut_run if which == "tut" else gen
    cap_path = run / "capture.tg"
    mems, stacks = exported(tg, run)  # text files beside the capture: same paths
    for opts in ([], PEAK_OPTS, PEAK_OPTS + ["--json"], ["--json", "--top=3", "--sort=size"],
                 ["--peak=1", "--time_from", "01/01/2000", "--time_to", "01/01/2040"]):
        same_peaks(tg("peaks", *opts, *mems), tg("peaks", *opts, run))
    same_peaks(tg("peaks", *PEAK_OPTS, *mems), tg("peaks", *PEAK_OPTS, cap_path))
    for cmd, files, extra in (("memg", mems, PEAK_OPTS + ["--cap", "400"]),
                              ("memg", mems, ["--no_process"]),
                              ("memh", mems, []),
                              ("nesting", stacks, []),
                              ("interleave", mems, [])):
        oa, ob = tmp_path / ("a-" + cmd), tmp_path / ("b-" + cmd)
        for o in (oa, ob):
            if o.exists():
                shutil.rmtree(o)
            o.mkdir()
        a = tg(cmd, "--script-only", "-o", oa, *extra, *files)
        b = tg(cmd, "--script-only", "-o", ob, *extra, run)
        same(a, b)
        assert a.returncode == 0, a.stderr
        ga, gb = graph_outputs(oa), graph_outputs(ob)
        assert ga == gb and ga, cmd
    # a --no_time view of a timed capture is the event-index graph
    o = tmp_path / "nt"
    o.mkdir()
    r = tg("--no_time", "memg", "--script-only", "-o", o, run)
    assert r.returncode == 0, r.stderr
    assert "set xlabel 'Event'" in (o / "memg-plot" / "memg.gp").read_text()


def test_decorate_stack_same_on_capture_and_text(tg, gen):
    text, run = gen
    exported(tg, run)
    rng = random.Random(3)
    for base in ("MainThread", "worker 1.a"):
        n = len(read(run / (base + ".mem")).splitlines())
        for k in sorted(set([1, n, n // 2] + [rng.randint(1, n) for _ in range(8)])):
            a = tg("decorate-stack", "--prefix=/app/", run / (base + ".mem"),
                   run / (base + ".stack"), k)
            b = tg("decorate-stack", "--prefix=/app/", run, base, k)
            assert a.returncode == 0, a.stderr
            assert (a.returncode, a.stdout) == (b.returncode, b.stdout), (base, k)
        line = read(run / (base + ".mem")).splitlines()[n // 3].decode()
        a = tg("decorate-stack", run / (base + ".mem"), run / (base + ".stack"), line)
        b = tg("decorate-stack", run / "capture.tg", base, line)
        assert a.returncode == 0 and a.stdout == b.stdout


def test_decorate_stack_on_capture_errors(tg, tut_run):
    text, run = tut_run
    r = tg("decorate-stack", run, "Nope", "1")
    assert r.returncode == 1 and "no thread 'Nope'" in r.stderr
    r = tg("decorate-stack", run, "Thread-7", "33")
    assert r.returncode == 1 and "has 32 returns" in r.stderr
    r = tg("decorate-stack", run, "Thread-7", "0")
    assert r.returncode == 1


def test_peaks_on_a_capture_name_what_decorate_stack_takes(tg, tut_run):
    """peaks on a capture gives the run directory, the thread and a line: decorate-stack
    takes them as they are (there is no .mem file before an export)."""
    text, run = tut_run
    r = tg("peaks", *PEAK_OPTS, run)
    assert r.returncode == 0, r.stderr
    rows = [ln.split("\t") for ln in r.stdout.splitlines()]
    assert rows
    for row in rows:
        assert row[4] == str(run)
        d = tg("decorate-stack", row[4], row[2], row[5])
        assert d.returncode == 0, d.stderr
        assert d.stdout.split(",")[0].split("@")[0] == row[6].rsplit(":", 1)[1]


def test_peaks_legend_names_the_exported_line(tg, tut_run):
    """peaks on the capture names a thread and line; that line of the export is the peak."""
    text, run = tut_run
    r = tg("peaks", *PEAK_OPTS, run)
    assert r.returncode == 0, r.stderr
    rows = [ln.split("\t") for ln in r.stdout.splitlines()]
    assert rows
    assert export(tg, run).returncode == 0
    for row in rows:
        lines = read(os.path.join(row[4], row[2] + ".mem")).decode().splitlines()
        assert lines[int(row[5]) - 1].endswith(":%s=>%s" % (row[6].rsplit(":", 1)[1], row[3]))


def test_accounting_commands_take_a_run_dir(tg, fixtures):
    acc = os.path.join(fixtures, "accounting")
    for cmd in (["summary"], ["hist", "--no-graph"], ["top"]):
        r = tg(*cmd, acc)
        assert r.returncode == 0, (cmd, r.stderr)
    r = tg("diff", "--base", os.path.join(fixtures, "accounting2", "run-a"),
           os.path.join(fixtures, "accounting2", "run-b"))
    assert r.returncode == 0, r.stderr


def test_text_run_dir_is_its_dump_files(tg, tmp_path):
    d = tmp_path / "t"
    canonical_copy(TUTORIAL, str(d))
    mems = sorted(str(d / f) for f in os.listdir(d) if f.endswith(".mem"))
    same(tg("peaks", *PEAK_OPTS, *mems), tg("peaks", *PEAK_OPTS, d))


def test_capture_must_be_alone(tg, tut_run):
    text, run = tut_run
    r = tg("peaks", run, text / "Thread-7.mem")
    assert r.returncode == 1 and "only operand" in r.stderr


# ---- cut short, dropped records -------------------------------------------------

def line_prefix(part, whole):
    return whole.startswith(part) and (not part or part.endswith(b"\n"))


def test_every_truncation_reads_up_to_the_cut(tg, tut_run, tmp_path):
    text, run = tut_run
    data = read(run / "capture.tg")
    full = {f: read(text / f) for f in ("Thread-7.mem", "Thread-7.stack", "process.mem")}
    # Every cut once per CI run: the capture (encoded by tgcapture from fixed
    # dumps) and the CLI are the same under every Python: CPython 3.11 cuts at
    # every byte, the other Pythons at every 13th (header, chunks and end all
    # still cut), the ASan run (slower per process) at every 3rd.
    if os.environ.get("TG_CLI", "").find("asan") >= 0:
        step = 3
    elif sys.version_info[:2] == (3, 11):
        step = 1
    else:
        step = 13
    seen_partial = False
    for n in range(0, len(data), step):
        d = tmp_path / ("cut%d" % n)
        d.mkdir()
        (d / "capture.tg").write_bytes(data[:n])
        r = export(tg, d, d / "out")
        if n < ce.struct.calcsize("<8sIIqIIII"):
            assert r.returncode == 1, n
            assert ("cut short in its header" in r.stderr or "not a capture" in r.stderr
                    or "no capture magic" in r.stderr), r.stderr
            continue
        assert r.returncode == 0, (n, r.stderr)
        assert "cut short" in r.stderr or "no end chunk" in r.stderr, r.stderr
        for f in os.listdir(d / "out"):
            if f == "runinfo.json":
                continue
            part = read(d / "out" / f)
            assert line_prefix(part, full[f]), (n, f)
            seen_partial |= 0 < len(part) < len(full[f])
        shutil.rmtree(d)
    assert seen_partial
    r = export(tg, run, tmp_path / "whole")
    assert r.returncode == 0 and "warning" not in r.stderr


def test_truncated_capture_commands_do_not_crash(tg, gen, tmp_path):
    text, run = gen
    data = read(run / "capture.tg")
    for n in range(40, len(data), max(1, len(data) // 40)):
        d = tmp_path / ("p%d" % n)
        d.mkdir()
        (d / "capture.tg").write_bytes(data[:n])
        r = tg("peaks", "--peak=1", d)
        assert r.returncode == 0 and ("cut short" in r.stderr or "no end chunk" in r.stderr), \
            r.stderr
        r = tg("memh", "--script-only", "-o", d, d)
        assert r.returncode in (0, 1) and "Sanitizer" not in r.stderr


def test_no_end_chunk_warns(tg, tut_run, tmp_path):
    text, run = tut_run
    d = tmp_path / "noend"
    d.mkdir()
    (d / "capture.tg").write_bytes(ce.encode(
        [str(text / f) for f in ("Thread-7.mem", "Thread-7.stack")], end=False))
    r = tg("peaks", "--peak=1", d)
    assert r.returncode == 0
    assert "no end chunk" in r.stderr


def test_dropped_records_are_reported(tg, tut_run, tmp_path):
    text, run = tut_run
    d = tmp_path / "drop"
    d.mkdir()
    (d / "capture.tg").write_bytes(ce.encode(
        [str(text / f) for f in ("Thread-7.mem", "Thread-7.stack")], dropped=["Thread-7:10:5"]))
    r = export(tg, d)
    assert r.returncode == 0, r.stderr
    assert "lost 5 records" in r.stderr
    assert read(d / "Thread-7.mem") == read(text / "Thread-7.mem")


# ---- broken captures ------------------------------------------------------------

HDR = struct.Struct("<8sIIqIIII")


def header(flags=ce.F_TIME | ce.F_MEMORY | ce.F_STACK, version=1, start=1000000):
    return HDR.pack(ce.MAGIC, version, flags, start, 0, 0, 1, 0)


def chunk(kind, stream, payload, flags=0):
    return struct.pack("<BBHII", kind, flags, 0, stream, len(payload)) + payload


def thread(stream=2, base=b"T"):
    return chunk(ce.K_THREAD, stream, ce.varint(1) + ce.varint(2) + ce.text(base) + ce.text(base))


def code(cid=1, kind=0, first=5, f=b"a.py", fn=b"f"):
    return chunk(ce.K_CODES, 0, ce.varint(cid) + bytes([kind]) + ce.varint(first) + ce.text(f) +
                 ce.text(fn))


CALL = ce.varint(1 << 1) + ce.varint(3)
RET = ce.varint(1) + ce.varint(2) + ce.varint(ce.zz(100))

BROKEN = [
    ("bad magic", b"\x89TGCAQ\r\n" + header()[8:], "not a capture"),
    ("version", header(version=3), "capture version 3, this threadgraph reads versions 1 to 2 "
     "(made by a later threadgraph"),
    ("huge chunk", header() + struct.pack("<BBHII", 1, 0, 0, 2, 1 << 30), "longer than 16 MB"),
    ("undefined thread", header() + code() + chunk(1, 2, CALL + RET), "undefined thread"),
    ("return without call", header() + thread() + chunk(1, 2, RET), "without an open call"),
    ("undefined code", header() + thread() + chunk(1, 2, ce.varint(7 << 1) + ce.varint(0)),
     "undefined code"),
    ("code twice", header() + code() + code(), "code defined twice"),
    ("unsafe name", header() + thread(base=b"../x"), "not a safe file name"),
    ("process name", header() + thread(base=b"process"), "not a safe file name"),
    ("hidden name", header() + thread(base=b".x"), "not a safe file name"),
    ("control byte", header() + code(fn=b"f\x1b[2J"), "control byte in a code's name"),
    ("same name", header() + thread() + thread(stream=3), "same file name"),
    ("zstd", header() + thread() + chunk(1, 2, CALL, flags=1), "zstd"),
    ("straddle", header() + code() + thread() + chunk(1, 2, CALL + RET[:2]) + chunk(1, 2, RET[2:]),
     "runs past the end of its chunk"),
    ("special", header() + thread() + chunk(1, 2, b"\x00\x09"), "unknown special event"),
    ("negative start", header(start=-5), "negative start time"),
    ("unwound too many", header() + code() + thread() + chunk(1, 2, CALL + b"\x00\x02\x02"),
     "more calls unwound than are open"),
]


@pytest.mark.parametrize("name,data,msg", BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_capture_is_refused(tg, tmp_path, name, data, msg):
    (tmp_path / "capture.tg").write_bytes(data)
    for args in (["peaks", tmp_path], ["export", tmp_path, "-o", tmp_path / "o"],
                 ["decorate-stack", tmp_path, "T", "1"]):
        r = tg(*args)
        assert r.returncode == 1, (args, r.stderr)
        assert "error: " in r.stderr and (msg in r.stderr or args[0] == "decorate-stack"), \
            (args, r.stderr)
        assert "Sanitizer" not in r.stderr
    assert not (tmp_path / "o" / "T.mem").exists()


def test_unknown_chunk_kinds_are_skipped(tg, tmp_path):
    data = header() + code() + thread() + chunk(9, 0, b"future stuff") + \
        chunk(1, 2, CALL + RET) + chunk(5, 0, struct.pack("<q", 2000000) + ce.varint(0))
    (tmp_path / "capture.tg").write_bytes(data)
    r = export(tg, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr
    assert read(tmp_path / "T.mem") == b"1.000005#a.py:5:f=>100\n"
    assert read(tmp_path / "T.stack") == b"1.000003#a.py:5:f\n"


def test_unwound_calls_close_without_a_line(tg, tmp_path):
    """UNWOUND closes the innermost open calls: the RETURN after it closes the
    outer call, and the unwound one has no .mem line."""
    unwound_1 = b"\x00\x02" + ce.varint(1)
    data = header() + code() + thread() + chunk(1, 2, CALL + CALL + unwound_1 + RET) + \
        chunk(5, 0, struct.pack("<q", 2000000) + ce.varint(0))
    (tmp_path / "capture.tg").write_bytes(data)
    r = export(tg, tmp_path)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    assert read(tmp_path / "T.mem") == b"1.000008#a.py:5:f=>100\n"
    assert read(tmp_path / "T.stack") == b"1.000003#a.py:5:f\n 1.000006#a.py:5:f\n"
    r = tg("decorate-stack", tmp_path, "T", "1")
    assert r.returncode == 0 and "Sanitizer" not in r.stderr, r.stderr


def level(mem, *starts):
    """A LEVEL event (version 2): the thread's memory, its open calls' starts."""
    out = b"\x00\x03" + ce.varint(ce.zz(mem)) + ce.varint(len(starts))
    prev = 0
    for s in starts:
        out += ce.varint(ce.zz(s - prev))
        prev = s
    return out


def test_level_marks_put_held_memory_right(tg, tmp_path):
    """A loop (the outer call) whose callees each return 100 bytes, that it
    frees in its own code before the next: from the RETURNs alone its held
    memory grows by 100 a call; a LEVEL after each says it is 0 again, and the
    next callee starts from there (held memory, threads, live; docs/formats.md)."""
    ret_of = lambda d: ce.varint(1) + ce.varint(2) + ce.varint(ce.zz(d))
    body = CALL
    for _ in range(5):
        body += CALL + ret_of(100) + level(0, 0)  # freed by the loop: 0 held
    end = chunk(5, 0, struct.pack("<q", 2000000) + ce.varint(0))
    data = header(version=2) + code() + thread() + chunk(1, 2, body) + end
    (tmp_path / "capture.tg").write_bytes(data)
    r = tg("threads", "--json", tmp_path)
    assert r.returncode == 0, r.stderr
    (t,) = json.loads(r.stdout)["threads"]
    assert t["peak"] == 100 and t["live_at_end"] == 0, t
    r = tg("live", "--once", tmp_path)
    assert r.returncode == 0, r.stderr
    row = [l for l in r.stdout.splitlines() if l.split()[:1] == ["T"]][0].split()
    assert row[1:3] == ["0", "B"] and row[5:7] == ["100", "B"], row  # NOW, PEAK
    # without the marks (a version 1 capture cannot have them): 500 held
    data = header() + code() + thread() + chunk(1, 2, body.replace(level(0, 0), b"")) + end
    (tmp_path / "capture.tg").write_bytes(data)
    (t,) = json.loads(tg("threads", "--json", tmp_path).stdout)["threads"]
    assert t["peak"] == 500, t
    # export: the same records, the marks have no text
    (tmp_path / "capture.tg").write_bytes(header(version=2) + code() + thread()
                                           + chunk(1, 2, body) + end)
    assert export(tg, tmp_path).returncode == 0
    assert read(tmp_path / "T.mem").count(b"=>100\n") == 5


def test_level_mark_of_other_calls_keeps_only_its_memory(tg, tmp_path):
    """A LEVEL whose starts are not one per open call (a damaged or foreign
    stream) sets the memory only; one cut short is the capture's cut."""
    ret_of = lambda d: ce.varint(1) + ce.varint(2) + ce.varint(ce.zz(d))
    body = CALL + CALL + ret_of(100) + level(0, 0, 0, 0) + CALL + ret_of(100)
    end = chunk(5, 0, struct.pack("<q", 2000000) + ce.varint(0))
    (tmp_path / "capture.tg").write_bytes(header(version=2) + code() + thread()
                                           + chunk(1, 2, body) + end)
    r = tg("threads", "--json", tmp_path)
    assert r.returncode == 0, r.stderr
    (t,) = json.loads(r.stdout)["threads"]
    assert t["peak"] == 100, t
    (tmp_path / "capture.tg").write_bytes(header(version=2) + code() + thread()
                                           + chunk(1, 2, CALL + level(5, 7)[:-1]))
    r = tg("threads", "--json", tmp_path)
    assert "Sanitizer" not in r.stderr
    assert "cut short" in r.stderr or "corrupt" in r.stderr or r.returncode != 0, r.stderr


def test_out_of_range_values_are_malformed_as_in_text(tg, tmp_path):
    """A delta of 19 digits: the text reader skips its exported line as malformed,
    and the capture reader skips the record with the same warning."""
    big = ce.varint(1) + ce.varint(2) + ce.varint(ce.zz(1 << 62))
    data = header() + code() + thread() + chunk(1, 2, CALL + big + CALL + RET) + \
        chunk(5, 0, struct.pack("<q", 2000000) + ce.varint(0))
    (tmp_path / "capture.tg").write_bytes(data)
    a = tg("peaks", "--peak=0", tmp_path)
    assert export(tg, tmp_path).returncode == 0
    b = tg("peaks", "--peak=0", tmp_path / "T.mem")
    assert a.returncode == b.returncode == 0
    assert "malformed line skipped (bad memory delta)" in a.stderr
    # the capture's warning names the capture (a capture run has no T.mem to read)
    assert a.stderr == b.stderr.replace(str(tmp_path / "T.mem"),
                                        str(tmp_path / "capture.tg") + ": T.mem")
    assert as_run_dir(b.stdout) == [ln.split("\t") for ln in a.stdout.splitlines()]
    assert a.stdout.count("\n") == 1


def test_warnings_of_a_capture_name_the_capture(tg, tmp_path):
    """A malformed record of a capture is named by the capture file and the line it
    has in the exported file (there is no .mem file to look at), with --strict too."""
    bad = ce.varint(ce.zz(-9) << 1 | 1) + ce.varint(2) + ce.varint(ce.zz(100))  # line -4
    data = header() + code() + thread() + chunk(1, 2, CALL + RET + CALL + bad)
    (tmp_path / "capture.tg").write_bytes(data)
    where = "%s: T.mem:2: " % (tmp_path / "capture.tg")
    r = tg("peaks", "--peak=0", tmp_path)
    assert r.returncode == 0 and where + "malformed line skipped (bad line number)" in r.stderr
    r = tg("peaks", "--strict", "--peak=0", tmp_path)
    assert r.returncode == 1 and "error: " + where + "bad line number" in r.stderr


def test_line_minus_one_is_line_0(tg, tmp_path):
    """CPython's "no line" (-1), which threadgraph 0.1.0 wrote (a generator's
    implicit return on 3.12, a C call from where the caller has no line): read as
    line 0 from a capture, from its export and from a text dump, with --strict."""
    text = tmp_path / "text"
    text.mkdir()
    # len is a C code (its calls carry their line): called from line 7, then -1
    (text / "T.stack").write_bytes(b"1.000001#a.py:5:f\n"
                                   b" 1.000002#builtins:7:len\n"
                                   b" 1.000003#builtins:-1:len\n")
    (text / "T.mem").write_bytes(b"1.000002#builtins:7:len=>8\n"
                                 b"1.000004#builtins:-1:len=>40\n"
                                 b"1.000005#a.py:-1:f=>100\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / "capture.tg").write_bytes(ce.encode([str(text / "T.mem"), str(text / "T.stack")]))
    out = tmp_path / "exp"
    assert export(tg, run, out).returncode == 0
    assert read(out / "T.mem") == read(text / "T.mem").replace(b"-1", b"0")
    assert read(out / "T.stack") == read(text / "T.stack").replace(b"-1", b"0")
    for cmd in (["peaks", "--peak=0"], ["peaks", "--peak=0", "--json"],
                ["folded", "--metric", "delta"], ["folded", "--metric", "time"]):
        a = tg(*cmd, "--strict", run)
        b = tg(*cmd, "--strict", out)
        c = tg(*cmd, "--strict", text)
        assert a.returncode == b.returncode == c.returncode == 0, (a.stderr, b.stderr, c.stderr)
        outs = [x.stdout.replace(str(d), "RUN") for x, d in ((a, run), (b, out), (c, text))]
        if cmd[0] == "peaks":  # MEMFILE: the capture's run directory, or the .mem file
            outs[1] = outs[1].replace("RUN/T.mem", "RUN")
            outs[2] = outs[2].replace("RUN/T.mem", "RUN")
        assert outs[0] == outs[1] and outs[0], cmd
        assert ":-1" not in outs[0]
        # the text dump's sites say line 0 too (peaks printed "a.py:-1:f" as
        # written while the capture printed "a.py:0:f")
        assert outs[2] == outs[0], cmd
        if cmd[0] == "folded":
            assert ":0)" in outs[0]


def test_a_pipe_is_not_sniffed_for_the_magic(tg):
    """Detecting a capture reads 8 bytes of regular files only: a dump on a pipe
    keeps its first line."""
    r = tg("peaks", "--peak=1", "/dev/stdin", input="1.5#a.py:1:f=>999999\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\t")[:4] == ["0", "1.5", "stdin", "999999"]


def test_capture_without_stacks_asked_still_has_its_calls(tg, tut_run, tmp_path):
    """A binary run made without --stack holds every call's record all the same (the
    flag only says whether its export writes .stack files): report links the peaks'
    subtrees, nesting and the delta flame graph work, as decorate-stack does."""
    text, run = tut_run
    data = bytearray(read(run / "capture.tg"))
    flags = struct.unpack_from("<I", data, 12)[0]
    struct.pack_into("<I", data, 12, flags & ~ce.F_STACK)
    (run / "capture.tg").write_bytes(bytes(data))
    out = tmp_path / "r.html"
    r = tg("report", *PEAK_OPTS, run, "-o", out)
    assert r.returncode == 0, r.stderr
    html = out.read_text()
    assert "no .stack files" not in html and 'href="#peak-' in html
    assert "doStuff@" in html  # a decorated subtree
    r = tg("nesting", "--script-only", "-o", tmp_path / "n", run)
    assert r.returncode == 0, r.stderr
    r = tg("folded", "--metric", "delta", run)
    assert r.returncode == 0 and "doStuff" in r.stdout, r.stderr
    assert tg("decorate-stack", run, "Thread-7", "1").returncode == 0
