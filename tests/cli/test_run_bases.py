"""An operand naming the base of several runs (BASE of BASE/<pid>/) reads the
latest top-level run (src/cli/rundirs.c)."""
import json
import os

import capture_encode as ce
from clisupport import TUTORIAL


def make_run(base, pid, start, ppid=1, thread="Thread-7"):
    run = os.path.join(base, str(pid))
    os.makedirs(run)
    data = ce.encode([os.path.join(TUTORIAL, thread + ".mem"),
                      os.path.join(TUTORIAL, "process.mem")])
    with open(os.path.join(run, "capture.tg"), "wb") as f:
        f.write(data)
    with open(os.path.join(run, "runinfo.json"), "w") as f:
        json.dump({"format": 1, "pid": pid, "ppid": ppid, "start_time": start,
                   "threads": [{"name": thread, "native_id": 7, "ident": 7}]}, f, indent=2)
    return run


def peaks_files(tg, *operands):
    r = tg("peaks", "--peak=3", *operands)
    assert r.returncode == 0, r.stderr
    rows = [line.split("\t") for line in r.stdout.splitlines() if "\t" in line]
    # a capture's peaks name its run directory and the thread (decorate-stack RUN THREAD N)
    return r, {row[4] if row[4].endswith(".mem") else os.path.join(row[4], row[2] + ".mem")
               for row in rows}


def test_base_of_runs_reads_the_latest_top_level_run(tg, tmp_path):
    base = str(tmp_path / "threadgraph-app")
    make_run(base, 100, 1000.0)                       # a first program run
    make_run(base, 101, 1001.0, ppid=100)             # its worker
    latest = make_run(base, 200, 2000.0, thread="MainThread")  # the second run
    make_run(base, 201, 2001.0, ppid=200)             # its worker, started last
    r, files = peaks_files(tg, base)
    assert files == {os.path.join(latest, "MainThread.mem")}, r.stdout
    assert r.stderr.startswith("threadgraph: '%s' holds 4 runs; reading the latest, '%s'\n"
                               % (base, latest)), r.stderr


def test_base_with_one_run_reads_it_without_a_note(tg, tmp_path):
    base = str(tmp_path / "out")
    run = make_run(base, 300, 5.0)
    r, files = peaks_files(tg, base + "/")
    assert files == {os.path.join(run, "Thread-7.mem")}, r.stdout
    assert "holds" not in r.stderr, r.stderr


def test_runs_without_runinfo_are_ordered_by_capture_time(tg, tmp_path):
    base = str(tmp_path / "b")
    old = make_run(base, 10, 0)
    new = make_run(base, 11, 0, thread="MainThread")
    for run, t in ((old, 1000000000), (new, 1000000500)):
        os.remove(os.path.join(run, "runinfo.json"))
        os.utime(os.path.join(run, "capture.tg"), (t, t))
    r, files = peaks_files(tg, base)
    assert files == {os.path.join(new, "MainThread.mem")}, r.stdout


def test_a_run_directory_or_a_dump_directory_is_read_as_it_is(tg, tmp_path):
    base = str(tmp_path / "b")
    run = make_run(base, 10, 1.0)
    make_run(os.path.join(run, "nested"), 11, 2.0)  # not looked into: RUN is a run
    r, files = peaks_files(tg, run)
    assert files == {os.path.join(run, "Thread-7.mem")} and r.stderr == "", (r.stdout, r.stderr)
    r, files = peaks_files(tg, TUTORIAL)  # text dumps: the directory's own .mem files
    assert files and all(os.path.dirname(f) == TUTORIAL for f in files), r.stdout


def test_an_empty_directory_is_still_an_error(tg, tmp_path):
    r = tg("peaks", str(tmp_path))
    assert r.returncode == 1 and "error:" in r.stderr, r.stderr


def test_a_reused_pid_is_not_taken_for_a_parent(tg, tmp_path):
    # run 700's parent had pid 500, like the older run 500 that had ended: 700 is
    # a top-level run (and the latest), not that run's forked child
    base = str(tmp_path / "b")
    old = make_run(base, 500, 1000.0)
    with open(os.path.join(old, "runinfo.json")) as f:
        info = json.load(f)
    info["end_time"] = 1100.0
    with open(os.path.join(old, "runinfo.json"), "w") as f:
        json.dump(info, f, indent=2)
    new = make_run(base, 700, 2000.0, ppid=500, thread="MainThread")
    r, files = peaks_files(tg, base)
    assert files == {os.path.join(new, "MainThread.mem")}, (r.stdout, r.stderr)


def test_a_symlink_to_a_run_is_not_one_more_run(tg, tmp_path):
    base = str(tmp_path / "b")
    run = make_run(base, 10, 1.0)
    os.symlink("10", os.path.join(base, "latest"))
    r, files = peaks_files(tg, base)
    assert files == {os.path.join(run, "Thread-7.mem")} and "holds" not in r.stderr, r.stderr


def test_only_run_operands_are_rewritten(tg, tmp_path):
    # decorate-stack's THREAD names a thread even if a base of runs has that name
    base = str(tmp_path / "b")
    make_run(base, 10, 1.0)
    make_run(str(tmp_path / "Thread-7"), 11, 1.0)
    r = tg("decorate-stack", base, "Thread-7", "1", cwd=str(tmp_path))
    assert "Thread-7/11" not in r.stderr, r.stderr  # the old code looked for that thread


def test_the_note_shows_no_raw_control_byte(tg, tmp_path):
    base = str(tmp_path / "b\x1b[2J")
    make_run(base, 10, 1.0)
    make_run(base, 11, 2.0)
    r = tg("peaks", base)
    assert r.returncode == 0 and "holds 2 runs" in r.stderr
    assert "\x1b" not in r.stderr, repr(r.stderr)
