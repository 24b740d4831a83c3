"""marks.txt read by the CLI (docs/formats.md "marks.txt"), on small hand-made
runs whose folded stacks are known exactly: pool tasks grafted under the calls
that submitted them (a task submitted by a task under that task's marker),
run records that do not hold ignored, links that loop left where they ran,
--no-stitch, phases in peaks, and malformed lines reported with their place."""
import json
import os

import pytest

MAIN_STACK = """\
1.000000#a.py:1:main
 1.100000#a.py:5:submit_all
"""
MAIN_MEM = """\
1.900000#a.py:7:submit_all=>100
2.000000#a.py:3:main=>150
"""
WORKER_STACK = """\
1.200000#t.py:1:_worker
 1.300000#s.py:2:run_task
  1.400000#a.py:9:work
"""
WORKER_MEM = """\
1.500000#a.py:11:work=>1000
1.600000#s.py:4:run_task=>1010
1.700000#t.py:3:_worker=>1010
"""
INNER_STACK = """\
1.410000#t.py:1:_worker
 1.420000#s.py:2:run_task
  1.430000#a.py:20:inner
"""
INNER_MEM = """\
1.440000#a.py:21:inner=>500
1.450000#s.py:4:run_task=>505
1.460000#t.py:3:_worker=>505
"""
MARKS = """\
# threadgraph marks 1
phase\t1.000000\t1.450000\tMainThread\tload
phase\t1.450000\t-\tWorker\tserve
mark\t1.500000\tWorker\tmid
task\t1\tMainThread\t2\t2\tPool
run\t1\tWorker\t2\t2
task\t2\tWorker\t3\t3\tInner
run\t2\tInner\t2\t2
run\t1\tWorker\t3\t2
future\tkinds are skipped
"""


def make_run(tmp_path, marks=MARKS):
    for name, text in (("MainThread.stack", MAIN_STACK), ("MainThread.mem", MAIN_MEM),
                       ("Worker.stack", WORKER_STACK), ("Worker.mem", WORKER_MEM),
                       ("Inner.stack", INNER_STACK), ("Inner.mem", INNER_MEM),
                       ("marks.txt", marks)):
        (tmp_path / name).write_text(text)
    return str(tmp_path)


def folded(tg, run, *args):
    res = tg("folded", "--metric", "delta", *args, run)
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()


def test_tasks_go_under_their_submitters(tg, tmp_path):
    main = "MainThread;main (a.py:1);submit_all (a.py:5)"
    assert folded(tg, make_run(tmp_path)) == [
        "MainThread;main (a.py:1) 50",
        main + " 100",
        main + ";[Pool] 10",
        main + ";[Pool];work (a.py:9) 1000",
        main + ";[Pool];work (a.py:9);[Inner] 5",
        main + ";[Pool];work (a.py:9);[Inner];inner (a.py:20) 500",
    ]


def test_no_stitch_and_thread_leave_tasks_where_they_ran(tg, tmp_path):
    run = make_run(tmp_path)
    plain = [
        "Inner;_worker (t.py:1);run_task (s.py:2) 5",
        "Inner;_worker (t.py:1);run_task (s.py:2);inner (a.py:20) 500",
        "MainThread;main (a.py:1) 50",
        "MainThread;main (a.py:1);submit_all (a.py:5) 100",
        "Worker;_worker (t.py:1);run_task (s.py:2) 10",
        "Worker;_worker (t.py:1);run_task (s.py:2);work (a.py:9) 1000",
    ]
    assert folded(tg, run, "--no-stitch") == plain
    assert folded(tg, run, "--thread", "Worker") == [
        "_worker (t.py:1);run_task (s.py:2) 10",
        "_worker (t.py:1);run_task (s.py:2);work (a.py:9) 1000",
    ]
    os.remove(os.path.join(run, "marks.txt"))
    assert folded(tg, run) == plain


def test_merge_threads_stitched(tg, tmp_path):
    lines = folded(tg, make_run(tmp_path), "--merge-threads")
    assert "main (a.py:1);submit_all (a.py:5);[Pool];work (a.py:9) 1000" in lines


def test_a_loop_of_links_is_left_unstitched(tg, tmp_path):
    marks = ("task\t1\tWorker\t3\t3\tA\nrun\t1\tInner\t2\t2\n"
             "task\t2\tInner\t3\t3\tB\nrun\t2\tWorker\t2\t2\n")
    lines = folded(tg, make_run(tmp_path, marks))
    assert not [l for l in lines if "[" in l], lines
    assert "Worker;_worker (t.py:1);run_task (s.py:2);work (a.py:9) 1000" in lines


def test_peaks_phases(tg, tmp_path):
    run = make_run(tmp_path)
    res = tg("peaks", "--json", "--peak", "0.1", "--peak_delta_time", "0", run)
    assert res.returncode == 0, res.stderr
    phase = {p["function"]: p["phase"] for p in json.loads(res.stdout)}
    # inner returns at 1.44 in load; work at 1.5 in serve (open to the end)
    assert phase["inner"] == "load" and phase["work"] == "serve"
    assert phase["main"] == "serve"
    res = tg("peaks", "--peak", "0.1", "--peak_delta_time", "0", "--phase", "load", run)
    assert res.returncode == 0, res.stderr
    assert [l.split("\t")[6] for l in res.stdout.splitlines()] == ["a.py:21:inner"]
    res = tg("peaks", "--phase", "nosuch", run)
    assert res.returncode == 1 and "no phase 'nosuch'" in res.stderr


@pytest.mark.parametrize("line, why", [
    ("phase\tx\t2.0\tMainThread\tp", "not a phase record"),
    ("phase\t2.0\t1.0\tMainThread\tp", "not a phase record"),
    ("mark\t1.0\tMainThread", "not a mark record"),
    ("task\t1\tMainThread\t-2\t2\tPool", "not a task record"),
    ("run\t1\tWorker\t2", "not a run record"),
    ("a\tb\tc\td\te\tf\tg\th", "too many fields"),
])
def test_malformed_lines(tg, tmp_path, line, why):
    run = make_run(tmp_path, MARKS + line + "\n")
    res = tg("folded", "--metric", "delta", run)
    assert res.returncode == 0, res.stderr
    assert "marks.txt:11" in res.stderr and why in res.stderr, res.stderr
    res = tg("folded", "--metric", "delta", "--strict", run)
    assert res.returncode == 1 and "marks.txt:11: " + why in res.stderr, res.stderr


def test_export_carries_marks(tg, fixtures, tmp_path):
    import shutil
    run = tmp_path / "run"
    shutil.copytree(os.path.join(fixtures, "capture-v1-plain"), str(run))
    (run / "marks.txt").write_text(MARKS)
    res = tg("export", "-q", "-o", tmp_path / "out", run)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "out" / "marks.txt").read_text() == MARKS
    # one already there is kept; the capture's own directory is left alone
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "marks.txt").write_text("# threadgraph marks 1\n")
    res = tg("export", "-q", "-o", tmp_path / "mine", run)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "mine" / "marks.txt").read_text() == "# threadgraph marks 1\n"
    res = tg("export", "-q", run)
    assert res.returncode == 0, res.stderr
    assert (run / "marks.txt").read_text() == MARKS
