"""The LINE field: where each recorded call returned (.mem) and started (.stack).

The recorder computes a return's line from the frame's instruction offset, with a
per-code-object cache on 3.12+ (docs/formats.md); these tests pin the lines for the
cases that exercise it: one function returning from two places, an exception
leaving a function, a generator's successive yields, and C calls made from
different lines of one function.
"""
import os
import subprocess
import sys

import tgcapture
from tgtest import env_with_package, only_dir, parse_mem, parse_stack, run_scenario

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "cli"))
from clisupport import CLI  # noqa: E402

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


NO_LINE = '''
import sys, threadgraph

def plain():
    return len("ab")

# A code object without a line table: CPython gives every instruction line -1.
if hasattr(plain.__code__, "co_linetable"):
    plain.__code__ = plain.__code__.replace(co_linetable=b"")

p = threadgraph.ProcessProfile(format=sys.argv[2], default_log_path=sys.argv[1],
                               profile="both")
p.trackStack()
p.enable()
for i in range(3):
    print(any(x > 5 for x in range(10)))   # 3.12: the genexpr's return has no line
    plain()
p.disable()
'''


def _runs_in_both_formats(script, tmp_path):
    """Run SCRIPT (argv: its output base, its format) once per format: each
    format and its run directory."""
    for fmt in ("text", "binary"):
        base = tmp_path / fmt
        subprocess.run([sys.executable, str(script), str(base), fmt], check=True,
                       capture_output=True, env=env_with_package(None))
        yield fmt, only_dir(base)


def test_no_line_is_written_as_line_0(tmp_path):
    """CPython's "no line" (-1) is written as LINE 0, which every reader takes:
    a generator expression's implicit return on 3.12 and a code object without
    a line table used to give lines of -1 that the CLI skipped as malformed."""
    script = tmp_path / "noline.py"
    script.write_text(NO_LINE)
    for fmt, run_dir in _runs_in_both_formats(script, tmp_path):
        if fmt == "text":
            for name in ("MainThread.mem", "MainThread.stack"):
                with open(os.path.join(run_dir, name)) as f:
                    text = f.read()
                assert ":-" not in text, text
            if sys.version_info >= (3, 12):  # where CPython gives these lines -1
                assert any(line == 0 for _s, line, _f, _d in
                           parse_mem(os.path.join(run_dir, "MainThread.mem")))
        for cmd in (["peaks"], ["folded", "--metric", "delta"]):
            r = subprocess.run([CLI] + cmd + ["--strict", run_dir], capture_output=True,
                               text=True, timeout=60)
            assert r.returncode == 0 and "malformed" not in r.stderr, (fmt, cmd, r.stderr)


HTTP_SERVER = '''
import http.server, sys, threading, urllib.request
import threadgraph

p = threadgraph.ProcessProfile(format=sys.argv[2], default_log_path=sys.argv[1],
                               profile="both")
p.trackStack()
p.enable()
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
srv.RequestHandlerClass.log_message = lambda *a: None
t = threading.Thread(target=srv.serve_forever, name="server")
t.start()
for _ in range(3):
    urllib.request.urlopen("http://127.0.0.1:%d/" % srv.server_address[1]).read()
srv.shutdown()
t.join()
srv.server_close()
p.disable()
'''


def test_a_threaded_http_server_is_read_strictly(tmp_path):
    """A real program of many threads, C calls and generators (a threaded HTTP
    server, three requests): everything the recorder writes the CLI reads with
    --strict, in both formats (it was 23 lines skipped as malformed on 3.12)."""
    (tmp_path / "srv").mkdir()
    script = tmp_path / "server.py"
    script.write_text(HTTP_SERVER)
    for fmt in ("text", "binary"):
        base = tmp_path / fmt
        subprocess.run([sys.executable, str(script), str(base), fmt], check=True,
                       capture_output=True, env=env_with_package(None),
                       cwd=str(tmp_path / "srv"), timeout=120)
        run_dir = only_dir(base)
        for cmd in (["peaks", "--peak=0"], ["folded", "--metric", "delta"]):
            r = subprocess.run([CLI] + cmd + ["--strict", run_dir], capture_output=True,
                               text=True, timeout=60)
            assert r.returncode == 0 and "malformed" not in r.stderr, (fmt, cmd, r.stderr)
            assert r.stdout


def _long_function(calls):
    """Source of `many(n)`: a loop whose body makes CALLS builtin calls, each
    on its own line, the lines 1 to 70 apart (the location table's short, one-
    line and long forms, and the loop's jump back), and the line of each."""
    src, lines, line = ["def many(n):", "    t = 0", "    for i in range(n):"], [], 4
    for k in range(calls):
        gap = (k * 37) % 71  # blank lines before this call
        src += [""] * gap
        line += gap
        src.append("        t += abs(-%d)" % k)
        lines.append(line)
        line += 1
    src.append("    return t")
    return "\n".join(src) + "\n", lines


LONG_FUNCTION = '''
import sys, threadgraph
%s
p = threadgraph.ProcessProfile(format=sys.argv[2], default_log_path=sys.argv[1],
                               profile="both")
p.trackStack()
p.enable()
for _ in range(3):
    many(2)
p.disable()
'''


def test_c_call_lines_of_a_long_function(tmp_path):
    """A function whose builtin calls fall at more offsets than the line cache
    holds (its whole line table is then decoded once): every call's line, in
    both formats, is the line it was made from."""
    source, lines = _long_function(60)
    script = tmp_path / "long.py"
    script.write_text(LONG_FUNCTION % source)
    first = 3  # "def many" is the script's third line
    expected = [first - 1 + l for l in lines] * 6
    for fmt, run_dir in _runs_in_both_formats(script, tmp_path):
        if fmt == "text":
            got = [line for _d, site, line, func in
                   parse_stack(os.path.join(run_dir, "MainThread.stack")) if func == "abs"]
            got_ret = [line for site, line, func, _d in
                       parse_mem(os.path.join(run_dir, "MainThread.mem")) if func == "abs"]
        else:
            cap = tgcapture.load(os.path.join(run_dir, "capture.tg"))
            calls, returns, _ = cap.thread_records(cap.order[0])
            got = [line for _dep, _us, _f, line, fn in calls if fn == b"abs"]
            got_ret = [line for _us, _f, line, fn, _d in returns if fn == b"abs"]
        assert got == expected, fmt
        assert got_ret == expected, fmt
