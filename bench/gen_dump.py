#!/usr/bin/env python3
"""Generate a realistic threadgraph dump of a given size, for the CLI throughput bench.

    python3 bench/gen_dump.py OUTDIR [--mb 1000] [--seed 1]

Writes OUTDIR/MainThread.mem (about MB megabytes), the matching MainThread.stack
(calls in pre-order, returns in post-order, so decorate-stack can pair them),
OUTDIR/process.mem (one RSS sample per 1000 events) and OUTDIR/dump.json describing
the files (sizes, line counts, peaks above 200 KB, and a late event for
decorate-stack).  Timestamps increase; deltas are mostly small, about a third zero,
with a peak above 200 KB roughly every 50,000 returns.

A block of BLOCK_EVENTS calls (a random forest of call trees, depth <= 12, Python
and C functions from a pool of realistic names) is generated once and written again
and again with later timestamps, so that generating a gigabyte takes seconds of
string formatting rather than minutes of random numbers.
"""
import argparse
import json
import os
import random
import sys

FORMAT_VERSION = 2
BLOCK_EVENTS = 200_000
START_TIME = 1763766000.0
PEAK_BYTES = 200 * 1024

PY_FUNCS = [
    ("/usr/lib/python3.11/json/encoder.py", 183, "encode", 200),
    ("/usr/lib/python3.11/json/encoder.py", 205, "iterencode", 258),
    ("/usr/lib/python3.11/json/decoder.py", 332, "decode", 338),
    ("/usr/lib/python3.11/re/__init__.py", 163, "match", 166),
    ("/usr/lib/python3.11/re/__init__.py", 272, "_compile", 294),
    ("/usr/lib/python3.11/threading.py", 288, "wait", 320),
    ("/usr/lib/python3.11/threading.py", 1007, "_bootstrap_inner", 1045),
    ("/usr/lib/python3.11/logging/__init__.py", 1477, "info", 1489),
    ("/usr/lib/python3.11/logging/__init__.py", 1610, "_log", 1634),
    ("/home/app/service/handlers.py", 41, "handle_request", 77),
    ("/home/app/service/handlers.py", 80, "parse_body", 96),
    ("/home/app/service/models.py", 12, "__init__", 25),
    ("/home/app/service/models.py", 30, "to_dict", 44),
    ("/home/app/service/cache.py", 18, "get", 27),
    ("/home/app/service/cache.py", 30, "put", 52),
    ("/home/app/service/db.py", 101, "query", 140),
    ("/home/app/service/db.py", 145, "fetch_rows", 170),
    ("/home/app/service/util.py", 5, "chunks", 11),
    ("/home/app/service/util.py", 14, "<listcomp>", 14),
    ("/home/app/service/util.py", 20, "<genexpr>", 20),
]
C_FUNCS = [("builtins", "len"), ("builtins", "isinstance"), ("builtins", "sorted"),
           ("None", "append"), ("None", "get"), ("None", "join"), ("_json", "encode_basestring"),
           ("time", "sleep"), ("None", "acquire"), ("builtins", "print")]


