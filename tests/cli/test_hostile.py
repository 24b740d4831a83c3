"""Hostile input to the CLI, beyond test_injection.py and test_bad_input.py.

Dumps and their file names are written by others: whatever they hold, every
command exits 0 or 1 (never a signal), prints no raw control byte to the
terminal (on any path: progress, warnings, errors, results), writes only its
fixed output names inside -o DIR, never writes through a symlink planted there,
and runs nothing through gnuplot.  docs/security.md lists what is checked where.
"""
import gzip
import json
import os
import re
import subprocess

import pytest

from clisupport import CLI, needs_gnuplot

ESC_NAMES = ["\x1b]0;pwned\x07", "\x1b[31m", "\x1b[2J\x1b[H", "a\rb\x7f", "\u009b31m\u0085",
             "evil\u202ecod"]
GRAPHS = ["memg", "memh", "nesting", "interleave"]


def run(*args, cwd=None, env=None):
    """Runs the CLI with bytes output, so that no decoding hides a raw byte."""
    full_env = dict(os.environ)
    full_env.pop("GNUPLOT", None)
    full_env.update(env or {})
    return subprocess.run([CLI] + [os.fsencode(str(a)) for a in args], cwd=cwd,
                          env=full_env, capture_output=True, timeout=60)


def assert_exit_ok_or_error(r):
    assert r.returncode in (0, 1), (r.returncode, r.stderr[-2000:])


C1_UTF8 = re.compile(b"\xc2[\x80-\x9f]")
# the bidirectional controls that reorder a terminal's line (tg_unsafe_seq)
BIDI_UTF8 = re.compile(b"\xd8\x9c|\xe2\x80[\x8e\x8f\xaa-\xae]|\xe2\x81[\xa6-\xa9]")


def assert_no_raw_controls(r):
    """Neither stream holds a control byte other than newline and tab, nor a
    UTF-8 C1 control (U+0080-U+009F: U+009B is CSI to some terminals)."""
    for name, data in (("stdout", r.stdout), ("stderr", r.stderr)):
        bad = sorted({b for b in data if (b < 0x20 and b not in (9, 10)) or b == 0x7f})
        assert not bad, "%s holds raw control bytes %r: %r" % (name, bad, data[-500:])
        assert not C1_UTF8.search(data), "%s holds a raw C1 control: %r" % (name, data[-500:])
        assert not BIDI_UTF8.search(data), "%s holds a raw bidi control: %r" % (name, data[-500:])


def write(path, data):
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8", "surrogateescape"))
    return str(path)


def hostile_dir(tmp_path, name):
    """A dump directory whose thread files and dump text carry escape sequences."""
    d = tmp_path / "dumps"
    d.mkdir(exist_ok=True)
    mem = write(d / (name + ".mem"),
                "1394031412.2#a.py:4:g=>-409600\n"
                "1394031412.5#%s.py:3:%s=>409600\n" % (name, name))
    stack = write(d / (name + ".stack"),
                  "1394031412.0#%s.py:1:%s\n"
                  " 1394031412.1#a.py:2:g\n" % (name, name))
    proc = write(d / "process.mem", "1394031412.0#31457280\n")
    return d, mem, stack, proc


@pytest.mark.parametrize("name", ESC_NAMES,
                         ids=["osc-title", "sgr", "clear", "cr-del", "c1", "bidi"])
def test_every_command_escapes_dump_text(tmp_path, name):
    d, mem, stack, proc = hostile_dir(tmp_path, name)
    out = tmp_path / "out"
    out.mkdir()
    for args in (["peaks", "--peak=1", mem], ["peaks", "--json", "--peak=1", mem],
                 ["memg", "--script-only", "--peak=1", "-o", out, mem, proc, stack],
                 ["memh", "--script-only", "-o", out, mem, stack],
                 ["nesting", "--script-only", "-o", out, stack, mem],
                 ["interleave", "--script-only", "-o", out, mem, stack],
                 ["decorate-stack", mem, stack, "2"]):
        r = run(*args)
        # decorate-stack's line 2 holds the name: with a \r, it is no event
        assert r.returncode == 0 or ("\r" in name and args[0] == "decorate-stack"), \
            (args, r.stderr)
        assert_no_raw_controls(r)
    # the peak's text is shown, escaped (a line with a bare \r is no record:
    # \r\n ends a line, a \r alone is malformed)
    r = run("peaks", "--peak=1", mem)
    if "\r" in name:
        assert b"malformed line skipped (carriage return inside the line)" in r.stderr
        return
    esc = name.replace("\x1b", "\\x1b").replace("\x07", "\\x07").replace(
        "\r", "\\x0d").replace("\x7f", "\\x7f").replace(
        "\u009b", "\\xc2\\x9b").replace("\u0085", "\\xc2\\x85").replace(
        "\u202e", "\\xe2\\x80\\xae")
    assert esc.encode("utf-8") in r.stdout


