"""A forked child's gc.txt lists the child's own collections only: the runs
its parent noted before the fork are the parent's (its gc.txt has them), and
a child that does not profile keeps no callback in gc.callbacks."""
import os

import pytest

from tgtest import run_scenario

SCRIPT = """
import gc, os, sys
from threadgraph import ProcessProfile
import threadgraph._recorder as rec

class Node:
    pass

def garbage(k):
    for _ in range(k):
        a = Node(); b = Node(); a.b = b; b.a = a
    return gc.collect()

p = ProcessProfile(default_log_path="out", profile="python")
if sys.argv[1] == "forked":
    p.enableForkedProfile()
p.enable()
garbage(100)
pid = os.fork()
if pid == 0:
    garbage(7)
    kept = rec.gc_callback in gc.callbacks
    p.disable()
    os._exit(3 if kept and sys.argv[1] != "forked" else 0)
_, status = os.waitpid(pid, 0)
p.disable()
print(os.getpid(), pid, status)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
@pytest.mark.parametrize("mode", ["forked", "plain"])
def test_forked_childs_gc_txt_has_only_its_own_runs(tmp_path, mode):
    (tmp_path / "s.py").write_text(SCRIPT)
    res = run_scenario(tmp_path, "import runpy, sys\nsys.argv = ['s.py', %r]\n"
                       "runpy.run_path('s.py', run_name='__main__')\n" % mode)
    parent, child, status = (int(x) for x in res.stdout.split())
    assert status == 0, "the child kept the recorder's gc callback (status %#x)" % status
    def runs(pid):
        with open(str(tmp_path / "out" / str(pid) / "gc.txt")) as f:
            return [line.split() for line in f if not line.startswith("#")]
    parent_runs = runs(parent)
    assert parent_runs and all(int(r[0]) == parent for r in parent_runs), parent_runs
    if mode == "forked":
        child_runs = runs(child)
        assert child_runs, child_runs
        assert all(int(r[0]) == child for r in child_runs), child_runs
    else:
        assert not (tmp_path / "out" / str(child)).exists()
