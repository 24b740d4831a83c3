"""Sampled mode (ProcessProfile(mode="sampled"), `threadgraph run --sampled`;
docs/api.md "Sampled mode"): no profile function and no sys.monitoring
callbacks; the allocator hooks count every byte per thread (exact totals, a
memory curve per thread in its .mem file); the Python stack of one allocation
per N bytes on average is read from the thread's frames and its site given an
unbiased weight, in accounting's snapshots.

The sampler is seeded (THREADGRAPH_SAMPLE_SEED): a thread's sample points
depend only on the seed, its number and its own allocations, so the planted
thread's estimate is the same from one run to the next.
"""
import json
import math
import os
import signal
import subprocess
import sys

import pytest

from tgtest import env_with_package, only_dir, parse_mem, read_lines, run_scenario

SEED = {"THREADGRAPH_SAMPLE_SEED": "7"}
MIB = 1 << 20
N = 512 * 1024          # the default rate
BLOCKS = 64
# Bound of the planted site's estimate, in standard deviations of the
# Horvitz-Thompson estimate for BLOCKS blocks of 1 MiB at rate N
# (docs/accounting.md "Sampling"): about 22 % here.
ERR_SIGMAS = 4.5

PLANTED = """
import sys, threading
from threadgraph import ProcessProfile

KEEP = []

def plant():                    # BLOCKS blocks of 1 MiB, kept
    for _ in range(%(blocks)d):
        KEEP.append(bytearray(%(mib)d))

def noise():                    # small blocks elsewhere, freed
    for _ in range(20000):
        b = [0] * 20
        del b

p = ProcessProfile(default_log_path="out", %(kwargs)s)
p.enable()
t = threading.Thread(target=plant, name="planter")
u = threading.Thread(target=noise, name="noisy")
t.start(); t.join()             # one after the other: what each thread
u.start(); u.join()             # does (and frees) does not depend on timing
p.disable()
print(sys.getprofile())
"""


def planted(tmp_path, kwargs):
    code = PLANTED % {"blocks": BLOCKS, "mib": MIB, "kwargs": kwargs}
    proc = run_scenario(tmp_path, code, env=SEED)
    return only_dir(tmp_path / "out"), proc


def snapshot(path):
    """{call context innermost first with its thread: [live_bytes, total_bytes]}
    and the header, from a version 2 snapshot."""
    header, nodes, threads, out = {}, {}, {}, {}
    for line in read_lines(path):
        if line.startswith("# thread: "):
            ix, base = line[len("# thread: "):].split(" ", 1)
            threads[ix] = base
        elif line.startswith("# "):
            key, _, value = line[2:].partition(": ")
            header[key] = value
        else:
            f = line.split(" ", 7)
            nodes[f[0]] = (f[1], f[2], int(f[3]), int(f[5]), f[7])
    for nid, (parent, thread, live, total, call) in nodes.items():
        ctx = [call]
        while parent != "-":
            ctx.append(nodes[parent][4])
            parent = nodes[parent][0]
        out[(threads.get(thread, "-"), "<-".join(ctx))] = [live, total]
    return header, out


def planted_sites(sites):
    """{context: [live, total]} of the sites of plant() in thread planter."""
    return {ctx: v for (thread, ctx), v in sites.items()
            if thread == "planter" and ctx.split("<-")[0].endswith(":plant")}


def summary_threads(run_dir):
    with open(os.path.join(run_dir, "summary.json")) as f:
        return {t["name"]: t for t in json.load(f)["threads"]}


def test_planted_site_found_within_tolerance(tmp_path):
    run_dir, proc = planted(tmp_path, 'mode="sampled"')
    assert proc.stdout == "None\n"      # no profile function was left behind
    header, sites = snapshot(os.path.join(run_dir, "snapshot-1-final"))
    assert header["sampled"] == str(N)
    (ctx, (live, total)), = planted_sites(sites).items()
    # The whole stack, read from the frames: plant <- Thread.run <- ... _bootstrap.
    assert "<-" in ctx and ctx.split("<-")[1].endswith(":run"), ctx
    true = BLOCKS * MIB
    p = 1 - math.exp(-MIB / N)
    sd = math.sqrt(BLOCKS * MIB * MIB * (1 - p) / p)
    assert abs(live - true) <= ERR_SIGMAS * sd, (live, true, sd)
    assert live == total                 # kept: all still live at the end
    # Seeded: the same estimate again.
    (tmp_path / "again").mkdir()
    again, _ = planted(tmp_path / "again", 'mode="sampled"')
    _, sites2 = snapshot(os.path.join(again, "snapshot-1-final"))
    assert list(planted_sites(sites2).values()) == [[live, total]]


