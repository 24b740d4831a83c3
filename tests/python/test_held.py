"""Each thread's held memory over time (memg --held, src/lib/held.c).

Two threads keep bytearrays of known sizes at points ordered by events: each
keep() is a recorded call whose DELTA is exactly the array (its buffer of N + 1
bytes and its object of bytearray.__basicsize__), so each curve steps by exactly
that, and its level is what the thread holds (within the few hundred bytes of
the thread's own start-up).  The binary capture and its text dumps (format
"both", with stacks for the nesting) give the same curves and the same peak,
within the start-up that only the capture's LEVEL marks see.
"""
import os
import re
import subprocess

import pytest

import threadgraph
from tgtest import only_dir, run_scenario

CLI = os.path.join(os.path.dirname(threadgraph.__file__), "_bin", "threadgraph")
MIB = 1 << 20
OBJ = bytearray.__basicsize__ + 1   # one array's bytes beyond N
# a thread's own bookkeeping before its first keep, and the interpreter's
# caches it draws on: 3.8's frame free list, shared by all threads, gives a
# thread a new frame (about 424 B, then held) or an old one depending on what
# ran before in any thread (4,124 B seen after a change to enable() alone)
START_UP = 8192

PROGRAM = """
import threading
from threadgraph import ProcessProfile

MIB = 1 << 20
slots = {"A": [None] * 4, "B": [None] * 4}

def keep(name, i, n):
    slots[name][i] = bytearray(n)

def drop(name, i):
    slots[name][i] = None

a_kept, b_kept, a_dropped = (threading.Event() for _ in range(3))

def thread_a():
    keep("A", 0, 1 * MIB)
    keep("A", 1, 2 * MIB)
    a_kept.set()
    b_kept.wait()
    drop("A", 0)
    a_dropped.set()

def thread_b():
    a_kept.wait()
    keep("B", 0, 4 * MIB)
    keep("B", 1, MIB // 2)
    b_kept.set()
    a_dropped.wait()

p = ProcessProfile(default_log_path="out", format="both")
p.trackStack(True)
p.enable()
ts = [threading.Thread(target=thread_a, name="A"), threading.Thread(target=thread_b, name="B")]
for t in ts:
    t.start()
for t in ts:
    t.join()
p.disable()
"""


def held(tmp_path, name, operands):
    out = tmp_path / name
    r = subprocess.run([CLI, "memg", "--held", "--script-only", "-o", str(out)] + operands,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    assert r.returncode == 0, r.stderr
    plot = out / "memg-held-plot"
    script = (plot / "memg-held.gp").read_text()
    curves = {}
    for ix, title in re.findall(r"'held-(\d+)\.dat' using .* title '([^']*)'", script):
        rows = [l.split() for l in (plot / ("held-%s.dat" % ix)).read_text().splitlines()]
        curves[title] = [int(v) for _, v in rows]
    return curves, (out / "memg-held.txt").read_text()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("held")
    run_scenario(tmp, PROGRAM)
    return only_dir(str(tmp / "out"))


def check_curves(curves):
    a, b = curves["A"], curves["B"]
    steps_a = [y - x for x, y in zip(a, a[1:])]
    steps_b = [y - x for x, y in zip(b, b[1:])]
    # each keep and drop is one step of exactly the array's bytes, in order
    ka = [steps_a.index(MIB + OBJ), steps_a.index(2 * MIB + OBJ), steps_a.index(-(MIB + OBJ))]
    assert ka == sorted(ka)
    kb = [steps_b.index(4 * MIB + OBJ), steps_b.index(MIB // 2 + OBJ)]
    assert kb == sorted(kb)
    # the levels: what the thread holds
    # (after each thread's last keep or drop: its end, in threading's own code,
    # adds some more, 4.5 KB on 3.8)
    assert abs(a[ka[1] + 1] - (3 * MIB + 2 * OBJ)) <= START_UP
    assert abs(a[ka[2] + 1] - (2 * MIB + OBJ)) <= START_UP
    assert abs(b[kb[1] + 1] - (4 * MIB + MIB // 2 + 2 * OBJ)) <= START_UP
    assert abs(a[-1] - (2 * MIB + OBJ)) <= 4 * START_UP
    assert abs(b[-1] - (4 * MIB + MIB // 2 + 2 * OBJ)) <= 4 * START_UP


def check_shares(legend):
    lines = legend.splitlines()
    assert lines[0].startswith("largest peak of all threads' held memory: ")
    assert lines[1] == "thread\theld_bytes\tshare"
    shares = {l.split("\t")[0]: int(l.split("\t")[1]) for l in lines[2:]}
    # the peak is after B's second keep and before A's drop: both hold their all
    assert abs(shares["A"] - (3 * MIB + 2 * OBJ)) <= START_UP
    assert abs(shares["B"] - (4 * MIB + MIB // 2 + 2 * OBJ)) <= START_UP
    assert list(shares)[:2] == ["B", "A"]   # largest first


def test_held_capture(run, tmp_path):
    curves, legend = held(tmp_path, "cap", [os.path.join(run, "capture.tg")])
    check_curves(curves)
    check_shares(legend)


def shares_of(legend):
    lines = legend.splitlines()
    return {l.split("\t")[0]: int(l.split("\t")[1]) for l in lines[2:]}


def test_held_text_same_as_capture(run, tmp_path):
    names = sorted(n for n in os.listdir(run) if n.endswith(".mem"))
    curves, legend = held(tmp_path, "txt", [os.path.join(run, n) for n in names])
    check_curves(curves)
    check_shares(legend)
    cap = held(tmp_path, "cap", [os.path.join(run, "capture.tg")])[1]
    # The same peak, the same threads; A's and B's levels agree within a
    # thread's start-up: the capture's LEVEL marks (docs/formats.md) also count
    # what the threads' open calls allocated and freed themselves (threading's
    # own code around the keeps, and the main thread's starting them), which
    # the text dumps cannot say -- and which can move the moment of the
    # largest sum within the time both threads hold their all (check_shares).
    check_shares(cap)
    a, b = shares_of(legend), shares_of(cap)
    assert list(a) == list(b)
    assert all(abs(a[k] - b[k]) <= START_UP for k in ("A", "B")), (a, b)


def test_held_text_without_stack_says_why(run, tmp_path):
    for n in ("A.mem", "B.mem"):
        with open(os.path.join(run, n)) as f:
            (tmp_path / n).write_text(f.read())
    r = subprocess.run([CLI, "memg", "--held", "--script-only", "-o", str(tmp_path / "o"),
                        str(tmp_path / "A.mem"), str(tmp_path / "B.mem")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    assert r.returncode == 1
    assert "no .stack file beside it" in r.stdout + r.stderr
    assert "no thread with held memory to plot" in r.stderr
