"""The notes that stitch pool and asyncio work to its submitter (docs/api.md
"Pool work") are threadgraph's own memory, never the program's: a program that
submits N tasks, or runs an asyncio task of N steps, and keeps nothing, holds
the same whatever N (docs/api.md: "The profiler's own memory ... is never
counted").  Before, every task kept a note tuple, its position tuple and its id
in the submitting thread (some 350 bytes a pool task, 165 an asyncio step) and
each pool run took a free-list tuple the program's next tuple paid for."""
import subprocess
import sys

import pytest

PROGRAM = r"""
import asyncio, concurrent.futures as cf, sys
from threadgraph import ProcessProfile

def task(i):
    return None

def pool(n):
    with cf.ThreadPoolExecutor(max_workers=1) as ex:
        for i in range(n):
            ex.submit(task, i).result()

async def steps(n):
    for i in range(n):
        await asyncio.sleep(0)

async def amain(n):
    await asyncio.create_task(steps(n))

def loop(n):
    asyncio.run(amain(n))

which, n = sys.argv[2], int(sys.argv[3])
p = ProcessProfile(default_log_path=sys.argv[1], format="text")
p.trackStack()   # run notes too (stitching needs the stacks)
p.enable()
globals()[which](20)   # warm: the imports, the pool's and the loop's own state
globals()[which](n)
p.disable()
print(p.output_dir)
"""


def held(tmp_path, which, n):
    d = tmp_path / ("%s-%d" % (which, n))
    d.mkdir()
    prog = d / "prog.py"
    prog.write_text(PROGRAM)
    res = subprocess.run([sys.executable, str(prog), str(d / "out"), which, str(n)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, timeout=120)
    assert res.returncode == 0, res.stderr
    out = res.stdout.strip().splitlines()[-1]
    # the second call of WHICH in the main thread: its delta is what the main
    # thread holds more after N tasks (the pool's worker frees the work items
    # the main thread made, so the sum over the threads is taken from the
    # calls of all threads that returned within it: the whole run's tasks)
    with open(out + "/MainThread.mem") as f:
        deltas = [int(l.rsplit("=>", 1)[1]) for l in f if (":%s=>" % which) in l]
    assert len(deltas) == 2, deltas
    total = deltas[1]
    import glob, os
    for mem in glob.glob(out + "/*.mem"):
        name = os.path.basename(mem)
        if name in ("MainThread.mem", "process.mem"):
            continue
        with open(mem) as f:  # the pool thread's own run: its _worker's delta
            total += sum(int(l.rsplit("=>", 1)[1]) for l in f if ":_bootstrap=>" in l)
    return total


@pytest.mark.parametrize("which", ["pool", "loop"])
def test_notes_are_not_the_programs_memory(tmp_path, which):
    small = held(tmp_path, which, 100)
    large = held(tmp_path, which, 5100)
    # 5000 more tasks or steps: not 5000 notes' worth (before: 1.7 MB, 0.8 MB)
    assert abs(large - small) < 20000, (small, large)
