"""Recorder tests: real threads, each scenario in a fresh interpreter.

Tolerances are named: in memory="thread" a function's delta is exact to the
byte, but "what a bytearray costs" includes its object header and the extra
byte bytearray keeps for a NUL, and keeping it in a list may grow the list.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tgtest import (MEM_RE, PROCESS_RE, STACK_RE, check_pairing, load_runinfo, only_dir,
                      parse_mem, parse_stack, read_lines, run_scenario)

# Object header + NUL byte of a bytearray + one growth of the list keeping it.
OBJECT_HEADER_TOLERANCE = 256
# A function that builds and drops temporaries: free lists and caches may keep or
# release a few small blocks, and on 3.8-3.10 the per-code cached frame of an
# inner comprehension may be kept or released by whichever thread finishes last.
TEMPORARY_TOLERANCE = 1024
BIG = 10 ** 7
# Scripted correction scenario: what the other thread allocates.
OTHER_THREAD_BYTES = 50 * 2 ** 20

PRELUDE = """
import gc, os, sys, threading, _thread, time
from threadgraph import ProcessProfile
"""

# A text stream for stream_factory whose contents outlive the recorder's close.
KEEP = """
import io
class Keep(io.StringIO):
    def close(self):
        pass
"""


def deltas(records, func):
    return [d for _site, _line, f, d in records if f == func]


def test_thread_mode_exact_under_concurrent_churn(tmp_path):
    run_scenario(tmp_path, PRELUDE + """
gc.disable()
keep = []
N_CHURN = 3
barrier = threading.Barrier(N_CHURN + 1)
stop = threading.Event()

def keep_big():
    b = bytearray(%d)
    keep.append(b)

def churn_once():
    x = [bytes(100) for _ in range(200)]
    y = {i: str(i) for i in range(200)}
    del x, y

MIN_CHURNS = 20
def churner():
    barrier.wait()
    n = 0
    while n < MIN_CHURNS or not stop.is_set():
        churn_once()
        n += 1

churn_once()   # warm caches (comprehension frames) before recording
p = ProcessProfile(format="text", default_log_path="out", profile="python")
p.enable()
threads = [threading.Thread(target=churner, name="churn-%%d" %% i) for i in range(N_CHURN)]
for t in threads:
    t.start()
barrier.wait()
for _ in range(5):
    keep_big()
stop.set()
for t in threads:
    t.join()
p.disable()
""" % BIG)
    run_dir = only_dir(tmp_path / "out")
    main = parse_mem(os.path.join(run_dir, "MainThread.mem"))
    bigs = deltas(main, "keep_big")
    assert len(bigs) == 5
    for d in bigs:
        assert BIG <= d <= BIG + OBJECT_HEADER_TOLERANCE, bigs
    for i in range(3):
        churn = deltas(parse_mem(os.path.join(run_dir, "churn-%d.mem" % i)), "churn_once")
        assert churn, "churner %d recorded nothing" % i
        assert all(abs(d) <= TEMPORARY_TOLERANCE for d in churn), churn


def test_temporaries_net_to_zero_and_kept_memory_shows(tmp_path):
    run_scenario(tmp_path, PRELUDE + """
gc.disable()
keep = []
def temp():
    x = [str(i) for i in range(10000)]
    del x
def keeper():
    keep.append([str(i) for i in range(10000)])
temp()   # warm caches (the comprehension's frame on 3.8-3.10) before recording
p = ProcessProfile(format="text", default_log_path="out", profile="python")
p.enable()
for _ in range(3):
    temp()
keeper()
p.disable()
""")
    main = parse_mem(os.path.join(only_dir(tmp_path / "out"), "MainThread.mem"))
    temps = deltas(main, "temp")
    assert len(temps) == 3 and all(abs(d) <= TEMPORARY_TOLERANCE for d in temps), temps
    (kept,) = deltas(main, "keeper")
    assert kept > 10000 * 40  # 10000 small str objects and a list, well above any noise


def test_pre_existing_and_thread_module_threads(tmp_path):
    run_scenario(tmp_path, PRELUDE + """
go = threading.Event()
def early_work():
    return sum(range(10))
def early():
    go.wait()
    early_work()
early_thread = threading.Thread(target=early, name="early")
early_thread.start()

done = _thread.allocate_lock()
done.acquire()
def raw_work():
    return [1, 2, 3]
def raw():
    raw_work()
    done.release()

p = ProcessProfile(format="text", default_log_path="out", profile="python")
p.enable()
_thread.start_new_thread(raw, ())
done.acquire()
go.set()
early_thread.join()
p.disable()
""")
    run_dir = only_dir(tmp_path / "out")
    assert deltas(parse_mem(os.path.join(run_dir, "early.mem")), "early_work")
    raw = parse_mem(os.path.join(run_dir, "Dummy-1.mem"))
    assert deltas(raw, "raw_work") and deltas(raw, "raw")
    names = {t["name"] for t in load_runinfo(run_dir)["threads"]}
    assert {"MainThread", "early", "Dummy-1"} <= names


def test_thread_quiet_from_before_enable_is_left_out_of_the_run(tmp_path):
    # threadgraph attach's control thread: quiet(True), enable(), then it only
    # waits while the program's threads are recorded.  It has no files and no
    # entry (an empty one made peaks/memg say "skipped: no events").
    run_scenario(tmp_path, PRELUDE + """
def work():
    return [bytearray(100) for _ in range(10)]
def worker():
    work()
p = ProcessProfile(format="text", default_log_path="out", profile="python")
def control():
    p._rec.quiet(True)
    p.enable()
    t = threading.Thread(target=worker, name="worker")
    t.start()
    t.join()
    p.disable()
