"""``threadgraph run``: run a Python program under the profiler, unchanged.

    threadgraph run [options] script.py [args...]
    threadgraph run [options] -m module [args...]

The program sees what it would see if started with ``python script.py`` (or
``python -m module``): ``sys.argv``, a ``__main__`` module, ``sys.path[0]``.  The
profiler is enabled before the program's first line and disabled after the program
and its non-daemon threads have finished, whatever way it ended, so the dump files
are always complete.  The program's exit status is kept.

Output: ``ProcessProfile`` always writes into ``<base>/<pid>/``; ``-o BASE`` sets the
base, by default ``threadgraph-<script stem>`` (``threadgraph-<module>`` with ``-m``)
in the current directory.  The directory actually used is printed when the program
starts, and a summary (threads, records, the biggest peaks, what to run next) when
it ends.  Everything threadgraph itself prints goes to stderr.
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import threading
import traceback
import types

from threadgraph._options import (CHOICES, DEFAULTS, SAMPLE_BYTES_MAX, SAMPLE_EVERY_MAX,
                                  SAMPLED_DEFAULT_BYTES, VALUE_DEFAULTS)

PROG = "threadgraph run"
TOP_PEAKS = 5
TOP_RELEASES = 2  # the largest negative deltas, listed after the growth
CANDIDATE_PEAKS = 100  # asked of `threadgraph peaks`, before nested calls are merged
NEAR_BYTES = 4096  # deltas this close, or NEAR_FRACTION of the delta, are one allocation
NEAR_FRACTION = 0.02

def snapshot_condition(text):
    """--snapshot-when's COND, checked by the recorder's parser."""
    from threadgraph import _recorder

    try:
        _recorder.snapshot_condition(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc))
    return text


SNAPSHOT_EVERY_MAX = 86400.0


def snapshot_period(text):
    """--snapshot-every's SECONDS: a number from 0.001 to a day."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("not a number of seconds: %r" % text)
    if not 0.001 <= value <= SNAPSHOT_EVERY_MAX:  # NaN fails too
        raise argparse.ArgumentTypeError("must be from 0.001 to %d seconds, not %s"
                                         % (SNAPSHOT_EVERY_MAX, text))
    return value


def build_parser():
    parser = argparse.ArgumentParser(
        prog=PROG,
        usage="%(prog)s [options] script.py [args...]\n"
        "       %(prog)s [options] -m module [args...]",
        description="Run a Python program under the threadgraph memory profiler, "
        "without changing it. The program gets sys.argv, __main__ and sys.path[0] "
        "as if it were run directly, and its exit status is kept.",
        epilog="Files go to BASE/<pid>/: capture.tg (the binary capture) and "
        "runinfo.json; with --format text one .mem, and with --stack one .stack, per "
        "thread, plus process.mem. Then, for example: threadgraph memg BASE/<pid> "
        "(text: threadgraph memg BASE/<pid>/*.mem)",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="BASE",
        help="base directory; the files are written into BASE/<pid>/ "
        "(default: threadgraph-<script name without .py>, or threadgraph-<module> "
        "with -m, in the current directory)",
    )
    parser.add_argument(
        "--profile",
        choices=CHOICES["profile"],
        help="which calls to record: Python functions, C functions (builtins), "
        "or both (default: %s, as ProcessProfile)" % DEFAULTS["profile"],
    )
    parser.add_argument(
        "--filter",
        metavar="PREFIX",
        help="record only functions whose file name starts with PREFIX "
        "(ProcessProfile.setFilter)",
    )
    parser.add_argument(
        "--stack",
        action="store_true",
        help="with --format text, also write a .stack file per thread, which "
        "decorate-stack, nesting and the delta flame graph need; a binary capture "
        "holds every call either way, and its export writes .stack files with "
        "--stack (ProcessProfile.trackStack)",
    )
    parser.add_argument(
        "--memory",
        choices=CHOICES["memory"],
        help="what a call's memory delta measures (default: %s; thread: the bytes the "
        "thread allocated minus freed, exact); see docs/api.md" % DEFAULTS["memory"],
    )
    parser.add_argument(
        "--no-sleep-correction",
        action="store_true",
        help="turn off the context-switch correction around sleeps and lock "
        "acquires (ProcessProfile.trackSleeps(False))",
    )
    parser.add_argument(
        "--follow-fork",
        action="store_true",
        help="keep profiling in child processes after os.fork(), each into "
        "BASE/<child pid>/ (ProcessProfile.enableForkedProfile)",
    )
    parser.add_argument(
        "--follow-exec",
        action="store_true",
        help="also profile the Python programs it starts (subprocess, os.exec*), each "
        "into BASE/<pid>/ with the same options (docs/run.md)",
    )
    parser.add_argument(
        "--process-memory-frequency",
        metavar="N",
        type=int,
        help="write a process.mem sample every N profile events, 0 for none "
        "(default: %d; ProcessProfile.setProcessMemoryFrequence)"
        % VALUE_DEFAULTS["sample_every"],
    )
    parser.add_argument(
        "--no-timestamps",
        action="store_true",
        help="write lines without the TIME# prefix (ProcessProfile.logTimestamps"
        "(False)); the processor then needs --no_time",
    )
    parser.add_argument(
        "--accounting",
        action="store_true",
        help="allocation accounting: summary.json, size histograms, heap snapshots by "
        "call site (ProcessProfile(accounting=True); docs/accounting.md)",
    )
    parser.add_argument(
        "--sample-bytes",
        type=int,
        metavar="N",
        help="allocation accounting by sampling: sites get unbiased estimates from one "
        "sample per N bytes allocated on average (ProcessProfile(sample_bytes=N); "
        "implies --accounting; docs/accounting.md)",
    )
    parser.add_argument(
        "--snapshot-when",
        metavar="COND",
        action="append",
        type=snapshot_condition,
        help="a heap snapshot by call site of every thread when COND is first met, and "
        "again at each new high above it: thread>SIZE, live>SIZE or rss>SIZE, e.g. "
        "rss>2G, thread>500M (repeatable; ProcessProfile.snapshot_when; implies "
        "--accounting; docs/accounting.md)",
    )
    parser.add_argument(
        "--snapshot-every",
        metavar="SECONDS",
        type=snapshot_period,
        help="a heap snapshot by call site of every thread every SECONDS (0.001 to "
        "86400), the first after SECONDS: for the call sites of threadgraph live "
        "while the run goes on (ProcessProfile.snapshot_every(every=SECONDS, "
        "seconds=True); implies --accounting; docs/accounting.md)",
    )
    parser.add_argument(
        "--mode",
        choices=CHOICES["mode"],
        default=DEFAULTS["mode"],
        help="full: every call recorded (default %s); sampled, for long and production "
        "runs: no per-call hook, exact per-thread totals and memory curves, call sites "
        "from the Python stacks of one allocation per --sample-bytes (default %d) bytes "
        "on average (implies --accounting and --format text; "
        "ProcessProfile(mode=...); docs/run.md)" % (DEFAULTS["mode"], SAMPLED_DEFAULT_BYTES),
    )
    parser.add_argument(
        "--sampled",
        dest="mode",
        action="store_const",
        const="sampled",
        help="--mode sampled",
    )
    parser.add_argument(
        "--time-resolution",
        choices=CHOICES["time_resolution"],
        default=DEFAULTS["time_resolution"],
        help="us: every timed record reads the clock (default %s); ms: a thread's "
        "records within one millisecond beat share its first reading, each time at "
        "most about a millisecond early, at a lower cost a call "
        "(ProcessProfile(time_resolution=...); docs/run.md)" % DEFAULTS["time_resolution"],
    )
    parser.add_argument(
        "--compress",
        action="store_true",
        help="compress the binary capture's chunks with zstd (when threadgraph was "
        "built with libzstd) and gzip the accounting outputs "
        "(ProcessProfile(compress=True))",
    )
    parser.add_argument(
        "--max-size",
        metavar="SIZE",
        help="keep the binary capture within SIZE (such as 10M or 2G; K, M, G are "
        "powers of 1024): it is written in segments and the oldest are dropped "
        "whole; the commands read what is kept and say which part of the run it "
        "covers (ProcessProfile(max_size=...); docs/run.md)",
    )
    parser.add_argument(
        "--aggregate",
        action="store_true",
        help="no record per call: each thread's calls rolled up per call path (count, "
        "total and largest delta, time) and its memory curve in buckets, rewritten "
        "every second into aggregate.tga, whose size does not grow with the run's "
        "length (ProcessProfile(aggregate=True); docs/run.md)",
    )
    parser.add_argument(
        "--native",
        action="store_true",
        help="also count native memory: malloc & co. and anonymous mmap of C "
        "extensions and libraries (ProcessProfile(native=True); docs/api.md)",
    )
    parser.add_argument(
        "--backend",
        choices=CHOICES["backend"],
        help="where the events come from: a profile function on every thread, or "
        "sys.monitoring (CPython 3.12/3.13); default %s (ProcessProfile(backend=...))"
        % DEFAULTS["backend"],
    )
    parser.add_argument(
        "--format",
        choices=CHOICES["format"],
        help="binary: one compact capture.tg (`threadgraph export` writes the text files "
        "from it); text: the original's .mem/.stack/process.mem files; both "
        "(default: %s, text with --sampled; ProcessProfile(format=...))" % DEFAULTS["format"],
    )
    parser.add_argument(
        "--live",
        action="store_true",
        help="show threadgraph live, the terminal view of the threads' memory, while "
        "the program runs; the program's own output goes to BASE/<pid>/output.txt "
        "(q leaves the view once the program has ended; docs/attach.md)",
    )
    parser.add_argument(
        "-m",
        dest="module",
        metavar="module",
        help="run a library module as a script, like python -m",
    )
    return parser


