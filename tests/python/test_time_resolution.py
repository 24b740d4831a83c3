"""time_resolution="ms" (docs/api.md "Timestamps: time_resolution"): a thread's
records within one millisecond beat share its first clock reading.  What it
promises: a record's time is never after its event and at most about a beat
before it; a call that spans beats is measured to within one; durations add up
to the time spent (each beat lands on the call running when it came); a
collection or a mark lies within the times of the calls around it; memory is
untouched; the beat's thread lives only while the run records."""
import json
import os
import subprocess
import sys

import pytest

from tgtest import (MEM_RE, STACK_RE, env_with_package, load_runinfo, only_dir,
                    read_lines, run_scenario)

import threadgraph


def calls_of(run_dir, thread="MainThread"):
    """[(func, call_time, return_time, delta)] of THREAD's text files: the
    .stack lines (pre-order) paired with the .mem lines (post-order)."""
    stack = [STACK_RE.match(l) for l in read_lines(os.path.join(run_dir, thread + ".stack"))]
    mem = [MEM_RE.match(l) for l in read_lines(os.path.join(run_dir, thread + ".mem"))]
    assert all(stack) and all(mem)
    order, open_ = [], []
    for i, m in enumerate(stack):
        depth = len(m.group("indent"))
        while len(open_) > depth:
            order.append(open_.pop())
        open_.append(i)
    order.extend(reversed(open_))
    out = []
    for i, m in zip(order, mem):
        s = stack[i]
        assert s.group("func") == m.group("func"), (s.group(0), m.group(0))
        out.append((m.group("func"), float(s.group("time")), float(m.group("time")),
                    int(m.group("delta"))))
    return out


PROGRAM = """
import json, sys, time
import threadgraph

def marker():
    pass

def nap():
    time.sleep(0.05)

def quick(x):
    return x + 1

def alloc():
    return bytearray(1000)

def slow():
    t = time.perf_counter() + 0.0002
    while time.perf_counter() < t:
        pass

p = threadgraph.ProcessProfile(default_log_path="out", format="text",
                               time_resolution=sys.argv[1])
p.trackStack()
p.enable()
brackets = []
for i in range(600):
    a = time.time()
    marker()
    b = time.time()
    brackets.append((a, b))
    for j in range(20):
        quick(j)
    slow()
nap()
keep = [alloc() for _ in range(3)]
p.disable()
json.dump({"brackets": brackets, "dir": p.output_dir}, sys.stdout)
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = {}
    for res in ("us", "ms"):
        tmp = tmp_path_factory.mktemp(res)
        proc = run_scenario(tmp, PROGRAM.replace("sys.argv[1]", repr(res)))
        data = json.loads(proc.stdout)
        data["dir"] = str(tmp / data["dir"]) if not os.path.isabs(data["dir"]) else data["dir"]
        data["calls"] = calls_of(data["dir"])
        out[res] = data
    return out


def test_runinfo_says_the_resolution(runs):
    assert load_runinfo(runs["us"]["dir"])["time_resolution"] == "us"
    assert load_runinfo(runs["ms"]["dir"])["time_resolution"] == "ms"


def test_times_never_after_the_event_and_shared_within_a_beat(runs):
    calls = runs["ms"]["calls"]
    markers = [c for c in calls if c[0] == "marker"]
    brackets = runs["ms"]["brackets"]
    assert len(markers) == len(brackets) == 600
    late = [(c[1], b) for c, (a, b) in zip(markers, brackets) if c[1] > b + 0.0002]
    assert not late, late[:5]
    # About a beat early at most: the median of how far before the marker's own
    # call (bracketed by a and b) its time is, under 2 ms, or two of the beats
    # that came when a loaded machine delays the beat's thread.
    early = sorted(a - c[1] for c, (a, b) in zip(markers, brackets))
    beats = sorted({t for c in calls for t in c[1:3]})
    gaps = sorted(y - x for x, y in zip(beats, beats[1:]))
    bound = max(0.002, 2 * gaps[len(gaps) // 2])
    assert early[len(early) // 2] < bound, (early[len(early) // 2], bound)
    # The records of one beat share a reading: far fewer times than records,
    # and the clock still moves with the beats (the loop runs ~0.25 s).
    stamps = {t for c in calls for t in c[1:3]}
    assert 20 < len(stamps) < len(calls) / 5, (len(stamps), len(calls))
    us_stamps = {t for c in runs["us"]["calls"] for t in c[1:3]}
    assert len(us_stamps) > 2 * len(stamps)


def test_a_call_spanning_beats_is_measured_to_within_one(runs):
    (nap,) = [c for c in runs["ms"]["calls"] if c[0] == "nap"]
    took = nap[2] - nap[1]
    assert 0.0499 <= took < 0.09, took


def test_durations_add_up_to_the_time_spent(runs):
    """slow() spins 0.2 ms, quick() returns at once: per call ms times are
    coarse, but summed they give each function's share as the exact clock
    does (the beats land on the calls running when they come)."""
    def totals(calls):
        # a call of quick or slow longer than 3 ms was preempted (a beat that
        # lands on a call gives it a millisecond or so): left out of both runs'
        # sums, so that a loaded machine's preemptions, which fall on either
        # function at random in either run, do not pass for the beats' error
        by = {}
        for f, t0, t1, _d in calls:
            if t1 - t0 <= 0.003 or f not in ("quick", "slow"):
                by[f] = by.get(f, 0.0) + (t1 - t0)
        return by
    us, ms = totals(runs["us"]["calls"]), totals(runs["ms"]["calls"])
    assert us["slow"] > 0.05 and ms["slow"] > 0.05
    # slow's share of slow + quick as the exact clock's, within the sampling
    # error of the beats that came (~500 on a quiet machine: a few percent;
    # a loaded one delays the beat's thread, fewer beats, a wider bound).
    beats = len({t for c in runs["ms"]["calls"] for t in c[1:3]})
    share_us = us["slow"] / (us["slow"] + us["quick"])
    share_ms = ms["slow"] / (ms["slow"] + ms["quick"])
    bound = max(0.1, 4 * (share_us * (1 - share_us) / beats) ** 0.5)
    assert abs(share_ms - share_us) < bound, (share_us, share_ms, beats)


def test_memory_is_the_same(runs):
    """The deltas do not depend on the clock: the program's last calls, each
    making a bytearray of 1000 bytes, are charged the same bytes."""
    def deltas(calls):
        return [d for f, _a, _b, d in calls if f == "alloc"]
    assert deltas(runs["us"]["calls"]) == deltas(runs["ms"]["calls"])
    assert len(deltas(runs["ms"]["calls"])) == 3
    assert all(d >= 1000 for d in deltas(runs["ms"]["calls"]))


GC_PROGRAM = """
import gc, json, sys, time
import threadgraph

