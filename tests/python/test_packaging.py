"""Packaging: the wheel, the console script, the compatibility import.

`pip wheel` builds from a clean copy of the source tree (no build/ left over from a
developer build), so what is checked is what a fresh machine gets.
"""
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
TIMEOUT = 900  # seconds: a wheel build compiles the extension and the CLI

SKIP_DIRS = {".git", "build", "dist", "__pycache__", "_bin", ".pytest_cache"}


def ignore(dirname, names):
    return [
        n
        for n in names
        if n in SKIP_DIRS
        or n.endswith((".so", ".o", ".egg-info"))
        or n.startswith((".venv", "threadgraph-"))
    ]


def run(cmd, cwd=None, env=None):
    return subprocess.run(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
        timeout=TIMEOUT,
    )


def console_script():
    path = os.path.join(os.path.dirname(sys.executable), "threadgraph")
    if not os.path.exists(path):
        pytest.skip("the threadgraph console script is not installed next to %s" % sys.executable)
    return path


def packaged_cli():
    import threadgraph

    path = os.path.join(os.path.dirname(threadgraph.__file__), "_bin", "threadgraph")
    assert os.access(path, os.X_OK), "installed package has no executable %s" % path
    return path


@pytest.mark.skipif(sys.version_info[:2] != (3, 12),
                    reason="builds a wheel (compiles the recorder and the CLI, ~40 s): on "
                           "CPython 3.12 only; every Python's run already installs and "
                           "uses one (tests/run_pythons.sh), test_wheel.py repairs one on 3.11")
def test_pip_wheel_has_the_extension_and_the_cli(tmp_path):
    src = str(tmp_path / "src")
    shutil.copytree(ROOT, src, ignore=ignore)
    out = str(tmp_path / "wheels")
    res = run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check",
         "-w", out, src]
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    wheels = [w for w in os.listdir(out) if w.endswith(".whl")]
    assert len(wheels) == 1, wheels
    tag = "cp%d%d" % sys.version_info[:2]
    assert tag in wheels[0] and "linux" in wheels[0]
    with zipfile.ZipFile(os.path.join(out, wheels[0])) as whl:
        names = whl.namelist()
        infos = {i.filename: i for i in whl.infolist()}
        entry_points = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        assert entry_points
        ep = whl.read(entry_points[0]).decode()
    assert any(n.startswith("threadgraph/_recorder") and n.endswith(".so") for n in names), names
    assert "threadgraph/_bin/threadgraph" in names
    mode = infos["threadgraph/_bin/threadgraph"].external_attr >> 16
    assert mode & 0o111, "the CLI is not executable in the wheel (mode %o)" % mode
    for py in ("threadgraph/__init__.py", "threadgraph/__main__.py", "threadgraph/_run.py",
               "threadgraph/_cli.py", "thread_graph/__init__.py", "thread_graph/Profiler.py"):
        assert py in names
    assert "threadgraph = threadgraph.__main__:main" in ep


def test_console_script_runs_the_c_cli():
    script = console_script()
    direct = run([packaged_cli(), "--version"])
    assert direct.returncode == 0, direct.stderr
    assert direct.stdout.strip()
    env = dict(os.environ)
    env.pop("TG_CLI", None)
    via_script = run([script, "--version"], env=env)
    assert via_script.returncode == 0, via_script.stderr
    assert via_script.stdout == direct.stdout
    via_module = run([sys.executable, "-m", "threadgraph", "--version"], env=env, cwd=HERE)
    assert via_module.returncode == 0, via_module.stderr
    assert via_module.stdout == direct.stdout


def test_console_script_passes_exit_codes_and_help():
    script = console_script()
    env = dict(os.environ)
    env.pop("TG_CLI", None)
    res = run([script, "no-such-command"], env=env)
    assert res.returncode == 2  # the C program's usage error, unchanged
    res = run([script, "--help"], env=env)
    assert res.returncode == 0
    assert "threadgraph run" in res.stdout
    for cmd in ("memg", "peaks", "decorate-stack"):
        assert cmd in res.stdout


def test_missing_cli_is_a_clear_error(tmp_path):
    script = console_script()
    env = dict(os.environ, TG_CLI=str(tmp_path / "missing"))
    res = run([script, "peaks"], env=env)
    assert res.returncode == 2
    assert "command-line processor is missing" in res.stderr


