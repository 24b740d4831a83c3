"""runinfo.json's "ppid" names the process's parent as it was when the run
started, also for a process that outlives its parent (a multiprocessing
resource tracker or forkserver, re-parented to init when the program ends):
the base's "latest run" (docs/run.md) leaves out the runs whose ppid is
another run's pid, so a ppid of 1 made such a helper "the latest run"."""
import json
import os
import subprocess
import sys
import time

import pytest

import threadgraph
import tgtest

CLI = os.path.join(os.path.dirname(threadgraph.__file__), "_bin", "threadgraph")

SCRIPT = """
import os, sys, time
from threadgraph import ProcessProfile
p = ProcessProfile(default_log_path="out", profile="python")
p.enableForkedProfile()
p.enable()
parent = os.getpid()
r, w = os.pipe()
ready_r, ready_w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(w)
    os.write(ready_w, b"x")        # its run has started
    os.read(r, 1)                  # EOF: the parent has exited
    deadline = time.time() + 30
    while os.getppid() == parent and time.time() < deadline:
        time.sleep(0.01)           # until re-parented
    p.disable()
    os._exit(0)
os.close(r)
os.read(ready_r, 1)
print(parent, pid, flush=True)
p.disable()
os._exit(0)                        # without waiting for the child
"""


def _runinfo_when_ended(path, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with open(path) as f:
                info = json.load(f)
        except (OSError, ValueError):
            info = None
        if info is not None and info.get("end_time") is not None:
            return info
        time.sleep(0.05)
    pytest.fail("%s got no end_time in %d s" % (path, timeout))


def test_ppid_of_a_child_that_outlives_its_parent(tmp_path):
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    (tmp_path / "s.py").write_text(SCRIPT)
    env = tgtest.env_with_package()
    proc = subprocess.run([sys.executable, "s.py"], cwd=str(tmp_path), env=env,
                          stdout=subprocess.PIPE, universal_newlines=True, check=True,
                          timeout=120)
    parent, child = (int(x) for x in proc.stdout.split())
    info = _runinfo_when_ended(str(tmp_path / "out" / str(child) / "runinfo.json"))
    assert info["pid"] == child
    assert info["ppid"] == parent
    # and the base's latest run is the parent's, not the re-parented child's
    cli = subprocess.run([CLI, "peaks", "--peak", "0", str(tmp_path / "out")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True)
    assert "reading the latest, '%s'" % os.path.join(str(tmp_path / "out"), str(parent)) \
        in cli.stderr, cli.stderr
