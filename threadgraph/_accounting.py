"""Allocation accounting, Python side: windows, periodic-snapshot settings and
the summary files written at disable() (docs/accounting.md).

The counting itself is C (src/recorder/accounting.c and acct_*.c); this
module turns its figures into ``summary.json`` (for people and tools) and
``summary.txt`` (a tab-separated line format the C command line reads, so that
it needs no JSON parser), both gzip-compressed when the profile was asked to
compress.
"""
from __future__ import annotations

import gzip
import json
import os
from typing import Any, Dict, List, Optional

#: Keys of the process, thread and window figures, in the order printed.
FIGURES = ("total_requested_bytes", "freed_bytes", "alloc_calls", "free_calls",
           "live_bytes", "peak_bytes")


def _clean(name: str) -> str:
    """A name safe for one tab-separated field: control characters as \\xHH."""
    return "".join(c if c >= " " and c != "\x7f" else "\\x%02x" % ord(c) for c in name)


def summary_lines(figures: Dict[str, Any]) -> List[str]:
    """The summary.txt lines for FIGURES (RecorderObject.accounting())."""
    out = ["# threadgraph summary 1"]
    proc = figures["process"]
    for key in FIGURES:
        out.append("process\t%s\t%d" % (key, proc[key]))
    for kind in ("alloc", "free"):
        for b, n in enumerate(proc["hist_" + kind]):
            if n:
                out.append("hist\t%s\t%d\t%d\t%s" % (kind, b, n, "process"))
    for t in figures["threads"]:
        name = _clean(t["name"])
        for key in FIGURES:
            out.append("thread\t%s\t%d\t%s" % (key, t[key], name))
        for kind in ("alloc", "free"):
            for b, n in enumerate(t["hist_" + kind]):
                if n:
                    out.append("hist\t%s\t%d\t%d\tthread %s" % (kind, b, n, name))
    for w in figures.get("windows") or []:
        name = _clean(w["name"])
        for key in FIGURES:
            out.append("window\t%s\t%d\t%s" % (key, w["process"][key], name))
    if "freed_by" in figures:
        # cross-thread frees were counted (the line says so even with no pair)
        out.append("process\tfreed_by_lost_bytes\t%d" % figures.get("freed_by_lost_bytes", 0))
        for t in figures["threads"]:
            if t.get("live_at_end_bytes") is None:
                continue  # a thread that ran no Python code: unknown (no line)
            out.append("thread\tlive_at_end_bytes\t%d\t%s" % (t["live_at_end_bytes"],
                                                              _clean(t["name"])))
        for p in figures["freed_by"]:
            out.append("freed_by\t%d\t%d\t%s\t%s" % (p["bytes"], p["blocks"],
                                                     _clean(p["allocated_in"]),
                                                     _clean(p["freed_in"])))
    return out


def _merge_pairs(pairs: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """PAIRS (cross-thread frees) with those of the same two names added up:
    an aggregate run's folded threads go by their family's name."""
    merged: Dict[Any, Dict[str, Any]] = {}
    for p in pairs:
        key = (p["allocated_in"], p["freed_in"])
        if key in merged:
            merged[key]["bytes"] += p["bytes"]
            merged[key]["blocks"] += p["blocks"]
        else:
            merged[key] = dict(p)
    return sorted(merged.values(), key=lambda p: -p["bytes"])


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "))


def summary_json(doc: Dict[str, Any]) -> str:
    """DOC as the text of summary.json (and runinfo.json): one top-level key a
    line, and each element of a list (a thread, a window, a freed_by pair) on
    its own line.  Every piece
    goes through json's C encoder: indent= takes the pure-Python one, which
    took 0.17 s at disable() for 2000 threads; this is about ten times less
    and as readable line by line."""
    enc = _ENCODER.encode
    items = []
    for key, value in doc.items():
        if isinstance(value, list) and value:
            text = "[\n%s\n  ]" % ",\n".join(["    " + enc(v) for v in value])
        else:
            text = enc(value)
        items.append("  %s: %s" % (enc(key), text))
    return "{\n%s\n}\n" % ",\n".join(items)


def write_summary(outdir: str, figures: Dict[str, Any], compress: bool) -> List[str]:
    """Write summary.json and summary.txt (``.gz`` when COMPRESS) into OUTDIR;
    returns the paths written.  Each file appears whole (tmp + rename)."""
    if "freed_by" in figures:
        figures = dict(figures, freed_by=_merge_pairs(figures["freed_by"]))
    doc = {
        "format": 1,
        "process": figures["process"],
        "threads": figures["threads"],
        "windows": figures.get("windows") or [],
        "snapshots": figures.get("snapshots", 0),
        "sample_bytes": figures.get("sample_bytes", 0),
        "freed_by": figures.get("freed_by", []),
        "freed_by_lost_bytes": figures.get("freed_by_lost_bytes", 0),
        "histogram_bins": "bin b holds sizes of bit length b: 0 -> 0, b >= 1 -> [2^(b-1), 2^b)",
    }
    texts = {
        "summary.json": summary_json(doc),
        "summary.txt": "\n".join(summary_lines(figures)) + "\n",
    }
    written = []
    for name, text in texts.items():
        path = os.path.join(outdir, name + (".gz" if compress else ""))
        tmp = path + ".tmp"
        data = text.encode("utf-8", "surrogateescape")
        if compress:
            data = gzip.compress(data, 6)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                     | getattr(os, "O_CLOEXEC", 0), 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        written.append(path)
    return written


def resolve_function(spec: Any) -> Any:
    """The code object of SPEC: a function, a code object, or "module:qualname"."""
    import importlib
    if isinstance(spec, str):
        if ":" not in spec:
            raise ValueError("function must be 'module:qualname', not %r" % (spec,))
        modname, qual = spec.split(":", 1)
        obj: Any = importlib.import_module(modname)
        for part in qual.split("."):
            obj = getattr(obj, part)
        spec = obj
    code = getattr(spec, "__code__", spec)
    if not hasattr(code, "co_code"):
        raise TypeError("function must be a Python function, a code object or "
                        "'module:qualname'")
    return code
