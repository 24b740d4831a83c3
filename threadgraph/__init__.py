"""threadgraph: exact per-thread, per-call memory profiler for multi-threaded Python.

``ProcessProfile`` records, for every thread, each traced call's memory delta and the
call stack into the original ThreadGraph's dump files; the ``threadgraph`` command
turns them into graphs.  See docs/api.md; ``%load_ext threadgraph`` in IPython or
Jupyter adds the ``%%threadgraph`` magics (docs/jupyter.md).
"""
from threadgraph._version import __version__
from threadgraph.profiler import ProcessProfile

__all__ = ["ProcessProfile", "__version__"]


def load_ipython_extension(ipython):
    """``%load_ext threadgraph``: the ``%%threadgraph`` and ``%threadgraph_report``
    magics (threadgraph/_ipython.py; IPython is imported only then)."""
    from threadgraph._ipython import load_ipython_extension as load

    load(ipython)
