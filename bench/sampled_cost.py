"""Cost of mode="sampled" against no profiler, side by side in one run
(docs/api.md "Sampled mode"; figures in bench/RESULTS.md).

    python3 bench/sampled_cost.py [--scale S] [--reps R] [--only W,...]

For every bench workload, R rounds each running `runner.py none W` and
`runner.py tg-sampled W` one after the other (the order alternating from round to
round), each in a fresh interpreter; the figure is the process CPU time (user +
system, all threads) of the workload (runner.py "run_cpu"), and, beside it, from
the profiler's start to its stop (runner.py "cpu": enable() and disable() with
its summary and snapshots included).  Prints a Markdown table: the median CPU
seconds of each and the median of the per-round ratios, with its smallest and
largest.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from workloads import pyperformance_subset as pps  # noqa: E402

WORKLOADS = (["call_heavy", "alloc_heavy", "generator_heavy", "threads_locks", "stdlib_mix"]
             + ["pp_" + n for n in pps.NAMES])
CONFIGS = ("none", "tg-sampled")


def once(config, workload, scale):
    res = subprocess.run([sys.executable, os.path.join(HERE, "runner.py"), config, workload,
                          "--scale", str(scale)], cwd=HERE, capture_output=True, text=True,
                         timeout=1800)
    if res.returncode != 0:
        raise RuntimeError("%s %s failed: %s" % (config, workload, res.stderr[-2000:]))
    return json.loads(res.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only")
    args = ap.parse_args()
    workloads = args.only.split(",") if args.only else WORKLOADS
    print("scale %.2f, %d rounds; process CPU seconds (user + system), median\n"
          % (args.scale, args.reps))
    print("| workload | none | sampled | ratio (median of rounds) | min - max "
          "| with enable/disable |")
    print("|---|---:|---:|---:|---:|---:|")
    for w in workloads:
        run = {c: [] for c in CONFIGS}
        whole = {c: [] for c in CONFIGS}
        for r in range(args.reps):
            for c in (CONFIGS if r % 2 == 0 else CONFIGS[::-1]):
                res = once(c, w, args.scale)
                run[c].append(res["run_cpu"])
                whole[c].append(res["cpu"])
        ratios = [s / n for n, s in zip(run["none"], run["tg-sampled"])]
        wratios = [s / n for n, s in zip(whole["none"], whole["tg-sampled"])]
        print("| %s | %.3f | %.3f | %.3fx | %.2f - %.2f | %.3fx |"
              % (w, statistics.median(run["none"]), statistics.median(run["tg-sampled"]),
                 statistics.median(ratios), min(ratios), max(ratios),
                 statistics.median(wratios)))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