c = threading.Thread(target=control, name="control")
c.start()
c.join()
""")
    run_dir = only_dir(tmp_path / "out")
    names = {t["name"] for t in load_runinfo(run_dir)["threads"]}
    assert "worker" in names and "control" not in names, names
    assert not [f for f in os.listdir(run_dir) if f.startswith("control")]
    assert deltas(parse_mem(os.path.join(run_dir, "worker.mem")), "work")


def test_disable_stops_every_thread(tmp_path):
    run_scenario(tmp_path, PRELUDE + """
stop = threading.Event()
disabled = threading.Event()
after = []
def tick():
    return 1
def spin():
    while not stop.is_set():
        tick()
        if disabled.is_set():
            after.append(1)
            if len(after) > 1000:
                stop.set()
p = ProcessProfile(format="text", default_log_path="out", profile="python")
p.enable()
t = threading.Thread(target=spin, name="spinner")
t.start()
while True:  # let the spinner record something first
    if p.stats()["records"] > 100:
        break
p.disable()
size = os.path.getsize(os.path.join(p.output_dir, "spinner.mem"))
disabled.set()
t.join()
assert os.path.getsize(os.path.join(p.output_dir, "spinner.mem")) == size
""")


def test_filter_profile_modes_and_timestamps(tmp_path):
    script = PRELUDE + """
import json
here = os.path.dirname(os.path.abspath(__file__))
def work():
    sorted([3, 1, 2])
    json.dumps({"a": 1})
p = ProcessProfile(format="text", default_log_path=sys.argv[1], profile=sys.argv[2] if sys.argv[2] != "none" else None)
if sys.argv[3] == "filter":
    p.setFilter(here)
if sys.argv[4] == "notime":
    p.logTimestamps(False)
p.trackStack()
p.enable()
work()
p.disable()
"""
    (tmp_path / "s.py").write_text(script)
    import tgtest
    env = dict(os.environ, PYTHONPATH=tgtest.PKG_PARENT)

    def run(name, *args):
        subprocess.run([sys.executable, str(tmp_path / "s.py"), name] + list(args), cwd=str(tmp_path),
                       env=env, check=True)
        run_dir = only_dir(tmp_path / name)
        timestamps = "notime" not in args
        mem = parse_mem(os.path.join(run_dir, "MainThread.mem"), timestamps)
        stack = parse_stack(os.path.join(run_dir, "MainThread.stack"), timestamps)
        check_pairing(stack, mem)
        return mem

    script_path = str(tmp_path / "s.py")
    both = run("both", "both", "nofilter", "time")
    assert ("builtins", "sorted") in {(s, f) for s, _l, f, _d in both}
    assert (script_path, "work") in {(s, f) for s, _l, f, _d in both}
    assert any(s.endswith("json/__init__.py") for s, _l, _f, _d in both)
    assert run("default", "none", "nofilter", "time") and True

    python = run("python", "python", "nofilter", "time")
    assert (script_path, "work") in {(s, f) for s, _l, f, _d in python}
    assert all(s.endswith(".py") for s, _l, _f, _d in python), python

    c_only = run("c", "c", "nofilter", "time")
    assert ("builtins", "sorted") in {(s, f) for s, _l, f, _d in c_only}
    assert not any(s.endswith(".py") for s, _l, _f, _d in c_only), c_only

    filtered = run("filtered", "both", "filter", "time")
    funcs = {f for _s, _l, f, _d in filtered}
    # json.dumps lives outside the prefix, and so do the C calls made inside json;
    # sorted() is called from the script itself.
    assert [f for _s, _l, f, _d in filtered] == ["sorted", "work"], filtered
    assert filtered[1][0] == script_path

    notime = run("notime", "python", "nofilter", "notime")
    assert notime


def test_hostile_and_same_named_threads(tmp_path):
    run_scenario(tmp_path, PRELUDE + r"""
names = ["worker", "worker", "../evil", "a/b", "nul\x00x", "line\nbreak", "process",
         ".hidden", "", "..", "pct%20", "x" * 300]
def work():
    return 1
def body():
    work()
p = ProcessProfile(format="text", default_log_path="out", profile="python")
p.enable()
for n in names:
    t = threading.Thread(target=body)
    t.name = n          # (the constructor would replace "" by Thread-N)
    t.start()
    t.join()
p.disable()
""")
    out = tmp_path / "out"
    run_dir = only_dir(out)
    assert os.listdir(str(out)) == [os.path.basename(run_dir)]
    files = sorted(os.listdir(run_dir))
    info = load_runinfo(run_dir)
    table = info["threads"]
    assert [t["name"] for t in table[1:]] == ["worker", "worker", "../evil", "a/b", "nul\x00x",
                                              "line\nbreak", "process", ".hidden", "", "..",
                                              "pct%20", "x" * 300]
    mems = [t["mem"] for t in table]
    assert len(set(mems)) == len(mems)
    expected = ["MainThread.mem", "worker.mem", "worker~2.mem", "%2E.%2Fevil.mem", "a%2Fb.mem",
                "nul%00x.mem", "line%0Abreak.mem", "process~2.mem", "%2Ehidden.mem", "%00.mem",
                "%2E..mem", "pct%2520.mem", "x" * 200 + ".mem"]
    assert mems == expected
    for m in mems:
        assert "/" not in m and not m.startswith(".")
        assert m in files
    for m in mems[1:]:
        assert deltas(parse_mem(os.path.join(run_dir, m)), "work")
    assert "process.mem" in files


def test_fork_with_and_without_forked_profile(tmp_path):
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    script = PRELUDE + """
import warnings
warnings.simplefilter("ignore", DeprecationWarning)
def marker():
    return 1
