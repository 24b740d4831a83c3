"""Pool work stitched to its submitter: the notes behind ``marks.txt``'s task
and run lines (docs/formats.md, docs/api.md "Pool work").

While a ProcessProfile records, ``concurrent.futures.ThreadPoolExecutor.submit``
(and so ``Executor.map`` and ``loop.run_in_executor``) and asyncio's
``BaseEventLoop.create_task`` (``asyncio.create_task``, ``ensure_future``,
``asyncio.run``, task groups) are wrapped, at enable() if their modules are
imported, else when the program imports them (nothing is imported for it):

- the wrapper notes a task id with the submitting thread's position (the
  recorder's ``position()``: its open calls at that moment, the caller of
  submit innermost) and hands the pool a callable that runs the work through
  ``run_task``; submit's wrapper is hidden from the records (_marks.hidden),
  create_task's is recorded (an eager task's first step runs inside it) and
  leaves its own call out of the position;
- ``run_task`` (a recorded frame) notes the id with its own position, checked
  by the recorder to be its own call, then calls the work: the readers graft
  that call, as a frame ``[LABEL]``, under the submitter's calls.

greenlet, imported while recording, is not wrapped: the recorder's switch hook
becomes the importing thread's (``_recorder.greenlet_watch``).

An asyncio task runs in steps, each a ``send`` (or ``throw``) of its
coroutine: the coroutine is wrapped in a ``TaskCoro`` whose ``send`` notes the
run before each step.  ``uninstall()`` puts the originals back.
"""
from __future__ import annotations

import collections.abc
import itertools
import sys
from typing import Any, Callable, Dict, List, Tuple

from threadgraph import _marks, _recorder

_ids = itertools.count(1)
#: (owner, attribute name, original) of each wrapper installed
_saved: List[Tuple[Any, str, Any]] = []


# The run notes are taken in the recorded function itself, not in a helper:
# position(True) checks that its caller is the innermost recorded call.

