"""decorate-stack pairs an event with its call by position, not only by time.

Calls and returns pair up (docs/formats.md): the K-th memory record returns from
the K-th call to close.  The original's rule -- the last call of the function at
or before the event's time -- picks the next call when a return and that call
share a timestamp; these dumps have exactly that.
"""

STACK = ("1.000000#/a/main.py:31:doStuff\n"
         " 1.000001#/r.py:10:randint\n"
         "1.000005#/a/main.py:31:doStuff\n"
         " 1.000006#/r.py:10:randint\n")
MEM = ("1.000002#/r.py:12:randint=>0\n"
       "1.000005#/a/main.py:38:doStuff=>500\n"   # same time as the second call
       "1.000007#/r.py:12:randint=>0\n"
       "1.000009#/a/main.py:38:doStuff=>600\n")


def _decorate(tg, tmp_path, mem, stack, event):
    (tmp_path / "T.mem").write_text(mem)
    (tmp_path / "T.stack").write_text(stack)
    r = tg("decorate-stack", tmp_path / "T.mem", tmp_path / "T.stack", event)
    assert r.returncode == 0, r.stderr
    return [line.split(", Time:")[0] + " " + line.rsplit(", ", 1)[1]
            for line in r.stdout.splitlines()]


def test_return_sharing_a_timestamp_with_the_next_call(tg, tmp_path):
    assert _decorate(tg, tmp_path, MEM, STACK, "2") == [
        "doStuff@/a/main.py:31-38 Memory: 500 B",
        " randint@/r.py:10-12 Memory: 0 B",
    ]
    assert _decorate(tg, tmp_path, MEM, STACK, "4") == [
        "doStuff@/a/main.py:31-38 Memory: 600 B",
        " randint@/r.py:10-12 Memory: 0 B",
    ]
    assert _decorate(tg, tmp_path, MEM, STACK, "3") == ["randint@/r.py:10-12 Memory: 0 B"]


def test_broken_pairing_falls_back_to_the_time_rule(tg, tmp_path):
    # A return without its call first (as the original wrote for frames entered
    # before profiling started) shifts the positions; the time rule still finds
    # the call.
    mem = "0.500000#/x.py:5:outer=>7\n" + MEM.replace("1.000005#/a", "1.000004#/a")
    assert _decorate(tg, tmp_path, mem, STACK, "3") == [
        "doStuff@/a/main.py:31-38 Memory: 500 B",
        " randint@/r.py:10-12 Memory: 0 B",
    ]
