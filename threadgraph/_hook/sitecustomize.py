"""threadgraph's start-up hook for followed processes (docs/run.md, --follow-exec).

`threadgraph run --follow-exec` puts this directory first on PYTHONPATH, so every
Python the program starts imports this file at start-up (it is site's
``sitecustomize``).  When THREADGRAPH_FOLLOW names a base directory, the process
profiles itself into BASE/<pid>/ (threadgraph/_follow.py).  The sitecustomize this
file hides, if any, runs first, and this directory is taken off sys.path again.
"""
import os
import sys


def _threadgraph_follow():
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    try:
        import importlib.machinery
        import importlib.util

        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
        if spec is not None and spec.loader is not None:
            hidden = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(hidden)
            sys.modules["sitecustomize"] = hidden
    finally:
        if os.environ.get("THREADGRAPH_FOLLOW"):
            pkg = os.environ.get("THREADGRAPH_FOLLOW_PKG")
            added = bool(pkg) and pkg not in sys.path
            if added:
                sys.path.append(pkg)  # last: threadgraph only, the program's path wins
            try:
                from threadgraph import _follow
            except ImportError as exc:
                sys.stderr.write("threadgraph: not following %s (pid %d): %s\n"
                                 % (sys.executable, os.getpid(), exc))
            else:
                _follow.start()
            finally:
                if added and pkg in sys.path:
                    sys.path.remove(pkg)


_threadgraph_follow()
del _threadgraph_follow
