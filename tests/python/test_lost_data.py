"""What used to be lost: forked pool workers, signals, os._exit, schedules.

Each test runs real processes and counts the records the profiled process (or
its children) left on disk, and compares exit statuses with the same program
run without the profiler.
"""
import glob
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tgtest import PKG_PARENT, parse_mem, run_scenario, env_with_package, run_dirs, load_runinfo

TIMEOUT = 120  # seconds; only a hang gets near it
WORK_CALLS = 100  # calls of work() the program makes before it is signalled





def calls_of(run_dir, func):
    n = 0
    for path in glob.glob(os.path.join(run_dir, "*.mem")):
        if os.path.basename(path) != "process.mem":
            n += sum(1 for _s, _l, f, _d in parse_mem(path) if f == func)
    return n


def no_temporaries(base):
    return [p for p in glob.glob(os.path.join(str(base), "**", "*"), recursive=True)
            if p.endswith(".tmp")]


# --- multiprocessing.Pool as a context manager ------------------------------------

POOL = """
import multiprocessing, os, sys, time
from threadgraph import ProcessProfile

def work(i):
    time.sleep(0.2)
    return len(bytearray(1000 + i))

if __name__ == "__main__":
    p = ProcessProfile(format="text", default_log_path="out", profile="python")
    p.enableForkedProfile()
    p.enable()
    pool = multiprocessing.get_context("fork").Pool(2)
    print(sum(pool.map(work, range(4), chunksize=1)))
    if sys.argv[1] == "terminate":
        pool.terminate()      # what `with Pool() as pool:` does at its end
    else:
        pool.close()
    pool.join()
    p.disable()
"""


def pool_run(tmp_path, how, timeout=120):
    script = tmp_path / "pool.py"
    script.write_text(POOL)
    proc = subprocess.run([sys.executable, str(script), how], cwd=str(tmp_path),
                          env=env_with_package(), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(4 * 1000 + 6)]
    dirs = run_dirs(tmp_path / "out")
    pids = {load_runinfo(d)["pid"]: d for d in dirs}
    children = [d for d in dirs if load_runinfo(d)["ppid"] in pids]
    # A worker terminated before its fork hook ran leaves no directory, which
    # loses nothing.
    assert len(dirs) == 1 + len(children) and 1 <= len(children) <= 2, dirs
    assert sum(calls_of(d, "work") for d in children) == 4
    for d in dirs:
        assert load_runinfo(d)["end_time"] is not None, d
    assert no_temporaries(tmp_path / "out") == []


def test_pool_closed_children_keep_their_records(tmp_path):
    pool_run(tmp_path, "close")


def test_pool_terminated_children_keep_their_records(tmp_path):
    # A worker whose SIGTERM interrupted no wait is sent it again within a
    # second (src/recorder/sigkick.h); a hang would hit the timeout.
    pool_run(tmp_path, "terminate", timeout=60)


# --- signals ----------------------------------------------------------------------

PROGRAM = """
import linecache, os, signal, sys, threading, time
HOW = sys.argv[1]

def work():
    return bytearray(1000)

def own_handler(signum, frame):
    print("own handler %d" % signum, flush=True)
    os._exit(7)

def ready_once_waiting(main):
    # "ready" once the main thread stands at the blocking acquire of the wait
    # marked BLOCKS (not of the one in this thread's start()), inside
    # Condition.wait's try: a SIGINT sent while it still ran Event.wait's
    # Python code could land between the condition's lock release and that
    # try, where CPython's KeyboardInterrupt leaves the lock released and the
    # program ends with a RuntimeError, status 1, with or without threadgraph
    # (test_keyboard_interrupt_between_release_and_try_ends_as_without_profiler).
    def line(frame):
        return linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    while True:
        f = sys._current_frames()[main]
        caller = f.f_back and f.f_back.f_back     # Condition.wait <- Event.wait <- it
        if (line(f).strip() == "waiter.acquire()" and caller is not None
                and "BLOCKS" in line(caller)):
            break
        time.sleep(0.001)
    print("ready", flush=True)

def main():
    if HOW == "own":
        signal.signal(signal.SIGTERM, own_handler)
    for _ in range(WORK_CALLS):
        work()
    threading.Thread(target=ready_once_waiting, args=(threading.get_ident(),),
                     daemon=True).start()
    threading.Event().wait()      # BLOCKS: the main thread waits until the signal

@MAIN@
""".replace("WORK_CALLS", str(WORK_CALLS))

