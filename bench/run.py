#!/usr/bin/env python3
"""Run the benchmark harness and regenerate bench/RESULTS.md, results.json, overhead.svg.

    python3 bench/run.py [--quick] [--pairs N] [--only WORKLOAD,...] [--configs C,...]
                         [--no-cli] [--cli-only] [--cli-mb MB] [--no-hotpath]
                         [--threadgraph-path DIR] [--render-only]

Overhead: for every workload, every configuration is measured in pairs with the
unprofiled run (a fresh bench/runner.py process each), the two runs of a pair in
alternating order, the configurations in an order rotated every round.  A pair gives
the ratio profiled/unprofiled of wall time and of peak RSS; the tables show the
median over the pairs.  Only ratios are reported: the machine is shared and noisy.

CLI throughput: bench/cli_bench.py on a generated dump (bench/gen_dump.py).
Hot path: bench/hotpath.py (perf record of the recorder on the call-heavy workload).
See bench/README.md.
"""
import argparse
import datetime
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import runner  # noqa: E402  (configuration table)
from workloads import pyperformance_subset as pps  # noqa: E402

RESULTS_JSON = os.path.join(HERE, "results.json")
RESULTS_MD = os.path.join(HERE, "RESULTS.md")
CHART = os.path.join(HERE, "overhead.svg")
BUILD = os.path.join(HERE, "build")

CUSTOM_WORKLOADS = ["call_heavy", "alloc_heavy", "generator_heavy", "threads_locks", "stdlib_mix"]
# Workloads whose memory is mostly native (need NumPy; run when it is importable).
NATIVE_WORKLOADS = ["numpy_heavy"]
# Native-memory comparison (docs/api.md "Native memory"): threadgraph native=True vs
# memray native_traces=True vs threadgraph native=False.
NATIVE_CONFIGS = ["tg-native", "memray-native", "memray-tpa-native", "tg-thread",
                  "tg-native-nostack", "tg-thread-nostack"]
# (numerator, denominator) columns of that section.
NATIVE_RATIOS = [("tg-native", "memray-native"), ("tg-native", "memray-tpa-native"),
                 ("tg-native", "tg-thread"), ("tg-native-nostack", "tg-thread-nostack")]
PP_WORKLOADS = ["pp_" + n for n in pps.NAMES]
QUICK_PP = ["pp_richards", "pp_json_loads", "pp_regex_v8"]
QUICK_SCALE = 0.25

FULL = "tg-thread"          # threadgraph's full recording: memory, stacks, all threads
CHART_CONFIGS = ["noop", "tg-thread", "tg-binary", "tg-thread-nostack", "tracemalloc-1",
                 "tracemalloc-25", "memray", "memray-tpa", "cprofile"]
HEADLINE = ["noop", "tg-thread", "tg-binary", "tracemalloc-1", "memray", "memray-tpa",
            "cprofile"]

TARGET_FLOOR = 1.25
TARGET_RSS = 1.3
TARGET_CLI_MBS = 300.0


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


# ---------------------------------------------------------------- running

def child_env(tg_path):
    env = dict(os.environ)
    if tg_path:
        env["PYTHONPATH"] = tg_path + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("PYTHONTRACEMALLOC", None)
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    return env


def run_child(args, env, timeout):
    cmd = [sys.executable, os.path.join(HERE, "runner.py")] + args
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timeout after %ds" % timeout
    if p.returncode != 0:
        err = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
        try:  # --check explains itself on stdout
            err = json.loads(p.stdout.strip().splitlines()[-1])["error"]
        except (ValueError, IndexError, KeyError, TypeError):
            pass
        return None, err
    try:
        return json.loads(p.stdout.strip().splitlines()[-1]), None
    except (ValueError, IndexError):
        return None, "bad output: %r" % p.stdout[-200:]


