"""``threadgraph attach PID`` and ``threadgraph detach PID`` (docs/attach.md).

    threadgraph attach [options] PID      record a running Python program
    threadgraph detach PID                stop an attach running elsewhere

attach checks, before anything touches the target, that it can be done: the
process exists and runs Python, its interpreter can import this same threadgraph
(tried with the target's executable, environment and working directory), ptrace
is allowed (Yama's ptrace_scope, our capabilities, its owner), and no attach is
running on it.  Each refusal is one line and exit status 1.

Then gdb (batch mode) attaches, waits for a thread entering PyEval_SaveThread (a
safe point: it holds the GIL and is about to let the others run), has it run
one line that starts threadgraph's control thread (threadgraph/_inject.py), and
detaches: the target is stopped for the time gdb takes.  On CPython 3.14+, when
this command runs on 3.14+ too, sys.remote_exec (PEP 768) replaces gdb
(untested here).  Everything else goes over a Unix socket in a private
directory: the options, ``ok <dir>`` once recording, ``detach``, ``done``.  The
socket's end is the signal: if this command dies, the target detaches by itself.
"""
import argparse
import errno
import fcntl
import json
import os
import pwd
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

PROG = "threadgraph attach"
# Options of `threadgraph run` that do not apply to a running program.
RUN_ONLY = ("module", "follow_exec", "help")
GDB_TIMEOUT = 15.0  # seconds for a thread to reach a safe point
CONNECT_TIMEOUT = 30.0  # seconds for the control thread to start and answer
CAP_SYS_PTRACE = 19
YAMA_PTRACE_SCOPE = "/proc/sys/kernel/yama/ptrace_scope"
INJECT_MARK = "threadgraph-inject"
MIN_VERSION, MAX_VERSION = (3, 8), (3, 13)


class Refused(Exception):
    """A one-line reason not to attach; nothing was done to the target."""


def say(msg):
    sys.stderr.write("threadgraph: %s\n" % msg)
    sys.stderr.flush()


# --- options -------------------------------------------------------------------


def build_parser(prog=PROG):
    from threadgraph import _run

    parser = argparse.ArgumentParser(
        prog=prog,
        usage="%(prog)s [options] PID",
        description="Record a running Python program (CPython 3.8-3.13, started "
        "without threadgraph) until --duration ends, Ctrl-C, or `threadgraph detach "
        "PID`; then leave it running as before. Needs gdb and ptrace permission, and "
        "threadgraph importable by the program's interpreter (docs/attach.md).",
        epilog="Files go to BASE/<pid>/, as with threadgraph run.",
    )
    parser.add_argument("pid", metavar="PID", type=int, help="the process to record")
    parser.add_argument(
        "--sort", metavar="KEY", choices=("now", "change", "peak", "largest", "name", "start"),
        help="with the live view: the threads' order, as threadgraph live --sort "
        "(now, change, peak, largest, name, start)")
    parser.add_argument(
        "--duration", metavar="SECONDS", type=float,
        help="detach after SECONDS (default: at Ctrl-C or threadgraph detach PID)")
    run_parser = _run.build_parser()
    for action in run_parser._actions:  # run's recording options, defined once there
        if action.dest in RUN_ONLY:
            continue
        if action.dest == "output":
            action.help = ("base directory; the files are written into BASE/<pid>/ "
                           "(default: threadgraph-attach in the current directory)")
        parser._add_action(action)
    return parser


# --- the target ----------------------------------------------------------------


