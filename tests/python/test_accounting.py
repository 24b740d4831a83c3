"""Allocation accounting (docs/accounting.md) on known programs: a planted leak,
planted allocation sizes and a known peak, checked exactly where the interpreter
allows and within named tolerances where it does not.

Each scenario runs in a fresh interpreter (run_scenario) and prints the run
directory; the test reads summary.json, summary.txt and the snapshots, and runs
the CLI on them.
"""
import gzip
import json
import os
import subprocess
import sys

import pytest

import threadgraph
from tgtest import run_scenario

# A bytearray of N bytes is one block of N + 1 bytes (the buffer, with its NUL)
# plus its object (about 57 bytes); anything else live at the site is noise.
HEADER_TOLERANCE = 1024
# Interpreter allocations around a planted peak (frames, small objects).
PEAK_TOLERANCE = 64 * 1024
LEAK = 1_000_000
CHURN = 100_000   # bit length 17: bin 17 holds [64 KiB, 128 KiB)
CHURN_BIN = CHURN.bit_length()
N_CHURN = 10

CLI = os.path.join(os.path.dirname(threadgraph.__file__), "_bin", "threadgraph")

PROGRAM = """
import sys, threading
from threadgraph import ProcessProfile

KEEP = []

def leak_it():
    KEEP.append(bytearray(%(leak)d))

def churn():
    for _ in range(%(n)d):
        b = bytearray(%(churn)d)
        del b

def peak():
    a = bytearray(5_000_000)
    del a
    b = bytearray(3_000_000)
    del b

def step():
    pass

def main(p):
    p.snapshot("before")
    p.snapshot_every(start_after=2, stop_after=6, every=2, function=step)
    t = threading.Thread(target=leak_it, name="leaker")
    t.start(); t.join()
    t = threading.Thread(target=churn, name="churner")
    t.start(); t.join()
    for _ in range(10):
        step()
    with p.window("event loop") as w:
        peak()
    print("WINDOW", w.figures)

p = ProcessProfile(format="text", default_log_path="out", accounting=True, compress=%(compress)s)
p.enable()
main(p)
p.disable()
print(p.output_dir)
""" % {"leak": LEAK, "churn": CHURN, "n": N_CHURN, "compress": "%(compress)s"}


def run_program(tmp_path, compress=False):
    proc = run_scenario(tmp_path, PROGRAM % {"compress": compress})
    return proc.stdout.strip().splitlines()[-1]


def read(path):
    if path.endswith(".gz"):
        with gzip.open(path, "rt") as f:
            return f.read()
    with open(path) as f:
        return f.read()


def snapshot_nodes(path):
    """The nodes of a version 2 snapshot: {id: (parent, thread, lb, lc, tb, tc, call)},
    and the thread names by index."""
    text = read(path)
    assert text.startswith("# threadgraph snapshot 2\n")
    nodes, threads = {}, {}
    for line in text.splitlines():
        if line.startswith("# thread: "):
            ix, name = line[10:].split(" ", 1)
            threads[ix] = name
        elif line and not line.startswith("#"):
            nid, parent, thread, lb, lc, tb, tc, call = line.split(" ", 7)
            assert parent == "-" or parent in nodes      # parents first
            nodes[nid] = (parent, thread, int(lb), int(lc), int(tb), int(tc), call)
    return nodes, threads


def snapshot_rows(path):
    """One row per node with counts, largest live first:
    (live_bytes, live_count, total_bytes, total_count, context, thread) where
    context is the whole calling context, innermost first, "<-" separated."""
    nodes, threads = snapshot_nodes(path)
    rows = []
    for nid, (parent, thread, lb, lc, tb, tc, call) in nodes.items():
        if not (lb or lc or tb or tc):
            continue
        ctx = [call]
        while parent != "-":
            ctx.append(nodes[parent][6])
            parent = nodes[parent][0]
        rows.append((lb, lc, tb, tc, "<-".join(ctx), threads.get(thread, thread)))
    rows.sort(key=lambda r: (-r[0], -r[1], r[4]))
    return rows


