"""process.mem is sampled off the event path (docs/api.md "process.mem"): the
event path counts down and counts a request every N events, the flusher reads
/proc/self/statm and writes one line per request taken.  A program that grows
its memory in steps reads statm itself; every sample read inside a step agrees
with it.

Which samples were read inside a step is decided by stats()["process_samples"]
(the lines written), not by time.  The flusher reads once for all the requests
it takes, writes that many lines and then counts them, so with C0 the count
after a step's pages are all resident (and statm read: LO), CA the next count
seen after it and C1 the count at the step's end (then statm read: HI), the
lines CA + 1 .. C1 (1-based lines of process.mem) were all read between the two
readings (the lines CA counted may have been read before LO, but the next read
comes after CA was counted, which is after C0 was seen), so each lies between LO
and HI (the recorder's own buffers may grow meanwhile)."""
import json
import os
import sys

import pytest

import tgcapture
from tgtest import PROCESS_RE, only_dir, read_lines, run_scenario

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="/proc/self/statm is Linux's")

SCENARIO = """
import json, os
from threadgraph import ProcessProfile

PAGE = os.sysconf("SC_PAGE_SIZE")
fd = os.open("/proc/self/statm", os.O_RDONLY)

def statm_rss():
    return int(os.pread(fd, 128, 0).split()[1]) * PAGE

def f():
    pass

p = ProcessProfile(format=%(fmt)r, default_log_path="out")
p.trackStack()
p.setProcessMemoryFrequence(%(every)d)
p.enable()

def samples():
    return p.stats()["process_samples"]

def after_two_reads():
    c0 = samples()
    while samples() == c0:
        f()
    ca = samples()
    while samples() == ca:
        f()
    return ca

for _ in range(30000):  # the writers' buffers resident before the first step
    f()
blocks, steps = [], []
for k in range(5):
    blocks.append(bytearray(b"x") * (4 << 20))  # 4 MiB, every page written
    rss_lo = statm_rss()
    c0 = after_two_reads()
    for _ in range(2000):
        f()
    c1 = samples()
    steps.append([c0, c1, rss_lo, statm_rss()])
p.disable()
print(json.dumps({"steps": steps, "total": p.stats()["process_samples"],
                  "page": PAGE}))
"""


def process_lines(run_dir, fmt):
    if fmt == "text":
        return read_lines(os.path.join(run_dir, "process.mem"))
    files = tgcapture.load(os.path.join(run_dir, "capture.tg")).render()
    return files["process.mem"].decode().splitlines()


@pytest.mark.parametrize("fmt", ["text", "binary"])
def test_samples_agree_with_statm(tmp_path, fmt):
    # glibc keeps what is freed (no trim): the recorder's writers take and
    # free 64 KiB buffers as records flow, and glibc giving their pages back
    # and taking them again moved RSS by up to 120 pages within a step under
    # load, against the program's own readings before and after it
    proc = run_scenario(tmp_path, SCENARIO % {"fmt": fmt, "every": 20},
                        env={"MALLOC_TRIM_THRESHOLD_": str(1 << 30)})
    out = json.loads(proc.stdout.splitlines()[-1])
    lines = process_lines(only_dir(tmp_path / "out"), fmt)
    assert all(PROCESS_RE.match(l) and "#" in l for l in lines), lines[:5]
    assert len(lines) == out["total"]
    values = [int(l.split("#")[1]) for l in lines]
    times = [l.split("#")[0] for l in lines]
    assert times == sorted(times, key=float)
    page = out["page"]
    steps = out["steps"]
    for k, (c0, c1, lo, hi) in enumerate(steps):
        inside = values[c0:c1]  # lines CA + 1 .. C1
        assert inside, (k, c0, c1)
        for v in inside:
            # between the program's own readings before and after, within two
            # pages (what the interpreter allocates between two reads); RSS may
            # also go down between them (memory given back meanwhile: CI saw 56
            # pages less after than before)
            assert min(lo, hi) - 2 * page <= v <= max(lo, hi) + 2 * page, (k, v, lo, hi, inside)
        if k:
            # the steps are real: each adds a 4 MiB block, less what was given
            # back meanwhile
            assert lo - steps[k - 1][2] >= 3 << 20


