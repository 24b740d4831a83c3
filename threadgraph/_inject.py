"""The part of ``threadgraph attach`` that runs inside the attached program.

``threadgraph attach`` (threadgraph/_attach.py) has gdb run one line in the
target at a safe point, a thread entering ``PyEval_SaveThread`` (it holds the
GIL and is about to let other threads run, so every Python invariant holds)::

    exec(SOURCE, {"D": "<control directory>", "V": "<this threadgraph's version>"})

SOURCE imports this module and calls ``start(D)``, which only starts the control
thread and returns, so that the interrupted thread goes on at once.  The control
thread connects to the attaching command's socket ``D/sock``, reads the options
(``D/options.json``), enables a ProcessProfile for every thread of the process
(enable() installs the recorder on the threads already running and on those
started later), answers ``ok <output dir>`` and waits.  A ``detach`` line, or the
end of the connection (the attaching command ended or was killed), disables the
profile; it answers ``done`` with the run's stats() as JSON (what the command
says of the run: what was written, the losses) and ends.  If the program ends first, its atexit
disables the profile (the capture is complete, as with ``threadgraph run``) and
the attaching command sees the connection close.

What is put back at detach (docs/attach.md): the profile functions and
sys.monitoring tool (disable()), the thread-start and sleep wrappers, the
allocators, os._exit, and the atexit hook this run registered.  Signal handlers
are never touched: they can only be set from the main thread, and the control
thread is not it.  Left behind, inert: the modules imported (threadgraph and
what it imports) and the os.register_at_fork hooks (which cannot be removed and
do nothing without an enabled profile).
"""
import json
import os
import socket
import threading

THREAD_NAME = "threadgraph-attach"

# What gdb has the target run, with D bound to the control directory; any
# failure is reported on the socket, never printed into the program's stderr.
# V is the attaching command's version: a program may import another threadgraph
# than a fresh interpreter would (a path it added, a vendored copy), and the two
# sides speak one version's protocol.
SOURCE = """\
msg = None
try:
    import threadgraph as t
    if getattr(t, "__version__", None) != V:
        msg = ("the program imports threadgraph %s from %s, not %s as this command: "
               "attach with that threadgraph's command, or install %s there"
               % (getattr(t, "__version__", "(no version)"),
                  getattr(t, "__file__", None) or "(no file)", V, V))
    else:
        import threadgraph._inject as m
        m.start(D)
except BaseException as e:
    msg = "cannot import threadgraph in the program: %s" % e
if msg is not None:
    try:
        import socket
        s = socket.socket(socket.AF_UNIX)
        s.connect(D + "/sock")
        s.sendall(("error %s\\n" % msg).encode())
        s.close()
    except BaseException:
        pass
"""


# The control connection while attached.  A child the program forks
# (os.fork, multiprocessing's fork) closes its copy: the attaching command sees
# the program's end as the end of the connection, which a child that lives on
# would otherwise keep open.
_CONN = None
_FORK_HOOK = False


def _close_in_child():
    global _CONN
    conn, _CONN = _CONN, None
    if conn is not None:
        try:
            conn.close()
        except OSError:
            pass


def start(ctl_dir):
    """Start the control thread (called by gdb's line on an interrupted thread:
    return at once).  A daemon: it never keeps the program from ending."""
    global _FORK_HOOK
    if not _FORK_HOOK and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_close_in_child)  # inert once detached
        _FORK_HOOK = True
    t = threading.Thread(target=_control, args=(ctl_dir,), name=THREAD_NAME, daemon=True)
    t.start()