def run_task(tid: int, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Runs pool work FN noted as task TID (its frame becomes the marker)."""
    rec = _marks.active
    if rec is not None:
        pos = rec.position(True)
        if pos is not None:
            was = _marks.quiet(True)  # the note is threadgraph's, not the program's
            try:
                _marks.note_run(tid, pos)
            finally:
                _marks.quiet(was)
    try:
        return fn(*args, **kwargs)
    except BaseException as exc:
        _unframe(exc)
        raise


@_marks.hidden
def _unframe(exc: BaseException) -> None:
    """Leaves the calling wrapper's frame, the head of EXC's traceback in its
    handler, out of it, so that a bare ``raise`` after gives the traceback the
    program has without threadgraph (and no frame of its own: a bare raise
    adds none).  3.11+ re-raise the exception's own traceback; 3.8 to 3.10 the
    one it was caught with, which _recorder.handled_traceback replaces."""
    tb = exc.__traceback__
    if tb is not None and tb.tb_frame is sys._getframe(1):
        exc.__traceback__ = tb.tb_next
        if sys.version_info < (3, 11):
            _recorder.handled_traceback(exc)


class TaskCoro(collections.abc.Coroutine):
    """An asyncio task's coroutine, each step of which is noted as a run."""

    __slots__ = ("_tg_id", "_coro", "__weakref__")

    def __init__(self, tid: int, coro: Any) -> None:
        self._tg_id = tid
        self._coro = coro

    def send(self, value: Any) -> Any:
        rec = _marks.active
        if rec is not None:
            pos = rec.position(True)
            if pos is not None:
                was = _marks.quiet(True)  # the note is threadgraph's, not the program's
                try:
                    _marks.note_run(self._tg_id, pos)
                finally:
                    _marks.quiet(was)
        try:
            return self._coro.send(value)
        except BaseException as exc:
            _unframe(exc)
            raise

    def throw(self, *args: Any) -> Any:
        rec = _marks.active
        if rec is not None:
            pos = rec.position(True)
            if pos is not None:
                was = _marks.quiet(True)  # the note is threadgraph's, not the program's
                try:
                    _marks.note_run(self._tg_id, pos)
                finally:
                    _marks.quiet(was)
        try:
            return self._coro.throw(*args)
        except BaseException as exc:
            _unframe(exc)
            raise

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Any:
        return self._coro.__await__()

    def __getattr__(self, name: str) -> Any:
        # cr_frame, cr_code, __qualname__...: asyncio's reprs and debug mode
        return getattr(self._coro, name)

    def __repr__(self) -> str:
        return repr(self._coro)


def _submission(label: str) -> Any:
    """A new task id noted with the calling thread's position, or None when
    the thread is not recorded."""
    rec = _marks.active
    if rec is None:
        return None
    # the note, and the id the pool's work item keeps, are threadgraph's: not
    # counted as the program's memory (docs/api.md "Pool work")
    was = _marks.quiet(True)
    try:
        pos = rec.position(False)
        if pos is None:
            return None
        tid = next(_ids)
        _marks.note_task(tid, pos, label)
    finally:
        _marks.quiet(was)
    return tid


def _wrap_submit(orig: Callable[..., Any]) -> Callable[..., Any]:
    @_marks.hidden
    def submit(self: Any, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        tid = _submission(getattr(self, "_thread_name_prefix", "") or type(self).__name__)
        if tid is None:
            return orig(self, fn, *args, **kwargs)
        return orig(self, run_task, tid, fn, *args, **kwargs)
    submit.__doc__ = orig.__doc__
    submit.__wrapped__ = orig  # type: ignore[attr-defined]
    return submit


def _wrap_create_task(orig: Callable[..., Any]) -> Callable[..., Any]:
    # Not hidden: with an eager task factory (3.12+) the task's first step runs
    # inside create_task, and must be recorded.  The submission is the caller's
    # place: this wrapper's own call, when recorded (innermost), left out.
    def create_task(self: Any, coro: Any, *args: Any, **kwargs: Any) -> Any:
        rec = _marks.active
        if rec is None or isinstance(coro, TaskCoro):
            return orig(self, coro, *args, **kwargs)
        pos = rec.position(True)
        pos = (pos[0], pos[1], pos[2] - 1) if pos is not None else rec.position(False)
        if pos is None:
            return orig(self, coro, *args, **kwargs)
        tid = next(_ids)
        task = orig(self, TaskCoro(tid, coro), *args, **kwargs)
        name = getattr(task, "get_name", None)
        label = str(name()) if name else "asyncio task"
        was = _marks.quiet(True)  # the note is threadgraph's, not the program's
        try:
            _marks.note_task(tid, pos, label)
        finally:
            _marks.quiet(was)
        return task
    create_task.__doc__ = orig.__doc__
    create_task.__wrapped__ = orig  # type: ignore[attr-defined]
    return create_task


#: module -> (class, method, wrapper maker) of each wrapper
_TARGETS: Dict[str, Tuple[str, str, Callable[..., Any]]] = {
    "concurrent.futures.thread": ("ThreadPoolExecutor", "submit", _wrap_submit),
    "asyncio.base_events": ("BaseEventLoop", "create_task", _wrap_create_task),
}


def _greenlet_imported(module: Any) -> None:
    """greenlet was imported while recording: the recorder's switch hook for
    the importing thread (a stack per greenlet, docs/api.md "Greenlets"); the
    threads that attach later get it at their attach."""
    _recorder.greenlet_watch()


#: module -> what to do once the program imported it (no wrapper)
_ON_IMPORT: Dict[str, Callable[[Any], None]] = {
    "greenlet": _greenlet_imported,
}


def _patch(module: Any) -> None:
    """Wraps the target of MODULE (one of _TARGETS, just imported) if not yet."""
    if module.__name__ in _ON_IMPORT:
        _ON_IMPORT[module.__name__](module)
        return
    cls_name, name, wrap = _TARGETS[module.__name__]
    owner = getattr(module, cls_name, None)
    orig = getattr(owner, "__dict__", {}).get(name)
    if orig is None or any(o is owner and n == name for o, n, _ in _saved):
        return
    setattr(owner, name, wrap(orig))
    _saved.append((owner, name, orig))


class _Loader:
    """A target module's loader, which wraps the target once the module ran."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: Any) -> Any:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: Any) -> None:
        # the module's own loader from now on (reload, inspect, pkgutil)
        module.__loader__ = self._loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        if _finder in sys.meta_path:
            _patch(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class _Finder:
    """Finds nothing itself: hands the targets' specs of the other finders to
    _Loader, so that a program that imports concurrent.futures or asyncio while
    recording gets the wrappers, and one that never does pays no import."""

    @_marks.hidden
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in _TARGETS and name not in _ON_IMPORT:
            return None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                if getattr(spec.loader, "exec_module", None) is not None:
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


_finder = _Finder()


def install() -> None:
    """Wraps the pools' submit and asyncio's create_task: now if their modules
    are imported, else when they are (a finder first on sys.meta_path)."""
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
    for module_name in _TARGETS:
        module = sys.modules.get(module_name)
        if module is not None:
            _patch(module)


def uninstall() -> None:
    """Puts the originals back and stops watching imports."""
    while _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    while _saved:
        owner, name, orig = _saved.pop()
        setattr(owner, name, orig)