def value_options(parser):
    """The option strings of PARSER that take their value as the next argument,
    but ``-m`` (split_argv's target): derived from the parser, so that a new
    option cannot be missed."""
    return tuple(
        opt
        for action in parser._actions
        if action.option_strings and action.nargs != 0 and action.dest != "module"
        for opt in action.option_strings
    )


def split_argv(argv, value_opts=None):
    """Split ``argv`` into (our options, target, the program's arguments).

    ``target`` is ("module", name), ("script", path) or None.  Parsing stops at the
    script or at ``-m module``, so the program's own options are never ours: the
    first argument that is neither an option nor the value of one of VALUE_OPTS
    (default: value_options(build_parser())) is the script.
    """
    if value_opts is None:
        value_opts = value_options(build_parser())
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            if i + 1 < len(argv):
                return argv[:i], ("script", argv[i + 1]), argv[i + 2 :]
            return argv[:i], None, []
        if arg == "-m":
            if i + 1 < len(argv):
                return argv[:i], ("module", argv[i + 1]), argv[i + 2 :]
            return argv, None, []  # argparse reports the missing value
        if arg.startswith("-m") and not arg.startswith("--"):
            return argv[:i], ("module", arg[2:]), argv[i + 1 :]
        if arg in value_opts:
            i += 2
            continue
        if arg.startswith("-") and arg != "-":
            i += 1
            continue
        return argv[:i], ("script", arg), argv[i + 1 :]
    return argv, None, []


def default_base(target):
    kind, name = target
    if kind == "module":
        stem = name
    else:
        stem = os.path.basename(os.path.normpath(name))
        if stem.endswith(".py"):
            stem = stem[:-3]
    return "threadgraph-" + (stem or "program")


def display_path(path):
    """``path`` relative to the current directory when it is below it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def enable_saying_warnings(prof):
    """prof.enable(), its own warnings (backend auto's fallback when the
    sys.monitoring tool ids are taken) said as run's lines rather than as Python
    warnings with a file and line of threadgraph's; others are shown as usual.
    No program code runs yet: catching warnings cannot hide the program's."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prof.enable()
    for w in caught:
        text = str(w.message)
        if text.startswith("threadgraph: "):
            err.write(term_safe(text) + "\n")
            err.flush()
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


class OwnStderr:
    """Where threadgraph's own lines go: the program's sys.stderr, best effort.
    Nothing when the program has no stderr (started with it closed, python sets
    sys.stderr to None), and nothing more once a write failed (a pipe whose
    reader has gone, as `2>&1 | head -1`): as python's own messages, they never
    change whether the program runs or its exit status."""

    def __init__(self):
        self.broken = False

    def write(self, text):
        self._do("write", text)

    def flush(self):
        self._do("flush")

    def _do(self, what, *args):
        stream = sys.stderr
        if self.broken or stream is None:
            return
        try:
            getattr(stream, what)(*args)
        except (OSError, ValueError):
            self.broken = True


err = OwnStderr()


def say(msg):
    err.write("threadgraph: %s\n" % term_safe(msg))
    err.flush()


# What must not reach a terminal raw (the C side's tg_unsafe_seq): C0 controls
# but tab and newline, DEL, the C1 controls (U+009B is CSI to some terminals) and
# the bidirectional controls that reorder a line (U+202E ...); and the surrogate
# escapes of a name that is not UTF-8 (os.fsdecode), written as their bytes.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f"
                     "\u202a-\u202e\u2066-\u2069\udc80-\udcff]")


def term_safe(text):
    """TEXT with every terminal-unsafe character as \\xHH per UTF-8 byte, as the
    C commands print dump text (names come from the profiled program)."""
    return _UNSAFE.sub(lambda m: "".join("\\x%02x" % b for b in m.group().encode("utf-8", "surrogateescape")),
                       str(text))


