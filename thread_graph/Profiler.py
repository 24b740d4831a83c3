"""``from thread_graph.Profiler import ProcessProfile``, as in the original tutorial.

The original wrote text files, and its tutorial reads them (``grep -n``, the
``.mem`` and ``.stack`` paths): this ProcessProfile writes text by default."""
from typing import Any

import threadgraph

__all__ = ["ProcessProfile"]


class ProcessProfile(threadgraph.ProcessProfile):
    """:class:`threadgraph.ProcessProfile` with ``format="text"`` by default."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("format", "text")
        super().__init__(*args, **kwargs)