def test_error_messages_escape_file_names(tmp_path):
    """Errors quote file names: a hostile name in a dump directory (DIR/*)."""
    d = tmp_path / "d"
    d.mkdir()
    missing = d / "\x1b]0;pwned\x07.mem"
    binary = write(d / "\x1b[2Jbin.mem", b"\x00\x01\x02\x03" * 100)
    for args in (["peaks", missing], ["peaks", binary],
                 ["memg", "--script-only", "-o", tmp_path, missing],
                 ["decorate-stack", missing, missing, "1"],
                 ["peaks", "--strict", write(d / "\x1b[31mbad.mem", "garbage\n")]):
        r = run(*args)
        assert r.returncode == 1, (args, r.stderr)
        assert_no_raw_controls(r)
        assert b"\\x1b" in r.stderr


def test_error_messages_escape_dump_text(tmp_path):
    """decorate-stack's "no call of FUNCTION (FILE)" quotes the dump's text."""
    mem = write(tmp_path / "T.mem", "1394031412.5#\x1b]0;pwned\x07.py:3:f\x1b[2J=>5\n")
    stack = write(tmp_path / "T.stack", "1394031412.0#other.py:1:g\n")
    r = run("decorate-stack", mem, stack, "1")
    assert r.returncode == 1
    assert_no_raw_controls(r)
    assert b"no call of f\\x1b[2J" in r.stderr


def test_malformed_line_warnings_are_escaped(tmp_path):
    mem = write(tmp_path / "\x1b[31mT.mem",
                "junk \x1b]0;x\x07\n" * 3 + "1394031412.5#a.py:3:f=>409600\n")
    r = run("peaks", "--peak=1", mem)
    assert r.returncode == 0
    assert_no_raw_controls(r)
    assert b"malformed line skipped" in r.stderr


def snapshot(root):
    """Every path under root, with the content of regular files."""
    seen = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            if os.path.islink(p):
                seen[p] = ("link", os.readlink(p))
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    seen[p] = ("file", f.read())
            else:
                seen[p] = ("dir", None)
    return seen


TRAVERSAL_NAMES = ["..", "...", "%2E%2E%2F%2E%2Eevil", "-o", "--output=..", "process~2",
                   "\n system('touch PWNED_NL')\n", "@outfile", "x\\", "memg"]


def test_outputs_stay_in_output_dir(tmp_path):
    """Thread names never pick an output path: only memg.* files appear in -o DIR."""
    base = tmp_path / "base"
    dumps = base / "dumps"
    out = base / "out"
    dumps.mkdir(parents=True)
    out.mkdir()
    mems = []
    for i, n in enumerate(TRAVERSAL_NAMES):
        mems.append(write(dumps / (n + ".mem"),
                          "1394031412.%d#a.py:3:f=>%d\n" % (i, 409600 + i)))
        mems.append(write(dumps / (n + ".stack"), "1394031412.%d#a.py:3:f\n" % i))
    before = snapshot(base)
    for cmd in GRAPHS:
        r = run(cmd, "--script-only", "-o", out, "--", *mems)
        assert r.returncode == 0, (cmd, r.stderr)
        assert_no_raw_controls(r)
    after = snapshot(base)
    new = sorted(set(after) - set(before))
    # the graph's legend in out, its script and data in out/GRAPH-plot
    assert all(os.path.dirname(p) == str(out) or
               os.path.dirname(os.path.dirname(p)) == str(out) and
               os.path.basename(os.path.dirname(p)) in [g + "-plot" for g in GRAPHS]
               for p in new), new
    for p in new:
        n = os.path.basename(p)
        assert n.split(".")[0].split("-")[0] in GRAPHS, n
        assert not n.startswith("."), "temporary file left behind: " + n
    assert {p: v for p, v in after.items() if p in before} == before


