"""The binary capture (capture.tg) as the recorder writes it.

Every check decodes the capture with tests/python/tgcapture.py, a reader written
from docs/formats.md alone, and compares it with what text mode wrote in the
same run (format="both": one clock reading and one memory delta per event feed
both), so the capture is checked record for record against the text format.
"""
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

import tgcapture
from tgtest import load_runinfo, only_dir, run_scenario
from test_reliability import (KILL_WORKLOAD, env_with_package, find_cli, heartbeats,
                              wait_until)

# A multi-threaded program with everything the records must carry: Python and C
# calls, generators (a call per resumption), exceptions, deep recursion, names
# with control characters, a thread named with spaces and a slash, a thread
# started with _thread, a thread that ends while others run.
BOTH_PROGRAM = """
import os, sys, threading, time, _thread, json
import threadgraph

def leaf(n):
    return bytearray(n)

def gen(k):
    for i in range(k):
        yield leaf(100 * i)

def fails():
    x = [0] * 1000
    raise ValueError("x")

def deep(n):
    if n == 0:
        return leaf(10)
    return deep(n - 1)

import types
def _odd():
    return [1] * 50
odd = types.FunctionType(_odd.__code__.replace(co_name="odd\\x01name\\u00e9"), globals())

def work(k):
    keep = []
    for i in range(300 + k):
        keep.append(leaf(64 + i % 700))
        keep.extend(gen(3))
        try:
            fails()
        except ValueError:
            pass
        len(keep)
        sorted([3, 1, 2])
        if i % 50 == 0:
            deep(200)
            odd()
    return len(keep)

p = threadgraph.ProcessProfile(default_log_path="out", format="both",
                               profile=sys.argv[1])
p.trackStack(sys.argv[2] == "stack")
p.logTimestamps(sys.argv[3] == "time")
p.setProcessMemoryFrequence(int(sys.argv[4]))
p.enable()
ts = [threading.Thread(target=work, args=(k,), name=name)
      for k, name in enumerate(["worker 1", "a/b", "MainThread", ".hidden"])]
for t in ts:
    t.start()
done = threading.Event()
_thread.start_new_thread(lambda: (work(5), done.set()), ())
work(1)
for t in ts:
    t.join()
done.wait()
p.disable()
print(json.dumps(p.stats()))
"""


@pytest.mark.parametrize("profile, stack, timed, every", [
    ("both", "stack", "time", "7"),
    ("python", "nostack", "time", "0"),
    ("c", "stack", "notime", "100"),
])
def test_both_formats_agree_byte_for_byte(tmp_path, profile, stack, timed, every):
    res = run_scenario(tmp_path, BOTH_PROGRAM.replace("sys.argv[1]", repr(profile))
                       .replace("sys.argv[2]", repr(stack)).replace("sys.argv[3]", repr(timed))
                       .replace("sys.argv[4]", repr(every)))
    stats = json.loads(res.stdout)
    run_dir = only_dir(tmp_path / "out")
    cap = tgcapture.load(os.path.join(run_dir, "capture.tg"))
    assert not cap.truncated and cap.end is not None
    assert cap.pid == json.loads(open(os.path.join(run_dir, "runinfo.json")).read())["pid"]
    assert bool(cap.flags & tgcapture.F_TIME) == (timed == "time")
    assert bool(cap.flags & tgcapture.F_STACK) == (stack == "stack")
    rendered = cap.render()
    on_disk = sorted(n for n in os.listdir(run_dir)
                     if n.endswith((".mem", ".stack")))
    assert sorted(rendered) == on_disk
    for name in on_disk:
        with open(os.path.join(run_dir, name), "rb") as f:
            text = f.read()
        assert rendered[name] == text, name
    # Thread definitions carry what runinfo.json says.
    info = load_runinfo(run_dir)
    assert info["capture"] == "capture.tg" and info["dropped"] == 0
    threads = [cap.threads[s] for s in cap.order]
    assert [(t["name"], t["native_id"], t["ident"]) for t in threads] == \
        [(t["name"], t["native_id"], t["ident"]) for t in info["threads"]]
    # The trailer counts every record; none was dropped.
    calls = returns = 0
    for stream in cap.order:
        c, r, d = cap.thread_records(stream)
        assert cap.end[1][stream] == (len(c), len(r), 0)
        assert d == 0
        calls += len(c)
        returns += len(r)
    assert stats["records"] == returns and stats["dropped"] == 0
    if every != "0":
        assert rendered["process.mem"]
    # Compact: a few bytes per event, where text takes tens.
    size = os.path.getsize(os.path.join(run_dir, "capture.tg"))
    assert size < 6 * (calls + returns) + 20000