def make_profiler(opts, base):
    from threadgraph import ProcessProfile

    kwargs = {"default_log_path": base, "format": opts.format}
    if opts.profile:
        kwargs["profile"] = opts.profile
    if opts.memory:
        kwargs["memory"] = opts.memory
    if (opts.accounting or opts.sample_bytes or opts.snapshot_when
            or getattr(opts, "snapshot_every", None)):
        kwargs["accounting"] = True
    if opts.compress:
        kwargs["compress"] = True
    if opts.sample_bytes:
        kwargs["sample_bytes"] = opts.sample_bytes
    if opts.mode != DEFAULTS["mode"]:
        kwargs["mode"] = opts.mode
    resolution = getattr(opts, "time_resolution", DEFAULTS["time_resolution"])
    if resolution != DEFAULTS["time_resolution"]:
        kwargs["time_resolution"] = resolution
    if opts.max_size:
        kwargs["max_size"] = opts.max_size
    if getattr(opts, "aggregate", False):
        kwargs["aggregate"] = True
    if opts.backend:
        kwargs["backend"] = opts.backend
    if opts.native:
        kwargs["native"] = True
    prof = ProcessProfile(**kwargs)
    if opts.filter:
        prof.setFilter(opts.filter)
    if opts.stack:
        prof.trackStack(True)
    if opts.snapshot_when:
        prof.snapshot_when(*opts.snapshot_when)
    if getattr(opts, "snapshot_every", None):
        prof.snapshot_every(start_after=opts.snapshot_every, every=opts.snapshot_every,
                            seconds=True)
    if opts.no_sleep_correction:
        prof.trackSleeps(False)
    if opts.follow_fork:
        prof.enableForkedProfile()
    if opts.process_memory_frequency is not None:
        prof.setProcessMemoryFrequence(opts.process_memory_frequency)
    if opts.no_timestamps:
        prof.logTimestamps(False)
    return prof


# --- running the target as python would ----------------------------------------


def prepare_script(path, args):
    """Set up sys for ``python path args``; return (code, module) or raise OSError."""
    with open(path, "rb") as f:
        source = f.read()
    # Python 3.9+ makes __file__ of the main script absolute; 3.8 keeps it as given.
    filename = os.path.abspath(path) if sys.version_info >= (3, 9) else path
    # The code's file name is absolute on every version, so that the dumps name the
    # script the same way wherever it was started from and --filter $PWD/ matches.
    code = compile(source, os.path.abspath(path), "exec", dont_inherit=True)
    module = types.ModuleType("__main__")
    module.__dict__.update(
        {
            "__file__": filename,
            "__builtins__": __builtins__,
            "__cached__": None,
            "__package__": None,
            "__spec__": None,
        }
    )
    sys.argv[:] = [path] + list(args)
    sys.path[0] = os.path.dirname(os.path.realpath(path))
    return code, module


def prepare_module(name, args):
    """Set up sys for ``python -m name args``; return (code, module).

    Raises ImportError with python's message when the module cannot be run.  As
    with ``python -m``, the module's parent packages are imported here (before the
    profiler starts); the module itself runs in main(), under the profiler.
    """
    import runpy

    sys.argv[:] = [name] + list(args)
    sys.path[0] = os.getcwd()
    try:
        # The helper python -m itself uses (3.8 to 3.13): finds the module, or a
        # package's __main__, and compiles it, with python's error messages.
        _, spec, code = runpy._get_module_details(name)
    except ImportError:
        raise
    except Exception as exc:  # e.g. runpy's error for a namespace package
        raise ImportError(str(exc))
    module = types.ModuleType("__main__")
    module.__dict__.update(
        {
            "__file__": spec.origin,
            "__builtins__": __builtins__,
            "__cached__": spec.cached,
            "__loader__": spec.loader,
            "__package__": spec.parent,
            "__spec__": spec,
        }
    )
    sys.argv[0] = spec.origin  # python -m shows the module's file in argv[0]
    return code, module


# While the profiler runs, main()'s own work (its "profiling" line, the exit
# status, the list of threads to wait for) runs with the Recorder's quiet(True):
# nothing of it is recorded, allocations included.  What may run program code
# (the program, the joins, the flush of its stdout) is recorded.

def threads_to_wait_for():
    """The non-daemon threads the interpreter would join before it exits."""
    me = threading.current_thread()
    return [t for t in threading.enumerate() if t is not me and not t.daemon and t.is_alive()]


def take_threading_atexits():
    """The functions registered with threading._register_atexit (3.9+), last
    registered first (the order threading._shutdown calls them in), taken off
    its list so that they are called once."""
    atexits = getattr(threading, "_threading_atexits", None)
    if not atexits:
        return []
    calls = list(reversed(atexits))
    del atexits[:]
    return calls


def report_exception(exc_type, exc, tb):
    """Print a traceback as python would, without threadgraph's own frames: run's
    below the program, and the wrapper of a failed os.exec* (profiler.py)."""
    from threadgraph.profiler import OS_EXEC_CODE

    own = (os.path.abspath(__file__),)
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) in own:
        tb = tb.tb_next
    entry = tb
    while entry is not None:
        # the process is ending: its traceback is ours to trim (tb_next is writable)
        while entry.tb_next is not None and entry.tb_next.tb_frame.f_code is OS_EXEC_CODE:
            entry.tb_next = entry.tb_next.tb_next
        entry = entry.tb_next
    traceback.print_exception(exc_type, exc, tb, file=err)


def report_failure(failure):
    """Print how the program failed, as python does at its end: the uncaught
    exception's traceback, or the message of sys.exit("message")."""
    if failure[0] == "exception":
        report_exception(*failure[1])
    else:
        err.write("%s\n" % (failure[1],))
        err.flush()


def exit_message_of(exc):
    """("message", exc.code) for sys.exit("message"), which python prints; else None."""
    if isinstance(exc.code, (int, type(None))):
        return None
    return ("message", exc.code)


def exit_code_of(exc):
    """The status python gives for SystemExit(exc.code)."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    return 1  # python prints the message; main() does, once profiling stops


# --- the summary ------------------------------------------------------------------


def thread_mem_files(out_dir):
    try:
        names = sorted(os.listdir(out_dir))
    except OSError:
        return []
    return [
        os.path.join(out_dir, n) for n in names if n.endswith(".mem") and n != "process.mem"
    ]


def capture_path(out_dir):
    """The run's binary capture (capture.tg, or its newest segment with
    --max-size), or None when it wrote none."""
    path = os.path.join(out_dir, "capture.tg")
    if os.path.isfile(path):
        return path
    try:
        segs = sorted(n for n in os.listdir(out_dir)
                      if n.startswith("capture-") and n.endswith(".tg"))
    except OSError:
        return None
    return os.path.join(out_dir, segs[-1]) if segs else None


def top_peaks(out_dir, mem_files, timestamps):
    """The biggest peaks from the C processor, or (None, reason), and the part
    of the run they come from when it says (a capture of limited size: its
    warning's words), else None.

    The processor reads the thread .mem files MEM_FILES (format text or both), or
    else the run directory's binary capture."""
    from threadgraph._cli import CliNotFound, cli_path

    inputs = mem_files or ([out_dir] if capture_path(out_dir) else [])
    if not inputs:
        return None, "no thread .mem files", None
    try:
        cli = cli_path()
    except CliNotFound:
        return None, "the command-line processor is missing", None
    cmd = [cli]
    if not timestamps:
        cmd.append("--no_time")
    # Every return is a candidate (--peak 0) and none is hidden by its neighbours in
    # time or value (--every): the summary wants the largest deltas, whatever their
    # spacing; with --top, peaks holds no more of them than that, however long the run.
    cmd += ["peaks", "--json", "--top", str(CANDIDATE_PEAKS), "--sort", "size", "--peak", "0",
            "--every"] + inputs
    try:
        proc = subprocess.run(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True
        )
    except OSError as exc:
        return None, str(exc), None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["exit %d" % proc.returncode])[-1]
        return None, "threadgraph peaks failed: %s" % last, None
    try:
        peaks = json.loads(proc.stdout)
    except ValueError:
        return None, "threadgraph peaks printed no JSON", None
    kept = next((line[len("warning: "):] for line in proc.stderr.splitlines()
                 if line.startswith("warning: a capture of limited size: ")), None)
    # threadgraph's own few calls around the program (printing the first line,
    # waiting for threads) are recorded too; they are not the program's peaks.
    own = os.path.dirname(os.path.abspath(__file__)) + os.sep
    peaks = [p for p in peaks if not str(p.get("file", "")).startswith(own)]
    return growth_first(innermost(peaks)), None, kept


