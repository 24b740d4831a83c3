"""`threadgraph run --sampled`: the program's main thread is a thread of the run
like any other (its name, its curve in MainThread.mem, its figures in the
summary), not `native-<tid>` without a curve."""
import json
import os

from test_run import only_run_dir, tg, write

PROGRAM = """
def work():
    return [bytearray(100000) for _ in range(100)]
k = work()
"""


def test_sampled_run_names_the_main_thread(tmp_path):
    write(tmp_path / "prog.py", PROGRAM)
    res = tg(["run", "--sampled", "-o", "out", "prog.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    run = only_run_dir(tmp_path / "out")
    with open(os.path.join(run, "summary.json")) as f:
        threads = {t["name"]: t for t in json.load(f)["threads"]}
    assert "MainThread" in threads, sorted(threads)
    assert not [n for n in threads if n.startswith("native-")], sorted(threads)
    assert threads["MainThread"]["live_bytes"] >= 100 * 100000
    assert os.path.exists(os.path.join(run, "MainThread.mem"))
    assert "native-" not in res.stderr, res.stderr
