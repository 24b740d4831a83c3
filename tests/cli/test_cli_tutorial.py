"""The original's tutorial, word for word, with `threadgraph` for
`python ProfilerGraph.py`, on an original-style fixture run."""
import os

from clisupport import FIXTURES, needs_gnuplot, tutorial_mems

TUTORIAL_LEGEND = """\
0: Thread-6>main.py:44:run=>212992
1: Thread-7>/data/code/thread_graph/examples/main.py:39:doStuff=>167936
2: Thread-6>main.py:44:run=>-40960
3: MainThread>main.py:66:main=>24576
"""

DECORATE_PROGRESS = """\
Scanning memory file looking for the event.
Scanning stack file looking for a matching event.
Reversing memory events of interest.
Parsing stack trace into a tree.
Reconciling trace and memory.
Decorating trace.
"""


@needs_gnuplot
def test_memg_tutorial_command(tg, tmp_path):
    r = tg("memg", "--process_rebase=5500", "--peak=20", "--peak_delta_time=0",
           "--peak_delta_value=50", *tutorial_mems(), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ("Processing data for thread MainThread\n"
                        "Processing data for thread Thread-6\n"
                        "Processing data for thread Thread-7\n"
                        "Processing data for the process\n"
                        "Running gnuplot.\n")
    assert (tmp_path / "memg.txt").read_text() == TUTORIAL_LEGEND
    svg = (tmp_path / "memg.svg").read_text()
    assert svg.startswith("<?xml") and "</svg>" in svg
    # no temporary files left behind
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]


def test_memg_help_lists_tutorial_options(tg):
    r = tg("memg", "--help")
    assert r.returncode == 0
    for opt in ("--process_rebase", "--peak", "--peak_delta_time", "--peak_delta_value",
                "--cap", "--no_process", "--time_from", "--time_to"):
        assert opt in r.stdout


def test_decorate_stack_tutorial(tg, tutorial):
    r = tg("decorate-stack", "--prefix=/data/code/thread_graph/examples/",
           os.path.join(tutorial, "Thread-7.mem"), os.path.join(tutorial, "Thread-7.stack"),
           "30")
    assert r.returncode == 0, r.stderr
    with open(os.path.join(FIXTURES, "tutorial-decorate.expected")) as f:
        assert r.stdout == f.read()
    assert r.stderr == DECORATE_PROGRESS


def test_decorate_stack_event_text_forms(tg, tutorial):
    mem = os.path.join(tutorial, "Thread-7.mem")
    stack = os.path.join(tutorial, "Thread-7.stack")
    by_line = tg("decorate-stack", mem, stack, "30").stdout
    assert by_line.startswith("doStuff@/data/code/thread_graph/examples/main.py:27-39, "
                              "Time: 22.03000020980835 s, Memory: 167936 B\n")
    site = "/data/code/thread_graph/examples/main.py:39:doStuff=>167936"
    for event in ("1394031433.4#" + site, site, "1: Thread-7>" + site):
        r = tg("decorate-stack", mem, stack, event)
        assert r.returncode == 0, r.stderr
        assert r.stdout == by_line


def test_grep_then_decorate(tg, tutorial):
    """The tutorial's `grep -n` gives line 30 for the legend's text."""
    with open(os.path.join(tutorial, "Thread-7.mem")) as f:
        lines = f.read().splitlines()
    hits = [i + 1 for i, l in enumerate(lines)
            if "main.py:39:doStuff=>167936" in l]
    assert hits == [30]
