"""ProcessProfile: the Python face of the C recorder (threadgraph._recorder).

This module only keeps settings, creates the output directory, writes
runinfo.json and handles forks.  Everything that runs per event is C.  Calls of
this module's functions, and everything they call, are never recorded: the
recorder recognises this file and hides its frames.
"""
from __future__ import annotations

import atexit
import errno
import gc
import importlib
import json
import os
import re
import signal
import _signal as _c_signal  # signal.signal's C half (below, _signal)
# A built-in module, imported with the package so that a tracemalloc.start()
# after enable() finds the recorder's wrapper, which keeps tracemalloc below
# its hooks (src/recorder/tmstop.h).  (Imported inside enable() instead, it
# changed what the program's later calls allocated: a list of CPython's free
# list taken or not, 56 bytes in one call of 300.)
import _tracemalloc  # noqa: F401
import sys
import threading
import time
import warnings
from typing import IO, Any, Callable, Dict, List, Optional, Tuple, Union

from threadgraph import _accounting, _marks, _options, _recorder, _stitch
# The choices, defined once by the recorder (src/recorder/options.h).
from threadgraph._options import BACKENDS, FORMATS, MEMORY_MODES, PROFILE_MODES  # noqa: F401

__all__ = ["ProcessProfile", "DEFAULT_SLEEP_TRIGGERS"]

#: Calls during which a thread is likely to give the CPU away; memory that grows
#: while a thread is inside one of them, less what the thread allocates itself,
#: is not charged to it (memory="process" and memory="rss" only).  (module,
#: attribute path) pairs, a path part ending in "()" being called ("poll().poll":
#: the method of the object select.poll() returns); entries a Python version
#: lacks are skipped.  Only C modules are named: resolving them imports no Python
#: code into the program.  docs/api.md lists what each covers.
DEFAULT_SLEEP_TRIGGERS: Tuple[Tuple[str, str], ...] = (
    ("time", "sleep"),
    # threading.Lock, RLock; Condition, Semaphore, Event, Barrier, queue.Queue,
    # concurrent.futures and Thread.join (3.8-3.12) wait in these.  __enter__ is
    # a `with` statement's entry, called from C (src/recorder/sleepwrap.c).
    ("_thread", "LockType.acquire"),
    ("_thread", "LockType.__enter__"),
    ("_thread", "RLock.acquire"),
    ("_thread", "RLock.__enter__"),
    ("_thread", "_ThreadHandle.join"),        # Thread.join, 3.13
    ("_queue", "SimpleQueue.get"),            # ThreadPoolExecutor's workers
    ("_multiprocessing", "SemLock.acquire"),  # multiprocessing locks, queues
    ("_multiprocessing", "SemLock.__enter__"),
    # I/O waits: select/selectors/asyncio, sockets, pipes, child processes.
    ("select", "select"),
    ("select", "poll().poll"),
    ("select", "epoll.poll"),
    ("_socket", "socket.recv"),
    ("_socket", "socket.recv_into"),
    ("_socket", "socket.recvfrom"),
    ("_socket", "socket.recvfrom_into"),
    ("_socket", "socket.recvmsg"),
    ("_socket", "socket.recvmsg_into"),
    ("_socket", "socket._accept"),            # socket.accept()
    ("_socket", "socket.send"),
    ("_socket", "socket.sendall"),
    ("_socket", "socket.sendto"),
    ("_socket", "socket.sendmsg"),
    ("_socket", "socket.connect"),
    ("_socket", "socket.connect_ex"),
    ("os", "read"),
    ("os", "wait"),
    ("os", "waitpid"),
    ("os", "waitid"),
    ("os", "wait3"),
    ("os", "wait4"),
    ("_signal", "pause"),
    ("_signal", "sigwait"),
    ("_signal", "sigwaitinfo"),
    ("_signal", "sigtimedwait"),
)

_FILE = os.path.abspath(__file__)
if _FILE.endswith((".pyc", ".pyo")):
    _FILE = _FILE[:-1]


def _resolve(module: str, name: str) -> Any:
    obj: Any = importlib.import_module(module)
    for part in name.split("."):
        if part.endswith("()"):
            obj = getattr(obj, part[:-2])()
        else:
            obj = getattr(obj, part)
    return obj


# The causes of loss, in the order they are reported: stats() and runinfo.json
# keys, with what each counts.
LOSS_CAUSES = (
    ("dropped", "records dropped (could not be written)"),
    ("unwound", "calls unwound (their return was never seen)"),
    ("displaced", "takeovers by another profiler (calls meanwhile unrecorded)"),
)


def _losses(stats: Dict[str, Any]) -> Dict[str, int]:
    """The loss counts of STATS (a stats() dict, or runinfo.json) by cause."""
    out = {}
    for key, _ in LOSS_CAUSES:
        try:
            out[key] = max(0, int(stats.get(key) or 0))
        except (TypeError, ValueError):
            out[key] = 0
    return out


def describe_losses(losses: Dict[str, int]) -> str:
    """'N records dropped (...), M calls unwound (...)': the non-zero causes."""
    return ", ".join("%d %s" % (losses[key], what) for key, what in LOSS_CAUSES
                     if losses.get(key))


def describe_over_limit(stats: Dict[str, Any], max_size: Optional[int]) -> str:
    """What to say when the capture passed its max_size (STATS: a stats() dict
    or runinfo.json), or '' when it held: a segment's head, which repeats every
    running thread's open calls, was longer than the limit allows."""
    try:
        over = int(stats.get("capture_over_limit") or 0)
    except (TypeError, ValueError):
        over = 0
    if over <= 0 or not max_size:
        return ""
    return ("capture over its size limit by up to %d bytes (max_size %d): the head of "
            "a segment, which repeats the open calls of every running thread, was "
            "too long for it; give a larger max_size (runinfo.json "
            "\"capture_over_limit\")" % (over, max_size))


