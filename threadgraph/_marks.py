"""Phases, marks and task links: what ``marks.txt`` holds (docs/formats.md).

``threadgraph.phase(name)`` (a context manager and a decorator) and
``threadgraph.mark(name)`` note named intervals and instants with their thread;
threadgraph/_stitch.py notes which call path submitted each task to a thread pool
or an asyncio loop and where the task ran.  The notes are kept here, in the
recording process, and ProcessProfile.disable() writes them to ``marks.txt``
beside the dumps; the commands read them (memg shades the phases, the peaks say
their phase, folded stacks graft each task under its submitter).

A thread is named in a note by its index in the recorder's thread log (the
recorder's ``position()``), turned into its file base name when the file is
written.  Notes are plain tuples appended under the GIL (list.append is atomic):
any thread may note at any time.
"""
from __future__ import annotations

import functools
import os
import array
import time
from typing import Any, Callable, Dict, List, Optional, TypeVar

#: the notes of the current (or last) run, in the order taken:
#: ["phase", start_ns, stop_ns or None while open, thread index or None, name],
#: ("mark", time_ns, thread index or None, name)
records: List[Any] = []

#: the pool and asyncio task notes of the current (or last) run, in the order
#: taken, packed TASK_FIELDS integers each: kind (TASK or RUN), id, thread
#: index, calls, depth, label (an index into task_labels; -1 for a run).  One
#: is taken per submitted task and per asyncio step, for the whole run: they
#: keep no Python object of their own (a tuple per note would take the
#: program's free-list tuples, and hold the task's name), and are taken with
#: the recorder quiet (note_task, note_run), so that what they cost is never
#: charged to the program's threads (docs/api.md "Pool work").
tasks = array.array("q")
TASK_FIELDS = 6
TASK, RUN = 1, 2
#: the labels of the task notes, as UTF-8 bytes (copies: the program's str
#: stays its own), and their indexes
task_labels: List[bytes] = []
_label_index: Dict[bytes, int] = {}

#: the recording Recorder, or None (set by ProcessProfile.enable()/disable())
active: Any = None
#: the Recorder's quiet() of the last run, bound once at start(): a call
#: through the instance (rec.quiet(True)) makes 3.11's profile hook build a
#: bound method object for the call event, counted as the thread's, and free it
#: once quiet, uncounted: 72 bytes charged to the program per call
quiet: Any = None
#: the run has allocation accounting: a phase is also an accounting window
#: ("phase NAME" in summary.json and `threadgraph summary`)
accounting = False

#: the file whose frames the recorder hides as plumbing: profiler.py's (its
#: exclude_file, profiler._FILE)
PLUMBING_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "profiler.py")

F = TypeVar("F", bound=Callable[..., Any])


def _forget_clock() -> None:
    """The calling thread's next record reads the clock, so that its time is
    not before the note just taken (time_resolution="ms" keeps a beat's
    reading: docs/api.md "Timestamps").  Only while recording: the recorder is
    loaded then, and importing it here otherwise would load it into programs
    that never record (the pytest plugin's unmarked tests)."""
    from threadgraph import _recorder
    _recorder.clock_forget()


def hidden(fn: F) -> F:
    """FN with its code's file name set to profiler.py's, which the recorder
    hides with everything it calls (its exclude_file): the notes' own calls
    (phase enter and exit, mark, the submit wrappers) leave no frame in the
    records, and what the program called is charged to its own frame."""
    fn.__code__ = fn.__code__.replace(co_filename=PLUMBING_FILE)
    return fn


def clear() -> None:
    """Forget every note taken."""
    del records[:]
    del tasks[:]
    del task_labels[:]
    _label_index.clear()


def note_task(tid: int, pos: Any, label: str) -> None:
    """Notes the submission of task TID at POS (a position()) with LABEL.  The
    caller makes the recorder quiet around this call (quiet(True))."""
    key = label.encode("utf-8", "surrogateescape")
    lab = _label_index.get(key)
    if lab is None:
        lab = _label_index[key] = len(task_labels)
        task_labels.append(key)
    tasks.extend((TASK, tid, pos[0], pos[1], pos[2], lab))


def note_run(tid: int, pos: Any) -> None:
    """Notes a run (a step) of task TID at POS.  The caller makes the recorder
    quiet around this call."""
    tasks.extend((RUN, tid, pos[0], pos[1], pos[2], -1))


def start(rec: Any, with_accounting: bool = False) -> None:
    """A new run: forget the last run's notes and note for REC (WITH_ACCOUNTING:
    phases open accounting windows too)."""
    global active, accounting, quiet
    clear()
    quiet = rec.quiet
    active = rec
    accounting = with_accounting