def cli(*args):
    return subprocess.run([CLI] + list(args), capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("acct")
    return run_program(tmp)


def test_files(run):
    names = sorted(os.listdir(run))
    assert "summary.json" in names and "summary.txt" in names
    snaps = [n for n in names if n.startswith("snapshot-")]
    # before, three periodic ones (calls 2, 4, 6 of step), the final one, the peak
    assert sorted(snaps, key=lambda n: int(n.split("-")[1])) == [
        "snapshot-1-before", "snapshot-2-call-2", "snapshot-3-call-4",
        "snapshot-4-call-6", "snapshot-5-final", "snapshot-6-peak"]


def test_leak_site_in_final_snapshot(run):
    rows = snapshot_rows(os.path.join(run, "snapshot-5-final"))
    leak = [r for r in rows if r[4].split("<-")[0].endswith(":leak_it")]
    assert len(leak) == 1, rows[:5]
    live_bytes, live_count = leak[0][0], leak[0][1]
    assert LEAK <= live_bytes <= LEAK + HEADER_TOLERANCE
    assert live_count >= 1
    # the biggest live site of the run is the leak
    assert rows[0] == leak[0]
    # the churn site allocated 10 x 100 KB and kept none of it
    churn = [r for r in rows if ":churn" in r[4].split("<-")[0]]
    assert churn
    assert churn[0][0] < HEADER_TOLERANCE
    assert N_CHURN * CHURN <= churn[0][2] <= N_CHURN * CHURN + N_CHURN * HEADER_TOLERANCE


def test_leak_absent_before(run):
    rows = snapshot_rows(os.path.join(run, "snapshot-1-before"))
    assert not [r for r in rows if "leak_it" in r[4]]


def test_histogram_bins_exact(run):
    with open(os.path.join(run, "summary.json")) as f:
        s = json.load(f)
    churner = [t for t in s["threads"] if t["name"] == "churner"]
    assert len(churner) == 1
    # The churn thread's only allocations in [64 KiB, 128 KiB) are the planted ones.
    assert churner[0]["hist_alloc"][CHURN_BIN] == N_CHURN
    assert churner[0]["hist_free"][CHURN_BIN] == N_CHURN
    leaker = [t for t in s["threads"] if t["name"] == "leaker"][0]
    assert leaker["hist_alloc"][LEAK.bit_length()] == 1
    assert leaker["hist_free"][LEAK.bit_length()] == 0
    proc = s["process"]
    assert proc["hist_alloc"][CHURN_BIN] >= N_CHURN
    assert sum(proc["hist_alloc"]) == proc["alloc_calls"]
    assert sum(proc["hist_free"]) == proc["free_calls"]


def test_summary_json_text(run):
    """summary.json: the JSON the indented encoder would give, one top-level key
    a line and each thread, window and pair on its own line."""
    from threadgraph._accounting import summary_json
    with open(os.path.join(run, "summary.json"), encoding="utf-8") as f:
        text = f.read()
    doc = json.loads(text)
    assert text == summary_json(doc)
    assert json.loads(summary_json(doc)) == json.loads(json.dumps(doc, indent=2))
    lines = text.splitlines()
    assert lines[0] == "{" and lines[1] == '  "format": 1,' and lines[-1] == "}"
    for key in ("threads", "windows", "freed_by"):
        if doc[key]:
            start = lines.index('  "%s": [' % key) + 1
            rows = lines[start:start + len(doc[key])]
            assert [json.loads(l.strip().rstrip(",")) for l in rows] == doc[key]
            assert lines[start + len(doc[key])].startswith("  ]")
    odd = {"format": 1, "empty": [], "nested": {"a": [1, {"b": "é\x01"}]},
           "list": [{"x": 1.5}, [2, 3], "s"]}
    assert json.loads(summary_json(odd)) == odd


def test_summary_figures(run):
    with open(os.path.join(run, "summary.json")) as f:
        s = json.load(f)
    proc = s["process"]
    planted = LEAK + N_CHURN * CHURN + 5_000_000 + 3_000_000
    assert proc["total_requested_bytes"] >= planted
    assert proc["live_bytes"] >= LEAK
    assert proc["live_bytes"] == proc["total_requested_bytes"] - proc["freed_bytes"] or \
        proc["live_bytes"] <= proc["total_requested_bytes"] - proc["freed_bytes"]
    assert proc["peak_bytes"] >= 5_000_000 + LEAK
    assert proc["alloc_calls"] >= 1 + N_CHURN + 2
    leaker = [t for t in s["threads"] if t["name"] == "leaker"][0]
    assert LEAK <= leaker["live_bytes"] <= LEAK + PEAK_TOLERANCE
    churner = [t for t in s["threads"] if t["name"] == "churner"][0]
    assert churner["peak_bytes"] < 2 * CHURN + PEAK_TOLERANCE


def test_window_peak(run):
    with open(os.path.join(run, "summary.json")) as f:
        s = json.load(f)
    (w,) = s["windows"]
    assert w["name"] == "event loop"
    p = w["process"]
    # 5 MB, freed, then 3 MB: the peak inside is 5 MB above the level at entry
    assert abs(p["peak_above_start_bytes"] - 5_000_000) <= PEAK_TOLERANCE
    assert 8_000_000 <= p["total_requested_bytes"] <= 8_000_000 + PEAK_TOLERANCE
    assert abs(p["live_bytes"]) < PEAK_TOLERANCE
    assert p["alloc_calls"] >= 2 and p["free_calls"] >= 2


def test_cli_summary_and_hist(run, tmp_path):
    r = cli("summary", run)
    assert r.returncode == 0, r.stderr
    assert "total_requested_bytes" in r.stdout and "churner" in r.stdout
    r = cli("summary", "--json", run)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["process"]["peak_bytes"] > 0
    r = cli("hist", run, "-o", str(tmp_path), "--script-only")
    assert r.returncode == 0, r.stderr
    assert os.path.exists(tmp_path / "hist-plot" / "hist.gp") and os.path.exists(tmp_path / "hist-plot" / "hist.dat")
    lines = r.stdout.split("\n\nthread churner\n")[1].splitlines()
    row = [l.split() for l in lines if l.split() and l.split()[0] == str(CHURN_BIN)]
    assert row == [[str(CHURN_BIN), "64Ki-128Ki", str(N_CHURN), str(N_CHURN)]]


def test_cli_diff_shows_the_leak_first(run):
    r = cli("diff", "--base", os.path.join(run, "snapshot-1-before"), run, "--top", "3")
    assert r.returncode == 0, r.stderr
    data = [l for l in r.stdout.splitlines() if not l.startswith("#")][1:]
    first = data[0].split(None, 6)
    assert first[5] == "leaker" and "leak_it" in first[6]
    assert LEAK <= int(first[0]) <= LEAK + HEADER_TOLERANCE


def test_cli_top(run):
    r = cli("top", run, "--top", "1")
    assert r.returncode == 0, r.stderr
    data = [l for l in r.stdout.splitlines() if not l.startswith("#")][1:]
    assert len(data) == 1 and "leak_it" in data[0]
    r = cli("top", run, "--sort", "total", "--top", "1")
    assert r.returncode == 0, r.stderr


def test_compressed_outputs(tmp_path):
    run = run_program(tmp_path, compress=True)
    names = os.listdir(run)
    assert "summary.json.gz" in names and "summary.txt.gz" in names
    assert "snapshot-5-final.gz" in names
    with gzip.open(os.path.join(run, "snapshot-5-final.gz"), "rt") as f:
        assert f.readline() == "# threadgraph snapshot 2\n"
    r = cli("top", os.path.join(run, "snapshot-5-final.gz"), "--top", "1")
    assert r.returncode == 0 and "leak_it" in r.stdout, r.stderr
    r = cli("summary", "--json", run)
    assert r.returncode == 0 and json.loads(r.stdout)["process"]["live_bytes"] >= LEAK
    r = cli("diff", "--base", os.path.join(run, "snapshot-1-before.gz"), run)
    assert r.returncode == 0 and "leak_it" in r.stdout.splitlines()[4], r.stdout


def test_off_by_default(tmp_path):
    proc = run_scenario(tmp_path, """
        from threadgraph import ProcessProfile
        p = ProcessProfile(format="text", default_log_path="out")
        p.enable()
        x = [bytearray(1000) for _ in range(10)]
        try:
            p.snapshot("x")
        except RuntimeError as e:
            print("RAISED", e)
        p.disable()
        print(p.output_dir)
    """)
    out = proc.stdout.strip().splitlines()
    assert out[0].startswith("RAISED")
    names = os.listdir(out[-1])
    assert not [n for n in names if n.startswith(("summary", "snapshot"))]


def test_seconds_schedule_and_bad_arguments(tmp_path):
    proc = run_scenario(tmp_path, """
        import time
        from threadgraph import ProcessProfile
        def work():
            return bytearray(10)
        p = ProcessProfile(format="text", default_log_path="out", accounting=True)
        p.enable()
        for bad in (dict(every=0, seconds=True), dict(seconds=True, function=work),
                    dict(every=1)):
            try:
                p.snapshot_every(**bad)
            except (ValueError, TypeError) as e:
                print("BAD", type(e).__name__)
        p.snapshot_every(start_after=0, stop_after=0, every=1, seconds=True)
        end = time.time() + 0.3
        while time.time() < end:
            work()
        p.disable()
        print(p.output_dir)
    """)
    out = proc.stdout.strip().splitlines()
    assert out[:3] == ["BAD ValueError"] * 3
    snaps = sorted(n for n in os.listdir(out[-1]) if n.startswith("snapshot-"))
    assert snaps == ["snapshot-1-t-0s", "snapshot-2-final", "snapshot-3-peak"]


def test_forked_child_does_no_accounting(tmp_path):
    proc = run_scenario(tmp_path, """
        import os
        from threadgraph import ProcessProfile
        KEEP = []
        def leak_it():
            KEEP.append(bytearray(1_000_000))
        p = ProcessProfile(format="text", default_log_path="out", accounting=True)
        p.enableForkedProfile()
        p.enable()
        pid = os.fork()
        if pid == 0:
            leak_it()
            p.disable()
            print("CHILD", p.output_dir, flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
        leak_it()
        p.disable()
        print("PARENT", p.output_dir)
    """)
    dirs = dict(l.split(" ", 1) for l in proc.stdout.splitlines())
    assert not [n for n in os.listdir(dirs["CHILD"]) if n.startswith(("summary", "snapshot"))]
    names = os.listdir(dirs["PARENT"])
    assert "summary.json" in names and "snapshot-1-final" in names
    rows = snapshot_rows(os.path.join(dirs["PARENT"], "snapshot-1-final"))
    assert [r for r in rows if r[4].split("<-")[0].endswith(":leak_it") and r[0] >= LEAK]


def test_forked_childs_missing_accounting_is_told_apart(tmp_path):
    """A forked child of a run with accounting (and its own child) has no
    summary and no snapshot, as documented: its runinfo.json says accounting
    stays with the process that enabled it ("accounting_in"), and summary,
    hist and top say so and name that process's run, instead of asking
    whether the run was made with accounting on.  A run without accounting
    says it was made without."""
    proc = run_scenario(tmp_path, """
        import os
        from threadgraph import ProcessProfile
        KEEP = []
        def work():
            KEEP.append(bytearray(100_000))
        p = ProcessProfile(default_log_path="out", accounting=True)
        p.enableForkedProfile()
        p.enable()
        work()
        pid = os.fork()
        if pid == 0:
            work()
            grand = os.fork()
            if grand == 0:
                work()
                print("GRANDCHILD", os.getpid(), p.output_dir, flush=True)
                os._exit(0)
            os.waitpid(grand, 0)
            print("CHILD", os.getpid(), p.output_dir, flush=True)
            os._exit(3)
        os.waitpid(pid, 0)
        p.disable()
        print("PARENT", os.getpid(), p.output_dir, flush=True)
        q = ProcessProfile(default_log_path="plain")
        with q:
            work()
        print("PLAIN", os.getpid(), q.output_dir, flush=True)
    """)
    runs = {role: (int(pid), path) for role, pid, path in
            (l.split(" ", 2) for l in proc.stdout.splitlines())}
    parent_pid, parent_dir = runs["PARENT"]
    info = {role: json.load(open(os.path.join(path, "runinfo.json")))
            for role, (pid, path) in runs.items()}
    assert info["PARENT"]["accounting"] is True and info["PARENT"]["accounting_in"] is None
    assert info["PLAIN"]["accounting"] is False and info["PLAIN"]["accounting_in"] is None
    for role in ("CHILD", "GRANDCHILD"):
        # both ended by os._exit: complete, and without accounting
        assert info[role]["end_time"] is not None, role
        assert info[role]["accounting"] is False, role
        assert info[role]["accounting_in"] == parent_pid, role  # not the child's
        run_dir = runs[role][1]
        for command in ("summary", "hist", "top"):
            r = cli(command, run_dir)
            assert r.returncode == 1, (command, r.stderr)
            assert "a forked child does no accounting" in r.stderr, (command, r.stderr)
            assert "process %d, whose run '%s' has it" % (parent_pid, parent_dir) \
                in r.stderr, (command, r.stderr)
            assert "accounting on?" not in r.stderr, (command, r.stderr)
    for command in ("summary", "hist", "top"):
        r = cli(command, parent_dir)
        assert r.returncode == 0, (command, r.stderr)
        r = cli(command, runs["PLAIN"][1])
        assert r.returncode == 1 and "the run was made without accounting" in r.stderr, \
            (command, r.stderr)


def test_threads_racing_stay_consistent(tmp_path):
    """Eight threads allocate and free, half of their blocks freed by another
    thread: the process figures, the sums over threads and the sums over sites
    must agree exactly."""
    proc = run_scenario(tmp_path, """
        import queue, threading
        from threadgraph import ProcessProfile
        q = queue.Queue()
        def producer():
            for i in range(3000):
                b = bytearray(100 + i % 900)
                if i % 2:
                    q.put(b)
                del b
        def consumer():
            while True:
                b = q.get()
                if b is None:
                    return
                del b
        p = ProcessProfile(format="text", default_log_path="out", accounting=True)
        p.enable()
        def main():
            cs = [threading.Thread(target=consumer) for _ in range(2)]
            ps = [threading.Thread(target=producer) for _ in range(6)]
            for t in cs + ps:
                t.start()
            for t in ps:
                t.join()
            for _ in cs:
                q.put(None)
            for t in cs:
                t.join()
        main()
        p.disable()
        print(p.output_dir)
    """)
    run = proc.stdout.strip().splitlines()[-1]
    with open(os.path.join(run, "summary.json")) as f:
        s = json.load(f)
    proc_f = s["process"]
    threads = s["threads"]
    assert len([t for t in threads if t["name"].startswith("Thread-")]) == 8
    assert proc_f["total_requested_bytes"] == sum(t["total_requested_bytes"] for t in threads)
    assert proc_f["alloc_calls"] == sum(t["alloc_calls"] for t in threads)
    assert proc_f["free_calls"] == sum(t["free_calls"] for t in threads)
    assert sum(proc_f["hist_alloc"]) == proc_f["alloc_calls"]
    header = {}
    rows = []
    for line in read(os.path.join(run, "snapshot-1-final")).splitlines():
        if line.startswith("# ") and ": " in line:
            k, v = line[2:].split(": ", 1)
            header[k] = v
        elif not line.startswith("#"):
            rows.append(line)
    assert int(header["live_bytes"]) == int(header["process_live_bytes"]) == proc_f["live_bytes"]
    assert int(header["total_bytes"]) == proc_f["total_requested_bytes"]
    assert int(header["total_count"]) == proc_f["alloc_calls"]
    assert proc_f["peak_bytes"] >= proc_f["live_bytes"]


def test_nested_windows_and_named_function(tmp_path):
    """Each window's peak covers exactly its own stretch, whether its highest
    point came inside a nested window or after it; periodic snapshots counted
    in calls of a function named "module:qualname"."""
    proc = run_scenario(tmp_path, """
        import json
        from threadgraph import ProcessProfile
        MB = 1_000_000
        def work(p):
            p.snapshot_every(start_after=1, stop_after=2, every=1, function="json:dumps")
            for _ in range(3):
                json.dumps(1)
            res = {}
            with p.window("outer-a") as oa:
                a = bytearray(2 * MB)
                with p.window("inner-a") as ia:
                    b = bytearray(5 * MB)
                    del b
                c = bytearray(6 * MB)
                del c, a
            with p.window("outer-b") as ob:
                a = bytearray(2 * MB)
                with p.window("inner-b") as ib:
                    b = bytearray(5 * MB)
                    del b
                c = bytearray(1 * MB)
                del c, a
            for w in (oa, ia, ob, ib):
                res[w.name] = w.figures["process"]["peak_above_start_bytes"]
            return res
        p = ProcessProfile(format="text", default_log_path="out", accounting=True)
        p.enable()
        res = work(p)
        p.disable()
        print(json.dumps(res))
        print(p.output_dir)
    """)
    out = proc.stdout.strip().splitlines()
    peaks = json.loads(out[-2])
    MB = 1_000_000
    expect = {"outer-a": 8 * MB, "inner-a": 5 * MB, "outer-b": 7 * MB, "inner-b": 5 * MB}
    for name, value in expect.items():
        assert abs(peaks[name] - value) <= PEAK_TOLERANCE, (name, peaks)
    snaps = sorted(n for n in os.listdir(out[-1]) if n.startswith("snapshot-"))
    assert snaps == ["snapshot-1-call-1", "snapshot-2-call-2", "snapshot-3-final",
                     "snapshot-4-peak"]


def test_failed_periodic_snapshot_is_reported_at_disable(tmp_path):
    proc = run_scenario(tmp_path, """
        import os, shutil, warnings
        from threadgraph import ProcessProfile
        def step():
            pass
        p = ProcessProfile(format="text", default_log_path="out", accounting=True)
        p.enable()
        p.snapshot_every(start_after=1, every=1, stop_after=1, function=step)
        os.mkdir(os.path.join(p.output_dir, "snapshot-1-call-1"))  # cannot be replaced
        step()
        os.rmdir(os.path.join(p.output_dir, "snapshot-1-call-1"))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            p.disable()
        print([str(x.message) for x in w])
        print(sorted(n for n in os.listdir(p.output_dir) if n.startswith("snapshot")))
    """)
    out = proc.stdout.strip().splitlines()
    assert "periodic snapshot call-1 failed" in out[0]
    assert out[1] == "['snapshot-2-final', 'snapshot-3-peak']"


def test_threadgraph_run_accounting(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text("KEEP = []\ndef leak_it():\n    KEEP.append(bytearray(1_000_000))\n"
                      "leak_it()\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(threadgraph.__file__))
    res = subprocess.run([sys.executable, "-m", "threadgraph", "run", "--accounting",
                          "--compress", "-o", str(tmp_path / "out"), str(script)],
                         cwd=str(tmp_path), env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    (run,) = [os.path.join(tmp_path, "out", d) for d in os.listdir(tmp_path / "out")]
    names = os.listdir(run)
    assert "summary.json.gz" in names and "snapshot-1-final.gz" in names
    r = cli("top", run, "--top", "1")
    assert r.returncode == 0 and "leak_it" in r.stdout, (r.stdout, r.stderr)


# --- calling-context trees: sites per thread, full contexts ------------------------

# A bytearray of PLANT bytes stored into a preallocated list: the only blocks
# allocated inside the planting function are the object and its buffer.
PLANT = 123_457


def cli_rows(*args):
    """The CLI's data rows of top or diff, split into their columns."""
    r = cli(*args)
    assert r.returncode == 0, r.stderr
    ncol = 6 if args[0] == "top" else 7
    return [l.split(None, ncol - 1) for l in r.stdout.splitlines()[1:]
            if l and not l.startswith("#")][1:]


def test_same_function_in_two_threads_is_two_sites(tmp_path):
    proc = run_scenario(tmp_path, """
        import sys, threading
        from threadgraph import ProcessProfile
        KEEP = [None] * 4
        def plant(i):
            KEEP[i] = bytearray(%d)
        def worker(i):
            plant(i)
        p = ProcessProfile(format="text", default_log_path="out", accounting=True)
        p.enable()
        ts = [threading.Thread(target=worker, args=(i,), name="w%%d" %% i) for i in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        p.disable()
        print(sys.getsizeof(KEEP[0]))
        print(p.output_dir)
    """ % PLANT)
    size, run = proc.stdout.split()
    size = int(size)
    rows = [r for r in snapshot_rows(os.path.join(run, "snapshot-1-final"))
            if r[4].split("<-")[0].endswith(":plant")]
    assert sorted(r[5] for r in rows) == ["w0", "w1"]
    for r in rows:
        # exactly the object and its buffer, still live
        assert r[:4] == (size, 2, size, 2), r
        assert r[4].split("<-")[1].endswith(":worker")
    # the CLI: one site per thread, or one for both with --merge-threads
    top = [r for r in cli_rows("top", run, "--depth", "1", "--top", "0")
           if r[5].endswith(":plant")]
    assert sorted((r[4], int(r[0])) for r in top) == [("w0", size), ("w1", size)]
    top = [r for r in cli_rows("top", run, "--depth", "1", "--top", "0", "--merge-threads")
           if r[5].endswith(":plant")]
    assert [(r[4], int(r[0]), int(r[1])) for r in top] == [("*", 2 * size, 4)]


LEAK_PATHS = """
    import sys
    from threadgraph import ProcessProfile
    KEEP = [None] * 4
    def leak(i):
        KEEP[i] = bytearray(%(plant)d)
    def mid(i):
        leak(i)
    def via_a():
        mid(0)
    def via_b():
        mid(1)
        mid(2)
    p = ProcessProfile(format="text", default_log_path="out", accounting=True)
    p.enable()
    via_a()
    %(more)s
    p.disable()
    print(sys.getsizeof(KEEP[0]))
    print(p.output_dir)
"""


def test_leak_at_depth_three_via_two_callers(tmp_path):
    proc = run_scenario(tmp_path, LEAK_PATHS % {"plant": PLANT, "more": "via_b()"})
    size, run = proc.stdout.split()
    size = int(size)
    rows = [r for r in snapshot_rows(os.path.join(run, "snapshot-1-final"))
            if r[4].split("<-")[0].endswith(":leak")]
    ctx = {tuple(c.rsplit(":", 1)[1] for c in r[4].split("<-")[:3]): r[:4] for r in rows}
    assert ctx == {("leak", "mid", "via_a"): (size, 2, size, 2),
                   ("leak", "mid", "via_b"): (2 * size, 4, 2 * size, 4)}
    assert {r[5] for r in rows} == {"MainThread"}
    # --depth 3 tells the two paths apart, --depth 2 sums them
    top = cli_rows("top", run, "--depth", "3", "--top", "2")
    assert [(int(r[0]), r[5].rsplit(":", 1)[1]) for r in top] == [
        (2 * size, "via_b"), (size, "via_a")]
    assert top[0][4] == "MainThread"
    top = cli_rows("top", run, "--depth", "2", "--top", "1")
    assert int(top[0][0]) == 3 * size and top[0][5].endswith(":mid")


def test_diff_of_two_runs_merges_threads(tmp_path):
    """Two runs of the leak program, the second leaking through via_b too: the
    diff (threads merged, as the snapshots come from two runs) shows exactly
    that growth, first.  (Same script path for both: a call is FILE:LINE:FUNCTION.)"""
    size, run_a = run_scenario(tmp_path, LEAK_PATHS % {"plant": PLANT, "more": ""}).stdout.split()
    size, run_b = run_scenario(tmp_path, LEAK_PATHS % {"plant": PLANT,
                                                       "more": "via_b()"}).stdout.split()
    assert run_a != run_b
    size = int(size)
    for args in ([], ["--merge-threads"]):
        r = cli("diff", "--base", run_a, run_b, "--depth", "3", *args)
        assert r.returncode == 0, r.stderr
        data = [l.split(None, 6) for l in r.stdout.splitlines()[4:]]
        assert data[0][:6] == ["+%d" % (2 * size), "+4", "0", str(2 * size),
                               "+%d" % (2 * size), "*"]
        assert [c.rsplit(":", 1)[1] for c in data[0][6].split("<-")] == ["leak", "mid", "via_b"]
        # via_a leaked the same in both runs: not listed
        assert not [d for d in data if d[6].startswith(data[0][6].split("<-")[0])
                    and d[6].endswith(":via_a")]
    # per thread, MainThread of one run is compared with MainThread of the other
    r = cli("diff", "--base", run_a, run_b, "--depth", "3", "--per-thread")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[4].split(None, 6)[5] == "MainThread"
    r = cli("diff", "--base", run_a, run_b, "--merge-threads", "--per-thread")
    assert r.returncode == 2


# Levels of a recursion that may hold interpreter blocks besides the planted ones:
# before 3.11, the frames of up to 200 levels stay in the frame free list (live
# blocks to the allocator, allocated at the caller's level), plus a few more.
FEW_LEVELS = 200 + 10


def snapshot_after_recursion(tmp_path, depth):
    tmp_path.mkdir()
    proc = run_scenario(tmp_path, """
        import sys
        from threadgraph import ProcessProfile
        sys.setrecursionlimit(%(depth)d + 1000)
        KEEP = [None] * (%(depth)d + 1)
        def rec(n):
            KEEP[n] = bytearray(16)
            if n:
                rec(n - 1)
        p = ProcessProfile(format="text", default_log_path="out", accounting=True)
        p.enable()
        rec(%(depth)d)
        rec(%(depth)d)       # the same contexts again: no new nodes
        p.disable()
        print(sys.getsizeof(KEEP[0]))
        print(p.output_dir)
    """ % {"depth": depth})
    size, run = proc.stdout.split()
    return os.path.join(run, "snapshot-1-final"), int(size)


def test_deep_recursion_snapshot_is_linear(tmp_path):
    small, _ = snapshot_after_recursion(tmp_path / "small", 1000)
    big, pair = snapshot_after_recursion(tmp_path / "big", 5000)
    nodes_small, _ = snapshot_nodes(small)
    nodes_big, _ = snapshot_nodes(big)
    rec_small = [n for n in nodes_small.values() if n[6].endswith(":rec")]
    rec_big = [n for n in nodes_big.values() if n[6].endswith(":rec")]
    # one node per depth, each with its level's live block pair (the second
    # call's bytearray replaced the first's; the ints of n - 1 come and go);
    # before 3.11 some levels also keep frame objects (free list, zombie frame)
    assert len(rec_small) == 1001 and len(rec_big) == 5001
    assert all(n[2] >= pair and n[3] >= 2 for n in rec_big), rec_big[:3]
    exact = [n for n in rec_big if (n[2], n[3]) == (pair, 2)]
    assert len(exact) >= len(rec_big) - FEW_LEVELS, rec_big[:3]
    ratio = os.path.getsize(big) / os.path.getsize(small)
    assert ratio < 5 * 1.3, ratio
    # the CLI: the default depth is quick; the whole contexts are refused or fine
    top = cli_rows("top", big, "--top", "1", "--sort", "total")
    assert top and top[0][4] == "MainThread"
    r = cli("top", big, "--depth", "0", "--top", "1")
    assert r.returncode in (0, 1)
    if r.returncode:
        assert "too deep to print whole" in r.stderr
