"""What the commands say of an aggregate run and of a capture of limited size
when they cannot read what the user asks (found by running every command on a
real --aggregate and --max-size run)."""
import os
import shutil

import pytest


@pytest.mark.parametrize("command", ["nesting", "memh", "interleave"])
def test_call_by_call_graphs_refuse_an_aggregate_run(tmp_path, tg, fixtures, command):
    """nesting, memh and interleave need each call: on an aggregate run they
    said 'no calls to plot' (nesting) or plotted the curve's readings as a call
    site '<thread memory>' summing gigabytes (memh) or as the times the threads
    ran (interleave). Now each says, as decorate-stack does, that it needs a
    full capture, exit 1, and writes no graph."""
    run = tmp_path / "run"
    shutil.copytree(os.path.join(fixtures, "aggregate-v2"), str(run))
    out = tmp_path / "out"
    r = tg(command, "--script-only", "-o", out, run)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "is an aggregate run (aggregate.tga)" in r.stderr, r.stderr
    assert "needs a full capture (record it without --aggregate)" in r.stderr, r.stderr
    assert not out.exists() or not os.listdir(str(out))
    # the file named as such is the run too
    r = tg(command, "--script-only", "-o", out, run / "aggregate.tga")
    assert r.returncode == 1 and "is an aggregate run" in r.stderr, r.stderr


def test_memh_refuses_a_sampled_runs_curves(tmp_path, tg):
    """A sampled run's .mem lines are readings of the thread's memory
    (<thread memory>:0:sampled=>BYTES), not deltas of calls: memh summed them
    into one site '<thread memory>' of gigabytes, as it once did on an
    aggregate run. It now says why it cannot, exit 1, and writes no graph."""
    run = tmp_path / "run"
    run.mkdir()
    with open(str(run / "Worker.mem"), "w") as f:
        for i in range(1, 200):
            f.write("1700000000.%06d#<thread memory>:0:sampled=>%d\n" % (i, i * 100000))
    out = tmp_path / "out"
    for operand in (run, run / "Worker.mem"):
        r = tg("memh", "--script-only", "-o", out, operand)
        assert r.returncode == 1, (r.returncode, r.stderr)
        assert "is a sampled run's memory curve" in r.stderr, r.stderr
        assert "it needs a full run (record it without --sampled)" in r.stderr, r.stderr
        assert not os.path.exists(str(out / "memh.txt"))



def test_aggregate_thread_names_are_file_base_names(tmp_path, tg, fixtures):
    """aggregate.tga's thread lines follow the capture's rules for a thread's
    base name (the recorder writes '/', control bytes and a leading '.' as
    %HH): a hand-made or damaged 't' line with 'a/b' was shown as thread 'b'
    and gave the peaks a MEMFILE under a directory 'a'."""
    for bad in ("a/b", "..", ".hidden", "../../x"):
        run = tmp_path / ("run%d" % len(os.listdir(str(tmp_path))))
        shutil.copytree(os.path.join(fixtures, "aggregate-v2"), str(run))
        path = run / "aggregate.tga"
        lines = path.read_text().split("\n")
        i = next(k for k, l in enumerate(lines) if l.startswith("t ") and not l.startswith("t 0 "))
        lines[i] = " ".join(lines[i].split(" ")[:3] + [bad])
        path.write_text("\n".join(lines))
        for args in (["peaks"], ["memg", "--script-only", "-o", tmp_path / "out"], ["folded"]):
            command = args[0]
            r = tg(*(args + [run]))
            assert r.returncode == 1, (bad, command, r.stderr)
            assert "aggregate.tga:%d: a thread name that is no file base name" % (i + 1) \
                in r.stderr, r.stderr
