"""The two event sources give the same records.

On CPython 3.12 and 3.13 the recorder can take its events from sys.monitoring
(backend "monitoring", the default there) or from a profile function on every
thread (backend "setprofile", the only one before 3.12).  The same program run
under both must write byte-identical .mem and .stack files (timestamps off):
same calls, same lines, same exact memory deltas.  Elsewhere the tests check
that asking for "monitoring" fails clearly.
"""
import json
import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

from tgtest import only_dir, run_scenario

HAVE_MONITORING = (3, 12) <= sys.version_info[:2] < (3, 14)
needs_monitoring = pytest.mark.skipif(
    not HAVE_MONITORING, reason="sys.monitoring backend: CPython 3.12 and 3.13 only")

# A function whose return instruction lies far beyond offset 256: the
# interpreter allocates an int for the offset to call a sys.monitoring
# callback, which must not show in the function's delta.
LONG_BODY = "\n".join("    a%d = %d" % (i, i) for i in range(200))

PROGRAM = r'''
import sys, threading, time
import threadgraph

# The GIL changes hands only where a thread blocks: otherwise, on a slow or
# loaded machine, the switch interval could hand it to the new thread before
# Thread.start reaches its Event.wait, which would then find the event set and
# skip Condition.wait, and the two runs' calls would differ.
sys.setswitchinterval(1000)

profile = threadgraph.ProcessProfile(format="text", default_log_path=OUT, memory=MEMORY)
profile.trackStack(True)
profile.logTimestamps(False)
profile.enable()

def leaf(n):
    return [0] * n                      # kept by the caller: exact delta

def long_function():
LONG_BODY
    return 1

def gen(n):
    for i in range(n):
        yield bytearray(100 + i)

def raises():
    d = {"k": bytearray(1000)}
    raise KeyError("x")

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

class Box:
    def put(self, x):
        self.items = [x] * 10
        return self

kept = []
def work(tag):
    kept.append(leaf(1000))
    long_function()
    for b in gen(5):
        kept.append(b)
    try:
        raises()
    except KeyError:
        pass
    fib(6)
    lst = []
    lst.append(bytes(50))            # method descriptor called with self
    lst.extend([1, 2, 3])
    sorted(lst[1:], reverse=True)    # builtin function with keywords
    Box().put(tag)
    len("abc"); isinstance(lst, list)
    time.sleep(0.001)                # C sleep trigger (process mode)

t = threading.Thread(target=work, args=("thread",), name="worker")
t.start(); t.join()
work("main")
profile.disable()
'''


# Where the two sources legitimately differ: the setprofile events make the
# interpreter create a frame object for every profiled frame when it starts;
# with sys.monitoring a frame object is created only when the program needs
# one, here by the traceback of the exception raised in raises() and caught in
# work(): those frames' objects are then allocated inside the calls, and the
# deltas of raises() and of the calls around it include them.
FRAME_OBJECT_PATH = ("raises", "work", "run", "_bootstrap_inner")
# Nothing else may differ, run to run either: a 59-byte str once freed in
# Thread.start, Condition.wait or `class Box:` (the name "incrementalencoder"
# that enable()'s runinfo.json text file left in CPython's type attribute
# cache, evicted by whichever later lookup fell on its address-picked slot)
# is no longer made while the hooks count (test_recorder.py
# test_enable_leaves_no_block_of_its_own_in_the_type_cache).


def masked(text):
    out = []
    for line in text.splitlines():
        head, _, delta = line.rpartition("=>")
        if head.rpartition(":")[2] in FRAME_OBJECT_PATH:
            delta = "N"
        out.append(head + "=>" + delta)
    return out


def run_backend(tmp_path, backend, memory="thread"):
    # The same script path for both runs: the records name it.
    code = (PROGRAM.replace("LONG_BODY", LONG_BODY).replace("MEMORY", repr(memory))
            .replace("OUT", repr("out-" + backend)))
    run_scenario(tmp_path, code, env={"THREADGRAPH_BACKEND": backend})
    run = only_dir(tmp_path / ("out-" + backend))
    with open(os.path.join(run, "runinfo.json")) as f:
        info = json.load(f)
    files = {}
    for name in sorted(os.listdir(run)):
        if name.endswith((".mem", ".stack")) and name != "process.mem":
            with open(os.path.join(run, name), "rb") as f:
                files[name] = f.read().decode("utf-8")
    return info, files


@needs_monitoring
def test_monitoring_and_setprofile_write_the_same_records(tmp_path, memory="thread"):
    # memory="thread": exact and independent of how the threads interleave
    # (process-wide readings are not, so they cannot be compared run to run).
    info_p, prof = run_backend(tmp_path, "setprofile", memory)
    info_m, mon = run_backend(tmp_path, "monitoring", memory)
    assert info_p["backend"] == "setprofile"
    assert info_m["backend"] == "monitoring"
    assert sorted(prof) == ["MainThread.mem", "MainThread.stack", "worker.mem", "worker.stack"]
    assert sorted(mon) == sorted(prof)
    for name in prof:
        if name.endswith(".stack"):
            assert mon[name] == prof[name], name
        else:
            assert masked(mon[name]) == masked(prof[name]), name
    # The records are the ones expected, not just equal to each other: the
    # offset int the interpreter allocates to deliver the return of
    # long_function is not charged to it.
    for files in (mon, prof):
        worker = files["worker.mem"].splitlines()
        assert any(l.endswith(":long_function=>0") for l in worker), worker
        assert any(l.endswith(":leaf=>8000") for l in worker), worker  # list freelist
        assert any(l.startswith("list:") and ":append=>" in l for l in worker), worker
        assert any(":sorted=>" in l for l in worker), worker