def churn():
    for _ in range(500):
        a, b = [], []
        a.append(b)
        b.append(a)
    del a, b
    gc.collect()

def after():
    pass

gc.disable()
p = threadgraph.ProcessProfile(default_log_path="out", format="text",
                               time_resolution="ms")
p.trackStack()
p.enable()
for _ in range(50):
    churn()
    after()
with threadgraph.phase("tail"):
    after()
p.disable()
print(p.output_dir)
"""


def test_collections_and_phases_lie_within_the_calls_around_them(tmp_path):
    proc = run_scenario(tmp_path, GC_PROGRAM)
    run_dir = os.path.join(str(tmp_path), proc.stdout.strip())
    calls = calls_of(run_dir)
    churns = [c for c in calls if c[0] == "churn"]
    afters = [c for c in calls if c[0] == "after"]
    assert len(churns) == 50 and len(afters) == 51
    with open(os.path.join(run_dir, "gc.txt")) as f:
        runs = [l.split() for l in f if not l.startswith("#") and int(l.split()[3]) > 0]
    assert len(runs) == 50
    for (_f, c0, c1, _d), nxt, gc_run in zip(churns, afters, runs):
        start, stop = float(gc_run[1]), float(gc_run[2])
        # within churn's call, and before the next call's time
        assert c0 <= start <= stop <= c1 <= nxt[1], (c0, start, stop, c1, nxt[1])


def test_the_beat_runs_only_while_recording(tmp_path):
    proc = run_scenario(tmp_path, """
        import os, threadgraph
        def tasks():
            return len(os.listdir("/proc/self/task"))
        before = tasks()
        us = threadgraph.ProcessProfile(default_log_path="out", time_resolution="us")
        us.enable(); n_us = tasks(); us.disable()
        ms = threadgraph.ProcessProfile(default_log_path="out", time_resolution="ms")
        ms.enable(); n_ms = tasks(); ms.disable()
        quiet = threadgraph.ProcessProfile(default_log_path="out", time_resolution="ms")
        quiet.logTimestamps(False)
        quiet.enable(); n_quiet = tasks(); quiet.disable()
        print(before, n_us, n_ms, n_quiet, tasks())
    """)
    before, n_us, n_ms, n_quiet, after = map(int, proc.stdout.split())
    assert n_ms == n_us + 1  # the beat's thread, besides the flusher
    assert n_quiet == n_us   # no timed record: no beat
    assert after == before


def test_the_beat_parks_while_nothing_records(tmp_path):
    """An idle program is not woken a thousand times a second: after a
    millisecond without a timed record the beat stops (every record then reads
    the clock) and looks every 10 ms for records again; a busy one beats."""
    proc = run_scenario(tmp_path, """
        import os, time, threadgraph
        def beat_switches():
            for tid in os.listdir("/proc/self/task"):
                base = "/proc/self/task/%s/" % tid
                with open(base + "comm") as f:
                    if f.read().strip() != "tg-clock-beat":
                        continue
                with open(base + "status") as f:
                    for line in f:
                        if line.startswith("voluntary_ctxt_switches:"):
                            return int(line.split()[1])
            return None
        def leaf(i):
            return i
        p = threadgraph.ProcessProfile(default_log_path="out", time_resolution="ms")
        p.trackStack()
        p.enable()
        a = beat_switches()
        time.sleep(0.5)  # no record for half a second
        b = beat_switches()
        t = time.time() + 0.2
        while time.time() < t:  # records all the time
            leaf(0)
        c = beat_switches()
        p.disable()
        print(a, b, c, p.output_dir)
    """)
    a, b, c, run_dir = proc.stdout.split()
    idle, busy = int(b) - int(a), int(c) - int(b)
    assert idle < 150, (idle, busy)  # ~70 (20 at 1 ms, then at 10 ms); 500 without parking
    assert busy > idle / 5 + 30, (idle, busy)  # about 200 at 1 ms
    assert load_runinfo(os.path.join(str(tmp_path), run_dir))["time_resolution"] == "ms"


def test_a_forked_child_beats_on_its_own(tmp_path):
    proc = run_scenario(tmp_path, """
        import os, sys, time, threadgraph
        def nap():
            time.sleep(0.03)
        def leaf(i):
            return i
        p = threadgraph.ProcessProfile(default_log_path="out", format="text",
                                       time_resolution="ms")
        p.trackStack()
        p.enableForkedProfile()
        p.enable()
        pid = os.fork()
        if pid == 0:
            # At least 20000 calls and 50 ms: the beat's thread must get the
            # CPU during them, which a loaded machine may delay past a
            # fixed number of calls.
            i, end = 0, time.monotonic() + 0.05
            while i < 20000 or time.monotonic() < end:
                leaf(i)
                i += 1
            nap()
            p.disable()
            print(p.output_dir)
            sys.stdout.flush()
            os._exit(0)
        os.waitpid(pid, 0)
        p.disable()
    """)
    child_dir = os.path.join(str(tmp_path), proc.stdout.strip())
    calls = calls_of(child_dir)
    (nap,) = [c for c in calls if c[0] == "nap"]
    assert 0.0299 <= nap[2] - nap[1] < 0.07, nap
    stamps = {t for c in calls if c[0] == "leaf" for t in c[1:3]}
    assert 1 < len(stamps) < 20000  # the child's beat moves its clock, and shares it


def test_bad_values_are_refused(tmp_path):
    with pytest.raises(ValueError, match="time_resolution must be 'us' or 'ms', not 'ns'"):
        threadgraph.ProcessProfile(time_resolution="ns")
    prog = tmp_path / "p.py"
    prog.write_text("print('ran')\n")
    res = subprocess.run([sys.executable, "-m", "threadgraph", "run", "--time-resolution",
                          "ns", str(prog)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, env=env_with_package(), cwd=str(tmp_path))
    assert res.returncode == 2 and "ran" not in res.stdout
    assert "--time-resolution: invalid choice: 'ns'" in res.stderr


def test_run_with_ms_and_the_commands_on_its_capture(tmp_path):
    """threadgraph run --time-resolution ms, then the tutorial's commands on the
    capture it wrote (the default binary format)."""
    from test_reliability import find_cli
    prog = tmp_path / "p.py"
    prog.write_text("def grow(n):\n    return [bytearray(1000) for _ in range(n)]\n"
                    "keep = [grow(200) for _ in range(20)]\nprint('done', len(keep))\n")
    res = subprocess.run([sys.executable, "-m", "threadgraph", "run", "--time-resolution",
                          "ms", "--stack", "-o", str(tmp_path / "out"), str(prog)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, env=env_with_package(keep_cli=True),
                         cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert res.stdout == "done 20\n"
    run_dir = only_dir(tmp_path / "out")
    assert load_runinfo(run_dir)["time_resolution"] == "ms"
    cli = find_cli()
    if cli is None:
        pytest.skip("no threadgraph command-line processor")
    every = ["--peak", "100", "--peak_delta_time", "0", "--peak_delta_value", "0"]
    peaks = subprocess.run([cli, "peaks", "--json"] + every + [run_dir],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
    assert peaks.returncode == 0, peaks.stderr
    grows = [p for p in json.loads(peaks.stdout) if p["function"] == "grow"]
    # peaks keeps a peak only more than --peak_delta_time after the last one it
    # kept or more than --peak_delta_value from it (the original's rule): the
    # twenty equal grow() calls of one beat share a time, so one stands for them
    assert grows and all(p["call_start"] <= p["time"] for p in grows)
    assert all(p["delta"] >= 200 * 1000 for p in grows), grows
    exp = subprocess.run([cli, "export", run_dir, "-o", str(tmp_path / "text")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True)
    assert exp.returncode == 0, exp.stderr
    calls = calls_of(str(tmp_path / "text"))
    assert len([c for c in calls if c[0] == "grow"]) == 20
