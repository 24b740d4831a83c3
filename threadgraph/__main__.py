"""The ``threadgraph`` command: ``run`` in Python, everything else in C.

``threadgraph run ...`` (and ``python -m threadgraph run ...``) runs a program under
the profiler; it needs a Python interpreter, so it lives in threadgraph/_run.py.
Every other argument list (memg, peaks, memh, nesting, interleave, decorate-stack,
--help, --version, ...) is handed unchanged to the C processor by threadgraph/_cli.py.
"""
import sys

def live_of_pid(args):
    """``threadgraph live PID``: an operand is a number that names no file
    (then the view needs an attach first, which is Python's).  Any operand,
    not only the last: attach's options take values (``-o BASE``,
    ``--snapshot-every 10``) that may come after the PID."""
    import os

    return any(a.isdigit() and not os.path.exists(a) for a in args if not a.startswith("-"))


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "run":
        from threadgraph._run import main as run_main

        return run_main(args[1:])
    if args and args[0] == "live" and live_of_pid(args[1:]):
        from threadgraph import _attach

        return _attach.live_main(args[1:])
    if args and args[0] in ("attach", "detach"):
        from threadgraph import _attach

        return (_attach.main if args[0] == "attach" else _attach.detach_main)(args[1:])
    from threadgraph import _follow
    from threadgraph._cli import exec_cli

    _follow.release()  # a followed process that becomes the C processor

    exec_cli(args)  # its help lists run too
    return 2  # not reached: exec_cli replaces the process or exits


if __name__ == "__main__":
    sys.exit(main())
