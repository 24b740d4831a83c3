"""threadgraph beside other tools: profilers, coverage.py, pytest-cov, greenlet.

Real programs under `threadgraph run --format both` (or profiled with
ProcessProfile under the other tool), checked on both outputs: the capture
(decoded by the tests' own reader, tgcapture.py) and the text dumps, which must
be what the capture renders to.  On 3.12+ the recorder uses a sys.monitoring
tool id of its own and the other tool records beside it; on 3.8-3.11 the other
tool's profile function displaces ours while it is installed, and ours comes
back when it is gone (docs/architecture.md, "Another tool's profile function").
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

import tgcapture
from test_run import only_run_dir, tg, write, TIMEOUT

MONITORING = sys.version_info >= (3, 12)

# The program: `before` runs first, `during` while the other tool records,
# `after_stop` once it stopped, and `in_thread` in a thread started after that.
# It prints what the other tool saw: its output must be the same with and
# without threadgraph.
TOOL_PROGRAM = """
import sys, threading

TOOL = sys.argv[1]

def work(n):
    return [str(i) for i in range(n)]

def before(): return work(10)
def during(): return work(20)
def after_stop(): return work(30)
def in_thread(): return work(40)

def names(stats):
    return sorted({k[2] for k in stats.stats if k[0].endswith("prog.py")})

before()
if TOOL == "cProfile":
    import cProfile, pstats
    pr = cProfile.Profile()
    pr.enable()
    during()
    pr.disable()
    seen = names(pstats.Stats(pr))
elif TOOL == "profile":
    import profile, pstats
    pr = profile.Profile()
    pr.runcall(during)
    seen = names(pstats.Stats(pr))