DIRECT = """
if sys.argv[2] == "profiled":
    from threadgraph import ProcessProfile
    p = ProcessProfile(format="text", default_log_path="out", profile="python", accounting=True)
    p.enable()
main()
"""

UNDER_RUN = """
main()
"""


def default_signals():
    """In the child: the signals the tests send take their default action, as
    in a terminal's foreground job, whatever the test run inherited (a shell's
    background job ignores SIGINT, `nohup` SIGHUP)."""
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGUSR1,
                   signal.SIGUSR2, signal.SIGALRM):
        signal.signal(signum, signal.SIG_DFL)


def start(tmp_path, how, launcher, profiled):
    """Start the program; returns the Popen once it printed "ready"."""
    if launcher == "run" and profiled:
        (tmp_path / "prog.py").write_text(PROGRAM.replace("@MAIN@", UNDER_RUN))
        cmd = [sys.executable, "-m", "threadgraph", "run", "--format", "text", "-o", "out", "--profile",
               "python", "--accounting", "prog.py", how]
    else:
        (tmp_path / "prog.py").write_text(PROGRAM.replace("@MAIN@", DIRECT))
        cmd = [sys.executable, "prog.py", how, "profiled" if profiled else "plain"]
    proc = subprocess.Popen(cmd, cwd=str(tmp_path), env=env_with_package(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, universal_newlines=True,
                            preexec_fn=default_signals)
    line = proc.stdout.readline()
    assert line == "ready\n", (line, proc.stderr.read())
    return proc


def signalled(tmp_path, how, launcher, profiled, signum):
    proc = start(tmp_path, how, launcher, profiled)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=TIMEOUT)
    return proc.returncode, out, err


@pytest.mark.parametrize("launcher", ["run", "direct"])
@pytest.mark.parametrize("signame, how", [("SIGTERM", "plain"), ("SIGHUP", "plain"),
                                          ("SIGINT", "plain"), ("SIGTERM", "own"),
                                          ("SIGUSR1", "plain"), ("SIGUSR2", "plain"),
                                          ("SIGALRM", "plain")])
def test_signal_writes_everything_then_acts_as_without_profiler(tmp_path, launcher,
                                                                signame, how):
    signum = getattr(signal, signame)
    plain_dir = tmp_path / "plain"
    plain_dir.mkdir()
    expected, plain_out, _ = signalled(plain_dir, how, launcher, False, signum)
    if how == "own":
        assert expected == 7 and "own handler %d" % signum in plain_out
    else:
        assert expected == -signum
    status, out, err = signalled(tmp_path, how, launcher, True, signum)
    assert status == expected, err
    if how == "own":
        assert "own handler %d" % signum in out     # the program's handler ran
    elif launcher == "run" and signame != "SIGINT":
        assert "threadgraph: program terminated by %s" % signame in err
    (run_dir,) = run_dirs(tmp_path / "out")
    assert calls_of(run_dir, "work") == WORK_CALLS, err
    names = os.listdir(run_dir)
    assert "summary.json" in names and "summary.txt" in names, (names, err)
    assert [n for n in names if n.startswith("snapshot-") and n.endswith("-final")], names
    assert load_runinfo(run_dir)["end_time"] is not None
    assert no_temporaries(tmp_path / "out") == []


def test_handler_installed_before_enable_still_runs(tmp_path):
    proc = run_scenario(tmp_path, """
        import os, signal
        from threadgraph import ProcessProfile
        seen = []
        signal.signal(signal.SIGHUP, lambda s, f: seen.append(s))
        p = ProcessProfile(format="text", default_log_path="out")
        p.enable()
        os.kill(os.getpid(), signal.SIGHUP)
        for _ in range(3):
            pass
        p.disable()
        print(seen == [signal.SIGHUP], signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
    """)
    assert proc.stdout.split() == ["True", "True"]   # and SIGTERM is the default again


