"""max_size: a busy multi-threaded program whose capture rotates in segments.

The run's files stay within the limit, the commands read what is kept (and say
which part of the run it covers), the kept records are the newest ones (each
worker thread's records are the tail of the same program's full capture), and a
run killed with SIGKILL is still readable.
"""
import json
import os
import re
import signal
import subprocess
import sys

import pytest

from tgtest import env_with_package, only_dir, run_scenario

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "cli"))
from clisupport import CLI  # noqa: E402

from threadgraph._options import MAX_SIZE_MIN, parse_size  # noqa: E402

LIMIT = MAX_SIZE_MIN  # the smallest limit: the most rotations for the least work
TIMEOUT = 120  # seconds; only a hang gets near it

# Three workers whose calls (not their times or deltas) are the same on every run:
# daemon threads, since a thread that is not one counts, as it starts, the other
# threads' locks still held (threading._maintain_shutdown_locks on 3.9-3.12), a
# number of calls that depends on which workers are still running.
BUSY = """
import sys, threading
import threadgraph

def leaf(i):
    return [i] * (i % 7)

def mid(i):
    return leaf(i)

def work(n):
    keep = []
    for i in range(n):
        keep.append(mid(i))
        if len(keep) > 100:
            keep.clear()

p = threadgraph.ProcessProfile(default_log_path=OUT)
p.trackStack()
p.enable()
ts = [threading.Thread(target=work, args=(ROUNDS,), name="w%d" % k, daemon=True)
      for k in range(3)]
for t in ts:
    t.start()
for t in ts:
    t.join()
p.disable()
"""
ROUNDS = 20000  # about 1.5 MB of full capture: several times the limit


def cli(*args):
    return subprocess.run([CLI] + [str(a) for a in args], capture_output=True, text=True,
                          errors="replace", timeout=TIMEOUT)


def capture_files(run):
    return sorted(f for f in os.listdir(run) if f.startswith("capture"))


def calls(export_dir, thread):
    """THREAD's .stack records without their times: (indent, site, line, func)."""
    out = []
    with open(os.path.join(export_dir, thread + ".stack"), encoding="utf-8",
              errors="surrogateescape") as f:
        for line in f:
            body = line.rstrip("\n")
            indent = len(body) - len(body.lstrip(" "))
            rest = body.lstrip(" ").split("#", 1)[-1]
            out.append((indent, rest))
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("maxsize")
    code = BUSY.replace("ROUNDS", str(ROUNDS))
    # the same script file for both: the records name it
    run_scenario(tmp, code.replace("OUT", "'full'"))
    run_scenario(tmp, code.replace("OUT", "'bounded', max_size=%d" % LIMIT))
    return only_dir(tmp / "full"), only_dir(tmp / "bounded")


def test_files_within_the_limit(runs):
    full, bounded = runs
    files = capture_files(bounded)
    assert files and all(f.startswith("capture-") and f.endswith(".tg") for f in files)
    assert "capture-000001.tg" not in files  # the oldest were dropped
    total = sum(os.path.getsize(os.path.join(bounded, f)) for f in files)
    assert total <= LIMIT
    assert os.path.getsize(os.path.join(full, "capture.tg")) > 3 * LIMIT


def test_newest_records_kept(runs, tmp_path):
    full, bounded = runs
    for run, out in ((full, tmp_path / "f"), (bounded, tmp_path / "b")):
        r = cli("export", "-o", out, run)
        assert r.returncode == 0, r.stderr
    # a worker that ended before the segments kept is gone with them
    kept = [w for w in ("w0", "w1", "w2") if os.path.exists(tmp_path / "b" / (w + ".stack"))]
    assert kept
    for w in kept:
        a, b = calls(tmp_path / "f", w), calls(tmp_path / "b", w)
        assert 0 < len(b) < len(a)
        assert b == a[-len(b):]


def test_commands_read_it_and_say_what_it_covers(runs, tmp_path):
    _full, bounded = runs
    for args in (("peaks", "--peak=0", bounded),
                 ("memg", "-o", tmp_path / "memg", bounded),
                 ("report", "-o", tmp_path / "r.html", bounded),
                 ("folded", "--metric", "delta", bounded)):
        r = cli(*args)
        assert r.returncode == 0, (args, r.stderr)
        assert "capture of limited size: segments" in r.stderr, (args, r.stderr)
        assert "dropped; the segments kept were written from" in r.stderr
    assert os.path.getsize(tmp_path / "r.html") > 0


def test_report_page_says_what_it_covers(runs, tmp_path):
    """The report is a page read without the terminal's warning: it says
    itself which part of the run its graphs and peaks show (the warning's
    words), and a full run's page says nothing of the kind."""
    full, bounded = runs
    r = cli("report", "-o", tmp_path / "b.html", bounded)
    assert r.returncode == 0, r.stderr
    kept = re.search(r"warning: (a capture of limited size: segments .*)", r.stderr).group(1)
    page = (tmp_path / "b.html").read_text()
    assert ('<p class="note">Part of the run only: %s. The memory graphs, the peaks and '
            'the flame graphs of recorded calls (delta, time) show that part; the '
            'accounting, when on, covers the whole run.</p>' % kept) in page, page[:3000]
    # its text export: the same note (and warning)
    r = cli("export", "-o", tmp_path / "text", bounded)
    assert r.returncode == 0, r.stderr
    r = cli("report", "-o", tmp_path / "t.html", tmp_path / "text")
    assert r.returncode == 0, r.stderr
    assert "warning: %s (the dumps are its export)" % kept in r.stderr, r.stderr
    assert "<p class=\"note\">Part of the run only: %s. " % kept in (tmp_path / "t.html").read_text()
    r = cli("report", "-o", tmp_path / "f.html", full)
    assert r.returncode == 0, r.stderr
    assert "Part of the run only" not in (tmp_path / "f.html").read_text()


