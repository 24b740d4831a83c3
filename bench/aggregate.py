"""--aggregate: what it costs against a full capture, and how its file grows.
(docs/api.md "Aggregate mode"; figures in bench/RESULTS.md.)

    python3 bench/aggregate.py [--rounds N] [--reps R]

A busy three-thread program (calls and small allocations) runs N and 2N rounds
per thread, in a fresh interpreter each time, recorded in full (capture.tg) and
aggregated (aggregate.tga), the configurations one after the other and the order
alternating from repetition to repetition. The cost is the program's CPU time
(user + system of the child) as a ratio to the full capture's at the same length,
median over the repetitions; the size is the run's output file at the end,
median. Prints a Markdown table.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

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

p = threadgraph.ProcessProfile(default_log_path=sys.argv[1], aggregate=sys.argv[2] == "agg")
p.enable()
ts = [threading.Thread(target=work, args=(int(sys.argv[3]),)) for k in range(3)]
for t in ts:
    t.start()
for t in ts:
    t.join()
p.disable()
"""


def run_once(script, mode, rounds):
    base = tempfile.mkdtemp(prefix="tg-agg-")
    try:
        before = os.times()
        subprocess.run([sys.executable, script, base, mode, str(rounds)], check=True)
        after = os.times()
        cpu = (after.children_user - before.children_user
               + after.children_system - before.children_system)
        size = 0
        for root, _dirs, files in os.walk(base):
            for f in files:
                if f in ("capture.tg", "aggregate.tga"):
                    size += os.path.getsize(os.path.join(root, f))
        return cpu, size
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tg-agg-script-")
    script = os.path.join(tmp, "busy.py")
    with open(script, "w") as f:
        f.write(PROGRAM)
    lengths = (args.rounds, 2 * args.rounds)
    res = {(m, n): ([], []) for m in ("full", "agg") for n in lengths}
    for rep in range(args.reps):
        order = [("full", n) for n in lengths] + [("agg", n) for n in lengths]
        if rep % 2:
            order.reverse()
        for m, n in order:
            cpu, size = run_once(script, m, n)
            res[(m, n)][0].append(cpu)
            res[(m, n)][1].append(size)
    shutil.rmtree(tmp, ignore_errors=True)
    print("| rounds per thread | full: CPU s | full: capture.tg | aggregate: CPU s "
          "| aggregate / full CPU | aggregate: aggregate.tga |")
    print("|---|---|---|---|---|---|")
    for n in lengths:
        fc, fs = res[("full", n)]
        ac, as_ = res[("agg", n)]
        ratio = statistics.median(a / f for a, f in zip(ac, fc))
        print("| %d | %.2f | %d | %.2f | %.2fx | %d |"
              % (n, statistics.median(fc), statistics.median(fs), statistics.median(ac),
                 ratio, statistics.median(as_)))


if __name__ == "__main__":
    main()
