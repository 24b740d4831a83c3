"""The Python allocators' page map (src/recorder/ptrpage.c) in a real process:
the blocks a program keeps are found there (not in the hash), the map covers
the whole user address space, its memory comes with the arenas pymalloc maps
and goes back with the arenas it gives back (src/recorder/arena_hook.c), and
every free stays exact while pages come and go.

Where the map cannot be reserved (ulimit -v, vm.overcommit_memory=2) every
block goes to the hash instead: a child run under ulimit -v checks that the
counts are exact then too.
"""
import os
import resource

import pytest

from tgtest import run_scenario


def _reservation_refused_here():
    """Whether this machine makes the recorder refuse the reservation."""
    try:
        with open("/proc/sys/vm/overcommit_memory") as f:
            if f.read().strip() == "2":
                return True
    except OSError:
        pass
    return resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY

# Both programs' start: the calling thread's live bytes, and the profile
# (its options in %s) enabled with the collector off.
START = """
import gc
import threadgraph._recorder as R
from threadgraph import ProcessProfile

def live():
    a, f = R.thread_counters()
    return a - f

gc.disable()
p = ProcessProfile(default_log_path="out", %s)
p.enable()
"""

PROG = """
import resource, sys

LIMIT_AS = %r
if LIMIT_AS:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_AS, hard))
""" + START + """
x0 = live()
keep = [bytearray(40) for _ in range(200000)]   # ~16 MB of small blocks
mid = R.gil_table()
grown = live() - x0
del keep
after_free = live() - x0
gone = R.gil_table()
# The same amount again, in arenas pymalloc maps anew: found and exact.
keep2 = [bytearray(40) for _ in range(200000)]
again = R.gil_table()
grown2 = live() - x0 - after_free
del keep2
after_free2 = live() - x0
p.disable()
print(repr((mid, gone, again, grown, after_free, grown2, after_free2)))
"""


def _kernel_populates():
    """Whether this kernel has madvise(MADV_POPULATE_WRITE) (Linux 5.14)."""
    try:
        major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (5, 14)


def _run(tmp_path, kwargs, limit_as=0):
    proc = run_scenario(tmp_path, PROG % (limit_as, kwargs))
    return eval(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("kwargs", ['profile="python"', 'mode="sampled"'],
                         ids=["plain", "sampled"])
def test_kept_blocks_are_found_in_the_page_map(tmp_path, kwargs):
    mid, gone, again, grown, after_free, grown2, after_free2 = _run(tmp_path, kwargs)
    if _reservation_refused_here():
        pytest.skip("this machine makes the page map refuse its reservation "
                    "(vm.overcommit_memory=2 or a limit of address space)")
    assert not mid["map_refused"]
    assert mid["map_bits"] == 47             # all of user space
    assert mid["paged"] >= 200000             # each bytearray's buffer at least
    assert mid["hashed"] < mid["paged"] // 100
    assert mid["bytes"] >= mid["paged"] * 40 // 8 // 2   # a shadow in memory
    # The arenas pymalloc mapped for them had their shadow populated at once
    # (16 MB: at least 16 arenas of 1 MiB, 64 of 256 KiB before 3.10), an
    # eighth of an arena's bytes and at most a page more at each edge.
    if _kernel_populates():
        assert mid["map_prefaults"] >= 16
        assert mid["map_prefaulted"] >= mid["map_prefaults"] * (256 << 10) // 8
        assert again["map_prefaults"] >= mid["map_prefaults"] + 16
    else:
        assert mid["map_prefaults"] == 0
    # every free counted exactly: what is left is the measuring's own
    assert grown > 200000 * 40
    assert abs(after_free) < 4096
    assert gone["paged"] < mid["paged"] // 100
    # The arenas the blocks lived in were given back by pymalloc, and with
    # them the map's pages that shadowed them: most of the map's memory.
    assert gone["map_forgets"] >= 10
    assert gone["map_forgot"] >= mid["bytes"] // 2
    assert gone["bytes"] < mid["bytes"] // 4
    # the heap used again: every block found, every free exact
    assert again["paged"] >= 200000
    assert abs(grown2 - grown) < 4096
    assert abs(after_free2) < 8192   # two rounds of the measuring's own
    assert again["bytes"] >= mid["bytes"] // 2


@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                    reason="AddressSanitizer's own shadow needs more address "
                           "space than a 4 GiB limit leaves (tests/asan_python.sh)")
def test_without_address_space_every_block_goes_to_the_hash(tmp_path):
    # Room for the interpreter and the test, not for a 16 TiB reservation.
    mid, gone, again, grown, after_free, grown2, after_free2 = _run(
        tmp_path, 'mode="sampled"', limit_as=4 << 30)
    assert mid["map_bits"] == 0 and mid["map_refused"] == 1
    assert mid["paged"] == 0
    assert mid["hashed"] >= 200000
    assert grown > 200000 * 40
    assert abs(after_free) < 4096
    assert abs(after_free2) < 8192   # two rounds of the measuring's own
    assert mid["map_forgets"] == gone["map_forgets"] == 0   # no map to give back
    assert mid["map_prefaults"] == again["map_prefaults"] == 0   # nor to populate


ZERO_PROG = """
import ctypes, sys

api = ctypes.pythonapi
api.PyMem_Malloc.restype = ctypes.c_void_p
api.PyMem_Malloc.argtypes = [ctypes.c_size_t]
api.PyMem_Free.restype = None
api.PyMem_Free.argtypes = [ctypes.c_void_p]
malloc, free = api.PyMem_Malloc, api.PyMem_Free
""" + START + """
n = 2000
slots = [0] * (2 * n)
t0, x0 = R.gil_table(), live()
for i in range(n):
    slots[2 * i] = malloc(0)
    slots[2 * i + 1] = malloc(24)
t1, x1 = R.gil_table(), live()
for q in slots:
    free(q)
t2, x2 = R.gil_table(), live()
p.disable()
ints = sum(sys.getsizeof(q) for q in slots)  # the addresses kept in SLOTS
print(repr((t0, t1, t2, x1 - x0 - ints, x2 - x0 - ints)))
"""


@pytest.mark.parametrize("kwargs", ['profile="python"', 'mode="sampled"'],
                         ids=["plain", "sampled"])
def test_zero_byte_blocks_go_to_the_hash_and_sizes_stay_exact(tmp_path, kwargs):
    # A page map entry 0 means "none", so a 0-byte block is kept in the hash
    # (and marked in the map); its neighbours of 24 bytes stay in the map.
    proc = run_scenario(tmp_path, ZERO_PROG % kwargs)
    t0, t1, t2, grown, after = eval(proc.stdout.strip().splitlines()[-1])
    n = 2000
    assert t1["hashed"] - t0["hashed"] >= n
    assert t2["hashed"] - t0["hashed"] < n // 10
    if not _reservation_refused_here():
        assert t1["paged"] - t0["paged"] >= n - 10
    # the 24-byte blocks exactly, give or take the loop's own few objects
    assert abs(grown - 24 * n) < 4096
    assert abs(after) < 4096