def test_thread_totals_exact_whatever_the_sampling(tmp_path):
    """Every byte is counted whatever is sampled: two rates give the same
    thread figures, and the planted blocks are all there."""
    sampled_dir, _ = planted(tmp_path, 'mode="sampled"')
    (tmp_path / "fine").mkdir()
    fine_dir, _ = planted(tmp_path / "fine", 'mode="sampled", sample_bytes=4096')
    s, f = summary_threads(sampled_dir), summary_threads(fine_dir)
    for name in ("planter", "noisy"):
        # (What a thread frees may include a few objects of the thread before
        # it, freed whenever the interpreter gets to them: allocations only.)
        # A thread's start is a handshake with the thread that starts it: what
        # its Event.set() allocates depends on whether the starter already
        # waits (a deque of the waiters to notify; 465 bytes on 3.9), so the
        # two runs may differ by a few small blocks.  A block that sampling
        # left uncounted would show here: at sample_bytes=4096 every 1 MiB
        # block and some hundreds of small ones are sampled.
        a, b = s[name], f[name]
        assert abs(a["total_requested_bytes"] - b["total_requested_bytes"]) <= 4096, name
        assert abs(a["alloc_calls"] - b["alloc_calls"]) <= 16, name
        assert sum(abs(x - y) for x, y in zip(a["hist_alloc"], b["hist_alloc"])) <= 16, name
        assert a["hist_alloc"][12:] == b["hist_alloc"][12:], name  # blocks of 2 KiB and more
    # bytearray(1 MiB) requests 1 MiB + 1 bytes: bit length 21, one per block.
    assert s["planter"]["hist_alloc"][21] == BLOCKS
    assert s["planter"]["total_requested_bytes"] - s["planter"]["freed_bytes"] > BLOCKS * MIB


EDGE_SIZES = (512, 513, 4000, 65533, 65534, 65535, 65536, 70000)
EDGES = """
import threading
from threadgraph import ProcessProfile

SIZES = EDGE_SIZES   # requested bytes

def edge():
    for size in SIZES:
        keep = [bytearray(size - 1) for _ in range(50)]  # bytearray(n): n + 1 bytes
        del keep

p = ProcessProfile(default_log_path="out", mode="sampled")
p.enable()
t = threading.Thread(target=edge, name="edge")
t.start(); t.join()
p.disable()
"""


def test_blocks_about_a_map_entrys_largest_size_counted_exactly(tmp_path):
    """The light case lets through blocks of at most 65,533 bytes (its limit's
    room, hook_count.h TG_LIGHT_ROOM_MAX); the page map holds words up to
    65,534; larger blocks go to the general path.  The free's fast path
    frees blocks of up to 512 bytes (pymalloc's) without the busy bit, larger
    ones with it.  Blocks on each side of these bounds, allocated and freed by
    one thread: each counted once, with its size, at its allocation and at its
    free."""
    run_scenario(tmp_path, EDGES.replace("EDGE_SIZES", repr(EDGE_SIZES)), env=SEED)
    t = summary_threads(only_dir(tmp_path / "out"))["edge"]
    # bit length 16: 65,533 to 65,535 bytes; 17: 65,536 and 70,000
    assert t["hist_alloc"][16:18] == [150, 100], t["hist_alloc"]
    assert t["hist_free"][16:18] == [150, 100], t["hist_free"]
    assert t["hist_alloc"][12] == t["hist_free"][12] == 50, t  # 4000 bytes: bit length 12
    big = 50 * sum(EDGE_SIZES)
    # what else the thread allocates is small: its list, its frames
    assert big <= t["total_requested_bytes"] < big + 65536, t
    # (and it frees a few small objects the starting thread made)
    assert big <= t["freed_bytes"] < t["total_requested_bytes"] + 4096, t


