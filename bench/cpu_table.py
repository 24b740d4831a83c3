"""CPU-time ratios of bench configurations, side by side in one run.

    python3 bench/cpu_table.py [--configs noop,tg-binary,tg-tutorial,...]
                               [--workloads call_heavy,...] [--rounds 5] [--scale 0.3]
                               [--floor noop] [--ref memray] [--env NAME=VALUE ...]
                               [--json FILE]

Each measurement is a fresh `bench/runner.py CONFIG WORKLOAD` process; its figure
is the process's CPU time (all threads, user + system: `time.process_time()`
around start, workload, stop) from start to stop.  Every round runs, per
workload, each configuration and the unprofiled run (`none`) once, in an order
rotated every round; a configuration's ratio in a round is its CPU time over
that round's unprofiled run, and the table gives the median ratio over the
rounds, then each median divided by the floor's (`--floor`, the no-op hook).
The default workloads are bench/insns.py's five and `numpy_heavy` when the
interpreter can import NumPy.  With `tg-tutorial-native` among the
configurations a second table sets native=True beside its references, round by
round: over `tg-tutorial` (what native adds) and over `memray-native` (memray's
`native_traces=True`), with each configuration's median page faults (`minflt`,
start to stop), which dominate `numpy_heavy`'s CPU time and vary from run to
run with glibc's heap heuristics (`--env MALLOC_MMAP_THRESHOLD_=131072` fixes
them: bench/RESULTS.md).  For those workloads (whatever the configurations) a
table gives the same runs at equal page faults (CPU time fitted as a
per-configuration constant plus a shared cost per fault, read at the unprofiled
run's median fault count): every configuration over the unprofiled run, and
native=True over its references when it was measured.
A last table divides each configuration by the floor and by `--ref` (memray)
within each round, and gives the median of those quotients with their quartiles:
the spread a cell really has.
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
NATIVE_WORKLOADS = ["numpy_heavy"]  # when NumPy imports
CONFIGS = ["noop", "tg-binary", "tg-tutorial", "tg-tutorial-native", "memray",
           "memray-native", "memray-tpa"]
# The second table: native=True, what it is compared with (round by round).
NATIVE = "tg-tutorial-native"
NATIVE_REFS = ["tg-tutorial", "memray-native"]


def run_one(python, config, workload, scale, env):
    """(CPU time, minor page faults, voluntary context switches) of one run,
    or None."""
    p = subprocess.run([python, RUNNER, config, workload, "--scale", str(scale)],
                       capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.stderr.write("%s %s failed: %s\n" % (config, workload, p.stderr[-300:]))
        return None
    res = json.loads(p.stdout.strip().splitlines()[-1])
    return res["cpu"], res.get("minflt"), res.get("nvcsw")


def default_workloads(python, env):
    ok = subprocess.run([python, "-c", "import numpy"], env=env,
                        capture_output=True).returncode == 0
    if not ok:
        sys.stderr.write("numpy_heavy left out: NumPy does not import in %s\n" % python)
    return WORKLOADS + (NATIVE_WORKLOADS if ok else [])


def native_table(configs, workloads, rounds_of, faults):
    """Print native=True beside its references: medians of the per-round
    quotients, and each configuration's median page faults."""
    refs = [c for c in NATIVE_REFS if c in configs]
    shown = ["none"] + [c for c in [NATIVE] + refs if c in configs]
    head = ["%s / %s" % (NATIVE, r) for r in refs] + ["faults: %s" % c for c in shown]
    print("\n| workload | " + " | ".join(head) + " |")
    print("|---|" + "---:|" * len(head))
    quot = {r: [] for r in refs}
    for w in workloads:
        cells = []
        for r in refs:
            q = [rd[NATIVE] / rd[r] for rd in rounds_of.get(w, [])
                 if rd.get(NATIVE) and rd.get(r)]
            m = statistics.median(q) if q else None
            if m:
                quot[r].append(m)
            cells.append("%.3f" % m if m else "n/a")
        for c in shown:
            f = [x for x in faults.get((w, c), []) if x is not None]
            cells.append("%.0f K" % (statistics.median(f) / 1e3) if f else "n/a")
        print("| %s | %s |" % (w, " | ".join(cells)))
    cells = []
    for r in refs:
        g = geomean(quot[r])
        cells.append("%.3f" % g if g else "n/a")
    print("| geomean | %s |" % " | ".join(cells + [""] * len(shown)))
    print("\nCPU time of `%s` over each reference's in the same round, median over "
          "the rounds; page faults (`minflt`) from start to stop, medians." % NATIVE)