# The bound of the decorate-stack command the summary suggests: its peak can be
# a long-running thread's own run(), whose subtree is every call the thread
# made (millions of lines); these print its first levels and the count of the
# rest (docs/run.md).
DECORATE_BOUND = "--depth 3 --max-lines 300 "

# How to read a delta that looks wrong, said under the peaks (and in the report).
PEAK_HINT = ("  (a delta is what the thread held more, or less, when the call returned:\n"
             "   a temporary the caller frees right after counts as the call's growth, and a\n"
             "   garbage collection run during a call counts all it freed to that call)\n")


def read_gc_runs(out_dir):
    """(names, runs) from OUT_DIR's gc.txt (the collector's runs while recording,
    docs/formats.md): names maps a native id to its thread's name (runinfo.json),
    runs is a list of (native_id, start, stop, collected); a run of a thread an
    aggregate run folded has its family's name (the line's FAMILY) for a
    native_id, which names maps to itself.  ({}, []) when either file is
    missing or unreadable; malformed lines are left out."""
    try:
        with open(os.path.join(out_dir, "runinfo.json")) as f:
            names = {int(t["native_id"]): str(t["name"]) for t in json.load(f)["threads"]}
        with open(os.path.join(out_dir, "gc.txt")) as f:
            lines = f.read().splitlines()
    except (OSError, ValueError, KeyError, TypeError):
        return {}, []
    runs = []
    for line in lines:
        fields = line.split(" ", 4)
        if line.startswith("#") or len(fields) < 4:
            continue
        try:
            run = (int(fields[0]), float(fields[1]), float(fields[2]), int(fields[3]))
        except ValueError:
            continue
        if len(fields) == 5:  # a thread an aggregate run folded: its family names it
            names[fields[4]] = fields[4]
            runs.append((fields[4],) + run[1:])
        else:
            runs.append(run)
    return names, runs


def gc_runs_by_thread(names, runs):
    """{thread name: [runs, objects collected]} of read_gc_runs' NAMES and RUNS."""
    by = {}
    for native_id, _start, _stop, collected in runs:
        entry = by.setdefault(names.get(native_id) or "native id %s" % native_id, [0, 0])
        entry[0] += 1
        entry[1] += max(collected, 0)
    return by


# gc.txt and the capture both write times cut to the microsecond, from one clock
# (the half more absorbs the rounding of the parsed floats); as src/lib/gcruns.h.
GC_SLACK = 1.5e-6


def gc_in_call(names, runs, peak):
    """(runs, objects collected) of the collections that PEAK's call ran: by its
    thread, within [call_start, time] (peaks --json).  (0, 0) when the peak has
    no call_start (text dumps, --no-timestamps)."""
    start, end = peak.get("call_start"), peak.get("time")
    if start is None or end is None:
        return 0, 0
    thread = str(peak.get("thread", ""))
    n = objects = 0
    for native_id, gc_start, gc_stop, collected in runs:
        if names.get(native_id) == thread and gc_start >= start - GC_SLACK \
                and gc_stop <= end + GC_SLACK:
            n += 1
            objects += max(collected, 0)
    return n, objects


def gc_mark(n, objects):
    """The mark after a peak whose call ran the collector, or "" (also when
    its runs collected nothing: nothing freed for the delta to include)."""
    if not n or objects <= 0:
        return ""
    return "  [gc: %d run%s, %d objects]" % (
        n, "" if n == 1 else "s", objects)


def gc_hint(names, runs, peaks, marked):
    """The lines said under the peaks when the garbage collector ran in a thread
    they belong to (MARKED: some peak's call ran it), or ""."""
    by = gc_runs_by_thread(names, runs)
    shown = []
    for p in peaks:
        name = str(p.get("thread", ""))
        if name in by and name not in shown:
            shown.append(name)
    if not shown:
        return ""
    parts = ["%s (%d run%s, %d objects collected)"
             % (term_safe(n), by[n][0], "" if by[n][0] == 1 else "s", by[n][1])
             for n in shown]
    text = "  the garbage collector ran in %s; gc.txt lists its runs\n" % ", ".join(parts)
    if marked:
        text += ("   [gc: ...]: the collector ran during that call, whose delta includes\n"
                 "   what the collector freed, and what the call left to it\n")
    else:  # no call times (text dumps): the thread is all that is known
        text += "   a peak of that thread whose call spans a run counts what it freed\n"
    return text


def growth_first(peaks):
    """The summary's order: growth (positive deltas), largest first, then releases.

    Up to TOP_PEAKS peaks of growth, sorted by delta, then up to TOP_RELEASES of the
    largest releases (most negative first): a thread's big release (the main thread's
    ``<module>`` freeing what its workers built) would otherwise lead the list.
    """
    def delta(p):
        return int(p.get("delta", 0))

    growth = sorted((p for p in peaks if delta(p) > 0), key=delta, reverse=True)
    released = sorted((p for p in peaks if delta(p) < 0), key=delta)
    return growth[:TOP_PEAKS] + released[:TOP_RELEASES]


def innermost(peaks):
    """Keep, of calls nested in one another with (almost) the same delta, the inner one.

    A thread's allocation shows in every enclosing call (threading's _bootstrap,
    run, the target, ...) with about the same delta; the summary names the call that
    made it.  Two peaks of one thread (one .mem file and thread name: a binary
    capture's peaks all name its run directory, and its record numbers count per
    thread) whose deltas have the same sign and differ by at most NEAR are taken
    as one, and the one that returned first (the innermost: callees return before
    their callers) is kept.  Where the peaks say when their calls began
    (``call_start``: a binary capture, or text dumps with .stack files), only
    calls nested in one another are merged: two calls one after the other (a
    loop calling the same function) are two peaks, and the larger is not hidden
    behind the smaller.  Peaks of two threads are never merged: workers that
    each keep the same amount are each named.  Order is kept.
    """
    def stream(p):
        return p.get("mem_file"), p.get("thread")

    def nested(a, b):
        """Whether one of the calls of peaks A and B ran inside the other; True
        when a call's start is not known (no .stack: nesting cannot be told)."""
        try:
            a0, a1 = float(a["call_start"]), float(a["time"])
            b0, b1 = float(b["call_start"]), float(b["time"])
        except (KeyError, TypeError, ValueError):
            return True
        return (a0 <= b0 and b1 <= a1) or (b0 <= a0 and a1 <= b1)

    kept = []
    anchors = []  # each kept peak's group is compared by its first peak's delta,
    # so that a chain of calls each near the next does not drift down to a
    # small innermost call far from the group's delta
    for p in peaks:
        delta = int(p.get("delta", 0))
        for i, q in enumerate(kept):
            qd = anchors[i]
            near = max(NEAR_BYTES, NEAR_FRACTION * abs(delta))
            if stream(q) == stream(p) and (qd < 0) == (delta < 0) \
                    and abs(qd - delta) <= near and nested(p, q):
                if int(p.get("mem_line", 0)) < int(q.get("mem_line", 0)):
                    kept[i] = p
                break
        else:
            kept.append(p)
            anchors.append(delta)
    return kept


