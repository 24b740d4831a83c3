"""The context-switch correction for every way a thread waits (docs/api.md).

In memory="process" a thread's reading is the whole process's traced bytes, so a
thread blocked while another allocates would be charged for it unless the wait
is a sleep trigger.  Each case blocks thread A in one kind of wait (`with lock:`,
a queue, a future, select, a socket...) while thread B allocates OTHER_BYTES and
then releases A.  With the correction on, A's waiting function must not be
charged; with it off it must be (which shows the case really blocked while B
allocated).  The order is deterministic: with a huge switch interval a thread
only gives the GIL away when it blocks.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from tgtest import PKG_PARENT, only_dir, parse_mem

OTHER_BYTES = 30 * 2 ** 20
# What A may be charged or credited with its own small allocations (a waiter
# lock, a list) against 30 MB from the other thread: far below either bound.
CORRECTED_AT_MOST = OTHER_BYTES * 0.1
UNCORRECTED_AT_LEAST = OTHER_BYTES * 0.9

# name: (setup at module level, B before A blocks, A's wait, B's release)
CASES = {
    "with_lock": ("g = threading.Lock()", "g.acquire()", "with g: pass", "g.release()"),
    "with_rlock": ("g = threading.RLock()", "g.acquire()", "with g: pass", "g.release()"),
    "with_condition": ("g = threading.Condition()", "g.acquire()", "with g: pass",
                       "g.release()"),
    "condition_wait": ("g = threading.Condition()", "", "with g: g.wait()",
                       "with g: g.notify()"),
    "with_semaphore": ("g = threading.Semaphore(0)", "", "with g: pass", "g.release()"),
    "with_bounded_semaphore": ("g = threading.BoundedSemaphore(1)", "g.acquire()",
                               "with g: pass", "g.release()"),
    "barrier_wait": ("g = threading.Barrier(2)", "", "g.wait()", "g.wait()"),
    "event_wait": ("g = threading.Event()", "", "g.wait()", "g.set()"),
    "queue_get": ("import queue; g = queue.Queue()", "", "g.get()", "g.put(1)"),
    "queue_put": ("import queue; g = queue.Queue(1); g.put(0)", "", "g.put(1)", "g.get()"),
    "simple_queue_get": ("import queue; g = queue.SimpleQueue()", "", "g.get()",
                         "g.put(1)"),
    "future_result": ("import concurrent.futures as cf; g = cf.Future()", "",
                      "g.result()", "g.set_result(1)"),
    "futures_wait": ("import concurrent.futures as cf; g = cf.Future()", "",
                     "cf.wait([g])", "g.set_result(1)"),
    "futures_as_completed": ("import concurrent.futures as cf; g = cf.Future()", "",
                             "list(cf.as_completed([g]))", "g.set_result(1)"),
    "thread_join": ("g = threading.Lock(); g.acquire()\n"
                    "t = threading.Thread(target=lambda: g.acquire(), name='J')",
                    "t.start()", "t.join()", "g.release()"),
    "select": ("import select; r, w = os.pipe()", "", "select.select([r], [], [])",
               "os.write(w, b'x')"),
    "poll": ("import select; r, w = os.pipe(); g = select.poll(); g.register(r)", "",
             "g.poll()", "os.write(w, b'x')"),
    "selectors": ("import selectors; r, w = os.pipe(); g = selectors.DefaultSelector()\n"
                  "g.register(r, selectors.EVENT_READ)", "", "g.select()",
                  "os.write(w, b'x')"),
    "os_read": ("r, w = os.pipe()", "", "os.read(r, 1)", "os.write(w, b'x')"),
    "socket_recv": ("import socket; sa, sb = socket.socketpair()", "", "sa.recv(1)",
                    "sb.send(b'x')"),
    "socket_accept": ("import socket; g = socket.socket()\n"
                      "g.bind(('127.0.0.1', 0)); g.listen(1)", "", "keep.append(g.accept())",
                      "keep.append(socket.create_connection(g.getsockname()))"),
    "multiprocessing_lock": ("import multiprocessing; g = multiprocessing.Lock()",
                             "g.acquire()", "with g: pass", "g.release()"),
}

SCENARIO = """
import gc, os, sys, threading
from threadgraph import ProcessProfile
sys.setswitchinterval(100)  # a thread gives the GIL away only when it blocks
gc.disable()
keep = []
%(setup)s
ready = threading.Event()
started = threading.Event()

def waiter():
    %(wait)s

def a():
    ready.wait()
    started.set()
    waiter()

def b():
    %(prep)s
    ready.set()
    started.wait()
    keep.append(bytearray(%(bytes)d))
    %(release)s