def child_work():
    return 2
p = ProcessProfile(format="text", default_log_path="out", profile="python")
if sys.argv[1] == "forked":
    p.enableForkedProfile()
p.enable()
for _ in range(10):
    marker()          # still buffered in the parent at fork time
pid = os.fork()
if pid == 0:
    child_work()
    p.disable()
    os._exit(0)
os.waitpid(pid, 0)
for _ in range(5):
    marker()
p.disable()
print(pid)
"""
    (tmp_path / "s.py").write_text(script)
    import tgtest
    env = dict(os.environ, PYTHONPATH=tgtest.PKG_PARENT)
    for mode in ("forked", "plain"):
        base = tmp_path / mode
        base.mkdir()
        (base / "s.py").write_text(script)
        proc = subprocess.run([sys.executable, "s.py", mode], cwd=str(base), env=env,
                              stdout=subprocess.PIPE, universal_newlines=True, check=True)
        child_pid = int(proc.stdout.split()[-1])
        dirs = sorted(os.listdir(str(base / "out")))
        parent_dir = [d for d in dirs if d != str(child_pid)]
        assert len(parent_dir) == 1
        parent_dir = str(base / "out" / parent_dir[0])
        parent = parse_mem(os.path.join(parent_dir, "MainThread.mem"))
        assert len(deltas(parent, "marker")) == 15  # no duplicate from the child
        assert not deltas(parent, "child_work")
        if mode == "forked":
            assert str(child_pid) in dirs
            child_dir = str(base / "out" / str(child_pid))
            child = parse_mem(os.path.join(child_dir, "MainThread.mem"))
            assert deltas(child, "child_work")
            assert not deltas(child, "marker")
            info = load_runinfo(child_dir)
            assert info["pid"] == child_pid and info["ppid"] == int(os.path.basename(parent_dir))
        else:
            assert dirs == [os.path.basename(parent_dir)]


CORRECTION_SCENARIO = PRELUDE + """
sys.setswitchinterval(100)  # threads switch only when one blocks: deterministic order
gc.disable()
mode, sleeps = sys.argv[1], sys.argv[2] == "on"
keep = []
gate = _thread.allocate_lock()
gate.acquire()
started = threading.Event()

def waiter():
    started.set()
    gate.acquire()      # blocks; the other thread allocates meanwhile

def a():
    waiter()

def b():
    started.wait()
    keep.append(bytearray(%d))
    gate.release()

p = ProcessProfile(format="text", default_log_path="out", profile="python", memory=mode)
p.trackSleeps(sleeps)
p.enable()
ta = threading.Thread(target=a, name="A")
tb = threading.Thread(target=b, name="B")
ta.start(); tb.start(); ta.join(); tb.join()
p.disable()
""" % OTHER_THREAD_BYTES


@pytest.mark.parametrize("mode", ["process", "rss", "thread"])
def test_sleep_correction_direction(tmp_path, mode):
    results = {}
    for sleeps in ("on", "off"):
        base = tmp_path / sleeps
        base.mkdir()
        (base / "s.py").write_text(CORRECTION_SCENARIO)
        import tgtest
        env = dict(os.environ, PYTHONPATH=tgtest.PKG_PARENT)
        subprocess.run([sys.executable, "s.py", mode, sleeps], cwd=str(base), env=env,
                       check=True)
        run_dir = only_dir(base / "out")
        (d,) = deltas(parse_mem(os.path.join(run_dir, "A.mem")), "waiter")
        results[sleeps] = d
        info = load_runinfo(run_dir)
        # applied only where it changes a reading: not with memory="thread"
        assert info["memory_mode"] == mode
        assert info["sleep_correction"] == (sleeps == "on" and mode != "thread")
    if mode == "thread":
        # Exact per thread: the other thread's allocation never shows, no correction needed.
        assert abs(results["on"]) <= TEMPORARY_TOLERANCE and abs(results["off"]) <= TEMPORARY_TOLERANCE
    else:
        assert results["off"] >= OTHER_THREAD_BYTES * 0.9, results
        assert results["on"] < OTHER_THREAD_BYTES * 0.1, results


def test_deep_recursion_pairs(tmp_path):
    run_scenario(tmp_path, PRELUDE + """
DEPTH = 100000
sys.setrecursionlimit(DEPTH + 1000)
threading.stack_size(512 * 1024 * 1024)
def rec(n):
    if n:
        rec(n - 1)
def deep():
    rec(DEPTH)
p = ProcessProfile(format="text", default_log_path="out", profile="python")
p.enable()
t = threading.Thread(target=deep, name="deep")
t.start(); t.join()
p.disable()
""")
    mem = parse_mem(os.path.join(only_dir(tmp_path / "out"), "deep.mem"))
    assert len(deltas(mem, "rec")) == 100001
    funcs = [f for _s, _l, f, _d in mem]
    first = funcs.index("rec")
    assert funcs[first:first + 100001] == ["rec"] * 100001 and funcs[first + 100001] == "deep"


def test_generators_exceptions_pairing_and_formats(tmp_path):
    run_scenario(tmp_path, PRELUDE + """
import asyncio
def gen():
    yield 1
    yield 2
    yield 3
def boom():
    raise ValueError("x")
def catcher():
    try:
        boom()
    except ValueError:
        pass
async def co():
    await asyncio.sleep(0)
    return 5
def main():
    list(gen())
    catcher()
    asyncio.run(co())