def check_configs(configs, env):
    avail, why = [], {}
    for c in configs:
        res, err = run_child(["--check", c], env, 120)
        if err is None and res and res.get("ok"):
            avail.append(c)
        else:
            why[c] = (res or {}).get("error") or err
            log("config %s unavailable: %s" % (c, why[c]))
    return avail, why


def measure_overhead(workloads, configs, pairs, scale, env, timeout, results, save):
    others = [c for c in configs if c != "none"]
    total = len(workloads) * len(others) * pairs
    done = 0
    t_start = time.time()
    for w in workloads:
        wres = results["overhead"].setdefault(w, {})
        for r in range(pairs):
            k = r % len(others)
            order = others[k:] + others[:k]
            for i, c in enumerate(order):
                seq = ["none", c] if (r + i) % 2 == 0 else [c, "none"]
                got = {}
                for name in seq:
                    res, err = run_child([name, w, "--scale", str(scale)], env, timeout)
                    got[name] = res if err is None else {"error": err}
                entry = wres.setdefault(c, {"pairs": [], "errors": []})
                if "error" in got[c] or "error" in got["none"]:
                    entry["errors"].append(got[c].get("error") or got["none"].get("error"))
                    log("%s/%s failed: %s" % (w, c, entry["errors"][-1]))
                else:
                    entry["pairs"].append({"base": got["none"], "prof": got[c], "order": seq[0]})
                done += 1
            el = time.time() - t_start
            log("%s round %d/%d done; %d/%d pairs, ETA %.0f s"
                % (w, r + 1, pairs, done, total, el / done * (total - done)))
        save()


# ---------------------------------------------------------------- statistics

def summarize(results):
    """Per workload and config: median ratios (time, RSS), spread, output size."""
    summ = {}
    for w, per in results["overhead"].items():
        sw = summ.setdefault(w, {})
        base_walls = []
        scale = None
        for c, e in per.items():
            ps = e["pairs"]
            if not ps:
                sw[c] = {"n": 0, "errors": e["errors"][:3]}
                continue
            tr = [p["prof"]["wall"] / p["base"]["wall"] for p in ps]
            rr = [p["prof"]["maxrss_kb"] / p["base"]["maxrss_kb"] for p in ps]
            base_walls += [p["base"]["wall"] for p in ps]
            scale = ps[0]["base"].get("scale")
            sw[c] = {
                "n": len(ps),
                "time_ratio": statistics.median(tr),
                "time_ratio_min": min(tr),
                "time_ratio_max": max(tr),
                "rss_ratio": statistics.median(rr),
                "out_mb": statistics.median(p["prof"]["out_bytes"] for p in ps) / 1e6,
                "bytes_per_event": (statistics.median(p["prof"]["out_bytes"] / p["prof"]["events"]
                                                      for p in ps)
                                    if all(p["prof"].get("events") for p in ps) else None),
                "prof_wall": statistics.median(p["prof"]["wall"] for p in ps),
                "errors": e["errors"][:3],
            }
        if base_walls:
            med = statistics.median(base_walls)
            sw["none"] = {"n": len(base_walls), "time_ratio": 1.0, "rss_ratio": 1.0,
                          "base_wall": med, "scale": scale,
                          "noise": (max(base_walls) - min(base_walls)) / med}
        floor = sw.get("noop", {}).get("time_ratio")
        for c, s in sw.items():
            if floor and "time_ratio" in s:
                s["vs_floor"] = s["time_ratio"] / floor
    return summ


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    if not xs:
        return None
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


# ---------------------------------------------------------------- rendering

def fmt(x, nd=2, suffix="x"):
    if x is None:
        return "n/a"
    return ("%." + str(nd) + "f%s") % (x, suffix)


