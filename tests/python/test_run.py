"""`threadgraph run`: a program runs under the profiler exactly as if run directly.

Each test starts real processes: the installed `threadgraph` console script (or
`python -m threadgraph` when the script is not next to this interpreter) on small
programs written into a temporary directory, and checks what the program saw, its
exit status, the dump files and the summary on stderr.
"""
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap

import pytest

import tgcapture

import threadgraph

HERE = os.path.dirname(os.path.abspath(__file__))
DOCS_RUN = os.path.join(HERE, "..", "..", "docs", "run.md")
TIMEOUT = 120  # seconds; only a hang gets near it


def threadgraph_cmd():
    """How to call the installed console script from this interpreter."""
    script = os.path.join(os.path.dirname(sys.executable), "threadgraph")
    if os.path.exists(script):
        return [script]
    return [sys.executable, "-m", "threadgraph"]


def tg(args, cwd, env=None, cmd=None):
    full_env = dict(os.environ)
    full_env.pop("TG_CLI", None)  # the summary must use the packaged processor
    full_env.update(env or {})
    return subprocess.run(
        (cmd or threadgraph_cmd()) + list(args),
        cwd=str(cwd),
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
        timeout=TIMEOUT,
    )


def write(path, text):
    path = str(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))
    return path


def only_run_dir(base):
    """The single <pid> directory a run made under ``base``."""
    dirs = [d for d in glob.glob(os.path.join(str(base), "*")) if os.path.isdir(d)]
    assert len(dirs) == 1, "expected one run directory in %s, found %r" % (base, dirs)
    return dirs[0]


def text_of(path):
    """The text of dump file PATH: the file itself (--format text), or what its
    run directory's capture.tg renders to (the default binary format, decoded by
    the tests' own reader); None when neither has it."""
    if os.path.exists(path):
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "surrogateescape")
    cap = os.path.join(os.path.dirname(path), "capture.tg")
    if not os.path.exists(cap):
        return None
    data = tgcapture.load(cap).render().get(os.path.basename(path))
    return None if data is None else data.decode("utf-8", "surrogateescape")


def mem_records(path):
    text = text_of(path)
    assert text is not None, "no %s, as a file or in the capture" % path
    return [line for line in text.splitlines() if line.strip()]


def functions_in(path):
    """FUNCTION of every record in a .mem file (split as docs/formats.md says)."""
    names = []
    for rec in mem_records(path):
        body = rec.split("#", 1)[1] if "#" in rec.split("=>")[0] else rec
        site = body.rsplit("=>", 1)[0]
        names.append(site.rsplit(":", 2)[2])
    return names


def runinfo(run_dir):
    with open(os.path.join(run_dir, "runinfo.json")) as f:
        return json.load(f)


# A program that reports what it saw, as JSON, into the file named by $TG_REPORT.
PROBE = """\
import json, os, sys
def alloc():
    return [0] * 100000
keep = alloc()
main = sys.modules["__main__"]
json.dump({
    "argv": sys.argv,
    "name": __name__,
    "path0": sys.path[0],
    "file": __file__,
    "main_is_module": main.__dict__ is globals(),
    "spec": repr(__spec__) if __spec__ is None else __spec__.name,
}, open(os.environ["TG_REPORT"], "w"))
"""


def probe_direct(argv, cwd, report):
    env = dict(os.environ, TG_REPORT=str(report))
    subprocess.run([sys.executable] + argv, cwd=str(cwd), env=env, check=True, timeout=TIMEOUT)
    with open(str(report)) as f:
        return json.load(f)


def test_script_sees_what_python_gives_it(tmp_path):
    write(tmp_path / "app" / "probe.py", PROBE)
    direct = probe_direct(["app/probe.py", "a", "--stack", "-o", "x"], tmp_path, tmp_path / "d.json")
    res = tg(
        ["run", "-o", "out", "app/probe.py", "a", "--stack", "-o", "x"],
        tmp_path,
        env={"TG_REPORT": str(tmp_path / "r.json")},
    )
    assert res.returncode == 0, res.stderr
    with open(str(tmp_path / "r.json")) as f:
        profiled = json.load(f)
    assert profiled == direct
    assert profiled["argv"] == ["app/probe.py", "a", "--stack", "-o", "x"]
    assert profiled["name"] == "__main__"
    assert profiled["path0"] == str(tmp_path / "app")
    assert profiled["main_is_module"] is True
    # The program's own "-o x" and "--stack" were not taken as ours.
    assert not os.path.exists(str(tmp_path / "x"))
    run_dir = only_run_dir(tmp_path / "out")
    assert not glob.glob(os.path.join(run_dir, "*.stack"))
    assert text_of(os.path.join(run_dir, "MainThread.stack")) is None
    assert "alloc" in functions_in(os.path.join(run_dir, "MainThread.mem"))


def test_module_sees_what_python_m_gives_it(tmp_path):
    write(tmp_path / "pkg" / "__init__.py", "")
    write(tmp_path / "pkg" / "probe.py", PROBE)
    direct = probe_direct(["-m", "pkg.probe", "b", "-m", "c"], tmp_path, tmp_path / "d.json")
    res = tg(
        ["run", "-o", "out", "-m", "pkg.probe", "b", "-m", "c"],
        tmp_path,
        env={"TG_REPORT": str(tmp_path / "r.json")},
    )
    assert res.returncode == 0, res.stderr
    with open(str(tmp_path / "r.json")) as f:
        profiled = json.load(f)
    assert profiled == direct
    assert profiled["argv"][1:] == ["b", "-m", "c"]
    assert profiled["path0"] == str(tmp_path)
    assert profiled["spec"] == "pkg.probe"
    run_dir = only_run_dir(tmp_path / "out")
    assert "alloc" in functions_in(os.path.join(run_dir, "MainThread.mem"))


