"""``from thread_graph.Profiler import ProcessProfile``, as in the original tutorial."""
from threadgraph import ProcessProfile

__all__ = ["ProcessProfile"]
