"""Compatibility package: the original ThreadGraph's import path.

The original tutorial says ``from thread_graph.Profiler import ProcessProfile``; that
line keeps working and gives :class:`threadgraph.ProcessProfile`.

PYTEST_DONT_REWRITE: as threadgraph/__init__.py says: pytest marks this package
of the plugin's distribution for assertion rewriting, and would warn when it was
imported first.
"""
