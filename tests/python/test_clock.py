"""The TIME field from both clock sources (src/recorder/clock.h): the default
(the TSC where the CPU has an invariant one) and THREADGRAPH_CLOCK=gettime.

Each thread brackets calls of marker() with time.time(); the call's .stack line
and its return's .mem line must fall inside the bracket, within TIME_TOLERANCE_S.
The run lasts a few flusher ticks so that the clock is re-anchored under the
threads; every file's timestamps must never go backwards.
"""
import json
import os
import platform

import pytest

from tgtest import MEM_RE, PROCESS_RE, STACK_RE, load_runinfo, only_dir, read_lines, run_scenario

# How far a recorded time may be outside the time.time() bracket around it: the
# TSC's extrapolation error between two re-anchors is microseconds; the rest is
# room for a loaded machine.
TIME_TOLERANCE_S = 0.005
THREADS = 3

SCENARIO = '''
import json, sys, threading, time, threadgraph

RUN_S = 1.3        # more than two flusher ticks (0.5 s): re-anchoring under us

def marker(k):
    return k

def work(name):
    brackets = []
    end = time.time() + RUN_S
    k = 0
    while time.time() < end:
        before = time.time()
        marker(k)
        after = time.time()
        brackets.append((before, after))
        for _ in range(200):          # call-heavy between markers
            abs(k)
        k += 1
        time.sleep(0.001)
    with open(name + ".json", "w") as f:
        json.dump(brackets, f)

p = threadgraph.ProcessProfile(format="text", default_log_path=sys.argv[1], profile="python")
p.trackStack()
p.setProcessMemoryFrequence(50)
p.enable()
ts = [threading.Thread(target=work, args=("T%d" % i,), name="T%d" % i)
      for i in range(%(threads)d)]
for t in ts:
    t.start()
for t in ts:
    t.join()
p.disable()
'''


def _times(path, regex):
    out = []
    for line in read_lines(path):
        m = regex.match(line)
        assert m, "bad line %r in %s" % (line, path)
        out.append((float(m.group("time")), m.groupdict().get("func")))
    return out


def _invariant_tsc():
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return False
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line.split()
                    return "constant_tsc" in flags and "nonstop_tsc" in flags
    except OSError:
        pass
    return False


@pytest.mark.parametrize("clock", [None, "gettime"])
def test_times_follow_time_time(tmp_path, monkeypatch, clock):
    base = tmp_path / "out"
    monkeypatch.delenv("THREADGRAPH_CLOCK", raising=False)
    env = {"THREADGRAPH_CLOCK": clock} if clock else {}
    code = SCENARIO.replace("sys.argv[1]", repr(str(base))).replace("%(threads)d", str(THREADS))
    run_scenario(tmp_path, code, env=env)
    run_dir = only_dir(base)

    info = load_runinfo(run_dir)
    if clock == "gettime":
        assert info["clock"] == "gettime"
    elif _invariant_tsc():
        assert info["clock"] == "tsc"
    else:
        assert info["clock"] == "gettime"

    worst = 0.0
    for i in range(THREADS):
        name = "T%d" % i
        with open(str(tmp_path / (name + ".json"))) as f:
            brackets = json.load(f)
        stack = _times(os.path.join(run_dir, name + ".stack"), STACK_RE)
        mem = _times(os.path.join(run_dir, name + ".mem"), MEM_RE)
        for series in (stack, mem):
            times = [t for t, _f in series]
            assert times == sorted(times), "%s: a timestamp went backwards" % name
            marks = [t for t, f in series if f == "marker"]
            assert len(marks) == len(brackets) and len(marks) > 100
            for t, (before, after) in zip(marks, brackets):
                worst = max(worst, before - t, t - after)
    print("clock %s: worst %.6f s outside time.time()" % (info["clock"], worst))
    assert worst <= TIME_TOLERANCE_S, "a timestamp %.6f s outside time.time()" % worst

    process = [float(PROCESS_RE.match(l).group("time"))
               for l in read_lines(os.path.join(run_dir, "process.mem"))]
    assert process and process == sorted(process)
