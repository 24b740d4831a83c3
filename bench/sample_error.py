"""Error of sampled allocation accounting against a reference on the bench
workloads (docs/accounting.md "Sampling").

    python3 bench/sample_error.py [--scale S] [--sample-bytes N] [--seeds K]
                                  [--only W,...] [--threadgraph-path DIR]
                                  [--sampled [--reference exact|census]]

Each workload runs once for the reference, once more the same way (the run-to-run
noise of the workload itself: threads, hash seeds), and under K seeds with
sample_bytes=N.  Sites are calling contexts with the threads merged (worker
thread names differ between runs).  For every site holding at least 1 % of the
reference's allocated bytes (TOTAL, final snapshot) or of its peak (LIVE in the
peak snapshot), the relative error |estimate - reference| / reference is taken.
Prints Markdown: per workload, the median over sites and seeds (the target's
figure), the range of the per-seed medians (how much one run's figure moves),
the largest error, and beside them what the sampling theory predicts and a
bias check:

- "theory": the median error expected of an unbiased sampler at this rate for
  these sites: an allocation of SIZE bytes is sampled with probability
  p = 1 - exp(-SIZE / N) and weighted 1/p (acct_sample.h), so a site of C blocks
  of mean size S has a standard deviation of about sqrt(C S^2 (1 - p) / p)
  (sqrt(N B) for blocks much smaller than N: a relative error of sqrt(N / B)
  for a site of B bytes); the pooled median of the half-normal errors of the
  sites.  A measured median near it means the error is the sample count's, not
  the estimator's;
- "bias z": for each site, its mean error over the seeds in units of its
  standard error (sd / sqrt(K)); the largest |z| over the sites.  An unbiased
  estimator gives |z| below 2-3; a site whose estimates lean one way (a stack
  walk that charges the wrong site, a weight that is off) stands out here;
- "z rms": the root mean square of every error in units of its site's
  standard deviation: about 1 when the spread is the theory's, more when the
  samples are fewer or more correlated than a Poisson process's.

--sampled measures mode="sampled" (docs/api.md "Sampled mode"; default
--sample-bytes 524288, its default) instead.  Its sites are Python stacks read
from the frames; the reference is then either
- "census" (the default): sampled mode itself at sample_bytes=1, every
  allocation of 8 bytes or more sampled, with a weight within 0.04 % of its
  size: the same stack walk at every allocation, in a program that allocates
  what it allocates unprofiled.  Slow, and its runs write a curve point per
  allocation (hundreds of MB, deleted after each run);
- "exact": accounting of Python calls (profile="python"), whose calling
  contexts are what a sampled stack holds: a check of the stack walk against
  the calls the interpreter reports, but the reporting allocates, and the
  accounting charges it to the program's sites: before 3.12 a profile function
  makes a frame object per call (1.6 GB on call_heavy, charged to the sites it
  calls), and from 3.12 sys.monitoring passes an instruction offset beyond the
  small-int cache as a new int (alloc_heavy's run() gets 34 MB, 8 %, more than
  an unprofiled run allocates there, one 28-byte int per call it makes).
"""
import argparse
import math
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


def run_once(workload, scale, kwargs, seed, tgpath):
    """({site: (total bytes, total count)} of the final snapshot, {site: (live
    bytes, live count)} of the peak snapshot) of one run under KWARGS."""
    out = tempfile.mkdtemp(prefix="tgsample-")
    env = dict(os.environ)
    env["THREADGRAPH_SAMPLE_SEED"] = str(seed)
    if tgpath:
        env["PYTHONPATH"] = tgpath + os.pathsep + env.get("PYTHONPATH", "")
    code = CHILD % {"here": HERE, "workload": workload, "scale": scale, "out": out,
                    "kwargs": kwargs}
    try:
        res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=3600)
        if res.returncode != 0:
            raise RuntimeError("%s failed: %s" % (workload, res.stderr[-2000:]))
        run_dir = res.stdout.strip().splitlines()[-1]
        return sites(run_dir, "final", 5), sites(run_dir, "peak", 3)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def sites(run_dir, label, column):
    """{context: (bytes, count)} of the run's snapshot LABEL, threads merged,
    from its COLUMN (3 live, 5 total bytes; the count is the next column)."""
    name = [n for n in os.listdir(run_dir) if n.split("-", 2)[-1] == label][0]
    nodes, out = {}, {}
    with open(os.path.join(run_dir, name)) as f:
        for line in f:
            if line.startswith("#"):
                continue
            fields = line.rstrip("\n").split(" ", 7)
            nid, parent, call = fields[0], fields[1], fields[7]
            ctx = call if parent == "-" else call + "<-" + nodes[parent]
            nodes[nid] = ctx
            b, c = out.get(ctx, (0, 0))
            out[ctx] = (b + int(fields[column]), c + int(fields[column + 1]))
    return out


def big_sites(ref):
    """The sites of REF holding at least SHARE of its bytes."""
    total = sum(b for b, _ in ref.values() if b > 0)
    return [k for k, (b, _) in ref.items() if b > 0 and b >= SHARE * total]


def rel_sd(bytes_, count, mean):
    """Relative standard deviation of the sampled estimate of a site of COUNT
    blocks and BYTES bytes in all, taken as blocks of their mean size, at MEAN
    bytes per sample (see the top of the file)."""
    if count <= 0 or bytes_ <= 0:
        return 0.0
    size = bytes_ / count
    p = -math.expm1(-size / mean)
    return math.sqrt(count * size * size * (1 - p) / p) / bytes_


