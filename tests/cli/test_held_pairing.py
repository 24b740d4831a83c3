"""Held memory from text dumps whose .stack does not pair with the .mem: the
thread is left out with a warning, never drawn as a silently wrong curve."""

STACK = ["1.0#a.py:1:run", " 1.1#a.py:2:f", " 1.3#a.py:3:g"]
MEM = ["1.2#a.py:2:f=>100", "1.4#a.py:3:g=>50", "1.5#a.py:1:run=>200"]


def write_run(path, stack):
    """An intact thread Good and a thread Bad whose .stack is STACK lines."""
    path.mkdir()
    for name, lines in (("Good", STACK), ("Bad", stack)):
        (path / f"{name}.stack").write_text("".join(l + "\n" for l in lines))
        (path / f"{name}.mem").write_text("".join(l + "\n" for l in MEM))
    return path


def held_rows(out):
    lines = (out / "memg-held.txt").read_text().splitlines()
    return [l.split("\t") for l in lines[2:]]


def test_intact_pairs_silently(tg, tmp_path):
    run = write_run(tmp_path / "run", STACK)
    r = tg("memg", "--held", "--script-only", "-o", tmp_path / "out", run)
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr
    assert held_rows(tmp_path / "out") == [["Bad", "200", "50.0%"], ["Good", "200", "50.0%"]]


def test_stack_cut_short(tg, tmp_path):
    # the .stack cut after its first call: f's return pairs with run, g's and
    # run's are left over; before, Bad was drawn ending at 100 without a word
    run = write_run(tmp_path / "run", STACK[:1])
    r = tg("memg", "--held", "--script-only", "-o", tmp_path / "out", run)
    assert r.returncode == 0, r.stderr
    assert ("Bad.mem' not plotted: its .stack does not pair with it (damaged dumps?): "
            "2 return records left over after the last call") in r.stderr
    assert held_rows(tmp_path / "out") == [["Good", "200", "100.0%"]]
    r = tg("threads", run)
    assert r.returncode == 0, r.stderr
    assert "2 return records left over after the last call" in r.stderr
    assert "Bad" not in r.stdout and "Good" in r.stdout


def test_stack_missing_its_head(tg, tmp_path):
    # the .stack without its first call: f is deeper than the calls open
    run = write_run(tmp_path / "run", STACK[1:])
    r = tg("memg", "--held", "--script-only", "-o", tmp_path / "out", run)
    assert r.returncode == 0, r.stderr
    assert ("Bad.mem' not plotted: its .stack does not pair with it (damaged dumps?): "
            "1 call nested deeper than the calls open") in r.stderr
    assert held_rows(tmp_path / "out") == [["Good", "200", "100.0%"]]
