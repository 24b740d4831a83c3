"""One measurement: run WORKLOAD under profiler CONFIG in this fresh process.

    python3 bench/runner.py CONFIG WORKLOAD [--scale S]
    python3 bench/runner.py --check CONFIG      (exit 0 if CONFIG can run here)

The workload is imported and prepared, and the profiler's modules imported, first
(outside the timed section); then the profiler is started, the workload run, the
profiler stopped, and one JSON object is printed on stdout:

    wall      seconds from before the profiler starts to after it stops (files flushed)
    run       seconds of the workload alone, profiler running
    maxrss_kb peak resident set size of this process (getrusage ru_maxrss)
    nvcsw, nivcsw, utime, stime
              voluntary and involuntary context switches and user and system CPU
              seconds of the whole process (all threads, getrusage), start to stop
    switch_interval
              the GIL's (sys.getswitchinterval()); BENCH_SWITCH_INTERVAL=SECONDS
              in the environment sets it before the workload, for any CONFIG
    rss0_kb   resident set size just before the profiler started
    out_bytes bytes the profiler wrote to its output directory (then deleted)
    events    threadgraph only: calls + returns recorded (stats(): stack_records +
              records; with stacks on), for bytes per recorded event

Every configuration is set up the same way, in-process, so that the only difference
between two measurements is the profiler.  See bench/README.md.
"""
import gc
import json
import os
import resource
import shutil
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


# ---------------------------------------------------------------- configurations

class NoProfiler:
    """The unprofiled baseline."""

    def start(self, outdir):
        pass

    def stop(self):
        return {}


class NoopHook:
    """A C profile function that returns 0, in every thread (bench/noop/noophook.c)."""

    def __init__(self):
        sys.path.insert(0, os.path.join(HERE, "build"))
        import noophook
        self.mod = noophook

    def start(self, outdir):
        self.mod.enable()

    def stop(self):
        self.mod.disable()
        return {}


class NoopMonitoring:
    """The sys.monitoring floor (3.12+): an empty C callback (noophook.event) for
    the events threadgraph's monitoring backend asks for (src/recorder/monitor.c),
    process-wide."""

    EVENTS = ("PY_START", "PY_RESUME", "PY_THROW", "PY_RETURN", "PY_YIELD", "PY_UNWIND",
              "CALL", "C_RETURN", "C_RAISE")
    TOOL = 2

    def __init__(self):
        if not hasattr(sys, "monitoring"):
            raise RuntimeError("sys.monitoring needs CPython 3.12 or later")
        sys.path.insert(0, os.path.join(HERE, "build"))
        import noophook
        self.mod = noophook

    def start(self, outdir):
        mon = sys.monitoring
        mon.use_tool_id(self.TOOL, "noop")
        mask = 0
        for name in self.EVENTS:
            ev = getattr(mon.events, name)
            mon.register_callback(self.TOOL, ev, self.mod.event)
            mask |= ev
        mon.set_events(self.TOOL, mask)

    def stop(self):
        mon = sys.monitoring
        mon.set_events(self.TOOL, 0)
        for name in self.EVENTS:
            mon.register_callback(self.TOOL, getattr(mon.events, name), None)
        mon.free_tool_id(self.TOOL)
        return {}


def _threadgraph_module():
    import threadgraph
    import threadgraph._recorder  # noqa: F401  (the C recorder must be there)
    # The API module too, before the clock starts, as every other tool's import
    # (memray, tracemalloc): threadgraph.ProcessProfile imports it on first use,
    # which put its import (2.5-4 ms of CPU time from an installed package,
    # 15-20 ms compiling a source tree's modules under PYTHONDONTWRITEBYTECODE)
    # into the measured span of every threadgraph configuration.  A tree
    # without the module (an older API) imports it in start() as before.
    try:
        import threadgraph.profiler  # noqa: F401
    except ImportError:
        pass
    return threadgraph


