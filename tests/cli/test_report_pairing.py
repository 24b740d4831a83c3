"""The report of text dumps whose .stack does not pair with the .mem (a
damaged or truncated dump): a thread left out of the held memory is named in a
note on the page and in a warning, with the pairing counts memg --held gives,
and the flame graph says what folded says; never a thread silently missing."""
import html
import re
import shutil

from clisupport import TUTORIAL


def notes(page):
    return [html.unescape(n) for n in re.findall(r'<p class="note">([^<]*)</p>', page)]


def tutorial_run(tmp_path, stack_lines=None):
    """A copy of the tutorial's run (threads MainThread, Thread-6 and
    Thread-7, only Thread-7 with a .stack), that .stack cut to its first
    STACK_LINES lines."""
    run = tmp_path / "run"
    shutil.copytree(TUTORIAL, str(run))
    if stack_lines is not None:
        stack = run / "Thread-7.stack"
        lines = stack.read_text().splitlines(True)
        assert len(lines) > stack_lines
        stack.write_text("".join(lines[:stack_lines]))
    return run


def report(tg, tmp_path, run):
    out = tmp_path / "report.html"
    r = tg("report", run, "-o", out, env={"GNUPLOT": str(tmp_path / "no-gnuplot")})
    assert r.returncode == 0, r.stderr
    return r, out.read_text()


NO_STACK = ("threads MainThread, Thread-6 left out of the held memory: no .stack file "
            "beside it: held memory needs the calls' nesting (record with stacks, or the "
            "binary capture)")


def test_intact_run(tg, tmp_path):
    r, page = report(tg, tmp_path, tutorial_run(tmp_path))
    # the threads without a .stack were left out silently before
    assert NO_STACK in notes(page) and "warning: %s\n" % NO_STACK in r.stderr
    assert "Thread-7" not in r.stderr and "damaged" not in page
    assert not [n for n in notes(page) if "Thread-7" in n]


def test_truncated_stack(tg, tmp_path):
    run = tutorial_run(tmp_path, 10)
    held = tg("memg", "--held", "--script-only", "-o", tmp_path / "held", run)
    why = ("its .stack does not pair with it (damaged dumps?): 22 return records left "
           "over after the last call")
    assert "Thread-7.mem' not plotted: %s\n" % why in held.stderr, held.stderr
    r, page = report(tg, tmp_path, run)
    said = "thread Thread-7 left out of the held memory: " + why
    assert said in notes(page), notes(page)
    assert "warning: %s\n" % said in r.stderr, r.stderr
    # no thread is left: the section says so after naming them
    assert "held memory left out: no thread with held memory to plot" in notes(page)
    # the flame graph of deltas says what folded says of the same dumps
    folded = tg("folded", "--metric", "delta", run)
    assert "warning: 22 return records left over after the last call\n" in folded.stderr
    assert "warning: 3 calls paired with a return of another function" in folded.stderr
    assert ("22 return records left over after the last call (damaged dumps?): left out "
            "of the delta flame graph") in notes(page)
    assert ("3 calls paired with a return of another function (damaged dumps?): their "
            "delta values in the flame graph may be wrong") in notes(page)