def shell_quote(word):
    """WORD as one shell word (paths and thread names may contain spaces).  A
    word with terminal-unsafe characters is written $'...' (bash, zsh, ksh),
    those as \\xHH per UTF-8 byte: the same word to the shell, nothing raw on
    the terminal."""
    word = str(word)
    if not _UNSAFE.search(word):
        return shlex.quote(word)
    body = word.replace("\\", "\\\\").replace("'", "\\'")
    return "$'" + _UNSAFE.sub(
        lambda m: "".join("\\x%02x" % b for b in m.group().encode("utf-8", "surrogateescape")), body) + "'"


def _print_next_aggregate(shown, opts):
    """The next commands on an aggregate run (aggregate.tga: call paths and
    curves, no record per call: no peaks of calls to list)."""
    no_time = "--no_time " if opts.no_timestamps else ""
    q = shell_quote(shown)
    say("next (aggregate run: call paths and memory curves in aggregate.tga):")
    err.write("    threadgraph summary %s\n" % q)
    err.write("    threadgraph folded --metric delta %s\n" % q)
    err.write("    threadgraph %smemg %s\n" % (no_time, q))
    err.write("    threadgraph %sreport %s -o %s\n" % (
        no_time, q, shell_quote(os.path.join(shown, "report.html"))))
    err.flush()


def _open_text(path):
    """PATH, or PATH.gz (--compress), open for reading as text; None when
    neither is there."""
    import gzip

    for name in (path, path + ".gz"):
        opener = gzip.open if name.endswith(".gz") else open
        try:
            return opener(name, "rt", encoding="utf-8", errors="surrogateescape")
        except OSError:
            continue
    return None


def read_json(path):
    """PATH (or PATH.gz) as JSON, or None when missing or unreadable."""
    f = _open_text(path)
    if f is None:
        return None
    try:
        with f:
            return json.load(f)
    except (OSError, ValueError, EOFError):
        return None


def curve_top(path):
    """(highest reading, its time or None) of a sampled run's .mem curve PATH
    (``[TIME#]<thread memory>:0:sampled=>BYTES`` a line, docs/formats.md), or
    None when it has no reading; malformed lines are left out, as the
    commands leave them out without --strict."""
    f = _open_text(path)
    if f is None:
        return None
    top = None
    try:
        with f:
            for line in f:
                head, sep, value = line.rstrip("\n").rpartition("=>")
                stamp, hash_, _ = head.partition("#")
                try:
                    reading = int(value)
                    when = float(stamp) if hash_ else None
                except ValueError:
                    continue
                if sep and (top is None or reading > top[0]):
                    top = (reading, when)
    except (OSError, EOFError):
        pass
    return top


def read_snapshot_sites(path):
    """(header {key: value}, {(thread, call): live bytes}) of the snapshot
    PATH (plain or .gz; docs/formats.md "Allocation accounting"), the live
    bytes of the nodes of one innermost call summed (``threadgraph top
    --depth 1``); None when missing or malformed."""
    f = _open_text(path)
    if f is None:
        return None
    header, threads, nodes = {}, {}, []
    try:
        with f:
            for line in f:
                line = line.rstrip("\n")
                if line.startswith("# thread: "):
                    ix, _, base = line[len("# thread: "):].partition(" ")
                    threads[ix] = base
                elif line.startswith("# "):
                    key, _, value = line[2:].partition(": ")
                    header[key] = value
                elif line:
                    fields = line.split(" ", 7)
                    nodes.append((fields[2], int(fields[3]), fields[7]))
    except (OSError, EOFError, ValueError, IndexError):
        return None
    sites = {}
    for thread, live, call in nodes:
        key = (threads.get(thread, "-"), call)
        sites[key] = sites.get(key, 0) + live
    return header, sites


def latest_snapshot(out_dir, label):
    """The highest-numbered snapshot-<N>-LABEL[.gz] of OUT_DIR, or None."""
    best = None
    try:
        names = os.listdir(out_dir)
    except OSError:
        return None
    for name in names:
        m = re.match(r"snapshot-(\d+)-(.*?)(\.gz)?\Z", name)
        if m and m.group(2) == label and (best is None or int(m.group(1)) > best[0]):
            best = (int(m.group(1)), name)
    return None if best is None else os.path.join(out_dir, best[1])


def clock_time(when, start):
    """WHEN (seconds since the epoch) as local HH:MM:SS.mmm, and its seconds
    since START (the run's start) when known."""
    import time

    text = time.strftime("%H:%M:%S", time.localtime(when)) + (".%03d" % int(when % 1 * 1000))
    if start is not None:
        text += " (+%.3f s)" % (when - start)
    return text


def _print_next_sampled(out_dir, shown, opts):
    """The summary of a sampled run (--sampled): no call is recorded, so there
    are no peaks of calls to list (a .mem line is a reading of the thread's
    memory, not a call's delta).  What the run holds instead: each thread's
    peak (summary.json, exact, as threadgraph summary and threads print it)
    and the time of its highest reading on its .mem curve (the largest of
    the thread's numbers in memg and peaks); the process's peak and the call
    sites live at it (snapshot-<N>-peak, estimates from the samples, as
    threadgraph top prints them with --depth 1)."""
    info = read_json(os.path.join(out_dir, "runinfo.json")) or {}
    start = info.get("start_time") if isinstance(info.get("start_time"), (int, float)) else None
    curves = {}
    for t in info.get("threads") or []:
        if isinstance(t, dict) and t.get("mem") and t.get("name") not in curves:
            curves[str(t.get("name"))] = curve_top(os.path.join(out_dir, str(t["mem"])))
    summary = read_json(os.path.join(out_dir, "summary.json")) or {}
    peaks = {}
    for t in summary.get("threads") or []:
        try:
            name, peak = str(t["name"]), int(t["peak_bytes"])
        except (KeyError, TypeError, ValueError):
            continue
        peaks[name] = max(peak, peaks.get(name, peak))
    for name, top in curves.items():
        if name not in peaks and top is not None:
            peaks[name] = top[0]  # a thread summary.json lacks: its curve
    ranked = sorted(((v, n) for n, v in peaks.items() if v > 0), key=lambda r: (-r[0], r[1]))
    if not ranked:
        say("memory by thread: none (no thread allocated memory while recorded)")
    else:
        say("memory by thread (a sampled run records no calls; each thread's peak, "
            "exact%s):" % ("" if opts.no_timestamps else ", and when its curve was highest"))
        width = max(len(term_safe(n)) for _, n in ranked[:TOP_PEAKS])
        for peak, name in ranked[:TOP_PEAKS]:
            top = curves.get(name)
            if top is None:  # too little allocated for a sample, or no .mem
                when = "no reading on its curve" if name in curves else "no curve"
            elif top[0] == peak:
                when = ("at " + clock_time(top[1], start)) if top[1] is not None else ""
            else:  # the peak fell between two readings
                when = "highest reading %d B%s" % (
                    top[0], (" at " + clock_time(top[1], start)) if top[1] is not None else "")
            err.write(("    %-*s  %d B  %s" % (width, term_safe(name), peak, when)).rstrip()
                             + "\n")
        if len(ranked) > TOP_PEAKS:
            err.write("    ... and %d more thread%s (threadgraph summary)\n"
                             % (len(ranked) - TOP_PEAKS, "" if len(ranked) == TOP_PEAKS + 1 else "s"))
    snap = latest_snapshot(out_dir, "peak")
    got = read_snapshot_sites(snap) if snap else None
    if got:
        header, sites = got
        live = sorted(((v, k) for k, v in sites.items() if v > 0), key=lambda s: (-s[0], s[1]))
        try:
            when = " at " + clock_time(float(header["time"]), start)
        except (KeyError, ValueError):
            when = ""
        say("the process's peak, %s B%s; the sites live there, estimated from the "
            "samples (%s):" % (header.get("process_peak_bytes", "?"), when,
                               display_path(snap)))
        if not live:
            err.write("    none sampled\n")
        width = max([len(term_safe(k[0])) for _, k in live[:TOP_PEAKS]] or [0])
        for value, (thread, call) in live[:TOP_PEAKS]:
            path, sep, rest = call.rpartition(":")
            path, sep2, line = path.rpartition(":")
            site = ("%s:%s %s" % (os.path.basename(path), line, rest)
                    if sep and sep2 else call)
            err.write("    %-*s  %s  ~%d B\n" % (width, term_safe(thread),
                                                       term_safe(site), value))
    no_time = "--no_time " if opts.no_timestamps else ""
    q = shell_quote(shown)
    say("next:")
    err.write("    threadgraph summary %s\n" % q)
    if got:
        err.write("    threadgraph top %s\n" % shell_quote(display_path(snap)))
    # the glob stays outside the quotes, for the shell to expand
    err.write("    threadgraph %smemg %s/*.mem\n" % (no_time, q))
    err.write("    threadgraph %sreport %s -o %s\n" % (
        no_time, q, shell_quote(os.path.join(shown, "report.html"))))
    err.flush()