def test_python_dash_m_threadgraph_run(tmp_path):
    write(tmp_path / "probe.py", PROBE)
    res = tg(
        ["run", "probe.py", "z"],
        tmp_path,
        env={"TG_REPORT": str(tmp_path / "r.json")},
        cmd=[sys.executable, "-m", "threadgraph"],
    )
    assert res.returncode == 0, res.stderr
    with open(str(tmp_path / "r.json")) as f:
        assert json.load(f)["argv"] == ["probe.py", "z"]
    # Default output: threadgraph-<script stem>/<pid>/ in the current directory.
    run_dir = only_run_dir(tmp_path / "threadgraph-probe")
    assert text_of(os.path.join(run_dir, "MainThread.mem")) is not None


EXITS = """\
import sys
def work():
    x = [1] * 50000
    return len(x)
def finish(how):
    work()
    if how == "exit3":
        sys.exit(3)
    if how == "raise":
        raise ValueError("boom from the program")
    if how == "exitmsg":
        sys.exit("leaving with a message")
finish(sys.argv[1])
"""


@pytest.mark.parametrize(
    "how, status",
    [("exit3", 3), ("raise", 1), ("exitmsg", 1), ("normal", 0)],
)
def test_exit_status_kept_and_files_complete(tmp_path, how, status):
    write(tmp_path / "exits.py", EXITS)
    res = tg(["run", "-o", "out", "exits.py", how], tmp_path)
    assert res.returncode == status, res.stderr
    if how == "raise":
        assert "ValueError: boom from the program" in res.stderr
        assert "Traceback (most recent call last)" in res.stderr
        assert 'exits.py", line' in res.stderr
        assert "_run.py" not in res.stderr  # the profiler's own frames are hidden
    if how == "exitmsg":
        assert "leaving with a message" in res.stderr
    run_dir = only_run_dir(tmp_path / "out")
    funcs = functions_in(os.path.join(run_dir, "MainThread.mem"))
    # work() returned, and finish() left (by return, SystemExit or the exception).
    assert "work" in funcs and "finish" in funcs
    info = runinfo(run_dir)
    assert info["end_time"] is not None  # disable() ran and rewrote runinfo.json
    # The default binary capture is complete: it ends with its trailer.
    assert info["capture"] == "capture.tg" and info["dropped"] == 0
    assert tgcapture.load(os.path.join(run_dir, "capture.tg")).end is not None
    assert "program exited with status %d" % status in res.stderr


