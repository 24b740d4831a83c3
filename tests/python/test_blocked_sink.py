"""A blocked sink does not stop the program (issue: the capture's lock).

The capture's writer holds its lock across compression and write(2); a thread
that meets a new function defines it, with the GIL held.  Definitions have a
short lock of their own (src/recorder/capture_write.h), so while a write is
stuck (a full pipe, a stalled NFS: here the recorder's test gate, which holds
the write just before write(2), lock taken) the program goes on defining and
calling new functions.  Checked by progress, not by time: the program gets past
its loop while the write is still stuck, and every definition is in the
capture once the write goes on.  A thread's start and end are queued the same
way (its THREAD chunk; its end with its last records and counters), so a
thread also starts, runs and ends while the write is stuck, and the capture
then has it defined before its records and its counters in the END.
"""
import os
import subprocess
import sys
import textwrap

import tgcapture
from tgtest import only_dir
from test_reliability import env_with_package

NEW_FUNCTIONS = 300
LATE_CALLS = 50

PROGRAM = textwrap.dedent("""
    import sys
    import threading
    import threadgraph
    from threadgraph import _recorder

    p = threadgraph.ProcessProfile(default_log_path=sys.argv[1])
    p.enable()

    def warm():
        return [0] * 10

    for _ in range(100):
        warm()
    # returns once the flusher's write of these records is stuck, lock held
    _recorder._test_capture_gate(True)
    ns = {}
    for i in range(%d):
        exec("def new_%%d():\\n    return %%d\\n" %% (i, i), ns)
        ns["new_%%d" %% i]()
    sys.stdout.write("defined while blocked\\n")
    sys.stdout.flush()

    def late_work():
        return [1] * 10

    def late():
        for _ in range(%d):
            late_work()

    t = threading.Thread(target=late, name="late")
    t.start()
    t.join()
    sys.stdout.write("thread ended while blocked\\n")
    sys.stdout.flush()
    _recorder._test_capture_gate(False)
    p.disable()
""" % (NEW_FUNCTIONS, LATE_CALLS))

# Not a timing check: only a deadlock (the bug) comes near it, and it turns the
# hang into a failure.
DEADLOCK_GUARD_S = int(os.environ.get("TG_TEST_DEADLOCK_GUARD_S", "120"))