def aggregate_totals(path):
    """(call paths, calls counted, calls not counted) of the aggregate.tga at
    PATH (docs/formats.md "Aggregate": its n lines and their COUNTs, its t
    lines' NOT_COUNTED), or None when it cannot be read."""
    paths = calls = not_counted = 0
    try:
        with open(path, "rb") as f:
            for line in f:
                if line.startswith(b"n "):
                    paths += 1
                    calls += int(line.split()[4])
                elif line.startswith(b"t "):
                    not_counted += int(line.split()[2])
    except (OSError, ValueError, IndexError):
        return None
    return paths, calls, not_counted


def what_was_written(stats, out_dir, mode, aggregate, stack=False, verb=""):
    """What a run wrote, in its mode's own terms, for the last line of run and
    attach (STATS: ProcessProfile.stats()), VERB after the count: a full run's
    records, a sampled run's readings of the threads' curves (its .mem lines,
    one per sample of a thread; the call sites' samples are in the
    snapshots), an aggregate run's calls and call paths (aggregate.tga, read
    back: it writes no record)."""
    verb = " " + verb if verb else ""
    if aggregate:
        totals = aggregate_totals(os.path.join(out_dir, "aggregate.tga"))
        if totals is None:
            return "no aggregate.tga"
        paths, calls, not_counted = totals
        return "%d call%s in %d call path%s%s (aggregate.tga%s)" % (
            calls, "" if calls == 1 else "s", paths, "" if paths == 1 else "s", verb,
            ", %d more calls not counted: a thread's table full" % not_counted
            if not_counted else "")
    readings = stats.get("records", 0)
    if mode == "sampled":
        return "%d reading%s of the threads' memory curves%s" % (
            readings, "" if readings == 1 else "s", verb)
    return "%d records%s%s" % (readings, verb, " (%d stack records)" % stats["stack_records"]
                               if stack and "stack_records" in stats else "")


def say_losses(stats, max_size, option="--max-size"):
    """The last lines of run and attach when the run lost records or passed
    its size limit (disable() leaves its warnings out for them)."""
    from threadgraph.profiler import _losses, describe_losses, describe_over_limit

    lost = describe_losses(_losses(stats))
    if lost:
        # Last, where it is seen: what the files lack (runinfo.json has it by cause).
        say("records lost: %s (runinfo.json)" % lost)
    over = describe_over_limit(stats, max_size)
    if over:
        say(over.replace("max_size", option))


def print_summary(prof, opts, status):
    stats = prof.stats()
    out_dir = stats.get("output_dir") or prof.output_dir
    shown = display_path(out_dir)
    threads = stats.get("threads", 0)
    say("program exited with status %d; %d thread%s seen, %s to %s/" % (
        status, threads, "" if threads == 1 else "s",
        what_was_written(stats, out_dir, opts.mode, prof.aggregate, opts.stack, "written"),
        shown))
    _print_next(out_dir, shown, opts)
    say_losses(stats, prof.max_size)


LONG_READ_BYTES = 256 << 20  # dumps at least this large: the summary says it reads them


def _dumps_size(out_dir, mem_files):
    """Bytes of what the summary's peaks read: MEM_FILES, else the capture's files."""
    try:
        names = mem_files or [os.path.join(out_dir, n) for n in os.listdir(out_dir)
                              if n.startswith("capture") and n.endswith(".tg")]
    except OSError:
        return 0
    total = 0
    for name in names:
        try:
            total += os.stat(name).st_size
        except OSError:
            pass
    return total