def blocked_main_program(signame, wait):
    """A program whose main thread makes WORK_CALLS calls of work(), then runs
    WAIT (its blocking line marked BLOCKS) while another thread, once the main
    thread stands at that line (inside the C call), sends SIGNAME to itself:
    the signal reaches Python's flag but interrupts no wait.  Profiled when
    its first argument is "profiled" (or absent)."""
    return textwrap.dedent("""
        import linecache, multiprocessing, signal, sys, threading, time
        from signal import signal as bound_before  # a name bound before enable()

        def work():
            return bytearray(1000)

        def kill_from_here(main):
            while True:
                f = sys._current_frames()[main]
                if "BLOCKS" in linecache.getline(f.f_code.co_filename, f.f_lineno):
                    break
                time.sleep(0.001)
            signal.pthread_kill(threading.get_ident(), signal.%s)

        if sys.argv[1:2] != ["plain"]:
            from threadgraph import ProcessProfile
            ProcessProfile(format="text", default_log_path="out", profile="python").enable()
        for _ in range(%d):
            work()
        lock = multiprocessing.Lock()
        lock.acquire()
        threading.Thread(target=kill_from_here, args=(threading.get_ident(),),
                         daemon=True).start()
    """) % (signame, WORK_CALLS) + textwrap.dedent(wait)


def test_signal_that_interrupts_no_wait_still_finishes_the_run(tmp_path):
    """SIGTERM delivered to another thread while the main thread blocks in a
    lock's wait: Python's flag is set but no wait is interrupted, so the
    handler would never run (the Pool.terminate() hang); the recorder sends
    the signal again to the main thread (src/recorder/sigkick.h)."""
    (tmp_path / "prog.py").write_text(blocked_main_program("SIGTERM", """
        lock.acquire()                # BLOCKS: never acquired, only the signal ends this
    """))
    for how in ("plain", "profiled"):
        proc = subprocess.run([sys.executable, "prog.py", how], cwd=str(tmp_path),
                              env=env_with_package(), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, preexec_fn=default_signals,
                              timeout=60)  # the guard acts within 1 s
        assert proc.returncode == -signal.SIGTERM, (how, proc.stderr)
    (run_dir,) = run_dirs(tmp_path / "out")
    assert calls_of(run_dir, "work") == WORK_CALLS
    assert load_runinfo(run_dir)["end_time"] is not None
    assert no_temporaries(tmp_path / "out") == []



def test_keyboard_interrupt_that_interrupts_no_wait_still_ends_the_program(tmp_path):
    """SIGINT keeps Python's own handler (KeyboardInterrupt).  Delivered to
    another thread, or just before the main thread's blocking wait, it sets
    Python's flag but interrupts no wait, and the program would wait forever
    (without threadgraph too: a CPython limitation; under threadgraph the
    window before a wait is wider, and a Ctrl-C was lost about once in 200
    runs of the test above).  The recorder interrupts the main thread's wait
    without calling the handler again (sigkick.h, interrupt-only): Python
    raises KeyboardInterrupt there, once, and the run is written."""
    (tmp_path / "prog.py").write_text(blocked_main_program("SIGINT", """
        try:
            lock.acquire()            # BLOCKS: never acquired, only the signal ends this
        except KeyboardInterrupt:
            print("interrupted once", flush=True)
            time.sleep(2)             # the recorder's later sends: no second one
            raise
    """))
    proc = subprocess.run([sys.executable, "prog.py"], cwd=str(tmp_path),
                          env=env_with_package(), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, preexec_fn=default_signals,
                          timeout=60)  # the guard acts within about 1 s
    assert proc.returncode == -signal.SIGINT, proc.stderr
    assert proc.stdout.count("interrupted once") == 1, proc.stdout
    assert proc.stderr.count("KeyboardInterrupt") == 1, proc.stderr
    (run_dir,) = run_dirs(tmp_path / "out")
    assert calls_of(run_dir, "work") == WORK_CALLS
    assert load_runinfo(run_dir)["end_time"] is not None
    assert no_temporaries(tmp_path / "out") == []


