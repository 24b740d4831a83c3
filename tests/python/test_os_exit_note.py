"""threadgraph run's last line for a program that ends with os._exit(): the
summary is skipped (the process ends at once), and, as after a terminating
signal or an exec, one line says where the complete files are; a forked child's
os._exit() (multiprocessing's workers) says nothing."""
import os
import subprocess
import sys

from tgtest import load_runinfo, run_dirs

PROG = """\
import os, sys, threading
def plant():
    return bytearray(300000)
keep = plant()
if sys.argv[1] == "thread":
    threading.Thread(target=os._exit, args=(6,)).start()
    threading.Event().wait()
if sys.argv[1] == "fork":
    pid = os.fork()
    if pid == 0:
        plant()
        os._exit(0)
    os.waitpid(pid, 0)
print("bye", flush=True)
os._exit(6)
"""


def threadgraph_cmd():
    script = os.path.join(os.path.dirname(sys.executable), "threadgraph")
    if os.path.exists(script):
        return [script]
    return [sys.executable, "-m", "threadgraph"]


def run(tmp_path, *args):
    env = dict(os.environ)
    env.pop("TG_CLI", None)
    return subprocess.run(threadgraph_cmd() + list(args), cwd=str(tmp_path), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120)


def test_os_exit_says_where_the_complete_files_are(tmp_path):
    (tmp_path / "prog.py").write_text(PROG)
    for how in ("main", "thread", "fork"):
        out = tmp_path / how
        res = run(tmp_path, "run", "--follow-fork", "-o", str(out), "prog.py", how)
        assert res.returncode == 6, res.stderr
        dirs = run_dirs(out)
        pids = {load_runinfo(d)["pid"] for d in dirs}
        parent = [d for d in dirs if load_runinfo(d)["ppid"] not in pids]
        assert len(parent) == 1 and len(dirs) == (2 if how == "fork" else 1), dirs
        assert all(load_runinfo(d)["end_time"] is not None for d in dirs)
        lines = [l for l in res.stderr.splitlines() if "os._exit" in l]
        assert len(lines) == 1, res.stderr  # the parent's only, not a forked child's
        assert lines[0].startswith("threadgraph: program ended with os._exit(6); "
                                   "its files are complete in "), res.stderr
        assert lines[0].endswith("/%s/" % os.path.basename(parent[0])), (lines, parent)