def test_compat_import():
    from thread_graph.Profiler import ProcessProfile
    import threadgraph

    assert issubclass(ProcessProfile, threadgraph.ProcessProfile)
    for name in ("enable", "disable", "setFilter", "trackStack", "setProcessMemoryFrequence"):
        assert callable(getattr(ProcessProfile, name))


def test_a_build_without_zstd_says_so():
    # setup.py decides whether to build with zstd when it starts; --version runs
    # that decision and nothing else (nothing is compiled, nothing written).
    pytest.importorskip("setuptools", reason="setup.py needs setuptools in this Python")
    env = dict(os.environ, THREADGRAPH_NO_ZSTD="1")
    r = run([sys.executable, os.path.join(ROOT, "setup.py"), "--version"], cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr
    assert "WITHOUT zstd (THREADGRAPH_NO_ZSTD is set)" in r.stderr
    assert "cannot read a binary capture whose chunks are zstd-compressed" in r.stderr
    if os.path.exists("/usr/include/zstd.h"):
        env.pop("THREADGRAPH_NO_ZSTD")
        r = run([sys.executable, os.path.join(ROOT, "setup.py"), "--version"], cwd=ROOT, env=env)
        assert r.returncode == 0, r.stderr
        assert "zstd" not in r.stderr


@pytest.mark.skipif(sys.version_info[:2] != (3, 11),
                    reason="setup.py's rebuild decision is checked on CPython 3.11 only "
                           "(two setup.py runs, the same on every Python)")
def test_a_build_tree_of_the_other_zstd_setting_is_rebuilt(tmp_path):
    # build_ext takes an extension as up to date by the files' times alone:
    # `pip install .` builds in ./build, so after a build with zstd, a build
    # without (or with, once libzstd-dev is installed) installed the old
    # extension beside a new CLI.  setup.py keeps the setting in build_temp and
    # rebuilds when it changed.  Dry runs (-n): nothing is compiled.
    pytest.importorskip("setuptools", reason="setup.py needs setuptools in this Python")
    import sysconfig
    lib, temp = tmp_path / "lib", tmp_path / "temp"
    (lib / "threadgraph").mkdir(parents=True)
    temp.mkdir()
    # an extension newer than every source, as a finished build leaves it
    (lib / "threadgraph" / ("_recorder" + sysconfig.get_config_var("EXT_SUFFIX"))).write_bytes(b"")
    env = dict(os.environ, THREADGRAPH_NO_ZSTD="1")

    def dry_build(setting):
        (temp / "zstd-setting").write_text(setting)
        r = run([sys.executable, os.path.join(ROOT, "setup.py"), "-v", "-n", "build_ext",
                 "--build-lib", str(lib), "--build-temp", str(temp)], cwd=ROOT, env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        return r.stdout + r.stderr

    out = dry_build("zstd\n")
    assert "building 'threadgraph._recorder' extension" in out, out[-2000:]
    assert "-DTG_HAVE_ZSTD" not in out
    assert "skipping 'threadgraph._recorder' extension (up-to-date)" in dry_build("no zstd\n")


def test_source_headers_have_distinct_names():
    # Three headers were named capture.h (src/common, src/recorder, src/lib), the
    # one meant picked by the include path's order: every header's name says
    # which it is.  And the recorder's thread-local state is a leaf (tls.h) that
    # the allocator hooks and accounting both include, so neither includes the
    # other for it (they made the recorder's one call cycle).
    import collections
    import glob
    import re
    names = collections.Counter(os.path.basename(p)
                                for p in glob.glob(os.path.join(ROOT, "src", "*", "*.h")))
    assert names and [n for n, k in names.items() if k > 1] == []

    def includes(path):
        with open(os.path.join(ROOT, "src", "recorder", path)) as f:
            return re.findall(r'^#include "([^"]+)"', f.read(), re.M)
    assert includes("tls.h") == ["clock.h"]
    assert "alloc_hooks.h" not in includes("acct_state.c")
    assert "acct_state.h" not in includes("alloc_hooks.c")
    # The accounting engine names threads through the recorder's thread table
    # (thread.h), never the recorder itself: recorder.c includes accounting.h,
    # so accounting including recorder.h closed a cycle through every acct_ file.
    acct = [os.path.basename(p) for p in
            glob.glob(os.path.join(ROOT, "src", "recorder", "acc*.[ch]"))]
    assert "accounting.c" in acct and "acct_py.c" in acct
    assert [f for f in acct if "recorder.h" in includes(f)] == []