p = ProcessProfile(format="text", default_log_path="out")
p.trackStack()
p.setProcessMemoryFrequence(5)
p.enable()
main()
p.disable()
""")
    run_dir = only_dir(tmp_path / "out")
    mem = parse_mem(os.path.join(run_dir, "MainThread.mem"))
    stack = parse_stack(os.path.join(run_dir, "MainThread.stack"))
    check_pairing(stack, mem)
    assert len(deltas(mem, "gen")) == 4  # three yields and the end
    assert len([s for s in stack if s[3] == "gen"]) == 4
    assert len(deltas(mem, "boom")) == 1 and len(deltas(mem, "catcher")) == 1
    assert len(deltas(mem, "co")) >= 2   # resumed after its await
    lines = read_lines(os.path.join(run_dir, "process.mem"))
    assert lines and all(PROCESS_RE.match(l) and "#" in l for l in lines)
    for name in os.listdir(run_dir):
        path = os.path.join(run_dir, name)
        if name.endswith(".mem") and name != "process.mem":
            assert all(MEM_RE.match(l) for l in read_lines(path))
        elif name.endswith(".stack"):
            assert all(STACK_RE.match(l) for l in read_lines(path))


@pytest.mark.parametrize("kwargs", ["", "aggregate=True", "format='text', native=True"])
def test_runinfo_keys_are_documented(tmp_path, kwargs):
    """Every key a run writes into runinfo.json is in docs/formats.md's example
    of it, with its meaning in that section."""
    run_scenario(tmp_path, PRELUDE + """
p = ProcessProfile(default_log_path="out", %s)
with p:
    t = threading.Thread(target=lambda: None, name="helper")
    t.start(); t.join()
""" % kwargs)
    info = load_runinfo(only_dir(tmp_path / "out"))
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "..", "..", "docs", "formats.md")) as f:
        text = f.read()
    section = text.split("## `runinfo.json`", 1)[1].split("\n## ", 1)[0]
    for key in list(info) + list(info["threads"][0]):
        assert '"%s":' % key in section, key       # in the example
        assert "`%s`" % key in section, key        # and explained


def test_runinfo_output_dir_and_errors(tmp_path):
    proc = run_scenario(tmp_path, PRELUDE + """
import json, warnings
base = os.path.abspath("out")
os.makedirs(os.path.join(base, str(os.getpid())))
open(os.path.join(base, str(os.getpid()), "old.mem"), "w").close()
p = ProcessProfile(format="text", default_log_path="out", profile="python", memory="process")
assert p.output_dir == os.path.join(base, str(os.getpid()))
p.trackStack()
with p:
    assert p.output_dir == os.path.join(base, "%d-2" % os.getpid())
    q = ProcessProfile(format="text", default_log_path="out2")
    try:
        q.enable()
    except RuntimeError as e:
        assert "already enabled" in str(e)
    else:
        raise AssertionError("second profiler enabled")
    t = threading.Thread(target=lambda: None, name="helper")
    t.start(); t.join()
print(json.dumps(p.stats()))

open("afile", "w").close()
bad = ProcessProfile(format="text", default_log_path="afile/sub")
try:
    bad.enable()
except OSError as e:
    assert "afile" in str(e), e
else:
    raise AssertionError("enable() into a file succeeded")

class Failing:
    def write(self, s):
        raise OSError(28, "No space left on device")
    def flush(self):
        pass
f = ProcessProfile(stream_factory=lambda kind: Failing(), default_log_path="out3")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    f.enable()
    sum(range(3))
    f.disable()
assert any(issubclass(w.category, RuntimeWarning) and "stopped" in str(w.message)
           for w in caught), [str(w.message) for w in caught]
""")
    stats = json.loads(proc.stdout.strip().splitlines()[-1])
    run_dir = str(tmp_path / "out" / ("%s-2" % os.path.basename(stats["output_dir"]).split("-")[0]))
    assert stats["output_dir"] == run_dir and stats["threads"] == 2 and stats["records"] > 0
    info = load_runinfo(run_dir)
    assert info["format"] == 1 and info["pid"] == int(os.path.basename(run_dir).split("-")[0])
    assert info["ppid"] > 0 and info["executable"] == sys.executable
    assert info["argv"][0].endswith("scenario.py")
    assert info["python_version"] == "%d.%d.%d" % sys.version_info[:3]
    assert info["end_time"] >= info["start_time"] > 0
    assert info["memory_mode"] == "process" and info["profile"] == "python"
    assert info["timestamps"] is True and info["stack"] is True and info["sleep_correction"]
    assert [(t["name"], t["mem"], t["stack"]) for t in info["threads"]] == [
        ("MainThread", "MainThread.mem", "MainThread.stack"),
        ("helper", "helper.mem", "helper.stack")]
    assert all(t["native_id"] > 0 and t["ident"] > 0 for t in info["threads"])
    assert stats["records"] == len(read_lines(os.path.join(run_dir, "helper.mem"))) + \
        len(read_lines(os.path.join(run_dir, "MainThread.mem")))


FLUSHER_GIVE_UP_S = 60  # a failure bound, not a timing claim


def test_records_reach_disk_without_a_trigger_before_a_kill(tmp_path):
    script = tmp_path / "s.py"
    script.write_text(PRELUDE + """
def work():
    return 1
p = ProcessProfile(format="text", default_log_path="out", profile="python")
p.enable()
for _ in range(100):
    work()
