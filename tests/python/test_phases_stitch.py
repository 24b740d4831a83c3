"""Phases, marks and pool work stitched to its submitter, on real recorded runs.

A planted program notes phases ("load", "serve") and a mark, submits work of
known sizes to a ThreadPoolExecutor (submit and map), to loop.run_in_executor
and to an asyncio task.  It runs under `threadgraph run` twice: as text dumps
without accounting, and as a binary capture with accounting (whose windows give
`threadgraph summary` its per-phase figures).  Then:

- `folded --metric delta`: each submitting function's subtree holds the bytes
  of the work it submitted, under a marker frame ("[ThreadPoolExecutor-0]");
  with --no-stitch the pool threads hold them instead;
- the capture and its text export (`threadgraph export`) fold alike;
- memg's legend and the report name the phases; a peak's phase is the one its
  call returned in, and `peaks --phase` keeps that phase's peaks.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

TIMEOUT = 120
SUBMIT, MAP, EXEC, TASK, LOAD = 400000, 300000, 500000, 600000, 2000000
# what a bytearray of n bytes costs beyond n (object header, allocator rounding),
# and what the stitching plumbing keeps per task (its note in a list)
SLACK = 2000

PLANTED = """\
import asyncio
import concurrent.futures
import threadgraph

keep = []

def work(n):
    return bytearray(n)

def submitter(ex):
    futures = [ex.submit(work, %(SUBMIT)d) for _ in range(3)]
    keep.extend(f.result() for f in futures)

def mapper(ex):
    keep.extend(ex.map(work, [%(MAP)d] * 2))

async def child(n):
    await asyncio.sleep(0)
    return bytearray(n)

async def executor_user():
    return await asyncio.get_running_loop().run_in_executor(None, work, %(EXEC)d)

async def task_user():
    return await asyncio.create_task(child(%(TASK)d))

async def amain():
    keep.append(await executor_user())
    keep.append(await task_user())

def load():
    keep.append(bytearray(%(LOAD)d))

@threadgraph.phase("serve")
def serve():
    asyncio.run(amain())

def main():
    with threadgraph.phase("load"):
        load()
    threadgraph.mark("loaded")
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        submitter(ex)
        mapper(ex)
    serve()

