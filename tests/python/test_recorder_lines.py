"""The LINE field: where each recorded call returned (.mem) and started (.stack).

The recorder computes a return's line from the frame's instruction offset, with a
per-code-object cache on 3.12+ (docs/formats.md); these tests pin the lines for the
cases that exercise it: one function returning from two places, an exception
leaving a function, a generator's successive yields, and C calls made from
different lines of one function.
"""
import os

from tgtest import only_dir, parse_mem, parse_stack, run_scenario

SCENARIO = '''
import sys, threadgraph

def two_exits(x):                 # line 4
    if x:
        return 1                  # line 6
    return 0                      # line 7

def raises():                     # line 9
    y = 1
    raise ValueError(y)           # line 11

def gen():                        # line 13
    yield 1                       # line 14
    yield 2                       # line 15

def c_calls():                    # line 17
    a = len("a")                  # line 18
    b = abs(-1)                   # line 19
    return a + b                  # line 20

def main():
    for i in range(50):           # the cache sees both exits again and again
        two_exits(i % 2)
        try:
            raises()
        except ValueError:
            pass
        list(gen())
        c_calls()

p = threadgraph.ProcessProfile(format="text", default_log_path=sys.argv[1], profile="both")
p.trackStack()
p.enable()
main()
p.disable()
'''


def _records(tmp_path):
    base = tmp_path / "out"
    run_scenario(tmp_path, SCENARIO.replace("sys.argv[1]", repr(str(base))))
    run_dir = only_dir(base)
    script = str(tmp_path / "scenario.py")
    mem = [r for r in parse_mem(os.path.join(run_dir, "MainThread.mem"))]
    stack = parse_stack(os.path.join(run_dir, "MainThread.stack"))
    return script, mem, stack


def test_return_lines(tmp_path):
    script, mem, stack = _records(tmp_path)
    lines = {}
    for site, line, func, _delta in mem:
        if site == script:
            lines.setdefault(func, []).append(line)
    # Alternating exits of one code object: 0 takes line 7, 1 takes line 6.
    assert lines["two_exits"] == [7, 6] * 25
    assert set(lines["raises"]) == {11}
    # Each resumption of the generator returns at its yield, then at the end.
    assert lines["gen"] == [14, 15, 15] * 50
    assert set(lines["c_calls"]) == {20}
    firsts = {func: line for _d, site, line, func in stack if site == script}
    assert firsts["two_exits"] == 4 and firsts["raises"] == 9
    assert firsts["gen"] == 13 and firsts["c_calls"] == 17


def test_c_call_lines_are_the_callers(tmp_path):
    _script, mem, stack = _records(tmp_path)
    c_returns = [(func, line) for site, line, func, _d in mem if func in ("len", "abs")
                 and site == "builtins"]
    assert c_returns and set(c_returns) == {("len", 18), ("abs", 19)}
    c_calls = [(func, line) for _d, site, line, func in stack if func in ("len", "abs")
               and site == "builtins"]
    assert set(c_calls) == {("len", 18), ("abs", 19)}
