"""threadgraph attach / detach on real processes (docs/attach.md).

A real http.server.ThreadingHTTPServer is started without threadgraph and loaded
from client threads on 127.0.0.1; threadgraph attaches with gdb, records, and
detaches; the server must answer the same throughout and be left as it was.
Everything synchronises on pipes and on the commands' own lines, never on time.

These need gdb and ptrace permission, and run on two Pythons only (3.11: the
profile function backend; 3.12: sys.monitoring): attaching is slow-ish (gdb).
"""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from tgtest import env_with_package

pytestmark = [
    pytest.mark.skipif(sys.version_info[:2] not in ((3, 11), (3, 12)),
                       reason="attach runs on 3.11 and 3.12 only (gdb is slow)"),
    pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only"),
]

CLIENTS = 4
REQUESTS = 15  # per client thread and phase

# The server: main thread answers /state from a queue (so that the state is read
# on a thread that existed before the attach); the server runs in its own thread.
SERVER = r'''
import ctypes, http.server, json, os, queue, signal, sys, threading, atexit

def own_profile(frame, event, arg):
    pass

if "--own-profile" in sys.argv:
    sys.setprofile(own_profile)
if "--take-tool-ids" in sys.argv:  # the ids threadgraph's sys.monitoring backend may use
    for tool in (3, 4):
        sys.monitoring.use_tool_id(tool, "own tool %d" % tool)
signal.signal(signal.SIGHUP, lambda s, f: None)  # the program's own handler
asks, answers = queue.Queue(), queue.Queue()

def state():
    return {
        "profile": repr(sys.getprofile()),
        "threading_profile": repr(getattr(threading, "_profile_hook", None)),
        "signals": {str(s): repr(signal.getsignal(s))
                    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)},
        "os_exit": repr(os._exit),
        "allocators": allocators(),
        "monitoring": [sys.monitoring.get_tool(i) for i in range(6)]
                      if hasattr(sys, "monitoring") else None,
    }

class Allocator(ctypes.Structure):
    _fields_ = [(name, ctypes.c_void_p)
                for name in ("ctx", "malloc", "calloc", "realloc", "free")]

def allocators():
    """The PyMem allocator of each domain (raw, mem, obj), as addresses."""
    found = []
    for domain in range(3):
        a = Allocator()
        ctypes.pythonapi.PyMem_GetAllocator(ctypes.c_int(domain), ctypes.byref(a))
        found.append([a.ctx, a.malloc, a.calloc, a.realloc, a.free])
    return found

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/state":
            asks.put(None)
            body = json.dumps(answers.get()).encode()
        elif self.path == "/fsize":  # files of the process end at 1 byte (writes: EFBIG)
            import resource
            resource.setrlimit(resource.RLIMIT_FSIZE, (1, resource.RLIM_INFINITY))
            body = b"ok"
        elif self.path == "/tracemalloc":  # it installs its allocators over the current
            import tracemalloc
            tracemalloc.start()
            kept = [bytearray(1000) for _ in range(10)]
            body = str(tracemalloc.get_traced_memory()[0] >= 10000).encode()
            tracemalloc.stop()
        else:
            body = build_page(self.path)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

def build_page(path):
    rows = ["<li>%s %d</li>" % (path, i) for i in range(50)]
    return ("<ul>%s</ul>" % "".join(rows)).encode()

srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=srv.serve_forever, name="server", daemon=True).start()
print(srv.server_address[1], flush=True)
while True:
    asks.get()
    answers.put(state())
'''


def start_server(tmp_path, *args, executable=None):
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    env = env_with_package()
    proc = subprocess.Popen([executable or sys.executable, str(script)] + list(args),
                            cwd=str(tmp_path), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, universal_newlines=True)
    port = int(proc.stdout.readline())
    return proc, port


