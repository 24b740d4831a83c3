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


# An export of a capture's kept segments: outer() and inner() were open where
# its files begin (runinfo.json's open_at_start, 2); inner() returns before the
# first .stack line, outer() after the last.  The first .stack line's depth (1)
# tells only outer().
EXPORT_STACK = (" 1.000000#/a.py:5:f\n"
                " 1.000200#/a.py:5:f\n")
EXPORT_MEM = ("0.900000#/a.py:9:inner=>1\n"
              "1.000100#/a.py:6:f=>10\n"
              "1.000300#/a.py:6:f=>20\n"
              "1.000400#/a.py:2:outer=>5\n")
EXPORT_RUNINFO = ('{"format": 1, "pid": 7, "threads": [{"name": "T", "native_id": 8, '
                  '"ident": 9, "mem": "T.mem", "stack": "T.stack", "open_at_start": %s}]}\n')


def test_export_of_kept_segments_pairs_by_open_at_start(tg, tmp_path):
    (tmp_path / "runinfo.json").write_text(EXPORT_RUNINFO % 2)
    assert _decorate(tg, tmp_path, EXPORT_MEM, EXPORT_STACK, "2") == [
        "f@/a.py:5-6 Memory: 10 B"]
    assert _decorate(tg, tmp_path, EXPORT_MEM, EXPORT_STACK, "3") == [
        "f@/a.py:5-6 Memory: 20 B"]
    r = tg("decorate-stack", tmp_path / "T.mem", tmp_path / "T.stack", "2")
    # its own call's time (0.0001 s), not from the later call's (-0.0001 s)
    assert abs(float(r.stdout.split("Time: ")[1].split(" s")[0]) - 1e-4) < 1e-6, r.stdout
    for event in ("1", "4"):  # inner() and outer(): begun before the files
        r = tg("decorate-stack", tmp_path / "T.mem", tmp_path / "T.stack", event)
        assert r.returncode == 1 and not r.stdout, (event, r.stdout)
        assert "began before the first record of" in r.stderr, r.stderr
        assert "runinfo.json" in r.stderr, r.stderr


def test_open_at_start_of_any_size_is_read_quickly(tg, tmp_path):
    # a runinfo.json that gives more open calls than any file holds: each
    # event is a return of one of them, counted, not held or stepped through
    (tmp_path / "runinfo.json").write_text(EXPORT_RUNINFO % (2 ** 63 - 1))
    (tmp_path / "T.mem").write_text(EXPORT_MEM)
    (tmp_path / "T.stack").write_text(EXPORT_STACK)
    for event in ("1", "2", "4"):
        r = tg("decorate-stack", tmp_path / "T.mem", tmp_path / "T.stack", event)
        assert r.returncode == 1 and "began before the first record of" in r.stderr, r.stderr


def test_mismatch_warnings_are_capped(tg, tmp_path):
    """A subtree whose calls all pair with returns of another function (a text
    run that dropped lines mis-pairs every call after the drop: ~492,000
    warning lines on a real one) names the first 20 and counts the rest."""
    n = 30
    stack = "1.0#a.py:1:f\n" + "".join(" 1.%03d#a.py:5:g\n" % (i + 1) for i in range(n))
    mem = "".join("1.%03d#a.py:9:h=>1\n" % (i + 2) for i in range(n)) + "2.0#a.py:3:f=>8\n"
    (tmp_path / "T.mem").write_text(mem)
    (tmp_path / "T.stack").write_text(stack)
    r = tg("decorate-stack", tmp_path / "T.mem", tmp_path / "T.stack", str(n + 1))
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == n + 1
    named = [l for l in r.stderr.splitlines() if l.startswith("warning: call at ")]
    assert len(named) == 20, r.stderr
    assert ("warning: %d calls of the subtree paired with a return of another function, "
            "%d more than named above (damaged dumps?)\n" % (n, n - 20)) in r.stderr


def test_dropped_records_are_said_up_front(tg, tmp_path):
    """A text run whose runinfo.json counts dropped records: the mis-pairings are
    put down to the drops, said once before them, not to damaged dumps."""
    (tmp_path / "T.stack").write_text("1.0#a.py:1:f\n 1.5#a.py:5:g\n")
    (tmp_path / "T.mem").write_text("1.6#a.py:9:h=>4096\n2.0#a.py:3:f=>8192\n")
    (tmp_path / "runinfo.json").write_text('{"pid": 1, "dropped": 7, "threads": []}\n')
    r = tg("decorate-stack", tmp_path / "T.mem", tmp_path / "T.stack", "2")
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    first = ("warning: '%s': the recorder dropped 7 records it could not write "
             "(runinfo.json): " % tmp_path)
    assert lines[0].startswith(first), r.stderr
    assert ("warning: 1 call of the subtree paired with a return of another function "
            "(the recorder dropped records: see above)") in lines
    assert "damaged" not in r.stderr