def read_proc(pid, name):
    """Contents of /proc/PID/NAME (bytes); Refused when the process is not there
    or not ours to read."""
    try:
        with open("/proc/%d/%s" % (pid, name), "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise Refused("no process %d" % pid)
    except PermissionError:
        raise Refused("cannot read /proc/%d/%s: %s" % (pid, name, denied_fix()))


def proc_status(pid):
    fields = {}
    for line in read_proc(pid, "status").decode("utf-8", "replace").splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return fields


def target_python(pid):
    """(executable, environment, cwd) of PID when it runs CPython, else Refused."""
    status = proc_status(pid)
    comm = status.get("Name", "?")
    try:
        exe = os.readlink("/proc/%d/exe" % pid)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise Refused("no process %d" % pid)
        raise Refused("cannot read /proc/%d/exe (%s): %s" % (pid, exc.strerror,
                                                              denied_fix()))
    maps = read_proc(pid, "maps")
    base = os.path.basename(exe)
    if b"libpython3" not in maps and not base.startswith("python3"):
        raise Refused("process %d (%s) is not a Python process" % (pid, comm))
    if exe.endswith(" (deleted)"):
        raise Refused("the executable of process %d was deleted or replaced since it "
                      "started: its interpreter cannot be checked" % pid)
    env = {}
    for item in read_proc(pid, "environ").split(b"\0"):
        key, eq, value = item.partition(b"=")
        if eq:
            env[os.fsdecode(key)] = os.fsdecode(value)
    try:
        cwd = os.readlink("/proc/%d/cwd" % pid)
    except OSError:
        cwd = "/"
    return invoked_as(pid, exe, env, cwd), env, cwd


def invoked_as(pid, exe, env, cwd):
    """The interpreter path PID was started as when it is EXE (a virtual
    environment's bin/python is a link to the base interpreter: only its own
    path finds the environment's site-packages), else EXE."""
    argv0 = os.fsdecode(read_proc(pid, "cmdline").split(b"\0")[0])
    if "/" in argv0:
        candidates = [os.path.join(cwd, argv0)]
    else:
        candidates = [os.path.join(cwd, d, argv0)
                      for d in env.get("PATH", os.defpath).split(os.pathsep)]
    real = os.path.realpath(exe)
    for path in candidates:
        if os.path.isfile(path) and os.path.realpath(path) == real:
            return os.path.abspath(path)
    return exe


def check_same_mount_namespace(pid):
    """Refused when PID sees another filesystem than ours (a container seen from
    the host or from a debug container, a service with PrivateTmp): the control
    socket and the options are files in our /tmp, which it could not open, and
    its interpreter cannot be checked from here."""
    try:
        theirs = os.readlink("/proc/%d/ns/mnt" % pid)
        ours = os.readlink("/proc/self/ns/mnt")
    except OSError:
        return  # no namespaces here (or not readable: ptrace's checks say so)
    if theirs != ours:
        raise Refused("process %d runs in another mount namespace (a container, or a "
                      "service with PrivateTmp): run threadgraph attach inside it (docker "
                      "exec, kubectl exec into its container); docs/attach.md" % pid)


def check_not_under_run(pid):
    """Refused when PID was started by `threadgraph run` (python -m threadgraph
    run, or the threadgraph script): it records already, as the target's own
    check would say after gdb.  A ProcessProfile the program enabled itself is
    only seen there."""
    argv = [os.fsdecode(a) for a in read_proc(pid, "cmdline").split(b"\0")]
    if argv[1:4] == ["-m", "threadgraph", "run"] or (
            len(argv) > 2 and os.path.basename(argv[1]) == "threadgraph"
            and argv[2] == "run"):
        raise Refused("process %d runs under threadgraph run, which records it already "
                      "(threadgraph live BASE/%d shows it)" % (pid, pid))


CHECK_SOURCE = """\
import sys
print("%d.%d" % sys.version_info[:2])
try:
    import threadgraph, threadgraph._recorder
    print(threadgraph.__version__)
    print(threadgraph.__file__)
except Exception as e:
    print("-")
    print("%s: %s" % (type(e).__name__, e))
"""


def check_importable(pid, exe, env, cwd):
    """The target's Python version (major, minor), once its interpreter imports
    this threadgraph; Refused otherwise."""
    from threadgraph import __version__

    try:
        out = subprocess.run([exe, "-c", CHECK_SOURCE], env=env, cwd=cwd,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise Refused("cannot run the interpreter of process %d (%s): %s" % (pid, exe, exc))
    lines = out.stdout.decode("utf-8", "replace").splitlines()
    if len(lines) < 3 or "." not in lines[0]:
        raise Refused("process %d (%s) is not a CPython 3 program" % (pid, exe))
    version = tuple(int(x) for x in lines[0].split("."))
    if version < MIN_VERSION:
        raise Refused("process %d runs Python %d.%d: threadgraph records 3.8 to 3.13"
                      % ((pid,) + version))
    if lines[1] == "-":
        raise Refused("the interpreter of process %d (%s) cannot import threadgraph (%s): "
                      "install it there (%s -m pip install threadgraph), same version as "
                      "this one (%s)" % (pid, exe, lines[2], exe, __version__))
    if lines[1] != __version__:
        raise Refused("process %d imports threadgraph %s (%s), this command is %s: attach "
                      "with that installation's threadgraph command" % (
                          pid, lines[1], os.path.dirname(lines[2]), __version__))
    return version


def has_cap(status, cap):
    try:
        return bool(int(status.get("CapEff", "0"), 16) >> cap & 1)
    except ValueError:
        return False


def denied_fix():
    """The fix to name when the kernel denies us a process (its /proc files,
    ptrace): root without CAP_SYS_PTRACE is a container's root."""
    if os.getuid() == 0 and not has_cap(proc_status(os.getpid()), CAP_SYS_PTRACE):
        return NO_CAP_FIX
    return "it is not ours to trace (attach as the program's user, or as root)"


def check_ptrace(pid):
    """Refused when the kernel will not let us (gdb) trace PID."""
    me = proc_status(os.getpid())
    privileged = has_cap(me, CAP_SYS_PTRACE)
    try:
        with open(YAMA_PTRACE_SCOPE) as f:
            scope = int(f.read().strip() or 0)
    except (OSError, ValueError):
        scope = 0  # no Yama
    if scope >= 3:
        raise Refused("ptrace is disabled on this machine (kernel.yama.ptrace_scope = 3); "
                      "only a reboot with a lower setting allows attaching")
    if scope in (1, 2) and not privileged and os.getuid() == 0:
        raise Refused("kernel.yama.ptrace_scope = %d and %s" % (scope, NO_CAP_FIX))
    if scope == 2 and not privileged:
        raise Refused("attaching needs CAP_SYS_PTRACE here (kernel.yama.ptrace_scope = 2): "
                      "run threadgraph attach as root")
    if scope == 1 and not privileged:
        raise Refused("ptrace is restricted to a process's ancestors "
                      "(kernel.yama.ptrace_scope = 1): run `sudo sysctl "
                      "kernel.yama.ptrace_scope=0`, or threadgraph attach as root")
    uid = proc_status(pid).get("Uid", "").split()
    if uid and int(uid[0]) != os.getuid() and not privileged and os.getuid() == 0:
        raise Refused("process %d belongs to another user and %s" % (pid, NO_CAP_FIX))
    if uid and int(uid[0]) != os.getuid() and not privileged:
        try:
            owner = pwd.getpwuid(int(uid[0])).pw_name
        except KeyError:
            owner = uid[0]
        raise Refused("process %d belongs to %s: attach as that user, or as root" % (pid, owner))


def check_not_traced(pid):
    """Refused when another tracer (a debugger, strace) holds PID: ptrace
    would fail, and say only "Operation not permitted"."""
    try:
        tracer = int(proc_status(pid).get("TracerPid", "0") or 0)
    except ValueError:
        return
    if tracer:
        try:
            with open("/proc/%d/comm" % tracer) as f:
                name = f.read().strip()
        except OSError:
            name = "?"
        raise Refused("process %d is being traced by process %d (%s): a debugger or "
                      "strace; attach once it has detached" % (pid, tracer, name))


NO_CAP_FIX = ("this root has no CAP_SYS_PTRACE (a container's): add it (docker run "
              "--cap-add=SYS_PTRACE; Kubernetes: securityContext.capabilities.add "
              "[SYS_PTRACE], or kubectl debug --profile=general); docs/attach.md")
PTRACE_FIX = ("ptrace not permitted: in a container, add CAP_SYS_PTRACE (docker run "
              "--cap-add=SYS_PTRACE; Kubernetes: securityContext.capabilities.add "
              "[SYS_PTRACE], or kubectl debug --profile=general); docs/attach.md")


# --- one attach per target: a locked state file ---------------------------------


def state_dir():
    d = os.path.join(tempfile.gettempdir(), "threadgraph-%d" % os.getuid())
    os.makedirs(d, mode=0o700, exist_ok=True)
    return d


def state_path(pid):
    return os.path.join(state_dir(), "attach-%d" % pid)


def lock_state(pid):
    """Open and lock PID's state file, writing our pid in it; Refused if another
    attach holds it.  The lock lasts as long as this process (the fd)."""
    path = state_path(pid)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            other = os.read(fd, 64).decode("ascii", "replace").strip()
            os.close(fd)
            raise Refused("process %d is already attached (threadgraph attach, pid %s): "
                          "threadgraph detach %d first" % (pid, other or "?", pid))
        # The holder unlinks the file before it lets go of the lock: a lock
        # taken on a file opened just before that unlink is a lock on nothing
        # (a third attach creates and locks a new file).  Keep it only if the
        # path still names the locked file.
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    os.ftruncate(fd, 0)
    os.write(fd, b"%d\n" % os.getpid())
    return fd


# --- injection --------------------------------------------------------------------


def c_string(text):
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')


# The general registers a hand-made call may change, saved and put back (the
# callee keeps the others: the SysV x86-64 ABI).
CALL_REGS = ("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "r8", "r9", "r10", "r11",
             "r12", "r13", "r14", "r15", "eflags")


def gdb_script(line):
    """The gdb commands: stop at a thread entering PyEval_SaveThread, run LINE
    there, detach.  A SIGINT (our timeout, or Ctrl-C before the safe point)
    ends the first `continue` elsewhere: gdb then detaches (status 3).

    The call is made by hand, not with gdb's `print f(...)`: an inferior call
    saves and restores every register, the vector ones through the kernel's
    extended-state interface, which some kernels refuse to gdb ("Couldn't
    write extended state status: Bad address", seen with gdb 13.1 on Linux
    6.18), leaving the call undone.  At the entry of PyEval_SaveThread, a
    function without arguments, the ABI leaves the vector registers to the
    callee, so the script sets only general ones: LINE's bytes are written
    below the stack, the return address is the entry itself (a breakpoint of
    that thread alone, on the return's stack pointer, stops the return
    there), then the stack pointer and the saved registers are put back."""
    data = line.encode("utf-8") + b"\0"
    data += b"\0" * (-len(data) % 8)
    words = struct.unpack("<%dQ" % (len(data) // 8), data)
    cmds = [
        "set confirm off",
        "set pagination off",
        "handle SIGINT nopass",
        "handle all nostop noprint pass",
        "print (void *)PyEval_SaveThread",  # not Python: an error, gdb ends here
        "print (void *)PyRun_SimpleString",
        "break *PyEval_SaveThread",
        "continue",
        "delete breakpoints",
        "if $pc != (unsigned long)PyEval_SaveThread",
        "  detach",
        "  quit 3",
        "end",
        "echo %s\\n" % INJECT_MARK,
        "set $tg_thread = $_thread",
        "set $tg_sp = (unsigned long)$rsp",
        "set $tg_pc = (unsigned long)$pc",
        # LINE below the red zone (128 bytes), 16-aligned, close enough to the
        # stack pointer to be in pages the thread has used (gdb's writes do
        # not grow a stack); the return address under it, so that the callee
        # starts with the stack as a call leaves it; a failed write ends the
        # script before any register is changed
        "set $tg_str = ($tg_sp - 512 - %d) & ~15" % len(data),
        "set $tg_ret = $tg_str - 72",
        # the return, not the line's own releases of the GIL on the way
        'eval "break *%lu thread %d if $rsp == %lu", $tg_pc, $_thread, $tg_ret + 8',
    ]
    cmds += ["set $tg_%s = $%s" % (r, r) for r in CALL_REGS]
    cmds += ["set {unsigned long}($tg_str + %d) = %#x" % (8 * i, w)
             for i, w in enumerate(words)]
    cmds += [
        "set {unsigned long}$tg_ret = $tg_pc",
        "set $rdi = $tg_str",
        "set $rsp = $tg_ret",
        "set $pc = (unsigned long)PyRun_SimpleString",
        # until the call has returned: a SIGINT meanwhile (our timeout or
        # Ctrl-C in a race with the mark, the attaching command's death) stops
        # the program elsewhere, possibly in another thread; putting the
        # registers back then would abort it ("Fatal Python error:
        # PyEval_SaveThread: ... the GIL is released")
        "continue",
        'eval "thread %d", $tg_thread',
        "while $pc != $tg_pc || (unsigned long)$rsp != $tg_ret + 8",
        "  continue",
        '  eval "thread %d", $tg_thread',
        "end",
        "delete breakpoints",
        "print (int)$rax",
        "set $rsp = $tg_sp",
        "set $pc = $tg_pc",
    ]
    cmds += ["set $%s = $tg_%s" % (r, r) for r in CALL_REGS]
    cmds += ["detach", "quit 0", ""]
    return "\n".join(cmds)


def interrupt_when_parent_dies(parent):
    """A preexec_fn for gdb: SIGINT when this command dies (SIGKILL), as our
    timeout sends it, so that gdb detaches instead of holding the program
    traced until some thread reaches a safe point, which may be never (a new
    attach is then refused: the program is traced already)."""
    # libc found here, not in the child: between fork and exec a child may
    # only call what takes no lock (an import could wait on one forever)
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def preexec():
        prctl(1, int(signal.SIGINT))  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # died before prctl
            os.kill(os.getpid(), signal.SIGINT)
    return preexec


def inject_gdb(pid, line, ctl_dir, stop):
    """Run LINE in PID through gdb.  Returns True once run, False when no thread
    reached a safe point in time or STOP (a list, a signal arrived) was set
    before; Refused on a gdb failure."""
    gdb = shutil.which("gdb")
    if gdb is None:
        raise Refused("gdb is needed to attach (Debian/Ubuntu: apt-get install gdb)")
    script = os.path.join(ctl_dir, "inject.gdb")
    with open(script, "w") as f:
        f.write(gdb_script(line))
    out_path = os.path.join(ctl_dir, "gdb.out")
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(
            [gdb, "-q", "-batch", "-nx", "-iex", "set auto-load off",
             "-iex", "set debuginfod enabled off", "-p", str(pid), "-x", script],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,  # a terminal's Ctrl-C is ours to forward
            preexec_fn=interrupt_when_parent_dies(os.getpid()))
    deadline = time.monotonic() + GDB_TIMEOUT
    interrupted = None
    while True:
        try:
            rc = proc.wait(timeout=0.1)
            break
        except subprocess.TimeoutExpired:
            pass
        # Again every half second: a SIGINT that reaches gdb before its
        # first `continue` (while it reads the program's symbols) is lost.
        if interrupted is not None and time.monotonic() < interrupted + 0.5:
            continue
        if stop or time.monotonic() > deadline:
            with open(out_path, "rb") as f:
                injecting = INJECT_MARK.encode() in f.read()
            if not injecting:  # never in the middle of the call
                proc.send_signal(signal.SIGINT)
                interrupted = time.monotonic()
    with open(out_path, "rb") as f:
        text = f.read().decode("utf-8", "replace")
    if rc == 0 and INJECT_MARK in text:
        return True
    if rc == 3:
        return False
    if "ptrace: Operation not permitted" in text:
        raise Refused(PTRACE_FIX)
    if "No such process" in text:
        raise Refused("no process %d" % pid)
    if "No symbol" in text and "PyEval_SaveThread" in text:
        raise Refused("process %d is not a Python process (no PyEval_SaveThread)" % pid)
    last = [l for l in text.splitlines() if l.strip()][-1:] or ["no output"]
    raise Refused("gdb failed (status %d): %s (all of it: %s)" % (rc, last[0], out_path))


def inject_remote_exec(pid, line, ctl_dir):
    """CPython 3.14+ (PEP 768): the interpreter runs LINE's script itself at its
    next safe point.  Untested here (no 3.14 on the test machines)."""
    script = os.path.join(ctl_dir, "inject.py")
    with open(script, "w") as f:
        f.write(line + "\n")
    try:
        sys.remote_exec(pid, script)
    except PermissionError:
        raise Refused(PTRACE_FIX)
    except (OSError, RuntimeError) as exc:
        raise Refused("sys.remote_exec failed: %s" % exc)
    return True


# --- the session -------------------------------------------------------------------


class _Stop(Exception):
    pass


def process_start(pid):
    """PID's start time (field 22 of /proc/PID/stat, which tells it from a later
    process of the same pid), or None once it has ended (a zombie too)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2:].split()
    if len(fields) < 20 or fields[0] in (b"Z", b"X"):
        return None
    return fields[19]


class Target:
    """The attached process, to tell whether it still runs: the end of the
    control connection is not enough, a child it forked may hold the
    connection open after it has ended."""

    def __init__(self, pid):
        self.pid = pid
        self.start = process_start(pid)

    def running(self):
        return self.start is not None and process_start(self.pid) == self.start


def wait_readable(sock, timeout, target):
    """True when SOCK is readable, False when TIMEOUT (None: none) passed,
    None when TARGET ended first."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        wait = 0.5 if deadline is None else min(0.5, max(0.0, deadline - time.monotonic()))
        ready, _, _ = select.select([sock], [], [], wait)
        if ready:
            return True
        if not target.running():
            return None
        if deadline is not None and time.monotonic() >= deadline:
            return False


def recv_line(conn, buf, timeout, target):
    """(line, rest) from CONN, line None at its end, when TIMEOUT passes or
    when TARGET has ended."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while b"\n" not in buf:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not wait_readable(conn, wait, target):
            return None, buf
        try:
            data = conn.recv(4096)
        except OSError:
            data = b""
        if not data:
            return None, buf
        buf += data
    line, _, rest = buf.partition(b"\n")
    return line.decode("utf-8", "replace"), rest


def options_of(opts):
    values = {k: v for k, v in vars(opts).items() if k not in ("pid", "duration", "sort")}
    values.setdefault("follow_fork", False)
    values.setdefault("process_memory_frequency", None)
    return values


def attach(opts):
    """Attach to OPTS.pid, record until detach, print what was done.  Returns
    the exit status.  With OPTS.live the live view runs until q, then detach."""
    from threadgraph._options import parse_size
    from threadgraph._run import say_losses, what_was_written

    pid = opts.pid
    base = os.path.abspath(opts.output or "threadgraph-attach")
    stop = []

    def on_signal(signum, frame):
        stop.append(signum)
        if len(stop) == 1 and raise_on_signal:
            raise _Stop()

    raise_on_signal = False
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    ctl_dir = None
    lock_fd = None
    try:
        if pid <= 0 or pid == os.getpid():
            raise Refused("%d is not a process to attach to" % pid)
        target = Target(pid)
        exe, env, cwd = target_python(pid)
        check_same_mount_namespace(pid)
        check_not_under_run(pid)
        check_ptrace(pid)
        check_not_traced(pid)
        version = check_importable(pid, exe, env, cwd)
        lock_fd = lock_state(pid)
        ctl_dir = tempfile.mkdtemp(prefix="tg-attach-")
        target_uid = int(proc_status(pid).get("Uid", "0").split()[0])
        if os.getuid() == 0 and target_uid != 0:
            os.chown(ctl_dir, target_uid, -1)  # root attaching to a user's program
        with open(os.path.join(ctl_dir, "options.json"), "w") as f:
            json.dump({"base": base, "options": options_of(opts)}, f)
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(os.path.join(ctl_dir, "sock"))
        if os.getuid() == 0 and target_uid != 0:
            os.chown(os.path.join(ctl_dir, "sock"), target_uid, -1)
        listener.listen(4)
        from threadgraph import __version__
        from threadgraph._inject import SOURCE

        line = "exec(%r, {'D': %r, 'V': %r})" % (SOURCE, ctl_dir, __version__)
        if stop:
            say("interrupted before attaching: nothing was done to process %d" % pid)
            return 130
        started = time.monotonic()
        if version >= (3, 14) and hasattr(sys, "remote_exec"):
            ran = inject_remote_exec(pid, line, ctl_dir)
        else:
            ran = inject_gdb(pid, line, ctl_dir, stop)
        if not ran:
            if stop:
                say("interrupted before attaching: nothing was done to process %d" % pid)
                return 130
            raise Refused("no thread of process %d reached a safe point (a thread "
                          "waiting: I/O, sleep, a lock) within %g s: nothing was done"
                          % (pid, GDB_TIMEOUT))
        ready = wait_readable(listener, CONNECT_TIMEOUT, target)
        if ready is None:
            say("process %d ended before recording: nothing was recorded" % pid)
            return 1
        if not ready:
            say("process %d ran threadgraph's line but did not answer within %g s"
                % (pid, CONNECT_TIMEOUT))
            return 1
        conn, _ = listener.accept()
        listener.close()
        reply, buf = recv_line(conn, b"", CONNECT_TIMEOUT, target)
        while reply is not None and reply.startswith("note "):  # said here, not there
            say(reply[5:])
            reply, buf = recv_line(conn, buf, CONNECT_TIMEOUT, target)
        if reply is None or reply.startswith("error "):
            raise Refused(reply[6:] if reply else "process %d ended before recording" % pid)
        out_dir = reply[3:]
        attach_s = time.monotonic() - started
        say("attached to process %d in %.2f s; writing to %s/ (Ctrl-C or threadgraph "
            "detach %d to stop)" % (pid, attach_s, display_path(out_dir), pid))
        ended = False
        if opts.live:
            show_live(out_dir, stop, opts.sort)  # until q (or detach): then detach
            stop.append(0)
        raise_on_signal = True
        try:
            if not stop:
                # the program ended (or the session broke): readable, or
                # the process gone while a child of its holds the connection
                ended = wait_readable(conn, opts.duration, target) is not False
        except _Stop:
            pass
        raise_on_signal = False
        if ended:
            # Anything but "done" after "ok" means the program has gone.
            say_ended(pid, out_dir, "attached", parse_size(opts.max_size))
            return 0
        detach_started = time.monotonic()
        try:
            conn.sendall(b"detach\n")
        except OSError:
            pass
        reply, buf = recv_line(conn, buf, None, target)
        if reply is None or not reply.startswith("done"):
            say_ended(pid, out_dir, "detaching", parse_size(opts.max_size))
            return 0
        detach_s = time.monotonic() - detach_started
        try:
            stats = json.loads(reply[5:])
        except ValueError:
            stats = None
        if not isinstance(stats, dict):
            say("detached from process %d in %.2f s; its files are in %s/ (its "
                "answer was not understood: %r)" % (pid, detach_s, display_path(out_dir),
                                                    reply[:80]))
            return 1
        threads = stats.get("threads", 0)
        say("detached from process %d in %.2f s: %d thread%s, %s in %s/ "
            "(then: threadgraph %s %s)" % (
                pid, detach_s, threads, "" if threads == 1 else "s",
                what_was_written(stats, out_dir, opts.mode, opts.aggregate, opts.stack),
                display_path(out_dir), "summary" if opts.aggregate else "memg",
                display_path(out_dir)))
        errors = stats.get("output_errors") or []
        for message in errors:  # disable()'s write errors, not in the program's stderr
            say("output stopped: %s" % message)
        say_losses(stats, parse_size(opts.max_size))
        return 1 if errors else 0
    except Refused as exc:
        say("cannot attach: %s" % exc)
        return 1
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if ctl_dir is not None:
            shutil.rmtree(ctl_dir, ignore_errors=True)
        if lock_fd is not None:
            try:
                os.unlink(state_path(pid))
            except OSError:
                pass
            os.close(lock_fd)


def say_ended(pid, out_dir, when, max_size):
    """The program ended while WHEN ("attached", "detaching"): its atexit closed
    the run (runinfo.json has its end_time and the losses, said here as at a
    detach), or a signal or a crash killed it first (no end_time: the records
    not yet flushed are lost, docs/attach.md "What it sees")."""
    from threadgraph._run import say_losses

    try:
        with open(os.path.join(out_dir, "runinfo.json"), encoding="utf-8") as f:
            info = json.load(f)
    except (OSError, ValueError):
        info = {}
    if not isinstance(info, dict) or info.get("end_time") is None:
        say("process %d ended while %s, killed before it could close the run (a "
            "signal, a crash): %s/ lacks the records of its last half second"
            % (pid, when, display_path(out_dir)))
        return
    say("process %d ended while %s; its files are complete in %s/"
        % (pid, when, display_path(out_dir)))
    say_losses(info, max_size)


def show_live(out_dir, stop, sort=None):
    """The C live view of OUT_DIR on this terminal, until it is left, or until
    STOP is set (threadgraph detach PID: the view is ended, restoring the
    terminal)."""
    from threadgraph._cli import cli_path

    view = subprocess.Popen([cli_path(), "live"] + (["--sort", sort] if sort else [])
                            + [out_dir])
    while True:
        try:
            view.wait(timeout=0.2)
            return
        except subprocess.TimeoutExpired:
            if stop:  # it restores the terminal on SIGTERM as on q
                view.terminate()


def live_main(argv):
    """threadgraph live PID [attach options]: attach --live."""
    return main(["--live"] + list(argv), prog="threadgraph live")


def display_path(path):
    from threadgraph._run import display_path as dp

    return dp(path)


def main(argv, prog=PROG):
    """threadgraph attach (PROG names the command in usage errors: live PID too)."""
    from threadgraph._run import check_options

    parser = build_parser(prog)
    opts = parser.parse_args(argv)
    if opts.duration is not None and opts.duration <= 0:
        parser.error("--duration must be more than 0")
    check_options(parser, opts)  # before the target is touched, as run does
    if opts.live and not os.isatty(1):
        parser.error("the live view draws on a terminal, and the standard output is "
                     "not one: nothing was attached (threadgraph attach PID records "
                     "without the view)")
    return attach(opts)


# --- detach -----------------------------------------------------------------------


def detach_main(argv):
    parser = argparse.ArgumentParser(
        prog="threadgraph detach", usage="%(prog)s PID",
        description="Stop a threadgraph attach recording process PID (SIGTERM to "
        "the attach command: it detaches as on Ctrl-C) and wait until the program runs "
        "as before.")
    parser.add_argument("pid", metavar="PID", type=int, help="the attached process")
    opts = parser.parse_args(argv)
    path = state_path(opts.pid)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        say("process %d is not attached" % opts.pid)
        return 1
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            say("process %d is not attached" % opts.pid)  # a stale file
            return 1
        except OSError:
            pass
        text = os.read(fd, 64).decode("ascii", "replace").strip()
        try:
            os.kill(int(text), signal.SIGTERM)
        except (ValueError, ProcessLookupError):
            say("process %d is not attached" % opts.pid)
            return 1
        fcntl.flock(fd, fcntl.LOCK_SH)  # released when the attach has detached
    finally:
        os.close(fd)
    say("detached from process %d" % opts.pid)
    return 0