def test_memory_curve_per_thread(tmp_path):
    run_dir, _ = planted(tmp_path, 'mode="sampled"')
    curve = parse_mem(os.path.join(run_dir, "planter.mem"))
    assert curve, "no curve points"
    # Each point is the thread's memory since the start: it climbs by 1 MiB
    # blocks to the thread's exact total, and the last is its figure where it
    # ended (its teardown may have freed a few bytes since the last sample).
    values = [rec[3] for rec in curve]
    assert all(rec[:3] == ("<thread memory>", 0, "sampled") for rec in curve), curve[0]
    assert values[:-1] == sorted(values[:-1])
    total = summary_threads(run_dir)["planter"]
    assert max(values) <= total["peak_bytes"]
    assert values[-1] >= (BLOCKS - 8) * MIB
    assert abs(values[-1] - total["live_bytes"]) < 16 * 1024
    assert not [n for n in os.listdir(run_dir) if n.endswith(".stack") or n == "capture.tg"]


def test_choices_checked(tmp_path):
    from threadgraph import ProcessProfile
    with pytest.raises(ValueError, match="mode must be 'full' or 'sampled'"):
        ProcessProfile(mode="fast")
    with pytest.raises(ValueError, match="format must be 'text'"):
        ProcessProfile(mode="sampled", format="binary")
    p = ProcessProfile(mode="sampled")
    assert p.format == "text" and p.sample_bytes == N and p.mode == "sampled"
    assert ProcessProfile(mode="sampled", sample_bytes=4096).sample_bytes == 4096


RUN_PROGRAM = """
import os, signal, sys, threading
KEEP = []
def work():
    for _ in range(8):
        KEEP.append(bytearray(1 << 20))
t = threading.Thread(target=work, name="worker")
t.start(); t.join()
print("out", len(KEEP), sys.getprofile())
sys.stderr.write("err\\n")
how = sys.argv[1]
if how == "fork":
    pid = os.fork()
    if pid == 0:
        KEEP.append(bytearray(1 << 20))
        print("child", flush=True)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    print("parent", os.WEXITSTATUS(status))
elif how == "signal":
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGTERM)
sys.exit(3)
"""


def run(tmp_path, how, sampled):
    (tmp_path / "prog.py").write_text(RUN_PROGRAM)
    cmd = ([sys.executable, "-m", "threadgraph", "run", "--sampled", "-o", "out", "prog.py"]
           if sampled else [sys.executable, "prog.py"])
    return subprocess.run(cmd + [how], cwd=str(tmp_path), env=env_with_package(SEED),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120,
                          preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))


@pytest.mark.parametrize("how", ["plain", "fork", "signal"])
def test_run_sampled_keeps_output_and_status(tmp_path, how):
    plain = run(tmp_path, how, False)
    prof = run(tmp_path, how, True)
    assert prof.returncode == plain.returncode == (-signal.SIGTERM if how == "signal" else 3)
    assert prof.stdout == plain.stdout
    assert prof.stderr.startswith("err\n") or "\nerr\n" in prof.stderr, prof.stderr
    run_dir = only_dir(tmp_path / "out")
    names = os.listdir(run_dir)
    # As a full run: the run is finished (a signal too), and a forked child
    # does no accounting of its own.
    assert {"summary.json", "summary.txt", "runinfo.json", "worker.mem"} <= set(names), names
    assert [n for n in names if n.endswith("-final")], names
    with open(os.path.join(run_dir, "runinfo.json")) as f:
        assert json.load(f)["end_time"] is not None
    assert summary_threads(run_dir)["worker"]["total_requested_bytes"] >= 8 * MIB
    if how == "signal":
        assert "threadgraph: program terminated by SIGTERM" in prof.stderr


TWO_THREADS = """
import threading
KEEP = []
def fill(n):
    for _ in range(n):
        KEEP.append(bytearray(1 << 20))
for name, n in (("big", 24), ("small", 4)):
    t = threading.Thread(target=fill, args=(n,), name=name)
    t.start(); t.join()
"""