@needs_monitoring
def test_auto_is_monitoring_where_available(tmp_path):
    run_scenario(tmp_path, """
        import threadgraph
        p = threadgraph.ProcessProfile(format="text", default_log_path="out")
        assert p.backend_used is None
        p.enable(); p.disable()
        print(p.backend_used)
    """, env={"THREADGRAPH_BACKEND": ""})
    info = json.load(open(os.path.join(only_dir(tmp_path / "out"), "runinfo.json")))
    assert info["backend"] == "monitoring"


@needs_monitoring
def test_thread_started_by_c_code_is_seen_with_monitoring(tmp_path):
    # _thread.start_new_thread taken before enable(): not wrapped, so the
    # setprofile backend never installs its profile function on that thread;
    # sys.monitoring reaches every thread.
    run_scenario(tmp_path, """
        import _thread, time
        start = _thread.start_new_thread
        import threadgraph
        p = threadgraph.ProcessProfile(format="text", default_log_path="out", backend="monitoring")
        p.enable()
        done = []
        def body():
            def inner():
                return bytearray(5000)
            done.append(inner())
        start(body, ())
        while not done:
            time.sleep(0.001)
        p.disable()
    """)
    run = only_dir(tmp_path / "out")
    mems = [n for n in os.listdir(run) if n.endswith(".mem") and n not in ("MainThread.mem", "process.mem")]
    assert len(mems) == 1, os.listdir(run)
    text = open(os.path.join(run, mems[0])).read()
    assert ":inner=>" in text, text


@pytest.fixture(scope="module")
def tstates_ext(tmp_path_factory):
    """Directory holding the built tstates extension (native/tstates.c)."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the test extension")
    out = tmp_path_factory.mktemp("tstates")
    target = out / ("tstates" + sysconfig.get_config_var("EXT_SUFFIX"))
    r = subprocess.run([cc, "-O0", "-shared", "-fPIC", "-pthread",
                        "-I" + sysconfig.get_paths()["include"], "-o", str(target),
                        os.path.join(os.path.dirname(__file__), "native", "tstates.c")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    if r.returncode != 0:
        pytest.fail("building tstates failed:\n" + r.stdout)
    return str(out)


@needs_monitoring
@pytest.mark.parametrize("mode", [0, 1], ids=["gilstate", "two-live-states"])
def test_calls_from_c_under_new_thread_states(tmp_path, tstates_ext, mode):
    # The monitoring backend caches each thread's state (monitor.c): a C thread
    # that calls into Python under a new state each time (freed after the call,
    # or alive beside the next one) must have every call recorded, paired with
    # its return, with its exact delta; under ASan a cached state read after it
    # was freed aborts the run.
    run_scenario(tmp_path, """
        import sys
        sys.path.insert(0, %r)
        import tstates, threadgraph
        p = threadgraph.ProcessProfile(format="text", default_log_path="out",
                                       backend="monitoring")
        p.trackStack(True)
        p.logTimestamps(False)
        kept = []
        def inner(i):
            return bytearray(5000)
        def gen():
            yield 1
            yield 2
        def body(i):
            kept.append(inner(i))
            sum(gen())
        p.enable()
        tstates.calls(body, 40, %d)
        body(-1)
        p.disable()
        s = p.stats()
        assert s["dropped"] == 0 and s["unwound"] == 0, s
    """ % (tstates_ext, mode))
    run = only_dir(tmp_path / "out")
    mems = [n for n in os.listdir(run) if n.endswith(".mem") and n != "process.mem"]
    assert "MainThread.mem" in mems and len(mems) == 2, mems
    mems.remove("MainThread.mem")
    lines = open(os.path.join(run, mems[0])).read().splitlines()
    # bytearray(5000): its object and its 5001-byte buffer
    assert sum(l.endswith(":inner=>5057") for l in lines) == 40, lines
    assert sum(":body=>" in l for l in lines) == 40, lines
    assert sum(":gen=>" in l for l in lines) == 40 * 3, lines


def test_bad_backend_is_refused(tmp_path):
    proc = run_scenario(tmp_path, """
        import threadgraph
        try:
            threadgraph.ProcessProfile(backend="ptrace")
        except ValueError as e:
            print("ValueError:", e)
    """)
    assert "backend must be 'auto', 'setprofile' or 'monitoring'" in proc.stdout


@pytest.mark.skipif(HAVE_MONITORING, reason="checks the error on interpreters without the backend")
def test_monitoring_refused_before_312(tmp_path):
    proc = run_scenario(tmp_path, """
        import threadgraph
        p = threadgraph.ProcessProfile(format="text", default_log_path="out", backend="monitoring")
        try:
            p.enable()
        except ValueError as e:
            print("ValueError:", e)
    """)
    assert "needs CPython 3.12 or 3.13" in proc.stdout