def test_non_daemon_threads_finish_before_the_profile_closes(tmp_path):
    write(
        tmp_path / "late.py",
        """\
        import sys, threading, time
        def in_module_code():
            f = sys._current_frames().get(threading.main_thread().ident)
            while f is not None and f.f_code.co_name != "<module>":
                f = f.f_back
            return f is not None and f.f_code.co_filename == __file__
        def slow():
            # until the main thread's module code has returned: python waits
            # for "late", and so must the profiler
            while in_module_code():
                time.sleep(0.001)
            return bytearray(300000)
        def worker():
            slow()
        threading.Thread(target=worker, name="late").start()
        """,
    )
    res = tg(["run", "-o", "out", "late.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    run_dir = only_run_dir(tmp_path / "out")
    assert "slow" in functions_in(os.path.join(run_dir, "late.mem"))


@pytest.mark.skipif(sys.version_info < (3, 9), reason="executor workers are daemon threads before 3.9")
@pytest.mark.parametrize("executor", ["ThreadPoolExecutor", "ProcessPoolExecutor"])
def test_executor_left_running_ends_as_without_the_profiler(tmp_path, executor):
    # A program that never shuts its executor down ends at once under python:
    # threading._shutdown first calls concurrent.futures' exit hook (registered
    # with threading._register_atexit), which tells the workers to end, and then
    # joins them.  run's own wait for the non-daemon threads must do the same,
    # not join workers that nobody told to end (it waited for ever).
    write(
        tmp_path / "prog.py",
        """\
        import concurrent.futures
        def job(n):
            return len(bytearray(1000 * n))
        if __name__ == "__main__":
            ex = concurrent.futures.%s(2)
            print(sorted(ex.map(job, range(4))))
        """ % executor,
    )
    res = subprocess.run(threadgraph_cmd() + ["run", "-o", "out", "prog.py"], cwd=str(tmp_path),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "[0, 1000, 2000, 3000]\n"
    run_dir = only_run_dir(tmp_path / "out")
    assert runinfo(run_dir)["end_time"] is not None
    assert "program exited with status 0" in res.stderr


ATEXIT_PROG = """\
import atexit, sys, threading, time
def save_state():
    print("saved", sys.is_finalizing(), flush=True)
def late():
    time.sleep(0.3)
    print("late", flush=True)
atexit.register(save_state)
threading.Thread(target=late, name="late").start()
print("main", flush=True)
END
"""


@pytest.mark.parametrize("end", ["pass", "raise ValueError('boom')", "sys.exit('bye')"])
def test_the_end_of_a_program_in_pythons_order(tmp_path, end):
    # python's end of a program: the traceback (or sys.exit's message) at once,
    # then the joins, then the atexit functions, at the interpreter's end
    # (finalizing) as without the profiler
    write(tmp_path / "prog.py", ATEXIT_PROG.replace("END", end))
    plain = subprocess.run([sys.executable, "prog.py"], cwd=str(tmp_path),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=TIMEOUT)
    res = tg(["run", "--format", "text", "-o", "out", "prog.py"], tmp_path)
    assert res.returncode == plain.returncode, res.stderr
    # (sys.is_finalizing() in an exit function: True on 3.12+, False before)
    assert res.stdout == plain.stdout and res.stdout.startswith("main\nlate\nsaved "), res.stdout
    if end != "pass":
        told = "boom" if "boom" in end else "bye"
        assert told in plain.stderr and told in res.stderr
        # printed before the summary, as python prints it before ending
        assert res.stderr.index(told) < res.stderr.index("threadgraph: program exited")
    run_dir = only_run_dir(tmp_path / "out")
    assert "late" in functions_in(os.path.join(run_dir, "late.mem"))
    assert "save_state" not in functions_in(os.path.join(run_dir, "MainThread.mem"))


def test_atexit_functions_run_once_and_profile_ends(tmp_path):
    # the exit functions are called once, last registered first, and an
    # exception in one is printed as python prints it, the status kept
    write(tmp_path / "prog.py", """\
        import atexit
        atexit.register(print, "second", flush=True)
        def bad():
            raise RuntimeError("in exit function")
        atexit.register(bad)
        atexit.register(print, "first", flush=True)
        """)
    res = tg(["run", "-o", "out", "prog.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "first\nsecond\n"
    assert res.stderr.count("RuntimeError: in exit function") == 1, res.stderr
    assert runinfo(only_run_dir(tmp_path / "out"))["end_time"] is not None


def test_without_a_stderr_the_program_runs_and_keeps_its_status(tmp_path):
    # python runs a program whose stderr is closed (sys.stderr is None) or a
    # pipe whose reader left; threadgraph's own lines are best effort and never
    # stop the program or change its status
    write(tmp_path / "prog.py", """\
        import sys
        print("hello", flush=True)
        sys.exit(3)
        """)
    closed = subprocess.run(threadgraph_cmd() + ["run", "-o", "out", "prog.py"],
                            cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            universal_newlines=True, timeout=TIMEOUT,
                            preexec_fn=lambda: os.close(2))
    assert (closed.returncode, closed.stdout) == (3, "hello\n")
    assert runinfo(only_run_dir(tmp_path / "out"))["end_time"] is not None
    r, w = os.pipe()
    os.close(r)  # a reader that has gone: every write to the pipe fails
    try:
        broken = subprocess.run(threadgraph_cmd() + ["run", "-o", "out2", "prog.py"],
                                cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=w,
                                universal_newlines=True, timeout=TIMEOUT)
    finally:
        os.close(w)
    assert (broken.returncode, broken.stdout) == (3, "hello\n")


@pytest.mark.parametrize("end", ["sys.exit(3)", "sys.exit('bye')", "raise ValueError('x')", "pass"])
def test_only_the_program_is_recorded(tmp_path, end):
    # threadgraph run's own work while the profiler runs (its "profiling" line,
    # the exit status, listing the threads to wait for) is not the program's: no
    # record of the threadgraph package in the main thread (the old code recorded
    # display_path, say, wait_for_threads, threading's enumerate, isinstance...).
    write(
        tmp_path / "prog.py",
        """\
        import sys, threading, time
        def nap():
            time.sleep(0.2)
        threading.Thread(target=nap, name="napper").start()
        print("out")
        %s
        """ % end,
    )
    res = tg(["run", "--format", "text", "-o", "out", "prog.py"], tmp_path)
    run_dir = only_run_dir(tmp_path / "out")
    lines = mem_records(os.path.join(run_dir, "MainThread.mem"))
    sites = [rec.split("#", 1)[1].rsplit("=>", 1)[0] for rec in lines]
    package = os.path.dirname(os.path.abspath(threadgraph.__file__)) + os.sep
    assert not [site for site in sites if site.startswith(package)], (res.stderr, sites)
    assert not [site for site in sites if site.endswith((":enumerate", ":is_alive",
                                                         ":isinstance", ":exc_info"))], sites
    # ... nor the end of enable()'s catch_warnings() before the program's first
    # line, nor the os.getpid() after its last (the old code recorded them).
    assert not [site for site in sites if site.endswith((":_filters_mutated", ":getpid"))
                or re.search(r"warnings\.py:\d+:__exit__$", site)], sites
    prog = os.path.join(str(tmp_path), "prog.py") + ":"
    assert [site for site in sites if site.startswith(prog) and site.endswith(":<module>")]


def test_program_code_run_during_the_final_wait_is_recorded(tmp_path):
    # After its module code, the main thread waits for the program's threads; a
    # signal handler of the program running then is the program's and recorded.
    write(
        tmp_path / "prog.py",
        """\
        import os, signal, sys, threading, time
        keep = []
        def in_module_code():
            f = sys._current_frames().get(threading.main_thread().ident)
            while f is not None and f.f_code.co_name != "<module>":
                f = f.f_back
            return f is not None and f.f_code.co_filename == __file__
        def on_usr1(signum, frame):
            keep.append(bytearray(100000))
        signal.signal(signal.SIGUSR1, on_usr1)
        def later():
            # once the module code has returned: the main thread then waits
            # for this thread, and runs the handler meanwhile
            while in_module_code():
                time.sleep(0.001)
            os.kill(os.getpid(), signal.SIGUSR1)
            while not keep:
                time.sleep(0.001)
        threading.Thread(target=later).start()
        """,
    )
    res = tg(["run", "--format", "text", "-o", "out", "prog.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    run_dir = only_run_dir(tmp_path / "out")
    recs = [r for r in mem_records(os.path.join(run_dir, "MainThread.mem")) if ":on_usr1=>" in r]
    assert len(recs) == 1 and int(recs[0].rsplit("=>", 1)[1]) >= 100000, recs


ALLOCATOR = """\
import threading
def big():
    return bytearray(600000)
def small():
    return bytearray(1000)
keep = []
def worker():
    keep.append(big())
    keep.append(small())
ts = [threading.Thread(target=worker, name="worker-%d" % i) for i in range(3)]
for t in ts: t.start()
for t in ts: t.join()
"""


def cli_reads_run_dirs(run_dir, cwd):
    """Whether the installed processor reads a binary capture's run directory."""
    res = tg(["peaks", "--json", run_dir], cwd)
    return res.returncode == 0


@pytest.mark.parametrize("fmt", ["text", "binary"])
def test_start_line_and_summary(tmp_path, fmt):
    write(tmp_path / "alloc.py", ALLOCATOR)
    res = tg(["run", "--stack", "--format", fmt, "alloc.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    lines = [l for l in res.stderr.splitlines() if l.strip()]
    run_dir = only_run_dir(tmp_path / "threadgraph-alloc")
    rel = os.path.relpath(run_dir, str(tmp_path))
    # First line: where the output goes.
    assert lines[0] == "threadgraph: profiling alloc.py; writing to %s/" % rel
    text = res.stderr
    m = re.search(r"(\d+) threads? seen, (\d+) records written", text)
    assert m, text
    assert int(m.group(1)) == 4  # MainThread + 3 workers
    if fmt == "text":
        records = sum(
            len(mem_records(p))
            for p in glob.glob(os.path.join(run_dir, "*.mem"))
            if not p.endswith("process.mem")
        )
    else:
        assert not glob.glob(os.path.join(run_dir, "*.mem"))
        rendered = tgcapture.load(os.path.join(run_dir, "capture.tg")).render()
        records = sum(len(v.splitlines()) for k, v in rendered.items()
                      if k.endswith(".mem") and k != "process.mem")
    assert records > 0 and int(m.group(2)) == records
    if fmt == "binary":
        assert "    threadgraph memg %s\n" % rel in text
        assert "    threadgraph peaks %s\n" % rel in text
        assert "    threadgraph export %s\n" % rel in text
        assert "    threadgraph report %s -o %s/report.html\n" % (rel, rel) in text
        if not cli_reads_run_dirs(run_dir, tmp_path):
            # A processor without capture support: the summary says so, calmly.
            assert "threadgraph: top peaks: unavailable (threadgraph peaks failed" in text
            return
    # Top peaks: the three big() calls, biggest first, with thread, function, delta.
    peak_lines = text.split("top peaks (thread, function, delta):\n", 1)[1].split("threadgraph: next:")[0]
    # growth first, then releases, each group under a label of its own
    peaks = [l.split() for l in peak_lines.strip().splitlines() if l.endswith(" B")]
    assert peaks, text
    assert peaks[0][0].startswith("worker-")
    assert any(p[1] == "big" and int(p[-2]) >= 600000 for p in peaks), peaks
    assert all(p[-1] == "B" and re.match(r"^[-+][0-9]+$", p[-2]) for p in peaks)
    sizes = [int(p[-2]) for p in peaks if int(p[-2]) > 0]
    assert sizes == sorted(sizes, reverse=True)
    # The next commands name the real directory and work as printed.
    if fmt == "text":
        assert "threadgraph memg %s/*.mem" % rel in text
        assert "threadgraph peaks %s/*.mem" % rel in text
    deco = [l for l in lines if "threadgraph decorate-stack " in l]
    assert deco, text
    argv = deco[0].split()[1:]
    res2 = tg(argv, tmp_path)
    assert res2.returncode == 0, res2.stderr
    first = res2.stdout.splitlines()[0]
    assert re.match(r"^[^@ ]+@.+:[0-9]+-[0-9]+, Time: [0-9.e-]+ s, Memory: -?[0-9]+ B$", first), first


def test_binary_run_without_stack_still_has_subtrees(tmp_path):
    """A capture holds every call, --stack or not: run suggests decorate-stack, which
    works, and --help says --stack is about text files."""
    write(tmp_path / "alloc.py", ALLOCATOR)
    res = tg(["run", "alloc.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    deco = [l for l in res.stderr.splitlines() if "threadgraph decorate-stack " in l]
    assert deco, res.stderr
    res2 = tg(deco[0].split()[1:], tmp_path)
    assert res2.returncode == 0 and "@" in res2.stdout, res2.stderr
    # under the peaks: how to read a delta that looks wrong
    assert "a temporary the caller frees right after counts as the call's growth" in res.stderr
    assert "garbage collection run during a call counts all it freed" in " ".join(
        res.stderr.split())
    helptext = " ".join(tg(["run", "--help"], tmp_path).stdout.split())
    assert "with --format text, also write a .stack file per thread" in helptext


# A thread whose own run() is its largest peak (what it keeps at its end) and
# encloses thousands of calls: the whole thread's subtree.
LONG_RUN = """\
import threading
def piece(i):
    return bytearray(300 + i % 7)
class Worker(threading.Thread):
    def run(self):
        self.keep = []
        for i in range(4000):
            self.keep.append(piece(i))
w = Worker(name="worker")
w.start()
w.join()
"""

# What decorate-stack prints when it leaves calls out (docs/cli.md)
LEFT_OUT = re.compile(r"^\.\.\. ([0-9]+) more calls not shown \(.*--max-lines 300\)$")


@pytest.mark.parametrize("opts", [[], ["--format", "text", "--stack"]], ids=["binary", "text"])
def test_suggested_decorate_stack_is_bounded(tmp_path, opts):
    """The peak the summary suggests decorating can be a thread's whole run():
    the command it prints carries a bound, and following it prints the call's
    first lines and a line counting the rest, not every call of the thread."""
    write(tmp_path / "prog.py", LONG_RUN)
    res = tg(["run"] + opts + ["prog.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    peaks = res.stderr.split("growth, largest first:\n", 1)[1].splitlines()
    assert peaks[0].split()[:2] == ["worker", "run"], res.stderr
    deco = [l for l in res.stderr.splitlines() if "threadgraph decorate-stack " in l]
    assert len(deco) == 1 and " --depth 3 --max-lines 300 " in deco[0], res.stderr
    res2 = tg(deco[0].split()[1:], tmp_path)
    assert res2.returncode == 0, res2.stderr
    lines = res2.stdout.splitlines()
    assert lines[0].startswith("run@") and len(lines) == 301, lines[:3] + lines[-3:]
    m = LEFT_OUT.match(lines[-1])
    assert m and int(m.group(1)) + 300 >= 4001, lines[-1]


# Three workers that each keep the same amount: peaks of equal size in three threads.
SAME_SIZE_WORKERS = """\
import threading
kept = []
def keep_some():
    kept.append(bytearray(2000000))
ts = [threading.Thread(target=keep_some, name="worker-%d" % i) for i in range(3)]
for t in ts: t.start()
for t in ts: t.join()
"""


@pytest.mark.parametrize("fmt", ["text", "binary"])
def test_summary_names_every_thread_of_equal_peaks(tmp_path, fmt):
    """Calls nested in one another with the same delta are one peak, but only within
    a thread: three threads keeping the same bytes are three peaks, each under its
    own thread (a binary capture's peaks all name the run directory as MEMFILE)."""
    write(tmp_path / "same.py", SAME_SIZE_WORKERS)
    res = tg(["run", "--stack", "--format", fmt, "same.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    growth = res.stderr.split("growth, largest first:\n", 1)[1].split("released")[0]
    rows = [l.split() for l in growth.splitlines() if l.endswith(" B")]
    keepers = sorted(r[0] for r in rows if r[1] == "keep_some" and int(r[-2]) >= 2000000)
    assert keepers == ["worker-0", "worker-1", "worker-2"], res.stderr


# One thread calls keep() twice, one call after the other, the second keeping a
# little more: two calls of nearly the same delta that are not nested.
SIBLING_CALLS = """\
import threading
kept = []
def keep(n):
    kept.append(bytearray(n))
def work():
    keep(2000000)
    keep(2030000)
t = threading.Thread(target=work, name="worker")
t.start(); t.join()
"""


@pytest.mark.parametrize("fmt", ["text", "binary"])
def test_summary_keeps_sibling_calls_of_near_deltas(tmp_path, fmt):
    """Only calls nested in one another are merged (docs/run.md): the second,
    larger keep() is not hidden behind the first, smaller one that returned
    before it, and the largest growth listed is the largest keep()."""
    write(tmp_path / "sib.py", SIBLING_CALLS)
    res = tg(["run", "--stack", "--format", fmt, "sib.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    growth = res.stderr.split("growth, largest first:\n", 1)[1].split("(a delta")[0]
    rows = [l.split() for l in growth.splitlines() if l.endswith(" B")]
    keeps = [int(r[-2]) for r in rows if r[0] == "worker" and r[1] == "keep"]
    assert len(keeps) == 2 and keeps[0] >= 2030000 and 2000000 <= keeps[1] < 2030000, \
        res.stderr


def test_innermost_merges_only_nested_calls_near_the_group():
    """innermost(): calls one after the other are never merged; nested calls are,
    compared with the group's first (largest) delta, so that a chain of calls
    each within NEAR of the next does not end at a call far smaller."""
    from threadgraph import _run

    def peak(delta, line, start, end):
        return {"thread": "T", "mem_file": "d", "delta": delta, "mem_line": line,
                "call_start": start, "time": end, "function": "f%d" % line}
    # A(10000) contains B(7000) contains C(4000) contains D(1000); E is A's sibling
    a, b, c, d = (peak(10000, 4, 1.0, 9.0), peak(7000, 3, 2.0, 8.0),
                  peak(4000, 2, 3.0, 7.0), peak(1000, 1, 4.0, 6.0))
    e = peak(10100, 5, 9.5, 9.9)
    kept = _run.innermost([e, a, b, c, d])
    deltas = sorted(int(p["delta"]) for p in kept)
    assert 10100 in deltas          # the sibling, larger, is not hidden behind A
    assert max(x for x in deltas if x != 10100) >= 7000, deltas  # no drift to D
    # without call_start (text dumps without .stack) nesting is not known: merged
    for p in (a, e):
        p["call_start"] = None
    assert [p["delta"] for p in _run.innermost([e, a])] == [10000]


@pytest.mark.parametrize("output", ["blocker/sub", "blocker"], ids=["under-a-file", "a-file"])
def test_output_dir_cannot_be_created(tmp_path, output):
    """A base directory under a file, or that is a file: one line saying so
    (not a traceback, not "File exists"), and the program does not start."""
    write(tmp_path / "probe.py", "print('ran')\n")
    write(tmp_path / "blocker", "a file, not a directory\n")
    res = tg(["run", "-o", output, "probe.py"], tmp_path)
    assert res.returncode == 1
    assert "cannot write the profile" in res.stderr
    assert "ran" not in res.stdout  # the program did not start unprofiled
    assert "Traceback" not in res.stderr and "File exists" not in res.stderr
    if output == "blocker":
        assert "not a directory" in res.stderr


# Values past the C integers the recorder takes (enable()'s long long and long,
# accounting's largest sample_bytes): a usage error naming the option, before
# anything is created.
@pytest.mark.parametrize("opts", [
    ["--max-size", "99999999999999999999999T"],
    ["--max-size", "9" * 400],  # past a float too
    ["--sample-bytes", "99999999999999999999999"],
    ["--sample-bytes", str((1 << 40) + 1)],
    ["--process-memory-frequency", "99999999999999999999"],
])
def test_oversized_numbers_are_usage_errors(tmp_path, opts):
    write(tmp_path / "ok.py", "print('ran')\n")
    res = tg(["run", "-o", "sz"] + opts + ["ok.py"], tmp_path)
    assert res.returncode == 2, res.stderr
    assert opts[0] + ": must be" in res.stderr or opts[0] + " must be" in res.stderr
    assert "Traceback" not in res.stderr and "Error" not in res.stderr
    assert "ran" not in res.stdout
    assert not os.path.exists(str(tmp_path / "sz"))


@pytest.mark.parametrize("opts,written", [
    (["--max-size", "0", "--aggregate"], "aggregate.tga"),
    (["--max-size", "0", "--format", "text"], "process.mem"),
    (["--max-size", "0"], "capture.tg"),
])
def test_max_size_0_is_no_limit(tmp_path, opts, written):
    """--max-size 0 is no limit, as ProcessProfile(max_size=0): it was taken
    as a limit by the option checks (--aggregate and --format text refused
    with it) and as none by the recorder."""
    write(tmp_path / "ok.py", "print('ran')\n")
    res = tg(["run", "-o", "z"] + opts + ["ok.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert "ran" in res.stdout
    (run,) = os.listdir(str(tmp_path / "z"))
    assert written in os.listdir(str(tmp_path / "z" / run))


NON_UTF8_PROG = """\
def alloc_in_odd_file():
    return [0] * 100000
keep = alloc_in_odd_file()
print("ran")
"""


def non_utf8_name(tmp_path, name):
    """NAME (bytes, not UTF-8) as a str the OS takes, or skip where file names
    must be UTF-8 (macOS)."""
    path = os.path.join(os.fsencode(str(tmp_path)), name)
    try:
        with open(path, "wb"):
            pass
        os.unlink(path)
    except OSError:
        pytest.skip("this file system takes only UTF-8 names")
    return os.fsdecode(name)


def tg_bytes(args, cwd):
    """tg() with the output as bytes: a name that is not UTF-8 may be in it."""
    env = dict(os.environ)
    env.pop("TG_CLI", None)
    return subprocess.run(threadgraph_cmd() + list(args), cwd=str(cwd), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT)


def test_non_utf8_program_name(tmp_path):
    prog = non_utf8_name(tmp_path, b"\xff\xfe.py")
    write(os.path.join(str(tmp_path), prog), NON_UTF8_PROG)
    res = tg_bytes(["run", prog], tmp_path)
    assert res.returncode == 0, res.stderr
    assert b"Traceback" not in res.stderr
    assert res.stdout.startswith(b"ran\n")
    # the default base is named after the program: threadgraph-\xff\xfe
    run_dir = only_run_dir(os.path.join(str(tmp_path), "threadgraph-" + prog[:-3]))
    assert os.path.isfile(os.path.join(run_dir, "capture.tg"))
    assert "alloc_in_odd_file" in functions_in(os.path.join(run_dir, "MainThread.mem"))
    assert runinfo(run_dir)["argv"][0] == prog  # \udcXX in the JSON: the same str


def test_non_utf8_output_dir(tmp_path):
    out = non_utf8_name(tmp_path, b"b\xff")
    write(tmp_path / "ok.py", NON_UTF8_PROG)
    res = tg_bytes(["run", "-o", out, "ok.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert b"Traceback" not in res.stderr
    run_dir = only_run_dir(os.path.join(str(tmp_path), out))
    assert os.path.isfile(os.path.join(run_dir, "capture.tg"))
    assert "alloc_in_odd_file" in functions_in(os.path.join(run_dir, "MainThread.mem"))
    assert str(runinfo(run_dir)["pid"]) == os.path.basename(run_dir)  # UTF-8 JSON


def test_missing_script_and_module(tmp_path):
    res = tg(["run", "nope.py"], tmp_path)
    assert res.returncode == 2
    assert "can't open file" in res.stderr and "nope.py" in res.stderr
    res = tg(["run", "-m", "no_such_module_tg"], tmp_path)
    assert res.returncode == 1
    assert "No module named no_such_module_tg" in res.stderr
    res = tg(["run"], tmp_path)
    assert res.returncode == 2
    assert "script" in res.stderr


# --- every option is accepted and changes what is recorded -------------------------

OPTS_PROG = """\
import os, sys, threading, time
def alloc():
    return [0] * 100000
def sleeper():
    time.sleep(0.01)
    return alloc()
keep = [sleeper() for _ in range(5)]
if sys.argv[1:] == ["fork"]:
    pid = os.fork()
    if pid == 0:
        keep.append(alloc())
        sys.exit(0)
    os.waitpid(pid, 0)
"""


def run_opts(tmp_path, *opts, prog_args=()):
    write(tmp_path / "prog.py", OPTS_PROG)
    out = tmp_path / ("out-%d" % len(os.listdir(str(tmp_path))))
    res = tg(["run", "-o", str(out)] + list(opts) + ["prog.py"] + list(prog_args), tmp_path)
    assert res.returncode == 0, res.stderr
    return out, res


def test_option_profile(tmp_path):
    out, _ = run_opts(tmp_path, "--profile", "python")
    run_dir = only_run_dir(out)
    funcs = functions_in(os.path.join(run_dir, "MainThread.mem"))
    assert "alloc" in funcs and "sleep" not in funcs
    assert runinfo(run_dir)["profile"] == "python"
    out, _ = run_opts(tmp_path, "--profile", "c")
    run_dir = only_run_dir(out)
    funcs = functions_in(os.path.join(run_dir, "MainThread.mem"))
    assert "sleep" in funcs and "alloc" not in funcs
    assert runinfo(run_dir)["profile"] == "c"
    out, _ = run_opts(tmp_path, "--profile", "both")
    funcs = functions_in(os.path.join(only_run_dir(out), "MainThread.mem"))
    assert "sleep" in funcs and "alloc" in funcs


def test_option_filter(tmp_path):
    out, _ = run_opts(tmp_path, "--filter", str(tmp_path), "--profile", "python")
    run_dir = only_run_dir(out)
    recs = mem_records(os.path.join(run_dir, "MainThread.mem"))
    assert recs
    for rec in recs:
        assert rec.split("#", 1)[1].startswith(str(tmp_path)), rec
    # C calls pass the filter by their caller's file: time.sleep from prog.py is
    # kept, nothing Python from outside the prefix (threading.py, <frozen ...>) is.
    out, _ = run_opts(tmp_path, "--filter", str(tmp_path))
    run_dir = only_run_dir(out)
    sites = [r.split("#", 1)[1] for r in mem_records(os.path.join(run_dir, "MainThread.mem"))]
    assert any(s.startswith("time:") and ":sleep=>" in s for s in sites), sites
    for site in sites:
        assert site.startswith(str(tmp_path)) or not site.startswith(("/", "<")), site
    out, _ = run_opts(tmp_path, "--filter", "/no/such/prefix")
    run_dir = only_run_dir(out)
    path = os.path.join(run_dir, "MainThread.mem")
    assert not text_of(path)


def test_option_stack(tmp_path):
    out, _ = run_opts(tmp_path, "--stack", "--profile", "python")
    run_dir = only_run_dir(out)
    stack = text_of(os.path.join(run_dir, "MainThread.stack"))
    assert re.search(r"^ +[0-9.]+#.*prog\.py:2:alloc$", stack, re.M), stack
    assert runinfo(run_dir)["stack"] is True


def test_option_memory(tmp_path):
    for mode in ("thread", "process", "rss"):
        out, _ = run_opts(tmp_path, "--memory", mode)
        assert runinfo(only_run_dir(out))["memory_mode"] == mode


def test_option_no_sleep_correction(tmp_path):
    out, _ = run_opts(tmp_path, "--memory", "process")
    assert runinfo(only_run_dir(out))["sleep_correction"] is True
    out, _ = run_opts(tmp_path, "--memory", "process", "--no-sleep-correction")
    assert runinfo(only_run_dir(out))["sleep_correction"] is False
    # where it would change nothing it is not applied, and not said to be:
    # a thread's own bytes (the default) and sampled mode (no calls)
    out, _ = run_opts(tmp_path)
    assert runinfo(only_run_dir(out))["sleep_correction"] is False
    out, _ = run_opts(tmp_path, "--memory", "process", "--sampled")
    assert runinfo(only_run_dir(out))["sleep_correction"] is False


def test_option_follow_fork(tmp_path):
    out, _ = run_opts(tmp_path, prog_args=["fork"])
    assert len([d for d in os.listdir(str(out))]) == 1
    out, res = run_opts(tmp_path, "--follow-fork", prog_args=["fork"])
    dirs = sorted(os.listdir(str(out)))
    assert len(dirs) == 2, dirs
    parent = re.search(r"writing to .*?([0-9]+(?:-[0-9]+)?)/$", res.stderr.splitlines()[0]).group(1)
    child = [d for d in dirs if d != parent][0]
    assert "alloc" in functions_in(os.path.join(str(out), child, "MainThread.mem"))


def test_option_process_memory_frequency(tmp_path):
    out, _ = run_opts(tmp_path, "--process-memory-frequency", "1")
    every = mem_records(os.path.join(only_run_dir(out), "process.mem"))
    out, _ = run_opts(tmp_path, "--process-memory-frequency", "50")
    sparse = mem_records(os.path.join(only_run_dir(out), "process.mem"))
    assert len(every) > len(sparse)
    assert re.match(r"^[0-9.]+#[0-9]+$", every[0])
    out, _ = run_opts(tmp_path, "--process-memory-frequency", "0")
    path = os.path.join(only_run_dir(out), "process.mem")
    assert not text_of(path)


def test_option_no_timestamps(tmp_path):
    out, res = run_opts(tmp_path, "--no-timestamps", "--profile", "python")
    run_dir = only_run_dir(out)
    recs = mem_records(os.path.join(run_dir, "MainThread.mem"))
    assert recs and all("#" not in r for r in recs)
    assert runinfo(run_dir)["timestamps"] is False
    assert "threadgraph --no_time memg" in res.stderr


@pytest.mark.parametrize("opts", [
    [], ["--no-timestamps"], ["--format", "text", "--stack"],
    ["--format", "text", "--stack", "--no-timestamps"], ["--aggregate"],
], ids=["binary", "binary-no-timestamps", "text", "text-no-timestamps", "aggregate"])
def test_every_suggested_command_runs(tmp_path, opts):
    """Each command of the summary's "next:" lines, run by a shell as printed
    from the run's working directory, succeeds (docs/run.md)."""
    out, res = run_opts(tmp_path, *opts)
    after = res.stderr.split("threadgraph: next", 1)[1].splitlines()[1:]
    cmds = [line.strip() for line in after if line.startswith("    threadgraph ")]
    assert len(cmds) >= 3, res.stderr
    if "--no-timestamps" in opts:
        assert not any(" decorate-stack " in c for c in cmds), cmds
    elif "--aggregate" not in opts:
        assert any(" decorate-stack " in c for c in cmds), cmds
    bindir = tmp_path / "bin"
    bindir.mkdir()
    with open(str(bindir / "threadgraph"), "w") as f:
        f.write("#!/bin/sh\nexec %s \"$@\"\n" % " ".join(shlex.quote(a) for a in threadgraph_cmd()))
    os.chmod(str(bindir / "threadgraph"), 0o755)
    env = dict(os.environ, PATH="%s:%s" % (bindir, os.environ.get("PATH", "")))
    env.pop("TG_CLI", None)
    for cmd in cmds:
        if " memg " in cmd and shutil.which("gnuplot") is None:
            continue
        r = subprocess.run(["bash", "-c", cmd], cwd=str(tmp_path), env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=TIMEOUT)
        assert r.returncode == 0, (cmd, r.stderr[-2000:])


def test_documented_options_are_in_help(tmp_path):
    """Every option docs/run.md documents is accepted by `threadgraph run`."""
    res = tg(["run", "--help"], tmp_path)
    assert res.returncode == 0
    with open(DOCS_RUN) as f:
        doc = f.read()
    section = doc.split("## Options", 1)[1]
    documented = set()
    for bullet in re.findall(r"^- (`-.*?) \u2014 ", section, re.M):
        documented.update(re.findall(r"`(-[-a-zA-Z]+)", bullet))
    assert {"--output", "--profile", "--filter", "--stack", "--memory"} <= documented
    for opt in documented:
        assert re.search(r"(^|[\s,])%s\b" % re.escape(opt), res.stdout), opt


def test_package_main_and_syntax_error(tmp_path):
    write(tmp_path / "app" / "__init__.py", "")
    write(tmp_path / "app" / "__main__.py", PROBE)
    direct = probe_direct(["-m", "app", "q"], tmp_path, tmp_path / "d.json")
    res = tg(["run", "-o", "out", "-m", "app", "q"], tmp_path,
             env={"TG_REPORT": str(tmp_path / "r.json")})
    assert res.returncode == 0, res.stderr
    with open(str(tmp_path / "r.json")) as f:
        assert json.load(f) == direct
    write(tmp_path / "bad.py", "def f(:\n")
    res = tg(["run", "-o", "out2", "bad.py"], tmp_path)
    assert res.returncode == 1
    assert "SyntaxError" in res.stderr
    assert not os.path.exists(str(tmp_path / "out2"))  # nothing ran, nothing written


def test_live_without_a_capture_is_a_usage_error(tmp_path):
    """--live follows capture.tg (or a sampled run's curves) as it is written: a
    full run that writes text only (--format text) would leave the view
    waiting for ever.  (--sampled --live: tests/python/test_live.py.)"""
    write(tmp_path / "app.py", "print('ran')\n")
    res = tg(["run", "--live", "--format", "text", "app.py"], tmp_path)
    assert res.returncode == 2, res.stderr
    assert "--live follows the binary capture" in res.stderr
    assert "ran" not in res.stdout


def test_compress_without_accounting_is_a_usage_error(tmp_path):
    write(tmp_path / "app.py", "print('ran')\n")
    res = tg(["run", "--compress", "--format", "text", "app.py"], tmp_path)
    assert res.returncode == 2
    assert "with --format text it needs --accounting" in res.stderr
    assert "ran" not in res.stdout


def test_backend_option_reaches_the_recorder(tmp_path):
    write(tmp_path / "app.py", "def f():\n    return [0] * 10\nf()\n")
    res = tg(["run", "--backend", "setprofile", "-o", "out", "app.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    runs = os.listdir(str(tmp_path / "out"))
    info = json.load(open(str(tmp_path / "out" / runs[0] / "runinfo.json")))
    assert info["backend"] == "setprofile"
    res = tg(["run", "--backend", "ptrace", "app.py"], tmp_path)
    assert res.returncode == 2 and "--backend" in res.stderr


HOSTILE_NAMES = r'''
import threading
THREAD = "w\u009b31m\u202eexe"
def big():
    return bytearray(700000)
# a function name as hostile as a thread's: C1 CSI and a right-to-left override
big.__code__ = big.__code__.replace(co_name="big\u009b2J\u202e")
keep = []
def worker():
    keep.append(big())
t = threading.Thread(target=worker, name=THREAD)
t.start()
t.join()
'''

# what must not reach a terminal raw: C0 but tab and newline, DEL, C1, bidi
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


@pytest.mark.skipif(not shutil.which("bash"), reason="the check runs the commands in bash")
@pytest.mark.parametrize("fmt", ["text", "binary"])
def test_summary_escapes_names_and_quotes_next_commands(tmp_path, fmt):
    """run's peak table prints thread and function names from the program: no
    raw C1 or bidi control reaches the terminal; the recorder's file names hold
    none either; the suggested next commands work as printed, in bash, with a
    space and a U+202E in the output path (quoted $'...')."""
    write(tmp_path / "prog.py", HOSTILE_NAMES)
    base = tmp_path / "out dir\u202e"
    res = tg(["run", "--stack", "--format", fmt, "-o", str(base), "prog.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert not UNSAFE.search(res.stderr), ascii(res.stderr)
    run_dir = only_run_dir(base)
    for name in os.listdir(run_dir):
        assert not UNSAFE.search(name), ascii(name)
    assert "big\\xc2\\x9b2J\\xe2\\x80\\xae (prog.py:" in res.stderr, res.stderr
    # the thread as its file name (text) or capture stream name, escaped by
    # the recorder
    assert "w%C2%9B31m%E2%80%AEexe  big" in res.stderr, res.stderr
    if fmt == "binary" and not cli_reads_run_dirs(run_dir, tmp_path):
        pytest.skip("the installed processor reads no binary capture")
    nexts = [l.strip() for l in res.stderr.splitlines() if l.startswith("    threadgraph ")]
    tgbin = " ".join(shlex.quote(a) for a in threadgraph_cmd())
    for cmd in ("peaks", "decorate-stack", "report"):
        line = next(l for l in nexts if l.split()[1] == cmd)
        assert "$'out dir\\xe2\\x80\\xae/" in line, line  # quoted, escaped
        r = subprocess.run(["bash", "-c", tgbin + line[len("threadgraph"):]], cwd=str(tmp_path),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=TIMEOUT)
        assert r.returncode == 0, (line, r.stderr)
        if cmd == "decorate-stack":
            assert "big" in r.stdout, r.stdout