class Threadgraph:
    """threadgraph's ProcessProfile: profile "both" (the default), all threads, text
    files (FMT "text") or the binary capture (FMT "binary")."""

    # CONFIGS pass these positionally: append new parameters at the end.
    def __init__(self, memory_mode, stack, accounting=False, backend=None, native=False,
                 fmt="text", compress=False, sample_bytes=0, mode="full", process_every=None,
                 time_resolution=None):
        self.mode = mode
        self.time_resolution = time_resolution
        self.native = native
        self.process_every = process_every
        self.fmt = fmt
        self.compress = compress
        self.memory_mode = memory_mode
        self.stack = stack
        self.accounting = accounting
        self.sample_bytes = sample_bytes
        self.backend = backend
        self.tg = _threadgraph_module()
        if backend == "setprofile" and not (3, 12) <= sys.version_info[:2] < (3, 14):
            # Before 3.12 (and after 3.13) setprofile is the only backend: the
            # configuration would repeat tg-thread.
            raise RuntimeError("the setprofile comparison needs CPython 3.12 or 3.13")

    def start(self, outdir):
        tg = self.tg
        try:
            kw = {"compress": True} if self.compress else {}
            if self.mode != "full":  # sampled mode (docs/api.md "Sampled mode")
                kw["mode"] = self.mode
            if self.time_resolution is not None:  # docs/api.md "Timestamps"
                kw["time_resolution"] = self.time_resolution
            self.prof = tg.ProcessProfile(default_log_path=outdir, memory=self.memory_mode,
                                          format=self.fmt, **kw)
        except TypeError:  # an API without the keywords (text only): try the setters
            if self.fmt != "text":
                raise RuntimeError("this threadgraph has no binary capture")
            self.prof = tg.ProcessProfile(default_log_path=outdir)
            _set_memory_mode(self.prof, self.memory_mode)
        self.prof.trackStack(self.stack)
        if self.accounting:  # allocation accounting (docs/accounting.md)
            self.prof.accounting = True
        if self.sample_bytes:  # ... attributed to sites by sampling
            self.prof.sample_bytes = self.sample_bytes
        if self.backend is not None:
            self.prof.backend = self.backend
        if self.native:  # native memory (docs/api.md "Native memory")
            self.prof.native = True
        if self.process_every is not None:  # process.mem every N events
            self.prof.setProcessMemoryFrequence(self.process_every)
        self.prof.enable()

    def stop(self):
        self.prof.disable()
        stats = self.prof.stats()
        if self.stack and "stack_records" in stats:
            return {"events": stats["stack_records"] + stats["records"]}
        return {}


def _set_memory_mode(prof, mode):
    """Select the recorder's memory mode, whichever spelling the API uses."""
    for name in ("setMemoryMode", "set_memory_mode", "trackMemoryMode", "memoryMode"):
        fn = getattr(prof, name, None)
        if callable(fn):
            fn(mode)
            return
    for attr in ("memory_mode", "memory"):
        if hasattr(prof, attr):
            setattr(prof, attr, mode)
            return
    raise RuntimeError("cannot find how to set threadgraph's memory mode to %r" % mode)


class Tracemalloc:
    def __init__(self, frames):
        self.frames = frames

    def start(self, outdir):
        import tracemalloc
        self.tm = tracemalloc
        tracemalloc.start(self.frames)

    def stop(self):
        peak = self.tm.get_traced_memory()[1]
        self.tm.stop()
        return {"traced_peak": peak}


class Memray:
    def __init__(self, tpa, native=False):
        import memray
        self.memray = memray
        self.tpa = tpa
        self.native = native

    def start(self, outdir):
        self.tracker = self.memray.Tracker(os.path.join(outdir, "memray.bin"),
                                           trace_python_allocators=self.tpa,
                                           native_traces=self.native)
        self.tracker.__enter__()

    def stop(self):
        self.tracker.__exit__(None, None, None)
        return {}


class CProfile:
    """cProfile in every thread started after start(): one Profile per thread.

    Before 3.12 a Profile only sees the thread that enabled it, so threading's
    per-thread hook enables a fresh Profile in each new thread, which replaces the
    hook on the thread's first event.  From 3.12 on cProfile uses sys.monitoring,
    which covers all threads with one Profile (and allows only one).
    """

    def start(self, outdir):
        import cProfile
        self.profiles = []
        if sys.version_info < (3, 12):
            def thread_hook(*args):
                p = cProfile.Profile()
                self.profiles.append(p)
                p.enable()
            threading.setprofile(thread_hook)
        self.main = cProfile.Profile()
        self.main.enable()

    def stop(self):
        self.main.disable()
        threading.setprofile(None)
        self.main.create_stats()
        return {"threads_profiled": 1 + len(self.profiles)}


