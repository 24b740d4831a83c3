"""Accounting by sampling (ProcessProfile(sample_bytes=N), docs/accounting.md
"Sampling"): sites get unbiased estimates from randomised sampling, within a
stated error of the exact figures; process and thread figures stay exact.

A planted program is run once exactly and under several seeds
(THREADGRAPH_SAMPLE_SEED); each planted site's estimate is compared with the
exact run's figure for that site, within ERR_SIGMAS standard deviations computed
from the planted sizes (the Horvitz-Thompson variance, docs/accounting.md).
The main thread's allocations differ a little from run to run (paths, pids), so
which blocks are sampled does too even with a fixed seed: the bounds are wide
enough (4.5 sd, about 1e-5 per check) that the tests do not flake.
"""
import json
import math
import os

import pytest

from tgtest import parse_mem, run_scenario

N = 16384
SEEDS = (1, 2, 3, 4, 5)
# Bound of one seed's estimate, and of the mean over SEEDS (in its own standard
# deviation, sd / sqrt(len(SEEDS))), in standard deviations.
ERR_SIGMAS = 4.5
MEAN_SIGMAS = 4.5

PROGRAM = """
import sys
from threadgraph import ProcessProfile

KEEP = []

def small():            # 30 000 blocks of 301 bytes, kept
    for _ in range(30000):
        KEEP.append(bytearray(300))

def medium():           # 500 blocks of 20 001 bytes, kept
    for _ in range(500):
        KEEP.append(bytearray(20000))

def churn():            # 20 000 blocks of 501 bytes, freed
    for _ in range(20000):
        b = bytearray(500)
        del b

def alt_a():
    KEEP.append(bytearray(%(alt)d))

def alt_b():
    KEEP.append(bytearray(%(alt)d))

def alternate():        # a, b, a, b...: one round is about N bytes
    for _ in range(1000):
        alt_a()
        alt_b()

p = ProcessProfile(format="text", default_log_path="out", accounting=True,
                   sample_bytes=int(sys.argv[1]))
p.enable()
small(); medium(); churn(); alternate()
p.disable()
print(bytearray.__basicsize__)
print(p.output_dir)
"""
# alt_a's object + buffer + its share of the list: half of N.
ALT = N // 2 - 64


def planted_sizes(basic):
    """site -> (sizes of its planted blocks, how many of each, kept?)."""
    return {
        "small": ([basic, 301], 30000),
        "medium": ([basic, 20001], 500),
        "churn": ([basic, 501], 20000),
        "alt_a": ([basic, ALT + 1], 1000),
        "alt_b": ([basic, ALT + 1], 1000),
    }


def sd_bytes(sizes, n, mean):
    """Standard deviation of a sampled byte sum of N blocks of each of SIZES."""
    var = 0.0
    for s in sizes:
        p = -math.expm1(-s / mean)
        var += n * s * s * (1 - p) / p
    return math.sqrt(var)


