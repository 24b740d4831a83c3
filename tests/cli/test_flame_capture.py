"""folded, flamegraph and report on a binary capture (capture.tg) read natively.

The flame fixture (tests/cli/fixtures/flamerun) is encoded into a capture by
capture_encode.py (an encoder written from docs/formats.md, independent of the C
reader) in a run directory holding no text dumps, beside the same run in text.
Each command run the same way on both (same relative path, so messages and
titles name the same files) must give the same exit status, standard output,
standard error and output file, byte for byte; and the capture's delta and time
stacks are the hand-worked values of test_flame.py.
"""
import os
import shutil

import pytest

import capture_encode as ce
from clisupport import FIXTURES
from test_flame import EXPECTED

RUN = os.path.join(FIXTURES, "flamerun")
DUMPS = ["MainThread.mem", "MainThread.stack", "process.mem", "worker 1.mem",
         "worker 1.stack"]
THREAD_OPTS = [[], ["--merge-threads"], ["--thread", "MainThread"],
               ["--thread", "worker 1"]]


def make_runs(tmp_path, dumps=DUMPS, cut=None):
    """tmp/text/run (the fixture, minus the dumps not in dumps) and tmp/cap/run (the
    same accounting files, and a capture of dumps instead of the dumps)."""
    text, cap = tmp_path / "text", tmp_path / "cap"
    os.makedirs(str(text / "run"))
    os.makedirs(str(cap / "run"))
    for name in os.listdir(RUN):
        if name in DUMPS and name not in dumps:
            continue
        shutil.copy(os.path.join(RUN, name), str(text / "run" / name))
        if name not in DUMPS:
            shutil.copy(os.path.join(RUN, name), str(cap / "run" / name))
    data = ce.encode([os.path.join(RUN, n) for n in dumps])
    if cut is not None:
        data = data[:cut]
    (cap / "run" / "capture.tg").write_bytes(data)
    assert not [n for n in os.listdir(str(cap / "run")) if n.endswith((".mem", ".stack"))]
    return text, cap


def same(tg, text, cap, *args, output=None):
    """Runs args in both directories; asserts the same results; returns the capture's."""
    rt = tg(*args, cwd=str(text))
    rc = tg(*args, cwd=str(cap))
    assert (rc.returncode, rc.stdout, rc.stderr) == (rt.returncode, rt.stdout, rt.stderr), args
    if output:
        assert (cap / output).read_bytes() == (text / output).read_bytes(), args
    return rc


def strip_times(run_dir):
    """Rewrites the dumps in run_dir without their TIME# prefixes."""
    for n in DUMPS:
        lines = (run_dir / n).read_text().splitlines(True)
        (run_dir / n).write_text("".join(
            l[:len(l) - len(l.lstrip(" "))] + l.lstrip(" ").split("#", 1)[1] for l in lines))


def parse_folded(stdout):
    out = {}
    for line in stdout.splitlines():
        stack, value = line.rsplit(" ", 1)
        out[stack] = int(value)
    return out


@pytest.mark.parametrize("metric", ["delta", "time", "alloc", "live", "peak"])
@pytest.mark.parametrize("opts", THREAD_OPTS, ids=lambda o: " ".join(o) or "threads")
def test_folded_capture_is_the_text(tg, tmp_path, metric, opts):
    text, cap = make_runs(tmp_path)
    r = same(tg, text, cap, "folded", "--metric", metric, *opts, "run")
    assert r.returncode == 0 and r.stdout, r.stderr
    if metric in ("delta", "time") and not opts:
        assert parse_folded(r.stdout) == EXPECTED[metric]
        # worker 1's never() has no return record: said once, as on the text
        assert r.stderr.count("had no return record") == 1
    # the capture file itself is the same operand as its run directory
    f = tg("folded", "--metric", metric, *opts, "run/capture.tg", cwd=str(cap))
    if metric in ("delta", "time"):
        assert (f.returncode, f.stdout) == (0, r.stdout)


def test_folded_capture_no_time(tg, tmp_path):
    """--no_time: the capture's times are left out, as the text dumps of a run
    recorded without them hold none."""
    text, cap = make_runs(tmp_path)
    strip_times(text / "run")
    for opts in THREAD_OPTS:
        r = same(tg, text, cap, "--no_time", "folded", "--metric", "delta", *opts, "run")
        assert r.returncode == 0 and r.stdout, r.stderr
        if not opts:
            assert parse_folded(r.stdout) == EXPECTED["delta"]
    r = same(tg, text, cap, "folded", "--no_time", "--metric", "time", "run")
    assert r.returncode == 1 and "needs timestamps" in r.stderr


def test_folded_capture_errors_are_the_texts(tg, tmp_path):
    text, cap = make_runs(tmp_path, dumps=["MainThread.mem", "worker 1.mem", "process.mem"])
    # text dumps without .stack files cannot be paired; a capture holds every call's
    # record, stacks asked for or not
    r = tg("folded", "--metric", "delta", "run", cwd=str(text))
    assert r.returncode == 1 and "no .stack files in 'run'" in r.stderr
    assert "export" not in r.stderr
    r = tg("folded", "--metric", "delta", "run", cwd=str(cap))
    assert r.returncode == 0 and r.stdout, r.stderr
    text, cap = make_runs(tmp_path / "2")
    r = same(tg, text, cap, "folded", "--metric", "time", "--thread", "nobody", "run")
    assert r.returncode == 1 and "no thread 'nobody'" in r.stderr