CONFIGS = {
    "none": (NoProfiler, (), "no profiler"),
    "noop": (NoopHook, (), "no-op C profile function in every thread (the floor)"),
    "noop-monitoring": (NoopMonitoring, (), "no-op C sys.monitoring callback for "
                        "threadgraph's events (the floor of the monitoring backend, 3.12+)"),
    "tg-thread": (Threadgraph, ("thread", True), "threadgraph, thread mode, stacks on (full recording)"),
    "tg-binary": (Threadgraph, ("thread", True, False, None, False, "binary"),
                  "threadgraph full recording (thread mode, stacks on) into the binary capture"),
    "tg-tutorial": (Threadgraph, ("thread", True, False, None, False, "binary", False, 0, "full",
                                  20),
                    "the tutorial's configuration: profile \"both\", trackStack(), "
                    "setProcessMemoryFrequence(20), the default binary capture"),
    "tg-tutorial-ms": (Threadgraph, ("thread", True, False, None, False, "binary", False, 0,
                                     "full", 20, "ms"),
                       "tg-tutorial with time_resolution=\"ms\": the clock read once a "
                       "millisecond beat per thread"),
    "tg-tutorial-noproc": (Threadgraph, ("thread", True, False, None, False, "binary", False, 0,
                                         "full", 0),
                           "tg-tutorial without process samples (setProcessMemoryFrequence(0))"),
    "tg-tutorial-native": (Threadgraph, ("thread", True, False, None, True, "binary", False, 0,
                                         "full", 20),
                           "tg-tutorial with native=True"),
    "tg-binary-setprofile": (Threadgraph, ("thread", True, False, "setprofile", False, "binary"),
                             "tg-binary with events from a profile function (3.12/3.13, "
                             "where the default is sys.monitoring)"),
    "tg-binary-zstd": (Threadgraph, ("thread", True, False, None, False, "binary", True),
                       "tg-binary with compress=True: zstd-compressed chunks"),
    "tg-thread-nostack": (Threadgraph, ("thread", False), "threadgraph, thread mode, stacks off"),
    "tg-thread-setprofile": (Threadgraph, ("thread", True, False, "setprofile"),
                             "threadgraph full recording, events from a profile function "
                             "(3.12/3.13, where the default is sys.monitoring)"),
    "tg-process": (Threadgraph, ("process", True), "threadgraph, process mode, stacks on"),
    "tg-process-nostack": (Threadgraph, ("process", False), "threadgraph, process mode, stacks off"),
    "tg-rss": (Threadgraph, ("rss", True), "threadgraph, rss mode, stacks on"),
    "tg-rss-nostack": (Threadgraph, ("rss", False), "threadgraph, rss mode, stacks off"),
    "tg-thread-nostack-acct": (Threadgraph, ("thread", False, True),
                               "threadgraph, thread mode, stacks off, allocation accounting on"),
    "tg-thread-nostack-sample": (Threadgraph, ("thread", False, True, None, False, "text", False, 65536),
                                 "threadgraph, thread mode, stacks off, allocation accounting "
                                 "sampled every 64 KiB (sample_bytes=65536)"),
    "tg-thread-nostack-sample4k": (Threadgraph, ("thread", False, True, None, False, "text", False, 4096),
                                   "threadgraph, thread mode, stacks off, allocation accounting "
                                   "sampled every 4 KiB (sample_bytes=4096)"),
    "tg-sampled": (Threadgraph, ("thread", False, False, None, False, "text", False, 0, "sampled"),
                   "threadgraph mode=\"sampled\": no per-call hook, a stack per 512 KiB "
                   "allocated on average"),
    "tracemalloc-1": (Tracemalloc, (1,), "tracemalloc.start(1)"),
    "tracemalloc-25": (Tracemalloc, (25,), "tracemalloc.start(25)"),
    "memray": (Memray, (False,), "memray.Tracker, default"),
    "memray-tpa": (Memray, (True,), "memray.Tracker(trace_python_allocators=True)"),
    "cprofile": (CProfile, (), "cProfile.Profile in every thread"),
    "tg-native": (Threadgraph, ("thread", True, False, None, True),
                  "threadgraph, thread mode, stacks on, native=True (malloc & mmap counted)"),
    "tg-native-nostack": (Threadgraph, ("thread", False, False, None, True),
                          "threadgraph, thread mode, stacks off, native=True"),
    "memray-native": (Memray, (False, True), "memray.Tracker(native_traces=True)"),
    "tg-binary-native": (Threadgraph, ("thread", True, False, None, True, "binary"),
                         "tg-binary with native=True (malloc & mmap counted), capture"),
    "memray-tpa-native": (Memray, (True, True), "memray.Tracker(trace_python_allocators=True, "
                          "native_traces=True): every Python and native allocation"),
}