def test_run_sampled_summary(tmp_path):
    """threadgraph run --sampled ends with what a sampled run knows: each
    thread's peak (summary.json's, exact) and when its curve was highest, the
    process's peak and the sites live there (the peak snapshot, estimates);
    no "peaks" of calls, which a .mem reading of a sampled run is not."""
    (tmp_path / "prog.py").write_text(TWO_THREADS)
    res = subprocess.run([sys.executable, "-m", "threadgraph", "run", "--sampled", "-o", "out",
                          "prog.py"], cwd=str(tmp_path), env=env_with_package(SEED),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, timeout=120)
    assert res.returncode == 0, res.stderr
    err = res.stderr
    for wrong in ("top peaks", "growth", "<thread memory>", "a delta is"):
        assert wrong not in err, err
    run_dir = only_dir(tmp_path / "out")
    # What it wrote, in its own terms: readings of the curves (.mem lines).
    readings = 0
    for name in os.listdir(run_dir):
        if name.endswith(".mem"):
            with open(os.path.join(run_dir, name)) as f:
                readings += sum(1 for _ in f)
    assert readings > 0
    assert ("threads seen, %d readings of the threads' memory curves written to " % readings
            in err), err
    assert "records written" not in err
    peaks = {n: t["peak_bytes"] for n, t in summary_threads(run_dir).items()}
    lines = err.splitlines()
    at = next(i for i, l in enumerate(lines) if l.startswith("threadgraph: memory by thread"))
    rows = [l.split() for l in lines[at + 1:at + 3]]
    assert [r[0] for r in rows] == ["big", "small"], err
    assert [int(r[1]) for r in rows] == [peaks["big"], peaks["small"]], err
    assert peaks["big"] >= 24 * MIB
    at = next(i for i, l in enumerate(lines) if l.startswith("threadgraph: the process's peak"))
    snap = [n for n in os.listdir(run_dir) if n.endswith("-peak")]
    assert len(snap) == 1 and snap[0] in lines[at], err
    site = lines[at + 1].split()
    assert site[0] == "big" and site[1].startswith("prog.py:") and site[2] == "fill", err
    estimate = int(site[3].lstrip("~"))
    assert abs(estimate - 24 * MIB) < 24 * MIB / 4, err
    assert "    threadgraph top %s\n" % os.path.join("out", os.path.basename(run_dir), snap[0]) \
        in err, err


def test_commands_read_a_sampled_run(tmp_path):
    """folded and flamegraph (allocated, and live at the peak, from the samples),
    summary, peaks (the per-thread curves) and report read a sampled run."""
    run_dir, _ = planted(tmp_path, 'mode="sampled"')

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "threadgraph"] + list(args),
                              cwd=str(tmp_path), env=env_with_package(), timeout=120,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True)

    for metric in ("alloc", "peak"):
        res = cli("folded", "--metric", metric, "--thread", "planter", run_dir)
        assert res.returncode == 0, res.stderr
        assert "sampled run" in res.stderr              # says the values are estimates
        (line,) = [l for l in res.stdout.splitlines() if l.split(" (")[-2].endswith("plant")]
        assert abs(int(line.rsplit(" ", 1)[1]) - BLOCKS * MIB) < BLOCKS * MIB / 4, line
    res = cli("flamegraph", "--metric", "peak", "-o", str(tmp_path / "f.svg"), run_dir)
    assert res.returncode == 0 and "plant" in (tmp_path / "f.svg").read_text(), res.stderr
    res = cli("summary", run_dir)
    assert res.returncode == 0 and "planter" in res.stdout, res.stderr
    # threads: PEAK is exact, LIVE AT END (the sites' live bytes) an estimate
    # that may pass it; said, as the other commands say their estimates
    res = cli("threads", run_dir)
    assert res.returncode == 0 and "planter" in res.stdout, res.stderr
    assert "sampled run (one sample per" in res.stderr, res.stderr
    assert "LIVE AT END and the cross-thread frees are estimates" in res.stderr, res.stderr
    res = cli("peaks", os.path.join(run_dir, "planter.mem"))
    assert res.returncode == 0 and "<thread memory>" in res.stdout, res.stderr
    res = cli("report", "-o", str(tmp_path / "r.html"), run_dir)
    assert res.returncode == 0 and (tmp_path / "r.html").stat().st_size > 0, res.stderr
    # The curve's readings are said as readings, not as calls' returns and
    # deltas, and no --stack (a usage error with --sampled) is asked for.
    page = (tmp_path / "r.html").read_text()
    assert "A sampled run records no calls: these are readings of a thread's memory" in page
    assert "reading (FILE:LINE:FUNCTION=&gt;BYTES)</th><th>memory" in page
    assert "at each reading of its curve" in page
    for wrong in ("A delta is what", "Returns whose delta", "per recorded return"):
        assert wrong not in page, wrong
    assert "--stack" not in page and "--stack" not in res.stderr, res.stderr
    # memg's graph says so too: its title and axis are the threads' memory
    res = cli("memg", "--script-only", "-o", str(tmp_path / "g"), run_dir)
    assert res.returncode == 0, res.stderr
    gp = (tmp_path / "g" / "memg-plot" / "memg.gp").read_text()
    assert "set title 'Memory by thread: its memory at each reading of its curve, KB'" in gp
    assert "set ylabel 'Thread memory (KB)'" in gp and "call" not in gp, gp


