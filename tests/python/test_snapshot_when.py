"""Threshold snapshots (ProcessProfile.snapshot_when, `threadgraph run
--snapshot-when`; docs/accounting.md "Threshold snapshots"): when a thread's
memory first goes above the limit, a heap snapshot by call site is written,
naming the thread in its label, with the site that grew; again at each new high
a step above the last one; never below the limit."""
import os
import subprocess
import sys

import pytest

from tgtest import env_with_package, only_dir, read_lines, run_scenario

MIB = 1 << 20
LIMIT_MIB = 16
BLOCKS = 40

PROGRAM = """
import sys, threading
from threadgraph import ProcessProfile

KEEP = []

def grow():                     # BLOCKS blocks of 1 MiB, kept: above the limit
    for _ in range(%(blocks)d):
        KEEP.append(bytearray(1 << 20))

def small():                    # stays far below it
    KEEP.extend(bytearray(100) for _ in range(1000))

p = ProcessProfile(default_log_path="out", %(kwargs)s)
p.snapshot_when("thread>%(limit)dM")
p.enable()
t = threading.Thread(target=small, name="quiet"); t.start(); t.join()
t = threading.Thread(target=grow, name="grower"); t.start(); t.join()
p.disable()
"""


def threshold_snapshots(run_dir):
    """[(number, label)] of the threshold snapshots, in order."""
    out = []
    for name in os.listdir(run_dir):
        if name.startswith("snapshot-") and "-over-" in name:
            n, label = name[len("snapshot-"):].split("-", 1)
            out.append((int(n), label))
    return sorted(out)


def top_site(path):
    """(thread base, call, live bytes) of the node with the most live bytes."""
    threads, best = {}, None
    for line in read_lines(path):
        if line.startswith("# thread: "):
            ix, base = line[len("# thread: "):].split(" ", 1)
            threads[ix] = base
        elif not line.startswith("#"):
            f = line.split(" ", 7)
            if best is None or int(f[3]) > best[2]:
                best = (threads.get(f[2], "-"), f[7], int(f[3]))
    return best


