"""Live at the peak (docs/accounting.md "Live at the peak"): snapshot-<N>-peak
holds every calling context's counters at the moment the process's live bytes
were highest, exactly.

Planted programs allocate bytearrays whose blocks are known exactly: a
bytearray of N bytes is one object of bytearray.__basicsize__ bytes and one
buffer of N + 1, both counted at the site of the call that made it.
"""
import json
import os
import subprocess

import pytest

import threadgraph
from tgtest import run_scenario

CLI = os.path.join(os.path.dirname(threadgraph.__file__), "_bin", "threadgraph")
MB = 1_000_000


def read_snapshot(path):
    """(header dict, {(context, thread): (live_bytes, live_count, total_bytes,
    total_count, thread)}) of a version 2 snapshot, contexts innermost first,
    "<-" joined, each call FILE:LINE:FUNCTION."""
    header, nodes, threads = {}, {}, {}
    with open(path) as f:
        text = f.read()
    assert text.startswith("# threadgraph snapshot 2\n")
    for line in text.splitlines():
        if line.startswith("# thread: "):
            ix, name = line[10:].split(" ", 1)
            threads[ix] = name
        elif line.startswith("# ") and ": " in line:
            k, v = line[2:].split(": ", 1)
            header[k] = v
        elif line and not line.startswith("#"):
            nid, parent, thread, lb, lc, tb, tc, call = line.split(" ", 7)
            assert parent == "-" or parent in nodes
            nodes[nid] = (parent, thread, int(lb), int(lc), int(tb), int(tc), call)
    sites = {}
    for nid, (parent, thread, lb, lc, tb, tc, func) in nodes.items():
        ctx = [func]
        while parent != "-":
            ctx.append(nodes[parent][6])
            parent = nodes[parent][0]
        key = ("<-".join(ctx), threads.get(thread, thread))
        assert key not in sites, key
        sites[key] = (lb, lc, tb, tc, key[1])
    return header, sites


def snapshot_path(run, label):
    """The run's last snapshot labelled LABEL."""
    names = [n for n in os.listdir(run) if n.startswith("snapshot-")
             and n.split("-", 2)[2] == label]
    assert names, sorted(os.listdir(run))
    return os.path.join(run, max(names, key=lambda n: int(n.split("-")[1])))


def funcs(ctx):
    """The function names of a context."""
    return [c.rsplit(":", 1)[-1] for c in ctx.split("<-")]


def site(sites, func):
    """The one site whose innermost call is FUNC."""
    found = [v for k, v in sites.items() if funcs(k[0])[0] == func]
    assert len(found) <= 1, found
    return found[0] if found else None


def summary(run):
    with open(os.path.join(run, "summary.json")) as f:
        return json.load(f)


def check_peak_header(header, run):
    """The peak snapshot's header: the nodes' live bytes sum to the process
    peak exactly, which is the summary's peak."""
    peak = summary(run)["process"]["peak_bytes"]
    assert header["label"] == "peak"
    assert int(header["process_live_bytes"]) == int(header["process_peak_bytes"]) == peak
    assert int(header["live_bytes"]) == peak
    assert int(header["total_bytes"]) >= peak


SINGLE = """
    from threadgraph import ProcessProfile

    N_F, N_G = 10_000_000, 6_000_000
    KEEP = []

    def f():
        a = bytearray(N_F)
        del a

    def g():
        KEEP.append(bytearray(N_G))

    p = ProcessProfile(default_log_path="out", accounting=True)
    p.enable()
    f()
    print("ONDEMAND", p.peak_snapshot())
    g()
    p.disable()
    print("BASIC", bytearray.__basicsize__)
    print(p.output_dir)
"""


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    proc = run_scenario(tmp_path_factory.mktemp("peak1"), SINGLE)
    out = proc.stdout.strip().splitlines()
    basic = int(out[1].split()[1])
    return out[-1], out[0].split(" ", 1)[1], basic


def test_peak_has_f_not_g(single):
    """f allocates 10 MB and frees it, then g keeps 6 MB: the peak holds f's
    10 MB (one buffer, one object) and nothing of g."""
    run, _, basic = single
    header, sites = read_snapshot(snapshot_path(run, "peak"))
    check_peak_header(header, run)
    f = site(sites, "f")
    assert f[:4] == (10 * MB + 1 + basic, 2, 10 * MB + 1 + basic, 2)
    assert f[4] == "MainThread"
    assert site(sites, "g") in (None, (0, 0, 0, 0, "MainThread"))
    # and the final snapshot says the opposite: g's 6 MB live, f's gone
    _, final = read_snapshot(snapshot_path(run, "final"))
    assert site(final, "g")[:2] == (6 * MB + 1 + basic, 2)
    assert site(final, "f")[0] == 0 and site(final, "f")[2] == 10 * MB + 1 + basic