ENDED = """
import os, sys, threading
from threadgraph import ProcessProfile

KEEP = []
SIZE = 200000

def work():                     # a block that outlives its thread
    KEEP.append(bytearray(SIZE))

def tasks():
    return len(os.listdir("/proc/self/task"))

p = ProcessProfile(default_log_path="out", mode="sampled", sample_bytes=65536)
p.enable()
base = tasks()
for i in range(20):
    t = threading.Thread(target=work)
    t.start(); t.join()
    while tasks() > base:       # until the thread has really exited (its
        pass                    # state's figures then leave the running list)
kept = p.snapshot("kept")
del KEEP[:10]                   # the main thread frees blocks of ended threads
freed = p.snapshot("freed")
p.disable()
print(kept); print(freed)
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc/self/task")
def test_live_bytes_keep_threads_that_exited(tmp_path):
    """The process's live bytes (a sum over the threads in sampled mode) keep
    what threads that exited left allocated, and lose it when another thread
    frees it: an exited thread's figure is folded into one sum at its exit, so
    that a sample does not walk every thread the run has seen."""
    proc = run_scenario(tmp_path, ENDED, env=SEED)
    kept, freed = proc.stdout.split()
    live_kept = int(snapshot(kept)[0]["process_live_bytes"])
    live_freed = int(snapshot(freed)[0]["process_live_bytes"])
    block = 200000 + 1          # bytearray(n) requests n + 1 bytes
    assert live_kept >= 20 * block
    # Ten blocks freed, and little else happened between the snapshots.
    assert abs((live_kept - live_freed) - 10 * block) < 4096, (live_kept, live_freed)
    with open(os.path.join(only_dir(tmp_path / "out"), "summary.json")) as f:
        proc_figs = json.load(f)["process"]
    assert proc_figs["live_bytes"] == proc_figs["total_requested_bytes"] - proc_figs["freed_bytes"]
    assert proc_figs["peak_bytes"] >= 20 * block


# A thread that runs FUNC(out) in a sampled run with KWARGS, then prints the
# highest of the thread's own readings of its counters (live()) that FUNC put
# in out; BODY defines FUNC.
PEAK_RUN = """
import gc, threading
import threadgraph._recorder as R
from threadgraph import ProcessProfile

def live():
    a, f = R.thread_counters()
    return a - f
