"""The pytest plugin (threadgraph/pytest_plugin.py, docs/pytest.md).

Each test runs pytest in a subprocess of this venv's Python over a small suite
written to tmp_path: the plugin is found through its installed ``pytest11``
entry point, as a user's suite finds it.  The suite's threads allocate whole
MiB blocks, so every figure is far from its limit and the outcomes are exact.
"""
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

SUITE = '''
import mmap
import os
import sys
import threading

import pytest

KEPT = []


def fill(n):
    return [bytearray(1 << 20) for _ in range(n)]


def run_thread(name, n, keep=False):
    def work():
        blocks = fill(n)
        if keep:
            KEPT.append(blocks)
    t = threading.Thread(target=work, name=name)
    t.start()
    t.join()


@pytest.mark.limit_memory("4 MB")
def test_over():
    run_thread("Loader", 6)


@pytest.mark.limit_memory("8 MB")
def test_under():
    run_thread("Loader", 3)


@pytest.mark.limit_leaks("1 MB")
def test_leak():
    run_thread("Keeper", 3, keep=True)


@pytest.mark.limit_leaks("1 MB")
def test_no_leak():
    run_thread("Keeper", 3)


@pytest.mark.limit_memory("64 MB")
@pytest.mark.limit_memory("4 MB", thread="Loader")
def test_thread_over():
    run_thread("Loader-2", 6)
    run_thread("Other", 2)


@pytest.mark.limit_memory("4 MB", thread="Loader")
def test_thread_under():
    run_thread("Loader-3", 2)
    run_thread("Other", 6)


@pytest.mark.limit_memory("4 MB", thread="Nobody")
def test_thread_missing():
    run_thread("Loader-4", 1)


@pytest.mark.limit_memory("24 parsecs")
def test_bad_size():
    pass


@pytest.mark.limit_memory("4 MB")
def test_fails_and_over():
    run_thread("Loader", 6)
    assert False, "failed by itself"


@pytest.mark.limit_memory("4 MB", thread="Mapper")
def test_native():
    # An anonymous mapping: native memory, counted with --threadgraph-native only.
    def work():
        m = mmap.mmap(-1, 6 << 20)
        m.close()
    t = threading.Thread(target=work, name="Mapper")
    t.start()
    t.join()


def test_unmarked():
    # No marker: the recorder is not enabled (nor, without --threadgraph,
    # imported), unless --threadgraph-all (TG_UNMARKED says which).
    rec = sys.modules.get("threadgraph._recorder")
    expect = os.environ["TG_UNMARKED"]
    if expect == "not imported":
        assert rec is None
    elif expect == "not enabled":
        assert rec is None or rec.active() is None
    else:
        assert rec.active() is not None
    run_thread("Loader", 6)


@pytest.fixture
def own_profile(tmp_path):
    from threadgraph import ProcessProfile
    with ProcessProfile(default_log_path=str(tmp_path)):
        yield


@pytest.mark.limit_memory("1 GB")
def test_own_profile(own_profile):
    # Runs last: its fixture imports the recorder (test_unmarked checks that
    # nothing did before).
    pass
'''

EXPECTED = {
    "test_over": "failure", "test_under": "passed", "test_leak": "failure",
    "test_no_leak": "passed", "test_thread_over": "failure", "test_thread_under": "passed",
    "test_thread_missing": "failure", "test_bad_size": "error", "test_native": "passed",
    "test_unmarked": "passed", "test_own_profile": "failure", "test_fails_and_over": "failure",
}
FAILING = ["test_over", "test_leak", "test_thread_over", "test_thread_missing",
           "test_fails_and_over", "test_own_profile"]


def line_of(text):
    """The line number, in test_suite.py, of SUITE's first line starting with TEXT."""
    return next(n for n, line in enumerate(SUITE.splitlines(), 1)
                if line.strip().startswith(text))


FILL = line_of("def fill(")  # the recorder names a function by its first line
WORK = line_of("def work():")


def run_suite(tmp_path, *args, env=None):
    """pytest over SUITE in TMP_PATH with ARGS; returns (CompletedProcess,
    {test name: (outcome, message and text)}) from its JUnit XML."""
    (tmp_path / "test_suite.py").write_text(SUITE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    # Nothing of this session's pytest (PYTEST_ADDOPTS, PYTEST_XDIST_WORKER when
    # it runs under xdist itself...) reaches the inner one.
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith("PYTEST_") and k != "PYTHONWARNINGS"}
    full_env["TMPDIR"] = str(tmp)
    full_env.update(env or {})
    xml = tmp_path / "junit.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA",
         "--junitxml", str(xml), "test_suite.py"] + list(args),
        cwd=str(tmp_path), env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        universal_newlines=True, timeout=120)
    outcomes = {}
    if xml.exists():
        for case in ET.parse(str(xml)).iter("testcase"):
            outcome, text = "passed", ""
            for child in case:
                if child.tag in ("failure", "error", "skipped"):
                    outcome = child.tag
                    text = child.text or child.get("message") or ""
            outcomes[case.get("name")] = (outcome, text)
    return proc, outcomes