def make_config(name):
    cls, args, _ = CONFIGS[name]
    return cls(*args)


# ---------------------------------------------------------------- workloads

def prepare_workload(name, scale):
    """Import the workload; return a zero-argument callable (nothing timed yet)."""
    if name.startswith("pp_"):
        from workloads import pyperformance_subset as pp
        return pp.prepare(name[3:], scale)
    import importlib
    mod = importlib.import_module("workloads." + name)
    return lambda: mod.run(scale)


def _rss_kb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)


def _dir_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def measure(config, workload, scale):
    # The GIL's switch interval (sys.setswitchinterval), for every
    # configuration alike: BENCH_SWITCH_INTERVAL=0.02 in the environment
    # (bench/RESULTS.md "threads_locks: a lock convoy past the switch interval").
    si = os.environ.get("BENCH_SWITCH_INTERVAL")
    if si:
        try:
            sys.setswitchinterval(float(si))
        except ValueError:
            sys.exit("BENCH_SWITCH_INTERVAL wants a number of seconds above 0, got %r" % si)
    fn = prepare_workload(workload, scale)
    cfg = make_config(config)
    outdir = tempfile.mkdtemp(prefix="tgbench-")
    try:
        gc.collect()
        rss0 = _rss_kb()
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        flt0 = ru0.ru_minflt
        c0 = time.process_time()
        t0 = time.perf_counter()
        cfg.start(outdir)
        t1 = time.perf_counter()
        c1 = time.process_time()
        fn()
        c2 = time.process_time()
        t2 = time.perf_counter()
        extra = cfg.stop()
        t3 = time.perf_counter()
        c3 = time.process_time()
        ru = resource.getrusage(resource.RUSAGE_SELF)
        maxrss = ru.ru_maxrss
        out_bytes = _dir_bytes(outdir)
    finally:
        shutil.rmtree(outdir, ignore_errors=True)
    res = {"config": config, "workload": workload, "scale": scale,
           "wall": t3 - t0, "run": t2 - t1, "cpu": c3 - c0, "run_cpu": c2 - c1,
           "maxrss_kb": maxrss, "rss0_kb": rss0, "minflt": ru.ru_minflt - flt0,
           "out_bytes": out_bytes,
           "nvcsw": ru.ru_nvcsw - ru0.ru_nvcsw, "nivcsw": ru.ru_nivcsw - ru0.ru_nivcsw,
           "utime": ru.ru_utime - ru0.ru_utime, "stime": ru.ru_stime - ru0.ru_stime,
           "switch_interval": sys.getswitchinterval()}
    res.update(extra)
    return res


def check(config):
    """Raise if CONFIG cannot run in this interpreter."""
    cfg = make_config(config)
    outdir = tempfile.mkdtemp(prefix="tgbench-check-")
    try:
        cfg.start(outdir)
        sum(i for i in range(10))
        cfg.stop()
    finally:
        shutil.rmtree(outdir, ignore_errors=True)


def main(argv):
    if len(argv) == 2 and argv[0] == "--check":
        try:
            check(argv[1])
        except Exception as e:  # report why, for RESULTS.md
            print(json.dumps({"ok": False, "error": "%s: %s" % (type(e).__name__, e)}))
            return 1
        print(json.dumps({"ok": True}))
        return 0
    scale = 1.0
    if "--scale" in argv:
        i = argv.index("--scale")
        scale = float(argv[i + 1])
        del argv[i:i + 2]
    if len(argv) != 2 or argv[0] not in CONFIGS:
        print(__doc__, file=sys.stderr)
        return 2
    print(json.dumps(measure(argv[0], argv[1], scale)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