@pytest.mark.parametrize("every", [1, 20])
def test_one_line_per_n_events(tmp_path, every):
    """One process.mem line per N events, however fast the events come: 20000
    calls of an empty function are 40000 events (a call and a return each),
    made faster than the flusher polls (about one poll a millisecond).  The
    same program without the calls, recorded just before in the same process
    (after a first run that imports what enable() and disable() need), gives
    the lines of everything else: enable()'s and disable()'s own events.  The
    capture's process.mem is the text one."""
    proc = run_scenario(tmp_path, """
import sys
from threadgraph import ProcessProfile

def f():
    pass

def run(out, calls):
    p = ProcessProfile(format="both", default_log_path=out, profile="both")
    p.trackStack()
    p.setProcessMemoryFrequence(%d)
    p.enable()
    for _ in range(calls):
        f()
    p.disable()
    print(p.stats()["process_samples"])

run("warm", 0)
run("base", 0)
run("out", 20000)
""" % every)
    counts = [int(x) for x in proc.stdout.split()]
    lines = {}
    for name in ("base", "out"):
        run = only_dir(tmp_path / name)
        lines[name] = read_lines(os.path.join(run, "process.mem"))
        assert process_lines(run, "binary") == lines[name]
        assert all(PROCESS_RE.match(l) and "#" in l for l in lines[name]), lines[name][:5]
    assert counts[1:] == [len(lines["base"]), len(lines["out"])]
    # The countdown starts afresh at enable(): the 40000 more events make
    # 40000 / N more lines, give or take the one the base run's remainder
    # completes.
    more = len(lines["out"]) - len(lines["base"])
    assert abs(more - 2 * 20000 // every) <= 1, (more, counts)
    # A reading serves every request the flusher found waiting: its lines
    # repeat it; the readings are in time order.
    times = [float(l.split("#")[0]) for l in lines["out"]]
    assert times == sorted(times)


def test_no_request_no_sample(tmp_path):
    """Sampling off: no process.mem, no sample taken."""
    proc = run_scenario(tmp_path, """
from threadgraph import ProcessProfile
p = ProcessProfile(format="text", default_log_path="out")
p.setProcessMemoryFrequence(0)
p.enable()
sum(range(10))
p.disable()
print(p.stats()["process_samples"])
""")
    assert proc.stdout.split() == ["0"]
    assert "process.mem" not in os.listdir(only_dir(tmp_path / "out"))


@pytest.mark.skipif(not os.path.exists("/proc/thread-self/io"),
                    reason="no per-thread I/O accounting (/proc/thread-self/io)")
@pytest.mark.parametrize("fmt", ["text", "binary"])
def test_event_path_reads_nothing(tmp_path, fmt):
    """The tutorial's configuration makes no read system call on the event path:
    the thread's own read count (syscr) does not move over 20000 profiled calls
    (it moved by 2000 when every 20th event read /proc/self/statm)."""
    proc = run_scenario(tmp_path, """
from threadgraph import ProcessProfile

def syscr():
    with open("/proc/thread-self/io", "rb", buffering=0) as f:
        data = f.read(4096)
    return int(data.split(b"syscr:")[1].split()[0])

def f():
    pass

p = ProcessProfile(format=%r, default_log_path="out", profile="both")
p.trackStack()
p.setProcessMemoryFrequence(20)
p.enable()
for _ in range(1000):
    f()
a = syscr()
b = syscr()  # what reading the count itself costs
for _ in range(20000):
    f()
c = syscr()
p.disable()
print(b - a, c - b)
""" % fmt)
    per_read, loop = map(int, proc.stdout.split())
    assert loop == per_read, (loop, per_read)


@pytest.mark.parametrize("fmt", ["text", "binary"])
def test_last_line_is_read_at_disable(tmp_path, fmt):
    """The run ends at a real reading: disable() writes one line more, read at
    disable(), after the pending requests.  Here the requests (one per 1000
    events) are few and early, then the main thread writes 64 MiB in one
    operator (no profile event) and sleeps: without the final line process.mem
    ended before the growth, and memg drew its last, early reading on to the
    end of the run as if the RSS had stayed there."""
    proc = run_scenario(tmp_path, """
import json, os, time
from threadgraph import ProcessProfile

PAGE = os.sysconf("SC_PAGE_SIZE")
fd = os.open("/proc/self/statm", os.O_RDONLY)

def statm_rss():
    return int(os.pread(fd, 128, 0).split()[1]) * PAGE

p = ProcessProfile(format=%r, default_log_path="out")
p.setProcessMemoryFrequence(1000)
p.enable()
t0 = time.time()
block = b"x" * (64 << 20)  # every page written, in one operator: no event
time.sleep(0.3)
rss = statm_rss()
p.disable()
print(json.dumps({"t0": t0, "rss": rss, "total": p.stats()["process_samples"],
                  "page": PAGE}))
""" % fmt, env={"MALLOC_TRIM_THRESHOLD_": str(1 << 30)})
    out = json.loads(proc.stdout.splitlines()[-1])
    lines = process_lines(only_dir(tmp_path / "out"), fmt)
    assert lines and len(lines) == out["total"], (lines, out)
    when, size = lines[-1].split("#")
    # read after the sleep that followed the growth (the clocks agree to far
    # better than the 0.3 s: test_clock.py)
    assert float(when) >= out["t0"] + 0.25, (lines, out)
    # the RSS the program read just before disable(), within what the
    # interpreter and the recorder allocate and give back meanwhile
    assert abs(int(size) - out["rss"]) <= 256 * out["page"], (lines, out)
    assert int(size) >= 64 << 20