# Handlers put back after enable(): Python installs its C handler anew on each
# signal.signal(), which used to drop the guard's wrapper (sigkick.h), and the
# signals below then hung the program.
HANDLER_PUT_BACK = {
    # asyncio.run() (3.11+) sets its own SIGINT handler and restores Python's
    # default_int_handler on return; the same done by hand for older Pythons.
    "asyncio": ("SIGINT", """
        import asyncio
        async def amain():
            await asyncio.sleep(0)
        asyncio.run(amain())
        signal.signal(signal.SIGINT, lambda s, f: None)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            lock.acquire()            # BLOCKS: never acquired, only the signal ends this
        except KeyboardInterrupt:
            print("interrupted once", flush=True)
            raise
    """),
    # A program's handler for a while, then threadgraph's it returned put back.
    "restored": ("SIGTERM", """
        old = signal.signal(signal.SIGTERM, lambda s, f: None)
        signal.signal(signal.SIGTERM, old)
        lock.acquire()                # BLOCKS: never acquired, only the signal ends this
    """),
    # The same through a name bound to signal.signal before enable().
    "restored-bound-before": ("SIGTERM", """
        old = bound_before(signal.SIGTERM, lambda s, f: None)
        bound_before(signal.SIGTERM, old)
        lock.acquire()                # BLOCKS: never acquired, only the signal ends this
    """),
}


@pytest.mark.parametrize("case", sorted(HANDLER_PUT_BACK))
def test_guard_survives_a_handler_put_back(tmp_path, case):
    """A signal that interrupts no wait, after the program set a handler and
    put Python's or threadgraph's back: still guarded (signal.signal's C half
    is wrapped while a profile is enabled), so the program ends as above."""
    signame, wait = HANDLER_PUT_BACK[case]
    signum = getattr(signal, signame)
    (tmp_path / "prog.py").write_text(blocked_main_program(signame, wait))
    proc = subprocess.run([sys.executable, "prog.py"], cwd=str(tmp_path),
                          env=env_with_package(), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, preexec_fn=default_signals,
                          timeout=60)  # the guard acts within about 1 s
    assert proc.returncode == -signum, proc.stderr
    if signame == "SIGINT":
        assert proc.stdout.count("interrupted once") == 1, proc.stdout
        assert proc.stderr.count("KeyboardInterrupt") == 1, proc.stderr
    (run_dir,) = run_dirs(tmp_path / "out")
    assert calls_of(run_dir, "work") == WORK_CALLS
    assert load_runinfo(run_dir)["end_time"] is not None
    assert no_temporaries(tmp_path / "out") == []


DEFAULT_PUT_BACK = """
import asyncio, os, signal, sys, time
from signal import signal as bound_before  # a name bound before enable()

def work():
    return bytearray(1000)

async def serve():
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, lambda: None)
    await asyncio.sleep(0)

if sys.argv[2] == "profiled":
    from threadgraph import ProcessProfile
    ProcessProfile(format="text", default_log_path="out", profile="python").enable()
if sys.argv[1] == "asyncio":
    asyncio.run(serve())        # loop.close() puts SIG_DFL back
elif sys.argv[1] == "bound-before":
    bound_before(signal.SIGTERM, signal.SIG_DFL)
else:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
for _ in range(WORK_CALLS):
    work()
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(60)
""".replace("WORK_CALLS", str(WORK_CALLS))


@pytest.mark.parametrize("how", ["asyncio", "by-hand", "bound-before"])
def test_default_action_put_back_still_finishes_the_run(tmp_path, how):
    """SIG_DFL set while a profile is enabled (asyncio's loop.close() after
    loop.add_signal_handler(), or the program itself, also through a name
    bound to signal.signal before enable()): the signal still writes
    everything first, then ends the process as without the profiler."""
    (tmp_path / "prog.py").write_text(DEFAULT_PUT_BACK)
    for mode in ("plain", "profiled"):
        proc = subprocess.run([sys.executable, "prog.py", how, mode], cwd=str(tmp_path),
                              env=env_with_package(), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, preexec_fn=default_signals,
                              timeout=TIMEOUT)
        assert proc.returncode == -signal.SIGTERM, (mode, proc.stderr)
    (run_dir,) = run_dirs(tmp_path / "out")
    assert calls_of(run_dir, "work") == WORK_CALLS
    assert load_runinfo(run_dir)["end_time"] is not None
    assert no_temporaries(tmp_path / "out") == []