def theory_median(sds):
    """The median of the pooled errors |e| of sites whose errors are normal
    with relative standard deviations SDS."""
    sds = [s for s in sds if s > 0]
    if not sds:
        return 0.0
    lo, hi = 0.0, 10 * max(sds)
    for _ in range(60):
        m = (lo + hi) / 2
        if sum(math.erf(m / (s * math.sqrt(2))) for s in sds) < len(sds) / 2:
            lo = m
        else:
            hi = m
    return (lo + hi) / 2


def compare(ref, ests, mean):
    """Figures of the estimates ESTS (one dict per seed) against REF for its big
    sites: (pooled errors, per-seed medians, theory's median, largest |bias z|)."""
    keys = big_sites(ref)
    pooled, medians = [], []
    for est in ests:
        errs = [abs(est.get(k, (0, 0))[0] - ref[k][0]) / ref[k][0] for k in keys]
        pooled += errs
        if errs:
            medians.append(statistics.median(errs))
    sds = {k: rel_sd(ref[k][0], ref[k][1], mean) for k in keys}
    zmax = 0.0
    for k in keys:
        if sds[k] > 0 and ests:
            m = statistics.mean((est.get(k, (0, 0))[0] - ref[k][0]) / ref[k][0] for est in ests)
            zmax = max(zmax, abs(m) / (sds[k] / math.sqrt(len(ests))))
    zs = [(est.get(k, (0, 0))[0] - ref[k][0]) / ref[k][0] / sds[k]
          for est in ests for k in keys if sds[k] > 0]
    zrms = math.sqrt(statistics.mean(z * z for z in zs)) if zs else 0.0
    return pooled, medians, theory_median(list(sds.values())), zmax, zrms


def pct(x):
    return "%.1f %%" % (100 * x)


def fmt(pooled, medians, theory, zmax, zrms):
    if not pooled:
        return "- | - | - | - | - | -"
    return "%s | %s - %s | %s | %s | %.1f | %.2f" % (
        pct(statistics.median(pooled)), pct(min(medians)), pct(max(medians)), pct(max(pooled)),
        pct(theory), zmax, zrms)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=0.25)
    ap.add_argument("--sample-bytes", type=int)
    ap.add_argument("--sampled", action="store_true",
                    help='mode="sampled" against exact Python-call accounting')
    ap.add_argument("--reference", choices=("census", "exact"), default="census",
                    help="--sampled's reference (see above)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--only")
    ap.add_argument("--threadgraph-path")
    args = ap.parse_args()
    workloads = args.only.split(",") if args.only else WORKLOADS
    if args.sample_bytes is None:
        args.sample_bytes = 524288 if args.sampled else 65536
    if not args.sampled:
        args.reference = "exact"
        ref_kw = "accounting=True"
        est_kw = "accounting=True, sample_bytes=%d" % args.sample_bytes
    else:
        ref_kw = ('accounting=True, profile="python"' if args.reference == "exact"
                  else 'mode="sampled", sample_bytes=1')
        est_kw = 'mode="sampled", sample_bytes=%d' % args.sample_bytes
    print("Python %s, %ssample_bytes=%d, scale %.2f, %d seeds, reference: %s; sites >= %d %% "
          "of the reference's figure; relative error: median over sites and seeds, range of "
          "the per-seed medians, largest; theory: the median an unbiased sampler is expected "
          "to give for these sites; bias z: largest |mean error| over the seeds in standard "
          "errors; z rms: the errors' spread in units of the theory's\n"
          % (sys.version.split()[0], 'mode="sampled", ' if args.sampled else "",
             args.sample_bytes, args.scale, args.seeds, args.reference, SHARE * 100))
    print("| workload | allocated MB | sites | reference rerun | median | per-seed medians "
          "| max | theory | bias z | z rms | peak MB | sites at peak | reference rerun | median "
          "| per-seed medians | max | theory | bias z | z rms |")
    print("|---|" + "---:|" * 18)
    for w in workloads:
        seed0 = 0
        tot0, pk0 = run_once(w, args.scale, ref_kw, seed0, args.threadgraph_path)
        tot1, pk1 = run_once(w, args.scale, ref_kw, seed0, args.threadgraph_path)
        tots, pks = [], []
        for seed in range(1, args.seeds + 1):
            tot, pk = run_once(w, args.scale, est_kw, seed, args.threadgraph_path)
            tots.append(tot)
            pks.append(pk)
        rt = compare(tot0, [tot1], args.sample_bytes)[0]
        rp = compare(pk0, [pk1], args.sample_bytes)[0]

        def rerun(xs):
            return "%s / %s" % (pct(statistics.median(xs)), pct(max(xs))) if xs else "-"
        mb_t = sum(b for b, _ in tot0.values() if b > 0) / 1e6
        mb_p = sum(b for b, _ in pk0.values() if b > 0) / 1e6
        print("| %s | %.1f | %d | %s | %s | %.2f | %d | %s | %s |"
              % (w, mb_t, len(big_sites(tot0)), rerun(rt),
                 fmt(*compare(tot0, tots, args.sample_bytes)), mb_p, len(big_sites(pk0)),
                 rerun(rp), fmt(*compare(pk0, pks, args.sample_bytes))))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