def _make_output_dir(base: str, made: Optional[List[str]] = None) -> str:
    """Create <base>/<pid>, or <pid>-2, -3, ... if it exists and is not empty.
    The directories this call creates are appended to MADE, outermost first, for
    _remove_made_dirs()."""
    base = os.path.abspath(base)
    missing = []  # BASE and its parents that makedirs will create
    parent = base
    while not os.path.lexists(parent) and os.path.dirname(parent) != parent:
        missing.append(parent)
        parent = os.path.dirname(parent)
    try:
        os.makedirs(base, mode=0o755, exist_ok=True)
    except FileExistsError as exc:  # a file (or a link to one) is there
        raise NotADirectoryError(errno.ENOTDIR, "cannot create the profile directory: "
                                 "it exists and is not a directory", base) from exc
    except OSError as exc:
        raise OSError(exc.errno, "cannot create the profile directory: %s" % exc.strerror,
                      base) from exc
    if made is not None:
        made.extend(reversed(missing))
    pid = os.getpid()
    n = 1
    while True:
        path = os.path.join(base, str(pid) if n == 1 else "%d-%d" % (pid, n))
        try:
            os.mkdir(path, 0o755)
            if made is not None:
                made.append(path)
            return path
        except FileExistsError:
            if (not os.path.islink(path) and os.path.isdir(path)
                    and not os.listdir(path)):
                return path
        except OSError as exc:
            raise OSError(exc.errno, "cannot create the profile directory: %s"
                          % exc.strerror, path) from exc
        n += 1
        if n > 10000:
            raise OSError(errno.EEXIST, "no free profile directory", path)


def _remove_made_dirs(made: List[str]) -> None:
    """Remove the directories of MADE (from _make_output_dir), innermost first,
    that are still empty: a run that failed to start leaves nothing behind.  A
    directory that was there before, or that got a file, stays."""
    for path in reversed(made):
        try:
            os.rmdir(path)
        except OSError:
            return  # not empty: neither are its parents


def _gc_callback_remove() -> None:
    """Take the recorder's collector callback out of gc.callbacks (every copy)."""
    gc.callbacks[:] = [cb for cb in gc.callbacks if cb is not _recorder.gc_callback]


def _write_gc_runs(outdir: str, families: Any = None) -> None:
    """Write ``gc.txt``: one line per run of the cyclic collector while recording,
    ``NATIVE_ID START STOP COLLECTED`` and, for a thread an aggregate run folded,
    `` FAMILY`` (docs/formats.md; FAMILIES: the recorder's families()); no file
    when it never ran."""
    runs, dropped = _recorder.gc_runs()
    if not runs:
        return
    folded: Dict[int, str] = {}
    if families is not None:
        seqs = sorted({r[4] for r in runs if r[4] >= 0})
        folded = {i: f for i, f in zip(seqs, families(seqs)) if f is not None}
    lines = ["%d %d.%06d %d.%06d %d%s\n" % (tid, start // 10**9, start % 10**9 // 1000,
                                             stop // 10**9, stop % 10**9 // 1000, collected,
                                             " " + folded[seq] if seq in folded else "")
             for tid, start, stop, collected, seq in runs]
    if dropped:
        lines.append("# %d later runs not kept\n" % dropped)
    fd = os.open(os.path.join(outdir, "gc.txt"),
                 os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "w") as f:
        f.write("".join(lines))