def planted(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    return out, victim


@pytest.mark.parametrize("target", ["memg.txt", "memg-plot/memg.gp", "memg-plot/memg-0.dat",
                                    "memg-plot/memg-peaks.dat", "memg-plot/memg-1.dat"])
def test_planted_symlink_is_replaced_not_followed(tmp_path, tutorial, target):
    out, victim = planted(tmp_path)
    (out / "memg-plot").mkdir()
    os.symlink(victim, out / target)
    r = run("memg", "--script-only", "--peak=20", "-o", out,
            os.path.join(tutorial, "Thread-7.mem"), os.path.join(tutorial, "process.mem"))
    assert r.returncode == 0, r.stderr
    assert victim.read_bytes() == b"precious\n"
    assert not os.path.islink(out / target) and os.path.isfile(out / target)


def test_planted_symlink_as_plot_folder_is_refused(tmp_path, tutorial):
    out, victim = planted(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, out / "memg-plot")
    r = run("memg", "--script-only", "-o", out, os.path.join(tutorial, "Thread-7.mem"))
    assert r.returncode == 1 and b"memg-plot' is in the way: not a directory" in r.stderr
    assert os.listdir(elsewhere) == []


def test_planted_dangling_symlink_creates_nothing_outside(tmp_path, tutorial):
    out, victim = planted(tmp_path)
    ghost = tmp_path / "ghost"
    os.symlink(ghost, out / "memg.txt")
    r = run("memg", "--script-only", "-o", out, os.path.join(tutorial, "Thread-7.mem"))
    assert r.returncode == 0, r.stderr
    assert not ghost.exists()
    assert os.path.isfile(out / "memg.txt") and not os.path.islink(out / "memg.txt")


@needs_gnuplot
def test_planted_symlink_as_graph(tmp_path, tutorial):
    out, victim = planted(tmp_path)
    os.symlink(victim, out / "memg.svg")
    r = run("memg", "--peak=20", "-o", out, os.path.join(tutorial, "Thread-7.mem"))
    assert r.returncode == 0, r.stderr
    assert victim.read_bytes() == b"precious\n"
    assert not os.path.islink(out / "memg.svg")
    assert (out / "memg.svg").read_bytes().lstrip().startswith(b"<?xml")


@needs_gnuplot
def test_newline_and_macro_in_thread_name_run_nothing(tmp_path):
    """A file name may hold a newline: it must not end the gnuplot command."""
    d = tmp_path / "d"
    d.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    names = ["x'\nsystem('touch PWNED_A')\n'", "@outfile", "`touch PWNED_B`",
             "x\\'; system(\"touch PWNED_C\"); '"]
    mems = [write(d / (n + ".mem"), "1394031412.%d#a.py:3:f=>409600\n" % i)
            for i, n in enumerate(names)]
    for cmd in ("memg", "interleave"):
        r = run(cmd, "-o", out, *mems, cwd=tmp_path)
        assert r.returncode == 0, (cmd, r.stderr)
        r = run(cmd, "--script-only", "-o", out, *mems, cwd=tmp_path)
        assert r.returncode == 0, (cmd, r.stderr)
        subprocess.run(["gnuplot", cmd + ".gp"], cwd=out / (cmd + "-plot"),
                       capture_output=True, timeout=60)
    for root in (tmp_path, d, out):
        assert not [n for n in os.listdir(root) if n.startswith("PWNED")], os.listdir(root)


def test_json_time_is_a_json_number(tmp_path):
    """Regression: TIME "05" (no leading-zero rule in dumps) made --json invalid."""
    mem = write(tmp_path / "T.mem", "05#a.py:1:f=>999999\n007.5#a.py:2:g=>-999999\n"
                "0.25#a.py:3:h=>999999\n12.#a.py:4:i=>-999999\n")
    r = run("peaks", "--json", "--peak=1", "--peak_delta_time=0", mem)
    assert r.returncode == 0, r.stderr
    got = [p["time"] for p in json.loads(r.stdout)]
    assert sorted(got) == [0.25, 5, 7.5, 12.0]


HOSTILE_CONTENT = {
    "nul-bytes": b"1.5#a.py:1:f=>5\n\x00\x00\x00\n2.5#a.py:2:\x00=>6\n",
    "huge-numbers": b"99999999999999999999#a:1:f=>1\n1#a:99999999999:f=>1\n"
                    b"1#a:1:f=>-999999999999999999\n1#a:1:f=>9999999999999999999999\n",
    "only-separators": b"#\n=>\n::\n#::=>\n=>=>=>\n:::::::\n##\n",
    "overlong": b"1#a:1:f=>1\n" + b"1#" + b"a" * 200000 + b":1:f=>1\n2#a:1:f=>2",
    "deep-stack": b"".join(b" " * i + b"1.%d#a.py:%d:f\n" % (i, i) for i in range(3000)),
    "crlf-mess": b"\r\r\n\r1#a:1:f=>1\r\n\r\n",
    "invalid-utf8": b"1#\xff\xfe\xc0\xaf.py:1:\xed\xa0\x80=>409600\n",
    # empty FILE and FUNCTION fields, in decorate-stack's subtree too (found by
    # fuzz_decorate: UBSan flagged the empty first copy into the arena)
    "empty-fields": b"0#:1:\n 1#:2:g\n1#:2:g=>5\n2#:1:=>9\n",
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_CONTENT))
def test_hostile_content_never_crashes(tmp_path, kind):
    d = tmp_path / "d"
    d.mkdir()
    data = HOSTILE_CONTENT[kind]
    mem = write(d / "T.mem", data)
    stack = write(d / "T.stack", data)
    gz = write(d / "G.mem.gz", gzip.compress(data))
    trunc = write(d / "H.mem.gz", gzip.compress(data)[:-7])
    for args in (["peaks", "--peak=0", mem, gz, trunc], ["peaks", "--json", "--peak=0", mem, gz],
                 ["memg", "--script-only", "--peak=0", "-o", tmp_path, mem, gz],
                 ["memh", "--script-only", "-o", tmp_path, mem],
                 ["nesting", "--script-only", "-o", tmp_path, stack],
                 ["interleave", "--script-only", "-o", tmp_path, mem, gz],
                 ["decorate-stack", mem, stack, "1"], ["decorate-stack", mem, stack, "3"],
                 ["--no_time", "peaks", "--peak=0", mem]):
        r = run(*args)
        assert_exit_ok_or_error(r)
        assert_no_raw_controls(r)
        if args[0] == "peaks" and "--json" in args and r.returncode == 0:
            json.loads(r.stdout.decode("utf-8"))


