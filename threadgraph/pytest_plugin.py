"""The pytest plugin: memory limits per test and per thread (docs/pytest.md).

Installed with the package (entry point ``pytest11``: ``threadgraph``) and off
unless ``pytest --threadgraph``.  Then a test marked

    @pytest.mark.limit_memory("24 MB")                   # all threads together
    @pytest.mark.limit_memory("8 MB", thread="Loader")   # one thread (name or prefix)
    @pytest.mark.limit_leaks("1 MB")                     # still live at the end

runs with a ProcessProfile (accounting on) enabled around its call only
(pytest_runtest_call), and fails when a figure of the accounting summary
(summary.json) is above its limit; the failure names the threads, the amounts
and the top call sites with their stacks, read from the run's snapshots.  Tests
without these markers run without the recorder, unless ``--threadgraph-all``.

This module is a thin layer over the public API: ProcessProfile, summary.json
and the snapshot files (docs/accounting.md, docs/formats.md).  It imports the
recorder only when a test is to be measured, so that a pytest session in which
it is merely installed costs nothing.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import warnings
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

#: Sites shown per figure in a failure.
TOP_SITES = 5
#: Calls shown per site's context (innermost first).
STACK_DEPTH = 8
#: Tests listed by the --threadgraph-all summary.
TOP_TESTS = 5

# pytest-memray's grammar, so that suites can switch: a number, optional
# spaces, and B, KB, MB, GB, TB or PB (powers of 1024; any case); KiB, MiB...
# too.  An int is a number of bytes.
_SIZE_RE = re.compile(r"\s*\+?(\d*\.\d+|\d+)\s*(?:([KMGTP])i?B|(B))\s*\Z", re.IGNORECASE)
_UNITS = {"B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}

_MARKERS = {
    "limit_memory": 'limit_memory(size, thread=None): with --threadgraph, fail the test '
                    'if its peak of memory allocated (all threads, or the threads named '
                    'THREAD or starting with it, each) is above SIZE ("24 MB")',
    "limit_leaks": 'limit_leaks(size): with --threadgraph, fail the test if more than '
                   'SIZE of the memory it allocated is still live at its end',
}


def parse_size(text: Any) -> int:
    """Bytes from a size as pytest-memray writes it: "24 MB", "1.5GB", "512 KB",
    "100B" (powers of 1024), also "24 MiB"; or an int of bytes.  ValueError
    otherwise."""
    if isinstance(text, int) and not isinstance(text, bool) and text >= 0:
        return text
    m = _SIZE_RE.match(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError("threadgraph: invalid memory size %r: give a number and a unit "
                         "B, KB, MB, GB, TB or PB (powers of 1024), e.g. \"24 MB\"" % (text,))
    unit = (m.group(2) or m.group(3)).upper()
    return int(float(m.group(1)) * _UNITS[unit])


def format_size(n: float) -> str:
    """N bytes as 1023 B, 1.5 KiB, 24.0 MiB..."""
    sign = "-" if n < 0 else ""
    n = abs(n)
    if n < 1024:
        return "%s%d B" % (sign, n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024.0
        if n < 1024 or unit == "TiB":
            break
    return "%s%.1f %s" % (sign, n, unit)


class Limit:
    """One marker of a test: KIND ("memory" or "leaks"), its limit in bytes, the
    thread selector (memory only) and the marker as written (for messages)."""

    def __init__(self, kind: str, limit: int, thread: Optional[str], text: str) -> None:
        self.kind = kind
        self.limit = limit
        self.thread = thread
        self.text = text


def limits_of(item: Any) -> List[Limit]:
    """The Limits of ITEM's limit_memory and limit_leaks markers; ValueError or
    TypeError naming the marker for a bad one."""
    out = []
    for mark in item.iter_markers():
        if mark.name not in _MARKERS:
            continue
        kwargs = dict(mark.kwargs)
        thread = kwargs.pop("thread", None) if mark.name == "limit_memory" else None
        shown = ", ".join([repr(a) for a in mark.args]
                          + ["%s=%r" % kv for kv in sorted(mark.kwargs.items())])
        text = "%s(%s)" % (mark.name, shown)
        if len(mark.args) != 1 or kwargs:
            extra = (" (%s: not supported)" % ", ".join(sorted(kwargs))) if kwargs else ""
            raise TypeError("threadgraph: %s: give one size%s%s" % (
                text, ' and optionally thread="NAME"' if mark.name == "limit_memory" else "",
                extra))
        if thread is not None and (not isinstance(thread, str) or not thread):
            raise TypeError("threadgraph: %s: thread must be a thread's name or the "
                            "start of one" % text)
        kind = "memory" if mark.name == "limit_memory" else "leaks"
        try:
            size = parse_size(mark.args[0])
        except ValueError as exc:
            raise ValueError(str(exc).replace("threadgraph: ", "threadgraph: %s: " % text,
                                              1)) from None
        out.append(Limit(kind, size, thread, text))
    return out


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("threadgraph", "threadgraph memory limits (docs/pytest.md)")
    group.addoption("--threadgraph", action="store_true", default=False,
                    help="check the limit_memory and limit_leaks markers with "
                         "threadgraph's recorder")
    group.addoption("--threadgraph-all", action="store_true", default=False,
                    help="also measure tests without markers and list the highest "
                         "peaks at the end (implies --threadgraph, as the options below)")
    group.addoption("--threadgraph-native", action="store_true", default=False,
                    help="also count native memory (malloc, mmap) of C extensions and "
                         "libraries, such as NumPy's arrays")
    group.addoption("--threadgraph-dir", metavar="DIR", default=None,
                    help="keep the run directory of each test that fails a limit in "
                         "DIR (for threadgraph report)")
    parser.addini("threadgraph", "check the limit_memory and limit_leaks markers "
                  "(as --threadgraph)", type="bool", default=False)


def pytest_configure(config: Any) -> None:
    for name, text in _MARKERS.items():
        config.addinivalue_line("markers", text)
    if (config.getoption("threadgraph") or config.getini("threadgraph")
            or config.getoption("threadgraph_all") or config.getoption("threadgraph_native")
            or config.getoption("threadgraph_dir")):
        config.pluginmanager.register(_Plugin(config), "threadgraph-limits")


class Result:
    """What one measured test gave: its failure text (None: within its limits),
    its figures for the --threadgraph-all summary, and where its run was kept."""

    def __init__(self) -> None:
        self.failure: Optional[str] = None
        self.peak = 0
        self.leaked = 0
        self.threads: List[Tuple[str, int]] = []
        self.kept: Optional[str] = None


class _Plugin:
    """The hooks of an enabled session (one per process: each pytest-xdist
    worker has its own, with its own temporary directory)."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self.all = bool(config.getoption("threadgraph_all"))
        self.native = bool(config.getoption("threadgraph_native"))
        keep = config.getoption("threadgraph_dir")
        self.keep_dir = os.path.abspath(keep) if keep else None
        self.tmp: Optional[str] = None
        self.count = 0
        self.limits: Dict[str, List[Limit]] = {}
        self.results: Dict[str, Result] = {}
        self.peaks: List[Tuple[int, int, str]] = []  # (peak, leaked, nodeid), all mode

    # -- the measurement ------------------------------------------------------

    def pytest_runtest_setup(self, item: Any) -> None:
        # A bad marker is the test's error, with its message (not the plugin's
        # traceback), before it runs.
        try:
            limits = limits_of(item)
        except (ValueError, TypeError) as exc:
            bad = str(exc)
        else:
            bad = None
        if bad is not None:
            pytest.fail(bad, pytrace=False)  # outside the except: no chained exceptions
        if limits or self.all:
            self.limits[item.nodeid] = limits

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: Any) -> Iterator[None]:
        limits = self.limits.pop(item.nodeid, None)
        if limits is None:
            yield
            return
        from threadgraph import ProcessProfile

        if self.tmp is None:
            self.tmp = tempfile.mkdtemp(prefix="threadgraph-pytest-")
            self.warm_up(ProcessProfile)
        self.count += 1
        base = os.path.join(self.tmp, str(self.count))
        profile = ProcessProfile(default_log_path=base, accounting=True, native=self.native)
        per_thread = [lim.limit for lim in limits if lim.thread is not None]
        if per_thread:
            # Snapshots of the thread that passes the smallest per-thread limit,
            # as it goes on growing: their sites are the failure's call sites.
            profile.snapshot_when("thread>%d" % max(1, min(per_thread)))
        result = Result()
        try:
            profile.enable()
        except (RuntimeError, OSError) as exc:
            if limits:
                result.failure = "threadgraph: cannot measure this test: %s" % exc
                self.results[item.nodeid] = result
            else:
                warnings.warn("threadgraph: %s not measured: %s" % (item.nodeid, exc))
            yield
            return
        try:
            yield
        finally:
            profile.disable()
        run = profile.output_dir
        try:
            judge(run, limits, result)
        except (OSError, ValueError, KeyError) as exc:
            result.failure = "threadgraph: cannot read the test's run %s: %r" % (run, exc)
        if result.failure is not None and self.keep_dir is not None:
            try:
                result.kept = keep_run(run, self.keep_dir, item.nodeid)
                result.failure += "\nrun kept: %s  (threadgraph report %s)" % (
                    result.kept, result.kept)
            except OSError as exc:
                result.failure += "\nrun not kept: %s" % exc
        shutil.rmtree(base, ignore_errors=True)
        self.results[item.nodeid] = result

    def warm_up(self, profile_class: Any) -> None:
        """One run of nothing before the first measured test: the first enable()
        of a process does work of its own once (it imports the modules whose
        functions it wraps), which would count in that test's figures."""
        base = os.path.join(self.tmp, "warm-up")
        profile = profile_class(default_log_path=base, accounting=True, native=self.native)
        try:
            profile.enable()
        except (RuntimeError, OSError):
            return  # the test's own enable() will say why
        profile.disable()
        shutil.rmtree(base, ignore_errors=True)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: Any, call: Any) -> Iterator[None]:
        outcome = yield
        if call.when != "call":
            return
        result = self.results.pop(item.nodeid, None)
        if result is None:
            return
        report = outcome.get_result()
        if self.all:
            report.user_properties.append(
                ("threadgraph", [result.peak, result.leaked, result.threads]))
        if report.skipped:
            # A test that skipped itself is not judged, and pytest shows no
            # section of a skip: its run is not kept either.
            if result.kept is not None:
                shutil.rmtree(result.kept, ignore_errors=True)
            return
        if result.failure is None:
            return
        if report.outcome == "passed":
            report.outcome = "failed"
            report.longrepr = result.failure
        else:
            report.sections.append(("threadgraph", result.failure))

    # -- the --threadgraph-all summary (on the xdist controller too) ------------

    def pytest_runtest_logreport(self, report: Any) -> None:
        if not self.all or report.when != "call":
            return
        for name, value in report.user_properties:
            if name == "threadgraph":
                self.peaks.append((int(value[0]), int(value[1]), report.nodeid))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.all or not self.peaks:
            return
        terminalreporter.write_sep("=", "threadgraph: highest peaks of memory allocated")
        for peak, leaked, nodeid in sorted(self.peaks, reverse=True)[:TOP_TESTS]:
            terminalreporter.write_line("%10s peak %10s live at the end  %s" % (
                format_size(peak), format_size(leaked), nodeid))

    def pytest_unconfigure(self, config: Any) -> None:
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


