"""A C function without a module is named by what it is bound to.

The original wrote a C function's FILE as its `__module__`, `None` for every
method of an object (`None:650:flush`, `random@None:503` in the commands'
output).  The recorder names such a function by the type of the object it is
bound to (the class itself for a class method), in the text dumps and in the
binary capture alike, and keeps each record a line every reader takes.
"""
import os
import subprocess
import sys

from tgtest import env_with_package, only_dir, parse_mem, parse_stack

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "cli"))
from clisupport import CLI  # noqa: E402

PROGRAM = r'''
import os, random, sys, threading, threadgraph

fmt, base = sys.argv[1], sys.argv[2]


class Mine(list):
    pass


def work():
    f = open(os.devnull, "w")
    f.flush()
    random.random()
    [].append(1)
    Mine().append(2)
    dict.fromkeys("ab")
    len("x")
    f.close()


p = threadgraph.ProcessProfile(format=fmt, default_log_path=base, profile="c")
p.trackStack()
p.enable()
t = threading.Thread(target=work, name="worker")
t.start()
t.join()
p.disable()
'''

EXPECTED = [("_io.TextIOWrapper", "flush"), ("Random", "random"), ("list", "append"),
            ("Mine", "append"), ("dict", "fromkeys"), ("builtins", "len"),
            ("_io.TextIOWrapper", "close")]


def cli(*args):
    return subprocess.run([CLI] + [str(a) for a in args], capture_output=True, text=True,
                          errors="replace", timeout=120)


def record(tmp_path, fmt):
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    base = tmp_path / fmt
    subprocess.run([sys.executable, str(script), fmt, str(base)], check=True,
                   env=env_with_package(None), capture_output=True, timeout=120)
    return only_dir(base)


def test_c_methods_are_named_by_their_owner_in_text_and_capture(tmp_path):
    """The worker's C calls, in order, in the text dump and in the capture's
    export: a method's FILE is its object's type (`_io.TextIOWrapper:N:flush`,
    a subclass's own name for an inherited method), a class method's its class,
    a module function's its module; no C call is left with FILE `None`."""
    text = record(tmp_path, "text")
    binary = record(tmp_path, "binary")
    out = tmp_path / "export"
    r = cli("export", binary, "-o", out)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    for d in (text, str(out)):
        mem = parse_mem(os.path.join(d, "worker.mem"))
        stack = parse_stack(os.path.join(d, "worker.stack"))
        calls = [(site, func) for site, _line, func, _delta in mem]
        assert EXPECTED[0] in calls, (d, calls)
        start = calls.index(EXPECTED[0])
        assert calls[start:start + len(EXPECTED)] == EXPECTED, (d, calls)
        assert not [c for c in calls if c[0] == "None"], (d, calls)
        calls = [(s, f) for _i, s, _l, f in stack]
        start = calls.index(EXPECTED[0])
        assert calls[start:start + len(EXPECTED)] == EXPECTED, (d, calls)
        r = cli("folded", "--strict", "--metric", "delta", d)
        assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
        assert "fromkeys (dict:" in r.stdout and "None" not in r.stdout, r.stdout
