"""ProcessProfile: the Python face of the C recorder (threadgraph._recorder).

This module only keeps settings, creates the output directory, writes
runinfo.json and handles forks.  Everything that runs per event is C.  Calls of
this module's functions, and everything they call, are never recorded: the
recorder recognises this file and hides its frames.
"""
from __future__ import annotations

import atexit
import errno
import importlib
import json
import os
import sys
import threading
import time
import warnings
from typing import IO, Any, Callable, Dict, List, Optional, Tuple

from threadgraph import _accounting, _recorder

__all__ = ["ProcessProfile", "DEFAULT_SLEEP_TRIGGERS"]

PROFILE_MODES = ("python", "c", "both")
MEMORY_MODES = ("thread", "process", "rss")
BACKENDS = ("auto", "setprofile", "monitoring")

#: Calls during which a thread is likely to give the CPU away; memory that grows
#: while a thread is inside one of them is not charged to it (memory="process" and
#: memory="rss" only).  (module, attribute path) pairs; entries a Python version
#: lacks are skipped.
DEFAULT_SLEEP_TRIGGERS: Tuple[Tuple[str, str], ...] = (
    ("time", "sleep"),
    ("_thread", "LockType.acquire"),
    ("_thread", "LockType.__enter__"),
    ("_thread", "RLock.acquire"),
    ("_thread", "RLock.__enter__"),
)

_FILE = os.path.abspath(__file__)
if _FILE.endswith((".pyc", ".pyo")):
    _FILE = _FILE[:-1]


