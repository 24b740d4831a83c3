"""A capture read while its process still writes it: the commands say so.

A run being recorded (an attach going on, a long `threadgraph run`) has no end
chunk yet; its warning says the process is still running, not that it was
killed.  Once the process is killed, the same files get the "did not end
cleanly" warning.
"""
import os
import signal
import subprocess
import sys
import time

from tgtest import env_with_package, only_dir

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "cli"))
from clisupport import CLI  # noqa: E402

TIMEOUT = 120

BUSY = """
import sys, threading, time
import threadgraph

def work():
    keep = []
    i = 0
    while True:
        keep.append([i] * (i % 5))
        if len(keep) > 100:
            keep.clear()
        i += 1
        if i == 20000:
            sys.stdout.write("ready\\n")
            sys.stdout.flush()
        if i > 20000:
            time.sleep(0.01)

p = threadgraph.ProcessProfile(default_log_path="out"MAXSIZE)
p.enable()
t = threading.Thread(target=work, name="busy")
t.start()
t.join()
"""


def cli(*args):
    return subprocess.run([CLI] + [str(a) for a in args], capture_output=True, text=True,
                          errors="replace", timeout=TIMEOUT)


def check(tmp_path, maxsize):
    script = tmp_path / "busy.py"
    script.write_text(BUSY.replace("MAXSIZE", maxsize))
    proc = subprocess.Popen([sys.executable, str(script)], cwd=str(tmp_path),
                            env=env_with_package(keep_cli=True), stdout=subprocess.PIPE,
                            universal_newlines=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        # a flush or two after the records (once a second; longer on a loaded
        # host): read again until the records are there
        deadline = time.monotonic() + 60
        while True:
            time.sleep(1.5)
            run = only_dir(tmp_path / "out")
            r = cli("peaks", run)
            if r.returncode == 0 or time.monotonic() > deadline:
                break
        assert r.returncode == 0, r.stderr
        assert "no end chunk yet: process %d, which writes it, is still running" % proc.pid \
            in r.stderr, r.stderr
        assert "killed?" not in r.stderr, r.stderr
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=TIMEOUT)
        proc.stdout.close()
    r = cli("peaks", run)
    assert r.returncode == 0, r.stderr
    assert "did not end cleanly (the process was killed?)" in r.stderr, r.stderr
    assert "still running" not in r.stderr, r.stderr


def test_running_capture_is_not_called_killed(tmp_path):
    check(tmp_path, "")


def test_running_segments_are_not_called_killed(tmp_path):
    check(tmp_path, ", max_size=1 << 20")
