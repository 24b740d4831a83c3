"""Bad input: empty, missing, unreadable, binary, CRLF, truncated, malformed, gzip."""
import gzip
import shutil
import subprocess
import os

import pytest

from clisupport import CLI, tutorial_mems

GOOD = ("1394031412.5#main.py:3:f=>409600\n"
        "1394031413.25#main.py:4:g=>-4096\n")


def write(path, data, mode="w"):
    with open(path, mode) as f:
        f.write(data)
    return str(path)


def test_missing_file(tg, tmp_path):
    r = tg("peaks", tmp_path / "nope.mem")
    assert r.returncode == 1
    assert r.stderr == "error: unable to open '%s': No such file or directory\n" % (
        tmp_path / "nope.mem")
    r = tg("memg", "-o", tmp_path, tmp_path / "nope.mem")
    assert r.returncode == 1 and "unable to open" in r.stderr
    assert not (tmp_path / "memg.txt").exists()
    # export too (it said "'...' is not a capture (a run directory holding ...)")
    r = tg("export", tmp_path / "nope")
    assert r.returncode == 1
    assert r.stderr == "error: unable to open '%s': No such file or directory\n" % (
        tmp_path / "nope")


def test_unreadable_file(tg, tmp_path):
    p = write(tmp_path / "T.mem", GOOD)
    os.chmod(p, 0)
    try:
        if os.access(p, os.R_OK):
            pytest.skip("running as a user who can read anything")
        r = tg("peaks", p)
        assert r.returncode == 1 and "Permission denied" in r.stderr
    finally:
        os.chmod(p, 0o644)


def test_directory(tg, tmp_path):
    """A directory is a run directory: its dump files, or an error when it has none."""
    r = tg("peaks", tmp_path)
    assert r.returncode == 1 and "no .mem files in directory" in r.stderr
    (tmp_path / "sub.mem").mkdir()  # a directory named like a dump is still an error
    r = tg("peaks", tmp_path)
    assert r.returncode == 1 and "is a directory" in r.stderr


def test_binary_file(tg, tmp_path):
    p = write(tmp_path / "T.mem", b"\x7fELF\x02\x01\x01\x00\x00\x00" * 100, "wb")
    r = tg("peaks", p)
    assert r.returncode == 1
    assert "is a binary file, not a threadgraph dump" in r.stderr


def test_empty_file(tg, tmp_path):
    p = write(tmp_path / "T.mem", "")
    r = tg("peaks", p)
    assert r.returncode == 0 and r.stdout == ""
    assert "'%s' skipped: no events" % p in r.stderr
    r = tg("memg", "--script-only", "-o", tmp_path, p)
    assert r.returncode == 1 and "error: no events to plot" in r.stderr
    q = write(tmp_path / "U.mem", GOOD)
    r = tg("memg", "--script-only", "-o", tmp_path, p, q)
    assert r.returncode == 0, r.stderr
    assert "not plotted: no events" in r.stderr
    assert "memg-0.dat" not in (tmp_path / "memg-plot" / "memg.gp").read_text()


def test_crlf_and_no_final_newline(tg, tmp_path):
    p = write(tmp_path / "T.mem", GOOD.replace("\n", "\r\n").rstrip("\r\n"), "w")
    with open(p, "rb") as f:
        assert f.read().count(b"\r\n") == 1
    r = tg("peaks", "--peak=1", "--peak_delta_time=0", p)
    assert r.returncode == 0 and r.stderr == ""
    assert [l.split("\t")[3] for l in r.stdout.splitlines()] == ["409600", "-4096"]


def test_truncated_last_line(tg, tmp_path):
    p = write(tmp_path / "T.mem", GOOD + "1394031414.5#main.py:3")
    r = tg("peaks", "--peak=1", "--peak_delta_time=0", p)
    assert r.returncode == 0
    assert "warning: %s:3: malformed line skipped (no '=>' before the memory delta)" % p \
        in r.stderr
    assert "warning: 1 malformed line skipped" in r.stderr
    assert len(r.stdout.splitlines()) == 2


def test_malformed_lines_counted_and_strict(tg, tmp_path):
    bad = "".join("junk %d\n" % i for i in range(30))
    p = write(tmp_path / "T.mem", GOOD + bad + "1.5#a:1:f=>1\x00\n")
    r = tg("peaks", "--peak=1", p)
    assert r.returncode == 0
    lines = r.stderr.splitlines()
    assert lines[0] == "warning: %s:3: malformed line skipped (no '#' after the time)" % p
    assert "warning: further malformed lines are only counted" in lines
    assert lines[-1] == "warning: 31 malformed lines skipped"
    r = tg("peaks", "--strict", "--peak=1", p)
    assert r.returncode == 1
    assert r.stderr == "error: %s:3: no '#' after the time\n" % p
    r = tg("memg", "--strict", "-o", tmp_path, p)
    assert r.returncode == 1 and not (tmp_path / "memg.txt").exists()