# -- reading a run --------------------------------------------------------------


def judge(run: str, limits: List[Limit], result: Result) -> None:
    """Fill RESULT from the run directory RUN against LIMITS: the figures of its
    summary.json and, for each limit passed, a message with the sites."""
    with open(os.path.join(run, "summary.json"), encoding="utf-8") as f:
        summary = json.load(f)
    proc = summary["process"]
    threads = summary["threads"]
    result.peak = proc["peak_bytes"]
    result.leaked = proc["live_bytes"]
    result.threads = [(t["name"], t["peak_bytes"]) for t in threads]
    failures = []
    for lim in limits:
        if lim.kind == "leaks":
            if proc["live_bytes"] > lim.limit:
                failures.append(leaks_failure(run, lim, proc["live_bytes"]))
        elif lim.thread is None:
            if proc["peak_bytes"] > lim.limit:
                failures.append(peak_failure(run, lim, proc["peak_bytes"]))
        else:
            chosen = [t for t in threads
                      if t["name"].startswith(lim.thread) or t["base"].startswith(lim.thread)]
            if not chosen:
                failures.append(
                    "threadgraph: %s: no thread named %r or starting with it allocated "
                    "memory during the test (threads: %s)" % (
                        lim.text, lim.thread, ", ".join(t["name"] for t in threads)))
            for t in chosen:
                if t["peak_bytes"] > lim.limit:
                    failures.append(thread_failure(run, lim, t))
    if failures:
        result.failure = "\n\n".join(failures)


