"""A program that ends with os.exec*: the run ends before the image is replaced
(docs/api.md "Signals and `os._exit`", docs/run.md).

Each test runs `threadgraph run` (or a script enabling a ProcessProfile) on a
small program that execs, and checks that its run is complete on disk — the
last flush period's records, `end_time`, the summary and final snapshot — and
that the program behaves as without the profiler.
"""
import glob
import os
import subprocess
import sys

import pytest

import tgcapture
from tgtest import load_runinfo, run_dirs, run_scenario

TIMEOUT = 120  # seconds; only a hang gets near it
PLANTED = 2 << 20  # bytes plant() returns just before the exec: in the last flush period

EXECS_ECHO = """\
import os
def plant():
    return bytearray(%d)
keep = plant()
print("before exec", flush=True)
os.execv("/bin/echo", ["echo", "after exec"])
""" % PLANTED

EXECS_PYTHON = """\
import os, sys
def plant():
    return bytearray(%d)
keep = plant()
print("before exec", os.getpid(), flush=True)
os.execl(sys.executable, sys.executable, "-c",
         "import os, time\\ndef child_work():\\n    return bytearray(%d)\\n"
         "x = child_work()\\nprint('after exec', os.getpid())\\ntime.sleep(0.3)")
""" % (PLANTED, PLANTED)

# Each failing call, then what the program saw of its exception; the program
# goes on and allocates in after(), which the ended run must not record.
EXEC_FAILS = """\
import os
def plant():
    return bytearray(%d)
keep = plant()
calls = (lambda: os.execv("/nonexistent/prog", ["prog"]),
         lambda: os.execvpe("no-such-program-tg", ["x"], {"PATH": "/nonexistent1:/nonexistent2"}),
         lambda: os.execl("/etc/passwd", "passwd"))
for call in calls:
    try:
        call()
    except OSError as exc:
        print(type(exc).__name__, exc.args, exc.errno, exc.filename, exc.filename2,
              repr(exc.__context__), repr(exc.__cause__), exc.__suppress_context__)
def after():
    return bytearray(%d)
after()
print("went on", flush=True)
""" % (PLANTED, PLANTED)


def threadgraph_cmd():
    """How to call the installed console script from this interpreter."""
    script = os.path.join(os.path.dirname(sys.executable), "threadgraph")
    if os.path.exists(script):
        return [script]
    return [sys.executable, "-m", "threadgraph"]


def tg(args, cwd):
    env = dict(os.environ)
    env.pop("TG_CLI", None)  # the packaged processor
    return subprocess.run(threadgraph_cmd() + list(args), cwd=str(cwd), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=TIMEOUT)


def write(tmp_path, name, text):
    (tmp_path / name).write_text(text)


def planted_peak(run_dir, cwd, func="plant"):
    """Whether `peaks` sees FUNC's return of PLANTED bytes in RUN_DIR (its
    caller's return, as large, must come a 40th of the run's span later or
    more: peaks closer than that are one, the larger; docs/cli.md)."""
    res = tg(["peaks", "--peak", "100", run_dir], cwd)
    assert res.returncode == 0, res.stderr
    assert "no end chunk" not in res.stderr
    return func in res.stdout


def assert_ended(run_dir, mode, accounting=True):
    """RUN_DIR holds a complete run of MODE: its end written by disable()."""
    assert load_runinfo(run_dir)["end_time"] is not None
    if mode == "aggregate":
        with open(os.path.join(run_dir, "aggregate.tga")) as f:
            text = f.read()
        assert text.split("\n")[-2] == "end"
        assert "prog.py\tplant\n" in text  # its entry is folded in at the end
    if mode == "full":
        assert tgcapture.load(os.path.join(run_dir, "capture.tg")).end is not None
    if accounting and mode != "aggregate":  # the files a run writes at its end
        assert os.path.exists(os.path.join(run_dir, "summary.txt"))
        assert glob.glob(os.path.join(run_dir, "snapshot-*-final"))


