"""Where the recorder spends its time: perf on the call-heavy workload.

    python3 bench/hotpath.py [--workload call_heavy] [--config tg-thread]

1. `perf stat -e instructions` of bench/runner.py under none, noop and the threadgraph
   configurations; with the number of profile events (counted by the no-op hook) this
   gives instructions per event above the unprofiled run and above the floor.
2. `perf record -e instructions` of the full-recording run: the top symbols by share of
   instructions (whole process, and the recorder's own DSO alone).
Without perf (or without permission to count), falls back to valgrind --tool=callgrind
on a smaller run if valgrind is there; otherwise reports why nothing was measured.
run.py calls profile() and folds the markdown into RESULTS.md.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, "runner.py")
STAT_CONFIGS = ["none", "noop", "tg-thread", "tg-thread-nostack", "tg-process", "tg-rss-nostack"]


def count_events(workload, scale, env):
    code = (
        "import sys; sys.path[:0] = [%r, %r]\n"
        "import noophook, runner\n"
        "fn = runner.prepare_workload(%r, %r)\n"
        "noophook.enable(count=True); fn(); print(noophook.disable())\n"
        % (HERE, os.path.join(HERE, "build"), workload, scale))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    try:
        return int(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def perf_stat(config, workload, scale, env):
    with tempfile.NamedTemporaryFile(suffix=".txt", delete=False) as tf:
        path = tf.name
    try:
        p = subprocess.run(["perf", "stat", "-x,", "-e", "instructions:u", "-o", path,
                            sys.executable, RUNNER, config, workload, "--scale", str(scale)],
                           env=env, capture_output=True, text=True)
        if p.returncode != 0:
            return None, None
        with open(path) as f:
            for line in f:
                parts = line.split(",")
                if len(parts) > 2 and parts[2].startswith("instructions"):
                    res = json.loads(p.stdout.strip().splitlines()[-1])
                    return int(parts[0]), res
    except (ValueError, OSError, IndexError):
        pass
    finally:
        os.unlink(path)
    return None, None


def perf_report(config, workload, scale, env, top=25):
    d = tempfile.mkdtemp(prefix="tgbench-perf-")
    data = os.path.join(d, "perf.data")
    try:
        p = subprocess.run(["perf", "record", "-q", "-e", "instructions:u", "-c", "200003",
                            "-o", data, sys.executable, RUNNER, config, workload,
                            "--scale", str(scale)], env=env, capture_output=True, text=True)
        if p.returncode != 0:
            return None, "perf record failed: " + p.stderr.strip()[-300:]
        rep = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children",
                              "--sort", "dso,symbol", "--percent-limit", "0.3"],
                             capture_output=True, text=True)
        rows = []
        for line in rep.stdout.splitlines():
            m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[\.\]\s+(.*)$", line)
            if m:
                rows.append((float(m.group(1)), m.group(2), re.sub(r"(\s+-)+$", "", m.group(3).strip())))
        dsos = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children",
                               "--sort", "dso"], capture_output=True, text=True)
        drows = []
        for line in dsos.stdout.splitlines():
            m = re.match(r"\s*([\d.]+)%\s+(\S+)\s*$", line)
            if m:
                drows.append((float(m.group(1)), m.group(2)))
        return {"symbols": rows[:top], "dsos": drows[:8]}, None
    finally:
        shutil.rmtree(d, ignore_errors=True)


def profile(env=None, workload="call_heavy", config="tg-thread", quick=False):
    env = env or dict(os.environ)
    scale = 0.25 if quick else 0.5
    if not shutil.which("perf"):
        return {"error": "perf not installed"}
    events = count_events(workload, scale, env)
    stats = {}
    for c in STAT_CONFIGS:
        ins, res = perf_stat(c, workload, scale, env)
        if ins:
            stats[c] = {"instructions": ins, "wall": res["wall"], "out_bytes": res["out_bytes"]}
    rep, err = perf_report(config, workload, scale, env)
    out = {"workload": workload, "scale": scale, "events": events, "stat": stats,
           "report": rep, "error": err}
    out["markdown"] = markdown(out, config)
    return out


def markdown(h, config):
    L = []
    L.append("Workload `%s` at scale %s: %s profile events (call + return, counted by the "
             "no-op hook). `perf stat -e instructions:u` of the whole child process "
             "(start-up included, identical in every configuration):\n"
             % (h["workload"], h["scale"], h["events"]))
    st = h["stat"]
    if st:
        base = st.get("none", {}).get("instructions")
        floor = st.get("noop", {}).get("instructions")
        L.append("| config | instructions | per event above none | per event above noop | wall s | output MB |")
        L.append("|---|---:|---:|---:|---:|---:|")
        for c, s in st.items():
            ev = h["events"]
            pe = "%.0f" % ((s["instructions"] - base) / ev) if base and ev else ""
            pf = "%.0f" % ((s["instructions"] - floor) / ev) if floor and ev and c != "none" else ""
            L.append("| %s | %d | %s | %s | %.2f | %.1f |" % (c, s["instructions"], pe, pf, s["wall"],
                                                              s["out_bytes"] / 1e6))
        L.append("")
    rep = h.get("report")
    if rep:
        L.append("`perf record -e instructions:u` of `%s` (share of all user-space instructions "
                 "of the process):\n" % config)
        L.append("| DSO | % |")
        L.append("|---|---:|")
        for pct, dso in rep["dsos"]:
            L.append("| %s | %.1f |" % (dso, pct))
        L.append("")
        L.append("| % | DSO | symbol |")
        L.append("|---:|---|---|")
        for pct, dso, sym in rep["symbols"]:
            L.append("| %.1f | %s | `%s` |" % (pct, dso, sym))
        L.append("")
    if h.get("error"):
        L.append("perf: %s\n" % h["error"])
    return "\n".join(L)




# ---------------------------------------------------------------- callgrind

def callgrind(env=None, workload="call_heavy", config="tg-thread", scale=0.02, top=25, keep=None):
    """Exact instruction counts per function (valgrind --tool=callgrind), self and inclusive."""
    env = env or dict(os.environ)
    if not shutil.which("valgrind"):
        return {"error": "valgrind not installed"}
    d = tempfile.mkdtemp(prefix="tgbench-cg-")
    out = os.path.join(d, "callgrind.out")
    try:
        p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
                            sys.executable, RUNNER, config, workload, "--scale", str(scale)],
                           env=env, capture_output=True, text=True)
        if p.returncode != 0:
            return {"error": "valgrind failed: " + p.stderr.strip()[-300:]}
        res = {"workload": workload, "config": config, "scale": scale}
        for kind, flag in (("self", "--inclusive=no"), ("inclusive", "--inclusive=yes")):
            a = subprocess.run(["callgrind_annotate", flag, "--threshold=99", "--auto=no", out],
                               capture_output=True, text=True).stdout
            rows = []
            total = None
            for line in a.splitlines():
                if "annotated source" in line.lower():
                    break
                m = re.match(r"\s*([\d,]+)\s+\(\s*([\d.]+)%\)\s+(.*?)\s*$", line)
                if m:
                    n = int(m.group(1).replace(",", ""))
                    name = m.group(3)
                    if "PROGRAM TOTALS" in name:
                        total = n
                        continue
                    name = re.sub(r"\s*\[[^\]]*\]$", "", name)
                    name = name.split(":", 1)[1] if ":" in name and not name.startswith("0x") else name
                    rows.append((float(m.group(2)), n, name))
            res[kind] = rows[:top] if kind == "self" else [r for r in rows if r[2].startswith("tg_")][:top]
            res["total"] = total or res.get("total")
        res["markdown"] = callgrind_markdown(res)
        if keep:
            shutil.copy(out, keep)
        return res
    finally:
        shutil.rmtree(d, ignore_errors=True)


def callgrind_markdown(res):
    L = ["`valgrind --tool=callgrind` of `%s` on `%s` at scale %s (whole process, start-up "
         "included; %s instructions in all). Self cost, top functions:\n"
         % (res["config"], res["workload"], res["scale"],
            "{:,}".format(res["total"]) if res.get("total") else "?")]
    L.append("| % of Ir | Ir | function |")
    L.append("|---:|---:|---|")
    for pct, n, name in res.get("self", []):
        L.append("| %.1f | {:,} | `%s` |".format(n) % (pct, name))
    L.append("")
    if res.get("inclusive"):
        L.append("Inclusive cost of the recorder's functions (callees included):\n")
        L.append("| % of Ir | Ir | function |")
        L.append("|---:|---:|---|")
        for pct, n, name in res["inclusive"]:
            L.append("| %.1f | {:,} | `%s` |".format(n) % (pct, name))
        L.append("")
    return "\n".join(L)


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="call_heavy")
    ap.add_argument("--config", default="tg-thread")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--callgrind", action="store_true", help="callgrind instead of perf")
    ap.add_argument("--scale", type=float, default=0.02, help="workload scale under callgrind")
    ap.add_argument("--keep", metavar="FILE", help="copy callgrind's output file to FILE")
    ap.add_argument("--save", action="store_true", help="store the result in bench/results.json "
                    "(then: python3 bench/run.py --render-only)")
    a = ap.parse_args()
    if a.callgrind:
        h = callgrind(workload=a.workload, config=a.config, scale=a.scale, keep=a.keep)
        key = "callgrind"
    else:
        h = profile(workload=a.workload, config=a.config, quick=a.quick)
        key = "hotpath"
    print(h.get("markdown") or h.get("error"))
    if a.save:
        path = os.path.join(HERE, "results.json")
        with open(path) as f:
            results = json.load(f)
        results[key] = h
        with open(path, "w") as f:
            json.dump(results, f, indent=1)