# bidirectional controls reorder what a terminal shows ("Trojan source")
BIDI_UTF8 = re.compile(b"\xd8\x9c|\xe2\x80[\x8e\x8f\xaa-\xae]|\xe2\x81[\xa6-\xa9]")
TERM_NAMES = ["\x1b]0;pwned\x07", "\u009b31m", "rlo\u202egnp.exe", "\x1b[2J\u2066x"]


def assert_terminal_safe(r):
    assert_no_raw_controls(r)
    for name, data in (("stdout", r.stdout), ("stderr", r.stderr)):
        assert not BIDI_UTF8.search(data), "%s holds a raw bidi control: %r" % (name, data)


def hostile_accounting(tmp_path, name):
    """The accounting fixture with the thread 'leaker' renamed NAME, NAME in
    summary.json, and NAME as a snapshot's label and site."""
    src = os.path.join(os.path.dirname(__file__), "fixtures", "accounting")
    d = tmp_path / "acc"
    d.mkdir()
    for f in ("summary.txt", "snapshot-1-before", "snapshot-2-final"):
        text = open(os.path.join(src, f), encoding="utf-8").read()
        text = text.replace("leaker", name).replace("/app/a.py:10:load", name + ".py:1:" + name)
        text = text.replace("# label: before", "# label: " + name)
        write(d / f, text)
    write(d / "summary.json", '{\n  "format": 1,\n  "process": {"peak_bytes": 5},\n'
          '  "note": "%s"\n}\n' % name)
    return d


@pytest.mark.parametrize("name", TERM_NAMES, ids=["osc", "c1-csi", "rlo", "clear-lri"])
def test_accounting_and_folded_output_escape_dump_text(tmp_path, name):
    """summary, summary --json, hist --no-graph, top, diff and folded print
    names from the run: no raw control, C1 or bidi control reaches the terminal,
    and summary --json stays JSON with the same text."""
    d = hostile_accounting(tmp_path, name)
    for args in (["summary", d], ["hist", "--no-graph", d],
                 ["top", d / "snapshot-1-before"],
                 ["diff", "--base", d / "snapshot-1-before", d / "snapshot-2-final"]):
        r = run(*args)
        assert r.returncode == 0, (args, r.stderr)
        assert_terminal_safe(r)
        # a snapshot line with a C0 control is skipped as malformed; diff
        # lists changed sites only
        if args[0] in ("summary", "hist") or (args[0] == "top" and name.isprintable()):
            assert b"\\x" in r.stdout, (args, r.stdout)
    r = run("summary", "--json", d)
    assert r.returncode == 0, r.stderr
    assert_terminal_safe(r)
    assert json.loads(r.stdout)["note"] == name
    dumps, mem, stack, proc = hostile_dir(tmp_path, name)
    r = run("folded", "--metric", "delta", dumps)
    assert r.returncode == 0, r.stderr
    assert_terminal_safe(r)
    assert b"?" in r.stdout