def _resolve(module: str, name: str) -> Any:
    obj: Any = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _make_output_dir(base: str) -> str:
    """Create <base>/<pid>, or <pid>-2, -3, ... if it exists and is not empty."""
    base = os.path.abspath(base)
    try:
        os.makedirs(base, mode=0o755, exist_ok=True)
    except OSError as exc:
        raise OSError(exc.errno, "cannot create the profile directory: %s" % exc.strerror,
                      base) from exc
    pid = os.getpid()
    n = 1
    while True:
        path = os.path.join(base, str(pid) if n == 1 else "%d-%d" % (pid, n))
        try:
            os.mkdir(path, 0o755)
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

    Settings changed while enabled take effect at the next ``enable()``.  Only one
    ProcessProfile can be enabled in a process at a time.
    """

    def __init__(self, stream_factory: Optional[Callable[[str], IO[Any]]] = None,
                 default_log_path: Optional[str] = None, profile: Optional[str] = None,
                 memory: str = "thread", accounting: bool = False,
                 compress: bool = False, backend: Optional[str] = None,
                 sample_bytes: int = 0) -> None:
        if profile is None:
            profile = "both"
        if profile not in PROFILE_MODES:
            raise ValueError("profile must be 'python', 'c' or 'both', not %r" % (profile,))
        if memory not in MEMORY_MODES:
            raise ValueError("memory must be 'thread', 'process' or 'rss', not %r" % (memory,))
        if backend is None:
            backend = os.environ.get("THREADGRAPH_BACKEND") or "auto"
        if backend not in BACKENDS:
            raise ValueError("backend must be 'auto', 'setprofile' or 'monitoring', not %r"
                             % (backend,))
        if stream_factory is not None and not callable(stream_factory):
            raise TypeError("stream_factory must be callable")
        self.stream_factory = stream_factory
        self.default_log_path = default_log_path if default_log_path is not None else "."
        self.profile = profile
        self.memory = memory
        #: Event source asked for; ``backend_used`` tells which one ran.
        self.backend = backend
        #: Allocation accounting (summary, histograms, sites, snapshots; see
        #: docs/accounting.md); off by default.  compress gzips its outputs.
        self.accounting = bool(accounting)
        self.compress = bool(compress)
        #: Accounting by sampling: one sample per ``sample_bytes`` bytes allocated
        #: on average, sites get unbiased estimates (docs/accounting.md,
        #: "Sampling"); 0 (default) attributes every allocation.  Turns
        #: accounting on.
        self.sample_bytes = int(sample_bytes or 0)
        if self.sample_bytes < 0:
            raise ValueError("sample_bytes must be 0 or more, not %r" % (sample_bytes,))
        self._filter: Optional[str] = None
        self._forked = False
        self._stack = False
        self._memory = True
        self._sleeps = True
        self._timestamps = True
        self._frequence: int = 1000
        self._triggers: List[Tuple[str, str]] = []
        self._rec = _recorder.Recorder()
        self._output_dir: Optional[str] = None
        self._start_time: Optional[float] = None
        self._end_time: Optional[float] = None

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
        (default 1000); ``None`` or 0 turns process.mem off."""
        if frequence is None:
            frequence = 0
        frequence = int(frequence)
        if frequence < 0:
            raise ValueError("the frequence must be >= 0")
        self._frequence = frequence

    def addSleepTrigger(self, module: str, name: str) -> None:
        """Add ``module``'s attribute ``name`` (dotted path, e.g. ``"Event.wait"``)
        to the sleep triggers.  Builtin functions, methods of C types and Python
        functions are accepted; raises if it cannot be resolved."""
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
            except (ImportError, AttributeError):
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
        active = _recorder.active()
        if active is not None:
            raise RuntimeError("another ProcessProfile is already enabled in this process; "
                               "only one can record at a time: disable() it first")
        triggers = self._trigger_objects()
        outdir = _make_output_dir(self.default_log_path)
        self._output_dir = outdir
        self._start_time = time.time()
        self._end_time = None
        self._rec.enable(outdir, profile=self.profile, memory=self.memory,
                         filter=self._filter, track_memory=self._memory,
                         track_stack=self._stack, track_sleeps=self._sleeps,
                         timestamps=self._timestamps, sample_every=self._frequence,
                         stream_factory=self.stream_factory, exclude_file=_FILE,
                         triggers=triggers, accounting=self._accounting_on(),
                         compress=self.compress, backend=self.backend,
                         sample_bytes=self.sample_bytes)
        global _ACTIVE
        _ACTIVE = self
        _install_process_hooks()
        self._write_runinfo()

    def disable(self) -> None:
        """Stop profiling all threads, flush and close every file.

        A stream that failed to write (disk full...) stopped at its first error;
        each one is reported here as a RuntimeWarning naming the file and errno."""
        global _ACTIVE
        if not self._rec.active:
            return
        errors = self._rec.disable()
        if self._accounting_on() and self._output_dir is not None:
            try:
                figures = self._rec.accounting()
                if figures is not None:
                    _accounting.write_summary(self._output_dir, figures, self.compress)
            except OSError as exc:
                errors.append("%s: %s" % (os.path.join(self._output_dir, "summary.json"), exc))
        if _ACTIVE is self:
            _ACTIVE = None
        self._end_time = time.time()
        try:
            self._write_runinfo()
        except OSError as exc:
            errors.append("%s: %s" % (os.path.join(self.output_dir, "runinfo.json"), exc))
        for message in errors:
            warnings.warn("threadgraph: output stopped: %s" % message, RuntimeWarning,
                          stacklevel=2)

    # -- allocation accounting (accounting=True; docs/accounting.md) --

    def _accounting_on(self) -> bool:
        return self.accounting or self.sample_bytes > 0

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
        self._rec.snapshot_every(start_after=int(start_after),
                                 stop_after=-1 if stop_after is None else int(stop_after),
                                 every=int(every), code=code)

    def window(self, name: str) -> "_AccountingWindow":
        """``with profile.window("event loop"):`` records the accounting figures
        of what happens inside (summary.json "windows"; ``.figures`` after)."""
        return _AccountingWindow(self._rec, str(name))

    def stats(self) -> Dict[str, Any]:
        """{"threads", "records", "stack_records", "output_dir", "clock"} of the
        current or last run."""
        s = self._rec.stats()
        s["output_dir"] = self._output_dir
        return s

    def threads(self) -> List[Dict[str, Any]]:
        """The runinfo.json thread table of the current or last run."""
        return [{"name": t["name"], "native_id": t["native_id"], "ident": t["ident"],
                 "mem": t["mem"], "stack": t["stack"]} for t in self._rec.threads()]

    def _write_runinfo(self) -> None:
        if self._output_dir is None:
            return
        info = {
            "format": 1,
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "executable": sys.executable,
            "argv": list(sys.argv),
            "python_version": "%d.%d.%d" % sys.version_info[:3],
            "start_time": self._start_time,
            "end_time": self._end_time,
            "memory_mode": self.memory,
            "backend": self._rec.backend,
            "profile": self.profile,
            "timestamps": self._timestamps,
            "clock": self._rec.stats()["clock"],
            "stack": self._stack,
            "sleep_correction": self._sleeps,
            "threads": self.threads(),
        }
        path = os.path.join(self._output_dir, "runinfo.json")
        tmp = path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                     | getattr(os, "O_CLOEXEC", 0), 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(info, f, indent=2, ensure_ascii=False)
            f.write("\n")
        os.replace(tmp, path)

    def _after_fork_child(self) -> None:
        if not self._forked:
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
    global _ACTIVE
    if _ACTIVE is not None:
        profile = _ACTIVE
        profile._after_fork_child()
        if not profile._rec.active:
            _ACTIVE = None


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