print(p.output_dir, flush=True)
threading.Event().wait()   # idle forever: only the background flusher can write
""")
    import tgtest
    env = dict(os.environ, PYTHONPATH=tgtest.PKG_PARENT)
    proc = subprocess.Popen([sys.executable, str(script)], cwd=str(tmp_path), env=env,
                            stdout=subprocess.PIPE, universal_newlines=True)
    try:
        run_dir = proc.stdout.readline().strip()
        path = os.path.join(run_dir, "MainThread.mem")
        # Only the background flusher can write while the program idles: wait
        # for its lines.  How soon (about a second) is shown in bench/, not
        # asserted here; the bound only keeps a broken flusher from hanging.
        give_up = time.monotonic() + FLUSHER_GIVE_UP_S
        count = 0
        while time.monotonic() < give_up:
            with open(path) as f:
                count = sum(1 for line in f if line.split("#", 1)[-1].startswith(str(script)))
            if count >= 100:
                break
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert count >= 100
    read_lines(path)  # complete lines only


def test_stream_factory_and_sleep_triggers(tmp_path):
    run_scenario(tmp_path, PRELUDE + KEEP + """
streams = {}
def factory(kind):
    s = Keep()
    streams[(threading.get_ident(), kind)] = s
    return s
def work():
    return [1]
p = ProcessProfile(stream_factory=factory, default_log_path="out", profile="python")
p.trackStack()
p.addSleepTrigger("threading", "Event.wait")
assert ("threading", "Event.wait") in p.sleep_triggers()
try:
    p.addSleepTrigger("time", "no_such_function")
except AttributeError:
    pass
else:
    raise AssertionError("unknown trigger accepted")
p.enable()
work()
p.disable()
mem = streams[(threading.get_ident(), "mem")].getvalue()
stack = streams[(threading.get_ident(), "stack")].getvalue()
assert "work=>" in mem and ":work\\n" in stack, (mem, stack)
# gc.txt too when the collector happened to run (docs/formats.md "gc.txt")
assert sorted(set(os.listdir(p.output_dir)) - {"gc.txt"}) == ["process.mem", "runinfo.json"]
""")


def test_stream_factory_that_lets_other_threads_attach_meanwhile(tmp_path):
    # The factory sleeps (the GIL passes) while 40 threads make their first
    # events at once: the run's thread log grows past 16 and 32 entries under an
    # open in progress, which must not keep a pointer into it (the ASan build
    # reports the read of the freed array the old code made).
    run_scenario(tmp_path, PRELUDE + KEEP + """
import json
streams = {}
def factory(kind):
    time.sleep(0.002)
    s = Keep()
    streams[(threading.get_ident(), kind)] = s
    return s
def work():
    return [1]
go = threading.Event()
def body():
    go.wait()
    work()
# Started before enable(): each attaches at its first event, all at once.
threads = [threading.Thread(target=body, name="w%d" % i) for i in range(40)]
for t in threads:
    t.start()
p = ProcessProfile(stream_factory=factory, default_log_path="out", profile="python")
p.trackStack()
p.enable()
go.set()
for t in threads:
    t.join()
p.disable()
for t in threads:
    mem = streams[(t.ident, "mem")].getvalue()
    stack = streams[(t.ident, "stack")].getvalue()
    assert "work=>" in mem and ":work\\n" in stack, (t.name, mem, stack)
with open(os.path.join(p.output_dir, "runinfo.json")) as f:
    names = [th["name"] for th in json.load(f)["threads"]]
assert sorted(n for n in names if n.startswith("w")) == sorted("w%d" % i for i in range(40))
""")


# A thread "late", started before enable(), that attaches at its first event
# (after go.set()): its stream_factory call sets in_factory and waits for
# disabled, so that a test can end the run while it attaches.  calls lists the
# factory's calls.
LATE = """
in_factory = threading.Event()
disabled = threading.Event()
calls = []
def factory(kind):
    calls.append((threading.current_thread().name, kind))
    if threading.current_thread().name == "late":
        in_factory.set()
        disabled.wait(30)
    return Keep()
def work():
    return [bytearray(100) for _ in range(10)]
go = threading.Event()
def body():
    go.wait()
    work()
late = threading.Thread(target=body, name="late")
late.start()
"""


def test_run_disabled_while_a_thread_attaches_is_not_joined(tmp_path):
    # A thread's first event calls the stream_factory; while it waits, the main
    # thread disables the run and enables a new one.  The thread must give up
    # joining the finished run (which the new one's cleared log no longer
    # describes: the old code went on with a stale log index and the old run's
    # state) and join the new run at its next event, with files of its own.
    run_scenario(tmp_path, PRELUDE + KEEP + LATE + """
import json
p = ProcessProfile(stream_factory=factory, format="text", default_log_path="out",
                   profile="python")
p.trackStack()
p.enable()
go.set()
assert in_factory.wait(30)
p.disable()
first = p.output_dir
first_count = p.stats()["threads"]
p.default_log_path = "out2"
p.enable()              # a new run while the late thread is still attaching
disabled.set()
late.join()
t2 = threading.Thread(target=body, name="again")
t2.start()
t2.join()
p.disable()
assert [c for c in calls if c[0] == "late"] == [("late", "mem"), ("late", "mem"),
                                               ("late", "stack")], calls
def names(d):
    with open(os.path.join(d, "runinfo.json")) as f:
        return [th["name"] for th in json.load(f)["threads"]]
assert names(first) and "MainThread" in names(first), names(first)  # ended normally
# ...without the late thread, which wrote nothing in it (the old code listed it)
assert "late" not in names(first), names(first)
assert first_count == len(names(first)), (first_count, names(first))
assert "late" in names(p.output_dir) and "again" in names(p.output_dir), names(p.output_dir)
""")


def test_thread_started_across_a_disable_keeps_no_profile_function(tmp_path):
    # A thread started while recording attaches in its start wrapper, which
    # calls the stream_factory; the run is disabled meanwhile.  The wrapper must
    # not install the profile function afterwards (disable() has cleared every
    # thread's): the thread runs unprofiled.
    run_scenario(tmp_path, PRELUDE + KEEP + """
