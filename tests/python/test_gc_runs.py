"""gc.txt (docs/formats.md): the cyclic collector's runs while recording, per
thread, so that a call's growth can be told from collection charged to it."""
import json
import os
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent("""
    import gc, json, sys, threading, time
    import threadgraph

    def sentinel():
        pass

    gc.callbacks.append(sentinel)
    before = list(gc.callbacks)
    gc.disable()  # only the collection asked for below runs
    p = threadgraph.ProcessProfile(default_log_path=sys.argv[1])
    p.enable()
    seen = {}

    def churn():
        for _ in range(500):
            a, b = [], []
            a.append(b)
            b.append(a)
        del a, b
        seen["start"] = time.time()
        seen["collected"] = gc.collect()
        seen["stop"] = time.time()
        seen["tid"] = threading.get_native_id()

    t = threading.Thread(target=churn, name="Worker")
    t.start()
    t.join()
    p.disable()
    gc.collect()  # after disable: not recorded
    json.dump({"seen": seen, "dir": p.output_dir,
               "callbacks_kept": gc.callbacks == before}, sys.stdout)
""")


def run(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    out = subprocess.run([sys.executable, str(prog), str(tmp_path / "out")],
                         stdout=subprocess.PIPE, check=True, universal_newlines=True)
    return json.loads(out.stdout)


def test_gc_run_recorded_in_its_thread(tmp_path):
    res = run(tmp_path)
    seen = res["seen"]
    with open(os.path.join(res["dir"], "gc.txt")) as f:
        lines = f.read().splitlines()
    assert len(lines) == 1, lines
    tid, start, stop, collected = lines[0].split(" ")
    assert int(tid) == seen["tid"]
    assert int(collected) == seen["collected"] >= 1000
    # TIME as the other files: seconds, six decimals, truncated to the microsecond
    assert seen["start"] - 0.001 <= float(start) <= float(stop) <= seen["stop"] + 0.001
    assert len(start.split(".")[1]) == 6
    # disable() took its callback out and left the program's own
    assert res["callbacks_kept"]


RUN_PROGRAM = textwrap.dedent("""
    import gc, threading
    gc.disable()  # only the collection asked for below runs

    def churn():
        x = [bytearray(1000) for _ in range(2000)]
        for _ in range(500):
            a, b = [], []
            a.append(b)
            b.append(a)
        del a, b
        gc.collect()
        return x

    def big():
        return [bytearray(1000) for _ in range(4000)]

    keep = []
    t = threading.Thread(target=lambda: keep.append(churn()), name="Worker")
    t.start()
    t.join()
    keep.append(big())
""")


def test_run_summary_names_the_thread_that_collected(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(RUN_PROGRAM)
    proc = subprocess.run([sys.executable, "-m", "threadgraph", "run", "-o", str(tmp_path / "out"),
                           str(prog)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "  the garbage collector ran in Worker (1 run, " in proc.stderr, proc.stderr
    assert "MainThread (" not in proc.stderr.split("the garbage collector ran in", 1)[1]