def table(rows_workloads, cols, summ, key, nd=2, suffix="x", geo_rows=()):
    out = ["| workload | " + " | ".join(cols) + " |",
           "|---|" + "---:|" * len(cols)]
    for w in rows_workloads:
        if w not in summ:
            continue
        cells = []
        for c in cols:
            s = summ[w].get(c)
            cells.append(fmt(s.get(key), nd, suffix) if s and s.get("n") else
                         ("n/a" if not s else "failed"))
        out.append("| %s | %s |" % (w, " | ".join(cells)))
    for label, ws in geo_rows:
        cells = []
        for c in cols:
            g = geomean([summ[w][c].get(key) for w in ws if w in summ and c in summ[w]
                         and summ[w][c].get(key)])
            cells.append(fmt(g, nd, suffix))
        out.append("| **%s** | %s |" % (label, " | ".join(cells)))
    return "\n".join(out)


def targets(summ, results):
    """[(target, met: True/False/None, text)]"""
    t = []
    ws = [w for w in summ if FULL in summ[w] and summ[w][FULL].get("n")]
    pp = [w for w in ws if w.startswith("pp_")]
    if not ws:
        return [("threadgraph targets", None, "threadgraph was not measured (%s)"
                 % results.get("unavailable", {}).get(FULL, "not run"))]
    # 1. floor
    vals = [(summ[w][FULL].get("vs_floor"), w) for w in ws if summ[w][FULL].get("vs_floor")]
    if vals:
        worst = max(vals)
        bad = ["%s %.2fx" % (w, v) for v, w in sorted(vals, reverse=True) if v > TARGET_FLOOR]
        t.append(("ratio <= %.2fx the no-op floor on every workload" % TARGET_FLOOR,
                  worst[0] <= TARGET_FLOOR,
                  "worst %s: %.2fx; over target: %s" % (worst[1], worst[0], ", ".join(bad) or "none")))
    # 2. below tracemalloc-1
    cmp_ = [(w, summ[w][FULL]["time_ratio"], summ[w]["tracemalloc-1"]["time_ratio"])
            for w in ws if summ[w].get("tracemalloc-1", {}).get("n")]
    if cmp_:
        bad = ["%s %.2fx vs %.2fx" % x for x in cmp_ if x[1] >= x[2]]
        t.append(("below tracemalloc(1 frame) on every workload", not bad,
                  "%d/%d workloads below; not below: %s"
                  % (len(cmp_) - len(bad), len(cmp_), ", ".join(bad) or "none")))
    # 3. geomean vs memray-tpa on pyperformance
    if pp:
        both = [w for w in pp if summ[w].get("memray-tpa", {}).get("n")]
        g_tg = geomean([summ[w][FULL]["time_ratio"] for w in both])
        g_mr = geomean([summ[w]["memray-tpa"]["time_ratio"] for w in both])
        if g_tg and g_mr:
            t.append(("pyperformance geomean <= memray --trace-python-allocators", g_tg <= g_mr,
                      "threadgraph %.2fx vs memray-tpa %.2fx (%d benchmarks)" % (g_tg, g_mr, len(both))))
    # 4. RSS
    rss = [(summ[w][FULL]["rss_ratio"], w) for w in ws]
    worst = max(rss)
    bad = ["%s %.2fx" % (w, v) for v, w in sorted(rss, reverse=True) if v > TARGET_RSS]
    t.append(("peak RSS ratio <= %.1f on every workload" % TARGET_RSS, worst[0] <= TARGET_RSS,
              "worst %s: %.2fx; over target: %s" % (worst[1], worst[0], ", ".join(bad) or "none")))
    return t


def cli_targets(cli):
    if not cli or not cli.get("commands"):
        return []
    out = []
    for name, r in cli["commands"].items():
        if name in ("wc -l", "python original loop") or r.get("mbs") is None:
            continue
        # Judged on CPU time: on the shared machine wall time includes waiting for a core.
        cpu = r.get("cpu_mbs") or r["mbs"]
        out.append(("CLI %s >= %d MB/s" % (name, TARGET_CLI_MBS), cpu >= TARGET_CLI_MBS,
                    "%.0f MB/s on CPU time (%.0f MB/s wall)" % (cpu, r["mbs"])))
    return out


