"""The tutorial (docs/tutorial.md), end to end, on examples/main.py.

Each step is the tutorial's command with `python ProfilerGraph.py` replaced by
`threadgraph`: profile the example, draw memg with the tutorial's options, take a
peak from memg.txt, find its line in the thread's .mem as the tutorial's grep does,
and decorate that call's stack.  Also the README's two-command start on
examples/app.py.  memg runs gnuplot: without gnuplot those tests are skipped (CI
installs it, so they run there).
"""
import glob
import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
EXAMPLES = os.path.join(ROOT, "examples")
TIMEOUT = 300  # seconds; only a hang gets near it
THREAD_COUNT = 8  # examples/main.py's THREAD_COUNT

needs_gnuplot = pytest.mark.skipif(
    shutil.which("gnuplot") is None, reason="gnuplot is not installed (memg draws with it)"
)

MEMG_PROGRESS = ["Processing data for the process", "Running gnuplot."]
DECORATE_PROGRESS = [
    "Scanning memory file looking for the event.",
    "Scanning stack file looking for a matching event.",
    "Reversing memory events of interest.",
    "Parsing stack trace into a tree.",
    "Reconciling trace and memory.",
    "Decorating trace.",
]


def threadgraph_cmd():
    script = os.path.join(os.path.dirname(sys.executable), "threadgraph")
    if os.path.exists(script):
        return [script]
    return [sys.executable, "-m", "threadgraph"]


def run(cmd, cwd):
    env = dict(os.environ)
    env.pop("TG_CLI", None)
    return subprocess.run(
        cmd,
        cwd=str(cwd),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
        timeout=TIMEOUT,
    )


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    """Step 1: `python main.py` with the profiler set up as the tutorial shows."""
    base = tmp_path_factory.mktemp("profiling") / "example"
    res = run([sys.executable, os.path.join(EXAMPLES, "main.py"), str(base)], EXAMPLES)
    assert res.returncode == 0, res.stderr
    dirs = os.listdir(str(base))
    assert len(dirs) == 1 and dirs[0].isdigit(), dirs  # BASE/<pid>/
    run_dir = os.path.join(str(base), dirs[0])
    assert res.stdout.strip() == "profile written to %s" % run_dir
    return run_dir


def test_profile_files_are_the_tutorials(profiled):
    names = set(os.listdir(profiled))
    threads = ["MainThread"] + ["Thread-%d" % i for i in range(1, THREAD_COUNT + 1)]
    expected = {t + ".mem" for t in threads} | {t + ".stack" for t in threads}
    expected |= {"process.mem", "runinfo.json"}
    names.discard("gc.txt")  # only when the garbage collector ran (docs/formats.md)
    assert names == expected
    with open(os.path.join(profiled, "process.mem")) as f:
        samples = [l for l in f if l.strip()]
    assert samples and all(re.match(r"^[0-9]+\.[0-9]+#[0-9]+$", l.strip()) for l in samples)


@pytest.fixture(scope="module")
def memg(profiled, tmp_path_factory):
    """Step 2: threadgraph memg with the tutorial's options, in a fresh directory."""
    if shutil.which("gnuplot") is None:
        pytest.skip("gnuplot is not installed (memg draws with it)")
    cwd = tmp_path_factory.mktemp("memg")
    files = sorted(glob.glob(os.path.join(profiled, "*.mem")))  # the shell's glob
    res = run(
        threadgraph_cmd()
        + [
            "memg",
            "--process_rebase=5500",
            "--peak=20",
            "--peak_delta_time=0",
            "--peak_delta_value=50",
        ]
        + files,
        cwd,
    )
    assert res.returncode == 0, res.stderr
    return cwd, res


@needs_gnuplot
def test_memg_draws_and_lists_peaks(memg):
    cwd, res = memg
    for i in range(1, THREAD_COUNT + 1):
        assert "Processing data for thread Thread-%d" % i in res.stderr
    assert "Processing data for thread MainThread" in res.stderr
    for line in MEMG_PROGRESS:
        assert line in res.stderr
    with open(str(cwd / "memg.svg")) as f:
        svg = f.read()
    assert "<svg" in svg
    with open(str(cwd / "memg.txt")) as f:
        legend = [l.rstrip("\n") for l in f if l.strip()]
    # Every doStuff call keeps a few hundred KB: each thread has peaks over 20 KB.
    assert len(legend) >= THREAD_COUNT
    for n, line in enumerate(legend):
        assert re.match(r"^%d: [^>]+>.+:[0-9]+:[^:]+=>-?[0-9]+$" % n, line), line