def thread_failure(run: str, lim: Limit, thread: Dict[str, Any]) -> str:
    lines = ["threadgraph: %s: thread %s allocated up to %s (%d bytes), over its limit of "
             "%s" % (lim.text, thread["name"], format_size(thread["peak_bytes"]),
                     thread["peak_bytes"], format_size(lim.limit))]
    snap = last_threshold_snapshot(run, thread["base"])
    if snap is not None:
        path, at = snap
        lines.append("top call sites of %s, live when it had %s:" % (thread["name"],
                                                                   format_size(at)))
        lines += site_lines(read_snapshot(path), thread["base"])
        return "\n".join(lines)
    # The threshold snapshot is taken at an allocation made with the GIL: one
    # that passed the limit without it (native code that released the GIL, as
    # mmap does) leaves none if no later high came.  The peak snapshot then.
    path = numbered_snapshot(run, "peak")
    sites = site_lines(read_snapshot(path), thread["base"]) if path else []
    if sites:
        lines.append("top call sites of %s live at the test's peak (none was taken when "
                     "it passed the limit: one is taken at an allocation made with the GIL):"
                     % thread["name"])
        lines += sites
    return "\n".join(lines)


def peak_failure(run: str, lim: Limit, peak: int) -> str:
    lines = ["threadgraph: %s: the test's peak of memory allocated was %s (%d bytes), "
             "over its limit of %s" % (lim.text, format_size(peak), peak,
                                       format_size(lim.limit))]
    path = numbered_snapshot(run, "peak")
    if path is not None:
        snap = read_snapshot(path)
        lines.append("live at the peak, by thread: " + by_thread(snap))
        lines.append("top call sites live at the peak:")
        lines += site_lines(snap, None)
    return "\n".join(lines)