%(body)s
gc.disable()
p = ProcessProfile(default_log_path="out", mode="sampled"%(kwargs)s)
p.enable()
res = []
t = threading.Thread(target=%(func)s, args=(res,), name=%(thread)r)
t.start(); t.join()
p.disable()
print(res[0])
"""


def peak_and_top(tmp_path, body, func, thread, kwargs=""):
    """(the thread's peak_bytes in summary.json, its highest own reading)."""
    proc = run_scenario(tmp_path, PEAK_RUN % dict(body=body, func=func, thread=thread,
                                                  kwargs=kwargs), env=SEED)
    top = int(proc.stdout.split()[-1])
    peak = summary_threads(only_dir(tmp_path / "out"))[thread]["peak_bytes"]
    return peak, top


CLIMB = """
def climb(out):
    # Rounds that each free most of what they built and then climb higher
    # than the last, in small blocks (the GIL domains' fast paths), past
    # sample points (the default rate): the thread's peak must be found
    # whichever way its allocations are counted.
    tops = []
    keep = []
    for rnd in range(8):
        del keep[len(keep) // 8:]
        for i in range(3000 + 700 * rnd):
            keep.append(bytes(40 + i % 200))
        tops.append(live())
    del keep[:]
    out.append(max(tops))
"""


@pytest.mark.parametrize("rate", ["", ", sample_bytes=4096"], ids=["default", "fine"])
def test_thread_peak_exact(tmp_path, rate):
    """A thread's peak (requested less freed at its highest) is that of every
    allocation, not only of the sampled ones: it is at least the highest of
    the thread's own readings of its counters, and above it by no more than
    what the reading itself allocates."""
    peak, top = peak_and_top(tmp_path, CLIMB, "climb", "climber", rate)
    assert 0 <= peak - top < 1024, (peak, top)


STAIR = """
def stair(out):
    # Each round: a climb in small blocks (a new peak), some 31 KB given
    # back, one small block (the light path's full tests run, and leave it
    # room up to the peak), then a block too large for the light path (the
    # general path: a new peak, and the room used up) and 17 KB of small
    # blocks past that peak, less than the room the full tests left.
    tops = []
    keep = []
    for rnd in range(6):
        for i in range(2000):
            keep.append(bytes(140))             # 173 bytes requested
        del keep[-180:]
        keep.append(bytes(140))
        keep.append(bytearray(69999))           # 70,000
        for i in range(100):
            keep.append(bytes(140))
        tops.append(live())
    del keep[:]
    out.append(max(tops))
"""


def test_thread_peak_exact_past_a_large_block(tmp_path):
    """The light path's room (hook_count.h) follows the allocations that the
    general path counts: small blocks past a peak that a large block made are
    seen at once, not once they have used up the room the light path had
    before it (no sample point to hide it: one per TiB)."""
    peak, top = peak_and_top(tmp_path, STAIR, "stair", "stair", ", sample_bytes=1 << 40")
    assert 0 <= peak - top < 1024, (peak, top)


AGAIN = """
import gc, queue, threading
from threadgraph import ProcessProfile

todo, done = queue.Queue(), queue.Queue()

def worker():                   # lives through both runs
    keep = []
    while todo.get():
        keep = [bytes(300) for _ in range(5000)]   # 333 bytes requested each
        done.put(None)

gc.disable()
t = threading.Thread(target=worker, name="worker")
t.start()
for run in ("one", "two"):
    p = ProcessProfile(default_log_path=run, mode="sampled")
    p.enable()
    todo.put(True)
    done.get()
    p.disable()
todo.put(False)
t.join()
"""


def test_second_run_counts_on_its_own_state(tmp_path):
    """A thread that lives through two sampled runs is counted in each on
    that run's state (the hooks' fast paths recognise a thread by a copy of
    its state's generation; the old run's state is freed at the next start,
    so counting on it would lose the bytes, and ASan would stop there)."""
    run_scenario(tmp_path, AGAIN, env=SEED)
    for run in ("one", "two"):
        # Started before the run, the worker is named by its native id.
        w, = [t for name, t in summary_threads(only_dir(tmp_path / run)).items()
              if name != "MainThread"]
        assert w["hist_alloc"][9] >= 5000, (run, w["hist_alloc"])
        assert w["total_requested_bytes"] >= 5000 * 333, run


IDLE = """
import threading
from threadgraph import ProcessProfile

KEEP = []
p = ProcessProfile(default_log_path="out", mode="sampled")
p.enable()
t = threading.Thread(target=lambda: None, name="idle")
t.start(); t.join()
u = threading.Thread(target=lambda: KEEP.extend(bytearray(1 << 20) for _ in range(8)),
                     name="busy")
u.start(); u.join()
p.disable()
"""


def test_a_thread_without_a_sample(tmp_path):
    """A thread that allocated too little to be sampled has one reading, where
    it ends (its exact figure then, as the summary's); a .mem without a reading
    (a thread whose figure never moved) is left out by memg and peaks with a
    warning that names it, never a flat or made-up curve."""
    run_scenario(tmp_path, IDLE, env=SEED)
    run_dir = only_dir(tmp_path / "out")
    idle, busy = (os.path.join(run_dir, n + ".mem") for n in ("idle", "busy"))
    assert parse_mem(busy)
    ((site, _, _, last),) = parse_mem(idle)
    assert site == "<thread memory>"
    live = summary_threads(run_dir)["idle"]["live_bytes"]
    assert abs(last - live) < 4096, (last, live)  # the teardown frees a little after
    empty = os.path.join(str(tmp_path), "never.mem")
    open(empty, "w").close()

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "threadgraph"] + list(args),
                              cwd=str(tmp_path), env=env_with_package(), timeout=120,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True)

    res = cli("peaks", empty, idle, busy)
    assert res.returncode == 0 and "busy" in res.stdout and "never" not in res.stdout
    assert "'%s' skipped: no events" % empty in res.stderr, res.stderr
    res = cli("memg", "--script-only", "-o", str(tmp_path / "g"), empty, idle, busy)
    assert res.returncode == 0, res.stderr
    assert "'%s' not plotted: no events" % empty in res.stderr, res.stderr
    res = cli("memg", "--script-only", "-o", str(tmp_path / "g"), empty)
    assert res.returncode == 1 and "error: no events to plot" in res.stderr, res.stderr