def sites_of(path):
    """{innermost function: [live_bytes, live_count, total_bytes, total_count]},
    summed over the contexts, and the header."""
    header, nodes, sites = {}, {}, {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# ") and ": " in line:
                k, v = line[2:].split(": ", 1)
                header[k] = v
            elif line and not line.startswith("#"):
                nid, parent, thread, lb, lc, tb, tc, call = line.split(" ", 7)
                func = call.rsplit(":", 1)[-1]
                acc = sites.setdefault(func, [0, 0, 0, 0])
                for i, v in enumerate((lb, lc, tb, tc)):
                    acc[i] += int(v)
    return header, sites


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """{seed or 'exact': (run dir, basicsize)}."""
    tmp = tmp_path_factory.mktemp("sample")
    out = {}
    for key, sb, seed in [("exact", 0, 0)] + [(s, N, s) for s in SEEDS]:
        d = tmp / str(key)
        d.mkdir()
        env = {"THREADGRAPH_SAMPLE_SEED": str(seed), "PYTHONHASHSEED": "0"}
        script = PROGRAM % {"alt": ALT}
        # the scenario reads sample_bytes from argv: pass it through a wrapper
        proc = run_scenario(d, "import sys; sys.argv[1:] = [%r]\n" % str(sb) + script, env=env)
        lines = proc.stdout.strip().splitlines()
        out[key] = (lines[-1], int(lines[-2]))
    return out


def final(run_dir):
    return sites_of(os.path.join(run_dir, [n for n in os.listdir(run_dir)
                                           if n.endswith("-final")][0]))


def test_sampled_header_and_summary(runs):
    run_dir, _ = runs[SEEDS[0]]
    header, _ = final(run_dir)
    assert header["sampled"] == str(N)
    with open(os.path.join(run_dir, "summary.json")) as f:
        s = json.load(f)
    assert s["sample_bytes"] == N
    # the process figures are exact: the header's process counter is the summary's
    assert int(header["process_live_bytes"]) == s["process"]["live_bytes"]
    exact_header, _ = final(runs["exact"][0])
    assert "sampled" not in exact_header
    with open(os.path.join(runs["exact"][0], "summary.json")) as f:
        assert json.load(f)["sample_bytes"] == 0


@pytest.mark.parametrize("site,column", [
    ("small", 0), ("medium", 0), ("alt_a", 0), ("alt_b", 0),   # live bytes
    ("small", 2), ("medium", 2), ("churn", 2),                  # total bytes
])
def test_estimates_within_stated_error(runs, site, column):
    """Each seed's estimate is within ERR_SIGMAS sd of the exact figure, and
    their mean within MEAN_SIGMAS sd of the mean."""
    _, exact_sites = final(runs["exact"][0])
    basic = runs["exact"][1]
    sizes, n = planted_sizes(basic)[site]
    truth = exact_sites[site][column]
    planted = n * sum(sizes)
    # Besides the planted blocks a site has the interpreter's: the loop's int
    # objects, the list it appends to (in totals, each of its resizes).  Their
    # sizes are unknown, but any block of s bytes adds at most N * s to the
    # variance (s^2 (1 - p) / p <= N s), which bounds their share.
    assert planted <= truth <= 1.5 * planted
    sd = math.sqrt(sd_bytes(sizes, n, N) ** 2 + N * (truth - planted))
    ests = []
    for seed in SEEDS:
        _, sites = final(runs[seed][0])
        est = sites.get(site, [0, 0, 0, 0])[column]
        ests.append(est)
        assert abs(est - truth) <= ERR_SIGMAS * sd, (seed, est, truth, sd)
    mean = sum(ests) / len(ests)
    assert abs(mean - truth) <= MEAN_SIGMAS * sd / math.sqrt(len(SEEDS)), (ests, truth, sd)
    # the stated error is a few percent of these sites
    assert ERR_SIGMAS * sd / truth < 0.2


def test_freed_site_has_nothing_live(runs):
    """What was freed is taken away with exactly the weight it was added with."""
    for seed in SEEDS:
        _, sites = final(runs[seed][0])
        assert sites["churn"][0] == 0 and sites["churn"][1] == 0


def test_interval_is_random(runs):
    """Different seeds sample different blocks (so the estimates differ), and
    the alternating sites, whose round is exactly one mean interval, share the
    samples instead of one of them taking all (what a fixed interval does)."""
    smalls = {final(runs[s][0])[1]["small"][0] for s in SEEDS}
    assert len(smalls) == len(SEEDS)
    for seed in SEEDS:
        _, sites = final(runs[seed][0])
        a, b = sites["alt_a"][0], sites["alt_b"][0]
        assert 0.7 < a / b < 1.4, (seed, a, b)


REPRO = """
import sys, threading
from threadgraph import ProcessProfile

KEEP = []

def small():
    for _ in range(30000):
        KEEP.append(bytearray(300))

p = ProcessProfile(default_log_path="out", sample_bytes=%d)
p.enable()
t = threading.Thread(target=small, name="worker")
t.start(); t.join()
p.disable()
print(p.output_dir)
""" % N


def test_same_seed_same_estimates(tmp_path):
    """THREADGRAPH_SAMPLE_SEED makes a thread's samples reproducible: a thread's
    generator depends on the seed and the thread's number only, so the same
    allocations in a fresh thread are sampled alike (the main thread's
    allocations depend on the paths and pids of each run, its samples do not
    repeat exactly); another seed samples differently."""
    got = []
    for name, seed in (("a", 11), ("run-b", 11), ("c", 12)):
        d = tmp_path / name
        d.mkdir()
        env = {"THREADGRAPH_SAMPLE_SEED": str(seed), "PYTHONHASHSEED": "0"}
        proc = run_scenario(d, REPRO, env=env)
        _, nodes = final_threads(proc.stdout.strip().splitlines()[-1])
        got.append(nodes[("small", "worker")])
    assert got[0] == got[1]
    assert got[0] != got[2]


def final_threads(run_dir):
    """Like final(), keyed by (innermost function, thread base name)."""
    path = os.path.join(run_dir, [n for n in os.listdir(run_dir) if n.endswith("-final")][0])
    threads, sites = {}, {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# thread: "):
                ix, name = line[10:].split(" ", 1)
                threads[ix] = name
            elif line and not line.startswith("#"):
                _nid, _parent, thread, lb, lc, tb, tc, call = line.split(" ", 7)
                key = (call.rsplit(":", 1)[-1], threads.get(thread, thread))
                acc = sites.setdefault(key, [0, 0, 0, 0])
                for i, v in enumerate((lb, lc, tb, tc)):
                    acc[i] += int(v)
    return None, sites


def test_per_call_deltas_stay_exact(runs):
    """The .mem records (per-call deltas) do not depend on sampling."""
    def deltas(run_dir):
        recs = parse_mem(os.path.join(run_dir, "MainThread.mem"))
        return [(func, delta) for _site, _line, func, delta in recs
                if func in ("small", "medium", "churn", "alternate")]
    exact = deltas(runs["exact"][0])
    assert [f for f, _ in exact] == ["small", "medium", "churn", "alternate"]
    for seed in SEEDS:
        assert deltas(runs[seed][0]) == exact


def test_threadgraph_run_sample_bytes(tmp_path):
    """threadgraph run --sample-bytes N turns accounting on, sampled; the peak
    snapshot is written too and `top` reads it."""
    import subprocess
    import sys
    import threadgraph
    script = tmp_path / "prog.py"
    script.write_text("KEEP = []\ndef leak_it():\n    KEEP.append(bytearray(3_000_000))\n"
                      "leak_it()\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(threadgraph.__file__))
    res = subprocess.run([sys.executable, "-m", "threadgraph", "run", "--sample-bytes", "65536",
                          "-o", str(tmp_path / "out"), str(script)],
                         cwd=str(tmp_path), env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    (run_dir,) = [os.path.join(tmp_path, "out", d) for d in os.listdir(tmp_path / "out")]
    header, sites = final(run_dir)
    assert header["sampled"] == "65536"
    # a 3 MB block is sampled with probability 1 - exp(-45.8): its weight is its size
    assert sites["leak_it"][0] >= 3_000_001
    peak = [n for n in os.listdir(run_dir) if n.endswith("-peak")]
    assert len(peak) == 1
    cli = os.path.join(os.path.dirname(threadgraph.__file__), "_bin", "threadgraph")
    r = subprocess.run([cli, "top", os.path.join(run_dir, peak[0]), "--top", "1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "leak_it" in r.stdout, (r.stdout, r.stderr)
    bad = subprocess.run([sys.executable, "-m", "threadgraph", "run", "--sample-bytes", "0",
                          "-o", str(tmp_path / "out2"), str(script)],
                         cwd=str(tmp_path), env=env, capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode != 0 and "--sample-bytes" in bad.stderr