else:
    calls = []
    def hook(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.endswith("prog.py"):
            calls.append(frame.f_code.co_name)
    sys.setprofile(hook)
    during()
    sys.setprofile(None)
    seen = sorted(set(calls))
print(TOOL, "saw", seen)
print("after", len(after_stop()))
t = threading.Thread(target=in_thread, name="late")
t.start()
t.join()
print("thread done")
"""


def records(run_dir):
    """{thread base: (calls, returns)} of the run's capture, each call and
    return as its function name; the text dumps are checked to be the capture's
    rendering on the way."""
    cap = tgcapture.load(os.path.join(run_dir, "capture.tg"))
    for name, data in cap.render().items():
        with open(os.path.join(run_dir, name), "rb") as f:
            assert f.read() == data, "%s differs from the capture's rendering" % name
    out = {}
    for stream in cap.order:
        calls, returns, _ = cap.thread_records(stream)
        out[cap.threads[stream]["base"]] = (
            [c[4].decode() for c in calls], [r[3].decode() for r in returns])
    return out


def runinfo(run_dir):
    with open(os.path.join(run_dir, "runinfo.json")) as f:
        return json.load(f)


# The pure-Python `profile` module asserts ("Bad return") on the C_RETURN of the
# sys.setprofile call that installs it, which the interpreter reports to it when
# a profile function was active at the call: on 3.8-3.11 the recorder keeps that
# event from it (spguard.c).  docs/api.md, "Other tools".
@pytest.mark.parametrize("tool", ["cProfile", "profile", "sys.setprofile"])
def test_other_profiler_inside_a_profiled_program(tmp_path, tool):
    prog = write(tmp_path / "prog.py", TOOL_PROGRAM)
    plain = subprocess.run([sys.executable, prog, tool], cwd=str(tmp_path),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=TIMEOUT)
    assert plain.returncode == 0, plain.stderr
    assert "during" in plain.stdout  # the tool works at all

    res = tg(["run", "--stack", "--format", "both", "-o", "out", "prog.py", tool], tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout == plain.stdout  # the program runs as without threadgraph

    run = only_run_dir(tmp_path / "out")
    recs = records(run)
    main_calls, main_returns = recs["MainThread"]
    late_calls, late_returns = recs["late"]
    # Recorded again once the other tool stopped, in this thread and a later one.
    for fn in ("before", "after_stop"):
        assert fn in main_calls and fn in main_returns, fn
    assert "in_thread" in late_calls and "in_thread" in late_returns
    assert late_calls.count("work") == late_returns.count("work") == 1
    info = runinfo(run)
    assert info["dropped"] == 0
    if MONITORING:
        # Both record: threadgraph through its own tool id, never PROFILER_ID.
        assert info["backend"] == "monitoring" and info["monitoring_tool"] in (3, 4)
        assert "during" in main_calls and "during" in main_returns
        assert info["displaced"] == 0 and info["unwound"] == 0
    else:
        # The other tool held the thread meanwhile: said, never silent.
        assert "during" not in main_returns
        assert info["displaced"] >= 1
        assert "records lost:" in res.stderr.strip().splitlines()[-1]
        assert "takeovers by another profiler" in res.stderr.strip().splitlines()[-1]


def test_profile_function_taken_in_enable_comes_back(tmp_path):
    """ProcessProfile in-process (binary only): sys.setprofile's function runs
    alone while installed; disable() warns about the takeover."""
    prog = write(tmp_path / "prog.py", """
        import sys, warnings
        from threadgraph import ProcessProfile

        def f(): return [0] * 100
        def g(): return [1] * 100
        seen = []
        p = ProcessProfile(default_log_path="out")
        p.enable()
        sys.setprofile(lambda frame, ev, arg: seen.append(ev))
        f()
        sys.setprofile(None)
        x = [None] * 10  # an allocation: the recorder looks here
        g()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            p.disable()
        print("hook events", len(seen) > 0)
        print("warnings", [str(m.message) for m in w])
        print("stats", p.stats()["displaced"], p.stats()["monitoring_tool"])
    """)
    res = subprocess.run([sys.executable, prog], cwd=str(tmp_path), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True, timeout=TIMEOUT)
    assert res.returncode == 0, res.stderr
    assert "hook events True" in res.stdout
    recs = records_binary(only_run_dir(tmp_path / "out"))
    calls, returns = recs["MainThread"]
    assert "g" in calls and "g" in returns
    if MONITORING:
        assert "f" in returns
        assert "stats 0 " in res.stdout and "takeovers" not in res.stdout
    else:
        assert "f" not in returns
        assert "stats 1 None" in res.stdout
        assert "1 takeovers by another profiler" in res.stdout


def records_binary(run_dir):
    cap = tgcapture.load(os.path.join(run_dir, "capture.tg"))
    out = {}
    for stream in cap.order:
        calls, returns, _ = cap.thread_records(stream)
        out[cap.threads[stream]["base"]] = (
            [c[4].decode() for c in calls], [r[3].decode() for r in returns])
    return out


# --- coverage.py and pytest-cov ---------------------------------------------------

MOD = """
def covered(n):
    total = 0
    for i in range(n):
        total += i
    return [total] * 10

def also_covered():
    return covered(3)
"""


def coverage_json(tmp_path, data_file):
    """{file name: executed lines} and the missing lines, from `coverage json`."""
    out = tmp_path / "cov.json"
    res = subprocess.run([sys.executable, "-m", "coverage", "json", "--data-file", data_file,
                          "-o", str(out)], cwd=str(tmp_path), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True, timeout=TIMEOUT)
    assert res.returncode == 0, res.stderr
    with open(str(out)) as f:
        files = json.load(f)["files"]
    return {os.path.basename(k): v for k, v in files.items()}


def test_coverage_run_over_a_profiled_program(tmp_path):
    pytest.importorskip("coverage", reason="coverage.py is not installed (tests/run_pythons.sh "
                        "installs it where a wheel exists)")
    write(tmp_path / "mod.py", MOD)
    prog = write(tmp_path / "prog.py", """
        from threadgraph import ProcessProfile
        import mod
        p = ProcessProfile(default_log_path="out", format="both")
        p.enable()
        mod.also_covered()
        p.disable()
        print("ok")
    """)
    res = subprocess.run([sys.executable, "-m", "coverage", "run", "--data-file", ".cov",
                          prog], cwd=str(tmp_path), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True, timeout=TIMEOUT)
    assert res.returncode == 0 and res.stdout == "ok\n", res.stderr
    files = coverage_json(tmp_path, ".cov")
    assert files["mod.py"]["missing_lines"] == []  # every line of the module ran
    assert files["prog.py"]["missing_lines"] == []
    calls, returns = records(only_run_dir(tmp_path / "out"))["MainThread"]
    for fn in ("also_covered", "covered"):
        assert fn in calls and fn in returns


def test_threadgraph_run_over_a_program_using_coverage(tmp_path):
    pytest.importorskip("coverage", reason="coverage.py is not installed (tests/run_pythons.sh "
                        "installs it where a wheel exists)")
    write(tmp_path / "mod.py", MOD)
    write(tmp_path / "prog.py", """
        import coverage
        cov = coverage.Coverage(data_file=".cov", include=["*mod.py"])
        cov.start()
        import mod
        mod.also_covered()
        cov.stop()
        cov.save()
        mod.covered(2)  # after coverage stopped: recorded still
        print("ok")
    """)
    # Only the program's own files: coverage.py's own calls are many, and the
    # tests' Python reader of the capture is slow.
    res = tg(["run", "--stack", "--format", "both", "--filter", str(tmp_path), "-o", "out",
              "prog.py"], tmp_path)
    assert res.returncode == 0 and res.stdout == "ok\n", res.stderr
    files = coverage_json(tmp_path, ".cov")
    assert files["mod.py"]["missing_lines"] == []
    calls, returns = records(only_run_dir(tmp_path / "out"))["MainThread"]
    assert calls.count("covered") == returns.count("covered") == 2
    assert "also_covered" in returns
    assert runinfo(only_run_dir(tmp_path / "out"))["displaced"] == 0


def test_pytest_cov_over_profiled_tests(tmp_path):
    pytest.importorskip("pytest_cov", reason="pytest-cov is not installed "
                        "(tests/run_pythons.sh installs it where a wheel exists)")
    write(tmp_path / "mod.py", MOD)
    write(tmp_path / "test_mod.py", """
        import os
        from threadgraph import ProcessProfile
        import mod

        def test_it():
            p = ProcessProfile(default_log_path=os.path.join(os.path.dirname(__file__), "out"))
            p.enable()
            assert mod.also_covered() == [3] * 10
            p.disable()
    """)
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "--cov=mod", "--cov-report=term-missing", "test_mod.py"],
                         cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, timeout=TIMEOUT)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1 passed" in res.stdout
    line = [ln for ln in res.stdout.splitlines() if ln.startswith("mod.py")]
    assert line and line[0].split()[3] == "100%", res.stdout
    calls, returns = records_binary(only_run_dir(tmp_path / "out"))["MainThread"]
    for fn in ("also_covered", "covered"):
        assert fn in calls and fn in returns


# --- a stack that repairs itself ------------------------------------------------------


GREENLET_SKIP = ("greenlet is not installed (tests/run_pythons.sh installs it where a "
                 "wheel exists)")


def mem_lines(run, base):
    """{function: [delta, ...]} of RUN's BASE.mem."""
    out = {}
    with open(os.path.join(run, base + ".mem")) as f:
        for ln in f:
            rec, delta = ln.rstrip("\n").rsplit("=>", 1)
            out.setdefault(rec.rsplit(":", 1)[1], []).append(int(delta))
    return out


def test_greenlet_stack_per_greenlet(tmp_path):
    """Each greenlet keeps its own stack and counters: every call made across
    switches pairs with its return, none is unwound, and a call's delta is
    its own greenlet's memory, not what the others allocated meanwhile.
    greenlet is imported by the program, after the recorder started."""
    pytest.importorskip("greenlet", reason=GREENLET_SKIP)
    write(tmp_path / "prog.py", """
        import greenlet

        def inner():
            x = bytearray(100000)
            main.switch()  # leaves run_g, outer and inner open
            return len(x)
        def outer():
            return inner()
        def run_g():
            y = bytearray(300000)
            outer()
            return len(y)
        def switch_away():
            g.switch()
        def after():
            return [1] * 10

        main = greenlet.getcurrent()
        g = greenlet.greenlet(run_g)
        switch_away()   # g runs until inner switches back
        after()
        switch_away()   # g resumes inside inner and finishes
        print("ok", g.dead)
    """)
    res = tg(["run", "--stack", "--format", "both", "-o", "out", "prog.py"], tmp_path)
    assert res.returncode == 0 and res.stdout == "ok True\n", res.stderr
    run = only_run_dir(tmp_path / "out")
    recs = records(run)
    calls, returns = recs["MainThread-greenlet-1"]
    for fn in ("run_g", "outer", "inner"):
        assert calls.count(fn) == 1 and returns.count(fn) == 1, (fn, calls, returns)
    calls, returns = recs["MainThread"]
    assert calls.count("switch_away") == 2 and returns.count("switch_away") == 2
    assert "run_g" not in calls and "after" in returns
    info = runinfo(run)
    assert info["unwound"] == 0 and info["dropped"] == 0
    assert "unwound" not in res.stderr
    names = [t["name"] for t in info["threads"]]
    assert names == ["MainThread", "MainThread-greenlet-1"], names
    # deltas: the greenlet's own blocks in its calls (x is alive at inner's
    # return and freed after it, y alive at run_g's), none of them in the main
    # greenlet's switch calls
    g = mem_lines(run, "MainThread-greenlet-1")
    assert 100000 <= g["inner"][0] < 100000 + 4096, g
    assert 300000 <= g["run_g"][0] < 300000 + 8192, g
    m = mem_lines(run, "MainThread")
    assert all(abs(d) < 4096 for d in m["switch_away"]), m
    # the CLI reads the greenlet's files as a thread's
    peaks = tg(["peaks", os.path.join(run, "MainThread-greenlet-1.mem")], tmp_path)
    assert peaks.returncode == 0 and "run_g" in peaks.stdout, peaks.stdout + peaks.stderr


def test_greenlets_in_threads_and_their_end(tmp_path):
    """Greenlets of several threads (greenlet imported before enable()): each
    thread's greenlets are its own, every greenlet that finished has its files
    closed at its end, and no call is unwound."""
    pytest.importorskip("greenlet", reason=GREENLET_SKIP)
    prog = write(tmp_path / "prog.py", """
        import threading
        import greenlet
        from threadgraph import ProcessProfile

        def leaf(i):
            return bytearray(1000 * (i + 1))
        def step(i, parent):
            keep = leaf(i)
            parent.switch(i)
            return len(keep)
        def worker():
            here = greenlet.getcurrent()
            gs = [greenlet.greenlet(step) for _ in range(3)]
            for i, g in enumerate(gs):
                g.switch(i, here)
            for g in gs:
                g.switch()
            assert all(g.dead for g in gs)

        p = ProcessProfile(default_log_path="out", format="both")
        p.trackStack()
        p.enable()
        ts = [threading.Thread(target=worker, name="w%d" % n) for n in range(2)]
        for t in ts: t.start()
        for t in ts: t.join()
        worker()
        p.disable()
        print(p.stats()["unwound"])
    """)
    res = subprocess.run([sys.executable, prog], cwd=str(tmp_path), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True, timeout=TIMEOUT)
    assert res.returncode == 0 and res.stdout == "0\n", res.stdout + res.stderr
    run = only_run_dir(tmp_path / "out")
    recs = records(run)
    names = sorted(recs)
    for th in ("MainThread", "w0", "w1"):
        gl = [n for n in names if n.startswith(th + "-greenlet-")]
        assert len(gl) == 3, names
        for n in gl:
            calls, returns = recs[n]
            assert calls.count("step") == 1 and returns.count("step") == 1, (n, calls, returns)
            assert calls.count("leaf") == 1 and returns.count("leaf") == 1
    for th in ("w0", "w1"):
        calls, returns = recs[th]
        assert "worker" in returns and "step" not in calls


def test_gevent_greenlets_recorded_by_name(tmp_path):
    """gevent: each spawned Greenlet is recorded under its own name, its
    handler's call paired with its return across the hub's switches (a
    monkey-patched sleep), and its delta its own data, not the others'."""
    pytest.importorskip("gevent", reason="gevent is not installed (tests/run_pythons.sh "
                        "installs it where a wheel exists)")
    write(tmp_path / "prog.py", """
        from gevent import monkey; monkey.patch_all()
        import gevent, time

        def handler(i):
            data = bytearray(100000 * (i + 1))
            time.sleep(0.01)  # gevent's: switches to the hub
            return len(data)

        jobs = [gevent.spawn(handler, i) for i in range(4)]
        gevent.joinall(jobs)
        print(sum(j.value for j in jobs))
    """)
    res = tg(["run", "--stack", "--format", "both", "-o", "out", "prog.py"], tmp_path)
    assert res.returncode == 0 and res.stdout == "1000000\n", res.stderr
    run = only_run_dir(tmp_path / "out")
    info = runinfo(run)
    assert info["unwound"] == 0 and info["dropped"] == 0
    recs = records(run)
    mine = sorted(n for n in recs if n.startswith("MainThread-Greenlet-"))
    assert len(mine) == 4, sorted(recs)
    sizes = []
    for n in mine:
        calls, returns = recs[n]
        assert calls.count("handler") == 1 and returns.count("handler") == 1, n
        sizes.append(mem_lines(run, n)["handler"][0])
    # each handler's delta is its own bytearray (alive at its return), to a page
    assert sorted(round(d / 100000.0) for d in sizes) == [1, 2, 3, 4], sizes
    for d in sizes:
        assert abs(d - 100000 * round(d / 100000.0)) < 4096, sizes


def test_greenlet_hook_replaced_unwinds_and_counts(tmp_path):
    """A program that replaces greenlet's switch hook with one that does not
    call the one it replaced hides its switches from the recorder: a greenlet
    then runs on its thread's stack, and the main greenlet's next return closes
    the calls it left open as unwound (counted), the stream still pairing."""
    pytest.importorskip("greenlet", reason=GREENLET_SKIP)
    write(tmp_path / "prog.py", """
        import greenlet
        greenlet.settrace(lambda event, args: None)  # not chained

        def inner():
            main.switch()  # leaves run_g, outer and inner open, never resumed
        def outer():
            inner()
        def run_g():
            outer()
        def switch_away():
            g.switch()
        def after():
            return [1] * 10

        main = greenlet.getcurrent()
        g = greenlet.greenlet(run_g)
        switch_away()
        after()
        print("ok")
    """)
    res = tg(["run", "--stack", "--format", "both", "-o", "out", "prog.py"], tmp_path)
    assert res.returncode == 0 and res.stdout == "ok\n", res.stderr
    run = only_run_dir(tmp_path / "out")
    calls, returns = records(run)["MainThread"]
    # switch_away's return closes the calls made in g: run_g, outer, inner and
    # the C call main.switch (g.switch, made from switch_away, is closed too).
    for fn in ("run_g", "outer", "inner"):
        assert fn in calls, fn
    assert "switch_away" in returns and "after" in returns
    info = runinfo(run)
    assert info["unwound"] >= 4 and info["dropped"] == 0
    assert "calls unwound" in res.stderr.strip().splitlines()[-1]
    # The CLI reads the capture's UNWOUND events as the tests' reader does: its
    # export is the text files the recorder wrote.
    exp_dir = tmp_path / "exp"
    exp_dir.mkdir()
    shutil.copy(os.path.join(run, "capture.tg"), str(exp_dir))
    exp = tg(["export", str(exp_dir)], tmp_path)
    assert exp.returncode == 0, exp.stderr
    for name in ("MainThread.mem", "MainThread.stack"):
        with open(os.path.join(run, name), "rb") as a, open(str(exp_dir / name), "rb") as b:
            assert a.read() == b.read(), name


def test_unwound_calls_across_capture_segments(tmp_path):
    """With max_size, a segment's head holds the calls open where it starts: the
    recorder's own decoding of the stream follows UNWOUND too, so a reader that
    starts at a later segment pairs every return."""
    pytest.importorskip("greenlet", reason=GREENLET_SKIP)
    prog = write(tmp_path / "prog.py", """
        import greenlet
        from threadgraph import ProcessProfile

        def inner(): main.switch()
        def outer(): inner()
        def run_g(): outer()
        def switch_away(g): g.switch()
        def work(): return [str(i) for i in range(20)]

        main = greenlet.getcurrent()
        p = ProcessProfile(default_log_path="out", max_size="256K")
        p.enable()
        greenlet.settrace(lambda event, args: None)  # switches unseen (not chained)
        kept = []
        for i in range(12000):
            g = greenlet.greenlet(run_g)
            kept.append(g)  # never resumed nor collected while recording
            switch_away(g)
            work()
        p.disable()
        print(p.stats()["unwound"])
    """)
    res = subprocess.run([sys.executable, "-W", "ignore", prog], cwd=str(tmp_path),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, timeout=TIMEOUT)
    assert res.returncode == 0, res.stderr
    assert int(res.stdout) == 4 * 12000
    run = only_run_dir(tmp_path / "out")
    segments = sorted(f for f in os.listdir(run) if f.startswith("capture-"))
    assert segments and segments[0] != "capture-000001.tg"  # the first ones were dropped
    exp = tg(["export", run], tmp_path)
    assert exp.returncode == 0 and "error" not in exp.stderr, exp.stderr
    with open(os.path.join(run, "MainThread.mem")) as f:
        lines = f.read().splitlines()
    assert any(":work=>" in ln for ln in lines) and any(":switch_away=>" in ln for ln in lines)


def test_threading_setprofile_for_later_threads(tmp_path):
    """threading.setprofile's function runs alone in the threads started while it
    is set; threads started after it is cleared are recorded."""
    write(tmp_path / "prog.py", """
        import sys, threading

        def work(n): return [str(i) for i in range(n)]
        def hooked(): return work(10)
        def later(): return work(20)
        seen = []
        def hook(frame, event, arg):
            if event == "call" and frame.f_code.co_filename.endswith("prog.py"):
                seen.append(frame.f_code.co_name)

        threading.setprofile(hook)
        t = threading.Thread(target=hooked, name="hooked")
        t.start(); t.join()
        threading.setprofile(None)
        t = threading.Thread(target=later, name="later")
        t.start(); t.join()
        print(sorted(set(seen)))
    """)
    plain = subprocess.run([sys.executable, "prog.py"], cwd=str(tmp_path),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=TIMEOUT)
    assert plain.returncode == 0 and "hooked" in plain.stdout, plain.stderr
    res = tg(["run", "--stack", "--format", "both", "-o", "out", "prog.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout == plain.stdout
    run = only_run_dir(tmp_path / "out")
    recs = records(run)
    calls, returns = recs["later"]
    assert "later" in calls and "later" in returns and returns.count("work") == 1
    info = runinfo(run)
    if MONITORING:
        assert "hooked" in recs["hooked"][1] and info["displaced"] == 0
    else:
        assert "hooked" not in recs["hooked"][1]
        assert info["displaced"] == 1


def test_yappi_with_threads_beside_the_recorder(tmp_path):
    """yappi writes its profile function into every thread state, and removes
    it the same way, with no audit event: threads that stayed idle while it
    ran (no call to notice it by) are recorded again after yappi.stop(), and
    every thread it held is counted once."""
    pytest.importorskip("yappi")
    write(tmp_path / "prog.py", """
        import threading
        import yappi

        def work(n): return [str(i) for i in range(n)]
        def phase0(): return work(10)
        def phase1(): return work(20)
        def phase2(): return work(30)
        def late(): return work(40)
        go0, go2 = threading.Event(), threading.Event()
        done = threading.Semaphore(0)

        def worker():
            go0.wait(); phase0(); done.release()
            go2.wait(); phase2(); done.release()   # idle all through yappi

        workers = [threading.Thread(target=worker, name="w%d" % i) for i in range(2)]
        for w in workers: w.start()
        go0.set(); phase0(); done.acquire(); done.acquire()
        yappi.start()
        phase1()
        yappi.stop()
        names = sorted({s.name for s in yappi.get_func_stats()
                        if s.module.endswith("prog.py") and s.name.startswith("phase")})
        print("yappi saw", names)
        go2.set(); phase2(); done.acquire(); done.acquire()
        for w in workers: w.join()
        t = threading.Thread(target=late, name="late"); t.start(); t.join()
        print("done")
    """)
    plain = subprocess.run([sys.executable, "prog.py"], cwd=str(tmp_path),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=TIMEOUT)
    assert plain.returncode == 0 and "yappi saw ['phase1']" in plain.stdout, plain.stderr
    res = tg(["run", "--stack", "--format", "both", "-o", "out", "prog.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout == plain.stdout
    run = only_run_dir(tmp_path / "out")
    recs = records(run)
    for name in ("MainThread", "w0", "w1"):
        calls, returns = recs[name]
        assert calls.count("phase0") == 1 and returns.count("phase0") == 1, name
        assert calls.count("phase2") == 1 and returns.count("phase2") == 1, name
    assert "late" in recs["late"][1]
    info = runinfo(run)
    if MONITORING:
        assert "phase1" in recs["MainThread"][1]
    else:
        assert "phase1" not in recs["MainThread"][1]
        # the main thread and the two idle workers, once each
        assert info["displaced"] == 3, info


@pytest.mark.skipif(not MONITORING,
                    reason="3.8-3.11 run the setprofile backend by default "
                    "(test_other_profiler_inside_a_profiled_program covers it)")
def test_setprofile_backend_takeover_is_counted(tmp_path):
    """backend="setprofile" on 3.12+: the program's function runs alone; the
    takeover is counted and said, though ours does not come back."""
    write(tmp_path / "prog.py", TOOL_PROGRAM)
    res = tg(["run", "--backend", "setprofile", "-o", "out", "prog.py", "sys.setprofile"],
             tmp_path)
    assert res.returncode == 0, res.stderr
    assert "sys.setprofile saw ['during', 'work']" in res.stdout
    info = runinfo(only_run_dir(tmp_path / "out"))
    assert info["backend"] == "setprofile" and info["displaced"] == 1
    assert "1 takeovers by another profiler" in res.stderr.strip().splitlines()[-1]


# --- sys.monitoring tool ids taken by the program (3.12+) -------------------------

TOOL_ID_PROGRAM = """
import sys, threading

IDS = [int(a) for a in sys.argv[1].split(",")]
M = sys.monitoring
E = M.events

def work(n):
    return [str(i) for i in range(n)]

def during(): return work(20)
def after_free(): return work(30)
def in_thread(): return work(40)

counts = dict.fromkeys(IDS, 0)
for i in IDS:
    M.use_tool_id(i, "tool%d" % i)
    def on_start(code, offset, i=i):
        if code.co_filename == __file__:
            counts[i] += 1
    M.register_callback(i, E.PY_START, on_start)
    M.set_events(i, E.PY_START)
during()
for i in IDS:
    M.set_events(i, 0)
    M.register_callback(i, E.PY_START, None)
    M.free_tool_id(i)
print("counts", counts)
print("after", len(after_free()))
t = threading.Thread(target=in_thread, name="late")
t.start()
t.join()
print("thread done")
"""


@pytest.mark.skipif(not MONITORING, reason="sys.monitoring is 3.12+")
@pytest.mark.parametrize("ids", ["3", "4,3", "0,1,2,3,4,5"])
def test_program_taking_our_tool_id(tmp_path, ids):
    """A program may take any tool id, 3 and 4 included: it gets it under
    threadgraph run as without it.  The recorder moves to the other id it may
    use; with both taken it records nothing until the program frees one, and
    says so (displaced)."""
    prog = write(tmp_path / "prog.py", TOOL_ID_PROGRAM)
    plain = subprocess.run([sys.executable, prog, ids], cwd=str(tmp_path),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=TIMEOUT)
    assert plain.returncode == 0, plain.stderr
    assert "counts {%s}" % ", ".join("%s: 2" % i for i in ids.split(",")) in plain.stdout

    res = tg(["run", "--stack", "--format", "both", "-o", "out", "prog.py", ids], tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout == plain.stdout  # the tool got its id and saw every call

    run = only_run_dir(tmp_path / "out")
    recs = records(run)
    main_calls, main_returns = recs["MainThread"]
    assert "after_free" in main_calls and "after_free" in main_returns
    assert "in_thread" in recs["late"][0] and "in_thread" in recs["late"][1]
    info = runinfo(run)
    assert info["backend"] == "monitoring" and info["dropped"] == 0
    if "3" in ids and "4" in ids:
        assert "during" not in main_returns
        assert info["displaced"] == 1
        assert "1 takeovers by another profiler" in res.stderr.strip().splitlines()[-1]
    else:
        assert "during" in main_calls and "during" in main_returns
        assert info["displaced"] == 0 and info["monitoring_tool"] in (3, 4)


@pytest.mark.skipif(not MONITORING, reason="sys.monitoring is 3.12+")
def test_run_with_tool_ids_taken_before_it_says_so(tmp_path):
    """Tool ids 3 and 4 taken before threadgraph run enables (a sitecustomize):
    backend auto says the fallback as one of run's lines, not as a Python
    warning; --backend monitoring refuses in one line, without a traceback."""
    write(tmp_path / "site" / "sitecustomize.py", """
        import sys
        for tool in range(6):
            sys.monitoring.use_tool_id(tool, "site tool %d" % tool)
    """)
    write(tmp_path / "prog.py", """
        def work(): return [1] * 10
        work()
        print("ok")
    """)
    env = {"PYTHONPATH": str(tmp_path / "site")}
    res = tg(["run", "-o", "out", "prog.py"], tmp_path, env=env)
    assert res.returncode == 0 and res.stdout == "ok\n", res.stderr
    first = res.stderr.splitlines()[0]
    assert first == ("threadgraph: sys.monitoring tool ids 3 and 4 are both taken by other "
                     "tools: recording with a profile function (backend 'setprofile') "
                     "instead"), res.stderr
    assert "Warning" not in res.stderr and "profiler.py" not in res.stderr
    info = runinfo(only_run_dir(tmp_path / "out"))
    assert info["backend"] == "setprofile"

    res = tg(["run", "--backend", "monitoring", "-o", "out2", "prog.py"], tmp_path, env=env)
    assert res.returncode == 1 and res.stdout == "", res.stderr
    assert res.stderr == ("threadgraph run: cannot record: sys.monitoring: tool ids 3 and 4, the "
                          "ones threadgraph may use, are both taken by other tools\n")
    assert not os.path.exists(str(tmp_path / "out2")) or not os.listdir(str(tmp_path / "out2"))


# --- tracemalloc inside a profiled program -----------------------------------------
#
# tracemalloc wraps the three allocator domains as the recorder does, and its
# stop() sets each back to what it found at its start: started before the
# recorder (PYTHONTRACEMALLOC, -X tracemalloc), that drops the recorder's
# wrappers with it, and the recorder puts them back at once (tmstop.h).  The
# program's own tracemalloc figures must be right and every thread's deltas
# exact before and after stop().

# Three threads named TAG0..TAG2 that each grow 3 temporaries of 100000 *
# (i + 1) bytes (check_grow_deltas reads them); the programs below use it.
GROW_THREADS = """
def grow(n):
    return bytearray(n)  # the caller drops it: the delta is n and a header
def worker(i):
    for _ in range(3):
        grow(100000 * (i + 1))
def threads(tag):
    ts = [threading.Thread(target=worker, args=(i,), name="%s%d" % (tag, i)) for i in range(3)]
    for t in ts: t.start()
    for t in ts: t.join()
"""

TRACEMALLOC_PROGRAM = """
import os, sys, threading, tracemalloc

START = sys.argv[1]  # "program": start() here; "before": PYTHONTRACEMALLOC did

""" + GROW_THREADS + """
def keep():
    global kept
    kept = [bytearray(200000) for _ in range(5)]
def after():
    return len(grow(300000))

if START == "program":
    tracemalloc.start()
print("tracing", tracemalloc.is_tracing())
threads("during")
keep()
stats = tracemalloc.take_snapshot().statistics("filename")
# by base name: on 3.8 `threadgraph run` compiles the script with its absolute
# path while __file__ stays as given
mine = [s for s in stats if os.path.basename(s.traceback[0].filename) == "prog.py"]
print("kept traced", len(mine) == 1 and mine[0].size >= 1000000)
tracemalloc.stop()
print("tracing", tracemalloc.is_tracing())
print("after", after())
threads("stopped")
print("done")
"""

# A thread's delta of `grow(n)`: n plus the bytearray's header, within a
# page (an allocator's rounding, never a missed block of n bytes).
NEAR = 4096


def check_grow_deltas(run, bases):
    for base in bases:
        m = mem_lines(run, base)
        i = int(base[-1])
        assert len(m["grow"]) == 3, (base, m)
        for d in m["grow"]:
            assert 100000 * (i + 1) <= d < 100000 * (i + 1) + NEAR, (base, m)


@pytest.mark.parametrize("start", ["program", "before"])
@pytest.mark.parametrize("mode", ["full", "native"])
def test_tracemalloc_inside_a_profiled_program(tmp_path, start, mode):
    """tracemalloc started by the program or before it (PYTHONTRACEMALLOC),
    stopped by the program, with three threads before and after its stop():
    output and status as without threadgraph, and every delta exact."""
    prog = write(tmp_path / "prog.py", TRACEMALLOC_PROGRAM)
    env = dict(os.environ, PYTHONTRACEMALLOC="1" if start == "before" else "0")
    plain = subprocess.run([sys.executable, prog, start], cwd=str(tmp_path), env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=TIMEOUT)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout == ("tracing True\nkept traced True\ntracing False\n"
                            "after 300000\ndone\n"), plain.stdout

    args = ["run", "--format", "both", "-o", "out"] + (["--native"] if mode == "native" else [])
    res = tg(args + ["prog.py", start], tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    assert res.stdout == plain.stdout

    run = only_run_dir(tmp_path / "out")
    info = runinfo(run)
    assert info["dropped"] == 0 and info["unwound"] == 0 and info["displaced"] == 0
    main = mem_lines(run, "MainThread")
    assert 1000000 <= main["keep"][0] < 1000000 + 4 * NEAR, main
    # after tracemalloc.stop(): the main thread's and later threads' blocks
    assert 300000 <= main["grow"][-1] < 300000 + NEAR, main
    check_grow_deltas(run, ["during0", "during1", "during2",
                            "stopped0", "stopped1", "stopped2"])


def test_tracemalloc_sampled_after_stop(tmp_path):
    """--sampled: each thread's exact figures (summary.json) after tracemalloc,
    started before the recorder, stopped."""
    prog = write(tmp_path / "prog.py", TRACEMALLOC_PROGRAM)
    env = dict(os.environ, PYTHONTRACEMALLOC="1")
    res = tg(["run", "--sampled", "-o", "out", "prog.py", "before"], tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    assert "after 300000\ndone\n" in res.stdout
    run = only_run_dir(tmp_path / "out")
    assert runinfo(run)["dropped"] == 0
    with open(os.path.join(run, "summary.json")) as f:
        threads = {t["base"]: t for t in json.load(f)["threads"]}
    for i in range(3):
        t = threads["stopped%d" % i]
        n = 100000 * (i + 1)
        # grow() holds one block of n bytes at a time, three times
        assert n <= t["peak_bytes"] < n + 4 * NEAR, t
        assert 3 * n <= t["total_requested_bytes"] < 3 * n + 4 * NEAR, t


# tracemalloc's start and stop on either side of enable() and disable(), in
# process, with a second profile after them: the recorder's wrappers are in
# the chain exactly once in each profile (no block missed, none counted twice).
TRACEMALLOC_INPROCESS = """
import sys, threading, tracemalloc
from threadgraph import ProcessProfile

ORDER = sys.argv[1]

""" + GROW_THREADS + """
def profile(out, tag, start=False, stop=False):
    p = ProcessProfile(default_log_path=out, format="text")
    p.enable()
    if start:
        tracemalloc.start()
    threads(tag)
    if stop:
        tracemalloc.stop()
    threads(tag + "x")
    p.disable()

if ORDER == "start-before-stop-after":
    tracemalloc.start()
    profile("out1", "a")
    tracemalloc.stop()
elif ORDER == "start-inside-stop-after":
    profile("out1", "a", start=True)
    tracemalloc.stop()
elif ORDER == "start-before-stop-inside":
    tracemalloc.start()
    profile("out1", "a", stop=True)
elif ORDER == "start-inside-stop-next":
    profile("out1", "a", start=True)
    tracemalloc.start()
    p = ProcessProfile(default_log_path="out2", format="text")
    p.enable()
    tracemalloc.stop()
    p.disable()
profile("out2" if ORDER != "start-inside-stop-next" else "out3", "b")
print("done", tracemalloc.is_tracing())
"""


@pytest.mark.parametrize("order", ["start-before-stop-after", "start-inside-stop-after",
                                   "start-before-stop-inside", "start-inside-stop-next"])
def test_tracemalloc_around_enable_and_disable(tmp_path, order):
    prog = write(tmp_path / "prog.py", TRACEMALLOC_INPROCESS)
    res = subprocess.run([sys.executable, prog, order], cwd=str(tmp_path),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, timeout=TIMEOUT)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "done False\n", res.stdout + res.stderr
    check_grow_deltas(only_run_dir(tmp_path / "out1"), ["a0", "a1", "a2", "ax0", "ax1", "ax2"])
    last = "out3" if order == "start-inside-stop-next" else "out2"
    check_grow_deltas(only_run_dir(tmp_path / last), ["b0", "b1", "b2", "bx0", "bx1", "bx2"])


# --- memray.Tracker inside a profiled program ----------------------------------------
#
# memray.Tracker saves sys.getprofile() at its start and gives it back to
# sys.setprofile() at its exit: while the recorder holds the thread (its
# profile function, 3.8-3.11 or backend="setprofile"), that is the recorder's
# object, which must work as a profile function (spguard.c puts the
# recorder's C function back; Recorder.__call__ otherwise).

MEMRAY_PROGRAM = """
import os, sys, threading, memray
from memray import FileReader

""" + GROW_THREADS + """
with memray.Tracker("memray.bin", trace_python_allocators=sys.argv[1] == "python-allocators"):
    threads("during")
threads("after")
big = [a for a in FileReader("memray.bin").get_allocation_records() if a.size >= 100000]
print("memray saw", len(big), sorted({a.size // 100000 for a in big}))
"""


@pytest.mark.parametrize("allocators", ["python-allocators", "malloc"])
def test_memray_tracker_inside_a_profiled_program(tmp_path, allocators):
    pytest.importorskip("memray", reason="memray is not installed (no wheel for this Python)")
    prog = write(tmp_path / "prog.py", MEMRAY_PROGRAM)
    plain = subprocess.run([sys.executable, prog, allocators], cwd=str(tmp_path),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=TIMEOUT)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout == "memray saw 9 [1, 2, 3]\n", plain.stdout
    os.remove(str(tmp_path / "memray.bin"))

    res = tg(["run", "--format", "both", "-o", "out", "prog.py", allocators], tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout == plain.stdout  # memray's own results too

    run = only_run_dir(tmp_path / "out")
    info = runinfo(run)
    assert info["dropped"] == 0 and info["unwound"] == 0
    # recorded again once memray stopped, exactly
    check_grow_deltas(run, ["after0", "after1", "after2"])
    if MONITORING:
        assert info["displaced"] == 0
        check_grow_deltas(run, ["during0", "during1", "during2"])
    else:
        # memray's profile function held the threads meanwhile: said
        assert info["displaced"] >= 1
        assert "takeovers by another profiler" in res.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("backend", ["setprofile", "auto"])
def test_profile_function_saved_and_restored(tmp_path, backend):
    """The save-and-restore pattern by hand, around another profile function
    and around disable(): sys.getprofile()'s object given back to
    sys.setprofile() records again (while recording) or leaves no function
    (after disable()), never an error."""
    prog = write(tmp_path / "prog.py", """
        import sys, threading
        from threadgraph import ProcessProfile

        def before(): return [0] * 10
        def during(): return [1] * 10
        def restored(): return [2] * 10
        def late(): return [3] * 10

        p = ProcessProfile(default_log_path="out", format="text", backend=sys.argv[1])
        p.enable()
        before()
        saved = sys.getprofile()
        sys.setprofile(lambda *a: None)
        during()
        sys.setprofile(saved)
        restored()
        saved = sys.getprofile()
        p.disable()
        sys.setprofile(saved)
        late()
        print("after disable", sys.getprofile() is None)
        t = threading.Thread(target=late)
        t.start()
        t.join()
        print("ok")
    """)
    res = subprocess.run([sys.executable, prog, backend], cwd=str(tmp_path),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, timeout=TIMEOUT)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "after disable True\nok\n", res.stdout + res.stderr
    run = only_run_dir(tmp_path / "out")
    m = mem_lines(run, "MainThread")
    for fn in ("before", "restored"):
        assert fn in m, (fn, sorted(m))
    assert "late" not in m


# --- pyinstrument, faulthandler and a trace function inside a profiled program -------

PYINSTRUMENT_PROGRAM = """
import threading
from pyinstrument import Profiler

""" + GROW_THREADS + """
def during():
    threads("during")
    return sum(range(200000))

p = Profiler(interval=0.0001)
p.start()
during()
p.stop()
print("pyinstrument saw during", "during" in p.output_text())
threads("after")
print("done")
"""


def test_pyinstrument_inside_a_profiled_program(tmp_path):
    pytest.importorskip("pyinstrument", reason="pyinstrument is not installed")
    prog = write(tmp_path / "prog.py", PYINSTRUMENT_PROGRAM)
    plain = subprocess.run([sys.executable, prog], cwd=str(tmp_path),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=TIMEOUT)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout == "pyinstrument saw during True\ndone\n", plain.stdout
    res = tg(["run", "--format", "both", "-o", "out", "prog.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout == plain.stdout
    run = only_run_dir(tmp_path / "out")
    info = runinfo(run)
    assert info["dropped"] == 0
    check_grow_deltas(run, ["during0", "during1", "during2", "after0", "after1", "after2"])
    main = mem_lines(run, "MainThread")
    assert "threads" in main  # recorded again in the main thread after stop()
    if MONITORING:
        assert info["displaced"] == 0 and info["unwound"] == 0 and "during" in main
    else:
        # pyinstrument's profile function held the main thread meanwhile: said
        assert info["displaced"] >= 1 and "during" not in main


def test_faulthandler_and_trace_function_inside_a_profiled_program(tmp_path):
    """faulthandler's watchdog dump of every thread, and a trace function on
    this thread and later ones (sys.settrace, threading.settrace): the same
    output as without threadgraph, nothing lost."""
    prog = write(tmp_path / "prog.py", """
        import faulthandler, os, select, sys, threading

        def grow(n):
            return bytearray(n)  # the caller drops it
        def worker(i, ev):
            for _ in range(3):
                grow(100000 * (i + 1))
            ev.wait()
        evs = [threading.Event() for _ in range(3)]
        ts = [threading.Thread(target=worker, args=(i, evs[i]), name="w%d" % i)
              for i in range(3)]
        for t in ts: t.start()
        r, w = os.pipe()
        faulthandler.dump_traceback_later(0.01, file=w)
        select.select([r], [], [], 60)  # the watchdog began its dump
        faulthandler.cancel_dump_traceback_later()  # waits for the dump's end
        os.close(w)
        dump = b""
        while True:
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            dump += chunk
        dump = dump.decode()
        print("dump", dump.count("Thread 0x"), dump.count("in worker"))
        for e in evs: e.set()
        for t in ts: t.join()

        seen = []
        def tr(frame, event, arg):
            if frame.f_code.co_name == "traced":
                seen.append((event, frame.f_lineno - frame.f_code.co_firstlineno))
            return tr
        def traced():
            a = grow(1000)
            return len(a)
        sys.settrace(tr)
        threading.settrace(tr)
        traced()
        t = threading.Thread(target=traced, name="later")
        t.start()
        t.join()
        sys.settrace(None)
        threading.settrace(None)
        print("trace", seen)
    """)
    plain = subprocess.run([sys.executable, prog], cwd=str(tmp_path),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=TIMEOUT)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.startswith("dump 4 3\ntrace [('call', 0), ('line', 1)"), plain.stdout
    res = tg(["run", "--format", "both", "-o", "out", "prog.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout == plain.stdout
    run = only_run_dir(tmp_path / "out")
    info = runinfo(run)
    assert info["dropped"] == 0 and info["displaced"] == 0 and info["unwound"] == 0
    check_grow_deltas(run, ["w0", "w1", "w2"])
    for base in ("MainThread", "later"):
        assert 1000 <= mem_lines(run, base)["grow"][0] < 1000 + NEAR
