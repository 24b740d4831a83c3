"""Compatibility package: the original ThreadGraph's import path.

The original tutorial says ``from thread_graph.Profiler import ProcessProfile``; that
line keeps working and gives :class:`threadgraph.ProcessProfile`.
"""
