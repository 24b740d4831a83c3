"""gc.txt (docs/formats.md): the cyclic collector's runs while recording, per
thread, so that a call's growth can be told from collection charged to it."""
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent("""
    import gc, json, sys, threading, time
    import threadgraph

    def sentinel():
        pass

    gc.callbacks.append(sentinel)
    before = list(gc.callbacks)
    gc.disable()  # only the collection asked for below runs
    p = threadgraph.ProcessProfile(default_log_path=sys.argv[1])
    p.enable()
    seen = {}

    def churn():
        for _ in range(500):
            a, b = [], []
            a.append(b)
            b.append(a)
        del a, b
        seen["start"] = time.time()
        seen["collected"] = gc.collect()
        seen["stop"] = time.time()
        seen["tid"] = threading.get_native_id()

    t = threading.Thread(target=churn, name="Worker")
    t.start()
    t.join()
    p.disable()
    gc.collect()  # after disable: not recorded
    json.dump({"seen": seen, "dir": p.output_dir,
               "callbacks_kept": gc.callbacks == before}, sys.stdout)
""")


def run(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    out = subprocess.run([sys.executable, str(prog), str(tmp_path / "out")],
                         stdout=subprocess.PIPE, check=True, universal_newlines=True)
    return json.loads(out.stdout)


def test_gc_run_recorded_in_its_thread(tmp_path):
    res = run(tmp_path)
    seen = res["seen"]
    with open(os.path.join(res["dir"], "gc.txt")) as f:
        lines = f.read().splitlines()
    assert len(lines) == 1, lines
    tid, start, stop, collected = lines[0].split(" ")
    assert int(tid) == seen["tid"]
    assert int(collected) == seen["collected"] >= 1000
    # TIME as the other files: seconds, six decimals, truncated to the microsecond
    assert seen["start"] - 0.001 <= float(start) <= float(stop) <= seen["stop"] + 0.001
    assert len(start.split(".")[1]) == 6
    # disable() took its callback out and left the program's own
    assert res["callbacks_kept"]


RUN_PROGRAM = textwrap.dedent("""
    import gc, threading
    gc.disable()  # only the collection asked for below runs

    def churn():
        x = [bytearray(1000) for _ in range(2000)]
        for _ in range(500):
            a, b = [], []
            a.append(b)
            b.append(a)
        del a, b
        gc.collect()
        return x

    def big():
        return [bytearray(1000) for _ in range(4000)]

    keep = []
    t = threading.Thread(target=lambda: keep.append(churn()), name="Worker")
    t.start()
    t.join()
    keep.append(big())
""")


def test_run_summary_names_the_thread_that_collected(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(RUN_PROGRAM)
    proc = subprocess.run([sys.executable, "-m", "threadgraph", "run", "-o", str(tmp_path / "out"),
                           str(prog)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    # Worker's one run is named; MainThread may also have one, of nothing: an
    # automatic collection before the program's gc.disable() ran (3.9's start-up)
    line = [l for l in proc.stderr.splitlines() if "the garbage collector ran in" in l]
    assert len(line) == 1, proc.stderr
    assert re.search(r"[ ,]Worker \(1 run, [0-9]{4,} objects collected\)", line[0]), proc.stderr
    assert not re.search(r"MainThread \([0-9]+ runs?, [1-9]", line[0]), proc.stderr


MARK = "[gc: 1 run, "

# churn's call runs the collector, big's runs none; no comprehension, whose own
# call would be the innermost peak on Python < 3.12.
MARK_PROGRAM = textwrap.dedent("""
    import gc, threading
    gc.disable()  # only the collection asked for below runs

    def churn():
        keep = []
        for _ in range(2000):
            keep.append(bytearray(1000))
        for _ in range(500):
            a, b = [], []
            a.append(b)
            b.append(a)
        del a, b
        gc.collect()
        return keep

    def big():
        keep = []
        for _ in range(4000):
            keep.append(bytearray(1000))
        return keep

    keep = []
    t = threading.Thread(target=lambda: keep.append(churn()), name="Worker")
    t.start()
    t.join()
    keep.append(big())
""")


def summary_line(stderr, thread, function):
    lines = [l for l in stderr.splitlines()
             if l.split()[:2] == [thread, function]]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize("fmt", [[], ["--format", "text", "--stack"]], ids=["capture", "text"])
def test_peak_whose_call_ran_the_collector_is_marked(tmp_path, fmt):
    """The peak of churn(), whose call ran gc.collect(), is marked in run's summary
    and in the report; big()'s, which ran none (gc disabled), is not.  Its call's
    span comes from the capture's CALL record, or from the .stack pairing."""
    from test_reliability import find_cli
    prog = tmp_path / "prog.py"
    prog.write_text(MARK_PROGRAM)
    proc = subprocess.run([sys.executable, "-m", "threadgraph", "run"] + fmt
                          + ["-o", str(tmp_path / "out"), str(prog)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert MARK in summary_line(proc.stderr, "Worker", "churn"), proc.stderr
    assert "[ran the garbage" not in summary_line(proc.stderr, "MainThread", "big")
    assert "the collector ran during that call, whose delta includes" in proc.stderr

    (run,) = [str(p) for p in (tmp_path / "out").iterdir()]
    with open(os.path.join(run, "gc.txt")) as f:
        # churn's collection: the one that collected its cycles (MainThread may
        # have had an automatic one of nothing before the program's gc.disable())
        runs = [l.split() for l in f if not l.startswith("#")]
    gc_line = max(runs, key=lambda r: int(r[3]))
    assert int(gc_line[3]) >= 1000 and all(int(r[3]) == 0 for r in runs if r is not gc_line)
    cli = find_cli()
    if cli is None:
        pytest.skip("no threadgraph command-line processor")
    inputs = [run] if not fmt else sorted(
        os.path.join(run, n) for n in os.listdir(run) if n.endswith(".mem") and n != "process.mem")
    every = ["--peak", "100", "--peak_delta_time", "0", "--peak_delta_value", "0"]
    res = subprocess.run([cli, "peaks", "--json"] + every + inputs,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    assert res.returncode == 0, res.stderr
    peaks = json.loads(res.stdout)
    assert peaks and all(p["call_start"] is not None and p["call_start"] <= p["time"]
                         for p in peaks), peaks
    (churn,) = [p for p in peaks if p["function"] == "churn"]
    assert churn["call_start"] <= float(gc_line[1]) <= float(gc_line[2]) <= churn["time"]
    (big,) = [p for p in peaks if p["function"] == "big"]
    assert not big["call_start"] <= float(gc_line[1]) <= big["time"]

    html = tmp_path / "r.html"
    res = subprocess.run([cli, "report"] + every + [run, "-o", str(html)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    assert res.returncode == 0, res.stderr
    rows = [r for r in html.read_text().split("<tr>") if ":churn=&gt;" in r or ":big=&gt;" in r]
    assert rows
    for r in rows:
        assert ('<span class="gc">ran the garbage collector (1 run, ' in r) == (":churn=&gt;" in r), r



def test_export_keeps_the_collector_marks(tmp_path):
    """A capture's text export into another directory takes gc.txt and a
    runinfo.json with the threads' native ids along, so that its report marks
    the same peaks as the capture's: churn()'s, not big()'s."""
    from test_reliability import find_cli
    cli = find_cli()
    if cli is None:
        pytest.skip("no threadgraph command-line processor")
    prog = tmp_path / "prog.py"
    prog.write_text(MARK_PROGRAM)
    proc = subprocess.run([sys.executable, "-m", "threadgraph", "run", "--stack",
                           "-o", str(tmp_path / "out"), str(prog)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    (run,) = [str(p) for p in (tmp_path / "out").iterdir()]
    ex = str(tmp_path / "ex")
    res = subprocess.run([cli, "export", "-q", "-o", ex, run],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    assert res.returncode == 0, res.stderr
    with open(os.path.join(run, "gc.txt")) as a, open(os.path.join(ex, "gc.txt")) as b:
        assert a.read() == b.read()
    with open(os.path.join(run, "runinfo.json")) as f:
        ids = {t["name"]: t["native_id"] for t in json.load(f)["threads"]}
    with open(os.path.join(ex, "runinfo.json")) as f:
        info = json.load(f)
    # a whole capture's export: threads and ids, none of the segments' keys
    assert {t["name"]: t["native_id"] for t in info["threads"]} == ids
    assert not {"kept_from", "segments_kept", "start_time"} & set(info)
    assert all("open_at_start" not in t for t in info["threads"])
    every = ["--peak", "100", "--peak_delta_time", "0", "--peak_delta_value", "0"]
    marked = {}
    for d in (run, ex):
        html = tmp_path / (os.path.basename(d) + ".html")
        res = subprocess.run([cli, "report"] + every + [d, "-o", str(html)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True)
        assert res.returncode == 0, res.stderr
        rows = [r for r in html.read_text().split("<tr>") if ":churn=&gt;" in r or ":big=&gt;" in r]
        assert rows
        marked[d] = sorted(('<span class="gc">ran the garbage collector (1 run, ' in r,
                            ":churn=&gt;" in r) for r in rows)
        assert all(m == c for m, c in marked[d]), rows
    assert marked[run] == marked[ex]


EMPTY_PROGRAM = textwrap.dedent("""
    import gc
    gc.disable()
    gc.collect()  # what start-up left: the next collection finds nothing

    def big():
        gc.collect()
        keep = []
        for _ in range(4000):
            keep.append(bytearray(1000))
        return keep

    keep = big()
    # the module's return a graph's 1/40 after big's, so that the report lists
    # both peaks (returns closer than that are one label: the larger)
    import time
    time.sleep(0.3)
""")


def test_collection_of_nothing_is_not_marked(tmp_path):
    """A peak whose call ran the collector only for runs that collected
    nothing has no mark: nothing was freed for its delta to include."""
    from test_reliability import find_cli
    prog = tmp_path / "prog.py"
    prog.write_text(EMPTY_PROGRAM)
    proc = subprocess.run([sys.executable, "-m", "threadgraph", "run", "-o",
                           str(tmp_path / "out"), str(prog)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    (run,) = [str(p) for p in (tmp_path / "out").iterdir()]
    with open(os.path.join(run, "gc.txt")) as f:
        runs = [l.split() for l in f if not l.startswith("#")]
    assert len(runs) == 2 and int(runs[1][3]) == 0, runs  # big's, of nothing
    assert "[gc:" not in summary_line(proc.stderr, "MainThread", "big"), proc.stderr
    cli = find_cli()
    if cli is None:
        pytest.skip("no threadgraph command-line processor")
    html = tmp_path / "r.html"
    res = subprocess.run([cli, "report", run, "-o", str(html)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True)
    assert res.returncode == 0, res.stderr
    rows = [r.split("</tr>")[0] for r in html.read_text().split("<tr>")[1:]]
    rows = [r for r in rows if ":big=&gt;" in r]
    assert rows
    assert not any('class="gc"' in r for r in rows), rows
