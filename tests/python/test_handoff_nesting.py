"""The C call that hands a thread to another profile function (cProfile's
enable, sys.setprofile) returns while the other function holds the thread:
its return is never seen.  When the recorder has the thread back, that call is
closed as unwound and counted, and the calls made afterwards are recorded at
their own depth, not as its children (docs/api.md, "Other tools" and "Every
loss counted").  3.12+ records through sys.monitoring, which neither takes."""
import os
import subprocess
import sys

import pytest

from test_run import only_run_dir, write, TIMEOUT

SETPROFILE = sys.version_info < (3, 12)

PROGRAM = """
import sys, warnings
from threadgraph import ProcessProfile

def work(): return bytearray(10000)
p = ProcessProfile(default_log_path="out", format="text", profile="both")
p.trackStack()
p.enable()
if sys.argv[1] == "cProfile":
    import cProfile
    pr = cProfile.Profile()
    pr.enable()
    pr.disable()
else:
    sys.setprofile(None)
x = [None] * 10  # an allocation: the recorder looks here
work()
work()
with warnings.catch_warnings(record=True):
    warnings.simplefilter("always")
    p.disable()
print("unwound", p.stats()["unwound"])
"""


@pytest.mark.parametrize("how", ["cProfile", "setprofile_none"])
def test_calls_after_a_handoff_are_not_nested_in_it(tmp_path, how):
    prog = write(tmp_path / "prog.py", PROGRAM)
    res = subprocess.run([sys.executable, prog, how], cwd=str(tmp_path),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, timeout=TIMEOUT)
    assert res.returncode == 0, res.stderr
    run_dir = only_run_dir(tmp_path / "out")
    with open(os.path.join(run_dir, "MainThread.stack")) as f:
        stack = f.read().splitlines()
    works = [line for line in stack if line.endswith(":work")]
    assert len(works) == 2, stack
    # the module's own calls: depth 0, siblings of the handing-over call
    assert all(not line.startswith(" ") for line in works), stack
    if SETPROFILE:
        # the handing-over call's return was lost: counted
        assert "unwound 1" in res.stdout, res.stdout
    else:
        assert "unwound 0" in res.stdout, res.stdout