@pytest.mark.parametrize("backend", ["setprofile", "monitoring"])
def test_binary_alone_matches_the_text_of_a_both_run(tmp_path, backend):
    """format="binary" writes only capture.tg and runinfo.json, and what it records
    has the shape of text mode's files (calls and returns pair up, every code is
    defined before use), on both event sources."""
    if backend == "monitoring" and not (3, 12) <= sys.version_info[:2] < (3, 14):
        pytest.skip("sys.monitoring backend needs CPython 3.12 or 3.13")
    run_scenario(tmp_path, """
        import threading, threadgraph
        def leaf(n):
            return bytearray(n)
        def work():
            return [leaf(i) for i in range(2000)]
        p = threadgraph.ProcessProfile(default_log_path="out", backend=%r)
        assert p.format == "binary"
        p.trackStack()
        p.enable()
        ts = [threading.Thread(target=work, name="Thread-%%d" %% (i + 1)) for i in range(3)]
        for t in ts: t.start()
        work()
        for t in ts: t.join()
        p.disable()
        """ % backend)
    run_dir = only_dir(tmp_path / "out")
    # gc.txt too when the collector happened to run (docs/formats.md "gc.txt")
    assert sorted(set(os.listdir(run_dir)) - {"gc.txt"}) == ["capture.tg", "runinfo.json"]
    info = load_runinfo(run_dir)
    assert info["backend"] == backend
    assert all(t["mem"] is None and t["stack"] is None for t in info["threads"])
    cap = tgcapture.load(os.path.join(run_dir, "capture.tg"))
    rendered = cap.render()
    for name in ("Thread-1", "Thread-2", "Thread-3", "MainThread"):
        mem = rendered[name + ".mem"].decode().splitlines()
        leaves = [l for l in mem if ":leaf=>" in l]
        assert len(leaves) == 2000, name
        # bytearray(n) in a thread's own memory: each leaf's delta is >= n
        deltas = sorted(int(l.rsplit("=>", 1)[1]) for l in leaves)
        assert deltas[-1] >= 1999
        stack = rendered[name + ".stack"].decode().splitlines()
        assert sum(1 for l in stack if l.endswith(":leaf")) == 2000


KILL_SEED = 20261126  # the cuts: the same on every run


def newest_in_capture(cap, name):
    """The times of thread NAME's newest RETURN and CALL in CAP (0 if none)."""
    by_name = {cap.threads[s]["name"]: s for s in cap.order}
    if name not in by_name:
        return 0, 0
    calls, returns, _ = cap.thread_records(by_name[name])
    return (max((r[0] for r in returns), default=0) / 1e6,
            max((c[1] for c in calls), default=0) / 1e6)


