"""The recorder under stress: kills, thread churn, deep stacks, forks, exec.

A profiler runs inside other people's programs: it must never crash them, never
change what they do, and never lose what it recorded.  Each scenario runs in a
fresh interpreter (the recorder changes process-wide state) and the test reads
the files it left.  Limits are generous on purpose (shared, loaded machines)
and no test claims a timing: the flush guarantee ("every record older than
about a second is on disk") is checked by state, records of an idle thread that
reach the disk with no help from it, and its period is shown in bench/.
"""
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import threadgraph

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(threadgraph.__file__)))

TIME_RE = r"\d+\.\d{6}"
MEM_RE = re.compile(r"^(?:(%s)#)?(.*):(-?\d+):([^:]*)=>(-?\d+)$" % TIME_RE)
STACK_RE = re.compile(r"^( *)(?:(%s)#)?(.*):(-?\d+):([^:]*)$" % TIME_RE)
PROCESS_RE = re.compile(r"^(?:(%s)#)?(\d+)$" % TIME_RE)

PRELUDE = """\
import os, sys, threading, time
from threadgraph import ProcessProfile
def nfds():
    return len(os.listdir('/proc/self/fd'))
def fd_targets():
    # what the open descriptors are, {(fd, target)}: to name a leak
    found = set()
    for fd in os.listdir('/proc/self/fd'):
        try:
            found.add((int(fd), os.readlink('/proc/self/fd/' + fd)))
        except OSError:
            pass  # the listing's own descriptor, closed already
    return found
"""