CONSUMER = """
import queue, threading
from threadgraph import ProcessProfile

q = queue.Queue(maxsize=5)

def produce():
    for i in range(40):
        q.put(bytearray(1000000 + i))
    q.put(None)

def consume():
    while q.get() is not None:
        pass

p = ProcessProfile(default_log_path="out", mode="sampled")
p.enable()
ts = [threading.Thread(target=produce, name="producer"),
      threading.Thread(target=consume, name="consumer")]
for t in ts:
    t.start()
for t in ts:
    t.join()
p.disable()
"""


def test_a_consumer_without_a_sample_ends_below_zero(tmp_path):
    """A thread that frees 40 MB others made and allocates too little to be
    sampled: its one reading, at its end, is its figure (about -40 MB), so
    that the sum of the threads' curves (memg --held) ends near what the
    process holds, not at the producer's 40 MB."""
    run_scenario(tmp_path, CONSUMER, env=SEED)
    run_dir = only_dir(tmp_path / "out")
    figures = summary_threads(run_dir)
    curve = parse_mem(os.path.join(run_dir, "consumer.mem"))
    assert curve, "no reading on the consumer's curve"
    assert curve[-1][3] < -39 * 1000000, curve
    assert abs(curve[-1][3] - figures["consumer"]["live_bytes"]) < 4096, (curve, figures)
    ends = sum(parse_mem(os.path.join(run_dir, n + ".mem"))[-1][3]
               for n in ("producer", "consumer"))
    assert abs(ends) < 1000000, ends


EARLY = """
import json, sys, threading, time
import threadgraph

keep = []
go = threading.Event()
done = threading.Event()

def grow():
    go.wait()
    for _ in range(40):
        keep.append(bytearray(256 * 1024))
        time.sleep(0.001)
    done.set()

t = threading.Thread(target=grow, name="early-worker")
t.start()
time.sleep(0.05)  # running (waiting) before enable()
p = threadgraph.ProcessProfile(default_log_path="out", mode="sampled")
p.enable()
go.set()
done.wait()
p.disable()
t.join()
print(json.dumps([x["name"] for x in p.threads()]))
"""


@pytest.mark.skipif(sys.version_info >= (3, 12),
                    reason="3.12+: no one-shot profile function (docs/api.md 'Sampled mode')")