class ProcessProfile:
    """Records every thread's calls, returns and memory deltas into files.

    ``ProcessProfile(stream_factory=None, default_log_path=None, profile=None,
    memory="thread")``

    * ``default_log_path``: base directory (default ``"."``); files go to
      ``<default_log_path>/<pid>/`` (see ``output_dir``).
    * ``profile``: ``"python"``, ``"c"`` or ``"both"`` (``None`` means ``"both"``).
    * ``stream_factory(stream_type)``: optional callable returning a writable file
      object for the calling thread, ``stream_type`` being ``"mem"`` or ``"stack"``.
    * ``memory``: ``"thread"`` (exact bytes allocated minus freed by the thread),
      ``"process"`` (all threads' traced bytes, with the sleep correction) or
      ``"rss"`` (resident set size, with the sleep correction, as the original).
    * ``backend``: where the events come from: ``"setprofile"`` (a C profile
      function on every thread, all versions), ``"monitoring"`` (sys.monitoring,
      CPython 3.12 and 3.13: no frame object per event) or ``"auto"`` (the
      default: monitoring where available); ``None`` reads the
      ``THREADGRAPH_BACKEND`` environment variable, else ``"auto"``.
    * ``format``: ``"binary"`` (the default: one compact ``capture.tg``, see
      docs/formats.md; ``threadgraph export`` writes the text files from it),
      ``"text"`` (the original's ``.mem``/``.stack``/``process.mem`` files) or
      ``"both"``; ``None`` means ``"text"`` with a ``stream_factory`` (whose
      streams are text), else ``"binary"``.
    * ``max_size``: a size limit of the binary capture, bytes or a text such as
      ``"10M"`` or ``"2G"`` (K, M, G, T: powers of 1024; at least 256K): the
      capture is written in segments ``capture-000001.tg``, ... and the oldest
      are deleted whole, so that the files stay within it; the commands read the
      segments kept and say which part of the run they cover (docs/formats.md
      "Segments").  None (the default) or 0: one ``capture.tg``, no limit.
    * ``time_resolution``: ``"us"`` (the default: every timed record reads the
      clock, times to the microsecond) or ``"ms"`` (a thread's records within one
      millisecond beat of a background thread share its first reading: each time
      at most about a millisecond before its event, durations below that
      estimates that add up exactly, memory unchanged; on call-heavy code about
      half of what the tutorial's configuration costs over an empty profile
      function is the clock: bench/RESULTS.md; docs/api.md "Timestamps").
    * ``aggregate``: True writes no record per call: each thread's calls rolled
      up per call path (count, total and largest delta, time) and its memory
      curve in buckets, rewritten every second into ``aggregate.tga``, whose
      size does not grow with the run's length (docs/api.md "Aggregate mode").
      Needs ``format="binary"`` (the default), ``mode="full"``, no ``max_size``.

    Settings changed while enabled take effect at the next ``enable()``.  Only one
    ProcessProfile can be enabled in a process at a time.
    """

    def __init__(self, stream_factory: Optional[Callable[[str], IO[Any]]] = None,
                 default_log_path: Optional[str] = None, profile: Optional[str] = None,
                 memory: str = _options.DEFAULTS["memory"], accounting: bool = False,
                 compress: bool = False, backend: Optional[str] = None,
                 native: bool = False,
                 format: Optional[str] = None,
                 sample_bytes: int = 0, mode: str = _options.DEFAULTS["mode"],
                 max_size: Union[None, int, str] = None, aggregate: bool = False,
                 time_resolution: str = _options.DEFAULTS["time_resolution"]) -> None:
        if profile is None:
            profile = _options.DEFAULTS["profile"]
        _options.check("profile", profile)
        _options.check("memory", memory)
        if backend is None:
            backend = os.environ.get("THREADGRAPH_BACKEND") or _options.DEFAULTS["backend"]
        _options.check("backend", backend)
        if stream_factory is not None and not callable(stream_factory):
            raise TypeError("stream_factory must be callable")
        _options.check("mode", mode)
        _options.check("time_resolution", time_resolution)
        if mode == "sampled":
            if stream_factory is not None:
                raise ValueError("mode 'sampled' writes its own files: no stream_factory")
            if format not in (None, "text"):
                raise ValueError("mode 'sampled' writes text memory curves: format must be "
                                 "'text' (the default in this mode), not %r" % (format,))
            format = "text"
        if format is None:
            format = "text" if stream_factory is not None else _options.DEFAULTS["format"]
        _options.check("format", format)
        if format != "text" and stream_factory is not None:
            raise ValueError("stream_factory gives text streams: it needs format='text'")
        #: Output format: "binary" (capture.tg), "text" or "both".
        self.format = format
        self.stream_factory = stream_factory
        self.default_log_path = default_log_path if default_log_path is not None else "."
        self.profile = profile
        self.memory = memory
        #: Event source asked for; ``backend_used`` tells which one ran.
        self.backend = backend
        #: Allocation accounting (summary, histograms, sites, snapshots; see
        #: docs/accounting.md); off by default.  compress gzips its outputs, and
        #: zstd-compresses the binary capture's chunks when the recorder was
        #: built with libzstd (runinfo.json "capture_compression").
        self.accounting = bool(accounting)
        self.compress = bool(compress)
        #: Also count native memory (malloc & co., anonymous mmap) into the
        #: threads' deltas and the accounting (docs/api.md "Native memory").
        self.native = bool(native)
        #: Accounting by sampling: one sample per ``sample_bytes`` bytes allocated
        #: on average, sites get unbiased estimates (docs/accounting.md,
        #: "Sampling"); 0 (default) attributes every allocation.  Turns
        #: accounting on.
        self.sample_bytes = _options.check_range("sample_bytes", sample_bytes or 0, 0,
                                                 _options.SAMPLE_BYTES_MAX)
        #: "full" (every call recorded) or "sampled": no per-call hook, exact
        #: per-thread totals and curves, call sites from stacks sampled every
        #: ``sample_bytes`` bytes (default SAMPLED_DEFAULT_BYTES) on average
        #: (docs/api.md "Sampled mode").  Turns accounting on.
        self.mode = mode
        if mode == "sampled" and self.sample_bytes == 0:
            self.sample_bytes = _options.SAMPLED_DEFAULT_BYTES
        #: Size limit of the binary capture in bytes (``max_size``: an int, or a
        #: text such as "10M" or "2G"), or None: the capture rotates in segments
        #: and the oldest are dropped whole (docs/formats.md "Segments").
        self.max_size = _options.parse_size(max_size)
        if self.max_size is not None and format != "binary":
            raise ValueError("max_size bounds the binary capture: it needs "
                             "format='binary'")
        #: "us": every timed record reads the clock (the default); "ms": a
        #: thread's records within one millisecond beat share its first reading,
        #: a cheaper clock whose times are at most a beat early (docs/api.md
        #: "Timestamps").
        self.time_resolution = time_resolution
        #: Call paths and memory curves rolled up into aggregate.tga instead of
        #: a record per call (docs/api.md "Aggregate mode").
        self.aggregate = bool(aggregate)
        if self.aggregate and (mode != "full" or format != "binary" or self.max_size
                               or stream_factory is not None):
            raise ValueError("aggregate=True writes aggregate.tga instead of the capture: "
                             "it needs format='binary' (the default), mode='full', no "
                             "max_size and no stream_factory")
        self._check_compress()
        self._filter: Optional[str] = None
        self._forked = False
        #: pid of the process whose caller says the losses and the over-limit
        #: itself once disable() returns (threadgraph run's last lines, attach's
        #: reply): disable() leaves its warnings out there, so that they are
        #: said once.  A forked child, another pid, still gets them.
        self._losses_said_by: Optional[int] = None
        # disable()'s write errors ("output stopped"): kept in _output_errors,
        # and said by the caller instead of warned when it is this process
        # (threadgraph attach's control thread: never the program's stderr)
        self._errors_said_by: Optional[int] = None
        self._output_errors: List[str] = []
        self._stack = bool(_options.VALUE_DEFAULTS["track_stack"])
        self._memory = bool(_options.VALUE_DEFAULTS["track_memory"])
        self._sleeps = bool(_options.VALUE_DEFAULTS["track_sleeps"])
        self._timestamps = bool(_options.VALUE_DEFAULTS["timestamps"])
        self._frequence: int = int(_options.VALUE_DEFAULTS["sample_every"])
        self._triggers: List[Tuple[str, str]] = []
        self._rec = _recorder.Recorder()
        self._output_dir: Optional[str] = None
        self._start_time: Optional[float] = None
        self._end_time: Optional[float] = None
        #: snapshot_every() arguments given before enable(), started by it.
        self._schedule: Optional[Dict[str, Any]] = None
        #: snapshot_when() conditions, set at each enable().
        self._when: List[str] = []
        #: pid of the process this profile records in (fork children get theirs).
        self._pid: Optional[int] = None
        #: the parent's pid when the run started (runinfo.json "ppid"): a process
        #: that outlives its parent is re-parented, and os.getppid() at the end
        #: would name init (or a subreaper) instead.
        self._ppid: Optional[int] = None
        #: a forked child of a run with accounting: the pid of the process whose
        #: run does it (its parent's, or the one its parent inherited), which the
        #: child's run does not (runinfo.json "accounting_in"); None otherwise.
        self._accounting_in: Optional[int] = None
        #: Called with the signal number after a terminating signal finished the
        #: run, just before the process dies of it (threadgraph run's last line).
        self._finish_note: Optional[Callable[[int], None]] = None
        #: Called with the program's path after an os.exec* call finished the
        #: run, just before the image is replaced (threadgraph run's last line).
        self._exec_note: Optional[Callable[[Any], None]] = None
        #: Called with the status after an os._exit() call finished the run, just
        #: before the process ends (threadgraph run's last line).
        self._exit_note: Optional[Callable[[Any], None]] = None

    # -- settings (camelCase as the original, snake_case aliases below) --

    def setFilter(self, prefix: Optional[str]) -> None:
        """Record only functions whose file name starts with ``prefix``.

        C functions are recorded when the Python code calling them passes.
        ``None`` or ``""`` removes the filter."""
        if prefix is not None and not isinstance(prefix, str):
            raise TypeError("the filter prefix must be a str or None")
        self._filter = prefix or None

    def enableForkedProfile(self) -> None:
        """After os.fork() the child records into ``<base>/<childpid>/``."""
        self._forked = True

    def disableForkedProfile(self) -> None:
        """After os.fork() the child stops profiling (the default)."""
        self._forked = False

    def trackStack(self, enable: bool = True) -> None:
        """Also write ``<Thread>.stack``, one line per call (off by default)."""
        self._stack = bool(enable)

    def trackMemory(self, enable: bool = True) -> None:
        """Write ``<Thread>.mem``, one line per return (on by default)."""
        self._memory = bool(enable)

    def trackSleeps(self, enable: bool = True) -> None:
        """Context-switch correction for memory="process"/"rss" (on by default).

        Memory that grows while a thread is inside a sleep trigger (time.sleep,
        lock acquires, see addSleepTrigger) is not charged to that thread.
        memory="thread" is exact per thread and needs no correction."""
        self._sleeps = bool(enable)

    def logTimestamps(self, enable: bool = True) -> None:
        """Prefix every line with ``TIME#`` (on by default)."""
        self._timestamps = bool(enable)

    def setProcessMemoryFrequence(self, frequence: Optional[int]) -> None:
        """Write a process.mem RSS sample every ``frequence`` profile events
        (default 1000); ``None`` or 0 turns process.mem off.  ValueError outside
        0 to _options.SAMPLE_EVERY_MAX (a C long)."""
        if frequence is None:
            frequence = 0
        self._frequence = _options.check_range("the process memory frequency", frequence,
                                               0, _options.SAMPLE_EVERY_MAX)

    def _sleep_correction_applies(self) -> bool:
        """Whether this configuration corrects for sleeps: asked for, and a
        memory reading the correction changes (src/recorder/recorder.c
        tg_sleep_correction_on; sampled mode has no calls to correct)."""
        return self._sleeps and self.memory != "thread" and self.mode != "sampled"

    def addSleepTrigger(self, module: str, name: str) -> None:
        """Add ``module``'s attribute ``name`` (dotted path, e.g. ``"Event.wait"``)
        to the sleep triggers.  Builtin functions, methods of C types and Python
        functions are accepted; ImportError or AttributeError if it cannot be
        resolved, TypeError if ``module`` or ``name`` is not a str or names no
        function."""
        if not isinstance(module, str) or not isinstance(name, str):
            raise TypeError("a sleep trigger is a module name and an attribute path, "
                            "both str: not %r, %r" % (module, name))
        obj = _resolve(module, name)
        if not (callable(obj) or hasattr(obj, "__code__")):
            raise TypeError("%s.%s is not a function" % (module, name))
        self._triggers.append((module, name))

    def sleepTriggers(self) -> List[Tuple[str, str]]:
        """The (module, name) pairs in use: the defaults plus the added ones."""
        return list(DEFAULT_SLEEP_TRIGGERS) + list(self._triggers)

    # -- running --

    @property
    def output_dir(self) -> str:
        """Directory of this process's files: the real one once enabled (it may be
        ``<pid>-2`` ...), before that the planned ``<default_log_path>/<pid>``."""
        if self._output_dir is not None:
            return self._output_dir
        return os.path.join(os.path.abspath(self.default_log_path), str(os.getpid()))

    @property
    def backend_used(self) -> Optional[str]:
        """The event source of the last ``enable()``: ``"setprofile"`` or
        ``"monitoring"`` (``None`` before the first)."""
        return self._rec.backend if self._output_dir is not None else None

    @property
    def enabled(self) -> bool:
        return bool(self._rec.active)

    def _trigger_objects(self) -> List[Any]:
        objs: List[Any] = []
        for module, name in DEFAULT_SLEEP_TRIGGERS:
            try:
                objs.append(_resolve(module, name))
            except (ImportError, AttributeError, OSError):
                pass
        for module, name in self._triggers:
            objs.append(_resolve(module, name))
        return objs

    def enable(self) -> None:
        """Start profiling every thread of the process.

        Raises OSError if the directory cannot be created or written, and
        RuntimeError if another ProcessProfile is enabled."""
        if self._rec.active:
            return
        self._check_compress()
        active = _recorder.active()
        if active is not None:
            raise RuntimeError("another ProcessProfile is already enabled in this process; "
                               "only one can record at a time: disable() it first")
        # Resolved only for the sleep correction, their one use: resolving
        # imports C modules (select, _socket...), CPU time at every start.
        triggers = self._trigger_objects() if self._sleep_correction_applies() else []
        made: List[str] = []
        outdir = _make_output_dir(self.default_log_path, made)
        self._start_time = time.time()
        self._ppid = os.getppid()
        self._accounting_in = None  # a run enabled here does its own
        self._end_time = None
        sampled = self.mode == "sampled"
        try:
            self._rec.enable(outdir, profile=self.profile, memory=self.memory,
                             filter=self._filter, track_memory=self._memory,
                             track_stack=self._stack and not sampled,
                             track_sleeps=self._sleeps, timestamps=self._timestamps,
                             sample_every=0 if sampled else self._frequence,
                             stream_factory=self.stream_factory, exclude_file=_FILE,
                             triggers=triggers, accounting=self._accounting_on(),
                             compress=self.compress, backend=self.backend,
                             native=self.native, format=self.format,
                             sample_bytes=self.sample_bytes, mode=self.mode,
                             max_size=self.max_size or 0, aggregate=self.aggregate,
                             time_resolution=self.time_resolution)
        except BaseException:
            _remove_made_dirs(made)  # nothing of a run that did not start stays
            raise
        self._output_dir = outdir
        try:
            self._enable_rest()
        except BaseException:
            # recording stops with what failed: nothing is left running in the
            # program (an attach that fails leaves it as it was)
            self._disable()
            raise

    def _enable_rest(self) -> None:
        """enable()'s work once the recorder records."""
        global _ACTIVE
        _ACTIVE = self
        self._pid = os.getpid()
        _marks.start(self._rec, self._accounting_on())
        _stitch.install()
        _recorder.gc_runs()  # forget runs of an earlier profile
        gc.callbacks.append(_recorder.gc_callback)
        _install_process_hooks()
        with _signals_deferred():
            _exit_paths_install()
            if self._schedule is not None:
                schedule, self._schedule = self._schedule, None
                if self._accounting_on():
                    self._rec.snapshot_every(**schedule)
            if self._when:
                self._rec.snapshot_when(self._when)
            self._write_runinfo()

    def disable(self) -> None:
        """Stop profiling all threads, flush and close every file.

        A stream that failed to write (disk full...) stopped at its first error;
        each one is reported here as a RuntimeWarning naming the file and errno."""
        with _signals_deferred():
            self._disable()

    def _disable(self) -> None:
        global _ACTIVE
        if not self._rec.active:
            return
        errors = self._rec.disable()
        _gc_callback_remove()
        _marks.stop()
        _stitch.uninstall()
        if self._output_dir is not None:
            try:
                _write_gc_runs(self._output_dir, self._rec.families)
            except OSError as exc:
                errors.append("%s: %s" % (os.path.join(self._output_dir, "gc.txt"), exc))
            try:
                _marks.write(self._output_dir, self._rec.threads(), self._rec.families)
            except OSError as exc:
                errors.append("%s: %s" % (os.path.join(self._output_dir, "marks.txt"), exc))
        losses = _losses(self._rec.stats())
        if self._accounting_on() and self._output_dir is not None:
            try:
                figures = self._rec.accounting()
                if figures is not None:
                    _accounting.write_summary(self._output_dir, figures, self.compress)
            except OSError as exc:
                errors.append("%s: %s" % (os.path.join(self._output_dir, "summary.json"), exc))
        was_active = _ACTIVE is self
        if was_active:
            _ACTIVE = None
        self._end_time = time.time()
        try:
            self._write_runinfo()
        except OSError as exc:
            errors.append("%s: %s" % (os.path.join(self.output_dir, "runinfo.json"), exc))
        if was_active:
            _exit_paths_uninstall()  # last: until here a signal waits for us
        self._output_errors = list(errors)
        for message in errors if self._errors_said_by != os.getpid() else ():
            warnings.warn("threadgraph: output stopped: %s" % message, RuntimeWarning,
                          stacklevel=3)
        if self._losses_said_by == os.getpid():
            return  # the caller says them (runinfo.json has them too)
        if any(losses.values()):
            warnings.warn("threadgraph: records lost: %s (runinfo.json)" % describe_losses(losses),
                          RuntimeWarning, stacklevel=3)
        over = self.max_size and describe_over_limit(self._rec.stats(), self.max_size)
        if over:
            warnings.warn("threadgraph: %s" % over, RuntimeWarning, stacklevel=3)

    # -- allocation accounting (accounting=True; docs/accounting.md) --

    def _accounting_on(self) -> bool:
        return self.accounting or self.sample_bytes > 0 or self.mode == "sampled"

    def _check_compress(self) -> None:
        """ValueError for compress=True with nothing to compress: format="text"
        without accounting (as threadgraph run's --compress, _run.py).  At
        construction and at enable() (the attributes may change between)."""
        if self.compress and self.format == "text" and not self._accounting_on():
            raise ValueError("compress=True compresses the binary capture and the "
                             "accounting outputs: with format='text' it needs "
                             "accounting=True (or sample_bytes)")

    def peak_snapshot(self) -> str:
        """Write ``<output_dir>/snapshot-<N>-peak``: live and total bytes by call
        site at the moment the process's live bytes were highest so far (exact;
        ``disable()`` writes one too); returns its path."""
        return self._rec.snapshot_peak()

    def snapshot(self, label: str = "snapshot") -> str:
        """Write a heap snapshot (live and total bytes by call site) now, as
        ``<output_dir>/snapshot-<N>-<label>`` (``.gz`` with compress); returns
        its path."""
        return self._rec.snapshot(str(label))

    def snapshot_every(self, start_after: int = 0, stop_after: Optional[int] = None,
                       every: int = 1, function: Any = None, seconds: bool = False) -> None:
        """Periodic snapshots, as Gaudi's JemallocProfile: at the count
        ``start_after``, then every ``every``, up to ``stop_after`` (None: no
        end).  The count is the number of calls of ``function`` (a function,
        code object or "module:qualname"), or, with ``seconds=True`` and no
        function, seconds since this call."""
        if seconds == (function is not None):
            raise ValueError("give either function or seconds=True")
        code = None if seconds else _accounting.resolve_function(function)
        # The recorder counts seconds in milliseconds: every=0.2 is 200.
        count = _seconds_to_ms if seconds else int
        schedule = dict(start_after=count(start_after),
                        stop_after=-1 if stop_after is None else count(stop_after),
                        every=count(every), code=code)
        if self._rec.active:
            self._rec.snapshot_every(**schedule)
            return
        # Before enable(): checked now, started by enable() (seconds count from it).
        if not self._accounting_on():
            raise RuntimeError("allocation accounting is not on: "
                               "use ProcessProfile(accounting=True)")
        if (schedule["every"] <= 0 or schedule["start_after"] < 0
                or (schedule["stop_after"] >= 0
                    and schedule["stop_after"] < schedule["start_after"])):
            raise ValueError("need every > 0, start_after >= 0 and "
                             "stop_after >= start_after")
        self._schedule = schedule

    def snapshot_when(self, *conditions: str) -> None:
        """Threshold snapshots, as jemalloc's gdump: when a condition is first
        met a heap snapshot by call site of every thread is written, and again
        at each new high at least a quarter (and at least 1 MiB) above the
        last one's figure.  Conditions: ``"thread>500M"`` (a thread's memory),
        ``"live>1G"`` (the process's live bytes), ``"rss>2G"`` (its resident
        set size); sizes in bytes or with K, M, G, T (powers of 1024).  Replaces
        the previous conditions (none: no threshold snapshots); kept for the
        next enable().  Needs accounting (docs/accounting.md "Threshold
        snapshots")."""
        kinds = set()
        for cond in conditions:
            kind, _ = _recorder.snapshot_condition(cond)  # ValueError naming the syntax
            if kind in kinds:
                raise ValueError("two snapshot conditions on %s: give one" % kind)
            kinds.add(kind)
        if not self._accounting_on():
            raise RuntimeError("allocation accounting is not on: "
                               "use ProcessProfile(accounting=True)")
        if self._rec.active:
            self._rec.snapshot_when(list(conditions))
        self._when = list(conditions)

    def window(self, name: str) -> "_AccountingWindow":
        """``with profile.window("event loop"):`` records the accounting figures
        of what happens inside (summary.json "windows"; ``.figures`` after)."""
        return _AccountingWindow(self._rec, str(name))

    def stats(self) -> Dict[str, Any]:
        """{"threads", "records", "stack_records", "dropped", "unwound", "displaced",
        "process_samples", "output_dir", "clock", "capture", "capture_over_limit",
        "monitoring_tool", "monitoring_ids_taken"} of the current or last run ("records" counts
        returns, in sampled mode the readings of the threads' curves, and is 0
        with aggregate=True, which writes no record; the losses: "dropped" the
        records that could not be written, "unwound" the calls whose return was
        never seen, "displaced" the times another tool's profile function took
        a thread, or the program took the last sys.monitoring tool id the
        recorder may use; "process_samples" the
        process.mem samples taken; "capture" is "capture.tg",
        "capture-*.tg" with max_size, or None; "capture_over_limit" the most
        bytes the segments passed max_size by, a segment's head alone being
        longer than the limit allows (0: the limit held);
        "monitoring_tool" the sys.monitoring tool id used, or None)."""
        s = self._rec.stats()
        s["output_dir"] = self._output_dir
        return s

    def threads(self) -> List[Dict[str, Any]]:
        """The runinfo.json thread table of the current or last run (with
        aggregate=True, less the ended threads folded: folded_threads())."""
        return [{"name": t["name"], "native_id": t["native_id"], "ident": t["ident"],
                 "mem": t["mem"], "stack": t["stack"]} for t in self._rec.threads()]

    def folded_threads(self) -> List[Dict[str, Any]]:
        """runinfo.json's "threads_folded" of the current or last run: with
        aggregate=True, [{"base": family, "threads": n}] of the ended threads
        folded into one entry by name family (docs/formats.md "runinfo.json")."""
        return [{"base": base, "threads": n} for base, n in self._rec.folded_threads()]

    def _write_runinfo(self) -> None:
        if self._output_dir is None:
            return
        stats = self._rec.stats()
        info = {
            "format": 1,
            "pid": os.getpid(),
            "ppid": self._ppid if self._ppid is not None else os.getppid(),
            "executable": sys.executable,
            "argv": list(sys.argv),
            "python_version": "%d.%d.%d" % sys.version_info[:3],
            "start_time": self._start_time,
            "end_time": self._end_time,
            "mode": self.mode,
            "aggregate": self.aggregate,
            "accounting": self._accounting_on() and self._accounting_in is None,
            "accounting_in": self._accounting_in,
            "memory_mode": self.memory,
            "native": self.native,
            "backend": self._rec.backend,
            "profile": self.profile,
            "timestamps": self._timestamps,
            "clock": stats["clock"],
            "time_resolution": self.time_resolution,
            "stack": self._stack,
            "sleep_correction": self._sleep_correction_applies(),
            "capture": stats["capture"],
            "capture_over_limit": stats["capture_over_limit"],
            "capture_compression": ("zstd" if self.compress and self.format != "text"
                                    and self._rec.can_compress() else None),
            "dropped": stats["dropped"],
            "unwound": stats["unwound"],
            "displaced": stats["displaced"],
            "monitoring_tool": stats["monitoring_tool"],
            "threads": self.threads(),
        }
        if self.aggregate:
            info["threads_folded"] = self.folded_threads()
        # Encoded here and written through a binary file: a text file would look
        # up its codec's "incrementalencoder" under a name str made afresh
        # (PyObject_GetAttrString), which CPython's type attribute cache then
        # keeps alive.  Written while the hooks count (enable, a forked child),
        # that 59-byte str would be freed when a later lookup takes its cache
        # slot, a slot picked by the str's address: in whatever call of the
        # program happens to collide, an exact delta that varies run to run.
        # json's C encoder, piece by piece (indent= takes the pure-Python one)
        text = _accounting.summary_json(info).rstrip("\n")
        # A name that is not UTF-8 (argv, the directory) holds surrogate escapes
        # (os.fsdecode): JSON's \udcXX for those keeps the file UTF-8, and
        # json.load() then gives back the same str.  Only then: compiling the
        # pattern at import cost every profiled program ~2.5 M instructions.
        try:
            data = (text + "\n").encode("utf-8")
        except UnicodeEncodeError:
            text = re.sub("[\ud800-\udfff]", lambda m: "\\u%04x" % ord(m.group()), text)
            data = (text + "\n").encode("utf-8")
        path = os.path.join(self._output_dir, "runinfo.json")
        tmp = path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                     | getattr(os, "O_CLOEXEC", 0), 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)

    def _after_fork_child(self) -> None:
        with _signals_deferred():
            self._after_fork_child_deferred()

    def _after_fork_child_deferred(self) -> None:
        self._finish_note = None  # the parent's to print, not each child's
        self._exec_note = None
        self._exit_note = None
        _marks.clear()  # the parent's threads' notes
        _recorder.gc_runs()  # the parent's collections: its gc.txt has them
        if not self._forked:
            _marks.stop()
            _gc_callback_remove()  # nothing records here: no runs to keep
            # the child records nothing and its disable() returns at once (the
            # recorder is off): the pools' and asyncio's wrappers and the import
            # finder go now, or they would stay for the child's whole life
            _stitch.uninstall()
            self._rec.fork_child(None)
            return
        try:
            outdir = _make_output_dir(self.default_log_path)
        except OSError as exc:
            self._rec.fork_child(None)
            warnings.warn("threadgraph: forked child not profiled: %s" % exc, RuntimeWarning)
            return
        self._output_dir = outdir
        self._start_time = time.time()
        if self._accounting_on() and self._accounting_in is None:
            # accounting stays with the process that enabled it (docs/api.md
            # "Forks"): a grandchild's is still that process's
            self._accounting_in = self._pid
        self._pid = os.getpid()
        self._ppid = os.getppid()
        self._rec.fork_child(outdir)
        self._write_runinfo()
        # A multiprocessing child ends with os._exit(), which skips atexit: have
        # it disable() (and so flush) through multiprocessing's exit hooks.  The
        # child clears its finalizers after this hook, then runs its after-fork
        # callbacks: register from one of those.
        util = sys.modules.get("multiprocessing.util")
        if util is not None:
            util.register_after_fork(self, _mp_child_started)

    def __enter__(self) -> "ProcessProfile":
        self.enable()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.disable()

    # snake_case aliases
    set_filter = setFilter
    enable_forked_profile = enableForkedProfile
    disable_forked_profile = disableForkedProfile
    track_stack = trackStack
    track_memory = trackMemory
    track_sleeps = trackSleeps
    log_timestamps = logTimestamps
    set_process_memory_frequence = setProcessMemoryFrequence
    set_process_memory_frequency = setProcessMemoryFrequence
    add_sleep_trigger = addSleepTrigger
    sleep_triggers = sleepTriggers