def make_block(rng):
    """Return (stack_parts, mem_parts, rel_times_stack, rel_times_mem, info).

    stack_parts[i] is a .stack line without its TIME (indent, then '#'-joined rest);
    the caller prepends the time.
    """
    stack, mem, ts, tm = [], [], [], []
    top_returns = []  # (index in mem, subtree size)
    t = 0.0
    peaks = 0
    open_ = []  # (func text for mem without line, start index of subtree)
    events = 0
    while events < BLOCK_EVENTS or open_:
        depth = len(open_)
        p_open = 0.0 if events >= BLOCK_EVENTS else (1.0 if depth == 0 else 0.55 - 0.04 * depth)
        if rng.random() < p_open and depth < 12:
            t += rng.uniform(1e-6, 2e-5)
            if rng.random() < 0.7:
                f, first, name, ret = rng.choice(PY_FUNCS)
                stack.append((" " * depth, "%s:%d:%s" % (f, first, name)))
                open_.append(("%s:%d:%s" % (f, ret + rng.randint(-3, 0), name), len(mem), events))
            else:
                mod, name = rng.choice(C_FUNCS)
                line = rng.randint(10, 400)
                stack.append((" " * depth, "%s:%d:%s" % (mod, line, name)))
                open_.append(("%s:%d:%s" % (mod, line, name), len(mem), events))
            ts.append(t)
            events += 1
        else:
            site, start_mem, start_ev = open_.pop()
            t += rng.uniform(1e-6, 3e-5)
            r = rng.random()
            if r < 0.33:
                delta = 0
            elif r < 0.99998:
                delta = int(rng.choice((-1, 1)) * rng.expovariate(1 / 600.0))
            else:
                delta = rng.randint(PEAK_BYTES + 1, 50 * 1024 * 1024) * rng.choice((-1, 1))
            if abs(delta) / 1024.0 > 200:
                peaks += 1
            mem.append("%s=>%d" % (site, delta))
            tm.append(t)
            if not open_:
                top_returns.append((len(mem) - 1, len(mem) - start_mem))
    return stack, mem, ts, tm, t, peaks, top_returns


def generate(outdir, mb, seed=1):
    rng = random.Random(seed)
    os.makedirs(outdir, exist_ok=True)
    meta_path = os.path.join(outdir, "dump.json")
    target = mb * 1_000_000
    stack, mem, ts, tm, span, peaks_per_block, top_returns = make_block(rng)
    span += 1e-3
    mem_path = os.path.join(outdir, "MainThread.mem")
    stack_path = os.path.join(outdir, "MainThread.stack")
    proc_path = os.path.join(outdir, "process.mem")
    n_blocks = 0
    mem_bytes = stack_bytes = 0
    mem_lines = 0
    rss = 30_000_000
    with open(mem_path, "w") as fm, open(stack_path, "w") as fs, open(proc_path, "w") as fp:
        while mem_bytes < target:
            base = START_TIME + n_blocks * span
            sm = "".join(["%.6f#%s\n" % (base + t, s) for t, s in zip(tm, mem)])
            ss = "".join(["%s%.6f#%s\n" % (ind, base + t, s) for t, (ind, s) in zip(ts, stack)])
            fm.write(sm)
            fs.write(ss)
            for k in range(0, len(tm), 1000):
                rss += rng.randint(-200_000, 220_000)
                fp.write("%.6f#%d\n" % (base + tm[k], max(rss, 10_000_000)))
            mem_bytes += len(sm)
            stack_bytes += len(ss)
            mem_lines += len(mem)
            n_blocks += 1
    # A late event: a top-level return of moderate subtree size in the last block.
    cands = [(i, n) for i, n in top_returns if 20 <= n <= 400] or top_returns
    idx, size = cands[-1]
    event_line = (n_blocks - 1) * len(mem) + idx + 1
    meta = {
        "version": FORMAT_VERSION, "seed": seed, "mb": mb,
        "mem": mem_path, "stack": stack_path, "process": proc_path,
        "mem_bytes": os.path.getsize(mem_path), "stack_bytes": os.path.getsize(stack_path),
        "process_bytes": os.path.getsize(proc_path),
        "mem_lines": mem_lines, "blocks": n_blocks,
        "peaks": peaks_per_block * n_blocks,
        "event_line": event_line, "event_subtree": size,
    }
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=1)
    return meta


def load_or_generate(outdir, mb, seed=1):
    """Reuse OUTDIR's dump when it was generated with the same size, seed and version."""
    meta_path = os.path.join(outdir, "dump.json")
    try:
        with open(meta_path) as f:
            meta = json.load(f)
        if (meta.get("version"), meta.get("mb"), meta.get("seed")) == (FORMAT_VERSION, mb, seed) \
                and os.path.getsize(meta["mem"]) == meta["mem_bytes"]:
            return meta
    except (OSError, ValueError, KeyError):
        pass
    if os.path.exists(meta_path):
        os.unlink(meta_path)
    return generate(outdir, mb, seed)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir")
    ap.add_argument("--mb", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    json.dump(load_or_generate(a.outdir, a.mb, a.seed), sys.stdout, indent=1)
    print()
