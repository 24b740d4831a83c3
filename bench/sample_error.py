"""Error of sampled allocation accounting against exact accounting on the bench
workloads (docs/accounting.md "Sampling").

    python3 bench/sample_error.py [--scale S] [--sample-bytes N] [--seeds K]
                                  [--only W,...] [--threadgraph-path DIR] [--sampled]

Each workload runs once with exact accounting, once more exactly (the run-to-run
noise of the workload itself: threads, hash seeds), and under K seeds with
sample_bytes=N.  Sites are calling contexts with the threads merged (worker
thread names differ between runs).  For every site holding at least 1 % of the
exact run's allocated bytes (TOTAL, final snapshot) or of its peak (LIVE in the
peak snapshot), the relative error |estimate - exact| / exact is taken; the
table gives the median and the largest over sites and seeds.  Prints Markdown.

--sampled measures mode="sampled" (docs/api.md "Sampled mode"; default
--sample-bytes 524288, its default) instead: its sites are Python stacks read
from the frames, so the exact runs record Python calls only (profile="python")
for their contexts to be the same.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = ["call_heavy", "alloc_heavy", "generator_heavy", "threads_locks", "stdlib_mix"]
SHARE = 0.01

CHILD = r"""
import sys
sys.path.insert(0, %(here)r)
import runner
from threadgraph import ProcessProfile
fn = runner.prepare_workload(%(workload)r, %(scale)r)
p = ProcessProfile(default_log_path=%(out)r, %(kwargs)s)
p.trackStack(False)
p.enable()
fn()
p.disable()
print(p.output_dir)
"""


def run_once(workload, scale, sample_bytes, seed, tgpath, sampled=False):
    out = tempfile.mkdtemp(prefix="tgsample-")
    env = dict(os.environ)
    env["THREADGRAPH_SAMPLE_SEED"] = str(seed)
    if tgpath:
        env["PYTHONPATH"] = tgpath + os.pathsep + env.get("PYTHONPATH", "")
    if not sampled:
        kwargs = "accounting=True, sample_bytes=%d" % sample_bytes
    elif sample_bytes:
        kwargs = 'mode="sampled", sample_bytes=%d' % sample_bytes
    else:
        kwargs = 'accounting=True, profile="python"'
    code = CHILD % {"here": HERE, "workload": workload, "scale": scale, "out": out,
                    "kwargs": kwargs}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=1800)
    if res.returncode != 0:
        raise RuntimeError("%s failed: %s" % (workload, res.stderr[-2000:]))
    run_dir = res.stdout.strip().splitlines()[-1]
    try:
        return sites(run_dir, "final", 2), sites(run_dir, "peak", 0)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def sites(run_dir, label, column):
    """{context: value of COLUMN (0 live bytes, 2 total bytes)} of the run's
    snapshot LABEL, threads merged."""
    name = [n for n in os.listdir(run_dir) if n.split("-", 2)[-1] == label][0]
    nodes, out = {}, {}
    with open(os.path.join(run_dir, name)) as f:
        for line in f:
            if line.startswith("#"):
                continue
            nid, parent, _thread, lb, _lc, tb, _tc, call = line.rstrip("\n").split(" ", 7)
            ctx = call if parent == "-" else call + "<-" + nodes[parent]
            nodes[nid] = ctx
            v = int((lb, None, tb)[column])
            out[ctx] = out.get(ctx, 0) + v
    return out


def errors(exact, est):
    """Relative errors of EST against EXACT for the sites above SHARE."""
    total = sum(v for v in exact.values() if v > 0)
    return [abs(est.get(k, 0) - v) / v for k, v in exact.items() if v > 0 and v >= SHARE * total]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=0.25)
    ap.add_argument("--sample-bytes", type=int)
    ap.add_argument("--sampled", action="store_true",
                    help='mode="sampled" against exact Python-call accounting')
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--only")
    ap.add_argument("--threadgraph-path")
    args = ap.parse_args()
    workloads = args.only.split(",") if args.only else WORKLOADS
    if args.sample_bytes is None:
        args.sample_bytes = 524288 if args.sampled else 65536
    print("%ssample_bytes=%d, scale %.2f, %d seeds; sites >= %d %% of the exact figure; "
          "relative error median / max (over sites and seeds)\n"
          % ('mode="sampled", ' if args.sampled else "", args.sample_bytes, args.scale,
             args.seeds, SHARE * 100))
    print("| workload | allocated MB | sites | exact rerun | sampled "
          "| peak MB | sites at peak | exact rerun | sampled |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for w in workloads:
        tot0, pk0 = run_once(w, args.scale, 0, 0, args.threadgraph_path, args.sampled)
        tot1, pk1 = run_once(w, args.scale, 0, 0, args.threadgraph_path, args.sampled)
        et, ep = [], []
        for seed in range(1, args.seeds + 1):
            tot, pk = run_once(w, args.scale, args.sample_bytes, seed, args.threadgraph_path,
                               args.sampled)
            et += errors(tot0, tot)
            ep += errors(pk0, pk)
        rt, rp = errors(tot0, tot1), errors(pk0, pk1)

        def fmt(xs):
            return "%.1f %% / %.1f %%" % (100 * statistics.median(xs), 100 * max(xs)) if xs else "-"
        mb_t = sum(v for v in tot0.values() if v > 0) / 1e6
        mb_p = sum(v for v in pk0.values() if v > 0) / 1e6
        print("| %s | %.1f | %d | %s | %s | %.2f | %d | %s | %s |"
              % (w, mb_t, len(rt), fmt(rt), fmt(et), mb_p, len(rp), fmt(rp), fmt(ep)))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