p = ProcessProfile(format="text", default_log_path="out", profile="python", memory="process")
p.trackSleeps(sys.argv[1] == "on")
p.enable()
ta = threading.Thread(target=a, name="A")
tb = threading.Thread(target=b, name="B")
ta.start(); tb.start(); ta.join(); tb.join()
p.disable()
"""


def waiter_delta(tmp_path, case, sleeps):
    setup, prep, wait, release = CASES[case]
    base = tmp_path / sleeps
    base.mkdir()
    (base / "s.py").write_text(SCENARIO % dict(
        setup=textwrap.dedent(setup), prep=prep or "pass", wait=wait,
        release=release, bytes=OTHER_BYTES))
    env = dict(os.environ, PYTHONPATH=PKG_PARENT)
    subprocess.run([sys.executable, "s.py", sleeps], cwd=str(base), env=env, check=True,
                   timeout=120)
    (d,) = [d for _s, _l, f, d in parse_mem(os.path.join(only_dir(base / "out"), "A.mem"))
            if f == "waiter"]
    return d


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_blocked_wait_is_not_charged_for_another_threads_memory(tmp_path, case):
    off = waiter_delta(tmp_path, case, "off")
    assert off >= UNCORRECTED_AT_LEAST, (case, off)  # A really waited while B allocated
    on = waiter_delta(tmp_path, case, "on")
    assert abs(on) <= CORRECTED_AT_MOST, (case, on)


def test_a_triggers_own_allocations_stay_charged(tmp_path):
    """recv() allocates the bytes it returns: those are the thread's, not a
    context switch's."""
    size = 60000  # fits a socket pair's buffer: sendall() returns before recv()
    setup = "import socket; a, b = socket.socketpair(); b.sendall(b'x' * %d)" % size
    (tmp_path / "s.py").write_text(textwrap.dedent("""
        import socket, sys
        from threadgraph import ProcessProfile
        %s
        def waiter():
            return a.recv(%d, socket.MSG_WAITALL)
        p = ProcessProfile(format="text", default_log_path="out", profile="python", memory="process")
        p.enable()
        data = waiter()
        p.disable()
        assert len(data) == %d
    """) % (setup, size, size))
    env = dict(os.environ, PYTHONPATH=PKG_PARENT)
    subprocess.run([sys.executable, "s.py"], cwd=str(tmp_path), env=env, check=True,
                   timeout=120)
    (d,) = [d for _s, _l, f, d in parse_mem(os.path.join(only_dir(tmp_path / "out"),
                                                        "MainThread.mem")) if f == "waiter"]
    assert d >= size, d


def test_disable_while_a_thread_waits_in_a_with_statement(tmp_path):
    """The wrapper a `with lock:` entered stays safe when the run ends (or a new
    one starts) before the lock is granted."""
    (tmp_path / "s.py").write_text(textwrap.dedent("""
        import linecache, sys, threading, time
        from threadgraph import ProcessProfile
        g = threading.Lock(); g.acquire()
        entered = []
        def waiter():
            with g:                # BLOCKS
                entered.append(1)
        p = ProcessProfile(format="text", default_log_path="out", profile="python", memory="process")
        p.enable()
        t = threading.Thread(target=waiter, name="A")
        t.start()
        while True:                # until A stands at `with g:` (in the C __enter__)
            f = sys._current_frames().get(t.ident)
            if f is not None and "BLOCKS" in linecache.getline(f.f_code.co_filename, f.f_lineno):
                break
            time.sleep(0.001)
        p.disable()
        q = ProcessProfile(format="text", default_log_path="out2", profile="python", memory="rss")
        q.enable()
        g.release()
        t.join()
        with g:                    # the real __enter__ again after q.disable()
            pass
        q.disable()
        with g:
            pass
        print(entered)
    """))
    env = dict(os.environ, PYTHONPATH=PKG_PARENT)
    res = subprocess.run([sys.executable, "s.py"], cwd=str(tmp_path), env=env, check=True,
                         stdout=subprocess.PIPE, universal_newlines=True, timeout=120)
    assert res.stdout.split() == ["[1]"]


@pytest.mark.parametrize("kwargs, sleeps, imported", [
    ('memory="thread"', True, False),        # the default: no correction to make
    ('mode="sampled"', True, False),         # no profile function at all
    ('memory="process"', True, True),
    ('memory="process"', False, False),      # trackSleeps(False)
])
def test_the_triggers_modules_are_imported_only_for_the_correction(tmp_path, kwargs, sleeps,
                                                                   imported):
    """Resolving the default sleep triggers imports C modules (select, _socket,
    _queue, _multiprocessing): enable() does it only when the correction uses
    them, not at every start (CPU time, and modules the program never asked for)."""
    mods = ["_multiprocessing", "_queue", "select", "_socket"]
    (tmp_path / "s.py").write_text(textwrap.dedent("""
        import json, sys
        from threadgraph import ProcessProfile
        mods = %r
        before = [m for m in mods if m in sys.modules]
        p = ProcessProfile(format="text", default_log_path="out", %s)
        p.trackSleeps(%r)
        p.enable()
        after = [m for m in mods if m in sys.modules]
        p.disable()
        print(json.dumps([before, after]))
    """) % (mods, kwargs, sleeps))
    env = dict(os.environ, PYTHONPATH=PKG_PARENT)
    res = subprocess.run([sys.executable, "s.py"], cwd=str(tmp_path), env=env, check=True,
                         stdout=subprocess.PIPE, universal_newlines=True, timeout=120)
    before, after = json.loads(res.stdout.strip().splitlines()[-1])
    assert before == []
    if imported:
        assert sorted(after) == sorted(mods), after
    else:
        assert after == [], after