in_factory = threading.Event()
disabled = threading.Event()
main_ident = threading.get_ident()
def factory(kind):
    if threading.get_ident() != main_ident:
        in_factory.set()
        disabled.wait(30)
    return Keep()
seen = []
done = threading.Event()
def body():
    seen.append(sys.getprofile())
    done.set()
p = ProcessProfile(stream_factory=factory, default_log_path="out", profile="python",
                   backend="setprofile")
p.trackStack()
p.enable()
# _thread, not threading: Thread.start() would wait for the thread to start,
# which is after the wrapper's attach.
_thread.start_new_thread(body, ())
assert in_factory.wait(30)
p.disable()
disabled.set()
assert done.wait(30)
assert seen == [None], seen
""")


def test_blocks_from_before_enable_count_zero_when_freed(tmp_path):
    run_scenario(tmp_path, PRELUDE + """
gc.disable()
old = [bytearray(%d)]
def drop_old():
    old.pop()
def make_and_drop():
    b = bytearray(%d)
    del b
p = ProcessProfile(format="text", default_log_path="out", profile="python")
p.enable()
drop_old()
make_and_drop()
p.disable()
""" % (BIG, BIG))
    main = parse_mem(os.path.join(only_dir(tmp_path / "out"), "MainThread.mem"))
    (dropped,) = deltas(main, "drop_old")
    (both,) = deltas(main, "make_and_drop")
    # The pre-existing block is unknown to the recorder: its free counts 0.
    assert abs(dropped) <= TEMPORARY_TOLERANCE, dropped
    assert abs(both) <= TEMPORARY_TOLERANCE, both


def test_enable_leaves_no_block_of_its_own_in_the_type_cache(tmp_path):
    # CPython's type attribute cache keeps a reference to each name str looked
    # up through it until a later lookup takes its slot, a slot picked by the
    # str's address.  A name str made while the hooks count and left there (a
    # text file's codec lookup makes "incrementalencoder" afresh: 59 bytes)
    # would be freed in whatever later call happens to collide with it, an
    # exact delta that changes run to run.  Clearing the cache right after
    # enable() frees every such name at once, in a known call.
    run_scenario(tmp_path, PRELUDE + """
import warnings
warnings.simplefilter("ignore", DeprecationWarning)  # 3.13: _clear_type_cache
gc.disable()
def clear_caches():
    sys._clear_type_cache()
clear_caches()        # before enable: the function's first call is behind it
p = ProcessProfile(format="text", default_log_path="out", profile="python")
p.enable()
clear_caches()
p.disable()
""")
    main = parse_mem(os.path.join(only_dir(tmp_path / "out"), "MainThread.mem"))
    assert deltas(main, "clear_caches") == [0]


def test_write_failure_stops_the_stream_and_warns(tmp_path):
    proc = run_scenario(tmp_path, PRELUDE + """
import resource, signal, warnings
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # write(2) then fails with EFBIG
def work():
    return 1
p = ProcessProfile(format="text", default_log_path="out", profile="python")
p.enable()
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))
for _ in range(2000):   # more than 4096 bytes of records
    work()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    p.disable()
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
for w in caught:
    print(w.category.__name__, w.message)
""")
    out = proc.stdout
    assert "RuntimeWarning" in out and "MainThread.mem" in out and "errno 27" in out, out
    # Written up to the limit (the last line may be cut there), nothing after.
    with open(os.path.join(only_dir(tmp_path / "out"), "MainThread.mem")) as f:
        lines = f.read().split("\n")
    assert 0 < sum(len(l) + 1 for l in lines) - 1 <= 4096
    assert all(MEM_RE.match(l) for l in lines[:-1])


NOT_UTF8 = PRELUDE + """
import resource, signal, warnings
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # write(2) then fails with EFBIG
kw = %(kw)s
# A directory whose name is not UTF-8, as os.listdir() gives it: the byte
# 0xff as a surrogate escape.
p = ProcessProfile(default_log_path=os.fsdecode(b"out\\xff"), profile="python", **kw)
def work():
    return 1
def worker():
    for _ in range(5000):
        work()
p.enable()
if kw.get("aggregate"):    # written at disable(), which fails
    worker()
    resource.setrlimit(resource.RLIMIT_FSIZE, (1, resource.RLIM_INFINITY))
