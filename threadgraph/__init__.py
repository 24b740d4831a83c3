"""threadgraph: exact per-thread, per-call memory profiler for multi-threaded Python.

``ProcessProfile`` records, for every thread, each traced call's memory delta and the
call stack into the original ThreadGraph's dump files; the ``threadgraph`` command
turns them into graphs.  See docs/api.md; ``%load_ext threadgraph`` in IPython or
Jupyter adds the ``%%threadgraph`` magics (docs/jupyter.md).

``ProcessProfile`` is imported on first use (PEP 562), so that importing the
package alone (the ``threadgraph`` command, the pytest plugin of a session that
does not ask for it) does not load the recorder extension.

PYTEST_DONT_REWRITE: pytest marks the packages of a plugin's distribution for
assertion rewriting, and warns about one already imported; ``threadgraph run -m
pytest`` (or a program that imports threadgraph, then calls ``pytest.main``) has
imported this one before.  Its asserts are none of a test's, so pytest is told
to leave it alone.  The pytest plugin, imported by pytest later, is rewritten.
"""
from typing import TYPE_CHECKING, Any

from threadgraph._marks import mark, phase
from threadgraph._version import __version__

if TYPE_CHECKING:
    from threadgraph.profiler import ProcessProfile

__all__ = ["ProcessProfile", "__version__", "mark", "phase"]


def __getattr__(name: str) -> Any:
    if name == "ProcessProfile":
        from threadgraph.profiler import ProcessProfile

        return ProcessProfile
    raise AttributeError("module 'threadgraph' has no attribute %r" % name)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext threadgraph``: the ``%%threadgraph`` and ``%threadgraph_report``
    magics (threadgraph/_ipython.py; IPython is imported only then)."""
    from threadgraph._ipython import load_ipython_extension as load

    load(ipython)
