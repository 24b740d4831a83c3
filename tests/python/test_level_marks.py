"""LEVEL marks (docs/formats.md "Binary capture"): a thread's held memory
(memg --held, threads, live) stays right for a loop that never returns and
frees, in its own code, what its callees returned.  Without the marks such a
loop's held memory only grew: every callee's return added its block, and the
frees between them showed in no RETURN."""

import json
import os
import subprocess
import sys

import tgcapture
from tgtest import env_with_package, only_dir

import threadgraph

CLI = os.path.join(os.path.dirname(threadgraph.__file__), "_bin", "threadgraph")

PROGRAM = """
import sys, threading, threadgraph

def alloc(k):
    return bytearray(k)

def work(n):
    keep = []
    for j in range(n):
        keep.append(alloc(1024 * (1 + j %% 50)))   # at most 50 KiB
        if len(keep) > 20:
            keep = keep[-5:]                     # freed here, in work's own code

p = threadgraph.ProcessProfile(default_log_path="out", %s)
p.enable()
t = threading.Thread(target=work, args=(20000,), name="worker")
t.start()
t.join()
p.disable()
"""

# what the worker holds at most: 21 blocks of at most 50 KiB, and the list
HELD_MAX = 21 * 51 * 1024 + 4096
# what it allocates in all: about 20,000 blocks of 25 KiB (500 MB)
ALLOCATED = 20000 * 25 * 1024


def run(tmp_path, args=""):
    (tmp_path / "p.py").write_text(PROGRAM % args)
    subprocess.run([sys.executable, "p.py"], cwd=str(tmp_path), env=env_with_package(),
                   check=True, timeout=300)
    return only_dir(tmp_path / "out")


def worker_peak(run_dir):
    r = subprocess.run([CLI, "threads", "--json", run_dir], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True)
    assert r.returncode == 0, r.stderr
    (w,) = [t for t in json.loads(r.stdout)["threads"] if t["name"] == "worker"]
    return w["peak"]


def test_held_memory_of_a_loop_that_frees_in_its_own_code(tmp_path):
    run_dir = run(tmp_path)
    cap = tgcapture.load(os.path.join(run_dir, "capture.tg"))
    assert cap.version == 2
    (stream,) = [s for s in cap.order if cap.threads[s]["base"] in ("worker", b"worker")]
    marks = [ev for ev in cap._events(cap.streams[stream]) if ev[0] == "level"]
    assert len(marks) >= 20, len(marks)  # one in about 1000 events
    for _, level, starts in marks:
        # the thread's memory and its open calls' starts: never beyond what
        # it can hold (a loop's level is exact at each mark)
        assert -4096 <= level <= HELD_MAX, level
        assert all(-4096 <= s <= HELD_MAX for s in starts), starts
    peak = worker_peak(run_dir)
    # exact at the marks; between two of them at most the blocks of about
    # 170 iterations (1000 events) go unseen -- not the 500 MB allocated
    assert HELD_MAX // 2 <= peak <= 10 * 2 ** 20, peak
    r = subprocess.run([CLI, "memg", "--held", "-o", str(tmp_path / "g"), run_dir],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    assert r.returncode == 0, r.stderr
    with open(str(tmp_path / "g" / "memg-held.txt")) as f:
        first = f.readline()
    held = int(first.split("(")[1].split(" bytes")[0])
    assert held <= 10 * 2 ** 20 + 2 ** 20, first
    assert peak < ALLOCATED // 50


def test_no_marks_where_a_delta_is_not_the_thread_own_memory(tmp_path):
    # memory="process": deltas are the process's memory, not the thread's
    run_dir = run(tmp_path, 'memory="process"')
    cap = tgcapture.load(os.path.join(run_dir, "capture.tg"))
    assert not any(ev[0] == "level" for s in cap.order
                   for ev in cap._events(cap.streams.get(s, b"")))
