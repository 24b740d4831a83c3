"""How often threads_locks' lock is found held, under each configuration.

    python3 bench/lock_convoy.py [--configs none,noop,tg-tutorial,...] [--rounds 3]
                                 [--switch-interval SECONDS]

bench/workloads/threads_locks.py's program, with one change that lets it count:
its `with lock:` becomes `if not lock.acquire(False): count; lock.acquire()`.
Each run is a fresh process (`lock_convoy.py --one CONFIG`) that starts the
configuration as bench/runner.py does, runs the 4 threads and prints the
acquires that found the lock held (summed over the threads), the process's
voluntary context switches and its CPU time from start to stop.  A lock found
held means its holder lost the GIL inside `with lock:` (a forced switch there:
another thread waited the switch interval for the GIL); from then on the lock
is held by a thread that waits for the GIL, and the others queue behind it: a
convoy (bench/RESULTS.md "threads_locks: a lock convoy past the switch
interval").  `NOOPHOOK_SPIN=N` in the environment makes `noop` spend N
iterations of an empty loop an event (bench/noop/noophook.c).
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from workloads.threads_locks import _work  # noqa: E402  (the workload's own)


def _worker(lock, shared, iters, held):
    n_held = 0
    for i in range(iters):
        n = _work(i)
        if not lock.acquire(False):
            n_held += 1
            lock.acquire()
        shared["n"] = shared.get("n", 0) + n
        shared.setdefault("items", []).append(i)
        lock.release()
        if i % 50 == 0:
            time.sleep(0.001)
    held.append(n_held)


def one(config, iters):
    import runner
    cfg = runner.make_config(config)
    outdir = tempfile.mkdtemp(prefix="tgbench-convoy-")
    lock, shared, held = threading.Lock(), {}, []
    try:
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        c0 = time.process_time()
        cfg.start(outdir)
        threads = [threading.Thread(target=_worker, args=(lock, shared, iters, held))
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        cfg.stop()
        c1 = time.process_time()
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
    finally:
        shutil.rmtree(outdir, ignore_errors=True)
    print(json.dumps({"held": sum(held), "nvcsw": ru1.ru_nvcsw - ru0.ru_nvcsw,
                      "cpu": c1 - c0}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", default="none,noop,tg-tutorial,tg-sampled,memray")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=9000,
                    help="iterations per thread (threads_locks at scale 1: 9000)")
    ap.add_argument("--switch-interval", type=float, default=None,
                    help="sys.setswitchinterval in every run (default: Python's, 5 ms)")
    ap.add_argument("--one", metavar="CONFIG", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.switch_interval is not None:
        sys.setswitchinterval(a.switch_interval)
    if a.one:
        one(a.one, a.iters)
        return 0
    res = {c: [] for c in a.configs.split(",")}
    for r in range(a.rounds):
        for c in res:
            cmd = [sys.executable, os.path.abspath(__file__), "--one", c,
                   "--iters", str(a.iters)]
            if a.switch_interval is not None:
                cmd += ["--switch-interval", str(a.switch_interval)]
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                sys.stderr.write("%s failed: %s\n" % (c, p.stderr[-300:]))
                continue
            res[c].append(json.loads(p.stdout.strip().splitlines()[-1]))
    print("| configuration | lock found held (of %d acquires) | voluntary switches | CPU s |"
          % (4 * a.iters))
    print("|---|---:|---:|---:|")
    for c, runs in res.items():
        if not runs:
            print("| %s | n/a | n/a | n/a |" % c)
            continue
        med = {k: statistics.median(x[k] for x in runs) for k in ("held", "nvcsw", "cpu")}
        print("| %s | %.0f | %.0f | %.2f |" % (c, med["held"], med["nvcsw"], med["cpu"]))
    print("\nMedians of %d rounds; switch interval %s." % (
        a.rounds, "%g s" % a.switch_interval if a.switch_interval is not None
        else "Python's default (5 ms)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
