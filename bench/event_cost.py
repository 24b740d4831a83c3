"""Nanoseconds a profiler adds per Python call, side by side, from one tight loop.

    python3 bench/event_cost.py [--configs noop,tg-binary,memray] [--rounds 11]
                                [--calls 1000000] [--loops calls,allocs]
                                [--threadgraph-path DIR]

A workload's wall-time ratio mixes the profiler's cost with everything else the
program does, and on a shared machine it moves by 5-30% from run to run.  This
measures the per-call cost directly: a loop of N calls of a one-line Python
function, timed (time.perf_counter) between the profiler's start and stop, in a
fresh process per measurement; configurations alternate in an order rotated
every round, and the median over the rounds is reported.  Each call is two
profile events (call and return).

Loops:
  calls   f(x) over a prebuilt list: the function allocates nothing.  Under a
          profile function (CPython <= 3.11, and threadgraph's setprofile backend
          on 3.12+) the interpreter still makes a frame object per call for the
          hook, one allocation and free that memory profilers hooking the
          Python allocators see; under sys.monitoring it makes none
  allocs  f(x) returns [x]: one more allocation and free per call (the list's
          item array; the list object itself comes from a free list)

The configurations are bench/runner.py's (make_config): the same set-up as the
workload benchmark; the no-op hooks are built first (bench/noop/build.py).  The
default list has the floor `noop` (an empty C profile function) and, on 3.12+,
`noop-monitoring` (an empty sys.monitoring callback).  Output: one line per loop
and configuration, with the difference to each floor measured in the same run,
per call and per profile event (half the per-call figure: a call's two events;
the allocator events of `allocs` are not counted apart).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# The empty hooks a profiler's cost is measured against: the profile function
# (every CPython) and the sys.monitoring callback (3.12+).
FLOORS = ("noop", "noop-monitoring")


def _f_calls(x):
    return x


def _f_allocs(x):
    return [x]


def child(config, loop, calls):
    """Time CALLS calls under CONFIG in this process; print ns per call."""
    sys.path.insert(0, HERE)
    import runner
    f = _f_calls if loop == "calls" else _f_allocs
    xs = [0] * calls

    def run(items):
        for x in items:
            f(x)

    run(xs[:10000])  # warm the code paths before timing
    cfg = runner.make_config(config)
    outdir = tempfile.mkdtemp(prefix="tg-event-cost-")
    try:
        cfg.start(outdir)
        t0 = time.perf_counter()
        run(xs)
        t1 = time.perf_counter()
        cfg.stop()
    finally:
        shutil.rmtree(outdir, ignore_errors=True)
    print("%.3f" % ((t1 - t0) * 1e9 / calls))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default = "noop,tg-binary,memray"
    if sys.version_info >= (3, 12):
        default = "noop,noop-monitoring,tg-binary,memray"
    ap.add_argument("--configs", default=default)
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--calls", type=int, default=1000000)
    ap.add_argument("--loops", default="calls,allocs")
    ap.add_argument("--threadgraph-path", help="directory put first on the children's "
                    "PYTHONPATH (a tree with threadgraph and its built _recorder)")
    ap.add_argument("--child", nargs=2, metavar=("CONFIG", "LOOP"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        child(a.child[0], a.child[1], a.calls)
        return 0
    if a.threadgraph_path:
        path = os.path.abspath(a.threadgraph_path)
        old = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = path + (os.pathsep + old if old else "")
    configs = a.configs.split(",")
    loops = a.loops.split(",")
    for loop in loops:
        if loop not in ("calls", "allocs"):
            ap.error("unknown loop %r (calls, allocs)" % loop)
    if any(c in FLOORS for c in configs):
        b = subprocess.run([sys.executable, os.path.join(HERE, "noop", "build.py")],
                           capture_output=True, text=True)
        if b.returncode != 0:
            print("bench/noop/build.py failed (the floors will be unavailable): %s"
                  % (b.stderr.strip()[-300:] or b.stdout.strip()[-300:]))
    usable = []
    for c in configs:
        r = subprocess.run([sys.executable, os.path.join(HERE, "runner.py"), "--check", c],
                           capture_output=True, text=True)
        if r.returncode == 0:
            usable.append(c)
        else:
            print("%s: unavailable (%s)" % (c, (r.stdout or r.stderr).strip()[-200:]))
    if not usable:
        return 1
    print("python %s, %d calls per measurement, %d rounds (median; q1-q3 in brackets)"
          % (sys.version.split()[0], a.calls, a.rounds))
    for loop in loops:
        res = {c: [] for c in usable}
        for rnd in range(a.rounds):
            k = rnd % len(usable)
            for c in usable[k:] + usable[:k]:
                out = subprocess.run([sys.executable, os.path.abspath(__file__), "--calls",
                                      str(a.calls), "--child", c, loop],
                                     capture_output=True, text=True)
                if out.returncode != 0:
                    print("%s %s: failed: %s" % (loop, c, out.stderr.strip()[-300:]))
                    return 1
                res[c].append(float(out.stdout.split()[-1]))
        med = {c: statistics.median(v) for c, v in res.items()}
        for c in usable:
            v = sorted(res[c])
            q1, q3 = v[len(v) // 4], v[(3 * len(v)) // 4]
            line = "%-7s %-20s %7.1f ns/call [%.1f-%.1f]" % (loop, c, med[c], q1, q3)
            for floor in FLOORS:
                if floor in med and c not in FLOORS:
                    extra = med[c] - med[floor]
                    line += "   vs %s %+.1f ns/call (%+.1f ns/event) %.2fx" % (
                        floor, extra, extra / 2, med[c] / med[floor])
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
