"""report says on stderr what it is doing: a line per stage ("report: STAGE..."),
as memg says "Processing data for thread NAME"; on a large run the stages take
minutes (a 928 MB capture: 136 s of silence before).  -q/--quiet leaves them
out, and the warnings stay."""
import shutil

from clisupport import TUTORIAL


def report(tg, tmp_path, *args):
    out = tmp_path / "report.html"
    r = tg("report", *args, "-o", out, TUTORIAL,
           env={"GNUPLOT": str(tmp_path / "no-gnuplot")})
    assert r.returncode == 0, r.stderr
    return r


def steps(stderr):
    return [l for l in stderr.splitlines() if l.startswith("report: ")]


def test_a_line_per_stage(tg, tmp_path):
    r = report(tg, tmp_path)
    assert steps(r.stderr) == [
        "report: reading %s..." % TUTORIAL,
        "report: held memory...",
        "report: memory graph...",
        "report: peaks...",
        "report: peaks' call subtrees (1, decorate-stack)...",
        "report: flame graph (delta)...",
    ], r.stderr
    # each before the warnings of its stage, and the page last
    err = r.stderr
    assert err.index("report: held memory") < err.index("held memory left out")
    assert err.rstrip().endswith("wrote %s" % (tmp_path / "report.html"))


def test_quiet(tg, tmp_path):
    r = report(tg, tmp_path, "-q")
    assert steps(r.stderr) == [], r.stderr
    assert "warning: " in r.stderr and "wrote " in r.stderr