def test_flame_graph_title_says_what_it_covers(runs, tmp_path):
    """The flame graph of the recorded calls, a file of its own, says in its
    default title which part of the run they cover (the warning's times); a
    full run's title does not."""
    full, bounded = runs
    r = cli("flamegraph", "--metric", "delta", "-o", tmp_path / "b.svg", bounded)
    assert r.returncode == 0, r.stderr
    m = re.search(r"written from ([\d.]+) s to ([\d.]+) s after its start", r.stderr)
    assert m, r.stderr
    svg = (tmp_path / "b.svg").read_text()
    assert "%s (%s-%s s of the run kept)</text>" % (bounded, m.group(1), m.group(2)) in svg
    # its text export (with the run's stacks): the same part said
    r = cli("export", "-o", tmp_path / "text", bounded)
    assert r.returncode == 0, r.stderr
    r = cli("flamegraph", "--metric", "delta", "-o", tmp_path / "t.svg", tmp_path / "text")
    assert r.returncode == 0, r.stderr
    assert "(%s-%s s of the run kept)</text>" % (m.group(1), m.group(2)) in \
        (tmp_path / "t.svg").read_text()
    r = cli("flamegraph", "--metric", "delta", "-o", tmp_path / "f.svg", full)
    assert r.returncode == 0, r.stderr
    assert "of the run kept" not in (tmp_path / "f.svg").read_text()


def axis_zero(gp_path):
    """The t0 of a gnuplot script's elapsed axis (timeaxis.c)."""
    with open(gp_path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("t0 = "):
                return float(line.split()[2])
    raise AssertionError("no elapsed axis in %s" % gp_path)


def test_graphs_count_time_from_the_runs_start(runs, tmp_path):
    """The graphs' "Time since start" counts from the run's start, not from
    the first kept record: the kept range reads as the warning gives it."""
    _full, bounded = runs
    # the capture's time base (docs/formats.md: i64 start_us at byte 16 of a
    # segment's header), the same in every segment
    with open(os.path.join(bounded, capture_files(bounded)[0]), "rb") as f:
        start = int.from_bytes(f.read(24)[16:24], "little", signed=True) / 1e6
    for args, gp in ((("memg",), "memg-plot/memg.gp"),
                     (("memg", "--held"), "memg-held-plot/memg-held.gp"),
                     (("nesting",), "nesting-plot/nesting.gp")):
        out = tmp_path / args[-1].strip("-")
        r = cli(*args, "--script-only", "-o", out, bounded)
        assert r.returncode == 0, (args, r.stderr)
        kept_from = float(r.stderr.split("were written from ")[1].split(" s")[0])
        assert kept_from > 0, r.stderr
        assert abs(axis_zero(out / gp) - start) < 2e-6, (args, start)
    # a run that kept everything still counts from its first event
    r = cli("memg", "--script-only", "-o", tmp_path / "full", _full)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(_full, "capture.tg"), "rb") as f:
        full_start = int.from_bytes(f.read(24)[16:24], "little", signed=True) / 1e6
    assert axis_zero(tmp_path / "full" / "memg-plot" / "memg.gp") > full_start


def test_export_says_what_it_covers_and_keeps_the_time_axis(runs, tmp_path):
    """The text export of the segments kept stands for the capture: the
    commands reading it said nothing of the part of the run it covers, and its
    graphs counted time from its first record (0 s) where the capture's count
    from the run's start. Its runinfo.json now gives the segments kept and the
    run's start and end: the same warning (saying the dumps are the export),
    the same time axis, the same gnuplot script."""
    _full, bounded = runs
    out = tmp_path / "text"
    r = cli("export", "-o", out, bounded)
    assert r.returncode == 0, r.stderr
    kept = re.search(r"warning: (a capture of limited size: segments .*)", r.stderr).group(1)
    with open(out / "runinfo.json") as f:
        info = json.load(f)
    first, last = (int(x) for x in re.search(r"segments (\d+)-(\d+) kept", kept).groups())
    assert info["segments_kept"] == [first, last]
    assert info["start_time"] < info["kept_from"] < info["end_time"]
    for args in (("peaks", "--peak=0"), ("memg", "--script-only", "-o", tmp_path / "g")):
        r = cli(*args, out)
        assert r.returncode == 0, (args, r.stderr)
        assert "warning: %s (the dumps are its export)" % kept in r.stderr, (args, r.stderr)
    r = cli("memg", "--script-only", "-o", tmp_path / "c", bounded)
    assert r.returncode == 0, r.stderr
    with open(tmp_path / "c" / "memg-plot" / "memg.gp") as a, \
            open(tmp_path / "g" / "memg-plot" / "memg.gp") as b:
        assert a.read() == b.read()
    # an export without those keys (an older threadgraph's) is read as before
    for k in ("segments_kept", "start_time", "end_time"):
        del info[k]
    with open(out / "runinfo.json", "w") as f:
        json.dump(info, f)
    r = cli("peaks", "--peak=0", out)
    assert r.returncode == 0 and "capture of limited size" not in r.stderr, r.stderr