def test_a_thread_running_before_enable_is_named_with_its_curve(tmp_path):
    """A thread started before enable() (as every thread of an attached
    process) gets its name and its memory curve, by a one-shot profile
    function that attaches it at its first event (sampled_adopt.c), not
    native-<tid>."""
    res = run_scenario(tmp_path, EARLY)
    assert json.loads(res.stdout.splitlines()[-1]) == ["MainThread", "early-worker"]
    run_dir = only_dir(tmp_path / "out")
    curve = parse_mem(os.path.join(run_dir, "early-worker.mem"))
    assert curve and curve[-1][3] >= 20 * 256 * 1024, curve[-5:]
    total = summary_threads(run_dir)["early-worker"]
    assert total["total_requested_bytes"] >= 40 * 256 * 1024


UNPACK = """
import lzma, threading
from threadgraph import ProcessProfile

# An xz stream whose decoder allocates its 8 MiB dictionary inside lzma_code,
# which _lzma calls with the GIL released (PyMem_RawMalloc, the raw domain).
F = [{"id": lzma.FILTER_LZMA2, "dict_size": 8 << 20, "preset": 1}]
BLOB = lzma.compress(b"x" * 1000, filters=F)

def unpack():
    for _ in range(4):
        lzma.decompress(BLOB)

p = ProcessProfile(default_log_path="out", mode="sampled")
p.enable()
t = threading.Thread(target=unpack, name="unpacker")
t.start(); t.join()
p.disable()
"""


def test_a_sample_without_the_gil_stays_with_its_thread(tmp_path):
    """docs/api.md "Sampled mode", Limits: a sample taken while its thread
    does not hold the GIL goes to the thread's <no python frame>, also when it
    is the thread's first sample (its root is made when the thread is named,
    not at its first sample with the GIL)."""
    run_scenario(tmp_path, UNPACK, env=SEED)
    _, sites = snapshot(os.path.join(only_dir(tmp_path / "out"), "snapshot-1-final"))
    dictionaries = {k: v for k, v in sites.items() if v[1] >= 8 * MIB}
    assert list(dictionaries) == [("unpacker", "<no python frame>")], sites
    assert list(dictionaries.values()) == [[0, 4 * (8 * MIB + 1)]]


CURVE_ENDS = """
import threading, time
import threadgraph
keep = []
hold = threading.Event()

def builder():          # builds 24 MiB, keeps 4 of it, ends
    tmp = [bytearray(256 * 1024) for _ in range(96)]
    keep.extend(tmp[:16])
    del tmp

def holder():           # builds 12 MiB, keeps 2, still running at disable()
    tmp = [bytearray(256 * 1024) for _ in range(48)]
    keep.extend(tmp[:8])
    del tmp
    hold.wait()

p = threadgraph.ProcessProfile(default_log_path="out", mode="sampled")
p.enable()
b = threading.Thread(target=builder, name="builder")
b.start(); b.join()
h = threading.Thread(target=holder, name="holder")
h.start()
time.sleep(0.3)
p.disable()
hold.set(); h.join()
"""


def test_a_curve_ends_at_its_threads_last_figure(tmp_path):
    """A sample comes with allocations, so a thread that frees what it built
    and allocates no more had its curve stuck at its last sample (24 MiB for a
    thread that ended holding 4): the thread's end, and disable() for a thread
    still running, add its figure then."""
    run_scenario(tmp_path, CURVE_ENDS, env=SEED)
    run_dir = only_dir(tmp_path / "out")
    figures = summary_threads(run_dir)
    for name, kept in (("builder", 16), ("holder", 8)):
        values = [rec[3] for rec in parse_mem(os.path.join(run_dir, name + ".mem"))]
        assert max(values) >= 10 * MIB, (name, values[-3:])
        live = figures[name]["live_bytes"]
        assert kept * 256 * 1024 <= live < kept * 256 * 1024 + 64 * 1024, (name, live)
        if name == "holder":  # disable() took both figures at one moment
            assert values[-1] == live, (values[-3:], live)
        else:  # the thread's teardown frees a little after its end's point
            assert abs(values[-1] - live) < 16 * 1024, (values[-3:], live)
