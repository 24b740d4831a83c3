#!/usr/bin/env python3
"""The original ThreadGraph's memg parsing loop, re-implemented in Python for comparison.

    python3 bench/orig_parse.py [--no_time] [--peak KB] FILES...

What the original post-processor (a Python script, 2014) did for every line of every
file before plotting (docs: /work/shared/spec/original-threadgraph.md): split off the
time at the first '#' and float() it, split the call site from the delta on the last
'=>' and int() it, convert to KB, test |delta| against the peak threshold and keep the
peak, and build the plot series with runs of zero deltas collapsed to their first and
last point; process files parse 'TIME#BYTES' and rebase.  Nothing is plotted: this is
the part the C CLI replaces, timed for the CLI throughput table.  Prints a one-line
summary (lines, points, peaks) so the work cannot be skipped.
"""
import os
import sys


def parse_thread(path, name, peak_kb, no_time, peaks):
    xs, ys = [], []
    in_zero = False
    last_zero = None
    idx = 0
    with open(path) as f:
        for line in f:
            line = line.rstrip("\r\n")
            idx += 1
            try:
                if no_time:
                    t, rest = idx, line
                else:
                    t, rest = line.split("#", 1)
                    t = float(t)
                site, delta = rest.rsplit("=>", 1)
                delta = int(delta)
            except ValueError:
                sys.stderr.write("warning: %s:%d: unparsable line skipped\n" % (path, idx))
                continue
            kb = delta / 1024.0
            if abs(kb) > peak_kb:
                peaks.append((t, kb, name, rest))
            if delta == 0:
                if not in_zero:
                    xs.append(t)
                    ys.append(0)
                    in_zero = True
                last_zero = t
            else:
                if in_zero and last_zero != xs[-1]:
                    xs.append(last_zero)
                    ys.append(0)
                in_zero = False
                xs.append(t)
                ys.append(kb)
    if in_zero and last_zero != xs[-1]:
        xs.append(last_zero)
        ys.append(0)
    return idx, xs, ys


def parse_process(path, rebase_kb, no_time):
    xs, ys = [], []
    idx = 0
    with open(path) as f:
        for line in f:
            line = line.rstrip("\r\n")
            idx += 1
            try:
                if no_time:
                    t, value = idx, line
                else:
                    t, value = line.split("#", 1)
                    t = float(t)
                value = int(value)
            except ValueError:
                sys.stderr.write("warning: %s:%d: unparsable line skipped\n" % (path, idx))
                continue
            xs.append(t)
            ys.append(value / 1024.0 - rebase_kb)
    return idx, xs, ys


def main(argv):
    no_time = "--no_time" in argv
    argv = [a for a in argv if a != "--no_time"]
    peak_kb = 200.0
    if "--peak" in argv:
        i = argv.index("--peak")
        peak_kb = float(argv[i + 1])
        del argv[i:i + 2]
    lines = points = 0
    peaks = []
    for path in argv:
        name = os.path.basename(path).rsplit(".", 1)[0]
        if name == "process":
            sys.stderr.write("Processing data for the process\n")
            n, xs, _ = parse_process(path, 30000, no_time)
        else:
            sys.stderr.write("Processing data for thread %s\n" % name)
            n, xs, _ = parse_thread(path, name, peak_kb, no_time, peaks)
        lines += n
        points += len(xs)
    peaks.sort()
    print("lines %d points %d peaks %d" % (lines, points, len(peaks)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