def test_signal_signal_is_the_real_one_again_after_disable(tmp_path):
    proc = run_scenario(tmp_path, """
        import _signal, signal
        from threadgraph import ProcessProfile
        real, real_c = signal.signal, _signal.signal
        p = ProcessProfile(format="text", default_log_path="out")
        p.enable()
        # the C half is wrapped, which signal.signal (Lib/signal.py) calls
        wrapped = _signal.signal is not real_c and signal.signal is real
        signal.signal(signal.SIGINT, lambda s, f: None)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        p.disable()
        print(wrapped, signal.signal is real and _signal.signal is real_c,
              signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    """)
    assert proc.stdout.split() == ["True", "True", "True"]


# A Condition whose lock's next release() is followed by a SIGINT: the signal
# lands where a Ctrl-C can land while the main thread runs Event.wait's Python
# code, between Condition.wait's release of the lock (_release_save) and its
# try.  CPython raises KeyboardInterrupt there, the lock stays released, and
# the `with` around the wait fails to release it: the program ends with a
# RuntimeError, status 1 (CPython's own behaviour: it needs no profiler).
UNGUARDED_INTERRUPT = """
import signal, sys, threading

def work():
    return bytearray(1000)

class ReleaseThenInterrupt:
    def __init__(self):
        self.lock = threading.Lock()
        self.armed = True
    def acquire(self, *args):
        return self.lock.acquire(*args)
    def __enter__(self):
        return self.lock.__enter__()
    def __exit__(self, *exc):
        return self.lock.__exit__(*exc)
    def release(self):
        self.lock.release()
        if self.armed:
            self.armed = False
            signal.raise_signal(signal.SIGINT)   # handled as it returns

if sys.argv[1:2] != ["plain"]:
    from threadgraph import ProcessProfile
    ProcessProfile(format="text", default_log_path="out", profile="python",
                   accounting=True).enable()
for _ in range(%d):
    work()
cond = threading.Condition(ReleaseThenInterrupt())
with cond:                   # what threading.Event().wait() does
    cond.wait()
""" % WORK_CALLS


def test_keyboard_interrupt_between_release_and_try_ends_as_without_profiler(tmp_path):
    """A SIGINT handled inside Condition.wait before its try (a Ctrl-C that
    came while the main thread still ran Event.wait's Python code: 4 runs in
    6500 of a SIGINT sent as the wait begins, profiled on 3.12) ends
    the program with a RuntimeError and status 1 without threadgraph: profiled,
    it ends the same way, once, and the run is written (atexit)."""
    (tmp_path / "prog.py").write_text(UNGUARDED_INTERRUPT)
    results = {}
    for how in ("plain", "profiled"):
        proc = subprocess.run([sys.executable, "prog.py", how], cwd=str(tmp_path),
                              env=env_with_package(), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, preexec_fn=default_signals,
                              timeout=TIMEOUT)
        lines = proc.stderr.splitlines()
        results[how] = (proc.returncode, lines[-1:], lines.count("KeyboardInterrupt"))
    assert results["plain"] == (1, ["RuntimeError: release unlocked lock"], 1), results
    assert results["profiled"] == results["plain"], results
    (run_dir,) = run_dirs(tmp_path / "out")
    assert calls_of(run_dir, "work") == WORK_CALLS
    assert load_runinfo(run_dir)["end_time"] is not None
    assert no_temporaries(tmp_path / "out") == []


SIGNAL_ELSEWHERE = """
import linecache, multiprocessing, os, signal, sys, threading, time
from threadgraph import ProcessProfile

def kill_from_here(waiter):
    # Wait until WAITER stands at the blocking acquire (its frame on that line:
    # inside the C call), then signal this thread, not the waiter.
    while True:
        f = sys._current_frames()[waiter]
        if "BLOCKS" in linecache.getline(f.f_code.co_filename, f.f_lineno):
            break
        time.sleep(0.001)
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

def wait_for_sigterm():
    lock = multiprocessing.Lock()
    lock.acquire()
    threading.Thread(target=kill_from_here, args=(threading.get_ident(),),
                     daemon=True).start()
    lock.acquire()            # BLOCKS: never acquired, only the signal ends this

p = ProcessProfile(format="text", default_log_path="out", profile="python")
p.enable()
if sys.argv[1] == "fork":
    # A child that does not profile (no enableForkedProfile): no flusher there,
    # so the signal must take its default action again.
    pid = os.fork()
    if pid == 0:
        print(signal.getsignal(signal.SIGTERM) == signal.SIG_DFL, flush=True)
        wait_for_sigterm()
        os._exit(3)
    _, status = os.waitpid(pid, 0)
    p.disable()
    print(os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM)
else:
    # disable() from another thread: Python cannot restore the handler there.
    t = threading.Thread(target=p.disable)
    t.start()
    t.join()
    wait_for_sigterm()
"""


