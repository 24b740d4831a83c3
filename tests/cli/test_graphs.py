"""memh, nesting and interleave end to end."""
import os

from clisupport import needs_gnuplot, tutorial_mems


def dat(path):
    return [l.split() for l in path.read_text().splitlines()]


def test_memh(tg, tmp_path, tutorial):
    r = tg("memh", "--script-only", "-o", tmp_path, *tutorial_mems())
    assert r.returncode == 0, r.stderr
    # sums over all threads, sorted ascending; zero sums left out
    # each with its sum in bytes, as memg.txt gives each peak's delta
    assert (tmp_path / "memh.txt").read_text() == (
        "0: /data/code/thread_graph/examples/main.py:55:setup=>-8192\n"
        "1: None:0:sleep=>-4096\n"
        "2: main.py:60:main=>4096\n"
        "3: /data/code/thread_graph/examples/main.py:62:warm=>4096\n"
        "4: /home/stefano/pys/py27/lib/python2.7/random.py:240:randint=>16384\n"
        "5: main.py:66:main=>24576\n"
        "6: /data/code/thread_graph/examples/main.py:39:doStuff=>163840\n"
        "7: main.py:44:run=>172032\n")
    # run: 212992 - 40960 = 172032 B = 168 KB; doStuff 167936 - 4096 = 160 KB
    assert dat(tmp_path / "memh-plot" / "memh.dat")[-2:] == [["6", "160", "6"], ["7", "168", "7"]]


def test_memh_keeps_30_per_side(tg, tmp_path):
    mem = tmp_path / "T.mem"
    with open(mem, "w") as f:
        for i in range(100):
            f.write("1.0#a.py:%d:f=>%d\n" % (i, (i - 50) * 1024))
    r = tg("memh", "--script-only", "-o", tmp_path, mem)
    assert r.returncode == 0, r.stderr
    legend = (tmp_path / "memh.txt").read_text().splitlines()
    assert len(legend) == 60
    assert legend[0] == "0: a.py:0:f=>-51200" and legend[29] == "29: a.py:29:f=>-21504"
    assert legend[30] == "30: a.py:70:f=>20480" and legend[59] == "59: a.py:99:f=>50176"


def test_memh_leaves_out_the_thread_wrappers(tg, tmp_path):
    # threading's run, _bootstrap_inner and _bootstrap return each thread's whole
    # delta again: they crowded out the functions that allocate
    mem = tmp_path / "T.mem"
    lib = "/usr/lib/python3.11/threading.py"
    mem.write_text("1.0#app.py:5:work=>4096\n1.1#%s:1012:run=>4096\n"
                   "1.2#%s:1049:_bootstrap_inner=>4096\n1.3#%s:1009:_bootstrap=>4096\n"
                   "1.4#app.py:9:run=>2048\n" % (lib, lib, lib))
    r = tg("memh", "--script-only", "-o", tmp_path, mem)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "memh.txt").read_text() == "0: app.py:9:run=>2048\n1: app.py:5:work=>4096\n"


def test_memh_nothing(tg, tmp_path):
    mem = tmp_path / "T.mem"
    mem.write_text("1.0#a.py:1:f=>0\n")
    r = tg("memh", "-o", tmp_path, mem)
    assert r.returncode == 1 and "error: no memory deltas to plot" in r.stderr


def test_nesting(tg, tmp_path, tutorial, fixtures):
    r = tg("nesting", "--script-only", "-o", tmp_path, os.path.join(tutorial, "Thread-7.stack"))
    assert r.returncode == 0, r.stderr
    d = dat(tmp_path / "nesting-plot" / "nesting-0.dat")
    assert d[:5] == [["1394031410.1", "0"], ["1394031410.1", "1"], ["1394031410.25", "2"],
                     ["1394031410.3", "1"], ["1394031411.37", "1"]]
    assert len(d) == 33
    gp = (tmp_path / "nesting-plot" / "nesting.gp").read_text()
    assert "title 'Thread-7'" in gp and "pngcairo" in gp
    nt = tmp_path / "nt"
    nt.mkdir()
    r = tg("--no_time", "nesting", "--script-only", "-o", nt,
           os.path.join(fixtures, "notime", "Worker.stack"))
    assert r.returncode == 0, r.stderr
    assert dat(nt / "nesting-plot" / "nesting-0.dat") == [["0", "0"], ["1", "1"], ["2", "2"]]
    r = tg("nesting", "-o", tmp_path, *tutorial_mems())
    assert r.returncode == 1 and "no calls to plot" in r.stderr