def native_section(workloads, summ):
    """Lines of the "Native memory" section, or none if tg-native was not measured."""
    rows = [w for w in workloads if summ[w].get("tg-native", {}).get("n")]
    if not rows:
        return []
    cols = [c for c in NATIVE_CONFIGS if any(summ[w].get(c, {}).get("n") for w in rows)]
    ratios = [(a, b) for a, b in NATIVE_RATIOS if a in cols and b in cols]
    L = ["## Native memory: threadgraph native=True vs memray native_traces=True\n",
         "Wall-time ratios vs no profiler (median of pairs), then quotients of two of "
         "them. `tg-native` is `tg-thread` (full recording: every call's memory delta and "
         "stack) with `native=True`; `memray-native` is `memray.Tracker(native_traces=True)`, "
         "`memray-tpa-native` the same with `trace_python_allocators=True` (like threadgraph, "
         "every Python and native allocation). `tg-native / tg-thread` is the cost of "
         "counting native memory.\n",
         "| workload | " + " | ".join(cols) + " | "
         + " | ".join("%s / %s" % r for r in ratios) + " |",
         "|---|" + "---:|" * (len(cols) + len(ratios))]

    def ratio(w, c):
        return summ[w].get(c, {}).get("time_ratio")
    for w in rows:
        cells = [fmt(ratio(w, c)) for c in cols]
        for a, b in ratios:
            x, y = ratio(w, a), ratio(w, b)
            cells.append(fmt(x / y if x and y else None))
        L.append("| %s | %s |" % (w, " | ".join(cells)))
    if len(rows) > 1:
        cells = [fmt(geomean([ratio(w, c) for w in rows])) for c in cols]
        for a, b in ratios:
            cells.append(fmt(geomean([ratio(w, a) / ratio(w, b) for w in rows
                                      if ratio(w, a) and ratio(w, b)])))
        L.append("| geomean | %s |" % " | ".join(cells))
    L.append("")
    return L


