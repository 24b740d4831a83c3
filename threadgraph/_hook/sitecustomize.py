"""threadgraph's start-up hook for followed processes (docs/run.md, --follow-exec).

`threadgraph run --follow-exec` puts this directory first on PYTHONPATH, so every
Python the program starts imports this file at start-up (it is site's
``sitecustomize``).  When THREADGRAPH_FOLLOW names a base directory, the process
profiles itself into BASE/<pid>/ (threadgraph/_follow.py).  The sitecustomize this
file hides, if any, runs first (its errors are reported by site as they would
be), and this directory is taken off sys.path again.  Any Python may read this
file: it is kept valid for old versions, which are then just not followed.
"""
import os
import sys


def _threadgraph_run_hidden(path):
    """Run the sitecustomize further on PATH, if any, as site would have."""
    try:
        import importlib.machinery
        import importlib.util
        find = importlib.machinery.PathFinder.find_spec
        make = importlib.util.module_from_spec
    except (ImportError, AttributeError):
        return  # too old a Python to find it this way
    spec = find("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        hidden = make(spec)
        spec.loader.exec_module(hidden)
        sys.modules["sitecustomize"] = hidden


def _threadgraph_start():
    """Profile this process into $THREADGRAPH_FOLLOW/<pid>/ (threadgraph._follow)."""
    pkg = os.environ.get("THREADGRAPH_FOLLOW_PKG")
    added = bool(pkg) and pkg not in sys.path
    if added:
        sys.path.append(pkg)  # last: threadgraph only, the program's own path wins
    try:
        from threadgraph import _follow
    except Exception as exc:  # another CPython version, a broken install
        sys.stderr.write("threadgraph: not following %s (pid %d): %s\n"
                         % (sys.executable, os.getpid(), exc))
    else:
        _follow.start()
    finally:
        if added and pkg in sys.path:
            sys.path.remove(pkg)


def _threadgraph_hook():
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    try:
        _threadgraph_run_hidden(sys.path)
    finally:
        if os.environ.get("THREADGRAPH_FOLLOW"):
            _threadgraph_start()


_threadgraph_hook()
del _threadgraph_hook, _threadgraph_run_hidden, _threadgraph_start