def leaks_failure(run: str, lim: Limit, live: int) -> str:
    lines = ["threadgraph: %s: %s (%d bytes) allocated during the test is still live "
             "at its end, over its limit of %s" % (lim.text, format_size(live), live,
                                                  format_size(lim.limit))]
    path = numbered_snapshot(run, "final")
    if path is not None:
        snap = read_snapshot(path)
        lines.append("still live, by thread: " + by_thread(snap))
        lines.append("top call sites of what is still live:")
        lines += site_lines(snap, None)
    return "\n".join(lines)


class Snapshot:
    """A snapshot file (docs/formats.md "Allocation accounting"): thread bases by
    index, and nodes {id: (parent, thread base, live bytes, live count, call)}."""

    def __init__(self) -> None:
        self.threads: Dict[str, str] = {}
        self.nodes: Dict[str, Tuple[str, str, int, int, str]] = {}


def read_snapshot(path: str) -> Snapshot:
    snap = Snapshot()
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# thread: "):
                ix, _, base = line[len("# thread: "):].partition(" ")
                snap.threads[ix] = base
            elif line and not line.startswith("#"):
                fields = line.split(" ", 7)
                if len(fields) != 8:
                    raise ValueError("%s: not a snapshot line: %r" % (path, line))
                node, parent, thread, live, count, _, _, call = fields
                snap.nodes[node] = (parent, snap.threads.get(thread, "-"), int(live),
                                    int(count), call)
    return snap


