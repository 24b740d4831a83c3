"""Instruction counts of bench configurations, noise-free: valgrind --tool=callgrind.

    python3 bench/insns.py [--configs noop,tg-binary] [--workloads call_heavy,...]
                           [--scale 0.05] [--python PYTHON] [--json FILE]

For each workload: the profile events the no-op hook counts, then the total
instructions (callgrind's "summary", whole process, start-up included) of
`bench/runner.py CONFIG WORKLOAD --scale S` for each configuration, under
PYTHONHASHSEED=0 and THREADGRAPH_SAMPLE_SEED=1 (repeated runs then agree to
about 0.01%).  Prints a markdown table: each configuration's total, its ratio to `noop` (the floor) and
(config - noop) / events, the configuration's instructions per event above the
floor.  The machine has no usable hardware counters, and its wall times are too
noisy to compare configurations a few percent apart: this is the measure
bench/RESULTS.md's instruction tables use.

PYTHON must be the real interpreter, not a pyenv shim (valgrind does not follow
the shim's exec); the default is the one running this script.  The threadgraph
package imported is the one on PYTHONPATH (e.g. a tree built with
`setup.py build_ext --inplace`).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, "runner.py")
WORKLOADS = ["call_heavy", "alloc_heavy", "generator_heavy", "threads_locks", "stdlib_mix"]


def count_events(python, workload, scale, env):
    """Profile events of WORKLOAD at SCALE, as the no-op hook counts them."""
    code = (
        "import sys; sys.path[:0] = [%r, %r]\n"
        "import noophook, runner\n"
        "fn = runner.prepare_workload(%r, %r)\n"
        "noophook.enable(count=True); fn(); print(noophook.disable())\n"
        % (HERE, os.path.join(HERE, "build"), workload, scale))
    p = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True)
    try:
        return int(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def instructions(python, config, workload, scale, env, keep=None):
    """Callgrind's total instructions of one runner process, or None."""
    with tempfile.TemporaryDirectory(prefix="tginsns-") as d:
        out = os.path.join(d, "callgrind.out")
        p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
                            python, RUNNER, config, workload, "--scale", str(scale)],
                           env=env, capture_output=True, text=True)
        if p.returncode != 0 or not os.path.exists(out):
            sys.stderr.write(p.stderr[-2000:])
            return None
        if keep:
            with open(out, "rb") as src, open(keep, "wb") as dst:
                dst.write(src.read())
        with open(out) as f:
            for line in f:
                if line.startswith("summary:") or line.startswith("totals:"):
                    return int(line.split()[1])
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", default="noop,tg-binary")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--scale", type=float, default=0.05)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    a = ap.parse_args()
    configs = a.configs.split(",")
    if "noop" not in configs:
        configs.insert(0, "noop")
    env = dict(os.environ, PYTHONHASHSEED="0")
    # Sampled mode's sample points are random per run: a fixed seed makes its
    # count repeatable (stdlib_mix moved by 2 M between runs without one).
    env.setdefault("THREADGRAPH_SAMPLE_SEED", "1")
    # Byte code compiled once, before any count: with PYTHONDONTWRITEBYTECODE set
    # in the caller's environment, every run would otherwise compile the
    # threadgraph package (and memray's) from source, start-up work that lands in
    # the profiled configurations only (25 M instructions and more per run).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    # From bench/, as the runs import it: `-c` puts the working directory first
    # on sys.path, and from the repository's root that is its own threadgraph/,
    # not the tree on PYTHONPATH that the runs take (whose first profiled run
    # then paid the compiling: stdlib_mix 513 M instead of 424 M at 0.05).
    subprocess.run([a.python, "-c",
                    "import compileall, os, sys, threadgraph\n"
                    "for d in [os.path.dirname(threadgraph.__file__), sys.argv[1]]:\n"
                    "    compileall.compile_dir(d, quiet=1)\n", HERE],
                   env=env, capture_output=True, cwd=HERE)
    subprocess.run([a.python, os.path.join(HERE, "noop", "build.py")], env=env,
                   check=True, capture_output=True)
    res = {}
    for w in a.workloads.split(","):
        ev = count_events(a.python, w, a.scale, env)
        res[w] = {"events": ev}
        for c in configs:
            res[w][c] = instructions(a.python, c, w, a.scale, env)
            print("%s %s %s" % (w, c, res[w][c]), file=sys.stderr, flush=True)
    others = [c for c in configs if c != "noop"]
    head = ["workload", "events", "noop"]
    for c in others:
        head += [c, c + " / noop", "per event"]
    print("| " + " | ".join(head) + " |")
    print("|---|" + "---:|" * (len(head) - 1))
    for w, r in res.items():
        ev, base = r["events"], r["noop"]
        row = [w, "%.3f M" % (ev / 1e6) if ev else "?", "%.1f M" % (base / 1e6) if base else "?"]
        for c in others:
            v = r[c]
            if v is None or base is None:
                row += ["?", "?", "?"]
                continue
            row += ["%.1f M" % (v / 1e6), "%.3fx" % (v / base),
                    "%.0f" % ((v - base) / ev) if ev else "?"]
        print("| " + " | ".join(row) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"scale": a.scale, "python": a.python, "results": res}, f, indent=1)


if __name__ == "__main__":
    main()