def fault_fit(runs):
    """Least squares CPU = a[c] + b * faults over the runs of one workload,
    one intercept per configuration and the slope B shared (pooled within the
    configurations).  RUNS: {config: [(cpu, faults), ...]}.  Returns (a, b,
    residual standard deviation), or None when the faults do not vary."""
    runs = {c: v for c, v in runs.items() if len(v) >= 3}
    mean = {c: (sum(t for t, _ in v) / len(v), sum(f for _, f in v) / len(v))
            for c, v in runs.items()}
    sxy = sum((f - mean[c][1]) * (t - mean[c][0]) for c, v in runs.items() for t, f in v)
    sxx = sum((f - mean[c][1]) ** 2 for c, v in runs.items() for _, f in v)
    if sxx == 0:
        return None
    b = sxy / sxx
    a = {c: mean[c][0] - b * mean[c][1] for c in runs}
    res = [t - a[c] - b * f for c, v in runs.items() for t, f in v]
    n = len(res) - len(a) - 1
    sd = math.sqrt(sum(x * x for x in res) / n) if n > 0 else float("nan")
    return a, b, sd


def fault_table(configs, workloads, runs_of):
    """Print every configuration at equal page faults, for the workloads whose
    CPU time the faults dominate (NATIVE_WORKLOADS): over the unprofiled run,
    and native=True over its references when it was measured."""
    shown = [c for c in configs if c != "none"]
    refs = [c for c in NATIVE_REFS if c in configs] if NATIVE in configs else []
    rows = []
    for w in workloads:
        runs = runs_of.get(w, {})
        if w not in NATIVE_WORKLOADS or "none" not in runs:
            continue
        every = sorted(f for v in runs.values() for _, f in v)
        if every[-1] - every[0] < 0.2 * statistics.median(every):
            continue  # the faults hardly vary (e.g. glibc's thresholds fixed): nothing to fit
        fit = fault_fit(runs)
        if fit is None or "none" not in fit[0]:
            continue  # too few runs
        a, b, sd = fit
        fref = statistics.median(f for _, f in runs["none"])
        at = {c: a[c] + b * fref for c in a}
        cells = ["%.2f us" % (b * 1e6), "%.3f s" % sd, "%.0f K" % (fref / 1e3)]
        cells += ["%.3f s" % at[c] if c in at else "n/a" for c in ["none"] + shown]
        cells += ["%.3f" % (at[c] / at["none"]) if c in at else "n/a" for c in shown]
        cells += ["%.3f" % (at[NATIVE] / at[r]) if r in at and NATIVE in at else "n/a"
                  for r in refs]
        rows.append("| %s | %s |" % (w, " | ".join(cells)))
    if not rows:
        return
    head = (["CPU per fault", "residual sd", "faults: none (median)"]
            + ["%s at those faults" % c for c in ["none"] + shown]
            + ["%s / none at equal faults" % c for c in shown]
            + ["%s / %s at equal faults" % (NATIVE, r) for r in refs])
    print("\n| workload | " + " | ".join(head) + " |")
    print("|---|" + "---:|" * len(head))
    print("\n".join(rows))
    print("\nThe same runs fitted as CPU time = a(configuration) + b x page faults "
          "(least squares, b shared), then each configuration's CPU time at the "
          "unprofiled run's median fault count: what the profiler costs apart from "
          "how many times glibc's trims of the heaps made the program fault its "
          "buffers in again (bench/RESULTS.md).")


def spread(xs):
    """(median, low, high) of XS: the quartiles from 4 values on, else min and max."""
    xs = sorted(xs)
    if len(xs) >= 4:
        q = statistics.quantiles(xs, n=4, method="inclusive")
        return q[1], q[0], q[2]
    return statistics.median(xs), xs[0], xs[-1]