@needs_gnuplot
def test_invalid_utf8_thread_name_keeps_the_svg_readable(tmp_path):
    """A dump renamed by hand to invalid UTF-8 (the recorder escapes names):
    its title reaches gnuplot as '?', so memg.svg stays well-formed XML."""
    import xml.dom.minidom
    d = tmp_path / "dumps"
    d.mkdir()
    name = b"we\xffird <t>&\xe2\x80\xae"
    with open(os.path.join(os.fsencode(str(d)), name + b".mem"), "wb") as f:
        f.write(b"1.0#a.py:1:f=>300000\n2.0#a.py:1:f=>-300000\n")
    out = tmp_path / "out"
    r = run("memg", "-o", out, d)
    assert r.returncode == 0, r.stderr
    doc = xml.dom.minidom.parse(str(out / "memg.svg"))
    texts = [t.firstChild.data for t in doc.getElementsByTagName("text") if t.firstChild]
    assert "we?ird <t>&???" in texts, texts


def test_open_at_start_of_any_size_ends(tmp_path):
    """runinfo.json's open_at_start (the calls open where an export's files
    begin) is counted, never stepped through one call at a time: a count no
    .mem could hold ends as soon as the .mem does."""
    (tmp_path / "T.stack").write_text(" 1.000000#/a.py:5:f\n 1.000200#/a.py:5:f\n")
    (tmp_path / "T.mem").write_text("0.900000#/a.py:9:inner=>1\n1.000100#/a.py:6:f=>10\n"
                                    "1.000300#/a.py:6:f=>20\n1.000400#/a.py:2:outer=>5\n")
    info = {"format": 1, "pid": 7, "threads": [{
        "name": "T", "native_id": 8, "ident": 9, "mem": "T.mem", "stack": "T.stack",
        "open_at_start": 2 ** 63 - 1}]}
    (tmp_path / "runinfo.json").write_text(json.dumps(info))
    for args in (("folded", tmp_path), ("flamegraph", "-o", tmp_path / "fg", tmp_path),
                 ("report", "-o", tmp_path / "r.html", tmp_path),
                 ("decorate-stack", tmp_path / "T.mem", tmp_path / "T.stack", "2")):
        r = run(*args)  # its timeout fails a command stepping through the count
        assert_exit_ok_or_error(r)
    # with the memory held there (a newer export's): held memory neither steps
    # through the count nor keeps a slot for each of those calls
    info["kept_from"] = 0.95
    info["threads"][0]["held_at_start"] = [1, 2]
    (tmp_path / "runinfo.json").write_text(json.dumps(info))
    for args in (("memg", "--held", "--script-only", "-o", tmp_path / "h", tmp_path),
                 ("threads", tmp_path)):
        assert_exit_ok_or_error(run(*args))


