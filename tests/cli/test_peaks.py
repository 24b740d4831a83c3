"""peaks: the list memg labels, as text or JSON, for piping into decorate-stack."""
import json
import os

from clisupport import tutorial_mems

PEAK_ARGS = ["--peak=20", "--peak_delta_time=0", "--peak_delta_value=50"]


def rows(out):
    return [l.split("\t") for l in out.splitlines()]


def test_text(tg, tutorial):
    r = tg("peaks", *PEAK_ARGS, *tutorial_mems())
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    t6 = os.path.join(tutorial, "Thread-6.mem")
    t7 = os.path.join(tutorial, "Thread-7.mem")
    mt = os.path.join(tutorial, "MainThread.mem")
    assert rows(r.stdout) == [
        ["0", "1394031425.5", "Thread-6", "212992", t6, "5", "main.py:44:run"],
        ["1", "1394031433.4", "Thread-7", "167936", t7, "30",
         "/data/code/thread_graph/examples/main.py:39:doStuff"],
        ["2", "1394031433.45", "Thread-6", "-40960", t6, "6", "main.py:44:run"],
        ["3", "1394031440.0", "MainThread", "24576", mt, "2", "main.py:66:main"],
    ]


def test_matches_memg_legend(tg, tmp_path):
    r = tg("memg", "--script-only", "-o", tmp_path, *PEAK_ARGS, *tutorial_mems())
    assert r.returncode == 0
    legend = (tmp_path / "memg.txt").read_text().splitlines()
    p = rows(tg("peaks", *PEAK_ARGS, *tutorial_mems()).stdout)
    assert len(p) == len(legend)
    for row, line in zip(p, legend):
        assert line.startswith("%s: %s>%s=>%s" % (row[0], row[2], row[6], row[3]))


def test_pipe_into_decorate(tg, tutorial):
    p = rows(tg("peaks", *PEAK_ARGS, *tutorial_mems()).stdout)
    row = [x for x in p if x[2] == "Thread-7"][0]
    stack = row[4][: -len(".mem")] + ".stack"
    r = tg("decorate-stack", row[4], stack, row[5])
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("doStuff@")


def test_json(tg, tutorial):
    r = tg("peaks", "--json", *PEAK_ARGS, *tutorial_mems())
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    # call_start: the call its return closes in Thread-7.stack (decorate-stack's
    # pairing: doStuff@main.py:27-39, 22.03 s); null in a thread without .stack
    assert data[1] == {
        "index": 1, "time": 1394031433.4, "call_start": 1394031411.37, "thread": "Thread-7",
        "site": "/data/code/thread_graph/examples/main.py:39:doStuff",
        "file": "/data/code/thread_graph/examples/main.py", "line": 39,
        "function": "doStuff", "delta": 167936,
        "mem_file": os.path.join(tutorial, "Thread-7.mem"), "mem_line": 30}
    assert [d["index"] for d in data] == [0, 1, 2, 3]
    assert [d["call_start"] for d in data if d["thread"] != "Thread-7"]
    assert all(d["call_start"] is None for d in data if d["thread"] != "Thread-7")
    empty = tg("peaks", "--json", "--peak=100000", *tutorial_mems())
    assert json.loads(empty.stdout) == []


def test_json_odd_text(tg, tmp_path):
    p = tmp_path / 'q"\\.mem'
    p.write_bytes(b'1.5#a\xff"\\.py:1:f\x01=>409600\n')
    data = json.loads(tg("peaks", "--json", "--peak=1", p).stdout)
    assert data[0]["thread"] == 'q"\\'
    assert data[0]["file"] == 'a\ufffd"\\.py'
    assert data[0]["function"] == "f\x01"


def test_top_and_sort(tg):
    r = tg("peaks", "--top", "2", *PEAK_ARGS, *tutorial_mems())
    assert [x[0] for x in rows(r.stdout)] == ["0", "1"]
    r = tg("peaks", "--top=3", "--sort=size", *PEAK_ARGS, *tutorial_mems())
    assert [x[3] for x in rows(r.stdout)] == ["212992", "167936", "-40960"]
    r = tg("peaks", "--sort", "size", *PEAK_ARGS, *tutorial_mems())
    assert [x[0] for x in rows(r.stdout)] == ["0", "1", "2", "3"]
    r = tg("peaks", "--top", "0", *PEAK_ARGS, *tutorial_mems())
    assert r.stdout == ""
    r = tg("peaks", "--sort", "name", *tutorial_mems())
    assert r.returncode == 2 and "unknown sort key 'name'" in r.stderr
    r = tg("peaks", "--top", "-1", *tutorial_mems())
    assert r.returncode == 2 and "expects a non-negative integer" in r.stderr


def test_no_time(tg, fixtures):
    mem = os.path.join(fixtures, "notime", "Worker.mem")
    r = tg("--no_time", "peaks", "--peak=100", mem)
    assert [x[:4] for x in rows(r.stdout)] == [["0", "3", "Worker", "409600"],
                                                ["1", "4", "Worker", "-307200"]]
    data = json.loads(tg("peaks", "--no_time", "--json", "--peak=100", mem).stdout)
    assert data[0]["time"] is None and data[0]["mem_line"] == 4