@pytest.mark.parametrize("kwargs", ['accounting=True, format="text"', 'mode="sampled"'])
def test_thread_crossing_the_limit_writes_a_snapshot_of_the_site_that_grew(tmp_path, kwargs):
    run_scenario(tmp_path, PROGRAM % {"blocks": BLOCKS, "limit": LIMIT_MIB, "kwargs": kwargs},
                 env={"THREADGRAPH_SAMPLE_SEED": "3"})
    run_dir = only_dir(tmp_path / "out")
    snaps = threshold_snapshots(run_dir)
    assert snaps, os.listdir(run_dir)
    first_n, first = snaps[0]
    assert first_n == 1 and first.startswith("thread-over-%dM-grower-at-" % LIMIT_MIB), first
    at = int(first.rsplit("-at-", 1)[1])
    assert LIMIT_MIB * MIB < at <= (LIMIT_MIB + 2) * MIB   # written as it crossed
    thread, call, live = top_site(os.path.join(run_dir, "snapshot-%d-%s" % snaps[0]))
    assert (thread, call.rsplit(":", 1)[1]) == ("grower", "grow")
    if "sampled" not in kwargs:
        assert live >= (LIMIT_MIB - 1) * MIB            # exact: all it held then
    # Again at new highs, each a quarter (at least 1 MiB) above the last,
    # only for that thread, up to its peak.
    levels = [int(label.rsplit("-at-", 1)[1]) for _, label in snaps]
    assert all("-grower-at-" in label for _, label in snaps)
    assert len(snaps) > 1 and levels == sorted(levels)
    assert all(b - a >= max(MIB, a // 4) for a, b in zip(levels, levels[1:]))
    assert levels[-1] <= BLOCKS * MIB + MIB


def test_snapshot_names_the_thread_by_its_base_name(tmp_path):
    """A thread whose name needs escaping in file names ("a/b%c" is the base
    "a%2Fb%25c", its .mem's) is named so in its snapshots' file names too, not
    escaped a second time ("a%252Fb%2525c")."""
    prog = PROGRAM.replace('name="grower"', 'name="a/b%%c"')
    run_scenario(tmp_path, prog % {"blocks": 20, "limit": 8,
                                   "kwargs": 'accounting=True, format="text"'})
    run_dir = only_dir(tmp_path / "out")
    assert os.path.exists(os.path.join(run_dir, "a%2Fb%25c.mem")), os.listdir(run_dir)
    snaps = threshold_snapshots(run_dir)
    assert snaps and all(label.startswith("thread-over-8M-a%2Fb%25c-at-")
                         for _, label in snaps), snaps


def test_below_the_limit_no_snapshot(tmp_path):
    run_scenario(tmp_path, PROGRAM % {"blocks": 4, "limit": LIMIT_MIB,
                                      "kwargs": 'accounting=True, format="text"'})
    assert threshold_snapshots(only_dir(tmp_path / "out")) == []


def test_conditions_checked():
    from threadgraph import ProcessProfile, _recorder
    assert _recorder.snapshot_condition("rss>2G") == ("rss", 2 << 30)
    assert _recorder.snapshot_condition("thread>500M") == ("thread", 500 << 20)
    assert _recorder.snapshot_condition("live>1048576") == ("live", 1 << 20)
    assert _recorder.snapshot_condition("live>64KiB") == ("live", 64 << 10)
    for bad in ("rss<2G", "heap>1G", "rss>", "rss>0", "rss>2X", "rss>-1", "rss>>1"):
        with pytest.raises(ValueError, match="thread>SIZE, live>SIZE or rss>SIZE"):
            _recorder.snapshot_condition(bad)
    # a fraction (which --max-size takes) and a size past the bound say why
    for bad in ("thread>1.5M", "thread>99999999999T"):
        with pytest.raises(ValueError, match="a positive whole number of bytes, or of K, M, G "
                                             "or T, at most 2\\^62 bytes"):
            _recorder.snapshot_condition(bad)
    with pytest.raises(RuntimeError, match="accounting is not on"):
        ProcessProfile().snapshot_when("rss>1G")
    p = ProcessProfile(accounting=True)
    with pytest.raises(ValueError):
        p.snapshot_when("rss>1G", "nonsense")
    p.snapshot_when("rss>1G", "thread>1M")


def test_conditions_up_to_the_bound_in_plain_bytes():
    """The message says "at most 2^62 bytes": a SIZE in plain bytes is taken
    up to that bound, as the same size with a unit is."""
    from threadgraph import _recorder
    assert _recorder.snapshot_condition("live>%d" % (1 << 62)) == ("live", 1 << 62)
    assert _recorder.snapshot_condition("live>4194304T") == ("live", 1 << 62)
    assert _recorder.snapshot_condition("rss>20000000000000000") == ("rss", 20000000000000000)
    for bad in ("live>%d" % ((1 << 62) + 1), "live>4194305T", "live>" + "9" * 30):
        with pytest.raises(ValueError, match="at most 2\\^62 bytes"):
            _recorder.snapshot_condition(bad)


def test_run_option(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text("KEEP = [bytearray(1 << 20) for _ in range(8)]\nprint('ok')\n")
    cmd = [sys.executable, "-m", "threadgraph", "run", "--sampled", "--snapshot-when",
           "live>4M", "-o", "out", str(prog)]
    res = subprocess.run(cmd, cwd=str(tmp_path), env=env_with_package(), timeout=120,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    assert res.returncode == 0 and res.stdout == "ok\n", res.stderr
    snaps = threshold_snapshots(only_dir(tmp_path / "out"))
    assert snaps and snaps[0][1].startswith("live-over-4M-at-"), snaps
    bad = subprocess.run(cmd[:6] + ["live=4M"] + cmd[7:], cwd=str(tmp_path),
                         env=env_with_package(), timeout=120, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True)
    assert bad.returncode == 2 and "thread>SIZE, live>SIZE or rss>SIZE" in bad.stderr


def test_two_conditions_of_a_kind_refused_before_recording(tmp_path):
    """snapshot_when() refuses two conditions on one kind itself, so that a
    run (or an attach) never starts recording with them."""
    res = run_scenario(tmp_path, """
        import threadgraph
        from threadgraph import _recorder
        p = threadgraph.ProcessProfile(default_log_path="out", accounting=True)
        try:
            p.snapshot_when("thread>1M", "thread>2M")
        except ValueError as exc:
            print("refused:", exc)
        print("active:", _recorder.active() is not None)
    """)
    assert "refused: two snapshot conditions on thread: give one" in res.stdout, res.stdout
    assert "active: False" in res.stdout


def test_enable_that_fails_after_starting_stops_recording(tmp_path):
    """enable() failing after the recorder started (here the run's runinfo.json
    cannot be written) stops the recording before raising: nothing is left
    recording in the program, and a later enable() works."""
    res = run_scenario(tmp_path, """
        import os, threading
        import threadgraph
        from threadgraph import _recorder
        p = threadgraph.ProcessProfile(default_log_path="out")
        def fail():
            raise OSError("runinfo.json: no space left on device")
        p._write_runinfo = fail
        try:
            p.enable()
        except OSError as exc:
            print("raised:", exc)
        print("active:", _recorder.active() is not None, p.enabled)
        q = threadgraph.ProcessProfile(default_log_path="out2")
        q.enable()
        threading.Thread(target=lambda: bytearray(1000)).start()
        q.disable()
        print("second:", sorted(os.listdir(q.output_dir))[:1])
    """)
    assert "raised: runinfo.json: no space left on device" in res.stdout, res.stdout + res.stderr
    assert "active: False False" in res.stdout, res.stdout
    assert "second: ['capture.tg']" in res.stdout, res.stdout


def test_run_two_conditions_of_a_kind_a_usage_error(tmp_path):
    """threadgraph run --snapshot-when given twice for one kind: a usage error
    (exit 2, one line naming both), not a traceback, and nothing recorded."""
    prog = tmp_path / "prog.py"
    prog.write_text("print('ran')\n")
    cmd = [sys.executable, "-m", "threadgraph", "run", "--snapshot-when", "thread>1M",
           "--snapshot-when", "thread>2M", "-o", "out", str(prog)]
    res = subprocess.run(cmd, cwd=str(tmp_path), env=env_with_package(), timeout=120,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "ran" not in res.stdout
    assert "two conditions on thread ('thread>1M' and 'thread>2M')" in res.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.uname().machine != "x86_64",
                    reason="native=True; ctypes.CDLL(None).malloc is counted on x86-64 "
                           "(docs/api.md \"Native memory\")")
def test_rss_condition_met_by_growth_made_without_the_gil(tmp_path):
    """rss>SIZE when the memory comes from native allocations made without the
    GIL (ctypes CDLL calls release it): such an allocation leaves the condition
    for the next new high made with the GIL (docs/accounting.md), here the int
    that holds each pointer; the rss read due at the GIL-less one is not lost."""
    res = run_scenario(tmp_path, """
        import ctypes, os, threading
        from threadgraph import ProcessProfile
        def rss():
            return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        limit = rss() + (16 << 20)
        p = ProcessProfile(default_log_path="out", native=True, accounting=True, format="text")
        p.snapshot_when("rss>%d" % limit)
        KEEP = []
        def grow():
            for _ in range(48):
                b = libc.malloc(1 << 20)          # without the GIL
                ctypes.memset(b, 1, 1 << 20)      # resident
                KEEP.append(b)                    # its int: with the GIL
        p.enable()
        libc = ctypes.CDLL(None)                  # taken after enable(): the hook
        libc.malloc.argtypes = [ctypes.c_size_t]
        libc.malloc.restype = ctypes.c_void_p
        t = threading.Thread(target=grow, name="grower"); t.start(); t.join()
        p.disable()
        print("over", rss() - limit)
    """)
    over = int(res.stdout.split()[-1])
    assert over > 8 * MIB, res.stdout              # RSS did go well above the limit
    snaps = threshold_snapshots(only_dir(tmp_path / "out"))
    assert snaps and snaps[0][1].startswith("rss-over-"), snaps
    thread, call, _ = top_site(os.path.join(only_dir(tmp_path / "out"),
                                            "snapshot-%d-%s" % snaps[0]))
    assert (thread, call.rsplit(":", 1)[1]) == ("grower", "grow")


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.uname().machine != "x86_64",
                    reason="native=True; ctypes.CDLL(None).malloc is counted on x86-64 "
                           "(docs/api.md \"Native memory\")")
@pytest.mark.parametrize("kind", ["live", "rss"])
def test_sampled_process_condition_met_by_growth_made_without_the_gil(tmp_path, kind):
    """A sampled run sees the process's new peaks only at its samples: growth
    made without the GIL (each 1 MiB block sampled, none with the GIL) still
    writes the live and rss snapshots, at the thread's next allocation with it."""
    res = run_scenario(tmp_path, """
        import ctypes, os, threading
        from threadgraph import ProcessProfile
        def rss():
            return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        p = ProcessProfile(default_log_path="out", native=True, mode="sampled")
        p.snapshot_when("%(kind)s>%%d" %% ((rss() if "%(kind)s" == "rss" else 0) + (16 << 20)))
        KEEP = []
        def grow():
            for _ in range(48):
                b = libc.malloc(1 << 20)          # without the GIL
                ctypes.memset(b, 1, 1 << 20)
                KEEP.append(b)
        p.enable()
        libc = ctypes.CDLL(None)
        libc.malloc.argtypes = [ctypes.c_size_t]
        libc.malloc.restype = ctypes.c_void_p
        t = threading.Thread(target=grow, name="grower"); t.start(); t.join()
        p.disable()
    """ % {"kind": kind}, env={"THREADGRAPH_SAMPLE_SEED": "3"})
    snaps = threshold_snapshots(only_dir(tmp_path / "out"))
    assert snaps and all(label.startswith(kind + "-over-") for _, label in snaps), snaps
    # (its samples came without the GIL: its "<no python frame>", docs/api.md)
    thread, call, _ = top_site(os.path.join(only_dir(tmp_path / "out"),
                                            "snapshot-%d-%s" % snaps[0]))
    assert (thread, call) == ("grower", "<no python frame>")