main()
""" % dict(SUBMIT=SUBMIT, MAP=MAP, EXEC=EXEC, TASK=TASK, LOAD=LOAD)


def threadgraph_cmd():
    script = os.path.join(os.path.dirname(sys.executable), "threadgraph")
    return [script] if os.path.exists(script) else [sys.executable, "-m", "threadgraph"]


def tg(args, cwd, check=True):
    env = dict(os.environ)
    env.pop("TG_CLI", None)
    res = subprocess.run(threadgraph_cmd() + [str(a) for a in args], cwd=str(cwd), env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, timeout=TIMEOUT)
    if check:
        assert res.returncode == 0, res.stderr
    return res


@pytest.fixture(scope="module", params=["text", "binary"])
def run(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("phases-" + request.param)
    (tmp / "planted.py").write_text(textwrap.dedent(PLANTED))
    opts = ["--format", "text"] if request.param == "text" else ["--accounting"]
    tg(["run"] + opts + ["--stack", "-o", "out", "planted.py"], tmp)
    dirs = [d for d in glob.glob(str(tmp / "out" / "*")) if os.path.isdir(d)]
    assert len(dirs) == 1, dirs
    d = dirs[0]
    exported = None
    if request.param == "binary":
        exported = str(tmp / "exported")
        os.makedirs(exported)
        for name in os.listdir(d):
            if name not in ("capture.tg", "marks.txt") and os.path.isfile(os.path.join(d, name)):
                shutil.copy(os.path.join(d, name), os.path.join(exported, name))
        tg(["export", "-q", "-o", exported, d], tmp)
    return {"dir": d, "cwd": tmp, "format": request.param, "exported": exported,
            "file": os.path.abspath(str(tmp / "planted.py"))}


def folded(run_dir, *args):
    res = tg(["folded", "--metric", "delta"] + list(args) + [run_dir], run_dir)
    out = {}
    for line in res.stdout.splitlines():
        stack, value = line.rsplit(" ", 1)
        out[stack] = int(value)
    return out


def subtree(stacks, function, path):
    """The sum over the stacks through FUNCTION of the planted file."""
    frame = "%s (%s:" % (function, path)
    return sum(v for k, v in stacks.items() if frame in k)


def grafted(stacks, function, path):
    """The sum over the stacks through FUNCTION of the planted file and then a
    marker frame: the work it submitted."""
    frame = "%s (%s:" % (function, path)
    return sum(v for k, v in stacks.items() if frame in k and ";[" in k[k.index(frame):])


def test_marks_file(run):
    lines = open(os.path.join(run["dir"], "marks.txt")).read().splitlines()
    assert lines[0] == "# threadgraph marks 1"
    recs = [l.split("\t") for l in lines[1:]]
    phases = [r for r in recs if r[0] == "phase"]
    assert [(p[3], p[4]) for p in phases] == [("MainThread", "load"), ("MainThread", "serve")]
    for p in phases:
        assert float(p[1]) <= float(p[2])
    assert [r[2:] for r in recs if r[0] == "mark"] == [["MainThread", "loaded"]]
    labels = [r[5] for r in recs if r[0] == "task"]
    assert labels.count("ThreadPoolExecutor-0") == 5  # 3 submit + 2 map
    # run_in_executor's default pool: "asyncio" since 3.9, a second pool before
    assert [l for l in labels if l != "ThreadPoolExecutor-0" and not l.startswith("Task-")] \
        in (["asyncio"], ["ThreadPoolExecutor-1"])


def test_submitter_subtrees_hold_their_work(run):
    stacks, path = folded(run["dir"]), run["file"]
    for function, want in (("submitter", 3 * SUBMIT), ("mapper", 2 * MAP),
                           ("executor_user", EXEC), ("task_user", TASK)):
        got = grafted(stacks, function, path)
        assert want <= got <= want + SLACK * 3, (function, got)
    pool = [k for k in stacks if "submitter (" in k and "work (" in k]
    assert pool and all(";[ThreadPoolExecutor-0];work (" in k for k in pool), pool
    assert any(";[Task-" in k and "child (" in k for k in stacks)
    # no work is left under the pool threads
    assert not [k for k in stacks if k.startswith("ThreadPoolExecutor-") and "work (" in k]


def test_no_stitch_keeps_work_where_it_ran(run):
    stacks, path = folded(run["dir"], "--no-stitch"), run["file"]
    assert not any("[ThreadPoolExecutor-" in k for k in stacks)
    # what submit itself allocated (futures, the pool's threads), not the work
    assert subtree(stacks, "submitter", path) < SUBMIT / 4
    pool = sum(v for k, v in stacks.items()
               if k.startswith("ThreadPoolExecutor-0_") and "work (" in k)
    assert 3 * SUBMIT + 2 * MAP <= pool <= 3 * SUBMIT + 2 * MAP + 5 * SLACK


def test_capture_and_its_export_fold_alike(run):
    if run["format"] != "binary":
        pytest.skip("the binary run's export")
    # export -o carries marks.txt with the dumps
    assert open(os.path.join(run["exported"], "marks.txt")).read() == \
        open(os.path.join(run["dir"], "marks.txt")).read()
    assert folded(run["dir"]) == folded(run["exported"])
    assert folded(run["dir"], "--no-stitch") == folded(run["exported"], "--no-stitch")


def peaks(run_dir, *args):
    res = tg(["peaks", "--json", "--peak", "1500", "--peak_delta_time", "0"] + list(args)
             + [run_dir], run_dir)
    return json.loads(res.stdout)


def test_a_peak_has_its_phase(run):
    for d in filter(None, (run["dir"], run["exported"])):
        every = peaks(d)
        load = [p for p in every if p["function"] == "load"]
        assert len(load) == 1 and load[0]["phase"] == "load", every
        assert LOAD <= load[0]["delta"] <= LOAD + SLACK
        assert [p["function"] for p in peaks(d, "--phase", "load")] == ["load"]
        assert all(p["phase"] is None for p in every if p["function"] == "main")
        serve = peaks(d, "--phase", "serve")
        assert all(p["phase"] == "serve" for p in serve)
        assert "load" not in [p["function"] for p in serve]
    res = tg(["peaks", "--phase", "nosuch", run["dir"]], run["cwd"], check=False)
    assert res.returncode != 0 and "no phase 'nosuch'" in res.stderr


def test_memg_and_report_name_the_phases(run):
    if shutil.which("gnuplot") is None:
        pytest.skip("the graphs need gnuplot")
    out = os.path.join(str(run["cwd"]), "memg-" + run["format"])
    tg(["memg", "--peak", "1500", "-o", out, run["dir"]], run["cwd"])
    svg = open(os.path.join(out, "memg.svg")).read()
    assert "phase load" in svg and "phase serve" in svg and "loaded" in svg
    tg(["memg", "--held", "-o", out, run["dir"]], run["cwd"])
    svg = open(os.path.join(out, "memg-held.svg")).read()
    assert "phase load" in svg and "phase serve" in svg and "loaded" in svg
    page = os.path.join(str(run["cwd"]), "report-%s.html" % run["format"])
    tg(["report", "--peak", "1500", "--peak_delta_time", "0", "--metric", "delta", "-o", page,
        run["dir"]], run["cwd"])
    html = open(page).read()
    assert "<th>phase</th>" in html
    assert "<td>load</td><td>MainThread</td>" in html
    assert "[ThreadPoolExecutor-0]" in html  # the delta flame graph, stitched


def test_summary_has_a_window_per_phase(run):
    if run["format"] != "binary":
        pytest.skip("the accounting run")
    res = tg(["summary", run["dir"]], run["cwd"])
    assert "phase load" in res.stdout and "phase serve" in res.stdout


def test_phase_and_mark_without_a_profile():
    import threadgraph

    @threadgraph.phase("idle")
    def f(x):
        return x + 1

    with threadgraph.phase("nothing"):
        threadgraph.mark("nothing either")
        assert f(1) == 2


def test_wrappers_installed_on_import_and_removed(tmp_path):
    """enable() imports neither concurrent.futures nor asyncio: the wrapper
    comes with the program's own import; disable() puts the original back
    (and, imported before enable(), the pool is wrapped at once)."""
    from tgtest import only_dir, run_scenario
    run_scenario(tmp_path, """
        import sys
        from threadgraph import ProcessProfile
        from threadgraph import _stitch

        def run(base):
            import concurrent.futures
            p = ProcessProfile(default_log_path=base)
            p.trackStack()
            p.enable()
            try:
                with concurrent.futures.ThreadPoolExecutor(1) as ex:
                    assert ex.submit(len, "abc").result() == 3
                    assert list(ex.map(len, ["ab", "c"], timeout=60)) == [2, 1]
            finally:
                p.disable()
            cls = concurrent.futures.ThreadPoolExecutor
            assert cls.submit.__module__ == "concurrent.futures.thread", cls.submit
            assert _stitch._finder not in sys.meta_path

        p = ProcessProfile(default_log_path="unused")
        p.enable()
        assert "concurrent.futures" not in sys.modules and "asyncio" not in sys.modules
        p.disable()
        run("late")    # imported while recording
        run("early")   # imported before
        """)
    for base in ("late", "early"):
        marks = open(os.path.join(only_dir(tmp_path / base), "marks.txt")).read()
        kinds = [l.split("\t")[0] for l in marks.splitlines()[1:]]
        assert kinds.count("task") == 3 and kinds.count("run") == 3, marks


def test_a_child_that_is_not_profiled_gets_the_originals_back(tmp_path):
    """A child forked without enableForkedProfile() records nothing: it gets
    the pool's own submit back and no import finder, as disable() would give
    (its disable() does nothing, the recorder being off in it)."""
    from tgtest import run_scenario
    run_scenario(tmp_path, """
        import os, sys
        import concurrent.futures
        from threadgraph import ProcessProfile
        from threadgraph import _stitch

        cls = concurrent.futures.ThreadPoolExecutor
        p = ProcessProfile(default_log_path="out")
        p.enable()
        assert hasattr(cls.submit, "__wrapped__")
        pid = os.fork()
        if pid == 0:
            ok = (not hasattr(cls.submit, "__wrapped__")
                  and _stitch._finder not in sys.meta_path)
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        assert hasattr(cls.submit, "__wrapped__")  # the parent still records
        p.disable()
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        """)


@pytest.mark.skipif(sys.version_info < (3, 12), reason="asyncio.eager_task_factory is 3.12's")
def test_eager_task_first_step_is_recorded_and_stitched(tmp_path):
    """An eager task runs its first step inside create_task: recorded, and
    stitched with its later steps under the task's marker."""
    from tgtest import only_dir, run_scenario
    run_scenario(tmp_path, """
        import asyncio
        from threadgraph import ProcessProfile
        keep = []
        async def child(n):
            keep.append(bytearray(n))
            await asyncio.sleep(0)
            keep.append(bytearray(n))
        async def spawner():
            await asyncio.create_task(child(%d))
        async def amain():
            asyncio.get_running_loop().set_task_factory(asyncio.eager_task_factory)
            await spawner()
        p = ProcessProfile(default_log_path="out")
        p.trackStack()
        p.enable()
        asyncio.run(amain())
        p.disable()
        """ % SUBMIT)
    d = only_dir(tmp_path / "out")
    stacks, path = folded(d), str(tmp_path / "scenario.py")
    got = sum(v for k, v in stacks.items()
              if "spawner (%s:" % path in k and ";[Task-" in k and "child (" in k)
    assert 2 * SUBMIT <= got <= 2 * SUBMIT + SLACK, stacks