def check_outcomes(proc, outcomes, **changed):
    got = {name: o for name, (o, _) in outcomes.items()}
    assert got == dict(EXPECTED, **changed), proc.stdout


def check_messages(outcomes):
    over = outcomes["test_over"][1]
    assert "limit_memory('4 MB'): the test's peak of memory allocated was 6.0 MiB" in over
    assert "live at the peak, by thread: Loader 6.0 MiB" in over
    # The top site, with its stack: the list comprehension in fill, in work.
    site = over[over.index("top call sites live at the peak:"):]
    assert "thread Loader:" in site
    lines = [line.strip() for line in site.splitlines()]
    at = next(i for i, line in enumerate(lines)
              if line.endswith("test_suite.py:%d:<listcomp>" % (FILL + 1))  # before 3.12
              or line.endswith("test_suite.py:%d:fill" % FILL))  # 3.12+: inlined
    assert any(line.endswith("test_suite.py:%d:work" % WORK) for line in lines[at:at + 3])

    leak = outcomes["test_leak"][1]
    assert "limit_leaks('1 MB'): 3.0 MiB" in leak
    assert "still live at its end, over its limit of 1.0 MiB" in leak
    assert "still live, by thread: Keeper 3.0 MiB" in leak
    assert "thread Keeper:" in leak and "test_suite.py:%d:work" % WORK in leak

    thread = outcomes["test_thread_over"][1]
    assert ("limit_memory('4 MB', thread='Loader'): thread Loader-2 allocated up to "
            "6.0 MiB") in thread
    assert "top call sites of Loader-2" in thread and "thread Loader-2:" in thread
    assert "test_suite.py:%d:work" % WORK in thread
    assert "Other" not in thread  # 2 MiB: under the limit, and not a Loader

    assert "no thread named 'Nobody' or starting with it" in outcomes["test_thread_missing"][1]
    # a bad marker: an error naming it, with the message only (no traceback
    # through the plugin's code)
    bad = outcomes["test_bad_size"][1]
    assert "threadgraph: limit_memory('24 parsecs'): invalid memory size '24 parsecs'" in bad
    assert "pytest_plugin.py" not in bad and "Traceback" not in bad, bad
    assert bad.count("invalid memory size") == 1, bad  # no chained exceptions
    assert ("threadgraph: cannot measure this test: another ProcessProfile is already "
            "enabled") in outcomes["test_own_profile"][1]
    # A test that failed by itself keeps its own failure, and gets the figures as
    # a section of its report.
    both = outcomes["test_fails_and_over"][1]
    assert "failed by itself" in both and "threadgraph" not in both


def check_kept(keep, tmp_path, failing):
    kept = sorted(os.listdir(str(keep)))
    # Each test that failed a limit (test_own_profile was not measured).
    assert kept == sorted("test_suite.py_" + name for name in failing), kept
    for name in kept:
        with open(os.path.join(str(keep), name, "summary.json")) as f:
            assert json.load(f)["process"]["peak_bytes"] > 0
    # The runs of the tests that passed are gone with the session's directory.
    left = [n for n in os.listdir(str(tmp_path / "tmp")) if n.startswith("threadgraph")]
    assert left == []


