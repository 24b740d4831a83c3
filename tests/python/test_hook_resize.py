"""realloc and calloc in the mem and obj domains count exactly in every kind of
hook (alloc_hooks.c): plain mode's (the default), sampled mode's, and the
general hooks (allocation accounting on).  A thread's counters
(_recorder.thread_counters) must move by exactly what the blocks request: a
list grown by append (reallocs of its item array, through pymalloc and past
512 bytes to the raw allocator) and bytes(n) (calloc, small and large).
"""
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

def work(out):
    out.append([grow(n) for n in (0, 3, 100, 10000, 0)])
    out.append([zeroed(n) for n in (0, 100, 1000, 100000, 0)])

gc.disable()
p = ProcessProfile(default_log_path="out", %s)
p.enable()
res = []
work(res)
t = threading.Thread(target=work, args=(res,)); t.start(); t.join()
p.disable()
print(res)
"""


@pytest.mark.parametrize("kwargs", ['profile="python"', 'mode="sampled"',
                                    'profile="python", accounting=True'],
                         ids=["plain", "sampled", "general"])
def test_realloc_and_calloc_count_exactly(tmp_path, kwargs):
    proc = run_scenario(tmp_path, PROG % kwargs)
    res = eval(proc.stdout.strip().splitlines()[-1])
    assert len(res) == 4
    for row in res:
        # Everything but the blocks themselves is the same in every
        # measurement of a row: N = 0's figure.
        assert row == [row[0]] * len(row), res
