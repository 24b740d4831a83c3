"""The graphs' layout: peak labels spaced across the graph's width, and long
thread names shortened in the key (the full names in the text outputs)."""
import re

LONG = "Worker-with-a-really-long-descriptive-name-number-%03d-of-the-pool"
# the graph's span (s) and the burst of big returns at its end, 0.7 ms apart
SPAN = 1.0
BURST_STEP = 0.0007


def write_run(path, names, burst=True, lone=False):
    """Threads NAMES, each calling work() every 10 ms for SPAN s (10 KB kept
    each), then, with BURST, returning 300-700 KB within a few ms of each other
    at the end: the workers' big returns as they all finish together.  With
    LONE, the first thread also has one big return alone at 0.3 s."""
    path.mkdir()
    for i, name in enumerate(names):
        stack, mem = [], []

        def call(t, delta, line=9):
            stack.append("%.6f#w.py:%d:work" % (t, line))
            mem.append("%.6f#w.py:%d:work=>%d" % (t + 0.001, line, delta))

        for k in range(int(SPAN / 0.01)):
            call(1000 + k * 0.01, 10240)
            if lone and i == 0 and k == 30:
                call(1000.3 + 0.002, 250 * 1024, 20)
        if burst:
            call(1000 + SPAN + i * BURST_STEP, (300 + 23 * i % 400) * 1024, 12)
        (path / f"{name}.stack").write_text("".join(l + "\n" for l in stack))
        (path / f"{name}.mem").write_text("".join(l + "\n" for l in mem))
    return path


def peak_rows(tg, run):
    r = tg("peaks", run)
    assert r.returncode == 0, r.stderr
    return [l.split("\t") for l in r.stdout.splitlines()]


def test_burst_gives_few_spread_labels(tg, tmp_path):
    # 18 big returns within 12 ms of a 1 s graph: before, spaced by the
    # candidates' own span (12 ms / 40), every one was kept, the labels piled
    # in one column; now by the graph's span, more than 1/40 of it apart
    run = write_run(tmp_path / "run", ["W%d" % i for i in range(18)])
    rows = peak_rows(tg, run)
    # 12 ms is under a 40th of the graph: the burst's largest return alone
    assert len(rows) == 1, rows
    assert int(rows[0][3]) == max((300 + 23 * i % 400) * 1024 for i in range(18))
    # with a big return alone earlier: both labelled, far apart
    run = write_run(tmp_path / "run2", ["W%d" % i for i in range(18)], lone=True)
    rows = peak_rows(tg, run)
    times = [float(r[1]) for r in rows]
    assert len(rows) == 2 and abs(times[0] - 1000.302) < 0.001, rows
    assert times[1] - times[0] > SPAN / 40
    # memg labels exactly those peaks, with peaks' numbers
    out = tmp_path / "out"
    r = tg("memg", "--script-only", "-o", out, run)
    assert r.returncode == 0, r.stderr
    legend = (out / "memg.txt").read_text().splitlines()
    assert [l.split(":")[0] for l in legend] == [r[0] for r in rows]
    assert [l.split(">")[0].split(": ")[1] for l in legend] == [r[2] for r in rows]
    labels = (out / "memg-plot" / "memg-peaks.dat").read_text().splitlines()
    assert len(labels) == len(rows)


def test_explicit_spacing_unchanged(tg, tmp_path):
    # --peak_delta_time/--peak_delta_value: the original's rule, every
    # candidate more than 0 s or 0 KB from the last kept one
    run = write_run(tmp_path / "run", ["W%d" % i for i in range(18)])
    r = tg("peaks", "--peak_delta_time=0", "--peak_delta_value=0", run)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 18


def titles(gp):
    return re.findall(r"with \w+ lt \d+ (?:lw \d+ )?(?:ps nps )?title '([^']*)'", gp)


def test_long_names_shortened_in_keys(tg, tmp_path):
    names = [LONG % i for i in range(5)] + ["MainThread"]
    run = write_run(tmp_path / "run", names)
    out = tmp_path / "out"
    for args in ([], ["--held"]):
        r = tg("memg", *args, "--script-only", "-o", out, run)
        assert r.returncode == 0, r.stderr
    memg = titles((out / "memg-plot" / "memg.gp").read_text())
    held = titles((out / "memg-held-plot" / "memg-held.gp").read_text())
    for t in (memg, held):
        workers = [x for x in t if x.startswith("Worker")]
        assert len(workers) == 5, t
        # at most 32 characters, told apart by what differs (their number)
        assert all(len(x) <= 32 for x in workers), workers
        assert sorted(workers) == ["Worker-with-a-r..%03d-of-the-pool" % i
                                   for i in range(5)]
        assert "MainThread" in t
    # the full names stay in the text outputs
    assert LONG % 0 in (out / "memg-held.txt").read_text()
    assert all(l.split(">")[0].split(": ")[1] in names
               for l in (out / "memg.txt").read_text().splitlines())
    # interleave's tic labels: as the key's (cut at 30 bytes before, all alike)
    r = tg("interleave", "--script-only", "-o", out, run)
    assert r.returncode == 0, r.stderr
    gp = (out / "interleave-plot" / "interleave.gp").read_text()
    tics = re.findall(r"'([^']*)' \d+", gp.split("set ytics (")[1].split(")\n")[0])
    assert len(set(tics)) == 6 and all(len(x) <= 32 for x in tics), tics
    assert LONG % 3 in (out / "interleave.txt").read_text()


def test_short_names_whole(tg, tmp_path):
    run = write_run(tmp_path / "run", ["W0", "x" * 32], burst=False)
    out = tmp_path / "out"
    r = tg("memg", "--script-only", "-o", out, run)
    assert r.returncode == 0, r.stderr
    assert sorted(titles((out / "memg-plot" / "memg.gp").read_text())) == ["W0", "x" * 32]
