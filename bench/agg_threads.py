"""A thread per request under aggregate=True with accounting: what the recorder
keeps and writes as the number of threads grows (docs/api.md "Aggregate mode";
figures in bench/RESULTS.md).

    python3 bench/agg_threads.py [--threads 10000,40000] [--no-accounting]

Each run starts T short threads one after another (a handler: a few calls and
small lists, one of them kept alive past the thread, as a request's cached
result) in a fresh interpreter, and prints one Markdown row per T: the heap the
process holds in use after disable() less what it held before enable()
(glibc's mallinfo2, every arena: the recorder's memory left over, per thread),
the peak RSS (ru_maxrss), the time disable() takes (it writes the final and peak
snapshots and the summary, which name every thread), the whole run's CPU time,
the run's files, and the accounting's calling-context nodes in use before
disable() (recorders with _test_acct_nodes; set THREADGRAPH_ACCT_NO_RECYCLE to
see them without the recycling of docs/accounting.md "Thread churn").  The heap figure is the one that says whether the
recorder's memory grows with the threads; CPU and wall times depend on the
machine's load.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

PROGRAM = r"""
import ctypes, resource, sys, threading, time
import threadgraph

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                 "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2

def in_use():
    m = libc.mallinfo2()
    return m.uordblks + m.hblkhd

def leaf(i):
    return [i] * (i % 7)

cache = []

def handler(k):
    keep = []
    for i in range(20):
        keep.append(leaf(i))
    if k % 100 == 0:
        cache.append(keep)

threads = int(sys.argv[2])
p = threadgraph.ProcessProfile(default_log_path=sys.argv[1], aggregate=True,
                               accounting=sys.argv[3] == "acct")
before = in_use()
p.enable()
for k in range(threads):
    t = threading.Thread(target=handler, args=(k,))
    t.start()
    t.join()
# the accounting's calling-context nodes in use (recorders that tell)
from threadgraph import _recorder
nodes = _recorder._test_acct_nodes()[0] if hasattr(_recorder, "_test_acct_nodes") else -1
t0 = time.perf_counter()
p.disable()
t1 = time.perf_counter()
print(in_use() - before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, t1 - t0, nodes)
"""


def run(script, threads, acct):
    """(heap bytes kept, peak RSS KiB, disable() s, CPU s, files bytes, nodes)."""
    base = tempfile.mkdtemp(prefix="tg-aggt-")
    try:
        proc = subprocess.Popen([sys.executable, script, base, str(threads),
                                 "acct" if acct else "-"], stdout=subprocess.PIPE, text=True)
        out = proc.stdout.read()
        _pid, status, ru = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit("run failed: %s" % out)
        heap, rss, dis, nodes = out.split()
        size = sum(os.path.getsize(os.path.join(root, f))
                   for root, _dirs, files in os.walk(base) for f in files)
        return int(heap), int(rss), float(dis), ru.ru_utime + ru.ru_stime, size, int(nodes)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="10000,40000")
    ap.add_argument("--no-accounting", action="store_true")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tg-aggt-script-")
    script = os.path.join(tmp, "prog.py")
    with open(script, "w") as f:
        f.write(PROGRAM)
    print("| threads | heap kept | per thread | peak RSS KiB | disable() s | CPU s | files "
          "| nodes in use |")
    print("|---|---|---|---|---|---|---|---|")
    for n in (int(x) for x in args.threads.split(",")):
        heap, rss, dis, cpu, size, nodes = run(script, n, not args.no_accounting)
        print("| %d | %d | %.0f | %d | %.2f | %.2f | %d | %s |"
              % (n, heap, heap / n, rss, dis, cpu, size, nodes if nodes >= 0 else "-"))
        sys.stdout.flush()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