def short_run(tmp_path):
    """A one-second run: a 300 KB return then a 700 KB one 10 ms later, then ten
    spikes of 400 KB a tenth of a second apart, and small returns between."""
    lines = ["1000.000#a.py:1:first=>%d" % (300 * 1024),
             "1000.010#a.py:2:largest=>%d" % (700 * 1024)]
    for i in range(1, 11):
        lines.append("%.3f#a.py:3:small=>1024" % (1000 + i / 10 - 0.05))
        lines.append("%.3f#a.py:4:spike=>%d" % (1000 + i / 10, 400 * 1024))
    path = tmp_path / "T.mem"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_default_spacing_scales_with_the_run(tg, tmp_path):
    # the original's 60 s kept one peak of a one-second run, and not its largest
    r = tg("peaks", short_run(tmp_path))
    assert r.returncode == 0, r.stderr
    rows = [ln.split("\t") for ln in r.stdout.splitlines()]
    assert [row[6] for row in rows] == ["a.py:2:largest"] + ["a.py:4:spike"] * 10
    assert [row[0] for row in rows] == [str(i) for i in range(11)]  # numbered in time order
    # either spacing option given: the original's selection, its other default
    r = tg("peaks", "--peak_delta_time=60", short_run(tmp_path))
    assert [ln.split("\t")[6] for ln in r.stdout.splitlines()] == ["a.py:1:first"]
    r = tg("peaks", "--peak_delta_value=350", short_run(tmp_path))
    assert [ln.split("\t")[6] for ln in r.stdout.splitlines()] == \
        ["a.py:1:first", "a.py:2:largest"]


def test_default_labels_the_call_not_the_thread_wrapper(tg, tmp_path):
    """The default (scaled) selection takes threading's wrappers (run,
    _bootstrap_inner, _bootstrap of threading.py) after every other
    candidate: the call that allocated is labelled, not the wrapper that
    returns its bytes, plus a few, a moment later; a thread whose only large
    return is the wrapper's still gets it."""
    lib = "/usr/lib/python3.11/threading.py"
    (tmp_path / "Worker.mem").write_text(
        "100.0#app.py:10:setup=>4096\n"
        "101.0#app.py:31:doStuff=>600000\n"
        "101.001#%s:1002:run=>600040\n"
        "101.002#%s:1045:_bootstrap_inner=>600096\n"
        "101.003#%s:1002:_bootstrap=>600112\n" % (lib, lib, lib))
    (tmp_path / "Other.mem").write_text(
        "150.0#%s:1045:_bootstrap_inner=>500000\n"
        "200.0#app.py:50:late=>700000\n" % lib)
    r = tg("peaks", tmp_path / "Worker.mem", tmp_path / "Other.mem")
    assert r.returncode == 0, r.stderr
    assert [(x[2], x[6]) for x in rows(r.stdout)] == [
        ("Worker", "app.py:31:doStuff"),
        ("Other", lib + ":1045:_bootstrap_inner"),
        ("Other", "app.py:50:late"),
    ]
    # the original's selection (time order) is left as it was
    r = tg("peaks", "--peak_delta_time=10", tmp_path / "Worker.mem", tmp_path / "Other.mem")
    assert [x[6] for x in rows(r.stdout)][0] == "app.py:31:doStuff"
    assert len(rows(r.stdout)) == 3


def test_no_peak_is_said(tg):
    """No return above --peak: stdout stays empty (a script reads no row, JSON
    an empty array) and stderr says why, and where slow growth shows instead."""
    for json_opt in ([], ["--json"]):
        r = tg("peaks", "--peak=100000", *json_opt, *tutorial_mems())
        assert r.returncode == 0, r.stderr
        assert r.stdout == ("[]\n" if json_opt else ""), r.stdout
        assert r.stderr == ("note: no peaks: no record's |DELTA| exceeds 100000 KB (--peak); "
                            "memory kept a little at a time, across many calls, shows in "
                            "what each thread holds over time: threadgraph memg --held\n")


def test_every_top_is_bounded_and_exact(tg, tmp_path):
    """`peaks --every --top N` (threadgraph run's summary): every return a peak, the
    N largest kept as they come (candidates cut back past 65,536), exactly the N
    first of the whole list by size, ties in time order (then thread, then line)."""
    import random
    rnd = random.Random(7)
    files = []
    for k, name in enumerate(("A", "B")):
        path = tmp_path / (name + ".mem")
        lines = []
        t = 1700000000.0
        for i in range(40000):
            t += rnd.choice((0.0, 0.000001, 0.00002))  # many equal times
            delta = rnd.choice((-1, 1)) * rnd.choice((2048, 4096, 4096, 9000, 70000,
                                                      rnd.randrange(1025, 10 ** 6)))
            lines.append("%.6f#app.py:%d:f%d=>%d" % (t, 10 + i % 50, i % 7, delta))
        path.write_text("\n".join(lines) + "\n")
        files.append(str(path))
    every = tg("peaks", "--json", "--every", "--peak", "1", *files)
    assert every.returncode == 0, every.stderr
    allp = json.loads(every.stdout)
    assert len(allp) == 80000
    order = {f: i for i, f in enumerate(files)}
    want = sorted(allp, key=lambda p: (-abs(p["delta"]), p["time"], order[p["mem_file"]],
                                       p["mem_line"]))[:300]
    want.sort(key=lambda p: (p["time"], order[p["mem_file"]], p["mem_line"]))
    top = tg("peaks", "--json", "--every", "--peak", "1", "--top", "300", *files)
    assert top.returncode == 0, top.stderr
    got = json.loads(top.stdout)
    key = lambda p: (p["mem_file"], p["mem_line"], p["delta"], p["function"])
    assert [key(p) for p in got] == [key(p) for p in want]
    assert [p["index"] for p in got] == list(range(300))