def _send(sock, line):
    try:
        sock.sendall((line + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def _wait_for_detach(sock):
    """Block until a ``detach`` line (True) or the end of the connection (False:
    the attaching command is gone)."""
    buf = b""
    while True:
        try:
            data = sock.recv(4096)
        except OSError:
            return False
        if not data:
            return False
        buf += data
        if b"detach\n" in buf:
            return True


def _control(ctl_dir):
    global _CONN
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.connect(os.path.join(ctl_dir, "sock"))
    except OSError:
        sock.close()
        return  # the attaching command is gone: nothing was done
    _CONN = sock
    try:
        _attached(sock, ctl_dir)
    finally:
        _CONN = None
        sock.close()


def _attached(sock, ctl_dir):
    from threadgraph import _recorder, profiler
    from threadgraph._run import make_profiler

    try:
        with open(os.path.join(ctl_dir, "options.json"), encoding="utf-8") as f:
            settings = json.load(f)
    except (OSError, ValueError) as exc:
        _send(sock, "error cannot read the options: %s" % exc)
        return
    if _recorder.active() is not None:
        _send(sock, "error already recording: threadgraph is attached or the program "
              "runs under threadgraph run or a ProcessProfile")
        return
    taken = monitoring_ids_taken(settings)
    reason = own_profile_functions(settings, taken)
    if reason:
        _send(sock, "error " + reason)
        return
    atexit_before = profiler._HOOKS_INSTALLED
    try:
        prof = make_profiler(_Options(settings["options"]), settings["base"])
        if taken:
            # backend auto's fallback, chosen here: enable() would warn into
            # the program's stderr; the attaching command says it instead.
            prof.backend = "setprofile"
            _send(sock, "note " + TAKEN_NOTE)
        # Quiet from before enable(): the control thread's own work is not the
        # program's, and the thread is left out of the run (no empty entry).
        prof._rec.quiet(True)
        # The losses and the over-limit are the attaching command's to say,
        # at detach or when the program ends while attached (its atexit
        # disables the profile): never into the program's stderr.
        prof._losses_said_by = os.getpid()
        prof.enable()
    except (OSError, RuntimeError, ValueError) as exc:
        _send(sock, "error cannot start recording: %s" % exc)
        return
    _send(sock, "ok %s" % prof.output_dir)
    asked = _wait_for_detach(sock)
    prof._errors_said_by = os.getpid()
    prof.disable()  # the losses and write errors go to the attaching command
    if not atexit_before:  # registered by this run: taken away again
        import atexit

        atexit.unregister(profiler._atexit)
        profiler._HOOKS_INSTALLED = False  # the fork hooks stay (inert)
    stats = prof.stats()
    stats["output_errors"] = prof._output_errors
    _send(sock, "done " + json.dumps(stats))
    if not asked:
        # the attaching command died (SIGKILL) and cannot remove its control
        # directory (options, socket, gdb's script and output): done here
        import shutil

        shutil.rmtree(ctl_dir, ignore_errors=True)


TAKEN_NOTE = ("sys.monitoring tool ids 3 and 4, the ones threadgraph may use, are both "
              "taken by other tools in the program: recording with a profile function "
              "(backend 'setprofile') instead")


def _backend(settings):
    """The backend the run asks for, as ProcessProfile resolves it."""
    return (settings["options"].get("backend") or os.environ.get("THREADGRAPH_BACKEND")
            or "auto")


def monitoring_ids_taken(settings):
    """Whether backend auto will fall back to profile functions (3.12+, not
    sampled): the program's tools hold both sys.monitoring tool ids the
    recorder may use (monitor.c)."""
    import sys

    if _backend(settings) != "auto" or sys.version_info < (3, 12):
        return False
    if settings["options"].get("mode") == "sampled":
        return False  # no event source at all
    return all(sys.monitoring.get_tool(i) is not None for i in (3, 4))


def own_profile_functions(settings, taken=False):
    """A reason to refuse when recording would replace the program's own profile
    function (sys.setprofile, threading.setprofile), else None.  With the
    sys.monitoring backend (3.12+) profile functions are not touched; TAKEN:
    backend auto falls back to profile functions (monitoring_ids_taken)."""
    import sys

    from threadgraph import _recorder

    if _backend(settings) != "setprofile" and sys.version_info >= (3, 12) and not taken:
        return None  # sys.monitoring
    n = _recorder.profiled_threads()
    if n or getattr(threading, "_profile_hook", None) is not None:
        if taken:
            why = ("; sys.monitoring, which would leave it alone, has both tool ids "
                   "threadgraph may use (3 and 4) taken by other tools")
        elif sys.version_info >= (3, 12):
            why = "; --backend monitoring leaves it alone"
        else:
            why = ""
        return ("the program has its own profile function (sys.setprofile) on %d "
                "thread(s): recording would replace it%s" % (max(n, 1), why))
    return None


class _Options:
    """threadgraph run's parsed options, rebuilt from the attaching command's."""

    def __init__(self, values):
        self.__dict__.update(values)