else:
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))
    threads = [threading.Thread(target=worker, name="w%%d" %% i) for i in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    p.disable()
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
print(ascii(p.output_dir))
for w in caught:
    print(ascii(str(w.message)))
"""


@pytest.mark.parametrize("kw, leaf", [
    ('{"format": "text"}', "w0.mem"),                # a thread's writer
    ('{"format": "binary"}', "capture.tg"),          # the capture's writer and trailer
    ('{"aggregate": True}', "aggregate.tga"),        # the aggregate's last write
], ids=["text", "binary", "aggregate"])
def test_write_failure_names_a_path_that_is_not_utf8(tmp_path, kw, leaf):
    """A stopped stream's warning gives its path as OSError gives a filename
    (os.fsencode() turns it back into the path's bytes), not with U+FFFD in
    place of the bytes that are not UTF-8."""
    import ast
    out = run_scenario(tmp_path, NOT_UTF8 % {"kw": kw}).stdout.splitlines()
    run_dir = ast.literal_eval(out[0])
    assert os.fsencode(run_dir).endswith(b"/out\xff/" + os.fsencode(os.path.basename(run_dir)))
    said = "threadgraph: output stopped: %s: File too large (errno 27)" % os.path.join(
        run_dir, leaf)
    warned = [ast.literal_eval(l) for l in out[1:]]
    assert said in warned, warned
    assert not [w for w in warned if "\ufffd" in w], warned


def test_interpreter_exit_flushes_without_disable(tmp_path):
    run_scenario(tmp_path, PRELUDE + """
def work():
    return 1
def worker():
    work()
p = ProcessProfile(format="text", default_log_path="out", profile="python")
p.trackStack()
p.enable()
t = threading.Thread(target=worker, name="w")
t.start(); t.join()
work()
# no disable(): the atexit hook stops the profiler and flushes
""")
    run_dir = only_dir(tmp_path / "out")
    main = parse_mem(os.path.join(run_dir, "MainThread.mem"))
    assert deltas(main, "work")
    assert deltas(parse_mem(os.path.join(run_dir, "w.mem")), "work")
    assert load_runinfo(run_dir)["end_time"] is not None


def test_api_aliases_and_argument_checks(tmp_path):
    import threadgraph
    from threadgraph import ProcessProfile
    assert threadgraph.__version__ == "0.1.0"
    pairs = [("setFilter", "set_filter"), ("enableForkedProfile", "enable_forked_profile"),
             ("disableForkedProfile", "disable_forked_profile"), ("trackStack", "track_stack"),
             ("trackMemory", "track_memory"), ("trackSleeps", "track_sleeps"),
             ("logTimestamps", "log_timestamps"),
             ("setProcessMemoryFrequence", "set_process_memory_frequence"),
             ("setProcessMemoryFrequence", "set_process_memory_frequency"),
             ("addSleepTrigger", "add_sleep_trigger")]
    for camel, snake in pairs:
        assert getattr(ProcessProfile, camel) is getattr(ProcessProfile, snake)
    for bad in (dict(profile="java"), dict(memory="heap")):
        with pytest.raises(ValueError):
            ProcessProfile(**bad)
    p = ProcessProfile(format="text", default_log_path=str(tmp_path))
    assert p.output_dir == os.path.join(str(tmp_path), str(os.getpid()))
    assert not p.enabled
    p.disable()   # not enabled: nothing happens
    assert not os.listdir(str(tmp_path))


def test_multiprocessing_fork_child_is_flushed(tmp_path):
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    run_scenario(tmp_path, PRELUDE + """
import multiprocessing, warnings
warnings.simplefilter("ignore", DeprecationWarning)
def child_work():
    return 3
def child():
    child_work()   # then multiprocessing ends the child with os._exit()
p = ProcessProfile(format="text", default_log_path="out", profile="python")
p.enableForkedProfile()
p.enable()
proc = multiprocessing.get_context("fork").Process(target=child)
proc.start(); proc.join()
assert proc.exitcode == 0
p.disable()
print(proc.pid)
""")
    dirs = sorted(os.listdir(str(tmp_path / "out")))
    assert len(dirs) == 2
    found = [d for d in dirs
             if deltas(parse_mem(os.path.join(str(tmp_path / "out"), d, "MainThread.mem")),
                       "child_work")]
    assert len(found) == 1
    info = load_runinfo(os.path.join(str(tmp_path / "out"), found[0]))
    assert info["end_time"] is not None


def test_odd_function_and_file_names_stay_on_one_line(tmp_path):
    run_scenario(tmp_path, PRELUDE + r"""
src = "def f():\n    return 1\n"
ns = {}
exec(compile(src, "dir/with\nnewline\x7f.py", "exec"), ns)
f = ns["f"]
f.__code__ = f.__code__.replace(co_name="a\tb" + "n" * 100000)
p = ProcessProfile(format="text", default_log_path="out", profile="python")
p.trackStack()
p.enable()
f()
p.disable()
""")
    run_dir = only_dir(tmp_path / "out")
    mem = parse_mem(os.path.join(run_dir, "MainThread.mem"))
    stack = parse_stack(os.path.join(run_dir, "MainThread.stack"))
    check_pairing(stack, mem)
    (rec,) = [m for m in mem if m[2].startswith("a\\x09b")]
    # a name past 8192 bytes is cut there, with a hash of the whole (docs/formats.md):
    # the record stays a line the readers take (64 KiB)
    assert rec[0] == "dir/with\\x0anewline\\x7f.py" and len(rec[2]) == 8192
    assert re.match(r"^a\\x09bn+~[0-9a-f]{16}$", rec[2]), rec[2][-40:]


def test_fork_does_not_warn_and_process_file_can_be_off(tmp_path):
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    run_scenario(tmp_path, PRELUDE + """
import warnings
# Python 3.12+ warns when forking a multi-threaded process: the recorder's
# flusher thread is stopped around fork() so that it never causes that warning.
warnings.simplefilter("error", DeprecationWarning)
p = ProcessProfile(format="text", default_log_path="out")
p.setProcessMemoryFrequence(None)
p.enableForkedProfile()
p.enable()
pid = os.fork()
if pid == 0:
    p.disable()
    os._exit(0)
os.waitpid(pid, 0)
p.disable()
for d in os.listdir("out"):
    assert "process.mem" not in os.listdir(os.path.join("out", d)), d
""")


TRIGGER_SCENARIO = PRELUDE + """
sys.setswitchinterval(100)  # threads switch only when one blocks: deterministic order
gc.disable()
trigger = sys.argv[1]
keep = []
r, w = os.pipe()
started = threading.Event()

def blocking_read(fd):
    return os.readv(fd, [bytearray(1)])  # blocking I/O: not a default sleep trigger

def waiter():
    started.set()
    blocking_read(r)

def b():
    started.wait()
    keep.append(bytearray(%d))
    os.write(w, b"x")

p = ProcessProfile(format="text", default_log_path="out", profile="python", memory="process")
if trigger == "builtin":
    p.addSleepTrigger("os", "readv")
elif trigger == "python":
    p.addSleepTrigger("__main__", "blocking_read")
p.enable()
ta = threading.Thread(target=waiter, name="A")
tb = threading.Thread(target=b, name="B")
ta.start(); tb.start(); ta.join(); tb.join()
p.disable()
""" % OTHER_THREAD_BYTES


@pytest.mark.parametrize("trigger", ["none", "builtin", "python"])
def test_added_sleep_triggers_correct_blocking_calls(tmp_path, trigger):
    (tmp_path / "s.py").write_text(TRIGGER_SCENARIO)
    import tgtest
    env = dict(os.environ, PYTHONPATH=tgtest.PKG_PARENT)
    subprocess.run([sys.executable, "s.py", trigger], cwd=str(tmp_path), env=env, check=True)
    (d,) = deltas(parse_mem(os.path.join(only_dir(tmp_path / "out"), "A.mem")), "waiter")
    if trigger == "none":
        assert d >= OTHER_THREAD_BYTES * 0.9, d   # the other thread's bytes leak in
    else:
        assert d < OTHER_THREAD_BYTES * 0.1, d    # corrected away


def test_descriptors_closed_and_reused_by_the_program_are_left_alone(tmp_path):
    proc = run_scenario(tmp_path, PRELUDE + """
import warnings
p = ProcessProfile(format="text", default_log_path="out", memory="rss")
p.setProcessMemoryFrequence(10)
p.enable()
def work():
    return [0] * 100
for _ in range(100):
    work()
os.closerange(3, 1024)    # a daemon closing what it inherited, ours included
fds = [os.open("own%d.txt" % i, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
       for i in range(4)]
for _ in range(100):
    work()
p.stats()
for fd in fds:
    os.write(fd, b"program line\\n")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    p.disable()
for fd in fds:
    os.close(fd)          # still the program's: the recorder did not close them
for w in caught:
    print(w.message)
""")
    # MainThread.mem and process.mem stopped, each said; no other cause than
    # the closed descriptor (under load one run in a few said a third time:
    # the messages show which, should it happen again)
    said = proc.stdout.splitlines()
    assert all(l.endswith("Bad file descriptor (errno 9)") for l in said), said
    for name in ("MainThread.mem", "process.mem"):
        assert any(("/%s: " % name) in l for l in said), said
    for i in range(4):
        assert (tmp_path / ("own%d.txt" % i)).read_text() == "program line\n"


def test_threads_started_while_profiling_keep_their_recursion_limit(tmp_path):
    proc = run_scenario(tmp_path, PRELUDE + """
sys.setrecursionlimit(2000)
def depth_at_error():
    n = [0]
    def rec():
        n[0] += 1
        rec()
    try:
        rec()
    except RecursionError:
        return n[0]
res = {}
def run(key):
    res[key] = depth_at_error()
t = threading.Thread(target=run, args=("plain",)); t.start(); t.join()
p = ProcessProfile(format="text", default_log_path="out", profile="python")
p.enable()
t = threading.Thread(target=run, args=("profiled",)); t.start(); t.join()
p.disable()
print(res["plain"], res["profiled"])
""")
    plain, profiled = proc.stdout.split()
    assert plain == profiled


def test_realloc_counts_new_minus_old_size_exactly(tmp_path):
    proc = run_scenario(tmp_path, PRELUDE + """
import itertools
gc.disable()
p = ProcessProfile(format="text", default_log_path="out", profile="python")
p.enable()
lst = [None]                  # its item array is allocated while recording
before = sys.getsizeof(lst)
def grow():
    for _ in itertools.repeat(None, 10000):
        lst.append(None)      # many reallocs of the item array
grow()
after = sys.getsizeof(lst)
p.disable()
print(after - before)
""")
    expected = int(proc.stdout.split()[-1])
    (d,) = deltas(parse_mem(os.path.join(only_dir(tmp_path / "out"), "MainThread.mem")), "grow")
    assert expected > 10000 * 8 and d == expected


def test_many_same_named_threads_get_first_free_suffixes(tmp_path):
    run_scenario(tmp_path, PRELUDE + """
def work():
    return 1
p = ProcessProfile(format="text", default_log_path="out", profile="python")
p.enable()
for name in ["w~3"] + ["w"] * 300:
    t = threading.Thread(target=work, name=name)
    t.start(); t.join()
p.disable()
""")
    table = load_runinfo(only_dir(tmp_path / "out"))["threads"][1:]
    mems = [t["mem"] for t in table]
    assert mems[:5] == ["w~3.mem", "w.mem", "w~2.mem", "w~4.mem", "w~5.mem"]
    assert mems[-1] == "w~301.mem" and len(set(mems)) == 301


def test_accounting_names_a_thread_that_did_not_join_as_native(tmp_path):
    # The same race with accounting on: the thread still in its stream_factory
    # call when the run ends is not in runinfo.json, so the accounting does not
    # name it from the log either (the old code wrote "late" into summary.json,
    # a name runinfo.json does not have).
    run_scenario(tmp_path, PRELUDE + KEEP + LATE + """
import json
p = ProcessProfile(stream_factory=factory, format="text", default_log_path="out",
                   profile="python", accounting=True)
p.enable()
go.set()
assert in_factory.wait(30)
p.disable()
disabled.set()
late.join()
with open(os.path.join(p.output_dir, "runinfo.json")) as f:
    listed = {th["name"] for th in json.load(f)["threads"]}
with open(os.path.join(p.output_dir, "summary.json")) as f:
    summary = json.load(f)
names = {th["name"] for th in summary["threads"]}
assert "late" not in listed and "late" not in names, (listed, names)
assert not (names - listed - {n for n in names if n.startswith("native-")}), (listed, names)
""")