def get(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def load(port, phase):
    """CLIENTS threads x REQUESTS requests; the answers, by path."""
    answers = {}

    def client(n):
        for i in range(REQUESTS):
            path = "/%s/%d/%d" % (phase, n, i)
            answers[path] = get(port, path)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


def cmd(*args):
    return [sys.executable, "-m", "threadgraph"] + list(args)


def start_attach(tmp_path, pid, *options, env=None):
    """Popen of threadgraph attach, once it says it records; its first line.
    ENV: variables added to its environment."""
    proc = subprocess.Popen(cmd("attach", "-o", str(tmp_path / "out"), *options, str(pid)),
                            cwd=str(tmp_path), env=dict(env_with_package(keep_cli=True),
                                                        **(env or {})),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True)
    line = proc.stderr.readline()
    proc.notes = []  # what attach said before (tool ids taken)
    while line.startswith("threadgraph: sys.monitoring"):
        proc.notes.append(line)
        line = proc.stderr.readline()
    if "attached to process" not in line:
        proc.wait(timeout=120)
        if "ptrace not permitted" in line:
            pytest.skip("ptrace is not permitted here: " + line.strip())
        pytest.fail("attach failed: %s%s" % (line, proc.stderr.read()))
    return proc, line


def out_dir(tmp_path, pid):
    return str(tmp_path / "out" / str(pid))


def recorded_functions(tmp_path, pid):
    """{thread name: set of function names} of the run, from threadgraph export."""
    exported = tmp_path / "exported"
    subprocess.run(cmd("export", "-o", str(exported), out_dir(tmp_path, pid)), check=True,
                   stdout=subprocess.PIPE, env=env_with_package(keep_cli=True))
    funcs = {}
    for name in os.listdir(str(exported)):
        if name.endswith(".mem"):
            with open(str(exported / name), encoding="utf-8", errors="replace") as f:
                funcs[name[:-4]] = {line.rsplit("=>", 1)[0].rsplit(":", 1)[-1]
                                    for line in f}
    return funcs


def maps_of(pid):
    with open("/proc/%d/maps" % pid) as f:
        return f.read()


def stop(proc):
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_attach_records_a_server_and_leaves_it_as_it_was(tmp_path):
    server, port = start_server(tmp_path)
    try:
        before_state = json.loads(get(port, "/state")[1])
        before = load(port, "p")
        attach, _ = start_attach(tmp_path, server.pid)
        during = load(port, "p")
        # While attached the allocators are the recorder's (what the check below sees).
        assert json.loads(get(port, "/state")[1])["allocators"] != before_state["allocators"]
        r = subprocess.run(cmd("detach", str(server.pid)), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
        assert r.returncode == 0, r.stderr
        rest = attach.communicate(timeout=120)[1]
        assert attach.returncode == 0, rest
        assert "detached from process %d" % server.pid in rest
        after = load(port, "p")
        assert before == during == after
        assert all(status == 200 for status, _ in before.values())
        # No hook of threadgraph's remains: the program's own are back (profile
        # functions, signal handlers, the PyMem allocators, sys.monitoring's tools).
        assert json.loads(get(port, "/state")[1]) == before_state
        assert get(port, "/tracemalloc") == (200, b"True")
        # The handlers ran in the server's request threads and were recorded there.
        funcs = recorded_functions(tmp_path, server.pid)
        handler_threads = [n for n, f in funcs.items() if "do_GET" in f and "build_page" in f]
        assert len(handler_threads) >= CLIENTS, sorted(funcs)
        assert all("process_request_thread" in n for n in handler_threads)
        # The control thread is not part of the program's run.
        assert not [n for n in funcs if "threadgraph-attach" in n], sorted(funcs)
        # SIGTERM ends it as it would have without threadgraph (the default action).
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == -signal.SIGTERM
    finally:
        stop(server)
    # ... as a server never attached to does.
    plain, _ = start_server(tmp_path)
    try:
        plain.send_signal(signal.SIGTERM)
        assert plain.wait(timeout=60) == -signal.SIGTERM
    finally:
        stop(plain)


def test_duration_and_program_ending_while_attached(tmp_path):
    """--duration detaches by itself; a program that ends while attached leaves a
    complete capture and the command says so."""
    script = tmp_path / "ending.py"
    script.write_text(
        "import select, sys\n"
        "def last_work():\n"
        "    return [bytearray(1000) for _ in range(100)]\n"
        "print('ready', flush=True)\n"
        "# a wait with a timeout: gdb needs a thread that releases the GIL\n"
        "while not select.select([sys.stdin], [], [], 0.05)[0]:\n"
        "    pass\n"
        "keep = last_work()\n"
        "sys.exit(3)\n")
    target = subprocess.Popen([sys.executable, str(script)], cwd=str(tmp_path),
                              env=env_with_package(), stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, universal_newlines=True)
    try:
        assert target.stdout.readline() == "ready\n"
        attach, _ = start_attach(tmp_path, target.pid, "--duration", "600")
        target.stdin.write("go\n")
        target.stdin.flush()
        assert target.wait(timeout=120) == 3
        rest = attach.communicate(timeout=120)[1]
        assert attach.returncode == 0, rest
        assert "ended while attached" in rest
        funcs = recorded_functions(tmp_path, target.pid)
        assert "last_work" in funcs["MainThread"]
    finally:
        stop(target)


def test_refusals_do_nothing_to_the_target(tmp_path):
    # Not a Python process.
    other = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        r = subprocess.run(cmd("attach", str(other.pid)), stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=120)
        assert r.returncode == 1
        assert "not a Python process" in r.stderr and r.stderr.count("\n") == 1
    finally:
        stop(other)
    # No such process.
    r = subprocess.run(cmd("attach", "999999999"), stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=120)
    assert r.returncode == 1 and "no process 999999999" in r.stderr
    # A program under threadgraph run: told before gdb touches it.
    script = tmp_path / "waits.py"
    script.write_text("import sys\nprint('ready', flush=True)\nsys.stdin.read()\n")
    under = subprocess.Popen(cmd("run", "-o", str(tmp_path / "run"), str(script)),
                             cwd=str(tmp_path), env=env_with_package(keep_cli=True),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, universal_newlines=True)
    try:
        assert under.stdout.readline() == "ready\n"
        r = subprocess.run(cmd("attach", str(under.pid)), stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=120)
        assert r.returncode == 1 and "runs under threadgraph run" in r.stderr, r.stderr
        assert r.stderr.count("\n") == 1
        under.stdin.close()
        assert under.wait(timeout=120) == 0
    finally:
        stop(under)
    # Not attached.
    r = subprocess.run(cmd("detach", "999999999"), stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=120)
    assert r.returncode == 1 and "not attached" in r.stderr
    server, port = start_server(tmp_path)
    try:
        attach, _ = start_attach(tmp_path, server.pid)
        # Already attached.
        r = subprocess.run(cmd("attach", str(server.pid)), stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=120)
        assert r.returncode == 1 and "already attached" in r.stderr, r.stderr
        attach.send_signal(signal.SIGINT)  # as Ctrl-C
        rest = attach.communicate(timeout=120)[1]
        assert attach.returncode == 0 and "detached" in rest, rest
        assert get(port, "/x")[0] == 200
    finally:
        stop(server)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="sys.monitoring leaves the "
                    "program's profile function alone: nothing to refuse")
def test_refused_when_the_program_has_its_own_profile_function(tmp_path):
    server, port = start_server(tmp_path, "--own-profile")
    try:
        r = subprocess.run(cmd("attach", "-o", str(tmp_path / "out"), str(server.pid)),
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
        assert r.returncode == 1 and "its own profile function" in r.stderr, r.stderr
        assert "own_profile" in json.loads(get(port, "/state")[1])["profile"]
    finally:
        stop(server)


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring: 3.12+")
def test_tool_ids_taken_fall_back_said_by_attach_not_in_the_program(tmp_path):
    """The program holds tool ids 3 and 4: attach records with a profile
    function, and says so itself; the program's stderr gets nothing."""
    server, port = start_server(tmp_path, "--take-tool-ids")
    try:
        attach, _ = start_attach(tmp_path, server.pid)
        load(port, "q")
        attach.send_signal(signal.SIGINT)
        rest = attach.communicate(timeout=120)[1]
        assert attach.returncode == 0 and "detached" in rest, rest
        with open(os.path.join(out_dir(tmp_path, server.pid), "runinfo.json")) as f:
            assert json.load(f)["backend"] == "setprofile"
        assert len(attach.notes) == 1 and "tool ids 3 and 4" in attach.notes[0]
        assert "profile function" in attach.notes[0]
        funcs = recorded_functions(tmp_path, server.pid)
        assert any("build_page" in f for f in funcs.values()), funcs
        state = json.loads(get(port, "/state")[1])
        assert state["monitoring"][3:5] == ["own tool 3", "own tool 4"]
    finally:
        stop(server)
    err = server.stderr.read()
    assert "threadgraph" not in err and "Warning" not in err, err


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring: 3.12+")
def test_refused_when_tool_ids_taken_and_own_profile_function(tmp_path):
    """Tool ids 3 and 4 taken: the fallback, profile functions, would replace the
    program's own: refused, and its profile function is left in place."""
    server, port = start_server(tmp_path, "--own-profile", "--take-tool-ids")
    try:
        r = subprocess.run(cmd("attach", "-o", str(tmp_path / "out"), str(server.pid)),
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
        assert r.returncode == 1, r.stderr
        assert "its own profile function" in r.stderr and "(3 and 4) taken" in r.stderr
        assert "own_profile" in json.loads(get(port, "/state")[1])["profile"]
    finally:
        stop(server)


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring: 3.12+")
def test_own_profile_function_kept_with_sys_monitoring(tmp_path):
    server, port = start_server(tmp_path, "--own-profile")
    try:
        before = json.loads(get(port, "/state")[1])
        attach, _ = start_attach(tmp_path, server.pid)
        load(port, "q")
        attach.send_signal(signal.SIGINT)
        attach.communicate(timeout=120)
        assert attach.returncode == 0
        assert json.loads(get(port, "/state")[1]) == before
    finally:
        stop(server)


def test_refused_without_threadgraph_in_the_target(tmp_path):
    base = os.path.realpath(sys.executable)  # a venv's interpreter is a link to it
    probe = subprocess.run([base, "-c", "import threadgraph"], stderr=subprocess.DEVNULL,
                           env={"PATH": os.environ.get("PATH", "")})
    if probe.returncode == 0:
        pytest.skip("the base interpreter has threadgraph installed")
    target = subprocess.Popen([base, "-c", "import sys; print('ready', flush=True); "
                               "sys.stdin.read()"], env={"PATH": os.environ.get("PATH", "")},
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              universal_newlines=True)
    try:
        assert target.stdout.readline() == "ready\n"
        r = subprocess.run(cmd("attach", str(target.pid)), stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=120)
        assert r.returncode == 1 and "cannot import threadgraph" in r.stderr, r.stderr
        assert "pip install" in r.stderr and r.stderr.count("\n") == 1
        assert "_recorder" not in maps_of(target.pid)
    finally:
        stop(target)


def test_docs_name_every_option():
    """Each option of attach --help is documented: its own in docs/attach.md,
    run's (taken from run's parser) in docs/run.md; run's that do not apply are
    named as such."""
    import re

    opt = re.compile(r"(?<![\w-])--[a-z][a-z_-]*[a-z]")
    helptext = subprocess.run(cmd("attach", "--help"), stdout=subprocess.PIPE,
                              universal_newlines=True, check=True).stdout
    docs = os.path.join(os.path.dirname(__file__), "..", "..", "docs")
    with open(os.path.join(docs, "attach.md")) as f:
        attach_doc = f.read()
    with open(os.path.join(docs, "run.md")) as f:
        run_doc = f.read()
    options = attach_doc[attach_doc.index("## Options"):attach_doc.index("## What it needs")]
    # --no_time: the C processor's option, named by --no-timestamps' help
    for name in set(opt.findall(helptext)) - {"--help", "--no_time"}:
        assert "`%s" % name in options or "`%s" % name in run_doc, name
    assert "--duration" in options and "--live" in options
    assert "`--follow-exec` are about" in options and "--follow-exec" not in helptext


def test_program_killed_while_attached(tmp_path):
    """SIGKILL while attached: the capture holds what was flushed (a capture cut
    short is readable), and the command says the program ended."""
    server, port = start_server(tmp_path)
    try:
        attach, line = start_attach(tmp_path, server.pid)
        load(port, "k")
        capture = os.path.join(out_dir(tmp_path, server.pid), "capture.tg")
        # Wait for the recorder's periodic flush to put the handlers' records
        # on disk (the content is the synchronisation: export finds do_GET).
        while True:
            if os.path.getsize(capture) > 40:
                try:
                    if any("do_GET" in f for f in recorded_functions(tmp_path, server.pid)
                           .values()):
                        break
                except subprocess.CalledProcessError:
                    pass
            shutil.rmtree(str(tmp_path / "exported"), ignore_errors=True)
            load(port, "k2")
        server.kill()
        assert server.wait(timeout=60) == -signal.SIGKILL
        rest = attach.communicate(timeout=120)[1]
        assert attach.returncode == 0 and "ended while attached" in rest, rest
    finally:
        stop(server)


def test_duration_detaches_by_itself(tmp_path):
    server, port = start_server(tmp_path)
    try:
        attach, _ = start_attach(tmp_path, server.pid, "--duration", "0.2")
        rest = attach.communicate(timeout=120)[1]
        assert attach.returncode == 0 and "detached from process" in rest, rest
        assert get(port, "/after")[0] == 200
    finally:
        stop(server)


def test_bad_options_refused_before_the_target_is_touched(tmp_path):
    """run's option checks apply to attach, before anything is done (a target
    that does not exist shows that: the usage error comes first)."""
    for options, says in ((["--max-size", "1"], "--max-size"),
                          (["--sampled", "--stack"], "--stack needs a full run"),
                          (["--aggregate", "--sampled"], "--aggregate writes"),
                          (["--format", "text", "--live"], "--live follows the binary capture"),
                          (["--snapshot-every", "0"], "--snapshot-every")):
        r = subprocess.run(cmd("attach", *options, "999999999"), stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=120)
        assert r.returncode == 2 and says in r.stderr, r.stderr
        assert "no process" not in r.stderr
    # live PID is attach --live: its usage errors name the command typed
    r = subprocess.run(cmd("live", "--max-size", "1", "999999999"), stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=120)
    assert r.returncode == 2 and r.stderr.startswith("usage: threadgraph live "), r.stderr


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0
                    or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to drop CAP_SYS_PTRACE")
def test_ptrace_not_permitted_says_the_fix(tmp_path):
    """A root without CAP_SYS_PTRACE, as in a container by default: the kernel
    denies it a program that has the capability; with Yama's ptrace_scope 1 or
    3 (its sysctl file substituted: this kernel may have no Yama) even its own."""
    drop = ["setpriv", "--bounding-set", "-sys_ptrace", "--inh-caps", "-sys_ptrace"]
    waiting = [sys.executable, "-c", "import sys; print('ready', flush=True); sys.stdin.read()"]
    env = env_with_package(keep_cli=True)
    full = subprocess.Popen(waiting, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                            universal_newlines=True)
    same = subprocess.Popen(drop + waiting, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=env, universal_newlines=True)
    try:
        assert full.stdout.readline() == same.stdout.readline() == "ready\n"
        r = subprocess.run(drop + cmd("attach", str(full.pid)), stderr=subprocess.PIPE,
                           env=env, universal_newlines=True, timeout=120)
        assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
        assert "no CAP_SYS_PTRACE" in r.stderr and "--cap-add=SYS_PTRACE" in r.stderr
        scope_file = tmp_path / "ptrace_scope"
        with_scope = ("import sys; from threadgraph import _attach; "
                      "_attach.YAMA_PTRACE_SCOPE = sys.argv[1]; "
                      "sys.exit(_attach.main(sys.argv[2:]))")
        for scope, says in (("1", "ptrace_scope = 1 and this root has no CAP_SYS_PTRACE"),
                            ("3", "ptrace_scope = 3); only a reboot")):
            scope_file.write_text(scope + "\n")
            r = subprocess.run(drop + [sys.executable, "-c", with_scope, str(scope_file),
                                       str(same.pid)], stderr=subprocess.PIPE, env=env,
                               universal_newlines=True, timeout=120)
            assert r.returncode == 1 and says in r.stderr, r.stderr
            assert r.stderr.count("\n") == 1, r.stderr
        for target in (full, same):
            assert "_recorder" not in maps_of(target.pid)
            assert target.poll() is None
    finally:
        stop(full)
        stop(same)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_live_pid_attaches_and_detaches_on_q(tmp_path):
    """threadgraph live PID in a real terminal: the server's threads appear,
    q leaves the view, detaches and gives the terminal back."""
    import re
    import shlex
    import time

    server, port = start_server(tmp_path)
    sock = str(tmp_path / "tmux.sock")

    def tmux(*args):
        return subprocess.run(["tmux", "-S", sock] + list(args), check=True,
                              stdout=subprocess.PIPE, universal_newlines=True).stdout

    def wait_for(predicate):
        deadline = time.monotonic() + 120  # a bound, never reached when it works
        while True:
            text = tmux("capture-pane", "-p", "-t", "t")
            if predicate(text):
                return text
            if time.monotonic() > deadline:
                pytest.fail("the pane never showed it:\n" + text)
            time.sleep(0.1)

    live = " ".join(shlex.quote(a) for a in cmd("live", "-o", str(tmp_path / "out"),
                                                str(server.pid)))
    script = ('a=$(stty -g); %s; s=$?; [ "$a" = "$(stty -g)" ] && echo RESTORED; '
              'echo EXIT=$s; exec sleep 600' % live)
    env = env_with_package(keep_cli=True)
    subprocess.run(["tmux", "-S", sock, "new-session", "-d", "-s", "t", "-x", "120", "-y",
                    "40", "env %s sh -c %s" % (
                        " ".join(shlex.quote("%s=%s" % kv) for kv in env.items()),
                        shlex.quote(script))], check=True)
    try:
        wait_for(lambda t: "recording" in t and "pid %d" % server.pid in t)
        load(port, "v")
        wait_for(lambda t: re.search(r"^ Thread-\d+ \(process_request_thread\)", t, re.M))
        tmux("send-keys", "-t", "t", "q")
        text = wait_for(lambda t: "EXIT=" in t)
        assert "RESTORED" in text and "EXIT=0" in text, text
        assert "detached from process %d" % server.pid in text.replace("\n", ""), text
        assert json.loads(get(port, "/state")[1])["profile"] == "None"
        assert get(port, "/after")[0] == 200
    finally:
        subprocess.run(["tmux", "-S", sock, "kill-server"], stderr=subprocess.DEVNULL)
        stop(server)


def test_run_options_apply_to_attach(tmp_path):
    """--accounting, --stack and --time-resolution as with run: the summary
    of live bytes by thread, the snapshots, the call stacks of the handlers,
    and the run's clock."""
    server, port = start_server(tmp_path)
    try:
        attach, _ = start_attach(tmp_path, server.pid, "--accounting", "--stack",
                                 "--time-resolution", "ms")
        load(port, "o")
        attach.send_signal(signal.SIGINT)
        rest = attach.communicate(timeout=120)[1]
        assert attach.returncode == 0 and "detached" in rest, rest
        files = os.listdir(out_dir(tmp_path, server.pid))
        assert "summary.json" in files and any(f.startswith("snapshot-") for f in files), files
        with open(os.path.join(out_dir(tmp_path, server.pid), "runinfo.json")) as f:
            assert json.load(f)["time_resolution"] == "ms"
        exported = tmp_path / "exported"
        subprocess.run(cmd("export", "-q", "-o", str(exported), out_dir(tmp_path, server.pid)),
                       check=True, env=env_with_package(keep_cli=True))
        stacks = [n for n in os.listdir(str(exported)) if n.endswith(".stack")]
        assert any("build_page" in (exported / n).read_text(errors="replace")
                   for n in stacks), stacks
        assert get(port, "/after")[0] == 200
    finally:
        stop(server)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0
                    or shutil.which("unshare") is None,
                    reason="needs root and unshare for a mount namespace")
def test_refused_in_another_mount_namespace(tmp_path):
    """A program with a /tmp of its own (a container's, PrivateTmp): refused
    before gdb, saying to attach from inside."""
    target = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c",
         'mount -t tmpfs none /tmp && exec "$0" -c "import sys; print(\'ready\', '
         'flush=True); sys.stdin.read()"', sys.executable],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, universal_newlines=True)
    try:
        if target.stdout.readline() != "ready\n":
            pytest.skip("no mount namespace could be made here")
        r = subprocess.run(cmd("attach", str(target.pid)), stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=120,
                           env=env_with_package(keep_cli=True))
        assert r.returncode == 1 and "another mount namespace" in r.stderr, r.stderr
        assert r.stderr.count("\n") == 1
        assert target.poll() is None
    finally:
        stop(target)