def by_thread(snap: Snapshot) -> str:
    totals: Dict[str, int] = {}
    for _, base, live, _, _ in snap.nodes.values():
        totals[base] = totals.get(base, 0) + live
    ranked = sorted(((v, k) for k, v in totals.items() if v > 0), reverse=True)
    return ", ".join("%s %s" % (k if k != "-" else "(no thread)", format_size(v))
                     for v, k in ranked) or "nothing"


def _harness_dirs() -> Tuple[str, ...]:
    """Directories of pytest's and pluggy's code: the frames that call the test."""
    import _pytest
    import pluggy
    return tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                 for m in (_pytest, pluggy) if getattr(m, "__file__", None))


def site_lines(snap: Snapshot, base: Optional[str]) -> List[str]:
    """The TOP_SITES nodes of SNAP with the most live bytes (of thread BASE, or
    all; those with at least 1 % of the largest's), each with its context,
    innermost call first, up to the test function (pytest's own frames left
    out) or STACK_DEPTH calls."""
    nodes = sorted(((v[2], int(k), k) for k, v in snap.nodes.items()
                    if v[2] > 0 and (base is None or v[1] == base)),
                   key=lambda n: (-n[0], n[1]))[:TOP_SITES]
    harness = _harness_dirs()
    out = []
    for live, _, node in nodes:
        if live * 100 < nodes[0][0]:
            break
        _, thread, _, count, _ = snap.nodes[node]
        out.append("  %s in %d block%s, thread %s:" % (
            format_size(live), count, "" if count == 1 else "s", thread))
        depth = 0
        while node in snap.nodes and depth < STACK_DEPTH:
            parent, _, _, _, call = snap.nodes[node]
            if depth > 0 and call.startswith(harness):
                break
            out.append("      " + call)
            node = parent
            depth += 1
        else:
            if node in snap.nodes:
                out.append("      ...")
    return out


_NUMBERED = re.compile(r"snapshot-(\d+)-(.*)\Z")


def numbered_snapshot(run: str, label: str) -> Optional[str]:
    """The highest-numbered snapshot-<N>-LABEL of RUN, or None."""
    best = None
    for name in os.listdir(run):
        m = _NUMBERED.match(name)
        if m and m.group(2) == label and (best is None or int(m.group(1)) > best[0]):
            best = (int(m.group(1)), name)
    return None if best is None else os.path.join(run, best[1])


def last_threshold_snapshot(run: str, base: str) -> Optional[Tuple[str, int]]:
    """The last threshold snapshot written for thread BASE (the recorder's
    snapshot-<N>-thread-over-<SIZE>-<BASE>-at-<BYTES>) and its BYTES, or None."""
    pat = re.compile(r"thread-over-\d+-%s-at-(\d+)\Z" % re.escape(base))
    best = None
    for name in os.listdir(run):
        m = _NUMBERED.match(name)
        t = pat.match(m.group(2)) if m else None
        if t and (best is None or int(m.group(1)) > best[0]):
            best = (int(m.group(1)), name, int(t.group(1)))
    return None if best is None else (os.path.join(run, best[1]), best[2])


def keep_run(run: str, keep_dir: str, nodeid: str) -> str:
    """Move the run directory RUN into KEEP_DIR under a name made from NODEID
    (-2, -3... if taken, as by another xdist worker); returns its path."""
    os.makedirs(keep_dir, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid).strip("_.")[:150] or "test"
    n = 1
    while True:
        dest = os.path.join(keep_dir, name if n == 1 else "%s-%d" % (name, n))
        try:
            os.mkdir(dest)  # atomic: claims the name against other workers
        except FileExistsError:
            n += 1
            continue
        for entry in os.listdir(run):
            shutil.move(os.path.join(run, entry), os.path.join(dest, entry))
        return dest