def env_with_package(extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = PKG_PARENT + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTHONWARNINGS", None)
    env.update(extra or {})
    return env


def run_py(tmp_path, code, name="scenario.py", timeout=120, check=True, args=()):
    script = tmp_path / name
    script.write_text(textwrap.dedent(code))
    proc = subprocess.run([sys.executable, str(script)] + list(args), cwd=str(tmp_path),
                          env=env_with_package(), capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        pytest.fail("scenario failed (%d)\nstdout:\n%s\nstderr:\n%s"
                    % (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:]))
    return proc


def find_cli():
    env = os.environ.get("TG_CLI")
    if env:
        return env
    local = os.path.join(REPO, "build", "threadgraph")
    if not os.path.exists(local) and os.path.exists(os.path.join(REPO, "Makefile")):
        subprocess.run(["make", "-s", "-C", REPO, "build/threadgraph"], check=False)
    if os.path.exists(local):
        return local
    bundled = os.path.join(os.path.dirname(threadgraph.__file__), "_bin", "threadgraph")
    return bundled if os.path.exists(bundled) else None


def read_text(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "surrogateescape")


def whole_lines(path, regex, torn_last_ok=False):
    """The file's lines, each matching regex; the last may be torn if allowed."""
    data = read_text(path)
    lines = data.split("\n")
    last = lines.pop()          # "" when the file ends with a newline
    if last:
        assert torn_last_ok, "last line of %s has no newline: %r" % (path, last)
    for line in lines:
        assert regex.match(line), "bad line %r in %s" % (line, path)
    return [regex.match(line) for line in lines]


def run_dirs(base):
    return sorted(os.path.join(str(base), d) for d in os.listdir(str(base)))


def only_dir(base):
    dirs = run_dirs(base)
    assert len(dirs) == 1, dirs
    return dirs[0]


def mem_files(run_dir):
    return sorted(os.path.join(run_dir, f) for f in os.listdir(run_dir)
                  if f.endswith(".mem") and f != "process.mem")


def check_pairing(stack_path, mem_path):
    """Post-order of the .stack forest == the .mem sequence (open calls aside)."""
    stack = [(len(m.group(1)), m.group(3), m.group(5)) for m in whole_lines(stack_path, STACK_RE)]
    mem = [(m.group(2), m.group(4)) for m in whole_lines(mem_path, MEM_RE)]
    post, open_, prev = [], [], -1
    for depth, site, func in stack:
        assert depth <= prev + 1, "depth jumps from %d to %d" % (prev, depth)
        while len(open_) > depth:
            post.append(open_.pop())
        open_.append((site, func))
        prev = depth
    while open_ and len(post) < len(mem):
        post.append(open_.pop())
    assert post == mem


# --- killed with SIGKILL ------------------------------------------------------

KILL_WORKLOAD = PRELUDE + """
import random
def leaf(n):
    return bytearray(n)
def mid(i):
    keep = [leaf(64 + i % 512) for _ in range(4)]
    return len(keep)
def worker(k, slow=False):
    # hb-K holds the time of this thread's latest recorded calls, written
    # outside the profiler's files: if the machine starves the thread, the
    # test knows which records existed to be flushed.
    hb = os.open("hb-%d" % k, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    i = 0
    start = time.time()
    while True:
        mid(i)
        i += 1
        if i % 16 == 0 or slow:
            os.pwrite(hb, b"%20.6f" % time.time(), 0)
        if slow and time.time() - start > 0.5:
            # a thread that goes idle with records in its buffer, far from
            # full: only the background flusher can put them on disk
            os.close(os.open("idle-%d" % k, os.O_WRONLY | os.O_CREAT, 0o644))
            threading.Event().wait()
        time.sleep(0.01 if slow else 0.0002)   # files of a few MB, quick to check
p = ProcessProfile(format="text", default_log_path="out")
p.trackStack()
p.setProcessMemoryFrequence(200)
p.enable()
for k in range(3):
    threading.Thread(target=worker, args=(k,), name="busy-%d" % k, daemon=True).start()
threading.Thread(target=worker, args=(3, True), name="slow", daemon=True).start()
print(p.output_dir, flush=True)
threading.Event().wait()
"""


def wait_until(predicate, what, bound=60):
    """Polls PREDICATE until it holds.  BOUND seconds only stop a hang (a
    failure), never reached when it works: nothing here is a timing claim."""
    give_up = time.monotonic() + bound
    while not predicate():
        assert time.monotonic() < give_up, "%s: not after %d s" % (what, bound)
        time.sleep(0.01)


def newest_time_on_disk(path, regex, group):
    """The time of PATH's last whole record (a file's records are in time
    order), or 0 if it has none yet; reads only the file's tail."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 65536))
            lines = f.read().decode("utf-8", "replace").split("\n")[:-1]
    except FileNotFoundError:
        return 0
    for line in reversed(lines):
        m = regex.match(line)
        if m and m.group(group):
            return float(m.group(group))
    return 0


def heartbeats(tmp_path, n):
    """Each KILL_WORKLOAD thread's latest heartbeat: records made up to then exist."""
    return [float((tmp_path / ("hb-%d" % k)).read_text()) for k in range(n)]


def test_sigkill_at_a_random_point_keeps_older_records(tmp_path):
    """SIGKILL while three threads write and a fourth idles with records in its
    buffer: killed once the records every thread had made by a moment are on
    disk (the idle one's put there by the background flusher alone), at a point
    in the busy threads' writing that no one chooses.  Every whole line parses,
    those records are still there, and the CLI reads the files."""
    script = tmp_path / "kill.py"
    script.write_text(KILL_WORKLOAD)
    proc = subprocess.Popen([sys.executable, str(script)], cwd=str(tmp_path),
                            env=env_with_package(), stdout=subprocess.PIPE, text=True)
    try:
        run_dir = proc.stdout.readline().strip()
        assert run_dir, "the workload did not start"
        names = ["busy-0", "busy-1", "busy-2", "slow"]
        busy = [os.path.join(run_dir, name + ".mem") for name in names]
        wait_until(lambda: os.path.exists(str(tmp_path / "idle-3")), "the slow thread idle")
        beats = heartbeats(tmp_path, 4)
        wait_until(lambda: all(
            newest_time_on_disk(p, MEM_RE, 1) >= beat and
            newest_time_on_disk(p[:-4] + ".stack", STACK_RE, 2) >= beat
            for p, beat in zip(busy, beats)), "the records of the heartbeats on disk")
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    for path, beat in zip(busy, beats):
        # what was on disk at the kill is still there, every line whole but the last
        recs = whole_lines(path, MEM_RE, torn_last_ok=True)
        assert max(float(m.group(1)) for m in recs) >= beat, path
        stack = whole_lines(path[:-4] + ".stack", STACK_RE, torn_last_ok=True)
        assert max(float(m.group(2)) for m in stack) >= beat, path
    whole_lines(os.path.join(run_dir, "process.mem"), PROCESS_RE, torn_last_ok=True)
    cli = find_cli()
    if cli is None:
        pytest.skip("threadgraph CLI not built")
    mems = busy + [os.path.join(run_dir, "process.mem")]
    assert len(whole_lines(busy[3], MEM_RE, torn_last_ok=True)) < 900   # never filled a buffer
    r = subprocess.run([cli, "peaks", "--peak=0"] + mems, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.count("\n") > 0
    stacks = [p[:-4] + ".stack" for p in busy]
    r = subprocess.run([cli, "nesting", "--script-only", "-o", str(tmp_path)] + stacks,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]


# --- thread churn -----------------------------------------------------------

def test_thousand_short_lived_threads_close_their_files(tmp_path):
    proc = run_py(tmp_path, PRELUDE + """
from threadgraph import _recorder
def work(i):
    return [i] * 10
p = ProcessProfile(format="text", default_log_path="out")
p.trackStack()
before_enable = nfds()
p.enable()
baseline = nfds()
peak = 0
for batch in range(20):
    ts = [threading.Thread(target=work, args=(i,)) for i in range(50)]
    for t in ts:
        t.start()
    peak = max(peak, nfds())
    for t in ts:
        t.join()
# an ended thread's files are closed by the flusher, after its end
_recorder._test_wait_ended()
after_joins = nfds()
p.disable()
print(before_enable, baseline, after_joins, nfds(), peak)
""")
    before_enable, baseline, after_joins, after_disable, peak = map(int, proc.stdout.split())
    assert after_joins == baseline, "fds left open by ended threads"
    assert after_disable == before_enable
    run_dir = only_dir(tmp_path / "out")
    mems = [f for f in os.listdir(run_dir) if f.endswith(".mem") and f != "process.mem"]
    stacks = [f for f in os.listdir(run_dir) if f.endswith(".stack")]
    assert len(mems) == 1001 and len(stacks) == 1001
    with open(os.path.join(run_dir, "runinfo.json")) as f:
        info = json.load(f)
    assert len(info["threads"]) == 1001
    assert len({t["mem"] for t in info["threads"]}) == 1001
    assert len({t["native_id"] for t in info["threads"]}) >= 2
    for t in info["threads"][1:]:
        recs = whole_lines(os.path.join(run_dir, t["mem"]), MEM_RE)
        assert any(m.group(4) == "work" for m in recs), t


# --- deep stacks, exceptions, generators, asyncio -----------------------------

def test_recursion_to_the_limit_is_unchanged(tmp_path):
    """RecursionError at a limit of 100,000 happens at the same depth, profiled or not,
    in a thread started while profiling (its function runs through the recorder's
    boot callable, which once cost one level) and in the main thread (3.11+, where
    deep Python recursion needs no C stack)."""
    code = PRELUDE + """
sys.setrecursionlimit(100000)
threading.stack_size(1024 * 1024 * 1024)
depth = [0]
def rec(n):
    depth[0] = n
    rec(n + 1)
def deep():
    try:
        rec(0)
    except RecursionError as e:
        print(threading.current_thread().name, type(e).__name__, depth[0])
if sys.argv[1] == "on":
    p = ProcessProfile(format="text", default_log_path="out", profile="python")
    p.enable()
t = threading.Thread(target=deep, name="deep")
t.start(); t.join()
if sys.version_info >= (3, 11):
    deep()
if sys.argv[1] == "on":
    p.disable()
"""
    off = run_py(tmp_path, code, args=["off"], timeout=300)
    on = run_py(tmp_path, code, args=["on"], timeout=300)
    assert on.stderr == off.stderr == ""
    off_lines = [l.split() for l in off.stdout.splitlines()]
    on_lines = [l.split() for l in on.stdout.splitlines()]
    assert [l[:2] for l in on_lines] == [l[:2] for l in off_lines]
    assert off_lines[0][:2] == ["deep", "RecursionError"]
    thread_off, thread_on = int(off_lines[0][2]), int(on_lines[0][2])
    assert thread_on == thread_off
    assert thread_on > 90000
    if len(off_lines) > 1:
        assert on_lines[1] == off_lines[1]      # main thread: exactly the same
    recs = whole_lines(os.path.join(only_dir(tmp_path / "out"), "deep.mem"), MEM_RE)
    funcs = [m.group(4) for m in recs]
    assert funcs.count("rec") == thread_on + 1
    assert funcs.index("deep") > funcs.index("rec")


BEHAVIOUR = """\
import asyncio, os, sys, threading, traceback
if os.environ.get("TG_PROFILE"):
    from threadgraph import ProcessProfile
    profiler = ProcessProfile(format="text", default_log_path=os.environ["TG_PROFILE"])
    profiler.trackStack()
    profiler.enable()

class Boom(Exception):
    pass

def dive(n):
    if n == 0:
        raise Boom("bottom reached at %d" % n)
    return dive(n - 1) + 1

def exceptions():
    try:
        dive(200)
    except Boom:
        lines = traceback.format_exc().splitlines()
        print(len(lines), lines[0], lines[-1])
        print("\\n".join(lines[:6]))
    try:
        {}["missing"]
    except KeyError as e:
        print("KeyError", repr(e))
    try:
        try:
            1 / 0
        except ZeroDivisionError as e:
            raise ValueError("chained") from e
    except ValueError as e:
        print("chained:", repr(e), repr(e.__cause__))

def gen(n):
    total = 0
    for i in range(n):
        got = yield i * i
        total += got or 0
    return total

def generators():
    g = gen(5)
    out = [next(g)]
    try:
        while True:
            out.append(g.send(1))
    except StopIteration as stop:
        print("gen", out, stop.value)
    print("genexpr", sum(x for x in range(100) if x % 3))
    def closing():
        try:
            yield 1
            yield 2
        finally:
            print("generator closed")
    c = closing(); next(c); c.close()

async def task(i):
    await asyncio.sleep(0.001 * (i % 3))
    if i == 7:
        raise RuntimeError("task %d failed" % i)
    return i * 2

async def main_async():
    res = await asyncio.gather(*(task(i) for i in range(10)), return_exceptions=True)
    print("gather", [r if isinstance(r, int) else repr(r) for r in res])
    async def agen():
        for i in range(3):
            yield i
    print("agen", [x async for x in agen()])

def threads():
    out = []
    lock = threading.Lock()
    def w(i):
        with lock:
            out.append(i * i)
    ts = [threading.Thread(target=w, args=(i,)) for i in range(8)]
    for t in ts: t.start()
    for t in ts: t.join()
    print("threads", sorted(out))

exceptions()
generators()
asyncio.run(main_async())
threads()
sys.stdout.flush()
how = sys.argv[1]
if how == "raise":
    dive(50)
elif how == "exit":
    sys.exit(3)
elif how == "systemexit-str":
    raise SystemExit("bye")
"""


@pytest.mark.parametrize("how", ["raise", "exit", "systemexit-str", "normal"])
def test_program_behaviour_unchanged(tmp_path, how):
    """Same stdout, same stderr (tracebacks included), same exit code."""
    script = tmp_path / "behaviour.py"
    script.write_text(BEHAVIOUR)

    def go(profile):
        extra = {"TG_PROFILE": str(tmp_path / "out")} if profile else {}
        return subprocess.run([sys.executable, str(script), how], cwd=str(tmp_path),
                              env=env_with_package(extra), capture_output=True, text=True,
                              timeout=120)
    plain, profiled = go(False), go(True)
    assert plain.returncode == {"raise": 1, "exit": 3, "systemexit-str": 1, "normal": 0}[how]
    assert profiled.returncode == plain.returncode
    assert profiled.stdout == plain.stdout
    # tracebacks name the script's lines only: the profiler adds no frame
    assert profiled.stderr == plain.stderr
    assert "bottom reached at 0" in plain.stdout and "gather" in plain.stdout
    run_dir = only_dir(tmp_path / "out")
    for mem in mem_files(run_dir):
        check_pairing(mem[:-4] + ".stack", mem)
    funcs = [m.group(4) for m in whole_lines(os.path.join(run_dir, "MainThread.mem"), MEM_RE)]
    assert funcs.count("dive") >= 201 and "gen" in funcs and "task" in funcs


# --- threads blocked in C, daemon threads, enable/disable cycles -------------

def test_threads_blocked_in_c_across_enable_and_disable(tmp_path):
    proc = run_py(tmp_path, PRELUDE + """
import linecache, queue, select
r, w = os.pipe()
q = queue.Queue()
ev = threading.Event()
results = []
def waiting(t):
    # T stands in its blocking call: a wait of threading's (q.get, ev.wait) or
    # the line marked BLOCKS (a C call)
    f = sys._current_frames().get(t.ident)
    if f is None:
        return False
    if f.f_code.co_filename == threading.__file__:
        return f.f_code.co_name == "wait"
    return "BLOCKS" in linecache.getline(f.f_code.co_filename, f.f_lineno)
def wait_until_waiting(*ts):
    while not all(waiting(t) for t in ts):
        time.sleep(0.001)
def in_select():
    select.select([r], [], [])      # BLOCKS
    results.append(("select", len(os.read(r, 1))))
    for _ in range(3):
        sum(range(100))
def in_queue():
    results.append(("queue", q.get()))
    sum(range(10))
def in_wait():
    results.append(("event", ev.wait(60)))
    sum(range(10))
ts = [threading.Thread(target=f, name=f.__name__) for f in (in_select, in_queue, in_wait)]
for t in ts: t.start()
wait_until_waiting(*ts)
p = ProcessProfile(format="text", default_log_path="out")
p.trackStack()
p.enable()
q.put(42)               # woken while profiled: it was blocked before enable
ts[1].join(60)          # and it ends while profiled
wait_until_waiting(ts[0], ts[2])
p.disable()
os.write(w, b"x")       # woken after disable
ev.set()
for t in ts: t.join(60)
assert not any(t.is_alive() for t in ts)
print(sorted(results))
for i in range(3):      # and again, with everyone blocked at disable
    p = ProcessProfile(format="text", default_log_path="out")
    p.enable()
    t = threading.Thread(target=in_queue, name="again")
    t.start(); wait_until_waiting(t)
    p.disable()
    q.put(i); t.join(60)
    assert not t.is_alive()
""")
    assert proc.stdout.strip() == "[('event', True), ('queue', 42), ('select', 1)]"
    first = run_dirs(tmp_path / "out")[0]
    for mem in mem_files(first):
        check_pairing(mem[:-4] + ".stack", mem)
    funcs = [m.group(4) for m in whole_lines(os.path.join(first, "in_queue.mem"), MEM_RE)]
    assert "sum" in funcs       # the woken thread was recorded from its next call


def test_daemon_threads_running_at_exit(tmp_path):
    for attempt in range(3):
        out = tmp_path / ("out%d" % attempt)
        proc = run_py(tmp_path, PRELUDE + """
def spin(k):
    x = []
    while True:
        x.append(bytearray(100 + k))
        if len(x) > 100:
            x = []
            ran[k].set()
p = ProcessProfile(format="text", default_log_path=%r)
p.trackStack()
p.setProcessMemoryFrequence(100)
p.enable()
ran = [threading.Event() for _ in range(4)]
for k in range(4):
    threading.Thread(target=spin, args=(k,), daemon=True, name="d%%d" %% k).start()
for e in ran:           # every thread has recorded calls, and runs on at exit
    e.wait()
print("main done")
""" % str(out))
        assert proc.returncode == 0 and proc.stdout == "main done\n"
        assert "Traceback" not in proc.stderr and "Fatal" not in proc.stderr, proc.stderr
        run_dir = only_dir(out)
        for k in range(4):
            recs = whole_lines(os.path.join(run_dir, "d%d.mem" % k), MEM_RE)
            assert recs
        with open(os.path.join(run_dir, "runinfo.json")) as f:
            assert json.load(f)["end_time"] is not None   # atexit ran disable()


def test_hundred_enable_disable_cycles(tmp_path):
    proc = run_py(tmp_path, PRELUDE + """
stop = threading.Event()
def background():
    while not stop.is_set():
        sum(range(50))
        time.sleep(0.001)
bg = threading.Thread(target=background, name="bg", daemon=True)  # a failure ends
bg.start()
# A thread's end after its join: on 3.8 glibc's pthread_exit loads libgcc_s on
# the first one (its fd open for a moment, which nfds() below once caught at
# the first cycle); loaded here, before the count is taken.
w = threading.Thread(target=sum, args=(range(10),), name="warm-up")
w.start(); w.join(); time.sleep(0.2)
base = nfds()
base_fds = fd_targets()
dirs = []
reused = ProcessProfile(format="text", default_log_path="out")
for i in range(100):
    p = reused if i % 2 else ProcessProfile(format="text", default_log_path="out")
    if i % 3 == 0:
        p.trackStack()
    p.enable()
    t = threading.Thread(target=sum, args=(range(10),), name="short")
    t.start(); t.join()
    sum(range(10))
    p.disable()
    dirs.append(p.output_dir)
    assert nfds() == base, (i, nfds(), base, fd_targets() - base_fds, base_fds - fd_targets())
stop.set(); bg.join()
print(len(set(dirs)))
""", timeout=180)
    assert proc.stdout.strip() == "100"
    dirs = run_dirs(tmp_path / "out")
    assert len(dirs) == 100
    for d in dirs:
        recs = whole_lines(os.path.join(d, "MainThread.mem"), MEM_RE)
        assert any(m.group(4) == "sum" for m in recs), d
        if os.path.exists(os.path.join(d, "bg.mem")):   # only if it ran during the run
            whole_lines(os.path.join(d, "bg.mem"), MEM_RE)
        with open(os.path.join(d, "runinfo.json")) as f:
            assert json.load(f)["end_time"] is not None


def test_second_profile_while_one_is_active(tmp_path):
    proc = run_py(tmp_path, PRELUDE + """
a = ProcessProfile(format="text", default_log_path="out")
b = ProcessProfile(format="text", default_log_path="out")
a.enable()
try:
    b.enable()
except RuntimeError as e:
    print("RuntimeError", "already enabled" in str(e))
print(a.enabled, b.enabled)
sum(range(3))
b.disable()             # not enabled: does nothing, and leaves a running
print(a.enabled)
a.disable()
b.enable(); sum(range(4)); b.disable()
print(a.output_dir != b.output_dir)
""")
    assert proc.stdout.split("\n")[:4] == ["RuntimeError True", "True False", "True", "True"]
    dirs = run_dirs(tmp_path / "out")
    assert len(dirs) == 2
    for d in dirs:
        assert any(m.group(4) == "sum"
                   for m in whole_lines(os.path.join(d, "MainThread.mem"), MEM_RE))


# --- fork and exec ----------------------------------------------------------

FORK_CODE = PRELUDE + """
import json
forked = sys.argv[1] == "forked"
stop = threading.Event()
def busy():
    while not stop.is_set():
        bytearray(200); [0] * 20
        time.sleep(0.0001)
def child_work():
    return sum(bytearray(1000))
results = []
def forker():
    for i in range(10):
        pid = os.fork()
        if pid == 0:
            for _ in range(5):
                child_work()
            if forked:
                p.disable()     # flush the child's files
            os._exit(7)
        _, status = os.waitpid(pid, 0)
        results.append((pid, os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status >> 8))
p = ProcessProfile(format="text", default_log_path="out")
p.trackStack()
if forked:
    p.enableForkedProfile()
p.enable()
bs = [threading.Thread(target=busy, name="busy%d" % i) for i in range(3)]
for b in bs: b.start()
f = threading.Thread(target=forker, name="forker")
f.start(); f.join(120)
stop.set()
for b in bs: b.join()
p.disable()
print(json.dumps({"me": os.getpid(), "dir": p.output_dir, "results": results}))
"""


@pytest.mark.parametrize("mode", ["forked", "not-forked"])
def test_fork_from_a_non_main_thread(tmp_path, mode):
    import warnings  # noqa: F401  (3.12 warns about fork with threads: allowed)
    proc = run_py(tmp_path, FORK_CODE, args=[mode], timeout=180)
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(info["results"]) == 10
    assert all(code == 7 for _pid, code in info["results"]), info["results"]
    dirs = run_dirs(tmp_path / "out")
    parent_dir = os.path.join(str(tmp_path / "out"), str(info["me"]))
    assert parent_dir in dirs
    for mem in mem_files(parent_dir):
        check_pairing(mem[:-4] + ".stack", mem)
        funcs = [m.group(4) for m in whole_lines(mem, MEM_RE)]
        assert "child_work" not in funcs, "a child's record in the parent's " + mem
    child_dirs = [d for d in dirs if d != parent_dir]
    if mode == "not-forked":
        assert child_dirs == []
        return
    assert sorted(os.path.basename(d) for d in child_dirs) == sorted(
        str(pid) for pid, _ in info["results"])
    for d in child_dirs:
        with open(os.path.join(d, "runinfo.json")) as f:
            ri = json.load(f)
        assert ri["ppid"] == info["me"]
        assert [t["name"] for t in ri["threads"]] == ["forker"]
        funcs = [m.group(4) for m in whole_lines(os.path.join(d, "forker.mem"), MEM_RE)]
        assert funcs.count("child_work") == 5
        check_pairing(os.path.join(d, "forker.stack"), os.path.join(d, "forker.mem"))


def test_subprocess_exec_inherits_no_profiler_files(tmp_path):
    proc = run_py(tmp_path, PRELUDE + """
import subprocess, json
p = ProcessProfile(format="text", default_log_path="out")
p.trackStack()
p.enableForkedProfile()
p.enable()
child = '''
import os
out = []
for f in os.listdir('/proc/self/fd'):
    try:
        out.append(os.readlink('/proc/self/fd/' + f))
    except OSError:
        pass        # the directory's own descriptor, closed by now
print(sorted(out))
'''
r1 = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
r2 = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, close_fds=False)
r3 = subprocess.run([sys.executable, "-c", "import sys; print('hi'); sys.exit(5)"],
                    capture_output=True, text=True)
p.disable()
print(json.dumps([p.output_dir, r1.stdout, r2.stdout, r2.returncode, r3.stdout, r3.returncode]))
""")
    out_dir, fds1, fds2, rc2, out3, rc3 = json.loads(proc.stdout.strip().splitlines()[-1])
    assert fds1.startswith("[") and fds2.startswith("[")
    assert rc2 == 0 and out3 == "hi\n" and rc3 == 5
    for listing in (fds1, fds2):
        assert out_dir not in listing and "statm" not in listing, listing
    assert run_dirs(tmp_path / "out") == [out_dir]   # the exec'd children wrote nothing
    funcs = [m.group(4) for m in whole_lines(os.path.join(out_dir, "MainThread.mem"), MEM_RE)]
    assert "run" in funcs


# --- output directory: pid reuse, planted files, hostile thread names --------

PID_REUSE = """\
import os, sys, json
base = os.path.abspath("out")
victim = os.path.abspath("victim")
os.makedirs(base)
elsewhere = os.path.abspath("elsewhere")
os.makedirs(elsewhere)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(w)
    os.read(r, 1)          # wait until the parent has planted its traps
    from threadgraph import ProcessProfile
    p = ProcessProfile(format="text", default_log_path=base)
    p.enable()
    sum(range(10))
    p.disable()
    with open("child.json", "w") as f:
        json.dump(p.output_dir, f)
    os._exit(0)
os.close(r)
mine = os.path.join(base, str(pid))
if sys.argv[1] == "stale":
    os.makedirs(mine)
    with open(os.path.join(mine, "MainThread.mem"), "w") as f:
        f.write("1.000000#old.py:1:old=>1\\n")
    os.symlink(victim, os.path.join(mine, "process.mem"))
elif sys.argv[1] == "symlink-dir":
    os.symlink(elsewhere, mine)
elif sys.argv[1] == "symlinks-in-next":
    os.makedirs(mine)
    open(os.path.join(mine, "x"), "w").close()
    os.makedirs(mine + "-2")
    os.symlink(victim, os.path.join(mine + "-2", "MainThread.mem"))
os.write(w, b"g")
_, status = os.waitpid(pid, 0)
print(json.dumps({"pid": pid, "status": status}))
"""


@pytest.mark.parametrize("trap", ["stale", "symlink-dir", "symlinks-in-next"])
def test_existing_pid_directory_is_never_mixed(tmp_path, trap):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    proc = run_py(tmp_path, PID_REUSE, args=[trap])
    info = json.loads(proc.stdout.strip())
    assert info["status"] == 0
    with open(tmp_path / "child.json") as f:
        used = json.load(f)
    base = str(tmp_path / "out")
    mine = os.path.join(base, str(info["pid"]))
    assert victim.read_text() == "precious\n"
    assert os.listdir(str(tmp_path / "elsewhere")) == []
    expected = {"stale": mine + "-2", "symlink-dir": mine + "-2",
                "symlinks-in-next": mine + "-3"}[trap]
    assert used == expected
    assert not os.path.islink(used) and os.path.dirname(used) == base
    recs = whole_lines(os.path.join(used, "MainThread.mem"), MEM_RE)
    assert any(m.group(4) == "sum" for m in recs) and not any(m.group(4) == "old" for m in recs)
    if trap == "stale":
        assert read_text(os.path.join(mine, "MainThread.mem")) == "1.000000#old.py:1:old=>1\n"
        assert os.path.islink(os.path.join(mine, "process.mem"))


def test_hostile_thread_names_stay_inside_the_output_dir(tmp_path):
    names = ["../../etc/x", "a/b", "\x00", "..", ".", "process", "\x1b[2J", "\x1b]0;pwned\x07",
             "/abs/path", "~", "-rf", "con", "x" * 1000, "\udcff", "\U0001F600/..",
             "process~2", "MainThread", "%2E%2E", "..\\..\\win"]
    proc = run_py(tmp_path, PRELUDE + """
names = %r
def body():
    sum(range(3))
p = ProcessProfile(format="text", default_log_path="base/out")
p.trackStack()
p.enable()
for n in names:
    t = threading.Thread(target=body)
    t.name = n
    t.start(); t.join()
p.disable()
print(p.output_dir)
""" % names)
    run_dir = proc.stdout.strip()
    base = tmp_path / "base"
    everything = []
    for dirpath, dirnames, filenames in os.walk(str(tmp_path)):
        everything += [os.path.join(dirpath, n) for n in dirnames + filenames]
    under_base = [p for p in everything if p.startswith(str(base) + os.sep)]
    assert all(p == os.path.join(str(base), "out") or p == run_dir or
               os.path.dirname(p) == run_dir for p in under_base), under_base
    outside = set(everything) - set(under_base)
    assert outside == {str(base), str(tmp_path / "scenario.py")}, outside
    files = os.listdir(run_dir)
    for f in files:
        assert not f.startswith(".") and "/" not in f
        assert not any(ord(c) < 0x20 or ord(c) == 0x7f for c in f), repr(f)
        assert len(f.encode("utf-8", "surrogateescape")) <= 200 + 16
        st = os.lstat(os.path.join(run_dir, f))
        assert not os.path.islink(os.path.join(run_dir, f))
        assert st.st_mode & 0o777 == 0o644 & ~current_umask()
    with open(os.path.join(run_dir, "runinfo.json")) as f:
        table = json.load(f)["threads"]
    assert len(table) == len(names) + 1
    mems = [t["mem"] for t in table]
    assert len(set(mems)) == len(mems) and "process.mem" not in mems
    for t in table[1:]:
        check_pairing(os.path.join(run_dir, t["stack"]), os.path.join(run_dir, t["mem"]))


def current_umask():
    old = os.umask(0o22)
    os.umask(old)
    return old


def test_directory_and_file_modes(tmp_path):
    proc = run_py(tmp_path, PRELUDE + """
os.umask(0o027)
p = ProcessProfile(format="text", default_log_path="deep/base")
p.trackStack()
p.enable(); sum(range(3)); p.disable()
print(p.output_dir)
""")
    run_dir = proc.stdout.strip()
    assert os.stat(run_dir).st_mode & 0o777 == 0o750
    assert os.stat(str(tmp_path / "deep" / "base")).st_mode & 0o777 == 0o750
    for f in os.listdir(run_dir):
        assert os.stat(os.path.join(run_dir, f)).st_mode & 0o777 == 0o640, f


def test_hostile_code_names_stay_on_one_line(tmp_path):
    """FILE and FUNCTION come from the program too: a code object's name or file
    name with a newline or an escape sequence still gives one parsable line, and
    the CLI prints it escaped."""
    proc = run_py(tmp_path, PRELUDE + r"""
src = "def f():\n    return [0] * 10\n"
ns = {}
exec(compile(src, "evil\nfile\x1b]0;pwned\x07.py", "exec"), ns)
f = ns["f"]
f.__code__ = f.__code__.replace(co_name="bad\nname\x1b[2J\r")
p = ProcessProfile(format="text", default_log_path="out")
p.trackStack()
p.enable()
for _ in range(3):
    f()
p.disable()
print(p.output_dir)
""")
    run_dir = proc.stdout.strip()
    mem = os.path.join(run_dir, "MainThread.mem")
    recs = whole_lines(mem, MEM_RE)
    evil = [m for m in recs if m.group(4).startswith("bad")]
    assert len(evil) == 3
    assert evil[0].group(4) == "bad\\x0aname\\x1b[2J\\x0d"
    assert evil[0].group(2) == "evil\\x0afile\\x1b]0;pwned\\x07.py"
    check_pairing(os.path.join(run_dir, "MainThread.stack"), mem)
    cli = find_cli()
    if cli is None:
        pytest.skip("threadgraph CLI not built")
    r = subprocess.run([cli, "peaks", "--peak=0", "--json", mem], capture_output=True,
                       timeout=60)
    assert r.returncode == 0 and b"\x1b" not in r.stdout + r.stderr


def test_program_closing_all_descriptors_is_left_alone(tmp_path):
    """A daemon closes every inherited descriptor (os.closerange(3, N)) and opens
    its own files, which get the recorder's old numbers.  The recorder must not
    write records into them nor close them at disable().  The flusher's side:
    a thread whose files were opened before the closerange ends after it, and
    the flusher writes and closes its files (_test_wait_ended returns once it
    has), where the program's files now have those numbers."""
    proc = run_py(tmp_path, PRELUDE + """
import warnings
warnings.simplefilter("ignore")
from threadgraph import _recorder
p = ProcessProfile(format="text", default_log_path="out")
p.enable()
def work():
    return [0] * 100
go = threading.Event()
def late():
    go.wait()
    for _ in range(100):
        work()
t = threading.Thread(target=late, name="late")
t.start()               # its .mem file open before the closerange
for _ in range(100):
    work()
os.closerange(3, 1024)
fds = [os.open("own%d.txt" % i, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
       for i in range(4)]
for _ in range(100):
    work()
go.set()
t.join()
_recorder._test_wait_ended()  # the flusher wrote and closed late's files
for fd in fds:
    os.write(fd, b"program line\\n")
p.disable()
for fd in fds:
    try:
        os.close(fd)
    except OSError as e:
        print("close failed", fd, e.errno)
""")
    assert "close failed" not in proc.stdout, proc.stdout
    for i in range(4):
        assert (tmp_path / ("own%d.txt" % i)).read_text() == "program line\n"


HANDOFF = r"""
import threading
import threadgraph

profile = threadgraph.ProcessProfile(format="text", default_log_path="out")
profile.trackStack(True)
profile.enable()

def f0(): return 0
def f1(): return 1
def f2(): return 2
def f3(): return 3
def f4(): return 4
FUNCS = (f0, f1, f2, f3, f4)

def work(n):
    for i in range(n):
        FUNCS[i % 5]()

threads = [threading.Thread(target=work, args=(40000,), name="w%d" % k) for k in range(3)]
for t in threads:
    t.start()
work(60000)
for t in threads:
    t.join()
profile.disable()
"""


def test_many_full_buffers_reach_the_files_complete_and_in_order(tmp_path):
    # Several megabytes per thread: every stream fills its buffer hundreds of
    # times, each full buffer handed to the flusher thread while the next one
    # fills (or written by the thread itself when the flusher lags).  Every
    # record must be there, whole and in call order.
    run_py(tmp_path, HANDOFF, timeout=300)
    run = only_dir(tmp_path / "out")
    for name, n in (("MainThread", 60000), ("w0", 40000), ("w1", 40000), ("w2", 40000)):
        for ext in ("mem", "stack"):
            with open(os.path.join(run, "%s.%s" % (name, ext))) as f:
                text = f.read()
            assert text.endswith("\n")
            funcs = [l.rpartition(":")[2].partition("=>")[0] for l in text.splitlines()
                     if re.search(r":f[0-4](=>|$)", l)]
            assert funcs == ["f%d" % (i % 5) for i in range(n)], (name, ext, len(funcs))