def test_folded_pairs_the_segments_exactly(runs):
    """The calls open where the kept segments start (their head's state) return
    in the segments kept: those returns are not taken for the kept calls', so
    an intact capture folds, in both metrics, with no pairing warning."""
    _full, bounded = runs
    for metric in ("delta", "time"):
        r = cli("folded", "--metric", metric, bounded)
        assert r.returncode == 0, (metric, r.stderr)
        assert "paired with a return of another function" not in r.stderr, (metric, r.stderr)
        assert "left over after the last call" not in r.stderr, (metric, r.stderr)
        # every worker's kept calls are in the tree, under the worker
        assert any(line.startswith("w") for line in r.stdout.splitlines()), r.stdout


def test_decorate_a_call_begun_before_the_kept_segments(runs, tmp_path):
    """decorate-stack needs the whole call: one begun in a segment no longer
    kept (a worker's work(), open from its start) is a clear error, and one
    begun inside them (its last leaf()) is decorated."""
    _full, bounded = runs
    # every return that changed memory, with its record number (mem_line);
    # work()'s frees what its list still held: never 0
    r = cli("peaks", "--json", "--peak=0", "--peak_delta_time=0", "--peak_delta_value=0",
            bounded)
    assert r.returncode == 0, r.stderr
    peaks = json.loads(r.stdout)
    work = [p for p in peaks if p["function"] == "work"]
    assert work and all(p["call_start"] is None for p in work)
    w = work[-1]["thread"]
    leaf = [p for p in peaks if p["function"] == "leaf" and p["thread"] == w]
    assert leaf and leaf[-1]["call_start"] is not None
    r = cli("decorate-stack", bounded, w, work[-1]["mem_line"])
    assert r.returncode == 1, r.stderr
    assert "began before the records kept" in r.stderr, r.stderr
    r = cli("decorate-stack", bounded, w, leaf[-1]["mem_line"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("leaf@"), r.stdout


def test_decorate_an_event_of_the_dropped_segments(runs):
    """A record number from the segments dropped is not "no event 1: thread
    'w1' has N returns" (it had them, they were dropped): the error says so and
    which returns are kept, the last being the thread's last return (as many
    as the full run's, the program being the same); past the last, the count
    says which are kept."""
    full, bounded = runs
    # a worker whose work() began before the kept segments: its first records
    # were dropped
    r = cli("peaks", "--json", "--peak=0", "--peak_delta_time=0", "--peak_delta_value=0",
            bounded)
    assert r.returncode == 0, r.stderr
    work = [p for p in json.loads(r.stdout)
            if p["function"] == "work" and p["call_start"] is None]
    assert work
    w = work[-1]["thread"]
    r = cli("decorate-stack", full, w, 10 ** 9)
    assert r.returncode == 1
    total = int(re.search(r"has (\d+) returns", r.stderr).group(1))
    r = cli("decorate-stack", bounded, w, 1)
    assert r.returncode == 1
    m = re.search(r"error: no event 1 in the records kept: it was in the segments dropped "
                  r"\(.*\); thread '%s' has its returns (\d+)-(\d+) kept" % w, r.stderr)
    assert m, r.stderr
    first, last = int(m.group(1)), int(m.group(2))
    assert 1 < first < last == total
    r = cli("decorate-stack", bounded, w, first - 1)
    assert r.returncode == 1 and "in the segments dropped" in r.stderr, r.stderr
    r = cli("decorate-stack", bounded, w, first)
    assert "no event" not in r.stderr, r.stderr
    r = cli("decorate-stack", bounded, w, last + 1)
    assert r.returncode == 1
    assert "no event %d: thread '%s' has %d returns (%d-%d kept)" % (
        last + 1, w, last, first, last) in r.stderr, r.stderr


def test_older_segment_cut_short_is_an_error(runs, tmp_path):
    """Only the newest segment may be cut short: an older one cut inside a
    chunk (a partial copy) is refused by every command, naming the file and
    where it ends, rather than read as a shorter run."""
    import shutil
    import struct
    _full, bounded = runs
    copy = tmp_path / "c"
    shutil.copytree(bounded, copy)
    files = capture_files(copy)
    assert len(files) >= 3
    middle = copy / files[len(files) // 2]
    data = middle.read_bytes()
    pos = 40  # the header; then chunks of a 12-byte header and LEN bytes
    while True:
        length = struct.unpack_from("<I", data, pos + 8)[0]
        if pos + 12 + length > len(data) // 2:
            break
        pos += 12 + length
    cut = pos + 12 + length // 2  # inside the chunk that passes the file's middle
    middle.write_bytes(data[:cut])
    for args in (("export", "-o", tmp_path / "x", copy),
                 ("folded", "--metric", "delta", copy),
                 ("peaks", "--peak=0", copy)):
        r = cli(*args)
        assert r.returncode != 0, (args, r.stderr)
        assert "'%s' is cut short: it ends at byte %d, inside the chunk at byte %d" % (
            middle, cut, pos) in r.stderr, (args, r.stderr)
        assert "not the newest segment" in r.stderr


def test_segments_before_a_missing_one_are_said_to_be_left_out(runs, tmp_path):
    """A segment missing in the middle (deleted, not copied): the commands read
    the newest run of consecutive segments, as docs/formats.md says, and now
    say that the older ones there were left out, and which one is missing,
    instead of only "dropped" (by the recorder)."""
    import shutil
    _full, bounded = runs
    copy = tmp_path / "g"
    shutil.copytree(bounded, copy)
    files = capture_files(copy)
    assert len(files) >= 3
    nos = [int(f[len("capture-"):-len(".tg")]) for f in files]
    os.remove(str(copy / files[-2]))
    r = cli("peaks", "--peak=0", copy)
    assert r.returncode == 0, r.stderr
    older = len(files) - 2
    which = "%d" % nos[-3] if older == 1 else "%d to %d" % (nos[0], nos[-3])
    assert ("%d older segment%s (%s) left out: segment %d is missing"
            % (older, "" if older == 1 else "s", which, nos[-2])) in r.stderr, r.stderr


def test_newest_segment_without_its_header_is_left_out(runs, tmp_path):
    """A recorder killed as it created a segment (before it wrote the header):
    the segments before it are read, and the one left out is named."""
    import shutil
    _full, bounded = runs
    for size in (0, 20):
        copy = tmp_path / ("c%d" % size)
        shutil.copytree(bounded, copy)
        last = max(capture_files(copy))
        no = int(last[len("capture-"):-len(".tg")]) + 1
        with open(os.path.join(copy, last), "rb") as f:
            head = f.read(size)
        (copy / ("capture-%06d.tg" % no)).write_bytes(head)
        r = cli("export", "-o", tmp_path / ("x%d" % size), copy)
        assert r.returncode == 0, r.stderr
        assert "segment %d of" % no in r.stderr and "left out" in r.stderr, r.stderr
        r0 = cli("export", "-o", tmp_path / ("y%d" % size), bounded)
        for name in os.listdir(tmp_path / ("y%d" % size)):
            assert (tmp_path / ("x%d" % size) / name).read_bytes() == \
                (tmp_path / ("y%d" % size) / name).read_bytes()
        assert r0.returncode == 0


KILLED = """
import sys, threading
import threadgraph

def work(n):
    keep = []
    i = 0
    while True:
        keep.append([i] * (i % 5))
        if len(keep) > 100:
            keep.clear()
        i += 1
        if i == n:
            sys.stdout.write("ready\\n")
            sys.stdout.flush()

p = threadgraph.ProcessProfile(default_log_path="out", max_size=LIMIT)
p.enable()
t = threading.Thread(target=work, args=(50000,), name="busy")
t.start()
t.join()
"""


def test_sigkill_leaves_it_readable(tmp_path):
    script = tmp_path / "killed.py"
    script.write_text(KILLED.replace("LIMIT", str(LIMIT)))
    proc = subprocess.Popen([sys.executable, str(script)], cwd=str(tmp_path),
                            env=env_with_package(keep_cli=True), stdout=subprocess.PIPE,
                            universal_newlines=True)
    try:
        assert proc.stdout.readline() == "ready\n"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=TIMEOUT)
        proc.stdout.close()
    run = only_dir(tmp_path / "out")
    # a segment being started is .capture-N.tg.part until its head is written
    assert all(not f.endswith(".tg") or f in capture_files(run) for f in os.listdir(run))
    total = sum(os.path.getsize(os.path.join(run, f)) for f in os.listdir(run)
                if "capture" in f)
    assert total <= LIMIT
    r = cli("export", "-o", tmp_path / "x", run)
    assert r.returncode == 0, r.stderr
    assert "no end chunk" in r.stderr or "cut short" in r.stderr
    assert os.path.getsize(tmp_path / "x" / "busy.mem") > 0
    # live does not take it for a run still recording
    r = cli("live", "--once", run)
    assert r.returncode == 0, r.stderr
    assert "not running, no end record, latest record" in r.stdout, r.stdout


def test_sizes():
    assert parse_size("10M") == 10 << 20
    assert parse_size("2G") == 2 << 30
    assert parse_size("512k") == 512 << 10
    assert parse_size("1.5MiB") == 3 << 19
    assert parse_size(1 << 20) == 1 << 20
    assert parse_size(None) is None and parse_size(0) is None and parse_size("0") is None
    for bad in ("10X", "M", "-1M", "1e6", True, "1K"):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_max_size_needs_binary(tmp_path):
    import threadgraph
    with pytest.raises(ValueError, match="format='binary'"):
        threadgraph.ProcessProfile(format="both", max_size="1M")


def test_run_option(tmp_path):
    script = tmp_path / "tiny.py"
    script.write_text("print(sum(range(10)))\n")
    env = env_with_package(keep_cli=True)
    r = subprocess.run([sys.executable, "-m", "threadgraph", "run", "-o", str(tmp_path / "o"),
                        "--max-size", "1M", str(script)], capture_output=True, text=True,
                       env=env, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "45\n"
    assert capture_files(only_dir(tmp_path / "o")) == ["capture-000001.tg"]
    r = subprocess.run([sys.executable, "-m", "threadgraph", "run", "--max-size", "10Q",
                        str(script)], capture_output=True, text=True, env=env,
                       timeout=TIMEOUT)
    assert r.returncode == 2 and "--max-size" in r.stderr


def test_run_says_its_top_peaks_are_of_the_part_kept(tmp_path):
    """threadgraph run's top peaks of a run whose older segments were dropped
    are those of the part kept: it says so, with the commands' warning; a run
    that kept everything prints them as before."""
    script = tmp_path / "busy.py"
    script.write_text(BUSY.replace("ROUNDS", str(ROUNDS))
                      .replace("p = threadgraph.ProcessProfile(default_log_path=OUT)\n", "")
                      .replace("p.trackStack()\np.enable()\n", "")
                      .replace("p.disable()\n", ""))
    env = env_with_package(keep_cli=True)
    for opt, part in ((["--max-size", str(LIMIT)], True), ([], False)):
        out = tmp_path / ("b" if part else "f")
        r = subprocess.run([sys.executable, "-m", "threadgraph", "run", "-o", str(out)] + opt
                           + [str(script)], capture_output=True, text=True, env=env,
                           timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        if part:
            assert "threadgraph: top peaks of the part of the run kept (thread, function, " \
                   "delta):\n  (a capture of limited size: segments " in r.stderr, r.stderr
            assert "dropped; the segments kept were written from" in r.stderr
        else:
            assert "threadgraph: top peaks (thread, function, delta):\n" in r.stderr, r.stderr
            assert "capture of limited size" not in r.stderr


# A worker whose outermost call never returns while recorded: its memory is the
# returned calls inside it.  Its first phase is in the segments dropped, the
# second starts there and returns in the ones kept; the thread then waits,
# still inside serve().
LEAKER = """
import threading
import threadgraph

def churn(i):
    return [i] * (i % 5)

def job(keep, noise):
    keep.append(bytearray(JOB))
    for i in range(noise):
        churn(i)

def phase(keep, jobs, noise):
    for _ in range(jobs):
        job(keep, noise)

def serve(ready, stop):
    keep = []
    phase(keep, 100, 1000)  # all in the segments dropped
    phase(keep, 60, 1000)   # starts in them, returns in the segments kept
    ready.set()
    stop.wait()

p = threadgraph.ProcessProfile(default_log_path=OUT)
p.trackStack()
p.enable()
ready, stop = threading.Event(), threading.Event()
t = threading.Thread(target=serve, args=(ready, stop), name="leaker")
t.start()
ready.wait()
p.disable()
stop.set()
t.join()
"""
JOB = 10240  # bytes each job keeps
KEPT_TOLERANCE = 0.02  # the same program's two runs: allocations differ by little


def live_now(run, thread):
    """THREAD's NOW in `live --once` of RUN, in bytes (to the view's rounding)."""
    r = cli("live", "--once", run)
    assert r.returncode == 0, r.stderr
    for line in r.stdout.splitlines():
        f = line[1:].split()
        if f and f[0] == thread:
            v, unit = float(f[1]), f[2]
            return v * {"B": 1, "KB": 1024, "MB": 1 << 20}[unit]
    raise AssertionError(r.stdout)


def held_at_peak(run, thread, out):
    """THREAD's held bytes at the largest peak of `memg --held` of RUN."""
    r = cli("memg", "--held", "-o", out, run)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(out, "memg-held.txt"), encoding="utf-8") as f:
        for line in f:
            cols = line.split("\t")
            if cols[0] == thread:
                return int(cols[1])
    raise AssertionError("no %s in %s" % (thread, out))


def test_held_memory_of_a_call_never_returning(tmp_path):
    """A segment's head carries the thread's memory as live counts it from the
    whole run, by depth: the segments kept show what the leaker keeps, the
    same as the unsegmented run, including the phase whose return replaces
    its jobs' deltas (counted in the segments dropped) by its own."""
    code = LEAKER.replace("JOB", str(JOB))
    run_scenario(tmp_path, code.replace("OUT", "'full'"))
    run_scenario(tmp_path, code.replace("OUT", "'bounded', max_size=%d" % LIMIT))
    full, bounded = only_dir(tmp_path / "full"), only_dir(tmp_path / "bounded")
    assert "capture-000001.tg" not in capture_files(bounded)  # it rotated
    whole, kept = live_now(full, "leaker"), live_now(bounded, "leaker")
    assert whole >= 160 * JOB
    assert abs(kept - whole) <= KEPT_TOLERANCE * whole, (kept, whole)
    whole = held_at_peak(full, "leaker", tmp_path / "hf")
    kept = held_at_peak(bounded, "leaker", tmp_path / "hb")
    assert whole >= 160 * JOB
    assert abs(kept - whole) <= KEPT_TOLERANCE * whole, (kept, whole)


# Workers that hold ever more memory through calls that return, then wait, all
# still running at disable(): the capture rotates while they grow, so each is
# carried into the segments kept holding what it kept in the ones dropped.
GROWERS = """
import threading
import threadgraph

def chunk(i):
    return bytearray(SIZE)

def grow(done, go):
    keep = []
    for i in range(ROUNDS):
        keep.append(chunk(i))
    done.wait()
    go.wait()

p = threadgraph.ProcessProfile(default_log_path="run", max_size=LIMIT)
p.trackStack()
p.enable()
done, go = threading.Barrier(THREADS + 1), threading.Event()
ts = [threading.Thread(target=grow, args=(done, go), name="g%d" % k) for k in range(THREADS)]
for t in ts:
    t.start()
done.wait()
p.disable()
go.set()
for t in ts:
    t.join()
"""


def growers(rounds, threads, size):
    """GROWERS with ROUNDS blocks of SIZE (a Python expression of i) in each of
    THREADS threads, at the smallest limit."""
    return (GROWERS.replace("ROUNDS", str(rounds)).replace("THREADS", str(threads))
            .replace("SIZE", size).replace("LIMIT", str(LIMIT)))


GROW_ROUNDS = 15000  # about 1.3 MB of capture: several times the limit


def held_series(out):
    """memg --held --script-only's series in OUT: {file name: [(TIME, BYTES)]}."""
    plot = os.path.join(out, "memg-held-plot")
    series = {}
    for name in os.listdir(plot):
        if name.startswith("held-") and name.endswith(".dat") and name != "held-peak.dat":
            with open(os.path.join(plot, name), encoding="utf-8") as f:
                series[name] = [(x, int(v)) for x, v in (line.split() for line in f)]
    return series


def test_held_memory_starts_where_the_kept_segments_do(tmp_path):
    """Every thread carried into the segments kept starts its held curve at
    their start, at what it held then (its head's memory by depth), not at its
    first kept return: the sum of all threads does not climb while each
    thread's first return comes.  The export's runinfo.json carries the same
    start, so memg --held of the text draws the same curves."""
    # without LEVEL marks (docs/formats.md), which the text export cannot
    # carry: the capture's held memory is then its export's, point for point
    run_scenario(tmp_path, growers(GROW_ROUNDS, 4, "1000"),
                 env={"THREADGRAPH_NO_LEVEL_MARKS": "1"})
    run = only_dir(tmp_path / "run")
    assert "capture-000001.tg" not in capture_files(run)  # it rotated
    r = cli("memg", "--held", "--script-only", "-o", tmp_path / "cap", run)
    assert r.returncode == 0, r.stderr
    cap = held_series(tmp_path / "cap")
    threads = {k: v for k, v in cap.items() if k[len("held-"):-len(".dat")].isdigit()}
    assert len(threads) == 5, sorted(cap)  # the main thread and the growers
    starts = {v[0][0] for v in threads.values()}
    assert len(starts) == 1, threads  # one start for all
    total = cap["held-all.dat"][0]
    assert total[0] in starts
    # the sum starts at what every thread held there, the growers' lists among it
    assert total[1] == sum(v[0][1] for v in threads.values())
    assert total[1] >= 4 * 1000 * GROW_ROUNDS // 10, total
    # the export of the segments kept: the same curves, the same peak
    out = tmp_path / "text"
    r = cli("export", "-o", out, run)
    assert r.returncode == 0, r.stderr
    with open(out / "runinfo.json") as f:
        info = json.load(f)
    assert info["kept_from"] > 0
    for t in info["threads"]:
        assert len(t["held_at_start"]) <= t["open_at_start"] + 1, t
        assert sum(t["held_at_start"]) > 0 or t["name"] == "MainThread", t
    r = cli("memg", "--held", "--script-only", "-o", tmp_path / "txt", out)
    assert r.returncode == 0, r.stderr
    assert "not plotted" not in r.stderr, r.stderr
    txt = held_series(tmp_path / "txt")
    assert txt["held-all.dat"] == cap["held-all.dat"]
    assert sorted(txt.values()) == sorted(cap.values())
    with open(tmp_path / "cap" / "memg-held.txt") as a, open(tmp_path / "txt" / "memg-held.txt") as b:
        assert a.read() == b.read()
    # an export from before held_at_start was written: not drawn from 0, but
    # left out with the reason
    for t in info["threads"]:
        del t["held_at_start"]
    del info["kept_from"]
    with open(out / "runinfo.json", "w") as f:
        json.dump(info, f)
    r = cli("memg", "--held", "--script-only", "-o", tmp_path / "old", out)
    assert r.returncode == 1, r.stderr
    assert "export the capture again" in r.stderr, r.stderr
    assert "no thread with held memory to plot" in r.stderr, r.stderr


def test_every_thread_running_at_disable_is_kept(tmp_path):
    """disable() ends the threads one after another: a thread whose last chunk
    lies in a segment dropped while the others' are written is still carried
    into the segments kept, with what it held, as it ran to the end."""
    # Workers whose records fit their 64 KiB buffers (3000 blocks of 1500
    # bytes on average), all written at disable(): together several times the
    # limit, so that writing the last ones drops the segments holding the first.
    threads = 8
    run_scenario(tmp_path, growers(3000, threads, "i % 3000"),
                 env={"THREADGRAPH_NO_LEVEL_MARKS": "1"})  # as above
    run = only_dir(tmp_path / "run")
    assert "capture-000001.tg" not in capture_files(run)  # it rotated
    out = tmp_path / "text"
    r = cli("export", "-o", out, run)
    assert r.returncode == 0, r.stderr
    with open(out / "runinfo.json") as f:
        info = json.load(f)
    names = sorted(t["name"] for t in info["threads"])
    assert names == sorted(["MainThread"] + ["g%d" % k for k in range(threads)]), names
    # carried into the kept segments: the workers with calls open where they
    # begin; those with no record there (an empty .mem: every record in the
    # dropped segments) with all they held, 3000 blocks of 1500 B on average
    carried = [t for t in info["threads"] if t["name"] != "MainThread" and t["open_at_start"]]
    assert carried, info["threads"]
    for t in carried:
        if os.path.getsize(out / t["mem"]) == 0:
            assert sum(t["held_at_start"]) > 3000 * 1400, t
    r = cli("memg", "--held", "--script-only", "-o", tmp_path / "cap", run)
    assert r.returncode == 0, r.stderr
    cap = held_series(tmp_path / "cap")
    curves = {k: v for k, v in cap.items() if k[len("held-"):-len(".dat")].isdigit()}
    assert len(curves) == threads + 1 and all(curves.values()), sorted(cap)
    ends = sorted(v[-1][1] for v in curves.values())
    assert all(v > 3000 * 1400 for v in ends[1:]), ends  # every worker's list, to the end
    # the export draws the same curves, the carried workers' (no record kept) too
    r = cli("memg", "--held", "--script-only", "-o", tmp_path / "txt", out)
    assert r.returncode == 0, r.stderr
    assert "not plotted" not in r.stderr, r.stderr
    assert sorted(held_series(tmp_path / "txt").values()) == sorted(cap.values())


# Workers held deep in a recursion while the main thread writes: every
# segment's head repeats their open calls (DEPTH each), more than an eighth of
# the limit.  Each fills its 64 KiB buffer down there (FILL calls), so that its
# open calls are in the capture, and in the heads, before the main thread's
# records start segments.  disable() while they are still inside.
DEEP = """
import threading, time
import threadgraph

ready = threading.Barrier(THREADS + 1)
go = threading.Event()

def leaf(i):
    return i + 1

def down(d):
    if d:
        return down(d - 1)
    for i in range(FILL):
        leaf(i)
    ready.wait()
    go.wait()

def churn(i):
    return [i] * (i % 5)

p = threadgraph.ProcessProfile(default_log_path="run", max_size=LIMIT)
p.trackStack()
p.enable()
ts = [threading.Thread(target=down, args=(DEPTH,), name="d%d" % k) for k in range(THREADS)]
for t in ts:
    t.start()
ready.wait()
# The flusher writes every thread's buffer twice a second: after this the deep
# calls are in the capture, whatever the machine's speed (a thread's FILL
# calls may not fill its buffer, and a fast churn could end first).
time.sleep(1.2)
for i in range(200000):
    churn(i)
p.disable()
go.set()
for t in ts:
    t.join()
"""


FILL = 12000  # calls that fill a thread's 64 KiB buffer (about 4 bytes a record)
SEGMENTS_STARTED_MAX = 150  # 120 threads 900 deep: ~75 started, ~300 at a chunk each


def deep_code(threads, depth):
    return (DEEP.replace("THREADS", str(threads)).replace("DEPTH", str(depth))
            .replace("FILL", str(FILL)))


def run_deep(tmp_path, threads, depth):
    code = deep_code(threads, depth)
    res = run_scenario(tmp_path, code.replace("LIMIT", str(LIMIT)))
    run = only_dir(tmp_path / "run")
    files = capture_files(run)
    total = sum(os.path.getsize(os.path.join(run, f)) for f in files)
    with open(os.path.join(run, "runinfo.json")) as f:
        info = json.load(f)
    return res, files, total, info


def test_heads_longer_than_a_segment_keep_the_limit(tmp_path):
    """Heads of about two thirds of the limit (40 threads 900 calls deep):
    the rotation counts them (tests/c/test_capture_segments.c checks the files
    after every chunk), the files end within the limit and nothing is
    reported."""
    res, files, total, info = run_deep(tmp_path, 40, 900)
    assert "capture-000001.tg" not in files  # it rotated
    assert total <= LIMIT, (files, total)
    assert info["capture_over_limit"] == 0
    assert "size limit" not in res.stderr, res.stderr


def test_a_head_longer_than_the_limit_is_reported(tmp_path):
    """Heads longer than the limit (120 threads 900 calls deep: twice the limit): no segment
    fits, the limit cannot hold; runinfo.json, disable() and the run's last
    lines say by how much, and the files pass it by no more."""
    res, files, total, info = run_deep(tmp_path, 120, 900)
    over = info["capture_over_limit"]
    assert over > 0
    assert total <= LIMIT + over
    assert "capture over its size limit by up to %d bytes" % over in res.stderr, res.stderr
    # A segment holds about as many bytes of records as its head (which
    # alone passes the limit), not a head and one chunk: the run's ~9 MB of
    # records start tens of segments, not one per chunk (~300).
    assert int(files[-1][len("capture-"):-len(".tg")]) <= SEGMENTS_STARTED_MAX, files
    script = tmp_path / "deep.py"
    script.write_text(deep_code(120, 900)
                      .replace("p = threadgraph.ProcessProfile(default_log_path=\"run\", "
                               "max_size=LIMIT)\np.trackStack()\np.enable()\n", "")
                      .replace("p.disable()\n", ""))
    r = subprocess.run([sys.executable, "-m", "threadgraph", "run", "-o", str(tmp_path / "o"),
                        "--stack", "--max-size", str(LIMIT), str(script)], capture_output=True,
                       text=True, env=env_with_package(keep_cli=True), timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    # Said once, as run's last line (disable()'s warning is the API's).
    assert r.stderr.count("capture over its size limit by up to") == 1, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert "capture over its size limit by up to" in last, r.stderr
    assert "give a larger --max-size" in last, r.stderr


# A thread blocked in Event.wait() while the main thread's records rotate the
# segments: its calls into wait() are in the segments dropped, their returns
# in the ones kept, before its next call.  The pause lets the flusher write
# its records up to the wait (it writes every thread's buffer twice a second).
SLEEPER = """
import threading, time
import threadgraph

def leaf(i):
    return [i] * (i % 7)

def sleeper(ev):
    for i in range(100):
        leaf(i)
    ev.wait()
    for i in range(100):
        leaf(i)

p = threadgraph.ProcessProfile(default_log_path="run", max_size=LIMIT)
p.trackStack()
p.enable()
ev = threading.Event()
t = threading.Thread(target=sleeper, args=(ev,), name="sleeper")
t.start()
time.sleep(1.5)
for i in range(100000):
    leaf(i)
ev.set()
t.join()
p.disable()
"""


def test_export_of_the_kept_segments_folds_as_the_capture(tmp_path):
    """An export of the segments kept carries, in its runinfo.json, the calls
    open where each thread's files begin: folded and flamegraph of the text
    pair each return with its call as they do on the capture, the returns of
    the calls begun before the kept records (some before the first .stack
    line) skipped, with no warning."""
    run_scenario(tmp_path, SLEEPER.replace("LIMIT", str(LIMIT)))
    run = only_dir(tmp_path / "run")
    assert "capture-000001.tg" not in capture_files(run)  # it rotated
    out = tmp_path / "text"
    r = cli("export", "-o", out, run)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(out, "runinfo.json")) as f:
        opened = {t["name"]: t["open_at_start"] for t in json.load(f)["threads"]}
    assert opened["sleeper"] > 0, opened  # inside wait() where the records begin
    for metric in ("delta", "time"):
        cap = cli("folded", "--metric", metric, run)
        text = cli("folded", "--metric", metric, out)
        assert cap.returncode == 0 and text.returncode == 0, (cap.stderr, text.stderr)
        assert "paired with a return of another function" not in text.stderr, text.stderr
        assert "left over after the last call" not in text.stderr, text.stderr
        assert sorted(text.stdout.splitlines()) == sorted(cap.stdout.splitlines())
    r = cli("flamegraph", "-o", tmp_path / "fg", out)
    assert r.returncode == 0, r.stderr
    assert "paired with a return of another function" not in r.stderr, r.stderr


def test_decorate_of_the_export_agrees_with_the_capture(tmp_path):
    """decorate-stack on an export of the segments kept pairs as it does on the
    capture: the returns of the calls open where the files begin (runinfo.json's
    open_at_start, some before the first .stack line) are not taken for the
    kept calls', so each return is decorated with its own call (not a later
    call of the same function), and a return of a call begun before the kept
    records is an error on both."""
    run_scenario(tmp_path, SLEEPER.replace("LIMIT", str(LIMIT)))
    run = only_dir(tmp_path / "run")
    out = tmp_path / "text"
    r = cli("export", "-o", out, run)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(out, "runinfo.json")) as f:
        opened = {t["name"]: t["open_at_start"] for t in json.load(f)["threads"]}
    assert opened["sleeper"] > 0, opened
    errors = decorated = 0
    for thread in ("sleeper", "MainThread"):
        with open(out / (thread + ".mem"), encoding="utf-8", errors="surrogateescape") as f:
            lines = f.read().splitlines()
        # the sleeper's every return; of the main thread's many, the first
        # (of calls begun before the records, then of kept ones) and the last
        if thread == "MainThread":
            lines = lines[:40] + lines[-8:]
        for line in lines:
            cap = cli("decorate-stack", run, thread, line)
            text = cli("decorate-stack", out / (thread + ".mem"), out / (thread + ".stack"),
                       line)
            assert (text.returncode, text.stdout) == (cap.returncode, cap.stdout), \
                (thread, line, cap.stderr, text.stderr)
            assert "paired with a return of another function" not in text.stderr
            if cap.returncode:
                errors += 1
                assert "began before the records kept" in cap.stderr, cap.stderr
                assert "began before the first record of" in text.stderr, text.stderr
            else:
                decorated += 1
    assert errors and decorated


# A thread per request: each thread started writes a THREAD chunk, and the END
# chunk disable() writes last holds an entry per thread the run saw (about
# 5 bytes each, 50 KB here), neither of them events: the run must still end
# within the limit, or say by how much it passed it.
CHURN = """
import threading
import threadgraph

def leaf(i):
    return [i] * (i % 7)

p = threadgraph.ProcessProfile(default_log_path="run", max_size=LIMIT)
p.enable()
for i in range(10000):
    t = threading.Thread(target=leaf, args=(i,), daemon=True)
    t.start()
    t.join()
p.disable()
"""


def test_many_threads_end_within_the_limit(tmp_path):
    run_scenario(tmp_path, CHURN.replace("LIMIT", str(LIMIT)))
    run = only_dir(tmp_path / "run")
    files = capture_files(run)
    total = sum(os.path.getsize(os.path.join(run, f)) for f in files)
    with open(os.path.join(run, "runinfo.json")) as f:
        info = json.load(f)
    assert "capture-000001.tg" not in files  # it rotated
    assert total <= LIMIT + info["capture_over_limit"], (files, total, info["capture_over_limit"])
    res = cli("peaks", run)
    assert res.returncode == 0, res.stderr
    assert "segments" in res.stderr and "no end chunk" not in res.stderr, res.stderr