class _AccountingWindow:
    """The context manager of ProcessProfile.window (defined here so that its
    frames are hidden like the rest of this file's); ``.figures`` after exit."""

    def __init__(self, rec: Any, name: str) -> None:
        self._rec = rec
        self.name = name
        self._id: Optional[int] = None
        self.figures: Optional[Dict[str, Any]] = None

    def __enter__(self) -> "_AccountingWindow":
        self._id = self._rec.window_open(self.name)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._id is not None and self._rec.active:
            self.figures = self._rec.window_close(self._id)
        self._id = None


# The enabled ProcessProfile (at most one per process); process-wide hooks
# (atexit, fork) are registered once and act on it.
_ACTIVE: Optional[ProcessProfile] = None
_HOOKS_INSTALLED = False


def _atexit() -> None:
    if _ACTIVE is not None:
        _ACTIVE.disable()


def _before_fork() -> None:
    if _ACTIVE is not None:
        _ACTIVE._rec.before_fork()


def _after_fork_parent() -> None:
    if _ACTIVE is not None:
        _ACTIVE._rec.after_fork_parent()


def _after_fork_child() -> None:
    global _ACTIVE, _DEFER_DEPTH
    # Only the forking thread exists here: a section another thread had open in
    # the parent never ends in the child.
    _DEFER_DEPTH = 0
    del _DEFERRED[:]
    if _ACTIVE is not None:
        profile = _ACTIVE
        profile._after_fork_child()
        if not profile._rec.active:
            _ACTIVE = None
            # A child that does not profile has no flusher: its signals take
            # the default action again, as without the profiler.
            _exit_paths_uninstall()