def test_gzip_dump(tg, tmp_path):
    p = tmp_path / "T.mem.gz"
    with gzip.open(p, "wt") as f:
        f.write(GOOD)
    r = tg("peaks", "--peak=1", p)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\t")[2] == "T"
    cut = tmp_path / "C.mem.gz"
    with open(p, "rb") as f:
        data = f.read()
    cut.write_bytes(data[: len(data) // 2])
    r = tg("peaks", cut)
    assert r.returncode == 1 and "unable to read" in r.stderr


def test_stack_file_given_to_memg(tg, tmp_path, tutorial):
    r = tg("memg", "--script-only", "-o", tmp_path, os.path.join(tutorial, "Thread-7.stack"),
           *tutorial_mems())
    assert r.returncode == 0
    assert "Thread-7.stack' not plotted: a stack file" in r.stderr


def test_decorate_errors(tg, tmp_path, tutorial):
    mem = os.path.join(tutorial, "Thread-7.mem")
    stack = os.path.join(tutorial, "Thread-7.stack")
    r = tg("decorate-stack", mem, stack, "99")
    assert r.returncode == 1
    assert "error: no event at line 99: '%s' has 32 lines" % mem in r.stderr
    r = tg("decorate-stack", mem, stack, "no such event")
    assert r.returncode == 1 and "error: event not found in '%s'" % mem in r.stderr
    r = tg("decorate-stack", mem, tmp_path / "x.stack", "30")
    assert r.returncode == 1 and "unable to open" in r.stderr
    e = write(tmp_path / "E.stack", "")
    r = tg("decorate-stack", mem, e, "30")
    assert r.returncode == 1 and "error: no call of doStuff" in r.stderr
    r = tg("decorate-stack", mem, stack)
    assert r.returncode == 2 and "expected MEM STACK EVENT" in r.stderr
    r = tg("--no_time", "decorate-stack", mem, stack, "30")
    assert r.returncode == 1 and "needs timestamps" in r.stderr


def test_decorate_pairing_mismatch_warns(tg, tmp_path):
    stack = write(tmp_path / "T.stack", "1.0#a.py:1:f\n 1.5#a.py:5:g\n")
    mem = write(tmp_path / "T.mem", "1.6#a.py:9:h=>4096\n2.0#a.py:3:f=>8192\n")
    r = tg("decorate-stack", mem, stack, "2")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("f@a.py:1-3, Time: 1.0 s, Memory: 8192 B\n"
                        " g@a.py:5-9, Time: 0.10000000000000009 s, Memory: 4096 B\n")
    assert "warning: call at %s:2 paired with a return of another function at %s:1" % (
        stack, mem) in r.stderr


def test_decorate_crlf_and_gzip(tg, tmp_path, tutorial):
    import gzip
    with open(os.path.join(tutorial, "Thread-7.mem")) as f:
        mem_text = f.read()
    with open(os.path.join(tutorial, "Thread-7.stack")) as f:
        stack_text = f.read()
    mem = write(tmp_path / "Thread-7.mem", mem_text.replace("\n", "\r\n"), "w")
    stack = tmp_path / "Thread-7.stack.gz"
    with gzip.open(stack, "wt") as f:
        f.write(stack_text)
    r = tg("decorate-stack", mem, stack, "30")
    assert r.returncode == 0, r.stderr
    want = tg("decorate-stack", os.path.join(tutorial, "Thread-7.mem"),
              os.path.join(tutorial, "Thread-7.stack"), "30").stdout
    assert r.stdout == want and want


def test_missing_operand_fails_before_any_work(tg, tmp_path):
    # memg used to print "Processing data for thread <name>" for a missing file
    r = tg("memg", "-o", tmp_path, str(tmp_path / "nosuch"))
    assert r.returncode == 1
    assert r.stderr == "error: unable to open '%s': No such file or directory\n" % (
        tmp_path / "nosuch"), r.stderr


def test_decorate_stack_on_a_directory_without_a_capture(tg, tmp_path):
    r = tg("decorate-stack", str(tmp_path), "Thread-1", "3")
    assert r.returncode == 1 and "holds no capture.tg: for a text run, give its dumps" in r.stderr, \
        r.stderr
    assert "Scanning" not in r.stdout + r.stderr


def test_bare_carriage_return_is_not_a_line_end(tg, tmp_path):
    """A bare \\r inside a line does not end it (only \\n does, with an optional
    \\r before it): the line is malformed, not one record with a \\r in its FILE,
    and --strict refuses it."""
    p = tmp_path / "T.mem"
    p.write_bytes(b"1.5#a.py:1:f=>5\r1.6#b.py:2:g=>700\n1.7#c.py:3:h=>9\r\n")
    r = tg("peaks", "--peak=0", p)
    assert r.returncode == 0, r.stderr
    assert "T.mem:1: malformed line skipped (carriage return inside the line)" in r.stderr
    assert "c.py:3:h" in r.stdout and "b.py" not in r.stdout
    r = tg("peaks", "--strict", "--peak=0", p)
    assert r.returncode == 1 and "T.mem:1: carriage return inside the line" in r.stderr


@pytest.mark.parametrize("command", ["threads", "summary", "memg", "peaks", "folded", "report"])
def test_cut_aggregate_file_is_an_error_and_frees_what_it_read(tmp_path, fixtures, command):
    """An aggregate.tga without its 'end' line: a clear error, exit 1, and
    (under check-asan) no leak of what was parsed before it."""
    src = os.path.join(fixtures, "aggregate-v2")
    run = tmp_path / "run"
    shutil.copytree(src, str(run))
    with open(os.path.join(src, "aggregate.tga")) as f:
        lines = [l for l in f if l != "end\n"]
    (run / "aggregate.tga").write_text("".join(lines))
    args = [command, str(run)]
    if command == "memg":
        args[1:1] = ["--script-only", "-o", str(tmp_path / "out")]
    if command == "report":
        args += ["-o", str(tmp_path / "r.html")]
    r = subprocess.run([CLI] + args, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "cut short (an aggregate file ends with 'end')" in r.stderr, r.stderr
    assert "LeakSanitizer" not in r.stderr, r.stderr


def test_threads_of_a_missing_run_says_so_only(tg, tmp_path):
    """threads on a path that is not there: one error naming it, not first a
    warning that the run has no accounting and a fallback that cannot run."""
    r = tg("threads", tmp_path / "nope")
    assert r.returncode == 1
    assert r.stderr == "error: unable to open '%s': No such file or directory\n" % (
        tmp_path / "nope")


def test_time_that_goes_back_is_told_once_a_file_and_kept(tg, tmp_path):
    """docs/formats.md: within one file TIME never decreases.  A line that breaks
    it is kept (skipping a .mem line would shift the pairing of records with
    calls) but told, with its file and line, once a file and a command -- the
    commands used to draw a time axis (or a negative duration) silently."""
    run = tmp_path / "run"
    run.mkdir()
    write(run / "T.stack", "0.1#/a.py:1:main\n 0.2#/a.py:2:f\n  0.15#/a.py:3:g\n")
    write(run / "T.mem", "0.3#/a.py:3:g=>100\n0.05#/a.py:2:f=>200\n0.25#/a.py:1:main=>300\n")
    write(run / "U.mem", "0.1#/a.py:1:h=>10\n0.2#/a.py:1:h=>20\n")  # in order: nothing
    back_mem = ("warning: %s:2: time goes back 0.250000 s (a dump's times never "
                "decrease): the line is kept, but a time axis or duration across it is "
                "not the run's\n" % (run / "T.mem"))
    back_stack = "warning: %s:3: time goes back 0.050000 s" % (run / "T.stack")
    r = tg("folded", "--metric", "time", run)
    assert r.returncode == 0, r.stderr
    assert back_mem in r.stderr and back_stack in r.stderr, r.stderr
    assert r.stderr.count("time goes back") == 2, r.stderr
    assert "U.mem:" not in r.stderr
    r = tg("memg", "--script-only", "-o", tmp_path / "o", run / "T.mem", run / "U.mem")
    assert r.returncode == 0 and back_mem in r.stderr, r.stderr
    assert r.stderr.count("time goes back") == 1, r.stderr
    # kept: all three returns are in the data
    dat = [l.split()[0] for l in
           (tmp_path / "o" / "memg-plot" / "memg-0.dat").read_text().splitlines()
           if l and not l.startswith("#")]
    assert dat == ["0.3", "0.05", "0.25"], dat
    r = tg("interleave", "--script-only", "-o", tmp_path / "i", run / "T.mem", run / "U.mem")
    assert r.returncode == 0 and r.stderr.count("time goes back") == 1, r.stderr
    r = tg("decorate-stack", run / "T.mem", run / "T.stack", "3")
    assert r.returncode == 0 and back_mem in r.stderr and back_stack in r.stderr, r.stderr
    # the report reads each file in several sections: still told once a file
    r = tg("report", "-o", tmp_path / "r.html", run)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("time goes back") == 2, r.stderr
    # process.mem too
    write(run / "process.mem", "0.1#1000\n0.3#2000\n0.2#3000\n")
    r = tg("memg", "--script-only", "-o", tmp_path / "p", run / "process.mem")
    assert r.returncode == 0, r.stderr
    assert "%s:3: time goes back 0.100000 s" % (run / "process.mem") in r.stderr, r.stderr
    # --strict: an error
    r = tg("folded", "--strict", "--metric", "time", run)
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("error: %s:3: time goes back 0.050000 s (a dump's times "
                               "never decrease)\n" % (run / "T.stack")), r.stderr
