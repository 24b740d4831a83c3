"""A thread's deltas beside tracemalloc (docs/api.md, "tracemalloc works beside
the recorder"): exact whether tracemalloc starts before enable(), after it, or
not at all, and after its stop(); its own records (a 16-byte trace a traced
block on 3.9+) go below the recorder's hooks in every order, and its snapshot
still sees the program's blocks."""
import subprocess
import sys

import pytest

PROGRAM = r"""
import sys, tracemalloc
from threadgraph import ProcessProfile
KEEP = [None] * 10
def keep():
    for i in range(10):
        KEEP[i] = bytearray(1000)
def many():
    global MANY
    MANY = [bytearray(100) for _ in range(20000)]
order = sys.argv[2]
if order == "before":
    tracemalloc.start()
p = ProcessProfile(default_log_path=sys.argv[1], profile="python", format="text")
p.enable()
if order == "after":
    tracemalloc.start(5)
keep()   # warm: tracebacks made once
keep()   # replaces 10 blocks by 10: net 0 whatever tracemalloc keeps
for i in range(10):
    KEEP[i] = None
keep()
many()
if order != "none":
    snap = tracemalloc.take_snapshot()
    traced = sum(s.size for s in snap.statistics("filename"))
    print("traced", traced, file=sys.stderr)
    tracemalloc.stop()
for i in range(10):
    KEEP[i] = None
keep()   # after tracemalloc's stop: still counted
p.disable()
print(p.output_dir)
"""


def deltas(tmp_path, order):
    tmp_path.mkdir(exist_ok=True)
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    res = subprocess.run([sys.executable, str(prog), str(tmp_path / "out"), order],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, timeout=120)
    assert res.returncode == 0, res.stderr
    out = res.stdout.strip().splitlines()[-1]
    with open(out + "/MainThread.mem") as f:
        got = [(l.rsplit(":", 1)[1].split("=>")[0], int(l.rsplit("=>", 1)[1]))
               for l in f if ":keep=>" in l or ":many=>" in l]
    traced = [int(l.split()[1]) for l in res.stderr.splitlines() if l.startswith("traced ")]
    return got, traced


@pytest.mark.parametrize("order", ["none", "before", "after"])
def test_deltas_exact_beside_tracemalloc(tmp_path, order):
    one = sys.getsizeof(bytearray(1000))
    got, traced = deltas(tmp_path, order)
    base, _ = deltas(tmp_path / "base", "none") if order != "none" else (got, None)
    assert [n for n, _ in got] == ["keep", "keep", "keep", "many", "keep"], got
    assert [d for _, d in got][1:3] == [0, 10 * one], got
    assert got[4][1] == 10 * one, got
    # many(): the list and its 20,000 blocks, exactly as without tracemalloc
    assert got[3] == base[3], (got, base)
    assert got[3][1] >= 20000 * sys.getsizeof(bytearray(100))
    if order != "none":
        # tracemalloc's own view is complete: it traced many()'s blocks
        (t,) = traced
        assert t >= 20000 * sys.getsizeof(bytearray(100)), traced