def test_tracebacks_are_the_programs_own(tmp_path):
    """An exception in an asyncio task (raised in a step, thrown in by the
    future it awaits, a cancellation) or in pool work prints the traceback it
    prints without threadgraph: no frame of the wrappers (TaskCoro.send,
    throw, run_task)."""
    from tgtest import run_scenario
    res = run_scenario(tmp_path, """
        import asyncio
        import concurrent.futures
        import traceback
        from threadgraph import ProcessProfile

        async def raises():
            await asyncio.sleep(0)
            raise ValueError("in a step")

        async def awaits(fut):
            await fut

        async def sleeps():
            await asyncio.sleep(60)

        def work():
            raise KeyError("in pool work")

        def shown(aw):
            try:
                aw()
            except BaseException:
                return traceback.format_exc()
            return "no exception"

        async def tasks():
            out = []

            async def wait(t):
                try:
                    await t
                except BaseException:
                    return traceback.format_exc()
            out.append(await wait(asyncio.create_task(raises())))
            fut = asyncio.get_running_loop().create_future()
            t = asyncio.ensure_future(awaits(fut))
            await asyncio.sleep(0)
            fut.set_exception(RuntimeError("thrown in"))
            out.append(await wait(t))
            t = asyncio.create_task(sleeps())
            await asyncio.sleep(0)
            t.cancel()
            out.append(await wait(t))
            return out

        def everything():
            out = asyncio.run(tasks())
            with concurrent.futures.ThreadPoolExecutor(1) as ex:
                fut = ex.submit(work)
                out.append(shown(lambda: fut.result(timeout=60)))
            return out

        plain = everything()
        with ProcessProfile(default_log_path="out"):
            profiled = everything()
        for a, b in zip(plain, profiled):
            print("%s\\n---\\n%s\\n===" % (a, b))
        assert plain == profiled
        assert sum("Traceback" in t for t in plain) == 4, plain
        """)
    assert "_stitch.py" not in res.stdout, res.stdout
