"""CPU-time ratios of bench configurations, side by side in one run.

    python3 bench/cpu_table.py [--configs noop,tg-binary,tg-tutorial,...]
                               [--workloads call_heavy,...] [--rounds 5] [--scale 0.3]
                               [--floor noop] [--json FILE]

Each measurement is a fresh `bench/runner.py CONFIG WORKLOAD` process; its figure
is the process's CPU time (all threads, user + system: `time.process_time()`
around start, workload, stop) from start to stop.  Every round runs, per
workload, each configuration and the unprofiled run (`none`) once, in an order
rotated every round; a configuration's ratio in a round is its CPU time over
that round's unprofiled run, and the table gives the median ratio over the
rounds, then each median divided by the floor's (`--floor`, the no-op hook).
CPU time rather than wall time: on this shared 2-core machine the wall time of a
run includes waiting for a core, which CPU time leaves out (the profiler's own
threads count, the flusher's sampling included).  Prints a markdown table and
the geometric means.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, "runner.py")
WORKLOADS = ["call_heavy", "alloc_heavy", "generator_heavy", "threads_locks", "stdlib_mix"]
CONFIGS = ["noop", "tg-binary", "tg-tutorial", "tg-tutorial-native", "memray",
           "memray-native", "memray-tpa"]


def run_one(python, config, workload, scale):
    p = subprocess.run([python, RUNNER, config, workload, "--scale", str(scale)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write("%s %s failed: %s\n" % (config, workload, p.stderr[-300:]))
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])["cpu"]


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scale", type=float, default=0.3)
    ap.add_argument("--floor", default="noop")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args()
    configs = a.configs.split(",")
    workloads = a.workloads.split(",")
    ratios = {}  # (workload, config) -> [ratio per round]
    for r in range(a.rounds):
        for w in workloads:
            order = ["none"] + configs
            k = r % len(order)
            order = order[k:] + order[:k]
            cpu = {c: run_one(a.python, c, w, a.scale) for c in order}
            if not cpu["none"]:
                continue
            for c in configs:
                if cpu[c] is not None:
                    ratios.setdefault((w, c), []).append(cpu[c] / cpu["none"])
        sys.stderr.write("round %d done\n" % (r + 1))
    med = {k: statistics.median(v) for k, v in ratios.items()}
    print("| workload | " + " | ".join(configs) + " |")
    print("|---|" + "---:|" * len(configs))
    for w in workloads:
        floor = med.get((w, a.floor))
        cells = []
        for c in configs:
            m = med.get((w, c))
            if m is None:
                cells.append("n/a")
            elif floor and c != a.floor:
                cells.append("%.2fx (%.2fx)" % (m, m / floor))
            else:
                cells.append("%.2fx" % m)
        print("| %s | %s |" % (w, " | ".join(cells)))
    cells = []
    for c in configs:
        g = geomean([med.get((w, c)) for w in workloads])
        gf = geomean([med[(w, c)] / med[(w, a.floor)] for w in workloads
                      if (w, c) in med and (w, a.floor) in med])
        # without the floor's figures (its hook not built) the ratio alone
        cells.append("n/a" if g is None else "%.2fx (%.2fx)" % (g, gf)
                     if c != a.floor and gf is not None else "%.2fx" % g)
    print("| geomean | %s |" % " | ".join(cells))
    print("\nCPU time over the unprofiled run, medians of %d rounds (in parentheses: "
          "over the floor `%s`)." % (a.rounds, a.floor))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"configs": configs, "workloads": workloads, "rounds": a.rounds,
                       "scale": a.scale,
                       "ratios": {"%s/%s" % k: v for k, v in ratios.items()}}, f, indent=1)


if __name__ == "__main__":
    main()
