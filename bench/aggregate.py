"""--aggregate: what it costs against a full capture, and how its file grows.
(docs/api.md "Aggregate mode"; figures in bench/RESULTS.md.)

    python3 bench/aggregate.py [--rounds N] [--reps R]

A busy three-thread program (calls and small allocations) runs N and 2N rounds
per thread, in a fresh interpreter each time, recorded in full (capture.tg) and
aggregated (aggregate.tga), the configurations one after the other and the order
alternating from repetition to repetition. The cost is the program's CPU time
(user + system of the child) as a ratio to the full capture's at the same length,
median over the repetitions; the size is the run's files at the end (the
capture or aggregate.tga, runinfo.json, and with accounting its summaries and
snapshots), median. Prints a Markdown table.

Then a thread per request (--requests T): the program starts T short threads one
after another (each a few calls and small lists, as a handler), T and 2T, the
same way; the table adds the child's peak RSS (ru_maxrss), which the recorder's
memory is part of: with ended threads folded by name (docs/formats.md
"Aggregate") neither it nor the run's files grow with the number of threads.
With --accounting the same again with accounting=True, whose files fold the
same threads (the recorder's accounting counters are kept per thread).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

PROGRAM = """
import sys, threading
import threadgraph

def leaf(i):
    return [i] * (i % 7)

def mid(i):
    return leaf(i)

def work(n):
    keep = []
    for i in range(n):
        keep.append(mid(i))
        if len(keep) > 100:
            keep.clear()

p = threadgraph.ProcessProfile(default_log_path=sys.argv[1], aggregate=sys.argv[2] == "agg")
p.enable()
ts = [threading.Thread(target=work, args=(int(sys.argv[3]),)) for k in range(3)]
for t in ts:
    t.start()
for t in ts:
    t.join()
p.disable()
"""

PER_REQUEST = """
import sys, threading
import threadgraph

def leaf(i):
    return [i] * (i % 7)

def handler(n):
    keep = []
    for i in range(n):
        keep.append(leaf(i))

p = threadgraph.ProcessProfile(default_log_path=sys.argv[1], aggregate=sys.argv[2] == "agg",
                               accounting=sys.argv[4] == "acct")
p.enable()
for k in range(int(sys.argv[3])):
    t = threading.Thread(target=handler, args=(50,))
    t.start()
    t.join()
p.disable()
"""


def run_once(script, mode, rounds, acct):
    """(CPU seconds, output bytes, peak RSS KiB) of one run."""
    base = tempfile.mkdtemp(prefix="tg-agg-")
    try:
        proc = subprocess.Popen([sys.executable, script, base, mode, str(rounds),
                                 "acct" if acct else "-"])
        _pid, status, ru = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise subprocess.CalledProcessError(proc.returncode, proc.args)
        cpu = ru.ru_utime + ru.ru_stime
        size = 0
        for root, _dirs, files in os.walk(base):
            for f in files:
                size += os.path.getsize(os.path.join(root, f))
        return cpu, size, ru.ru_maxrss
    finally:
        shutil.rmtree(base, ignore_errors=True)


def measure(program, lengths, reps, acct=False):
    """{(mode, length): ([cpu], [size], [rss])}, the order alternating."""
    tmp = tempfile.mkdtemp(prefix="tg-agg-script-")
    script = os.path.join(tmp, "prog.py")
    with open(script, "w") as f:
        f.write(program)
    res = {(m, n): ([], [], []) for m in ("full", "agg") for n in lengths}
    for rep in range(reps):
        order = [("full", n) for n in lengths] + [("agg", n) for n in lengths]
        if rep % 2:
            order.reverse()
        for m, n in order:
            for acc, v in zip(res[(m, n)], run_once(script, m, n, acct)):
                acc.append(v)
    shutil.rmtree(tmp, ignore_errors=True)
    return res


def table(res, lengths, what):
    print("| %s | full: CPU s | full: files | aggregate: CPU s "
          "| aggregate / full CPU | aggregate: files | full: peak RSS KiB "
          "| aggregate: peak RSS KiB |" % what)
    print("|---|---|---|---|---|---|---|---|")
    for n in lengths:
        fc, fs, fr = res[("full", n)]
        ac, as_, ar = res[("agg", n)]
        ratio = statistics.median(a / f for a, f in zip(ac, fc))
        print("| %d | %.2f | %d | %.2f | %.2fx | %d | %d | %d |"
              % (n, statistics.median(fc), statistics.median(fs), statistics.median(ac),
                 ratio, statistics.median(as_), statistics.median(fr),
                 statistics.median(ar)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200000)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--accounting", action="store_true",
                    help="also the thread per request with accounting=True")
    args = ap.parse_args()
    lengths = (args.rounds, 2 * args.rounds)
    table(measure(PROGRAM, lengths, args.reps), lengths, "rounds per thread")
    print()
    lengths = (args.requests, 2 * args.requests)
    table(measure(PER_REQUEST, lengths, args.reps), lengths, "threads, one per request")
    if args.accounting:
        print()
        table(measure(PER_REQUEST, lengths, args.reps, True), lengths,
              "threads, one per request, accounting")


if __name__ == "__main__":
    main()