@pytest.mark.parametrize("how", ["fork", "disabled_elsewhere"])
def test_signal_with_no_flusher_left_takes_the_default_action(tmp_path, how):
    """Where no flusher runs to send a missed signal again (a forked child that
    does not profile, a run disabled outside the main thread), the finishing
    signals take their default action: the process dies of SIGTERM as it would
    without the profiler, instead of waiting for a handler that never runs."""
    (tmp_path / "prog.py").write_text(SIGNAL_ELSEWHERE)
    proc = subprocess.run([sys.executable, "prog.py", how], cwd=str(tmp_path),
                          env=env_with_package(), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, preexec_fn=default_signals,
                          timeout=60)
    if how == "fork":
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == ["True", "True"], (proc.stdout, proc.stderr)
    else:
        assert proc.returncode == -signal.SIGTERM, proc.stderr


# --- snapshot_every before enable() --------------------------------------------------

def test_snapshot_every_before_enable_and_float_seconds(tmp_path):
    proc = run_scenario(tmp_path, """
        import os
        from threadgraph import ProcessProfile
        def step():
            return bytearray(100)
        p = ProcessProfile(format="text", default_log_path="calls", accounting=True)
        p.snapshot_every(start_after=1, every=2, stop_after=5, function=step)
        p.enable()
        for _ in range(6):
            step()
        p.disable()
        q = ProcessProfile(format="text", default_log_path="secs", accounting=True)
        q.snapshot_every(seconds=True, every=0.2, start_after=0.1, stop_after=0.5)
        q.enable()
        # calls until the last step's snapshot is written (each call takes at
        # most one due step: a fixed wall-clock span could end before it)
        while not [n for n in os.listdir(q.output_dir) if n.startswith("snapshot-3-")]:
            step()
        q.disable()
        try:
            ProcessProfile(format="text", default_log_path="x").snapshot_every(every=1, seconds=True)
        except RuntimeError as exc:
            print("refused:", exc)
        print(p.output_dir)
        print(q.output_dir)
    """)
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("refused: allocation accounting is not on")
    calls = sorted(n for n in os.listdir(lines[1]) if n.startswith("snapshot-"))
    assert calls == ["snapshot-1-call-1", "snapshot-2-call-3", "snapshot-3-call-5",
                     "snapshot-4-final", "snapshot-5-peak"]
    secs = sorted(n for n in os.listdir(lines[2]) if n.startswith("snapshot-"))
    assert secs == ["snapshot-1-t-0.1s", "snapshot-2-t-0.3s", "snapshot-3-t-0.5s",
                    "snapshot-4-final", "snapshot-5-peak"]


# --- os._exit ---------------------------------------------------------------------

def test_forked_child_ending_with_os_exit_writes_everything(tmp_path):
    run_scenario(tmp_path, """
        import os
        from threadgraph import ProcessProfile
        def work():
            return bytearray(100)
        p = ProcessProfile(format="text", default_log_path="out", profile="python")
        p.enableForkedProfile()
        p.enable()
        pid = os.fork()
        if pid == 0:
            for _ in range(%d):
                work()
            os._exit(0)           # skips atexit: no disable() by the program
        assert os.waitpid(pid, 0)[1] == 0
        p.disable()
    """ % WORK_CALLS)
    dirs = run_dirs(tmp_path / "out")
    (child,) = [d for d in dirs if calls_of(d, "work")]
    assert calls_of(child, "work") == WORK_CALLS
    assert load_runinfo(child)["end_time"] is not None