@pytest.mark.parametrize("args", [
    ["memg", "-o", "", "--script-only"], ["memh", "-o", "", "--script-only"],
    ["nesting", "-o", "", "--script-only"], ["interleave", "-o", "", "--script-only"],
    ["export", "-o", ""], ["report", "-o", ""], ["flamegraph", "-o", ""],
])
def test_empty_output_path_is_a_usage_error(tmp_path, args):
    """An empty -o names nothing: a usage error naming the option, before the
    mkdir -p helpers read past the end of the empty string (an ASan
    heap-buffer-overflow) or a rename reports a temporary file."""
    run_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures",
                           "capture-v2-plain")
    r = run(*(args + [run_dir]), cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert b"option '--output' expects a " in r.stderr, r.stderr[-2000:]
    assert b"got an empty string" in r.stderr
    assert b"AddressSanitizer" not in r.stderr and b"runtime error" not in r.stderr
    assert b".tmp." not in r.stderr
    assert os.listdir(tmp_path) == []


def test_empty_speedscope_path_is_a_usage_error(tmp_path):
    acct = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "accounting")
    r = run("export", "--speedscope", "", acct, cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert b"option '--speedscope' expects a FILE, got an empty string" in r.stderr
    assert os.listdir(tmp_path) == []


def _plant_fifo(tmp_path, fixture, name):
    """A copy of FIXTURE (a run directory) with a FIFO, that nothing writes to,
    in place of (or beside) NAME."""
    import shutil
    d = tmp_path / "run"
    shutil.copytree(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", fixture), d)
    p = d / name
    if p.exists():
        p.unlink()
    os.mkfifo(p)
    return d


@pytest.mark.parametrize("fixture,name,commands", [
    ("capture-v2-plain", "runinfo.json", [["peaks"], ["folded"], ["threads"], ["live", "--once"],
                                          ["memg", "--script-only", "-o", "out"]]),
    ("capture-v2-plain", "marks.txt", [["peaks"], ["folded"], ["memg", "--script-only", "-o", "out"]]),
    ("capture-v2-plain", "gc.txt", [["report", "-o", "r.html"]]),
    ("capture-v2-plain", "capture.tg", [["live", "--once"]]),
    ("flamerun", "worker 1.mem", [["peaks"], ["memg", "--script-only", "-o", "out"]]),
    ("flamerun", "worker 1.stack", [["folded", "--metric", "delta"],
                                    ["nesting", "--script-only", "-o", "out"]]),
    ("flamerun", "process.mem", [["memg", "--script-only", "-o", "out"]]),
    ("flamerun", "snapshot-1-final", [["folded"]]),
    ("aggregate-v2", "aggregate.tga", [["live", "--once"], ["folded"]]),
    ("aggregate-v2", "runinfo.json", [["live", "--once"], ["folded"], ["summary"],
                                      ["report", "-o", "r.html"]]),
    ("capture-v2-plain", "marks.txt", [["export", "-o", "exp"]]),
])
def test_fifo_in_a_run_directory_never_hangs(tmp_path, fixture, name, commands):
    """A FIFO found in a run directory (a dump, runinfo.json, marks.txt, gc.txt,
    a snapshot, the capture) is not waited on: opening it must not block until
    someone writes, the command ends with a result or an error."""
    d = _plant_fifo(tmp_path, fixture, name)
    for cmd in commands:
        try:
            r = subprocess.run([CLI] + cmd + [str(d)], cwd=tmp_path, capture_output=True,
                               timeout=20, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            pytest.fail("%s hangs on a FIFO as %s/%s" % (" ".join(cmd), fixture, name))
        assert_exit_ok_or_error(r)


def test_fifo_as_runinfo_of_a_run_in_a_base_never_hangs(tmp_path):
    """A base of runs (BASE/<pid>/) is resolved to its latest run by reading
    each run's runinfo.json: a FIFO there must not be waited on."""
    import shutil
    fx = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "capture-v2-plain")
    base = tmp_path / "base"
    shutil.copytree(fx, base / "100")
    shutil.copytree(fx, base / "200")
    os.unlink(base / "200" / "runinfo.json")
    os.mkfifo(base / "200" / "runinfo.json")
    try:
        r = subprocess.run([CLI, "peaks", str(base)], capture_output=True, timeout=20,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail("peaks BASE hangs on a FIFO as a run's runinfo.json")
    assert_exit_ok_or_error(r)

@pytest.mark.parametrize("kind", ["directory", "dangling link"])
@pytest.mark.parametrize("cmd", [["peaks"], ["folded"], ["report", "-o", "r.html"], ["export", "-o", "exp"],
                                 ["memg", "--script-only", "-o", "out"]])
def test_a_broken_capture_tg_is_named_not_denied(tmp_path, kind, cmd):
    """A run directory whose capture.tg is a directory or a dangling symbolic
    link: the error names DIR/capture.tg and what is wrong with it, rather than
    saying there is no capture.tg (and no .mem, no .stack files: 'the run needs
    stacks (threadgraph run --stack ...)', 'not a run directory')."""
    import shutil
    d = tmp_path / "run"
    shutil.copytree(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures",
                                 "capture-v2-plain"), d)
    os.unlink(d / "capture.tg")
    if kind == "directory":
        os.mkdir(d / "capture.tg")
    else:
        os.symlink(tmp_path / "gone" / "capture.tg", d / "capture.tg")
    r = run(*(cmd + [d]), cwd=tmp_path)
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    assert ("'%s'" % (d / "capture.tg")).encode() in r.stderr, r.stderr[-2000:]
    assert b"no capture.tg" not in r.stderr and b"--stack" not in r.stderr
    assert b"not a run directory" not in r.stderr
