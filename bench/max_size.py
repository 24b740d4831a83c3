"""--max-size: does the limit hold, and what does rotating cost?
(docs/formats.md "Segments"; figures in bench/RESULTS.md.)

    python3 bench/max_size.py [--rounds N] [--reps R] [--limits 1M,10M]

A busy three-thread program (calls and small allocations, three threads) runs
N rounds per thread, in a fresh interpreter each time, with no limit and with each
limit, the configurations one after the other and the order alternating from
repetition to repetition. While it runs, a watcher in this process adds up the
sizes of the run's capture files every 2 ms; the figure is the largest total it
saw (and the files' total at the end). The cost is the program's CPU time (user +
system of the child) as a ratio to the run without a limit, median over the
repetitions. Prints a Markdown table.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))

PROGRAM = """
import sys, threading
import threadgraph

def leaf(i):
    return [i] * (i % 7)

def mid(i):
    return leaf(i)

def work(n):
    keep = []
    for i in range(n):
        keep.append(mid(i))
        if len(keep) > 100:
            keep.clear()

limit = sys.argv[2]
p = threadgraph.ProcessProfile(default_log_path=sys.argv[1],
                               max_size=None if limit == "none" else limit)
p.enable()
ts = [threading.Thread(target=work, args=(int(sys.argv[3]),)) for k in range(3)]
for t in ts:
    t.start()
for t in ts:
    t.join()
p.disable()
"""


def capture_bytes(base):
    total = 0
    for root, _dirs, files in os.walk(base):
        for f in files:
            if f.startswith("capture"):
                try:
                    total += os.path.getsize(os.path.join(root, f))
                except OSError:
                    pass  # deleted by the recorder meanwhile
    return total


def once(script, limit, rounds):
    base = tempfile.mkdtemp(prefix="tg-maxsize-")
    seen = [0]
    done = threading.Event()

    def watch():
        while not done.is_set():
            seen[0] = max(seen[0], capture_bytes(base))
            time.sleep(0.002)

    w = threading.Thread(target=watch)
    w.start()
    t0 = os.times()
    subprocess.run([sys.executable, script, base, limit, str(rounds)], check=True)
    t1 = os.times()
    done.set()
    w.join()
    final = capture_bytes(base)
    shutil.rmtree(base)
    cpu = (t1.children_user - t0.children_user) + (t1.children_system - t0.children_system)
    return cpu, max(seen[0], final), final


def parse(limit):
    from threadgraph._options import parse_size
    return parse_size(limit)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=300000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--limits", default="1M,10M")
    opts = ap.parse_args()
    limits = ["none"] + opts.limits.split(",")
    fd, script = tempfile.mkstemp(suffix=".py")
    with os.fdopen(fd, "w") as f:
        f.write(PROGRAM)
    res = {lim: [] for lim in limits}
    try:
        for rep in range(opts.reps):
            order = limits if rep % 2 == 0 else limits[::-1]
            for lim in order:
                res[lim].append(once(script, lim, opts.rounds))
    finally:
        os.unlink(script)
    base_cpu = [r[0] for r in res["none"]]
    print("| limit | segment | largest total seen | at the end | CPU s (median) | CPU ratio to no limit (median, min-max) |")
    print("|---|---|---|---|---|---|")
    for lim in limits:
        cpus = [r[0] for r in res[lim]]
        ratios = [c / b for c, b in zip(cpus, base_cpu)]
        size = parse(lim) if lim != "none" else None
        seg = "-" if size is None else "%.0f KiB" % (max(size // 8, 64 << 10) / 1024)
        print("| %s | %s | %.2f MiB | %.2f MiB | %.2f | %.3f (%.3f-%.3f) |" % (
            lim, seg, max(r[1] for r in res[lim]) / 2**20,
            statistics.median(r[2] for r in res[lim]) / 2**20, statistics.median(cpus),
            statistics.median(ratios), min(ratios), max(ratios)))


if __name__ == "__main__":
    main()
