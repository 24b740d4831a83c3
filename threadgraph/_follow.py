"""Following exec'd Python processes (``threadgraph run --follow-exec``, docs/run.md).

The parent sets, for the program it runs:

- ``PYTHONPATH``: the hook directory (threadgraph/_hook) first, so that every
  Python started below imports its ``sitecustomize``;
- ``THREADGRAPH_FOLLOW``: the base directory; each followed process writes into
  ``BASE/<pid>/``;
- ``THREADGRAPH_FOLLOW_OPTIONS``: the ProcessProfile settings, as JSON (below);
- ``THREADGRAPH_FOLLOW_PKG``: the directory holding this package, for a Python
  that would not find it on its own path (it must be the same CPython version:
  the recorder is a compiled extension).

The hook calls start() in the new process, which enables a ProcessProfile with
those settings; atexit, os._exit, os.exec* and the terminating signals finish it
as in any profiled process (docs/api.md).  A process that execs a Python keeps
its pid: the new image's run goes to BASE/<pid>-2/ (_make_output_dir skips the
ended run's directory, which is not empty).
"""
import json
import os

ENV_BASE = "THREADGRAPH_FOLLOW"
ENV_OPTIONS = "THREADGRAPH_FOLLOW_OPTIONS"
ENV_PKG = "THREADGRAPH_FOLLOW_PKG"
HOOK_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_hook")

# The profile this process started at start-up, if any.
_PROFILE = None


def settings_of(opts):
    """The JSON settings for followed processes from `threadgraph run`'s options."""
    return {
        "profile": opts.profile, "memory": opts.memory, "accounting": opts.accounting,
        "compress": opts.compress, "backend": opts.backend, "filter": opts.filter,
        "stack": opts.stack, "sleeps": not opts.no_sleep_correction,
        "forked": opts.follow_fork, "frequency": opts.process_memory_frequency,
        "timestamps": not opts.no_timestamps, "format": opts.format,
        "native": opts.native, "sample_bytes": opts.sample_bytes,
        "mode": opts.mode, "snapshot_when": opts.snapshot_when,
        "max_size": opts.max_size, "aggregate": opts.aggregate,
        "time_resolution": opts.time_resolution,
    }


def environment(base, settings, env=None):
    """The variables to add to ENV (default os.environ) so that the Pythons a
    program starts profile themselves into BASE/<pid>/ with SETTINGS."""
    env = os.environ if env is None else env
    path = env.get("PYTHONPATH")
    return {
        "PYTHONPATH": HOOK_DIR + (os.pathsep + path if path else ""),
        ENV_BASE: os.path.abspath(base),
        ENV_OPTIONS: json.dumps(settings),
        ENV_PKG: os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    }


def _make_profile(base, settings):
    from threadgraph import ProcessProfile
    from threadgraph._options import CHOICES

    kwargs = {"default_log_path": base}
    for key in CHOICES:  # profile, memory, backend, format, mode, time_resolution
                         # (checked by ProcessProfile)
        if settings.get(key):
            kwargs[key] = settings[key]
    if settings.get("native"):
        kwargs["native"] = True
    if settings.get("accounting") or settings.get("sample_bytes") or settings.get("snapshot_when"):
        kwargs["accounting"] = True
    if settings.get("sample_bytes"):
        kwargs["sample_bytes"] = settings["sample_bytes"]
    if settings.get("compress") and (settings.get("format") != "text" or kwargs.get("accounting")
                                     or settings.get("mode") == "sampled"):
        # gzip of accounting files, zstd of the capture; a text run that does no
        # accounting here (run's --snapshot-every is not followed) has nothing
        # to compress, which ProcessProfile refuses
        kwargs["compress"] = True
    if settings.get("max_size"):
        kwargs["max_size"] = settings["max_size"]
    if settings.get("aggregate"):
        kwargs["aggregate"] = True
    prof = ProcessProfile(**kwargs)
    if settings.get("filter"):
        prof.setFilter(settings["filter"])
    prof.trackStack(bool(settings.get("stack")))
    prof.trackSleeps(settings.get("sleeps", True))
    prof.logTimestamps(settings.get("timestamps", True))
    if settings.get("forked"):
        prof.enableForkedProfile()
    if settings.get("snapshot_when"):
        prof.snapshot_when(*settings["snapshot_when"])
    if settings.get("frequency") is not None:
        prof.setProcessMemoryFrequence(settings["frequency"])
    return prof


def start():
    """Called by the hook at start-up: profile this process if asked.  Never
    raises: a process that cannot be followed runs unprofiled, with one line
    on stderr."""
    global _PROFILE
    base = os.environ.get(ENV_BASE)
    if not base or _PROFILE is not None:
        return
    import sys

    if os.path.basename(sys.argv[0] if sys.argv else "") == "threadgraph":
        return  # the threadgraph command itself (run profiles on its own)
    try:
        settings = json.loads(os.environ.get(ENV_OPTIONS) or "{}")
        prof = _make_profile(base, settings)
        prof.enable()
    except Exception as exc:  # a bad setting, an unwritable base: run unprofiled
        sys.stderr.write("threadgraph: not following pid %d: %s\n" % (os.getpid(), exc))
        return
    _PROFILE = prof


def release():
    """Stop the start-up profile, if any, and remove its files: this process is
    `threadgraph` itself (python -m threadgraph), which profiles on its own or
    execs the processor."""
    global _PROFILE
    prof, _PROFILE = _PROFILE, None
    if prof is None:
        return
    import shutil

    prof.disable()
    shutil.rmtree(prof.output_dir, ignore_errors=True)
