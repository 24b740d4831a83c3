"""decorate-stack --depth and --max-lines: a bounded subtree (docs/cli.md).

A long-running thread's own run() returns last, holding what the thread kept:
its subtree is every call the thread made.  The bound prints the calls at most
--depth levels below the event's, the first --max-lines of them, and a last
line counting the rest; without it the whole subtree is printed, as before.
The output bounded is the whole output filtered, on text dumps and on a capture.
"""
import os
import random

import capture_encode as ce

T0 = 1700000000000000  # microseconds


def tree_dumps(rng, calls, max_depth=5):
    """Text dumps (.mem, .stack: bytes) of one thread whose first call, run,
    encloses CALLS calls nested up to MAX_DEPTH below it, in pairing order."""
    stack, mem, open_ = [], [], []
    t = T0
    funcs = [(b"/app/w.py", 10, b"step"), (b"/app/w.py", 30, b"leaf"), (b"builtins", 0, b"len")]

    def call(f, line, fn):
        stack.append(b" " * len(open_) + b"%d.%06d#%s:%d:%s" % (t // 10**6, t % 10**6,
                                                               f, line, fn))
        open_.append((f, line + 2 if line else 0, fn))

    call(b"/app/w.py", 1, b"run")
    n = 0
    while open_:
        t += rng.randint(1, 30)
        if n < calls and len(open_) <= max_depth and (len(open_) == 1 or rng.random() < 0.5):
            call(*rng.choice(funcs))
            n += 1
            continue
        f, end, fn = open_.pop()
        mem.append(b"%d.%06d#%s:%d:%s=>%d" % (t // 10**6, t % 10**6, f, end, fn,
                                              rng.randint(-300, 2000)))
    return b"".join(x + b"\n" for x in mem), b"".join(x + b"\n" for x in stack)


def bounded(full, depth=None, max_lines=0):
    """What the bound prints of the whole output FULL (its lines)."""
    lines = [x for x in full if depth is None or len(x) - len(x.lstrip(" ")) <= depth]
    deep = len(full) - len(lines)
    past = max(0, len(lines) - max_lines) if max_lines else 0
    out = lines[:len(lines) - past]
    if deep or past:
        why = ["%d deeper than --depth %d" % (deep, depth)] if deep else []
        why += ["%d past --max-lines %d" % (past, max_lines)] if past else []
        out.append("... %d more call%s not shown (%s)" % (deep + past, "" if deep + past == 1
                                                          else "s", ", ".join(why)))
    return out


def write_run(tmp_path, mem, stack, capture=True):
    """The dumps as T.mem and T.stack in tmp_path/text, and (with CAPTURE) a
    capture of them in tmp_path/run; returns the two directories."""
    text, run = tmp_path / "text", tmp_path / "run"
    text.mkdir()
    run.mkdir()
    (text / "T.mem").write_bytes(mem)
    (text / "T.stack").write_bytes(stack)
    if capture:
        (run / "capture.tg").write_bytes(ce.encode([str(text / "T.mem"),
                                                    str(text / "T.stack")]))
    return text, run


def test_bounded_output_is_the_whole_output_filtered(tg, tmp_path):
    mem, stack = tree_dumps(random.Random(5), 400)
    text, run = write_run(tmp_path, mem, stack)
    event = str(len(mem.splitlines()))  # run's return: the whole thread
    whole = tg("decorate-stack", text / "T.mem", text / "T.stack", event)
    assert whole.returncode == 0, whole.stderr
    full = whole.stdout.splitlines()
    assert len(full) == 401 and not full[-1].startswith("...")
    assert max(len(x) - len(x.lstrip(" ")) for x in full) == 5
    for depth, max_lines in [(None, 0), (0, 0), (1, 0), (2, 0), (5, 0), (9, 0), (None, 1),
                             (None, 50), (None, 401), (None, 402), (1, 7), (3, 300),
                             (0, 1), (2, 10000)]:
        opts = (["--depth", str(depth)] if depth is not None else []) + \
            (["--max-lines", str(max_lines)] if max_lines else [])
        want = bounded(full, depth, max_lines)
        a = tg("decorate-stack", *opts, text / "T.mem", text / "T.stack", event)
        b = tg("decorate-stack", *opts, run, "T", event)
        assert a.returncode == 0 and b.returncode == 0, (opts, a.stderr, b.stderr)
        assert a.stdout.splitlines() == want, opts
        assert b.stdout == a.stdout, opts
    # --max-lines 0 is no bound, as report's
    assert tg("decorate-stack", "--max-lines", "0", text / "T.mem", text / "T.stack",
              event).stdout == whole.stdout


def test_bound_of_an_inner_call(tg, tmp_path):
    """The bound counts levels below the event's call, not the thread's."""
    mem, stack = tree_dumps(random.Random(11), 300)
    text, run = write_run(tmp_path, mem, stack)
    for k in range(1, len(mem.splitlines()) + 1, 37):
        whole = tg("decorate-stack", text / "T.mem", text / "T.stack", str(k))
        assert whole.returncode == 0, whole.stderr
        want = bounded(whole.stdout.splitlines(), 1, 4)
        for where in ((text / "T.mem", text / "T.stack"), (run, "T")):
            r = tg("decorate-stack", "--depth=1", "--max-lines=4", *where, str(k))
            assert r.returncode == 0, r.stderr
            assert r.stdout.splitlines() == want, (where, k)


def test_bound_keeps_the_pairing_checks(tg, tmp_path):
    """Bounded or not, the subtree is paired with its returns: a mismatch in a
    call printed is warned about, and too few returns is still an error."""
    stack = (b"1.0#/a.py:1:run\n"
             b" 1.25#/a.py:5:f\n"
             b"  1.5#/a.py:9:g\n")
    mem = (b"1.625#/a.py:11:g=>1\n"
           b"1.75#/a.py:6:other=>2\n"   # f's return names another function
           b"2.0#/a.py:3:run=>3\n")
    text, _ = write_run(tmp_path, mem, stack, capture=False)  # a capture pairs by itself
    r = tg("decorate-stack", "--depth", "1", text / "T.mem", text / "T.stack", "3")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("run@/a.py:1-3, Time: 1.0 s, Memory: 3 B\n"
                        " f@/a.py:5-6, Time: 0.5 s, Memory: 2 B\n"
                        "... 1 more call not shown (1 deeper than --depth 1)\n")
    assert "paired with a return of another function" in r.stderr
    # the call g, left out, is not warned about
    r = tg("decorate-stack", "--depth", "0", text / "T.mem", text / "T.stack", "3")
    assert r.returncode == 0 and "another function" not in r.stderr, r.stderr
    assert r.stdout.endswith("... 2 more calls not shown (2 deeper than --depth 0)\n")
    (text / "T.mem").write_bytes(mem.split(b"\n", 1)[1])  # g's return gone
    r = tg("decorate-stack", "--max-lines", "1", text / "T.mem", text / "T.stack", "2")
    assert r.returncode == 1
    assert "the call has 3 calls in its subtree but only 2 memory events" in r.stderr


def test_bound_options_refuse_bad_values(tg, tutorial):
    mem, stack = os.path.join(tutorial, "Thread-7.mem"), os.path.join(tutorial, "Thread-7.stack")
    for opt in ("--depth", "--max-lines"):
        for bad in ("-1", "x", ""):
            r = tg("decorate-stack", opt, bad, mem, stack, "30")
            assert r.returncode == 2, (opt, bad, r.stderr)
            assert "expects a non-negative integer" in r.stderr
