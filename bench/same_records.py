"""The records a capture holds, without their times: to compare two builds.

    python3 bench/same_records.py OUT.txt

Runs four bench workloads (scale 0.02; not threads_locks, whose threads
interleave differently from run to run) and a few programs that take the
recorder's other paths (a generator thrown into and closed, a long function
calling builtins, exceptions through Python and C frames, a class called)
under the tutorial's configuration (profile "both", trackStack(),
setProcessMemoryFrequence(20), the binary capture) in this process, decodes
capture.tg with tests/python/tgcapture.py and writes every thread's calls and
returns (depth, file, line, function, memory delta) without their times, one a
line, to OUT.txt.  Build the tree one way, run it, build it the other way (for
example with CFLAGS=-DTG_MON_FAST=0: the sys.monitoring callbacks' default
entries alone), run it again from the same tree, and compare the two files:
the fast paths must write what the default entries write.  Same tree, same
paths: another tree's longer import paths move the garbage collector's runs
and with them some memory deltas.
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "tests", "python")]

import runner  # noqa: E402
import tgcapture  # noqa: E402
import threadgraph  # noqa: E402


def gen_throw():
    def g():
        try:
            for i in range(50):
                yield i
        except ValueError:
            yield -1
    for _ in range(200):
        it = g()
        next(it)
        next(it)
        it.throw(ValueError)
        it.close()


def long_function():
    out = []
    for i in range(300):
        out.append(len(str(i)))
        out.append(abs(-i))
        out.append(max(i, 3))
        out.append(min(i, 3))
        out.append(hash(i))
        out.append(len(out))
        out.append(sorted([i, 1]))
        out.append(divmod(i, 7))
        out.append(round(i / 3))
        out.append(isinstance(i, int))
        out.append(repr(i))
        out.append(ord("a") + i)
        out.append(chr(65 + i % 26))
        out.append(bool(i))
        out.append(pow(i, 2))
        out.append(sum([i, i]))
        out.append(any([i]))
        out.append(all([i]))
    return out


def exceptions():
    def inner(i):
        if i % 3 == 0:
            raise KeyError(i)
        return {}[i]

    n = 0
    for i in range(500):
        try:
            inner(i)
        except KeyError:
            n += 1
        try:
            int("x%d" % i)
        except ValueError:
            n += 1
    return n


def classes():
    class P:
        def __init__(self, v):
            self.v = v
    return [str(P(i).v) for i in range(500)]


def main():
    out = sys.argv[1]
    fns = [runner.prepare_workload(w, 0.02) for w in
           ("call_heavy", "alloc_heavy", "generator_heavy", "stdlib_mix")]
    fns += [gen_throw, long_function, exceptions, classes]
    with tempfile.TemporaryDirectory(prefix="tgsame-") as d:
        prof = threadgraph.ProcessProfile(default_log_path=d, memory="thread", format="binary")
        prof.trackStack(True)
        prof.setProcessMemoryFrequence(20)
        prof.enable()
        for fn in fns:
            fn()
        prof.disable()
        paths = [os.path.join(root, f) for root, _, files in os.walk(d) for f in files
                 if f.endswith(".tg")]
        assert len(paths) == 1, paths
        cap = tgcapture.load(paths[0])
    n = 0
    with open(out, "w") as f:
        for stream in cap.order:
            calls, returns, dropped = cap.thread_records(stream)
            f.write("thread %s dropped %d\n" % (cap.threads[stream]["name"], dropped))
            for depth, _, file, line, fn in calls:
                f.write("C %d %s:%d:%s\n" % (depth, file.decode(errors="replace"), line,
                                             fn.decode(errors="replace")))
            for _, file, line, fn, delta in returns:
                f.write("R %s:%d:%s %s\n" % (file.decode(errors="replace"), line,
                                             fn.decode(errors="replace"), delta))
            n += len(calls) + len(returns)
    print("%d records" % n)


if __name__ == "__main__":
    main()