def test_interleave(tg, tmp_path, tutorial):
    r = tg("interleave", "--script-only", "-o", tmp_path, *tutorial_mems())
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "interleave.txt").read_text() == "0: MainThread\n1: Thread-6\n2: Thread-7\n"
    blocks = [b.split("\n") for b in (tmp_path / "interleave-plot" / "interleave.dat").read_text().strip().split("\n\n")]
    assert blocks[0] == ["1394031409.9 0", "1394031409.9 0"]
    assert blocks[1] == ["1394031410.25 2", "1394031412.05 2"]
    assert blocks[2] == ["1394031412.5 1", "1394031413 1"]
    assert blocks[-1] == ["1394031440.0 0", "1394031440.0 0"]
    assert len(blocks) == 11


def test_interleave_range_and_no_time(tg, tmp_path):
    r = tg("interleave", "--script-only", "-o", tmp_path, "--time_from", "05/03/2014 14:57",
           *tutorial_mems(), env={"TZ": "UTC"})
    assert r.returncode == 0, r.stderr
    blocks = (tmp_path / "interleave-plot" / "interleave.dat").read_text().strip().split("\n\n")
    assert blocks[0].split("\n")[0] == "1394031420.123456 1"
    r = tg("--no_time", "interleave", *tutorial_mems(), cwd=tmp_path)
    assert r.returncode == 1 and "interleave needs timestamps" in r.stderr


@needs_gnuplot
def test_graphs_real_gnuplot(tg, tmp_path, tutorial):
    files = [os.path.join(tutorial, f) for f in sorted(os.listdir(tutorial))]
    for cmd, out in (("memh", "memh.svg"), ("nesting", "nesting.png"),
                     ("interleave", "interleave.png")):
        r = tg(cmd, "-o", tmp_path, *files)
        assert r.returncode == 0, (cmd, r.stderr)
        assert r.stderr.endswith("Running gnuplot.\n")  # no Fontconfig warning
        assert (tmp_path / out).stat().st_size > 1000
    svg = (tmp_path / "memh.svg").read_text()
    assert ">7<" in svg
    with open(tmp_path / "nesting.png", "rb") as f:
        assert f.read(4) == b"\x89PNG"


def _columns(points, x0, x1, columns=1920):
    return {(min(columns - 1, int((float(x) - x0) / (x1 - x0) * columns)), int(depth))
            for x, depth in points}


def test_nesting_points_are_bounded(tg, tmp_path):
    """nesting gave gnuplot a point per call: 130 M calls took gnuplot 8 GB and
    more than 10 min.  A thread with many calls now keeps one point (two at most)
    per column of the graph and depth, and still every (column, depth) its calls
    reach, a lone deep call included; the x axis is the same."""
    stack = tmp_path / "Worker.stack"
    t0, calls = 1700000000.0, 300000
    with open(stack, "w") as f:
        for i in range(calls):
            depth = 40 if i == 123457 else (i * 7 + i // 1000) % 6
            f.write("%s%.6f#a.py:%d:f\n" % (" " * depth, t0 + i * 3e-5, depth))
    lines = [l.split("#")[0] for l in stack.read_text().splitlines()]
    calls_at = [(l.strip(), len(l) - len(l.lstrip())) for l in lines]
    x1 = t0 + (calls - 1) * 3e-5
    for args, xs in (((), calls_at), (("--no_time",), [(str(i), d) for i, (_, d) in
                                                       enumerate(calls_at)])):
        out = tmp_path / ("out" + "".join(args))
        r = tg("nesting", *args, "--script-only", "-o", out, stack)
        assert r.returncode == 0, r.stderr
        d = dat(out / "nesting-plot" / "nesting-0.dat")
        assert len(d) <= 2 * 1920 * 7, len(d)  # was one line per call
        lo, hi = (t0, x1) if not args else (0, calls - 1)
        want = _columns(xs, lo, hi)
        assert _columns(d, lo, hi) == want
        assert (len(want) > 1920 * 6) and any(p[1] == "40" for p in d)
        xv = [float(p[0]) for p in d]
        assert min(xv) == lo and abs(max(xv) - hi) < 1e-6
    # a series of few calls is written whole, as the dump has it
    small = tmp_path / "Small.stack"
    small.write_text("".join("%s%.1f#a.py:1:f\n" % (" " * (i % 2), t0 + i) for i in range(100)))
    r = tg("nesting", "--script-only", "-o", tmp_path / "s", small)
    assert r.returncode == 0, r.stderr
    assert dat(tmp_path / "s" / "nesting-plot" / "nesting-0.dat") == [
        ["%.1f" % (t0 + i), str(i % 2)] for i in range(100)]
