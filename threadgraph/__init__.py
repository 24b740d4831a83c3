"""threadgraph: exact per-thread, per-call memory profiler for multi-threaded Python.

``ProcessProfile`` records, for every thread, each traced call's memory delta and the
call stack into the original ThreadGraph's dump files; the ``threadgraph`` command
turns them into graphs.  See docs/api.md.
"""
from threadgraph._version import __version__
from threadgraph._marks import mark, phase
from threadgraph.profiler import ProcessProfile

__all__ = ["ProcessProfile", "__version__", "mark", "phase"]
