"""realloc and calloc in the mem and obj domains count exactly in every kind of
hook (alloc_hooks.c): plain mode's (the default), sampled mode's, and the
general hooks (allocation accounting on).  A thread's counters
(_recorder.thread_counters) must move by exactly what the blocks request: a
list grown by append (reallocs of its item array, through pymalloc and past
512 bytes to the raw allocator), bytes(n) (calloc, small and large) and
bytearray objects of 0 to 599 bytes kept in a list (malloc).  Each in both
copies of the GIL domains' malloc and free (alloc_hooks.c): the one for
processors with BMI2, where this one has it, and the baseline one
(THREADGRAPH_NO_BMI2).
"""
import platform

import pytest

from tgtest import run_scenario

PROG = """
import gc, itertools, sys, threading
import threadgraph._recorder as R
from threadgraph import ProcessProfile

def live():
    a, f = R.thread_counters()
    return a - f

def grow(n):
    # Live bytes of the thread around N appends, less what the list's item
    # array grew by.  The measuring itself (the first reading's int) costs
    # the same whatever N: the test compares N = 0 with the others.
    lst = [None]
    before = sys.getsizeof(lst)
    x0 = live()
    for _ in itertools.repeat(None, n):
        lst.append(None)
    x1 = live()
    return x1 - x0 - (sys.getsizeof(lst) - before)

def zeroed(n):
    x0 = live()
    b = bytes(n) if n else None
    x1 = live()
    return x1 - x0 - (sys.getsizeof(b) if n else 0)

def held(n):
    # Live bytes of the thread around N bytearrays of 0 to 599 bytes made
    # and kept in a list, less the objects' and the list's own sizes.
    # (The counters' pairs, not live()'s differences: on 3.13 the int that
    # difference makes is not always allocated the same way.)
    sizes = [k %% 600 for k in range(n)]
    c0 = R.thread_counters()
    lst = list(map(bytearray, sizes))
    c1 = R.thread_counters()
    return (c1[0] - c0[0]) - (c1[1] - c0[1]) - sys.getsizeof(lst) - sum(map(sys.getsizeof, lst))

def work(out):
    out.append([grow(n) for n in (0, 3, 100, 10000, 0)])
    out.append([zeroed(n) for n in (0, 100, 1000, 100000, 0)])
    # Once before the row: on 3.8 a new thread's first bytearrays allocate
    # 48 bytes more once (the interpreter's, not the hooks': every kind of
    # hook saw the same).
    held(10)
    out.append([held(n) for n in (0, 10, 3000, 0)])

gc.disable()
p = ProcessProfile(default_log_path="out", %s)
p.enable()
res = []
work(res)
t = threading.Thread(target=work, args=(res,)); t.start(); t.join()
p.disable()
print(R.gil_hooks())
print(res)
"""


def cpu_has_bmi2():
    """Whether /proc/cpuinfo lists bmi2 (None where there is none to read)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return "bmi2" in line.split(":", 1)[1].split()
    except OSError:
        return None
    return None


@pytest.mark.parametrize("copies", ["default", "baseline"])
@pytest.mark.parametrize("kwargs", ['profile="python"', 'mode="sampled"',
                                    'profile="python", accounting=True'],
                         ids=["plain", "sampled", "general"])
def test_blocks_count_exactly(tmp_path, kwargs, copies):
    env = {"THREADGRAPH_NO_BMI2": "1"} if copies == "baseline" else None
    proc = run_scenario(tmp_path, PROG % kwargs, env=env)
    hooks, res = proc.stdout.strip().splitlines()[-2:]
    if copies == "baseline":
        assert hooks == "baseline"
    elif platform.machine() == "x86_64" and cpu_has_bmi2() is not None:
        assert hooks == ("bmi2" if cpu_has_bmi2() else "baseline")
    res = eval(res)
    assert len(res) == 6
    for row in res:
        # Everything but the blocks themselves is the same in every
        # measurement of a row: N = 0's figure.
        assert row == [row[0]] * len(row), res