def test_folded_untimed_capture_has_no_time_metric(tg, tmp_path):
    text, _ = make_runs(tmp_path / "t")
    strip_times(text / "run")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "capture.tg").write_bytes(
        ce.encode([str(text / "run" / n) for n in DUMPS], timed=False))
    r = tg("folded", "--metric", "delta", "run", cwd=str(tmp_path))
    assert r.returncode == 0 and parse_folded(r.stdout) == EXPECTED["delta"]
    r = tg("folded", "--metric", "time", "run", cwd=str(tmp_path))
    assert r.returncode == 1 and "needs timestamps (the capture" in r.stderr


def test_capture_warnings_are_said_once(tg, tmp_path):
    full = len(ce.encode([os.path.join(RUN, n) for n in DUMPS]))
    _, cap = make_runs(tmp_path, cut=full - 5)
    r = tg("folded", "--metric", "delta", "run", cwd=str(cap))
    assert r.returncode == 0 and r.stderr.count("is cut short") == 1, r.stderr
    r = tg("report", "--metric", "delta", "run", "-o", "r.html", cwd=str(cap))
    assert r.returncode == 0 and r.stderr.count("is cut short") == 1, r.stderr


@pytest.mark.parametrize("metric", ["delta", "time", "alloc"])
@pytest.mark.parametrize("opts", THREAD_OPTS, ids=lambda o: " ".join(o) or "threads")
def test_flamegraph_capture_is_the_text(tg, tmp_path, metric, opts):
    text, cap = make_runs(tmp_path)
    r = same(tg, text, cap, "flamegraph", "--metric", metric, *opts, "run", "-o", "f.svg",
             output="f.svg")
    assert r.returncode == 0 and "frames drawn" in r.stderr
    assert b"<svg" in (cap / "f.svg").read_bytes()


@pytest.mark.parametrize("args", [[], ["--metric", "delta"], ["--metric", "time", "--peak", "1"],
                                  ["--process", "--peak", "0.5"]],
                         ids=lambda a: " ".join(a) or "default")
def test_report_capture_is_the_text(tg, tmp_path, args):
    text, cap = make_runs(tmp_path)
    r = same(tg, text, cap, "report", *args, "run", "-o", "r.html", output="r.html")
    assert r.returncode == 0, r.stderr
    html = (cap / "r.html").read_text()
    assert "stacks recorded" in html and "accounting on" in html
    assert "2 threads (MainThread, worker 1)" in html
    if "--peak" in args:
        # a peak's decorated subtree, read from the capture
        assert '<section class="peak" id="peak-' in html and "Memory:" in html
    if "--metric" in args:
        metric = args[args.index("--metric") + 1]
        assert 'id="flame-%s"' % metric in html and "left out" not in html.split(
            'id="flamegraph-%s"' % metric)[1].split("</h2>")[1][:300]
    # RUN_DIR/capture.tg names the same run (its accounting files beside it)
    r2 = tg("report", *args, "run/capture.tg", "-o", "r2.html", cwd=str(cap))
    assert r2.returncode == 0, r2.stderr
    assert (cap / "r2.html").read_text().replace("run/capture.tg", "run") == html


def test_folded_capture_frames_by_parent_and_line(tg, tmp_path):
    """The capture's reader remembers each (parent frame, code, line)'s frame
    in a table of 4096 slots (src/lib/fold_load.c): with more sites than
    slots (a C function called from 1000 lines, under 16 callers, twice
    over), sharing a slot never merges two frames, as the text shows."""
    text, cap = tmp_path / "text", tmp_path / "cap"
    os.makedirs(str(text / "run"))
    os.makedirs(str(cap / "run"))
    stack, mem, t = [], [], [0]

    def tick():
        t[0] += 1
        return "1.%06d#" % t[0]

    lines, callers = 1000, ["f%d" % i for i in range(16)]
    for rep in range(2):
        stack.append(tick() + "a.py:1:main")
        for caller in callers:
            stack.append(" " + tick() + "a.py:5:" + caller)
            for ln in range(1, lines + 1):
                stack.append("  " + tick() + "builtins:%d:len" % ln)
                mem.append(tick() + "builtins:%d:len=>%d" % (ln, ln))
            mem.append(tick() + "a.py:6:%s=>0" % caller)
        mem.append(tick() + "a.py:2:main=>0")
    (text / "run" / "T.stack").write_text("\n".join(stack) + "\n")
    (text / "run" / "T.mem").write_text("\n".join(mem) + "\n")
    (cap / "run" / "capture.tg").write_bytes(
        ce.encode([str(text / "run" / "T.mem"), str(text / "run" / "T.stack")]))
    for metric in ("delta", "time"):
        r = same(tg, text, cap, "folded", "--metric", metric, "run")
        assert r.returncode == 0, r.stderr
        got = parse_folded(r.stdout)
        for caller in callers:
            for ln in range(1, lines + 1):
                site = "T;main (a.py:1);%s (a.py:5);len (builtins:%d)" % (caller, ln)
                assert got[site] == (2 * ln if metric == "delta" else 2), (site, got[site])