def test_sigkill_leaves_a_readable_prefix(tmp_path):
    """Killed once every record the threads had made by a moment is in the
    capture (the idle thread's put there by the background flusher alone):
    the capture reads up to its last whole chunk, cut anywhere, and those
    records are still there."""
    rng = random.Random(KILL_SEED)
    script = tmp_path / "kill.py"
    # the busy threads a tenth as fast: the Python reader below takes seconds
    # a MB on some Pythons, and the property needs no volume
    script.write_text(KILL_WORKLOAD.replace('format="text"', 'format="binary"')
                      .replace("0.0002)", "0.002)"))
    proc = subprocess.Popen([sys.executable, str(script)], cwd=str(tmp_path),
                            env=env_with_package(), stdout=subprocess.PIPE, text=True)
    names = ["busy-0", "busy-1", "busy-2", "slow"]
    try:
        run_dir = proc.stdout.readline().strip()
        assert run_dir, "the workload did not start"
        path = os.path.join(run_dir, "capture.tg")
        wait_until(lambda: os.path.exists(str(tmp_path / "idle-3")), "the slow thread idle")
        beats = heartbeats(tmp_path, 4)

        seen = [-1]

        def on_disk():  # parsed again only when the file has grown
            size = os.path.getsize(path)
            if size == seen[0]:
                return False
            seen[0] = size
            with open(path, "rb") as f:
                cap = tgcapture.Capture(f.read())
            return all(min(newest_in_capture(cap, name)) >= beat
                       for name, beat in zip(names, beats))
        wait_until(on_disk, "the records of the heartbeats in the capture")
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    with open(path, "rb") as f:
        data = f.read()
    # Cut anywhere, the capture still decodes up to the cut.
    for cut in sorted(rng.sample(range(40, len(data)), 20)) + [len(data)]:
        tgcapture.Capture(data[:cut])
    cap = tgcapture.Capture(data)
    assert cap.end is None  # killed: no trailer
    for name, beat in zip(names, beats):
        assert min(newest_in_capture(cap, name)) >= beat, name
    assert cap.process_samples()


def test_fork_child_starts_its_own_capture(tmp_path):
    run_scenario(tmp_path, """
        import os, threading, threadgraph
        def leaf(n):
            return bytearray(n)
        def parent_work():
            return [leaf(10) for _ in range(100)]
        def child_work():
            return [leaf(20) for _ in range(50)]
        p = threadgraph.ProcessProfile(default_log_path="out")
        p.enableForkedProfile()
        p.enable()
        parent_work()
        t = threading.Thread(target=parent_work, name="Thread-1")  # not in the child
        t.start()
        pid = os.fork()
        if pid == 0:
            child_work()
            p.disable()
            os._exit(0)
        t.join()
        os.waitpid(pid, 0)
        parent_work()
        p.disable()
        """)
    dirs = sorted(os.listdir(str(tmp_path / "out")))
    assert len(dirs) == 2
    caps = {}
    for d in dirs:
        info = load_runinfo(str(tmp_path / "out" / d))
        cap = tgcapture.load(str(tmp_path / "out" / d / "capture.tg"))
        assert cap.end is not None and not cap.truncated
        assert cap.pid == info["pid"]
        caps[info["pid"]] = (info, cap)
    (pa, (pinfo, pcap)), (ca, (cinfo, ccap)) = sorted(
        caps.items(), key=lambda kv: kv[1][0]["ppid"] in caps)
    assert cinfo["ppid"] == pa

    def leaves(cap):
        out = {}
        for s in cap.order:
            _, returns, _ = cap.thread_records(s)
            for us, f, line, fn, delta in returns:
                if fn == b"leaf":
                    out[cap.threads[s]["name"]] = out.get(cap.threads[s]["name"], 0) + 1
        return out
    # The child recorded only its own calls: nothing of the parent's buffers, and
    # only the forking thread.
    assert leaves(ccap) == {"MainThread": 50}
    assert leaves(pcap)["MainThread"] == 200
    assert leaves(pcap)["Thread-1"] == 100
    assert len(ccap.order) == 1


DROP_PROGRAM = """
import os, warnings, json, threadgraph
def leaf():
    return 1
p = threadgraph.ProcessProfile(default_log_path="out", format=%(fmt)r)
p.enable()
[leaf() for _ in range(1000)]
# The program closes the descriptor of our file (as a daemon closing everything
# would): the stream stops, and every record after that is counted, not lost
# silently.
for fd in os.listdir("/proc/self/fd"):
    try:
        target = os.readlink("/proc/self/fd/" + fd)
    except OSError:
        continue
    if target.endswith(%(victim)r):
        os.close(int(fd))
[leaf() for _ in range(400000)]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    p.disable()
print(json.dumps({"stats": p.stats(), "warnings": [str(w.message) for w in caught]}))
"""