def stop() -> None:
    """The run ended: later notes are not taken."""
    global active
    active = None


class phase:
    """``with threadgraph.phase("load"):`` or ``@threadgraph.phase("load")``:
    notes a named interval of the calling thread (docs/api.md "Phases and
    marks").  Phases may nest; the commands take a moment's innermost one."""

    __slots__ = ("name", "_open", "_windows")

    def __init__(self, name: str) -> None:
        self.name = str(name)
        self._open: List[Any] = []
        self._windows: List[Any] = []

    @hidden
    def __enter__(self) -> "phase":
        rec = active
        note = None
        if rec is not None:
            note = ["phase", time.time_ns(), None, rec.thread_index(), self.name]
            _forget_clock()  # the next record's time is not before it
            records.append(note)
        self._open.append(note)
        window = None
        if rec is not None and accounting:
            try:
                window = rec.window_open("phase " + self.name)
            except RuntimeError:  # more than 64 open: the phase is noted all the same
                pass
        self._windows.append(window)
        return self

    @hidden
    def __exit__(self, *exc_info: Any) -> None:
        note = self._open.pop() if self._open else None
        window = self._windows.pop() if self._windows else None
        rec = active
        if note is not None and rec is not None:
            note[2] = time.time_ns()
            _forget_clock()
        if window is not None and rec is not None:
            try:
                rec.window_close(window)
            except (RuntimeError, ValueError):  # accounting ended meanwhile
                pass

    def __call__(self, fn: F) -> F:
        name = self.name

        @functools.wraps(fn)
        def phased(*args: Any, **kwargs: Any) -> Any:
            with phase(name):
                return fn(*args, **kwargs)
        return phased  # type: ignore[return-value]


def mark(name: str) -> None:
    """Notes a named instant of the calling thread (docs/api.md)."""
    rec = active
    if rec is not None:
        records.append(("mark", time.time_ns(), rec.thread_index(), str(name)))
        _forget_clock()


def _escape(text: str) -> str:
    """NAME as marks.txt writes it: one line, tab-free (control characters as \\xHH)."""
    return "".join("\\x%02x" % ord(c) if ord(c) < 0x20 or ord(c) == 0x7f else c for c in text)


def _time(ns: int) -> str:
    return "%d.%06d" % (ns // 10**9, ns % 10**9 // 1000)


def write(outdir: str, threads: List[dict],
          families: Optional[Callable[[List[int]], List[Optional[str]]]] = None) -> None:
    """Write ``marks.txt`` into OUTDIR from the notes taken; THREADS is the
    recorder's threads() (index -> base), FAMILIES its families() (the entry an
    aggregate run folded a thread into: its phases and marks go by that name).
    No file when there are none."""
    if not records and not tasks:
        return
    bases = {t["index"]: t["base"] for t in threads}
    if families is not None:
        gone = sorted({r[3] if r[0] == "phase" else r[2] for r in records
                       if r[0] in ("phase", "mark")} - set(bases) - {None})
        folded = {i: f for i, f in zip(gone, families(gone)) if f is not None}
    else:
        folded = {}

    def base(idx: Optional[int]) -> str:
        if idx is None:
            return "-"
        return bases.get(idx) or folded.get(idx, "-")

    lines = ["# threadgraph marks 1\n"]
    for r in list(records):
        kind = r[0]
        if kind == "phase":
            lines.append("phase\t%s\t%s\t%s\t%s\n" % (_time(r[1]), "-" if r[2] is None
                                                      else _time(r[2]), base(r[3]),
                                                      _escape(r[4])))
        elif kind == "mark":
            lines.append("mark\t%s\t%s\t%s\n" % (_time(r[1]), base(r[2]), _escape(r[3])))
    notes = tasks.tolist()
    for i in range(0, len(notes) - TASK_FIELDS + 1, TASK_FIELDS):
        kind, tid, idx, calls, depth, lab = notes[i:i + TASK_FIELDS]
        if idx not in bases:
            continue
        if kind == TASK:
            label = task_labels[lab].decode("utf-8", "surrogateescape")
            lines.append("task\t%d\t%s\t%d\t%d\t%s\n" % (tid, bases[idx], calls, depth,
                                                       _escape(label)))
        elif kind == RUN:
            lines.append("run\t%d\t%s\t%d\t%d\n" % (tid, bases[idx], calls, depth))
    fd = os.open(os.path.join(outdir, "marks.txt"),
                 os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write("".join(lines))