def paired_table(configs, workloads, rounds_of, floor, ref):
    """Each configuration over FLOOR and over REF within the same round: the
    median of the per-round quotients with their quartiles (min and max under 4
    rounds), and the geometric mean of the medians.  The machine's drift between
    rounds cancels in a same-round quotient, which the quotient of two medians
    over the unprofiled run does not do."""
    cols = [(c, b) for b in (floor, ref) if b in configs
            for c in configs if c not in (b, floor)]
    if not cols:
        return
    print("\n| workload | " + " | ".join("%s / %s" % cb for cb in cols) + " |")
    print("|---|" + "---:|" * len(cols))
    meds = {cb: [] for cb in cols}
    for w in workloads:
        cells = []
        for c, b in cols:
            q = [rd[c] / rd[b] for rd in rounds_of.get(w, []) if c in rd and b in rd]
            if not q:
                cells.append("n/a")
                continue
            m, lo, hi = spread(q)
            meds[(c, b)].append(m)
            cells.append("%.2f [%.2f-%.2f]" % (m, lo, hi))
        print("| %s | %s |" % (w, " | ".join(cells)))
    print("| geomean | %s |" % " | ".join(
        "%.2f" % geomean(meds[cb]) if meds[cb] else "n/a" for cb in cols))
    print("\nSame-round quotients: median over the rounds [quartiles; min-max under 4 "
          "rounds].")


def switch_table(configs, workloads, switches):
    """Print the median voluntary context switches of each configuration, for
    the workloads with threads (a thread that waits for the GIL or a lock
    switches): a profiler that slows a threaded program can change how its
    threads take turns, and that costs CPU time of its own (bench/RESULTS.md
    "threads_locks: a lock convoy past the switch interval")."""
    shown = ["none"] + configs
    rows = []
    for w in workloads:
        med = {}
        for c in shown:
            xs = [x for x in switches.get((w, c), []) if x is not None]
            if xs:
                med[c] = statistics.median(xs)
        if med.get("none", 0) < 100:
            continue  # one thread: nothing to see
        rows.append("| %s | %s |" % (w, " | ".join(
            "%.0f" % med[c] if c in med else "n/a" for c in shown)))
    if not rows:
        return
    print("\n| workload | " + " | ".join("switches: %s" % c for c in shown) + " |")
    print("|---|" + "---:|" * len(shown))
    print("\n".join(rows))
    print("\nVoluntary context switches of the whole process from start to stop "
          "(`nvcsw`), medians of the rounds.")


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--workloads", default=None,
                    help="default: the five of insns.py, and numpy_heavy if NumPy imports")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scale", type=float, default=0.3)
    ap.add_argument("--floor", default="noop")
    ap.add_argument("--ref", default="memray",
                    help="the peer of the same-round table (with the floor)")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                    help="set in every measured process's environment (repeatable)")
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args()
    env = dict(os.environ)
    for kv in a.env:
        name, sep, value = kv.partition("=")
        if not sep or not name:
            ap.error("--env wants NAME=VALUE, got %r" % kv)
        env[name] = value
    configs = a.configs.split(",")
    workloads = (a.workloads.split(",") if a.workloads is not None
                 else default_workloads(a.python, env))
    ratios = {}  # (workload, config) -> [ratio per round]
    faults = {}  # (workload, config) -> [minflt per round], "none" included
    switches = {}  # (workload, config) -> [nvcsw per round], "none" included
    rounds_of = {}  # workload -> [{config: ratio} per round]
    runs_of = {}  # workload -> {config: [(CPU seconds, minflt) per round]}, "none" included
    for r in range(a.rounds):
        for w in workloads:
            order = ["none"] + configs
            k = r % len(order)
            order = order[k:] + order[:k]
            got = {c: run_one(a.python, c, w, a.scale, env) for c in order}
            for c, v in got.items():
                if v is not None:
                    faults.setdefault((w, c), []).append(v[1])
                    switches.setdefault((w, c), []).append(v[2])
                    if v[1] is not None:
                        runs_of.setdefault(w, {}).setdefault(c, []).append(v[:2])
            if not got["none"]:
                continue
            rd = {}
            for c in configs:
                if got[c] is not None:
                    rd[c] = got[c][0] / got["none"][0]
                    ratios.setdefault((w, c), []).append(rd[c])
            rounds_of.setdefault(w, []).append(rd)
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
    switch_table(configs, workloads, switches)
    paired_table(configs, workloads, rounds_of, a.floor, a.ref)
    if NATIVE in configs:
        native_table(configs, workloads, rounds_of, faults)
    fault_table(configs, workloads, runs_of)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"configs": configs, "workloads": workloads, "rounds": a.rounds,
                       "scale": a.scale, "env": a.env,
                       "ratios": {"%s/%s" % k: v for k, v in ratios.items()},
                       "minflt": {"%s/%s" % k: v for k, v in faults.items()},
                       "nvcsw": {"%s/%s" % k: v for k, v in switches.items()},
                       "runs": runs_of}, f, indent=1)


if __name__ == "__main__":
    main()