def pick_dostuff_peak(cwd):
    with open(str(cwd / "memg.txt")) as f:
        for line in f:
            m = re.match(r"^([0-9]+): (Thread-[0-9]+)>(.+:[0-9]+:doStuff)=>(-?[0-9]+)$", line.strip())
            if m:
                return m.group(2), m.group(3), int(m.group(4))
    raise AssertionError("no doStuff peak in memg.txt")


@needs_gnuplot
def test_peak_to_decorated_stack(profiled, memg):
    cwd, _ = memg
    # Step 3: a peak from memg.txt, "N: THREAD>FILE:LINE:FUNCTION=>DELTA".
    thread, site, delta = pick_dostuff_peak(cwd)
    assert site.startswith(os.path.join(EXAMPLES, "main.py") + ":")
    # Step 4: grep -n "SITE=>DELTA" THREAD.mem, as the tutorial does.
    mem = os.path.join(profiled, thread + ".mem")
    needle = "%s=>%d" % (site, delta)
    with open(mem) as f:
        hits = [(n, l.rstrip("\n")) for n, l in enumerate(f, 1) if needle in l]
    assert hits, needle
    lineno, text = hits[0]
    assert re.match(r"^[0-9]+\.[0-9]+#", text)
    # Step 5: decorate-stack --prefix=<examples dir>/ MEM STACK LINENO.
    stack = os.path.join(profiled, thread + ".stack")
    res = run(
        threadgraph_cmd()
        + ["decorate-stack", "--prefix=%s/" % EXAMPLES, mem, stack, str(lineno)],
        cwd,
    )
    assert res.returncode == 0, res.stderr
    progress = [l for l in res.stderr.splitlines() if l.strip()]
    assert progress == DECORATE_PROGRESS
    out = res.stdout.splitlines()
    line = site.rsplit(":", 2)[1]
    first = re.match(
        r"^doStuff@main\.py:([0-9]+)-%s, Time: ([0-9.e-]+) s, Memory: %d B$" % (line, delta),
        out[0],
    )
    assert first, out[0]
    # Below it, doStuff's callees (randint, sleep, ...) one space deeper.
    assert len(out) > 1
    assert all(l.startswith(" ") for l in out[1:])
    assert any(re.match(r"^ randint@.*random\.py:[0-9]+-[0-9]+, Time: ", l) for l in out[1:])
    # The same event given as the line's text instead of its number.
    res2 = run(
        threadgraph_cmd()
        + ["decorate-stack", "--prefix=%s/" % EXAMPLES, mem, stack, text],
        cwd,
    )
    assert res2.returncode == 0, res2.stderr
    assert res2.stdout == res.stdout


def test_thread_graph_import_as_in_the_tutorial():
    from thread_graph.Profiler import ProcessProfile
    import threadgraph

    assert issubclass(ProcessProfile, threadgraph.ProcessProfile)
    # The original tutorial reads text files: the compatibility import writes them.
    assert ProcessProfile().format == "text"
    assert threadgraph.ProcessProfile().format == "binary"


@needs_gnuplot
def test_readme_quick_start(tmp_path):
    """`threadgraph run --stack examples/app.py && threadgraph memg threadgraph-app`,
    twice: the second time the base holds two runs and memg reads the newer."""
    shutil.copytree(EXAMPLES, str(tmp_path / "examples"))
    res = run(threadgraph_cmd() + ["run", "--stack", "examples/app.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stderr.startswith("threadgraph: profiling examples/app.py; writing to threadgraph-app/")
    run_dirs = glob.glob(str(tmp_path / "threadgraph-app" / "*"))
    assert len(run_dirs) == 1
    assert os.path.exists(os.path.join(run_dirs[0], "capture.tg"))
    assert not glob.glob(os.path.join(run_dirs[0], "*.mem"))  # binary by default
    if "top peaks: unavailable (threadgraph peaks failed" in res.stderr:
        pytest.skip("the installed processor does not read binary captures")
    assert "top peaks (thread, function, delta):" in res.stderr
    res = run(threadgraph_cmd() + ["memg", "threadgraph-app"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert "holds" not in res.stderr, res.stderr  # one run: no note
    assert os.path.getsize(str(tmp_path / "memg.svg")) > 0
    assert os.path.exists(str(tmp_path / "memg.txt"))
    res = run(threadgraph_cmd() + ["run", "--stack", "examples/app.py"], tmp_path)
    assert res.returncode == 0, res.stderr
    second = res.stderr.split("writing to ", 1)[1].split("\n", 1)[0].rstrip("/")
    res = run(threadgraph_cmd() + ["memg", "threadgraph-app"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert ("threadgraph: 'threadgraph-app' holds 2 runs; reading the latest, '%s'"
            % second) in res.stderr, res.stderr