@pytest.mark.parametrize("mode, options", [
    ("full", ["--accounting"]),
    ("aggregate", ["--aggregate"]),
    ("sampled", ["--sampled"]),
    ("full", ["--accounting", "--follow-fork", "--follow-exec"]),
])
def test_exec_ends_the_run_first(tmp_path, mode, options):
    write(tmp_path, "prog.py", EXECS_ECHO)
    res = tg(["run"] + options + ["-o", "out", "prog.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "before exec\nafter exec\n"  # the program ran as without us
    (run_dir,) = run_dirs(tmp_path / "out")  # /bin/echo is not followed
    assert_ended(run_dir, mode)
    assert "program execs /bin/echo; its files are complete in out/" in res.stderr
    summary = tg(["summary", run_dir], tmp_path)
    assert summary.returncode == 0, summary.stderr
    if mode == "full":  # sampled keeps no per-call records, aggregate folds them
        assert planted_peak(run_dir, tmp_path)


def test_exec_of_python_with_follow_exec_gets_a_run_of_its_own(tmp_path):
    """Same pid across the exec: the new image's run goes to <pid>-2, and the
    ended one keeps its files."""
    write(tmp_path, "prog.py", EXECS_PYTHON)
    res = tg(["run", "--accounting", "--follow-exec", "-o", "out", "prog.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    before, after = res.stdout.split("\n")[:2]
    pid = int(before.split()[-1])
    assert after == "after exec %d" % pid
    dirs = run_dirs(tmp_path / "out")
    assert [os.path.basename(d) for d in dirs] == [str(pid), "%d-2" % pid]
    for run_dir in dirs:
        assert_ended(run_dir, "full")
        assert load_runinfo(run_dir)["pid"] == pid
    assert load_runinfo(dirs[0])["argv"] == ["prog.py"]
    assert planted_peak(dirs[0], tmp_path, "plant")
    assert not planted_peak(dirs[0], tmp_path, "child_work")
    assert planted_peak(dirs[1], tmp_path, "child_work")


def test_failed_exec_raises_as_without_profiler_and_the_run_stays_ended(tmp_path):
    write(tmp_path, "prog.py", EXEC_FAILS)
    plain = subprocess.run([sys.executable, "prog.py"], cwd=str(tmp_path),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=TIMEOUT)
    res = tg(["run", "--accounting", "-o", "out", "prog.py"], tmp_path)
    assert plain.returncode == res.returncode == 0, res.stderr
    assert res.stdout == plain.stdout
    assert res.stdout.endswith("went on\n") and res.stdout.count("Error") == 3
    # Said once, by the first failing call (execvpe's PATH search included).
    assert res.stderr.count("profiling stopped") == 1, res.stderr
    assert "threadgraph: os.execv failed ([Errno 2]" in res.stderr
    (run_dir,) = run_dirs(tmp_path / "out")
    assert_ended(run_dir, "full")
    assert planted_peak(run_dir, tmp_path, "plant")
    assert not planted_peak(run_dir, tmp_path, "after")  # the run ended at the exec
    assert "program exited with status 0" in res.stderr  # the ended run's summary


def test_uncaught_failed_exec_is_reported_as_by_python(tmp_path):
    """threadgraph run's traceback leaves the wrapper's frame out, as its own."""
    write(tmp_path, "prog.py", "import os\ndef f():\n    os.execvp('no-such-program-tg', ['x'])\nf()\n")
    # the absolute path: run's frames name it so, as python does from 3.9 on
    plain = subprocess.run([sys.executable, str(tmp_path / "prog.py")], cwd=str(tmp_path),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=TIMEOUT)
    res = tg(["run", "-o", "out", "prog.py"], tmp_path)
    assert plain.returncode == res.returncode == 1
    traceback = [line for line in res.stderr.splitlines() if not line.startswith("threadgraph")
                 and not line.startswith("    threadgraph ")]
    assert traceback == plain.stderr.splitlines()
    assert "profiler.py" not in res.stderr


def test_forked_child_that_execs_ends_its_run(tmp_path):
    """enableForkedProfile(): the child's run ends at its exec, as at os._exit;
    the parent's wrappers are gone after disable()."""
    res = run_scenario(tmp_path, """
        import os
        from threadgraph import ProcessProfile
        real_execv = os.execv
        def child_work():
            return bytearray(%d)
        p = ProcessProfile(default_log_path="out")
        p.enableForkedProfile()
        p.enable()
        assert os.execv is not real_execv
        pid = os.fork()
        if pid == 0:
            keep = child_work()
            os.execv("/bin/true", ["true"])
        assert os.waitpid(pid, 0)[1] == 0
        p.disable()
        assert os.execv is real_execv
        print(pid)
    """ % PLANTED)
    child = int(res.stdout.split()[-1])
    dirs = run_dirs(tmp_path / "out")
    (child_dir,) = [d for d in dirs if load_runinfo(d)["pid"] == child]
    assert_ended(child_dir, "full", accounting=False)
    assert planted_peak(child_dir, tmp_path, "child_work")
