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
DEADLOCK_GUARD_S = 120


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