def _print_next(out_dir, shown, opts):
    """The top peaks and the next commands to run on OUT_DIR."""
    if os.path.exists(os.path.join(out_dir, "aggregate.tga")):
        _print_next_aggregate(shown, opts)
        return
    if opts.mode == "sampled":
        _print_next_sampled(out_dir, shown, opts)
        return
    mem_files = thread_mem_files(out_dir)
    binary = capture_path(out_dir) is not None and not mem_files
    size = _dumps_size(out_dir, mem_files)
    if size >= LONG_READ_BYTES:  # about a second a 150 MB: say why nothing shows
        say("reading the run's %d MB for its top peaks..." % (size >> 20))
    peaks, why, kept = top_peaks(out_dir, mem_files, not opts.no_timestamps)
    if peaks is None:
        say("top peaks: unavailable (%s)" % why)
    elif not peaks:
        say("top peaks: none (no recorded call changed memory)")
    else:
        if kept:
            # the older segments were dropped: these are the peaks of the rest
            say("top peaks of the part of the run kept (thread, function, delta):")
            err.write("  (%s)\n" % term_safe(kept))
        else:
            say("top peaks (thread, function, delta):")
        gc_names, gc_runs = read_gc_runs(out_dir)
        marked = 0
        width = max(len(term_safe(p.get("thread", ""))) for p in peaks)
        heading = None
        for p in peaks:
            if int(p.get("delta", 0)) > 0:
                label = "  growth, largest first:\n"
            else:
                label = ("  released, largest first (what a thread freed, "
                         "wherever it was allocated):\n")
            if label != heading:
                err.write(label)
                heading = label
            site = "%s:%s" % (os.path.basename(str(p.get("file", ""))), p.get("line", ""))
            mark = gc_mark(*gc_in_call(gc_names, gc_runs, p))
            marked += bool(mark)
            err.write(
                "    %-*s  %s (%s)  %+d B%s\n"
                % (width, term_safe(p.get("thread", "")), term_safe(p.get("function", "")),
                   term_safe(site), int(p.get("delta", 0)), mark)
            )
        err.write(PEAK_HINT)
        err.write(gc_hint(gc_names, gc_runs, peaks, marked))
    no_time = "--no_time " if opts.no_timestamps else ""
    q = shell_quote(shown)
    say("next:")
    if binary:
        err.write("    threadgraph %smemg %s\n" % (no_time, q))
        err.write("    threadgraph %speaks %s\n" % (no_time, q))
        # a capture holds every call, --stack or not; decorate-stack prints
        # each call's time, which a run without timestamps has not
        if peaks and not opts.no_timestamps:
            # a call that began before a limited capture's kept segments
            # (call_start null) has no whole subtree left to decorate
            whole = [p for p in peaks if p.get("call_start") is not None] or peaks
            top = next((p for p in whole if p.get("function") != "<module>"), whole[0])
            thread = top.get("thread") or os.path.basename(str(top.get("mem_file", "")))
            if thread.endswith(".mem"):
                thread = thread[:-4]
            err.write("    threadgraph %sdecorate-stack %s%s %s %s\n"
                             % (no_time, DECORATE_BOUND, q, shell_quote(thread),
                                shell_quote(top.get("mem_line", ""))))
        err.write("    threadgraph %sexport %s\n" % (no_time, q))
        # report (and folded, flamegraph) read the capture as they read text dumps
        err.write("    threadgraph %sreport %s -o %s\n" % (
            no_time, q, shell_quote(os.path.join(shown, "report.html"))))
        err.flush()
        return
    # the glob stays outside the quotes, for the shell to expand
    err.write("    threadgraph %smemg %s/*.mem\n" % (no_time, q))
    err.write("    threadgraph %speaks %s/*.mem\n" % (no_time, q))
    # the whole run on one page: graph, peaks and their subtrees, flame graphs
    err.write("    threadgraph %sreport %s -o %s\n" % (
        no_time, q, shell_quote(os.path.join(shown, "report.html"))))
    if opts.stack and peaks and not opts.no_timestamps:
        # The whole program's <module> is rarely the call worth decorating first.
        top = next((p for p in peaks if p.get("function") != "<module>"), peaks[0])
        mem = display_path(str(top.get("mem_file", "")))
        if mem.endswith(".mem"):
            err.write(
                "    threadgraph %sdecorate-stack %s%s %s %s\n"
                % (no_time, DECORATE_BOUND, shell_quote(mem), shell_quote(mem[:-4] + ".stack"),
                   shell_quote(top.get("mem_line", "")))
            )
    err.flush()


# --- main -------------------------------------------------------------------------


def check_options(parser, opts):
    """The checks of recording options that argparse cannot make (values, and
    options that exclude each other): a usage error through PARSER.  Shared with
    threadgraph attach, whose recording options are these."""
    if (opts.process_memory_frequency is not None
            and not 0 <= opts.process_memory_frequency <= SAMPLE_EVERY_MAX):
        parser.error("--process-memory-frequency must be from 0 to %d" % SAMPLE_EVERY_MAX)
    if opts.sample_bytes is not None and not 1 <= opts.sample_bytes <= SAMPLE_BYTES_MAX:
        parser.error("--sample-bytes must be from 1 to %d" % SAMPLE_BYTES_MAX)
    if opts.format is None:
        opts.format = "text" if opts.mode == "sampled" else DEFAULTS["format"]
    if opts.mode == "sampled" and opts.format != "text":
        parser.error("--sampled writes text memory curves: it takes --format text only")
    if opts.mode == "sampled" and opts.stack:
        parser.error("--sampled records no calls: --stack needs a full run")
    if opts.snapshot_when:
        from threadgraph import _recorder
        kinds = {}
        for cond in opts.snapshot_when:
            kind = _recorder.snapshot_condition(cond)[0]  # checked by argparse already
            if kind in kinds:
                parser.error("--snapshot-when: two conditions on %s (%r and %r): give one "
                             "per kind" % (kind, kinds[kind], cond))
            kinds[kind] = cond
    if opts.max_size is not None:
        from threadgraph._options import parse_size
        try:
            # 0 is no limit, as ProcessProfile(max_size=0): then no option to check
            opts.max_size = parse_size(opts.max_size)
        except ValueError as exc:
            parser.error("--max-size: %s" % str(exc).replace("max_size must", "must"))
        if opts.max_size is not None and opts.format != "binary":
            parser.error("--max-size bounds the binary capture: it needs --format binary")
    if opts.aggregate and (opts.mode == "sampled" or opts.max_size is not None
                           or opts.format != "binary"):
        parser.error("--aggregate writes aggregate.tga instead of the capture: it takes "
                     "no --sampled, --max-size or --format other than binary")
    if opts.aggregate and opts.stack:
        parser.error("--aggregate rolls the calls up per call path and writes no .stack: "
                     "--stack needs a full run")
    if getattr(opts, "live", False) and opts.format == "text" and opts.mode != "sampled":
        parser.error("--live follows the binary capture (or a sampled run's curves) as "
                     "it is written: a full run needs --format binary or both "
                     "(--format text writes text only)")
    if (opts.compress and not (opts.accounting or opts.sample_bytes or opts.snapshot_when
                               or opts.snapshot_every or opts.mode == "sampled")
            and opts.format == "text"):
        parser.error("--compress compresses the binary capture and the accounting "
                     "outputs: with --format text it needs --accounting")


