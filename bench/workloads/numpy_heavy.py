"""NumPy-heavy: four threads building, combining and dropping arrays, so that most
of the memory is native (NumPy's data buffers come from malloc, not from Python's
allocators).  Needs NumPy (pip install numpy).

NumPy is imported inside the measured run (its extension modules are loaded
while the profiler is on, through native=True's dlopen hook).  OpenBLAS, which
NumPy loads, is held to one thread: the workload makes no BLAS call, and the
idle worker OpenBLAS otherwise starts spins for a while after the import, a few
million instructions and some CPU time that vary from run to run whatever the
profiler (under callgrind, numpy_heavy's count moved by 5 M between identical
runs)."""
import os
import threading

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

DESCRIPTION = "4 threads creating, combining and dropping NumPy arrays (native buffers)"


def _work(rounds, out, i):
    import numpy as np
    acc = 0.0
    for r in range(rounds):
        a = np.ones(200_000 + 1000 * (r % 7))          # ~1.6 MB buffer
        b = np.arange(a.size, dtype=np.float64)
        c = a * b + 1.0                                 # temporaries
        small = [np.zeros(64) for _ in range(50)]       # many small buffers
        acc += float(c[-1]) + len(small)
        del a, b, c, small
    out[i] = acc


def run(scale=1.0):
    import numpy  # noqa: F401  (fail early, in the calling thread, if absent)
    rounds = int(200 * scale) or 1
    out = [0.0] * 4
    ts = [threading.Thread(target=_work, args=(rounds, out, i)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(out)