@pytest.mark.parametrize("fmt, victim", [("binary", "/capture.tg"), ("text", "/MainThread.mem")])
def test_dropped_records_are_counted(tmp_path, fmt, victim):
    res = run_scenario(tmp_path, DROP_PROGRAM % {"fmt": fmt, "victim": victim})
    out = json.loads(res.stdout)
    dropped = out["stats"]["dropped"]
    assert dropped > 0
    # 400000 calls after the close (text: 400000 .mem lines; binary: a CALL and
    # a RETURN each); at most a couple of buffers of records were taken before the
    # stream found its file gone.
    assert dropped > 300000
    assert any("records dropped" in w and str(dropped) in w for w in out["warnings"]), out
    assert any("output stopped" in w for w in out["warnings"]), out
    info = load_runinfo(only_dir(tmp_path / "out"))
    assert info["dropped"] == dropped


def test_trailer_counts_every_stream(tmp_path):
    """disable() ends the capture with a trailer listing every thread stream with
    its calls, returns and dropped records, as many as the stream holds."""
    run_scenario(tmp_path, """
        import threading, threadgraph
        def leaf():
            return 1
        p = threadgraph.ProcessProfile(default_log_path="out")
        p.enable()
        t = threading.Thread(target=lambda: [leaf() for _ in range(1000)], name="Thread-1")
        t.start(); t.join()
        p.disable()
        """)
    cap = tgcapture.load(os.path.join(only_dir(tmp_path / "out"), "capture.tg"))
    assert set(cap.end[1]) == set(cap.order)
    for stream in cap.order:
        calls, returns, dropped = cap.thread_records(stream)
        assert cap.end[1][stream] == (len(calls), len(returns), dropped) and dropped == 0
    t1 = [s for s in cap.order if cap.threads[s]["name"] == "Thread-1"][0]
    assert cap.end[1][t1][0] >= 1000 and cap.end[1][t1][1] >= 1000


def test_compat_import_and_run_format_text_write_text(tmp_path):
    run_scenario(tmp_path, """
        from thread_graph.Profiler import ProcessProfile
        p = ProcessProfile(default_log_path="out")
        p.enable()
        sorted([3, 2, 1])
        p.disable()
        """)
    run_dir = only_dir(tmp_path / "out")
    assert "capture.tg" not in os.listdir(run_dir)
    assert "MainThread.mem" in os.listdir(run_dir)
    assert load_runinfo(run_dir)["capture"] is None


def test_format_argument_is_checked(tmp_path):
    import threadgraph
    with pytest.raises(ValueError):
        threadgraph.ProcessProfile(format="json")
    with pytest.raises(ValueError):
        threadgraph.ProcessProfile(stream_factory=lambda kind: None, format="binary")
    assert threadgraph.ProcessProfile(stream_factory=lambda kind: None).format == "text"


def test_compressed_capture_reads_the_same(tmp_path):
    """compress=True: events and process chunks are zstd frames, and the capture
    still renders to exactly the text files of the same run."""
    from threadgraph import _recorder
    if not _recorder.Recorder().can_compress():
        pytest.skip("threadgraph built without libzstd")
    if not tgcapture.can_decompress():
        pytest.skip("no zstd decoder for the test's reader")
    run_scenario(tmp_path, BOTH_PROGRAM.replace("sys.argv[1]", "'both'")
                 .replace("sys.argv[2]", "'stack'").replace("sys.argv[3]", "'time'")
                 .replace("sys.argv[4]", "'7'")
                 .replace('format="both",', 'format="both", compress=True,'))
    run_dir = only_dir(tmp_path / "out")
    cap = tgcapture.load(os.path.join(run_dir, "capture.tg"))
    assert cap.end is not None
    flagged = [k for k in cap.chunk_kinds if k[2] == 1]
    assert flagged and all(k[0] in (tgcapture.EVENTS, tgcapture.PROCESS) for k in flagged)
    for name, data in cap.render().items():
        with open(os.path.join(run_dir, name), "rb") as f:
            assert f.read() == data, name
    assert load_runinfo(run_dir)["capture_compression"] == "zstd"