def render(results):
    excluded = results.get("excluded", {})
    summ = summarize(results)
    for w in summ:
        for c in excluded:
            summ[w].pop(c, None)
    results["summary"] = summ
    configs = [c for c in runner.CONFIGS if c != "none"
               and any(c in summ[w] for w in summ)]
    workloads = [w for w in CUSTOM_WORKLOADS + NATIVE_WORKLOADS + PP_WORKLOADS if w in summ]
    custom = [w for w in workloads if not w.startswith("pp_")]
    pp = [w for w in workloads if w.startswith("pp_")]
    geo = []
    if custom:
        geo.append(("geomean (own workloads)", custom))
    if pp:
        geo.append(("geomean (pyperformance)", pp))
    if custom and pp:
        geo.append(("geomean (all)", workloads))
    m = results["meta"]
    L = []
    L.append("# Benchmark results\n")
    runs = m.get("runs") or ["%s: bench/run.py%s" % (m["date"], m.get("argv_str", ""))]
    L.append("Generated by these runs (`--keep` merges a run into the previous results; "
             "`python3 bench/run.py` alone regenerates everything); bench/README.md explains "
             "the method:\n")
    for r in runs:
        L.append("- " + r)
    L.append("")
    L.append("## Machine and versions\n")
    for k in ("machine", "cpus", "load_before", "load_after", "python", "threadgraph",
              "memray", "pyperformance", "pyperf", "gnuplot", "pairs", "scale"):
        if k in m:
            L.append("- %s: %s" % (k, m[k]))
    L.append("")
    L.append("**Noise.** The machine has %s cores shared with other engineers compiling and "
             "testing during the run. Every number below is a ratio of two runs made next to "
             "each other, and the median of %s such pairs; the `noise` column gives the spread "
             "(max-min)/median of the unprofiled wall times of a workload over the run. Ratios "
             "whose spread is large should be read as approximate; results.json keeps every "
             "pair.\n" % (m.get("cpus"), m.get("pairs")))
    if results.get("noise_note"):
        L.append(results["noise_note"] + "\n")
    if excluded:
        L.append("Configurations left out of the tables: " + "; ".join(
            "`%s` (%s)" % (c, e) for c, e in excluded.items()) + "\n")
    if results.get("unavailable"):
        L.append("Configurations not measured: " + "; ".join(
            "`%s` (%s)" % (c, e) for c, e in results["unavailable"].items()) + "\n")

    L.append("## Targets\n")
    L.append("threadgraph full recording = `%s` (memory and stacks, all threads, text files, "
             "profile \"both\"); threadgraph measured: %s.\n"
             % (FULL, (m.get("threadgraph") or "?").split(" ")[0]))
    L.append("| target | met | measured |")
    L.append("|---|---|---|")
    for name, ok, text in targets(summ, results) + cli_targets(results.get("cli")):
        L.append("| %s | %s | %s |" % (name, {True: "met", False: "**not met**", None: "n/a"}[ok], text))
    L.append("")

    if results.get("spot_check", {}).get("markdown"):
        L.append(results["spot_check"]["markdown"])
    if summ:
        L.append("## Headline: wall-time ratio vs no profiler\n")
        L.append(table(workloads, HEADLINE, summ, "time_ratio", geo_rows=geo))
        L.append("")
        L.append("![overhead](overhead.svg)\n")
        L.append("## All configurations: wall-time ratio vs no profiler (median of pairs)\n")
        L.append("`scale` is the workload size factor of that workload's runs; `none s` the median "
                 "unprofiled wall time in seconds (for scale only); `noise` the spread of the "
                 "unprofiled times.\n")
        cols = ["none"] + configs
        t = table(workloads, configs, summ, "time_ratio", geo_rows=geo).splitlines()
        t[0] = t[0].replace("| workload |", "| workload | scale | none s | noise |")
        t[1] = "|---|---:|---:|---:|" + t[1][len("|---|"):]
        for i in range(2, len(t)):
            w = t[i].split("|")[1].strip()
            if w in summ and "none" in summ[w]:
                extra = "%s | %.2f | %.0f%% |" % (summ[w]["none"].get("scale"), summ[w]["none"]["base_wall"],
                                                  100 * summ[w]["none"]["noise"])
            else:
                extra = " | | |"
            parts = t[i].split("|", 2)
            t[i] = "|" + parts[1] + "| " + extra + parts[2]
        L += t
        L.append("")
        L.append("## Ratio vs the no-op floor (config ratio / noop ratio)\n")
        L.append(table(workloads, [c for c in configs if c != "noop"], summ, "vs_floor", geo_rows=geo))
        L.append("")
        L.append("## Peak RSS ratio vs no profiler (ru_maxrss, median of pairs)\n")
        L.append(table(workloads, configs, summ, "rss_ratio", geo_rows=geo))
        L.append("")
        L.append("## Output written (MB, median per run)\n")
        outcols = [c for c in configs if c.startswith("tg-") or c.startswith("memray")]
        if outcols:
            L.append(table(workloads, outcols, summ, "out_mb", nd=2, suffix=""))
            L.append("")
        bpe = [c for c in configs if any(summ[w].get(c, {}).get("bytes_per_event")
                                         for w in workloads)]
        if bpe:
            L.append("## Bytes per recorded event (output bytes / (calls + returns), "
                     "median per run)\n")
            L.append(table(workloads, bpe, summ, "bytes_per_event", nd=1, suffix=""))
            L.append("")
        L.append("## Spread of the time ratio (min-max over pairs)\n")
        rows = ["| workload | " + " | ".join(HEADLINE) + " |", "|---|" + "---:|" * len(HEADLINE)]
        for w in workloads:
            cells = []
            for c in HEADLINE:
                s = summ[w].get(c)
                cells.append("%.2f-%.2f" % (s["time_ratio_min"], s["time_ratio_max"])
                             if s and s.get("n") else "n/a")
            rows.append("| %s | %s |" % (w, " | ".join(cells)))
        L += rows
        L.append("")
        L += native_section(workloads, summ)
        errs = [(w, c, s["errors"]) for w in summ for c, s in summ[w].items() if s.get("errors")]
        if errs:
            L.append("## Failed runs\n")
            for w, c, e in errs:
                L.append("- %s / %s: %s" % (w, c, "; ".join(e)))
            L.append("")

    cli = results.get("cli")
    L.append("## CLI throughput\n")
    if cli and cli.get("commands"):
        L.append("Dump: %s (%.0f MB .mem, %.0f MB .stack, %d .mem lines, %d peaks above "
                 "200 KB), generated by bench/gen_dump.py%s. Page cache warm (files read once "
                 "before timing). Median of %d runs (the Python loop: 1 run on a big file). "
                 "MB/s = bytes of the files given / time; wall time on a loaded machine "
                 "includes waiting for a core, CPU time (user + sys) does not.\n"
                 % (cli["dump"], cli["mem_bytes"] / 1e6, cli["stack_bytes"] / 1e6,
                    cli["mem_lines"], cli["peaks"], cli.get("note", ""), cli["repeats"]))
        L.append("| command | input MB | wall s | MB/s (wall) | CPU s | MB/s (CPU) | vs wc -l (CPU) | vs Python loop (CPU) |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        wc = cli["commands"].get("wc -l", {}).get("cpu_mbs")
        py = cli["commands"].get("python original loop", {}).get("cpu_mbs")
        for name, r in cli["commands"].items():
            if r.get("mbs") is None:
                L.append("| `%s` | | | failed: %s | | | | |" % (name, r.get("error")))
                continue
            c = r.get("cpu_mbs")
            L.append("| `%s` | %.0f | %.2f | %.0f | %.2f | %s | %s | %s |" % (
                name, r["bytes"] / 1e6, r["seconds"], r["mbs"], r.get("cpu_seconds") or 0,
                "%.0f" % c if c else "n/a",
                "%.2f" % (c / wc) if wc and c else "", "%.1fx" % (c / py) if py and c else ""))
        L.append("")
        for name, r in cli["commands"].items():
            if r.get("cmd"):
                L.append("- `%s`: `%s`" % (name, r["cmd"]))
        if cli.get("capture_bytes"):
            L.append("\nRows marked (capture) read the binary capture of the same dump "
                     "(CAPDIR/capture.tg, %.0f MB, encoded by tests/cli/capture_encode.py); "
                     "their input MB is the equivalent text, the files the text row reads."
                     % (cli["capture_bytes"] / 1e6))
        L.append("")
    else:
        L.append("Not measured in this run%s.\n" % (": " + cli["error"] if cli and cli.get("error") else ""))

    notes = os.path.join(HERE, "CLI-THROUGHPUT.md")
    if os.path.exists(notes):
        with open(notes) as f:
            results["cli_notes"] = f.read()
    if results.get("cli_notes"):
        L.append("### The CLI engineer's measurements (folded in from bench/CLI-THROUGHPUT.md)\n")
        for line in results["cli_notes"].splitlines():
            L.append(re.sub(r"^(#+) ", r"\1### ", line) if line.startswith("#") else line)
        L.append("")

    hp = results.get("hotpath")
    L.append("## Hot path of the recorder\n")
    if hp and hp.get("markdown"):
        L.append(hp["markdown"])
    else:
        L.append("Not measured in this run%s.\n" % (": " + hp["error"] if hp and hp.get("error") else ""))
    cg = results.get("callgrind")
    if cg and cg.get("markdown"):
        L.append(cg["markdown"])
    if results.get("hotpath_notes"):
        L.append(results["hotpath_notes"])

    notes = os.path.join(HERE, "SAMPLING.md")   # sampled accounting, measured apart
    if os.path.exists(notes):
        with open(notes) as f:
            L.append(f.read())

    L.append("## Configurations\n")
    for c, (_, _, desc) in runner.CONFIGS.items():
        if c not in excluded:
            L.append("- `%s`: %s" % (c, desc))
    L.append("")
    with open(RESULTS_MD, "w") as f:
        f.write("\n".join(L) + "\n")
    chart(summ, workloads)


def chart(summ, workloads):
    if not shutil.which("gnuplot") or not workloads:
        return
    cols = [c for c in CHART_CONFIGS if any(summ[w].get(c, {}).get("n") for w in workloads)]
    os.makedirs(BUILD, exist_ok=True)
    dat = os.path.join(BUILD, "overhead.dat")
    with open(dat, "w") as f:
        f.write("# workload " + " ".join(cols) + "\n")
        for w in workloads:
            vals = []
            for c in cols:
                s = summ[w].get(c)
                vals.append("%.4f" % s["time_ratio"] if s and s.get("n") else "NaN")
            f.write("%s %s\n" % (w.replace("_", "-"), " ".join(vals)))
    plot = ", ".join("'%s' using %d:xtic(1) title '%s'" % (dat, i + 2, c) if i == 0 else
                     "'' using %d title '%s'" % (i + 2, c) for i, c in enumerate(cols))
    script = """set terminal svg size 1600,700 dynamic font 'sans,11'
set output '%s'
set title 'Wall-time ratio profiled / unprofiled (median of pairs; log scale; lower is better)'
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set logscale y 2
set yrange [0.5:*]
set grid ytics
set ylabel 'ratio vs no profiler'
set xtics rotate by 30 right scale 0 noenhanced
set bmargin 7
set xrange [-0.6:%g]
set key outside right top noenhanced
set datafile missing 'NaN'
plot %s
""" % (CHART, len(workloads) - 0.4, plot)
    p = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    if p.returncode != 0:
        log("gnuplot failed: " + p.stderr.strip())


# ---------------------------------------------------------------- meta

def tool_version(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
    except Exception:
        return None


def py_version(mod, env):
    code = ("import importlib.metadata as m, sys\n"
            "try: print(m.version(sys.argv[1]))\n"
            "except Exception as e: print('not installed')")
    return subprocess.run([sys.executable, "-c", code, mod], env=env, capture_output=True,
                          text=True).stdout.strip()


def meta(args, env):
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    # From bench/, as the runner imports it: not from the current directory, which may be
    # a source tree without the built extension.
    tg = subprocess.run([sys.executable, "-c", "import threadgraph,os;print(os.path.dirname(threadgraph.__file__))"],
                        env=env, capture_output=True, text=True, cwd=HERE).stdout.strip()
    git = subprocess.run(["git", "-C", tg or ROOT, "log", "-1", "--format=%h %s"],
                         capture_output=True, text=True).stdout.strip()
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": "%s, %s, %s" % (platform.machine(), cpu, platform.platform()),
        "cpus": os.cpu_count(),
        "load_before": "%.2f %.2f %.2f" % os.getloadavg(),
        "python": "%s (%s)" % (platform.python_version(), sys.executable),
        "threadgraph": ("%s at %s" % (git, tg)) if tg else "not importable",
        "memray": py_version("memray", env),
        "pyperformance": py_version("pyperformance", env),
        "pyperf": py_version("pyperf", env),
        "gnuplot": tool_version(["gnuplot", "--version"]),
        "pairs": args.pairs,
        "scale": args.scale,
    }


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="few-minute sanity run: smaller "
                    "workloads, 3 pairs, 3 pyperformance benchmarks, 50 MB dump")
    ap.add_argument("--pairs", type=int, help="pairs per configuration and workload (default 5, quick 3)")
    ap.add_argument("--only", help="comma-separated workloads (e.g. call_heavy,pp_richards)")
    ap.add_argument("--configs", help="comma-separated configurations (default: all)")
    ap.add_argument("--scale", type=float, help="workload size factor (default 1, quick %.2f)" % QUICK_SCALE)
    ap.add_argument("--timeout", type=int, default=900, help="seconds per measurement")
    ap.add_argument("--no-cli", action="store_true", help="skip the CLI throughput part")
    ap.add_argument("--cli-only", action="store_true", help="only the CLI throughput part")
    ap.add_argument("--cli-mb", type=int, help="size of the generated .mem in MB (default 1000, quick 50)")
    ap.add_argument("--cli", help="the threadgraph CLI executable (default: build/threadgraph, "
                    "then threadgraph/_bin/threadgraph)")
    ap.add_argument("--no-hotpath", action="store_true", help="skip the perf profile of the recorder")
    ap.add_argument("--threadgraph-path", help="directory put first on the children's PYTHONPATH "
                    "(a tree with threadgraph and its built _recorder)")
    ap.add_argument("--render-only", action="store_true", help="rewrite RESULTS.md and the chart "
                    "from results.json")
    ap.add_argument("--keep", action="store_true", help="merge into the existing results.json "
                    "instead of starting afresh (re-measured workloads are replaced)")
    args = ap.parse_args()
    if args.pairs is None:
        args.pairs = 3 if args.quick else 5
    if args.scale is None:
        args.scale = QUICK_SCALE if args.quick else 1.0
    if args.cli_mb is None:
        args.cli_mb = 50 if args.quick else 1000

    if args.render_only:
        with open(RESULTS_JSON) as f:
            results = json.load(f)
        render(results)
        with open(RESULTS_JSON, "w") as f:
            json.dump(results, f, indent=1)
        return 0

    env = child_env(args.threadgraph_path)
    sys.path.insert(0, os.path.join(HERE, "noop"))
    import build as noop_build
    noop_build.build()

    results = {"overhead": {}}
    if args.keep and os.path.exists(RESULTS_JSON):
        with open(RESULTS_JSON) as f:
            results = json.load(f)
        results.pop("summary", None)
    runs = results.get("meta", {}).get("runs", []) if args.keep else []
    results["meta"] = meta(args, env)
    results["meta"]["argv_str"] = (" " + " ".join(sys.argv[1:])) if sys.argv[1:] else ""
    results["meta"]["runs"] = runs + ["%s: bench/run.py%s" % (results["meta"]["date"],
                                                             results["meta"]["argv_str"])]

    def save():
        with open(RESULTS_JSON, "w") as f:
            json.dump(results, f, indent=1)

    if not args.cli_only:
        configs = args.configs.split(",") if args.configs else list(runner.CONFIGS)
        if "none" not in configs:
            configs.insert(0, "none")
        avail, why = check_configs(configs, env)
        results.setdefault("unavailable", {}).update(why)
        for c in avail:
            results["unavailable"].pop(c, None)
        if args.only:
            workloads = args.only.split(",")
        else:
            workloads = list(CUSTOM_WORKLOADS)
            if subprocess.run([sys.executable, "-c", "import numpy"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
                workloads += NATIVE_WORKLOADS
            if pps.available():
                workloads += QUICK_PP if args.quick else PP_WORKLOADS
            else:
                log("pyperformance not installed: pip install pyperformance pyperf")
        for w in workloads:
            results["overhead"].pop(w, None)
        measure_overhead(workloads, avail, args.pairs, args.scale, env, args.timeout, results, save)

        if not args.no_hotpath and FULL in avail:
            import hotpath
            log("hot path profile")
            results["hotpath"] = hotpath.profile(env, quick=args.quick)
            save()

    if not args.no_cli and (args.cli_only or not args.only):
        import cli_bench
        log("CLI throughput")
        results["cli"] = cli_bench.bench(args.cli_mb, args.cli, quick=args.quick)
        save()

    results["meta"]["load_after"] = "%.2f %.2f %.2f" % os.getloadavg()
    render(results)
    save()
    log("wrote %s, %s, %s" % (RESULTS_MD, RESULTS_JSON, CHART))
    return 0


if __name__ == "__main__":
    sys.exit(main())