def main(argv):
    parser = build_parser()
    ours, target, prog_args = split_argv(list(argv), value_options(parser))
    opts = parser.parse_args(ours)
    if target is None and opts.module:
        target = ("module", opts.module)
    if target is None:
        parser.error("give a script to run, or -m module")
    check_options(parser, opts)

    kind, name = target
    try:
        if kind == "script":
            code, module = prepare_script(name, prog_args)
        else:
            code, module = prepare_module(name, prog_args)
    except OSError as exc:
        err.write(
            "%s: can't open file %r: [Errno %d] %s\n"
            % (PROG, os.path.abspath(name), exc.errno or 0, exc.strerror or exc)
        )
        return 2
    except SyntaxError:
        traceback.print_exc(limit=0)
        return 1
    except ImportError as exc:
        err.write("%s: %s\n" % (PROG, exc))
        return 1

    base = os.path.abspath(opts.output or default_base(target))
    from threadgraph import _follow

    _follow.release()  # started by a --follow-exec parent: this run profiles instead
    prof = make_profiler(opts, base)
    prof._finish_note = lambda signum: say_terminated(prof, signum)
    prof._exec_note = lambda path: say_execs(prof, path)
    prof._exit_note = lambda status: say_os_exit(prof, status)
    main_pid = os.getpid()
    if opts.follow_exec:  # before enable(): threadgraph's own work, not recorded
        os.environ.update(_follow.environment(base, _follow.settings_of(opts)))
    quiet = prof._rec.quiet  # a Recorder method: its calls are never recorded
    # threadgraph's own work, not the program's, from before enable(): the end of
    # enable_saying_warnings' catch_warnings() (its __exit__ and _filters_mutated)
    # runs with the profiler on.
    was = quiet(True)
    try:
        enable_saying_warnings(prof)
    except OSError as exc:
        quiet(was)
        err.write("%s: cannot write the profile under %s: %s\n" % (PROG, base, exc))
        return 1
    except RuntimeError as exc:  # no sys.monitoring tool id free (--backend monitoring)
        quiet(was)
        err.write("%s: cannot record: %s\n" % (PROG, exc))
        return 1
    try:
        say("profiling %s; writing to %s/" % (name, display_path(prof.output_dir)))
        viewer = start_live_view(prof.output_dir) if opts.live else None
    finally:
        quiet(was)

    status = 0
    failure = None  # how the program failed (report_failure), printed as python does
    interrupted = False  # ended by an uncaught KeyboardInterrupt
    try:
        try:
            # The program's objects must be reachable as __main__ (pickle,
            # multiprocessing).  Its module code runs as the body of a function made
            # from it: module code has no CO_NEWLOCALS, so its locals are its globals,
            # exactly as under exec().  Unlike exec() (a C call) or runpy (several
            # Python frames), this wraps no recorded frame of ours around the
            # program: the first recorded call is the program's own <module>.
            sys.modules["__main__"] = module
            types.FunctionType(code, module.__dict__)()
        except SystemExit as exc:
            was = quiet(True)
            try:
                status, failure = exit_code_of(exc), exit_message_of(exc)
            finally:
                quiet(was)
        except KeyboardInterrupt:
            was = quiet(True)
            status, failure = 130, ("exception", sys.exc_info())
            quiet(was)
            interrupted = True
        except BaseException:
            was = quiet(True)
            status, failure = 1, ("exception", sys.exc_info())
            quiet(was)
        # The interpreter's end of a program, in python's order and recorded as
        # such (the program's code runs in it: a signal handler, a __del__, its
        # exit functions).  First, at once, the uncaught exception's traceback
        # or sys.exit's message (printing them is ours, not recorded; with
        # --live they wait for the view to close, to be seen).
        if failure is not None and viewer is None:
            was = quiet(True)
            try:
                report_failure(failure)
            finally:
                quiet(was)
            failure = None
        # Then what threading._shutdown does: it calls what was registered with
        # threading._register_atexit (concurrent.futures' executors: they tell
        # their worker threads to end; without it a program that leaves an
        # executor running would be waited for for ever), then joins the
        # threads.  The calls are the program's; taking them off the list (so
        # that the interpreter's own _shutdown finds none left) and listing the
        # threads are ours.
        was = quiet(True)
        try:
            calls = take_threading_atexits()
        finally:
            quiet(was)
        try:
            for call in calls:
                try:
                    call()
                except Exception:
                    was = quiet(True)
                    traceback.print_exc(file=err)
                    quiet(was)
            was = quiet(True)
            try:
                waiting = threads_to_wait_for()
            finally:
                quiet(was)
            for t in waiting:
                t.join()
        except KeyboardInterrupt:
            status, interrupted = 130, True
        # Then the flush of its stdout (the program's own object, maybe).  Its
        # atexit functions are left to the interpreter's end, after the profile
        # has ended: there the interpreter is finalizing (sys.is_finalizing();
        # 3.12+ refuses new threads), which a call made here could not be.
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass  # the program closed or broke its stdout; not ours to report
    finally:
        # Stop recording before printing anything more: that is threadgraph's
        # work, not the program's.  The losses and the over-limit are said by the
        # summary's last lines (in this process).
        quiet(True)  # os.getpid() is ours too
        if os.getpid() == main_pid:
            prof._losses_said_by = main_pid
        prof.disable()
        if viewer is not None:
            end_live_view(viewer)
    if failure is not None:
        report_failure(failure)
    failure = None
    if os.getpid() == main_pid:
        print_summary(prof, opts, status)
        if opts.follow_exec:
            say_followed(base, prof)
    if interrupted:
        die_of_keyboard_interrupt()
    return status


def start_live_view(out_dir):
    """run --live: the C live view on the terminal, the program's stdout and
    stderr (file descriptors 1 and 2) sent to OUT_DIR/output.txt meanwhile, so
    that they do not garble it.  Returns what end_live_view needs."""
    from threadgraph._cli import cli_path

    output = os.path.join(out_dir, "output.txt")
    sys.stdout.flush()
    err.flush()
    saved = (os.dup(1), os.dup(2))
    viewer = subprocess.Popen([cli_path(), "live", out_dir], stdin=0, stdout=saved[0],
                              stderr=saved[1])
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    return viewer, saved, output


def end_live_view(state):
    """After the run: wait for the view to be left (q), put the terminal back on
    file descriptors 1 and 2, say where the program's output went."""
    viewer, saved, output = state
    try:
        sys.stdout.flush()
        err.flush()
    except (OSError, ValueError):
        pass
    while True:
        try:
            viewer.wait()
            break
        except KeyboardInterrupt:
            continue  # Ctrl-C reaches the view too, which then ends
    os.dup2(saved[0], 1)
    os.dup2(saved[1], 2)
    os.close(saved[0])
    os.close(saved[1])
    say("the program's output: %s" % display_path(output))


def say_terminated(prof, signum):
    """The last line when a signal ends the program (no summary then)."""
    import signal

    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = "signal %d" % signum
    say("program terminated by %s; its files are complete in %s/"
        % (name, display_path(prof.output_dir)))


def say_execs(prof, path):
    """The last line when the program replaces itself with os.exec* (no summary
    then: this process image is gone once the exec succeeds)."""
    try:
        name = os.fsdecode(path)
    except TypeError:
        name = "file descriptor %r" % (path,)  # os.execve(fd, ...)
    say("program execs %s; its files are complete in %s/" % (name, display_path(prof.output_dir)))


def say_os_exit(prof, status):
    """The last line when the program ends with os._exit() (no summary then:
    the process ends at once, as it asked)."""
    say("program ended with os._exit(%s); its files are complete in %s/"
        % (status, display_path(prof.output_dir)))


def say_followed(base, prof):
    """One line naming the directories of the Python processes followed."""
    own = os.path.abspath(prof.output_dir)
    started = prof._start_time or 0
    dirs = []
    for entry in sorted(os.listdir(base)):
        path = os.path.join(base, entry)
        try:
            with open(os.path.join(path, "runinfo.json")) as f:
                info = json.load(f)
        except (OSError, ValueError):
            continue
        if os.path.abspath(path) != own and (info.get("start_time") or 0) >= started:
            dirs.append(display_path(path) + "/")
    say("followed %d more Python process%s%s" % (
        len(dirs), "" if len(dirs) == 1 else "es", (": " + " ".join(dirs)) if dirs else ""))


def die_of_keyboard_interrupt():
    """End as python does after an uncaught KeyboardInterrupt: its atexit
    functions run, then it kills itself with SIGINT (status -2, or 130 in a
    shell).  The traceback is printed already: the hook prints nothing more."""
    sys.excepthook = lambda *exc_info: None
    raise KeyboardInterrupt