@pytest.mark.parametrize("compress", [False, True])
def test_cli_export_equals_text(tmp_path, compress):
    """`threadgraph export RUN_DIR -o DIR` (the command-line processor's side of the
    capture) writes exactly the text files of a format="both" run, also from a
    zstd-compressed capture; a compressed capture cut anywhere exports a prefix
    of every file."""
    from threadgraph import _recorder
    if compress and not _recorder.Recorder().can_compress():
        pytest.skip("threadgraph built without libzstd")
    cli = find_cli()
    if cli is None:
        pytest.skip("threadgraph CLI not built")
    probe = subprocess.run([cli, "export", "--help"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True)
    if probe.returncode != 0:
        pytest.skip("this threadgraph CLI has no export command")
    run_scenario(tmp_path, BOTH_PROGRAM.replace("sys.argv[1]", "'both'")
                 .replace("sys.argv[2]", "'stack'").replace("sys.argv[3]", "'time'")
                 .replace("sys.argv[4]", "'7'")
                 .replace('format="both",', 'format="both", compress=%r,' % compress))
    run_dir = only_dir(tmp_path / "out")
    out = tmp_path / "exported"
    res = subprocess.run([cli, "export", run_dir, "-o", str(out)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    assert res.returncode == 0, res.stderr
    text = sorted(n for n in os.listdir(run_dir) if n.endswith((".mem", ".stack")))
    for name in text:
        with open(os.path.join(run_dir, name), "rb") as a, open(str(out / name), "rb") as b:
            assert a.read() == b.read(), name
    if not compress:
        return
    with open(os.path.join(run_dir, "capture.tg"), "rb") as f:
        data = f.read()
    for k, cut in enumerate(range(41, len(data), max(1, len(data) // 23))):
        part = tmp_path / ("cut%d" % k)
        part.mkdir()
        (part / "capture.tg").write_bytes(data[:cut])
        res = subprocess.run([cli, "export", str(part), "-q"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
        assert res.returncode == 0, (cut, res.stderr)
        for name in os.listdir(str(part)):
            if name.endswith((".mem", ".stack")):
                with open(os.path.join(run_dir, name), "rb") as a:
                    assert a.read().startswith((part / name).read_bytes()), (cut, name)


def test_binary_default_times_follow_the_wall_clock(tmp_path):
    """The default configuration's event path (capture only) reads the clock in
    microseconds through a per-thread cache: every record's time lies between
    the wall-clock times around the run, and times never go back in a stream."""
    res = run_scenario(tmp_path, """
        import threading, time, threadgraph
        def leaf(n):
            return bytearray(n)
        def work():
            for i in range(3000):
                leaf(i)
                if i % 1000 == 0:
                    time.sleep(0.02)
        t0 = time.time()
        p = threadgraph.ProcessProfile(default_log_path="out")
        p.trackStack()
        p.enable()
        ts = [threading.Thread(target=work) for _ in range(2)]
        for t in ts: t.start()
        work()
        for t in ts: t.join()
        p.disable()
        print(t0, time.time())
        """)
    t0, t1 = (float(x) for x in res.stdout.split())
    run_dir = only_dir(tmp_path / "out")
    cap = tgcapture.load(os.path.join(run_dir, "capture.tg"))
    assert cap.flags & tgcapture.F_TIME
    n = 0
    for stream in cap.order:
        calls, returns, _ = cap.thread_records(stream)
        times = sorted([(c[1], "c", i) for i, c in enumerate(calls)]
                       + [(r[0], "r", i) for i, r in enumerate(returns)])
        assert times, stream
        for us in (c[1] for c in calls):
            assert t0 * 1e6 - 2000 <= us <= t1 * 1e6 + 2000
        for us in (r[0] for r in returns):
            assert t0 * 1e6 - 2000 <= us <= t1 * 1e6 + 2000
        n += len(returns)
        # Stream order is time order (dt is unsigned): the sleeps show up.
        us_calls = [c[1] for c in calls]
        assert us_calls == sorted(us_calls)
        assert us_calls[-1] - us_calls[0] >= 40000
    assert n >= 3 * 3000