# A thread that lives through every attach and keeps KEEP bytes on each line
# read: its counters (allocated - freed, the thread's for life) go on across
# attaches, its curve must not.
KEEPER = r'''
import queue, sys, threading, time

def job(keep):
    for _ in range(20):
        keep.append(bytearray(100000))

def keeper(jobs):
    keep = []
    while jobs.get():
        job(keep)
        print("kept", flush=True)

def tick():  # releases the GIL now and then: the attach's safe point
    while True:
        time.sleep(0.05)

jobs = queue.Queue()
threading.Thread(target=keeper, args=(jobs,), name="keeper").start()
threading.Thread(target=tick, name="tick", daemon=True).start()
print("ready", flush=True)
for line in sys.stdin:
    jobs.put(1)
jobs.put(0)
'''
KEEP = 20 * 100000
CURVE_START_MAX = 64 << 10  # bytes the first calls of a job allocate


def test_aggregate_curve_starts_at_zero_at_each_attach(tmp_path):
    script = tmp_path / "keeper.py"
    script.write_text(KEEPER)
    target = subprocess.Popen([sys.executable, str(script)], cwd=str(tmp_path),
                              env=env_with_package(), stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, universal_newlines=True)
    try:
        assert target.stdout.readline() == "ready\n"
        for k in range(2):
            where = tmp_path / ("a%d" % k)
            where.mkdir()
            attach, _ = start_attach(where, target.pid, "--aggregate")
            target.stdin.write("go\n")
            target.stdin.flush()
            assert target.stdout.readline() == "kept\n"
            r = subprocess.run(cmd("detach", str(target.pid)), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
            assert r.returncode == 0, r.stderr
            rest = attach.communicate(timeout=120)[1]
            assert attach.returncode == 0, rest
            # no record per call: not "0 records", and summary is what reads it
            assert " records in " not in rest, rest
            assert " call paths (aggregate.tga) in " in rest \
                and "(then: threadgraph summary " in rest, rest
            r = subprocess.run(cmd("summary", out_dir(where, target.pid)),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True, env=env_with_package(keep_cli=True))
            assert r.returncode == 0, r.stderr
            m = re.search(r"^keeper: .*; memory (-?\d+) to (-?\d+) bytes", r.stdout, re.M)
            assert m, r.stdout
            lo, hi = int(m.group(1)), int(m.group(2))
            assert lo < CURVE_START_MAX, (k, lo, hi)
            assert KEEP <= hi < KEEP + CURVE_START_MAX, (k, lo, hi)
    finally:
        target.stdin.close()
        target.wait(timeout=60)


# An endless service of three threads, each allocating and sleeping (a wait
# that releases the GIL, where gdb finds a safe point).
SERVICE = r'''
import threading, time
def worker(n):
    local = []
    while True:
        local.append(bytearray(20000 * n))
        if len(local) > 100: local.pop(0)
        time.sleep(0.005)
ts = [threading.Thread(target=worker, args=(k,), name="w%d" % k, daemon=True) for k in (1, 2, 3)]
for t in ts: t.start()
print("ready", flush=True)
while True:
    time.sleep(1)
'''


def mem_lines(run_dir):
    n = 0
    for name in os.listdir(run_dir):
        if name.endswith(".mem"):
            with open(os.path.join(run_dir, name)) as f:
                n += sum(1 for _ in f)
    return n


@pytest.mark.parametrize("mode", ["--aggregate", "--sampled"])
def test_detach_line_says_what_the_mode_wrote(tmp_path, mode):
    """An aggregate attach writes no record per call and a sampled one writes
    readings of the threads' curves: the last line says that, from the files
    (aggregate.tga's call paths, the .mem lines), never "0 records"."""
    script = tmp_path / "service.py"
    script.write_text(SERVICE)
    target = subprocess.Popen([sys.executable, str(script)], cwd=str(tmp_path),
                              env=env_with_package(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True)
    try:
        assert target.stdout.readline() == "ready\n"
        attach, _ = start_attach(tmp_path, target.pid, mode)
        r = subprocess.run(cmd("detach", str(target.pid)), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
        assert r.returncode == 0, r.stderr
        rest = attach.communicate(timeout=120)[1]
        assert attach.returncode == 0, rest
        run = out_dir(tmp_path, target.pid)
        last = rest.strip().splitlines()[-1]
        assert last.startswith("threadgraph: detached from process %d" % target.pid), rest
        assert " records " not in last, rest
        if mode == "--aggregate":
            paths = calls = 0
            with open(os.path.join(run, "aggregate.tga")) as f:
                for line in f:
                    if line.startswith("n "):
                        paths += 1
                        calls += int(line.split()[4])
            assert (" %d call%s in %d call path%s (aggregate.tga) in " % (
                calls, "" if calls == 1 else "s", paths, "" if paths == 1 else "s")
                in last), rest
        else:
            n = mem_lines(run)
            assert " %d reading%s of the threads' memory curves in " % (
                n, "" if n == 1 else "s") in last, rest
    finally:
        stop(target)
    assert "threadgraph" not in target.stderr.read()  # nothing said into the program's


# Threads started while attached park 900 calls deep while the main thread's
# records rotate a capture of --max-size 256K: every segment's head repeats
# their open calls, longer than the limit allows (test_max_size.py's case).
DEEP_AFTER_ATTACH = r'''
import select, sys, threading, time

def wait_for_stdin():
    # a wait with a timeout: gdb needs a thread that releases the GIL
    while not select.select([sys.stdin], [], [], 0.05)[0]:
        pass
    sys.stdin.readline()

ready = threading.Barrier(121)
go = threading.Event()

def leaf(i):
    return i + 1

def down(d):
    if d:
        return down(d - 1)
    for i in range(12000):
        leaf(i)
    ready.wait()
    go.wait()

def churn(i):
    # sizes that do not repeat: the records compress little
    return bytearray(i * 2654435761 % 4093)

print("ready", flush=True)
wait_for_stdin()
ts = [threading.Thread(target=down, args=(900,), name="d%d" % k) for k in range(120)]
for t in ts:
    t.start()
ready.wait()
# Long enough that the flusher writes the deep threads' records (every 0.5 s
# at the latest) and the capture starts new segments after that, each with
# those stacks in its head: the head passes the limit on any machine.
i, until = 0, time.monotonic() + 1.5
while i < 200000 or time.monotonic() < until:
    churn(i)
    i += 1
print("churned", flush=True)
wait_for_stdin()
go.set()
for t in ts:
    t.join()
'''


def test_over_limit_said_by_attach_not_in_the_program(tmp_path):
    """A capture past its --max-size under attach: the attaching command's last
    line says by how much, once; the program's stderr gets nothing (disable()
    runs in the program, whose warning would land there)."""
    script = tmp_path / "deep.py"
    script.write_text(DEEP_AFTER_ATTACH)
    target = subprocess.Popen([sys.executable, str(script)], cwd=str(tmp_path),
                              env=env_with_package(), stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True)
    try:
        assert target.stdout.readline() == "ready\n"
        attach, _ = start_attach(tmp_path, target.pid, "--max-size", "256K")
        target.stdin.write("go\n")
        target.stdin.flush()
        assert target.stdout.readline() == "churned\n"
        r = subprocess.run(cmd("detach", str(target.pid)), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
        assert r.returncode == 0, r.stderr
        rest = attach.communicate(timeout=120)[1]
        assert attach.returncode == 0, rest
        with open(os.path.join(out_dir(tmp_path, target.pid), "runinfo.json")) as f:
            over = json.load(f)["capture_over_limit"]
        assert over > 0
        assert rest.count("capture over its size limit") == 1, rest
        last = rest.strip().splitlines()[-1]
        assert "capture over its size limit by up to %d bytes" % over in last, rest
        assert "give a larger --max-size" in last, rest
        target.stdin.write("end\n")
        target.stdin.flush()
        _, err = target.communicate(timeout=120)
        assert target.returncode == 0, err
        assert "threadgraph" not in err, err
    finally:
        stop(target)


def test_another_threadgraph_imported_by_the_program_is_named(tmp_path):
    """A program that imports a threadgraph of another version from a path it
    added itself passes the check made with a fresh interpreter; the line run
    inside it says which one it imports and where, and nothing is enabled."""
    other = tmp_path / "vendored" / "threadgraph"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text('__version__ = "0.0.1"\n')
    (other / "_inject.py").write_text("raise RuntimeError('must not be imported')\n")
    script = tmp_path / "vendoring.py"
    script.write_text(
        "import sys, time\n"
        "sys.path.insert(0, %r)\n"
        "import threadgraph\n"
        "print('ready', threadgraph.__version__, flush=True)\n"
        "while True:\n"
        "    time.sleep(0.01)\n" % str(other.parent))
    prog = subprocess.Popen([sys.executable, str(script)], cwd=str(tmp_path),
                            env=env_with_package(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, universal_newlines=True)
    try:
        assert prog.stdout.readline() == "ready 0.0.1\n"
        r = subprocess.run(cmd("attach", "-o", str(tmp_path / "out"), str(prog.pid)),
                           cwd=str(tmp_path), env=env_with_package(keep_cli=True),
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
        if "ptrace" in r.stderr:
            pytest.skip("ptrace is not permitted here: " + r.stderr.strip())
        assert r.returncode == 1, r.stderr
        assert "imports threadgraph 0.0.1 from %s" % (other / "__init__.py") in r.stderr, r.stderr
        assert not (tmp_path / "out").exists()
        assert prog.poll() is None  # left running
    finally:
        stop(prog)
    assert "must not be imported" not in prog.stderr.read()


def test_live_pid_without_a_terminal_is_refused_before_attaching(tmp_path):
    """live PID (attach --live) draws on a terminal: with stdout not one it is a
    usage error, and the program is never stopped by gdb (no run directory)."""
    server, port = start_server(tmp_path)
    try:
        r = subprocess.run(cmd("live", "-o", str(tmp_path / "out"), str(server.pid)),
                           cwd=str(tmp_path), env=env_with_package(keep_cli=True),
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
        assert r.returncode == 2 and "not one: nothing was attached" in r.stderr, r.stderr
        assert not (tmp_path / "out").exists()
        r = subprocess.run(cmd("live", "--sort", "bogus", str(server.pid)),
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
        assert r.returncode == 2 and "--sort" in r.stderr, r.stderr
        assert get(port, "/after")[0] == 200
    finally:
        stop(server)


def tracer_of(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("TracerPid:"):
                return int(line.split()[1])
    return 0


def wait_until(cond, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


SPIN = "import sys\nprint('ready', flush=True)\nwhile True:\n    pass\n"


def test_traced_program_refused_naming_the_tracer(tmp_path):
    """A program another gdb holds is refused with its tracer named, not with
    the container fix of a ptrace refusal."""
    server, port = start_server(tmp_path)
    gdb = subprocess.Popen(["gdb", "-q", "-batch", "-nx", "-p", str(server.pid),
                            "-ex", "shell cat >/dev/null"], stdin=subprocess.PIPE,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: tracer_of(server.pid) != 0)
        r = subprocess.run(cmd("attach", "-o", str(tmp_path / "out"), str(server.pid)),
                           env=env_with_package(keep_cli=True), stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=120)
        assert r.returncode == 1 and "is being traced by process %d (gdb)" % gdb.pid \
            in r.stderr, r.stderr
    finally:
        gdb.stdin.close()
        gdb.wait(timeout=60)
        stop(server)


def test_attach_killed_before_a_safe_point_leaves_no_gdb(tmp_path):
    """SIGKILL to attach while gdb waits for a safe point that never comes (one
    thread computing): gdb detaches at once instead of tracing the program on."""
    script = tmp_path / "spin.py"
    script.write_text(SPIN)
    target = subprocess.Popen([sys.executable, str(script)], env=env_with_package(),
                              stdout=subprocess.PIPE, universal_newlines=True)
    try:
        assert target.stdout.readline() == "ready\n"
        # its control directory, which a SIGKILL leaves, under tmp_path
        env = dict(env_with_package(keep_cli=True), TMPDIR=str(tmp_path))
        attach = subprocess.Popen(cmd("attach", "-o", str(tmp_path / "out"), str(target.pid)),
                                  env=env, stderr=subprocess.PIPE, universal_newlines=True)
        wait_until(lambda: tracer_of(target.pid) != 0 or attach.poll() is not None)
        assert attach.poll() is None, attach.stderr.read()
        # gdb waiting in its `continue` (a SIGINT that reaches it while it
        # still reads the symbols is lost: PR_SET_PDEATHSIG sends only one)
        time.sleep(3)
        attach.kill()
        attach.wait()
        wait_until(lambda: tracer_of(target.pid) == 0, timeout=10)
        assert target.poll() is None
    finally:
        stop(target)


FORKER = r"""
import os, select, sys, time
print("ready", flush=True)
while not select.select([sys.stdin], [], [], 0.05)[0]:  # gdb's safe points
    pass
if os.fork() == 0:  # a child that outlives its parent, with the fds it inherited
    print(os.getpid(), flush=True)
    time.sleep(600)
    os._exit(0)
time.sleep(0.2)
sys.exit(0)
"""


def test_program_ending_with_a_forked_child_alive(tmp_path):
    """The program forks a child that lives on, then ends while attached: attach
    says so when the program ends, not when the child does."""
    script = tmp_path / "forker.py"
    script.write_text(FORKER)
    target = subprocess.Popen([sys.executable, str(script)], env=env_with_package(),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              universal_newlines=True)
    child = None
    try:
        assert target.stdout.readline() == "ready\n"
        attach, _ = start_attach(tmp_path, target.pid)
        target.stdin.write("go\n")
        target.stdin.flush()
        child = int(target.stdout.readline())
        assert target.wait(timeout=120) == 0
        rest = attach.communicate(timeout=60)[1]  # the child sleeps on
        assert attach.returncode == 0 and "ended while attached" in rest, rest
        os.kill(child, 0)  # still there
    finally:
        if child:
            os.kill(child, signal.SIGKILL)
        stop(target)


def test_program_killed_while_attached_is_not_said_complete(tmp_path):
    script = tmp_path / "victim.py"
    script.write_text("import sys, time\nprint('ready', flush=True)\n"
                      "while True:\n    time.sleep(0.01)\n")
    target = subprocess.Popen([sys.executable, str(script)], env=env_with_package(),
                              stdout=subprocess.PIPE, universal_newlines=True)
    try:
        assert target.stdout.readline() == "ready\n"
        attach, _ = start_attach(tmp_path, target.pid)
        target.kill()
        target.wait()
        rest = attach.communicate(timeout=60)[1]
        assert attach.returncode == 0 and "ended while attached, killed before" in rest, rest
        assert "complete" not in rest
    finally:
        stop(target)


def test_attach_killed_while_recording_leaves_nothing_behind(tmp_path):
    """SIGKILL to attach while it records: the program detaches by itself, as
    it was before, with its run closed, and removes the control directory that
    the attaching command can no longer remove."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    server, port = start_server(tmp_path)
    try:
        before_state = json.loads(get(port, "/state")[1])
        attach, _ = start_attach(tmp_path, server.pid, env={"TMPDIR": str(tmp)})
        assert [n for n in os.listdir(str(tmp)) if n.startswith("tg-attach-")]
        load(port, "p")
        attach.kill()
        attach.wait()
        wait_until(lambda: json.loads(get(port, "/state")[1]) == before_state, timeout=30)
        wait_until(lambda: not [n for n in os.listdir(str(tmp)) if n.startswith("tg-attach-")],
                   timeout=30)
        with open(os.path.join(out_dir(tmp_path, server.pid), "runinfo.json")) as f:
            assert json.load(f)["end_time"] is not None
        assert all(status == 200 for status, _ in load(port, "p").values())
    finally:
        stop(server)


def test_write_errors_at_detach_said_by_attach_not_in_the_program(tmp_path):
    """disable()'s write errors at detach (a file size limit: the capture's
    last chunk and runinfo.json fail with EFBIG) are said by attach, which
    exits 1, never warned into the program's stderr."""
    server, port = start_server(tmp_path)
    try:
        attach, _ = start_attach(tmp_path, server.pid)
        load(port, "p")
        assert get(port, "/fsize") == (200, b"ok")
        r = subprocess.run(cmd("detach", str(server.pid)), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
        assert r.returncode == 0, r.stderr
        rest = attach.communicate(timeout=120)[1]
        assert attach.returncode == 1, rest
        assert "detached from process %d" % server.pid in rest, rest
        assert "threadgraph: output stopped: " in rest and "File too large" in rest, rest
        assert all(status == 200 for status, _ in load(port, "p").values())
    finally:
        stop(server)
    assert "output stopped" not in server.stderr.read()


SLOW_TARGET = r"""
import threading, time
t = threading.Thread(target=lambda: [time.sleep(0.1) for _ in range(40)])
t.start()
for i in range(8):
    time.sleep(0.5)
    print("main", i, flush=True)
t.join()
print("target done", flush=True)
"""


def test_sigint_to_gdb_during_the_injected_call_leaves_the_program_running(tmp_path):
    """A SIGINT reaching gdb while the injected line runs (attach's timeout or
    Ctrl-C racing the inject mark, attach's death) stopped the program
    elsewhere, and the script put the saved registers back mid-call: 'Fatal
    Python error: PyEval_SaveThread'.  gdb now goes on to the call's return.
    The line here is a slow one, so that the SIGINT lands inside it."""
    from threadgraph._attach import INJECT_MARK, gdb_script

    target = subprocess.Popen([sys.executable, "-c", SLOW_TARGET], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, universal_newlines=True,
                              start_new_session=True)
    try:
        time.sleep(0.3)
        script = tmp_path / "s.gdb"
        script.write_text(gdb_script(
            "import time; time.sleep(2); print('LINE RAN', flush=True)"))
        out = tmp_path / "gdb.out"
        with open(str(out), "wb") as f:
            gdb = subprocess.Popen(["gdb", "-q", "-batch", "-nx", "-iex", "set auto-load off",
                                    "-p", str(target.pid), "-x", str(script)],
                                   stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        wait_until(lambda: INJECT_MARK.encode() in out.read_bytes() or gdb.poll() is not None,
                   timeout=60)
        if gdb.poll() is not None and b"ptrace: Operation not permitted" in out.read_bytes():
            pytest.skip("ptrace is not permitted here")
        time.sleep(0.7)  # inside the line's sleep
        gdb.send_signal(signal.SIGINT)
        gdb.wait(timeout=60)
        text = target.communicate(timeout=60)[0]
        assert target.returncode == 0, text
        assert "LINE RAN" in text and "target done" in text, text
        assert "Fatal Python error" not in text, text
    finally:
        stop(target)
