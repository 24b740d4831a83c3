"""Following exec'd Python processes: `threadgraph run --follow-exec` and
THREADGRAPH_FOLLOW (docs/run.md)."""
import glob
import json
import os
import subprocess
import sys
import textwrap

from tgtest import PKG_PARENT, parse_mem, env_with_package

TIMEOUT = 120

PARENT = """
import subprocess, sys
def parent_work():
    return bytearray(5000)
parent_work()
subprocess.run([sys.executable, "child.py", "x"], check=True)
subprocess.run([sys.executable, "-c", "def dash_c_work():\\n    return bytearray(9)\\n"
                "dash_c_work()"], check=True)
"""

CHILD = """
import sys
def child_work():
    return bytearray(7000)
child_work()
print("child argv", sys.argv[1:])
"""



def by_function(base):
    """{function: runinfo} for every run directory under BASE and the functions
    its MainThread.mem recorded."""
    found = {}
    for run_dir in sorted(glob.glob(os.path.join(str(base), "*"))):
        with open(os.path.join(run_dir, "runinfo.json")) as f:
            info = json.load(f)
        for _s, _l, func, _d in parse_mem(os.path.join(run_dir, "MainThread.mem")):
            found.setdefault(func, info)
    return found


def write_programs(tmp_path):
    (tmp_path / "parent.py").write_text(PARENT)
    (tmp_path / "child.py").write_text(CHILD)


def test_follow_exec_profiles_each_python_child_into_its_own_pid_dir(tmp_path):
    write_programs(tmp_path)
    res = subprocess.run([sys.executable, "-m", "threadgraph", "run", "--format", "text", "--follow-exec",
                          "--stack", "-o", "out", "parent.py"], cwd=str(tmp_path),
                         env=env_with_package(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True, timeout=TIMEOUT)
    assert res.returncode == 0, res.stderr
    assert "child argv ['x']" in res.stdout   # the child ran as usual
    dirs = glob.glob(str(tmp_path / "out" / "*"))
    assert len(dirs) == 3, dirs
    funcs = by_function(tmp_path / "out")
    parent, child, dash_c = funcs["parent_work"], funcs["child_work"], funcs["dash_c_work"]
    assert len({parent["pid"], child["pid"], dash_c["pid"]}) == 3
    assert child["ppid"] == parent["pid"] and dash_c["ppid"] == parent["pid"]
    assert child["argv"] == ["child.py", "x"]
    assert child["stack"] is True            # the run's options reach the children
    for info in (parent, child, dash_c):
        assert info["end_time"] is not None
    assert "followed 2 more Python processes" in res.stderr


def test_without_follow_exec_children_are_not_profiled(tmp_path):
    write_programs(tmp_path)
    res = subprocess.run([sys.executable, "-m", "threadgraph", "run", "--format", "text", "-o", "out",
                          "parent.py"], cwd=str(tmp_path), env=env_with_package(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, timeout=TIMEOUT)
    assert res.returncode == 0, res.stderr
    assert len(glob.glob(str(tmp_path / "out" / "*"))) == 1


def test_environment_alone_and_the_hidden_sitecustomize_still_runs(tmp_path):
    from threadgraph import _follow

    (tmp_path / "child.py").write_text(CHILD)
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text(textwrap.dedent("""
        import os
        os.environ["OTHER_SITECUSTOMIZE"] = "ran"
    """))
    (tmp_path / "check.py").write_text(CHILD + "\nimport os\nprint(os.environ.get("
                                       "'OTHER_SITECUSTOMIZE'))\n")
    env = env_with_package({"THREADGRAPH_FOLLOW": str(tmp_path / "out"),
                            "THREADGRAPH_FOLLOW_OPTIONS": json.dumps({"format": "text"})})
    env["PYTHONPATH"] = os.pathsep.join([_follow.HOOK_DIR, str(other), env["PYTHONPATH"]])
    res = subprocess.run([sys.executable, "check.py"], cwd=str(tmp_path), env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, timeout=TIMEOUT)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split("\n")[1] == "ran"
    (run_dir,) = glob.glob(str(tmp_path / "out" / "*"))
    assert os.path.basename(run_dir).startswith(str(json.load(
        open(os.path.join(run_dir, "runinfo.json")))["pid"]))
    assert "child_work" in by_function(tmp_path / "out")


def test_follow_exec_passes_sample_bytes_to_the_children(tmp_path):
    """--sample-bytes reaches the followed processes (it used to be left out of
    the settings mirrored by hand): each writes a sampled summary.json."""
    write_programs(tmp_path)
    res = subprocess.run([sys.executable, "-m", "threadgraph", "run", "--format", "text",
                          "--follow-exec", "--sample-bytes", "4096", "-o", "out", "parent.py"],
                         cwd=str(tmp_path), env=env_with_package(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True, timeout=TIMEOUT)
    assert res.returncode == 0, res.stderr
    assert set(by_function(tmp_path / "out")) >= {"parent_work", "child_work", "dash_c_work"}
    dirs = glob.glob(str(tmp_path / "out" / "*"))
    assert len(dirs) == 3, dirs
    for run_dir in dirs:
        with open(os.path.join(run_dir, "summary.json")) as f:
            assert json.load(f)["sample_bytes"] == 4096, run_dir