def test_new_functions_while_the_sink_is_blocked(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    try:
        res = subprocess.run([sys.executable, str(prog), str(tmp_path / "out")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True, env=env_with_package(),
                             timeout=DEADLOCK_GUARD_S)
    except subprocess.TimeoutExpired:
        raise AssertionError("the program stalled behind the blocked capture write")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "defined while blocked\nthread ended while blocked\n"
    cap = tgcapture.load(os.path.join(only_dir(tmp_path / "out"), "capture.tg"))
    assert not cap.truncated and cap.end is not None
    names = {c[3] for c in cap.codes.values()}
    assert {("new_%d" % i).encode() for i in range(NEW_FUNCTIONS)} <= names
    # the thread started and ended while blocked: defined before its records
    # (tgcapture.load checks that), every call of late_work in its stream, and
    # its counters in the END
    late = [st for st, th in cap.threads.items() if th["name"] == "late"]
    assert len(late) == 1
    calls, returns, dropped = cap.thread_records(late[0])
    assert sum(1 for c in calls if c[4] == b"late_work") == LATE_CALLS
    assert cap.end[1][late[0]] == (len(calls), len(returns), dropped)


# A fork while the writer is stuck: fork() neither takes the capture's lock nor
# a writer's in its prepare handler, nor waits for the flusher's write to end
# (src/recorder/lifecycle.c "fork"); the child leaves the parent's state that
# the stuck write was using, and records into its own run directory.
FORK_PROGRAM = textwrap.dedent("""
    import os
    import sys
    import threadgraph
    from threadgraph import _recorder

    p = threadgraph.ProcessProfile(default_log_path=sys.argv[1])
    p.enableForkedProfile()
    p.enable()

    def warm():
        return [0] * 10

    def child_work():
        return [2] * 10

    for _ in range(100):
        warm()
    _recorder._test_capture_gate(True)
    pid = os.fork()
    if pid == 0:
        for _ in range(%d):
            child_work()
        p.disable()
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    sys.stdout.write("child %%d exited %%d while blocked\\n" %% (pid, status))
    sys.stdout.flush()
    _recorder._test_capture_gate(False)
    p.disable()
""" % LATE_CALLS)


def run_program(tmp_path, program):
    prog = tmp_path / "prog.py"
    prog.write_text(program)
    try:
        return subprocess.run([sys.executable, str(prog), str(tmp_path / "out")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, env=env_with_package(),
                              timeout=DEADLOCK_GUARD_S)
    except subprocess.TimeoutExpired:
        raise AssertionError("the program stalled behind the blocked capture write")


def test_fork_while_the_sink_is_blocked(tmp_path):
    res = run_program(tmp_path, FORK_PROGRAM)
    assert res.returncode == 0, res.stderr
    words = res.stdout.split()
    assert words[0] == "child" and words[2:] == ["exited", "0", "while", "blocked"]
    out = str(tmp_path / "out")
    runs = sorted(os.listdir(out))
    assert len(runs) == 2 and words[1] in runs, runs
    parent = [d for d in runs if d != words[1]][0]
    cap = tgcapture.load(os.path.join(out, parent, "capture.tg"))
    assert not cap.truncated and cap.end is not None
    # the child's run: its own directory, a whole capture with its calls
    child = tgcapture.load(os.path.join(out, words[1], "capture.tg"))
    assert not child.truncated and child.end is not None
    calls = [c for st in child.threads for c in child.thread_records(st)[0]]
    assert sum(1 for c in calls if c[4] == b"child_work") == LATE_CALLS


# disable() writes what is buffered without the GIL: while its write is stuck,
# the program's other threads run (here the one that opens the gate; were the
# GIL held, neither could go on).  The flusher is stopped first (the fork
# hook's before_fork, which stops an idle flusher) so that the write at the
# gate is disable()'s own.
DISABLE_PROGRAM = textwrap.dedent("""
    import sys
    import threading
    import threadgraph
    from threadgraph import _recorder

    p = threadgraph.ProcessProfile(default_log_path=sys.argv[1])
    p.enable()

    def warm():
        return [0] * 10

    def opener():
        _recorder._test_capture_gate(True)  # returns once disable() is stuck
        sys.stdout.write("ran while disable() was blocked\\n")
        sys.stdout.flush()
        _recorder._test_capture_gate(False)

    for _ in range(100):
        warm()
    p._rec.before_fork()  # no flusher: disable() writes everything itself
    _recorder._test_capture_gate(True, False)
    t = threading.Thread(target=opener)
    t.start()
    p.disable()
    t.join()
    sys.stdout.write("disabled\\n")
""")


def test_disable_while_the_sink_is_blocked(tmp_path):
    res = run_program(tmp_path, DISABLE_PROGRAM)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "ran while disable() was blocked\ndisabled\n"
    cap = tgcapture.load(os.path.join(only_dir(tmp_path / "out"), "capture.tg"))
    assert not cap.truncated and cap.end is not None
    names = [c[4] for st in cap.threads for c in cap.thread_records(st)[0]]
    assert names.count(b"warm") == 100
# A thread that fills its buffer while the writer is stuck goes on: its full
# buffers are handed to the flusher, and past the bound its records are
# dropped and counted (src/recorder/writer.h), never waited for.
FILL_CALLS = 60000  # ~120k records: several 64 KiB buffers, two would do

FILL_PROGRAM = textwrap.dedent("""
    import sys
    import threading
    import threadgraph
    from threadgraph import _recorder

    p = threadgraph.ProcessProfile(default_log_path=sys.argv[1])
    p.enable()

    def warm():
        return [0] * 10

    def fill_work():
        pass

    def fill():
        for _ in range(%d):
            fill_work()

    for _ in range(100):
        warm()
    _recorder._test_capture_gate(True)
    t = threading.Thread(target=fill, name="fill")
    t.start()
    t.join()
    sys.stdout.write("filled while blocked\\n")
    sys.stdout.flush()
    _recorder._test_capture_gate(False)
    p.disable()
""" % FILL_CALLS)


def test_full_buffer_while_the_sink_is_blocked(tmp_path):
    res = run_program(tmp_path, FILL_PROGRAM)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "filled while blocked\n"
    cap = tgcapture.load(os.path.join(only_dir(tmp_path / "out"), "capture.tg"))
    assert not cap.truncated and cap.end is not None
    fill = [st for st, th in cap.threads.items() if th["name"] == "fill"]
    assert len(fill) == 1
    calls, returns, dropped = cap.thread_records(fill[0])
    # every call is either in the stream or counted as dropped
    assert sum(1 for c in calls if c[4] == b"fill_work") + dropped >= FILL_CALLS
    assert cap.end[1][fill[0]] == (len(calls), len(returns), dropped)


# A thread ends while the flusher's write of its own stream is stuck: it hands
# its state to the flusher, which writes and closes the rest of its files
# after that write (src/recorder/thread.h, the ended list), so the thread
# never waits at its end, and the program goes on: the main thread runs,
# another thread starts, runs and ends.  The main thread records nothing
# (quiet) and process samples are off, so the one stream the flusher can be
# writing when it sticks is the ender's own.  Before, the ending thread waited
# with the GIL held for the flusher's pass to let go of its state: the whole
# program stopped until the write went on.
END_CALLS = 20000  # a full 64 KiB buffer: the flusher is kicked to write it

END_PROGRAM = textwrap.dedent("""
    import sys
    import threading
    import threadgraph
    from threadgraph import _recorder

    p = threadgraph.ProcessProfile(default_log_path=sys.argv[1])
    p.setProcessMemoryFrequence(0)
    p._rec.quiet(True)
    p.enable()

    def work():
        return [0] * 10

    def ender():
        _recorder._test_capture_gate(True, False)
        for _ in range(%d):
            work()
        # returns once the flusher's write of this thread's stream is stuck
        _recorder._test_capture_gate(True)

    def other():
        for _ in range(%d):
            work()

    t = threading.Thread(target=ender, name="ender")
    t.start()
    t.join()
    sys.stdout.write("ended while its own write was stuck\\n")
    sys.stdout.flush()
    o = threading.Thread(target=other, name="other")
    o.start()
    o.join()
    sys.stdout.write("another thread ran and ended\\n")
    sys.stdout.flush()
    _recorder._test_capture_gate(False)
    p.disable()
""" % (END_CALLS, LATE_CALLS))


def test_thread_ends_while_its_own_write_is_stuck(tmp_path):
    res = run_program(tmp_path, END_PROGRAM)
    assert res.returncode == 0, res.stderr
    assert res.stdout == ("ended while its own write was stuck\n"
                          "another thread ran and ended\n")
    cap = tgcapture.load(os.path.join(only_dir(tmp_path / "out"), "capture.tg"))
    assert not cap.truncated and cap.end is not None
    want = {"ender": END_CALLS, "other": LATE_CALLS}
    for name, n in want.items():
        st = [s for s, th in cap.threads.items() if th["name"] == name]
        assert len(st) == 1, (name, cap.threads)
        calls, returns, dropped = cap.thread_records(st[0])
        # written whole by the flusher after its end, its END counters after
        assert dropped == 0
        assert sum(1 for c in calls if c[4] == b"work") == n
        assert cap.end[1][st[0]] == (len(calls), len(returns), dropped)
    assert {th["name"] for th in cap.threads.values()} == set(want)


# The same, then a fork while the write is still stuck: the ended thread's
# state, handed to the flusher but not yet closed, is dropped in the child
# (the parent's flusher writes it, never the child), and the child records
# its own run; the parent's capture has the ended thread whole once the write
# goes on.
FORK_END_PROGRAM = textwrap.dedent("""
    import os
    import sys
    import threading
    import threadgraph
    from threadgraph import _recorder

    p = threadgraph.ProcessProfile(default_log_path=sys.argv[1])
    p.setProcessMemoryFrequence(0)
    p.enableForkedProfile()
    p._rec.quiet(True)
    p.enable()

    def work():
        return [0] * 10

    def child_work():
        return [2] * 10

    ender_tid = []

    def ender():
        ender_tid.append(threading.get_native_id())
        _recorder._test_capture_gate(True, False)
        for _ in range(%d):
            work()
        _recorder._test_capture_gate(True)

    def in_child():
        for _ in range(%d):
            child_work()

    t = threading.Thread(target=ender, name="ender")
    t.start()
    t.join()
    # join() returns before the OS thread is gone: its exit (3.8's
    # pthread_exit, which may dlopen libgcc_s) must not be cut by the fork,
    # or the child's next dlopen fails on the loader's state (not ours)
    while str(ender_tid[0]) in os.listdir("/proc/self/task"):
        os.sched_yield()
    pid = os.fork()
    if pid == 0:
        c = threading.Thread(target=in_child, name="in_child")
        c.start()
        c.join()
        p.disable()
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    sys.stdout.write("child %%d exited %%d while blocked\\n" %% (pid, status))
    sys.stdout.flush()
    _recorder._test_capture_gate(False)
    p.disable()
""" % (END_CALLS, LATE_CALLS))


def test_fork_after_a_thread_ended_while_its_write_is_stuck(tmp_path):
    res = run_program(tmp_path, FORK_END_PROGRAM)
    assert res.returncode == 0, res.stderr
    words = res.stdout.split()
    assert words[0] == "child" and words[2:] == ["exited", "0", "while", "blocked"]
    out = str(tmp_path / "out")
    runs = sorted(os.listdir(out))
    assert len(runs) == 2 and words[1] in runs, runs
    parent = [d for d in runs if d != words[1]][0]
    cap = tgcapture.load(os.path.join(out, parent, "capture.tg"))
    assert not cap.truncated and cap.end is not None
    [st] = [s for s, th in cap.threads.items() if th["name"] == "ender"]
    calls, returns, dropped = cap.thread_records(st)
    assert dropped == 0 and sum(1 for c in calls if c[4] == b"work") == END_CALLS
    assert cap.end[1][st] == (len(calls), len(returns), dropped)
    child = tgcapture.load(os.path.join(out, words[1], "capture.tg"))
    assert not child.truncated and child.end is not None
    # the child's own threads only (its forking thread is attached anew)
    assert "ender" not in {th["name"] for th in child.threads.values()}
    calls = [c for s in child.threads for c in child.thread_records(s)[0]]
    assert sum(1 for c in calls if c[4] == b"child_work") == LATE_CALLS


# The same with the text files (format="text"): their writes have a gate of
# their own (src/recorder/writer.h, _test_text_gate), held with the writer's
# io_lock just before write(2).  The ender's full .mem/.stack buffers are
# handed to the flusher, whose write sticks; the thread ends meanwhile, another
# starts, runs and ends, and every line of both arrives once the write goes
# on.  Were a thread's end to wait for its own write (or the flusher to give
# up on it), the program would stall here (caught by the guard) or the files
# would lack lines.
TEXT_END_PROGRAM = textwrap.dedent("""
    import sys
    import threading
    import threadgraph
    from threadgraph import _recorder

    p = threadgraph.ProcessProfile(format="text", default_log_path=sys.argv[1])
    p.trackStack(True)
    p.setProcessMemoryFrequence(0)
    p._rec.quiet(True)
    p.enable()

    def work():
        return [0] * 10

    def ender():
        _recorder._test_text_gate(True, False)
        for _ in range(%d):
            work()
        # returns once the flusher's write of this thread's files is stuck
        _recorder._test_text_gate(True)

    def other():
        for _ in range(%d):
            work()

    t = threading.Thread(target=ender, name="ender")
    t.start()
    t.join()
    sys.stdout.write("ended while its own write was stuck\\n")
    sys.stdout.flush()
    o = threading.Thread(target=other, name="other")
    o.start()
    o.join()
    sys.stdout.write("another thread ran and ended\\n")
    sys.stdout.flush()
    _recorder._test_text_gate(False)
    p.disable()
""" % (END_CALLS, LATE_CALLS))


def test_thread_ends_while_its_own_text_write_is_stuck(tmp_path):
    res = run_program(tmp_path, TEXT_END_PROGRAM)
    assert res.returncode == 0, res.stderr
    assert res.stdout == ("ended while its own write was stuck\n"
                          "another thread ran and ended\n")
    run = only_dir(tmp_path / "out")
    want = {"ender": END_CALLS, "other": LATE_CALLS}
    for name, n in want.items():
        with open(os.path.join(run, name + ".mem")) as f:
            mem = f.read().splitlines()
        with open(os.path.join(run, name + ".stack")) as f:
            stack = f.read().splitlines()
        # every line whole, in order: one return and one call of work() each
        assert sum(1 for ln in mem if ":work=>" in ln) == n
        assert sum(1 for ln in stack if ln.endswith(":work")) == n
        assert all("=>" in ln for ln in mem), name