def test_limits(tmp_path):
    keep = tmp_path / "kept"
    proc, outcomes = run_suite(tmp_path, "--threadgraph", "--threadgraph-native",
                               "--threadgraph-dir", str(keep),
                               env={"TG_UNMARKED": "not enabled"})
    check_outcomes(proc, outcomes, test_native="failure")
    check_messages(outcomes)
    out = proc.stdout
    section = out[out.index("_ test_fails_and_over _"):]
    section = section[section.index("- threadgraph -"):]
    assert "limit_memory('4 MB'): the test's peak of memory allocated was 6.0 MiB" in section
    native = outcomes["test_native"][1]
    assert ("limit_memory('4 MB', thread='Mapper'): thread Mapper allocated up to "
            "6.0 MiB") in native
    assert "thread Mapper:" in native and ":work" in native
    check_kept(keep, tmp_path, FAILING[:-1] + ["test_native"])
    # A kept run is a whole run directory: the report reads it.
    run = keep / "test_suite.py_test_thread_over"
    rep = subprocess.run([sys.executable, "-m", "threadgraph", "report", "-o",
                          str(tmp_path / "report.html"), str(run)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True, cwd=str(tmp_path))
    assert rep.returncode == 0, rep.stdout
    assert "Loader-2" in (tmp_path / "report.html").read_text()


def test_off_without_the_option(tmp_path):
    # Installed but not asked for: the markers are known (--strict-markers) and
    # checked by nothing, and threadgraph's recorder is not even imported.
    proc, outcomes = run_suite(tmp_path, "--strict-markers", "-k", "not test_fails_and_over",
                               env={"TG_UNMARKED": "not imported"})
    assert proc.returncode == 0, proc.stdout
    assert set(o for o, _ in outcomes.values()) == {"passed"}
    assert len(outcomes) == len(EXPECTED) - 1


@pytest.mark.skipif(sys.version_info[:2] != (3, 11),
                    reason="two xdist workers take a few seconds: checked on 3.11 only "
                           "(the plugin does nothing version-specific there)")
def test_xdist(tmp_path):
    try:
        import xdist  # noqa: F401
    except ImportError:
        pytest.skip("pytest-xdist is not installed (tests/run_pythons.sh installs it)")
    keep = tmp_path / "kept"
    # (--threadgraph-all implies --threadgraph.)
    proc, outcomes = run_suite(tmp_path, "-n", "2", "--threadgraph-all",
                               "--threadgraph-dir", str(keep), env={"TG_UNMARKED": "enabled"})
    check_outcomes(proc, outcomes)
    check_messages(outcomes)
    check_kept(keep, tmp_path, FAILING[:-1])
    # --threadgraph-all: the workers' figures reach the controller's summary,
    # which lists test_unmarked too (measured, no limit).
    out = proc.stdout
    summary = out[out.index("threadgraph: highest peaks of memory allocated"):]
    lines = summary.splitlines()[1:6]
    assert any(line.endswith("test_suite.py::test_unmarked") and "6.0 MiB peak" in line
               for line in lines), summary


def test_size_syntax():
    from threadgraph.pytest_plugin import parse_size
    assert parse_size("24 MB") == 24 << 20
    assert parse_size("1.5GB") == 3 << 29
    assert parse_size("512kb") == 512 << 10
    assert parse_size("100B") == 100
    assert parse_size("2 MiB") == 2 << 20
    assert parse_size(4096) == 4096
    for bad in ("24", "MB", "24 XB", "-1 MB", "1 MB extra", None):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_entry_point_is_installed():
    try:
        from importlib.metadata import entry_points
    except ImportError:  # pragma: no cover (3.8 has it)
        pytest.skip("importlib.metadata is missing")
    eps = entry_points()
    group = eps.select(group="pytest11") if hasattr(eps, "select") else eps.get("pytest11", [])
    assert any(ep.name == "threadgraph" and ep.value == "threadgraph.pytest_plugin"
               for ep in group)



REWRITTEN = '''
def test_passes():
    assert [1, 2] == [1, 2]


def test_fails():
    got = [1, 2]
    assert got == [1, 3]
'''


@pytest.mark.parametrize("how", ["run", "main"])
def test_imported_before_pytest(tmp_path, how):
    # threadgraph imported before pytest configures (`threadgraph run -m pytest`,
    # or a program that imports it, then calls pytest.main): pytest marks the
    # plugin's packages for assertion rewriting, and threadgraph's docstring
    # (PYTEST_DONT_REWRITE) keeps it from warning that they cannot be.  The
    # test file's asserts are rewritten all the same.
    (tmp_path / "test_rewritten.py").write_text(REWRITTEN)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYTEST_") and k != "PYTHONWARNINGS"}
    pytest_args = ["-p", "no:cacheprovider", "-q", "test_rewritten.py"]
    if how == "run":
        cmd = [sys.executable, "-m", "threadgraph", "run", "-o", str(tmp_path / "out"),
               "-m", "pytest"] + pytest_args
    else:
        cmd = [sys.executable, "-c",
               "import sys, threadgraph, thread_graph, pytest; "
               "sys.exit(pytest.main(%r))" % pytest_args]
    proc = subprocess.run(cmd, cwd=str(tmp_path), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=300)
    assert proc.returncode == 1, proc.stdout
    assert "1 failed, 1 passed in" in proc.stdout
    assert "assert [1, 2] == [1, 3]" in proc.stdout  # the values: introspection works
    assert "PytestAssertRewriteWarning" not in proc.stdout, proc.stdout
    assert "warning" not in proc.stdout.lower(), proc.stdout


SKIPPING = """
import pytest

@pytest.mark.limit_memory("1 MB")
def test_skips_itself_over_its_limit():
    keep = bytearray(3 << 20)
    pytest.skip("not today")
"""


def test_a_test_that_skips_itself_is_not_judged_nor_kept(tmp_path):
    # It was reported SKIPPED with nothing about its limit (pytest shows no
    # section of a skip), and its run was kept in --threadgraph-dir anyway.
    (tmp_path / "test_skipping.py").write_text(SKIPPING)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    keep = tmp_path / "kept"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYTEST_") and k != "PYTHONWARNINGS"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA",
         "test_skipping.py", "--threadgraph", "--threadgraph-dir", str(keep)],
        cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        universal_newlines=True, timeout=120)
    assert proc.returncode == 0 and "1 skipped" in proc.stdout, proc.stdout
    assert not keep.exists() or os.listdir(str(keep)) == [], os.listdir(str(keep))