def _mp_child_started(profile: ProcessProfile) -> None:
    if profile._rec.active:
        util = sys.modules["multiprocessing.util"]
        util.Finalize(None, profile.disable, exitpriority=-100)


def _install_process_hooks() -> None:
    global _HOOKS_INSTALLED
    if _HOOKS_INSTALLED:
        return
    _HOOKS_INSTALLED = True
    atexit.register(_atexit)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_parent,
                            after_in_child=_after_fork_child)


def _seconds_to_ms(seconds: Any) -> int:
    """snapshot_every(seconds=True) counts: seconds (floats welcome) -> ms."""
    return int(round(float(seconds) * 1000.0))


# --- the ways a process ends without atexit (docs/api.md "Signals and os._exit") --
#
# SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM and SIGPROF
# (_FINISH_SIGNALS) whose action is the default (termination) get a
# Python-level handler while a profile is enabled: Python runs it in the main
# thread between bytecodes, where disable() is safe (a C signal handler could
# not flush: the writers' locks, the GIL and Python's allocator are not
# async-signal-safe).  Its C side notes each delivery, and the flusher sends
# the signal again to the main thread if the handler has not started within a
# flush period (a wait the signal did not interrupt: src/recorder/sigkick.h).  It finishes the run (records, summary, final snapshot,
# runinfo.json), puts the default action back and sends the signal again, so
# the process ends with the same status as without the profiler.  A program's
# own handler is left alone (installed before or after enable()): the process
# goes on or ends as it decides, and os._exit() — the one exit that skips
# atexit — is wrapped to disable() first, as are the os.exec* functions, which
# replace the process image without atexit (_os_exec).  signal.signal() is
# wrapped too: a handler put back later (asyncio.run() restoring SIGINT's default_int_handler,
# signal.signal(s, old)) comes with a new C handler of Python's, which it wraps
# again for the guard, and SIG_DFL put back (asyncio's loop.close() after
# add_signal_handler()) is threadgraph's handler again.  The wrapper replaces
# the C function _signal.signal, which Lib/signal.py's signal() calls (3.8 to
# 3.13), not signal.signal itself: a name bound to signal.signal before
# enable() (`from signal import signal`) calls it too.

