"""CLI throughput: the threadgraph processor on a generated dump, MB/s.

    python3 bench/cli_bench.py [--mb 1000] [--cli PATH] [--dir DIR]

Times, on bench/gen_dump.py's dump (page cache warm):
    wc -l MEM                                   the ceiling: reading lines, nothing else
    threadgraph peaks MEM                       parse every line, keep the peaks
    threadgraph memg --script-only -o OUT MEM process.mem
                                                parse, build the series and the gnuplot
                                                script, without running gnuplot
    threadgraph decorate-stack MEM STACK LINE   a late event: both files read to the end
    python3 bench/orig_parse.py MEM process.mem the original's parsing loop in Python
    threadgraph peaks|memg|decorate-stack CAPDIR
                                                the same on the binary capture of the
                                                same dump (tests/cli/capture_encode.py,
                                                made once beside the dump), MB/s counted
                                                in bytes of the equivalent text files
MB/s is the bytes of the files the command is given divided by its median wall time;
CPU MB/s divides by the median CPU time (user + sys) instead, which a loaded machine
disturbs less.
run.py calls bench(); the result goes into results.json and RESULTS.md.
"""
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import gen_dump  # noqa: E402


def find_cli(explicit=None):
    for c in (explicit, os.path.join(ROOT, "build", "threadgraph"),
              os.path.join(ROOT, "threadgraph", "_bin", "threadgraph")):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def dump_dir(mb):
    return os.path.join(tempfile.gettempdir(), "tgbench-dump-%dmb" % mb)


def capture_dir(d, meta):
    """DUMP/capture/capture.tg, the binary capture of the dump, encoded once."""
    capdir = os.path.join(d, "capture")
    cap = os.path.join(capdir, "capture.tg")
    stamp = os.path.join(capdir, "source.json")
    want = "%d %d %d" % (meta["mem_bytes"], meta["stack_bytes"], meta["seed"])
    try:
        with open(stamp) as f:
            if f.read() == want and os.path.exists(cap):
                return capdir
    except OSError:
        pass
    shutil.rmtree(capdir, ignore_errors=True)
    os.makedirs(capdir)
    sys.path.insert(0, os.path.join(ROOT, "tests", "cli"))
    import capture_encode
    print("encoding the dump into %s ..." % cap, file=sys.stderr, flush=True)
    capture_encode.encode_stream(meta["mem"], meta["stack"], meta["process"], cap)
    with open(stamp, "w") as f:
        f.write(want)
    return capdir


def _time(cmd, cwd=None, repeats=3):
    """Median wall seconds and median CPU seconds (user + sys of the child)."""
    times, cpus = [], []
    for _ in range(repeats):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd)
        dt = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if p.returncode != 0:
            err = p.stderr.decode(errors="replace").strip().splitlines()
            return None, None, "exit %d: %s" % (p.returncode, err[-1] if err else "")
        times.append(dt)
        cpus.append((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
    return statistics.median(times), statistics.median(cpus), None


def bench(mb=1000, cli=None, quick=False, directory=None):
    free = shutil.disk_usage(tempfile.gettempdir()).free
    note = ""
    if free < 3 * mb * 1_000_000 + 1_000_000_000:
        mb = max(50, int((free - 1_000_000_000) / 3 / 1_000_000))
        note = " (smaller than asked: only %d MB free on disk)" % (free // 1_000_000)
    d = directory or dump_dir(mb)
    meta = gen_dump.load_or_generate(d, mb)
    mem, stack, proc = meta["mem"], meta["stack"], meta["process"]
    for p in (mem, stack, proc):  # warm the page cache
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass
    exe = find_cli(cli)
    out = tempfile.mkdtemp(prefix="tgbench-memg-")
    mem_b, stack_b, proc_b = meta["mem_bytes"], meta["stack_bytes"], meta["process_bytes"]
    repeats = 3
    cmds = [("wc -l", ["wc", "-l", mem], mem_b, repeats)]
    if exe:
        cmds += [
            ("threadgraph peaks", [exe, "peaks", mem], mem_b, repeats),
            ("threadgraph memg --script-only", [exe, "memg", "--script-only", "-o", out, mem, proc],
             mem_b + proc_b, repeats),
            ("threadgraph decorate-stack", [exe, "decorate-stack", mem, stack, str(meta["event_line"])],
             mem_b + stack_b, repeats),
        ]
        capdir = capture_dir(d, meta)
        cmds += [
            ("threadgraph peaks (capture)", [exe, "peaks", capdir], mem_b, repeats),
            ("threadgraph memg --script-only (capture)",
             [exe, "memg", "--script-only", "-o", out, capdir], mem_b + proc_b, repeats),
            ("threadgraph decorate-stack (capture)",
             [exe, "decorate-stack", capdir, "MainThread", str(meta["event_line"])],
             mem_b + stack_b, repeats),
        ]
    # The Python loop takes about a minute per GB: once is enough for a big file.
    cmds.append(("python original loop", [sys.executable, os.path.join(HERE, "orig_parse.py"), mem, proc],
                 mem_b + proc_b, 1 if mem_b > 300_000_000 else repeats))
    capfile = os.path.join(d, "capture", "capture.tg")
    res = {"dump": os.path.dirname(mem), "mem_bytes": mem_b, "stack_bytes": stack_b,
           "capture_bytes": os.path.getsize(capfile) if os.path.exists(capfile) else None,
           "mem_lines": meta["mem_lines"], "peaks": meta["peaks"], "note": note,
           "repeats": repeats, "cli": exe, "commands": {}}
    if not exe:
        res["note"] += " (threadgraph CLI not built: run make)"
    try:
        for name, cmd, nbytes, rep in cmds:
            secs, cpu, err = _time(cmd, cwd=out, repeats=rep)
            shown = " ".join(os.path.basename(c) if c in (mem, stack, proc, exe) else c for c in cmd)
            shown = shown.replace(os.path.join(d, "capture"), "CAPDIR")
            shown = shown.replace(out, "OUT").replace(sys.executable, "python3")
            r = {"cmd": shown, "bytes": nbytes, "repeats": rep}
            if err:
                r.update({"mbs": None, "error": err})
            else:
                r.update({"seconds": secs, "mbs": nbytes / 1e6 / secs, "cpu_seconds": cpu,
                          "cpu_mbs": nbytes / 1e6 / cpu if cpu > 0 else None})
            res["commands"][name] = r
            print("%-32s %s" % (name, ("%.0f MB/s (%.2f s)" % (r["mbs"], secs)) if not err else err),
                  file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return res


if __name__ == "__main__":
    import argparse
    import json
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=1000)
    ap.add_argument("--cli")
    ap.add_argument("--dir")
    a = ap.parse_args()
    json.dump(bench(a.mb, a.cli, directory=a.dir), sys.stdout, indent=1)
    print()
