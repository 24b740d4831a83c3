"""A text run that dropped records says so in every command that pairs its
.mem and .stack lines.

In a text run each .mem and .stack line is dropped on its own when the sink
falls behind, so past a thread's first drop the k-th .mem line need not be the
return of the k-th call to close (docs/formats.md "runinfo.json", `dropped`).
The commands that pair them (folded/flamegraph --metric delta or time,
decorate-stack, memg --held, report) read runinfo.json's `dropped` and say
once, before anything they pair, that the recorder lost records, and blame
those drops rather than "damaged dumps?" for the calls they find mis-paired.
The drops here are real: the recorder's test gate holds the flusher's write
while a thread fills the 64 MiB the writer keeps.
"""
import os
import subprocess
import sys
import textwrap

from tgtest import env_with_package, only_dir, read_lines, load_runinfo

TIMEOUT = 300

PROGRAM = textwrap.dedent("""
    import sys, threading, threadgraph
    from threadgraph import _recorder

    p = threadgraph.ProcessProfile(format="text", default_log_path=sys.argv[1],
                                   profile="python")
    p.trackStack(True)
    p.setProcessMemoryFrequence(0)
    p.enable()

    def work_with_a_rather_long_name_to_fill_buffers_faster():
        return [0] * 10

    def worker():
        _recorder._test_text_gate(True, False)  # the flusher's write sticks
        for _ in range(600000):
            work_with_a_rather_long_name_to_fill_buffers_faster()
        _recorder._test_text_gate(False)

    t = threading.Thread(target=worker, name="W")
    t.start()
    t.join()
    p.disable()
""")

DROPPED = "the recorder dropped %d records it could not write (runinfo.json)"


def threadgraph_cmd():
    script = os.path.join(os.path.dirname(sys.executable), "threadgraph")
    return [script] if os.path.exists(script) else [sys.executable, "-m", "threadgraph"]


def tg(*args, cwd, env=None):
    full_env = dict(os.environ)
    full_env.pop("TG_CLI", None)
    full_env.update(env or {})
    return subprocess.run(threadgraph_cmd() + [str(a) for a in args], cwd=str(cwd),
                          env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=TIMEOUT)


def dropped_run(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    subprocess.run([sys.executable, str(script), str(tmp_path / "out")], check=True,
                   env=env_with_package(), cwd=str(tmp_path), stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, timeout=TIMEOUT)
    run = only_dir(tmp_path / "out")
    dropped = load_runinfo(run)["dropped"]
    assert dropped > 0, "the gate made no drop"
    # the drops broke the pairing: the two files no longer have a line per call
    assert len(read_lines(os.path.join(run, "W.mem"))) != \
        len(read_lines(os.path.join(run, "W.stack")))
    return run, dropped


def said_once_first(stderr, dropped, before=("paired with", "left over", "not plotted")):
    """The drops are said once, before any pairing complaint."""
    text = DROPPED % dropped
    assert stderr.count(text) == 1, stderr
    at = stderr.index(text)
    for what in before:
        if what in stderr:
            assert stderr.index(what) > at, stderr
    assert "damaged dumps" not in stderr, stderr


def test_pairing_commands_say_the_drops(tmp_path):
    run, dropped = dropped_run(tmp_path)

    r = tg("folded", "--metric", "delta", run, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    said_once_first(r.stderr, dropped)

    mem, stack = os.path.join(run, "W.mem"), os.path.join(run, "W.stack")
    r = tg("decorate-stack", mem, stack, "1000", cwd=tmp_path)
    said_once_first(r.stderr, dropped)

    r = tg("memg", "--held", "--script-only", "-o", tmp_path / "held", run, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    said_once_first(r.stderr, dropped)

    page = tmp_path / "report.html"
    r = tg("report", "-o", page, run, cwd=tmp_path,
           env={"GNUPLOT": str(tmp_path / "no-gnuplot")})
    assert r.returncode == 0, r.stderr
    said_once_first(r.stderr, dropped)
    assert (DROPPED % dropped) in page.read_text()
    assert "damaged dumps" not in page.read_text()


def test_intact_text_run_says_nothing(tmp_path):
    """The same program without the gate drops nothing: no such warning."""
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM.replace("_recorder._test_text_gate", "(lambda *a: None)")
                      .replace("600000", "2000"))
    subprocess.run([sys.executable, str(script), str(tmp_path / "out")], check=True,
                   env=env_with_package(), cwd=str(tmp_path), timeout=TIMEOUT)
    run = only_dir(tmp_path / "out")
    assert load_runinfo(run)["dropped"] == 0
    r = tg("folded", "--metric", "delta", run, cwd=tmp_path)
    assert r.returncode == 0 and "dropped" not in r.stderr, r.stderr