def test_peak_time_is_when_it_happened(single):
    """# time: is the moment of the peak, inside the run and before the final
    snapshot was taken."""
    run, _, _ = single
    peak, _ = read_snapshot(snapshot_path(run, "peak"))
    final, _ = read_snapshot(snapshot_path(run, "final"))
    assert float(peak["run_start"]) <= float(peak["time"]) <= float(final["time"])


def test_peak_snapshot_on_demand(single):
    """peak_snapshot() during the run writes the peak so far: f's 10 MB."""
    run, path, basic = single
    assert os.path.basename(path) == "snapshot-1-peak"
    header, sites = read_snapshot(path)
    check_peak_header(header, run)   # the run's peak was already reached
    assert site(sites, "f")[:2] == (10 * MB + 1 + basic, 2)


def test_top_reads_the_peak(single):
    run, _, _ = single
    r = subprocess.run([CLI, "top", snapshot_path(run, "peak"), "--top", "1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    data = [l for l in r.stdout.splitlines() if not l.startswith("#")][1:]
    assert len(data) == 1 and data[0].endswith(":f"), r.stdout
    assert data[0].split()[0] == str(10 * MB + 1 + bytearray.__basicsize__)


def test_peak_across_threads(tmp_path):
    """Two threads hold 8 MB and 4 MB at the same time (the peak, 12 MB above
    the rest), then free them; main then allocates 11 MB: the peak has both
    threads' blocks at their sites and none of main's 11 MB."""
    proc = run_scenario(tmp_path, """
        import threading
        from threadgraph import ProcessProfile

        both = threading.Barrier(3)
        done = threading.Barrier(3)

        def make_a():
            return bytearray(8_000_000)

        def make_b():
            return bytearray(4_000_000)

        def hold_a():
            a = make_a()
            both.wait()
            done.wait()
            del a

        def hold_b():
            b = make_b()
            both.wait()
            done.wait()
            del b

        def later():
            c = bytearray(11_000_000)
            del c

        p = ProcessProfile(default_log_path="out", accounting=True)
        p.enable()
        ts = [threading.Thread(target=hold_a, name="ta"),
              threading.Thread(target=hold_b, name="tb")]
        for t in ts:
            t.start()
        both.wait()
        done.wait()
        for t in ts:
            t.join()
        later()
        p.disable()
        print(p.output_dir)
    """)
    run = proc.stdout.strip().splitlines()[-1]
    basic = bytearray.__basicsize__
    header, sites = read_snapshot(snapshot_path(run, "peak"))
    check_peak_header(header, run)
    assert site(sites, "make_a") == (8 * MB + 1 + basic, 2, 8 * MB + 1 + basic, 2, "ta")
    assert site(sites, "make_b") == (4 * MB + 1 + basic, 2, 4 * MB + 1 + basic, 2, "tb")
    assert site(sites, "later") in (None, (0, 0, 0, 0, "MainThread"))
    _, final = read_snapshot(snapshot_path(run, "final"))
    assert site(final, "later")[2] == 11 * MB + 1 + basic
    assert site(final, "make_a")[:2] == (0, 0)


def test_peak_consistent_with_raw_allocations_without_gil(tmp_path):
    """Threads decompress with zlib, which allocates its window through
    PyMem_RawMalloc with the GIL released, while others allocate with the GIL:
    the peak snapshot's nodes still sum exactly to the process peak (every hook
    is one step of one sequence), and so does the final snapshot to the live
    bytes."""
    proc = run_scenario(tmp_path, """
        import threading, zlib
        from threadgraph import ProcessProfile

        DATA = zlib.compress(bytes(range(256)) * 4000)

        def unzip():
            for _ in range(300):
                zlib.decompress(DATA)

        def churn():
            keep = []
            for i in range(3000):
                keep.append(bytearray(1000 + i % 5000))
                if len(keep) > 50:
                    keep.pop(0)

        p = ProcessProfile(default_log_path="out", accounting=True)
        p.enable()
        ts = [threading.Thread(target=unzip) for _ in range(3)]
        ts += [threading.Thread(target=churn) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        p.disable()
        print(p.output_dir)
    """)
    run = proc.stdout.strip().splitlines()[-1]
    header, sites = read_snapshot(snapshot_path(run, "peak"))
    check_peak_header(header, run)
    final, fsites = read_snapshot(snapshot_path(run, "final"))
    # zlib's allocations were counted, in each of the three threads
    assert len([k for k, v in fsites.items()
                if funcs(k[0])[:2] == ["decompress", "unzip"] and v[2]]) == 3
    assert int(final["live_bytes"]) == int(final["process_live_bytes"]) \
        == summary(run)["process"]["live_bytes"]