# Every signal whose default action ends the process without a core dump and
# that a program or its environment sends (kill, a shell, alarm(), setitimer()):
# below 32 all (sigkick.c wraps only those).  Not handled: docs/api.md, "Signals
# and os._exit".
_FINISH_SIGNALS = tuple(getattr(signal, name) for name in (
    "SIGTERM", "SIGINT", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGPROF")
    if hasattr(signal, name))
_REAL_OS_EXIT = os._exit
# The os.exec* functions every other one calls (execl -> execv, execle ->
# execve, execlp -> execvp, execlpe -> execvpe, all looked up in os's globals),
# to be wrapped by _os_exec; execvp and execvpe so that their PATH search (one
# execv/execve per directory, all but the last failing) ends the run once, and
# says a failure only if the whole call fails.
_REAL_OS_EXECS = {name: getattr(os, name) for name in ("execv", "execve", "execvp", "execvpe")
                  if hasattr(os, name)}
_REAL_C_SIGNAL = _c_signal.signal
# Signals whose handler is ours (installed by enable() over the default action).
_OUR_SIGNALS: List[int] = []
# Nesting depth of sections where a signal must wait (enable, disable, fork
# setup), and the signals that arrived meanwhile; main thread (signal handlers
# run only there), so no lock.
_DEFER_DEPTH = 0
_DEFERRED: List[int] = []


class _signals_deferred:
    """Context manager: a finishing signal that arrives inside waits for its
    end, then is sent again (so disable() is never cut short by one)."""

    def __enter__(self) -> None:
        global _DEFER_DEPTH
        _DEFER_DEPTH += 1

    def __exit__(self, *exc_info: Any) -> None:
        global _DEFER_DEPTH
        _DEFER_DEPTH -= 1
        if _DEFER_DEPTH == 0 and _DEFERRED:
            pending = list(_DEFERRED)
            del _DEFERRED[:]
            for signum in pending:
                os.kill(os.getpid(), signum)


def _real_signal(signum: int, handler: Any) -> Any:
    """signal.signal without threadgraph's wrapper: as Lib/signal.py's, plain
    ints to the C function (3.8's compares SIG_DFL and SIG_IGN by identity)."""
    return _REAL_C_SIGNAL(int(signum), int(handler) if isinstance(handler, int) else handler)


def _on_finish_signal(signum: int, frame: Any) -> None:
    """Handler of a finishing signal whose action was the default: write
    everything, then die of the signal as the default action would."""
    _recorder.finish_signal_started(signum)
    if _DEFER_DEPTH > 0:
        _DEFERRED.append(signum)
        return
    profile = _ACTIVE
    if profile is not None and profile._pid == os.getpid():
        try:
            profile.disable()
            if profile._finish_note is not None:
                profile._finish_note(signum)
        except BaseException:  # the process is ending: the signal matters more
            pass
    try:
        _real_signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
    except (ValueError, OSError, AttributeError):
        pass
    os.kill(os.getpid(), signum)
    # Delivered before kill() returns; if the program blocks it somehow, end as
    # the shell would report a death by that signal.
    _REAL_OS_EXIT(128 + signum)


def _os_exit(status: int) -> None:
    """os._exit while a profile is enabled: disable() first (a multiprocessing
    worker, a forked child, a signal handler ending the process)."""
    profile = _ACTIVE
    if profile is not None and profile._pid == os.getpid():
        try:
            profile.disable()
            if profile._exit_note is not None:
                profile._exit_note(status)
        except BaseException:
            pass
    _REAL_OS_EXIT(status)


def _os_exec(name: str) -> Callable[..., Any]:
    """The wrapper of os.<NAME> (an exec function) while a profile is enabled:
    disable() first, since the new image runs no atexit, then the real call.
    If that fails (OSError) the program gets the exception exactly as without
    the profiler and goes on unprofiled: the run stays ended, and one line on
    stderr says so (not a warning, which -W error would turn into an exception
    in place of the program's)."""
    real = _REAL_OS_EXECS[name]

    def os_exec(*args: Any, **kwargs: Any) -> Any:
        profile = _ACTIVE
        if profile is None or profile._pid != os.getpid():
            return real(*args, **kwargs)
        try:
            profile.disable()  # unwraps every exec function: a nested call is real
            if profile._exec_note is not None:
                profile._exec_note(args[0] if args else kwargs.get("file"))
        except BaseException:  # the program's exec matters more
            pass
        try:
            return real(*args, **kwargs)
        except OSError as exc:
            try:
                sys.stderr.write("threadgraph: os.%s failed (%s): profiling stopped at it; "
                                 "the run in %s/ ended there\n"
                                 % (name, exc, profile.output_dir))
                sys.stderr.flush()
            except Exception:  # no stderr (None, closed): the exception still goes
                pass
            raise

    os_exec.__name__ = os_exec.__qualname__ = name
    os_exec.__doc__ = real.__doc__
    return os_exec


_OS_EXEC_WRAPPERS = {name: _os_exec(name) for name in _REAL_OS_EXECS}
# Their code (one for all), which threadgraph run's report of an uncaught
# exception leaves out.
OS_EXEC_CODE = _OS_EXEC_WRAPPERS["execv"].__code__


def _signal(signalnum: Any, handler: Any) -> Any:
    """_signal.signal, so signal.signal, while a profile is enabled: the real
    one (Lib/signal.py's signal() gives it ints, and makes enums of what it
    returns), then the guard (sigkick.h) put back on a finishing signal whose
    handler is Python's KeyboardInterrupt or threadgraph's again.  Python
    installs its C handler anew on every call, which drops the wrapper:
    asyncio.run() (3.11+) sets its own SIGINT handler and restores
    default_int_handler on return, and a program may restore threadgraph's
    handler with signal.signal(s, old).
    SIG_DFL for a finishing signal gets threadgraph's handler, as enable()
    gives it (asyncio's loop.close() and remove_signal_handler() put SIG_DFL
    back, after loop.add_signal_handler())."""
    active = _c_signal.signal is _signal and signalnum in _FINISH_SIGNALS
    if active and handler == signal.SIG_DFL:
        handler = _on_finish_signal
    previous = _REAL_C_SIGNAL(signalnum, handler)
    # The real call succeeded, so this is the main thread.
    if active:
        _guard_signal(int(signalnum))
    return previous


def _guard_signal(signum: int) -> bool:
    """Wrap SIGNUM's C handler if its Python handler is threadgraph's (resent
    until it starts) or Python's KeyboardInterrupt (interrupt-only); main
    thread.  Returns whether it was wrapped."""
    current = signal.getsignal(signum)
    if current is signal.default_int_handler:
        _recorder.finish_signal_interrupt(signum)
        return True
    if current is _on_finish_signal:
        _recorder.finish_signal_watch(signum)
        if signum not in _OUR_SIGNALS:
            _OUR_SIGNALS.append(signum)
        return True
    return False


def _is_main_thread() -> bool:
    return threading.get_ident() == threading.main_thread().ident


def _exit_paths_install() -> None:
    """Wrap os._exit and the os.exec* functions; handle the finishing signals
    whose action is the default.  Signal handlers can only be set from the main
    thread: elsewhere, signals keep their default action."""
    os._exit = _os_exit
    for name, wrapper in _OS_EXEC_WRAPPERS.items():
        setattr(os, name, wrapper)
    if not _is_main_thread():
        return
    _c_signal.signal = _signal
    for signum in _FINISH_SIGNALS:
        try:
            if signum in _OUR_SIGNALS:
                if signal.getsignal(signum) is not _on_finish_signal:
                    _OUR_SIGNALS.remove(signum)  # the program's own replaced it
                    continue
                # Still ours (a disable() outside the main thread may have put
                # the default action back at the C level only): re-armed.
            elif signal.getsignal(signum) is signal.default_int_handler:
                # Python's KeyboardInterrupt, left as it is; its wait guarded
                # with interrupt-only sends (sigkick.h).
                _recorder.finish_signal_interrupt(signum)
                continue
            elif signal.getsignal(signum) != signal.SIG_DFL:
                continue  # the program's handler, SIG_IGN, or a C handler
            _real_signal(signum, _on_finish_signal)
        except (ValueError, OSError):
            continue
        # Python runs the handler between bytecodes of the main thread: a
        # signal that interrupts no wait (it came just before a blocking
        # lock wait, or to another thread) is sent to it again (sigkick.h).
        _recorder.finish_signal_watch(signum)
        if signum not in _OUR_SIGNALS:
            _OUR_SIGNALS.append(signum)


def _exit_paths_uninstall() -> None:
    """Undo _exit_paths_install where it is still in place.  Outside the main
    thread Python cannot change handlers: the default action is put back at
    the C level (the Python-level handler stays registered, and the next
    enable() re-arms it), so that no signal waits on a handler with no
    flusher left to send it again (sigkick.h)."""
    if os._exit is _os_exit:
        os._exit = _REAL_OS_EXIT
    for name, wrapper in _OS_EXEC_WRAPPERS.items():
        if getattr(os, name) is wrapper:
            setattr(os, name, _REAL_OS_EXECS[name])
    if _c_signal.signal is _signal:
        _c_signal.signal = _REAL_C_SIGNAL
    if not _is_main_thread():
        for signum in _OUR_SIGNALS:
            _recorder.finish_signal_default(signum)
        return
    for signum in list(_OUR_SIGNALS):
        try:
            if signal.getsignal(signum) is _on_finish_signal:
                _real_signal(signum, signal.SIG_DFL)
        except (ValueError, OSError):
            continue
        _OUR_SIGNALS.remove(signum)
