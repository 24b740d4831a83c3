"""Big dumps are streamed: memory use does not grow with the file's size."""
import os
import subprocess

import pytest

from clisupport import CLI

LINES = 400_000  # about 26 MB
TIME = "/usr/bin/time"


def write_dump(path, lines, peaks_every=0):
    chunk = []
    with open(path, "w") as f:
        for i in range(lines):
            delta = 409600 if peaks_every and i % peaks_every == 0 else (i % 7) * 8 - 24
            chunk.append("%d.%06d#/usr/lib/python3.11/json/encoder.py:%d:iterencode=>%d\n"
                         % (1763766000 + i // 1000, i % 1000000, 100 + i % 50, delta))
            if len(chunk) == 10000:
                f.write("".join(chunk))
                chunk = []
        f.write("".join(chunk))


def maxrss_kb(cmd, cwd):
    """Runs cmd under GNU time; returns its peak RSS in KB and its stdout."""
    report = os.path.join(str(cwd), "maxrss.txt")
    r = subprocess.run([TIME, "-f", "%M", "-o", report] + cmd, cwd=cwd,
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    with open(report) as f:
        return int(f.read().split()[-1]), r.stdout


@pytest.mark.skipif(not os.access(TIME, os.X_OK), reason="GNU time not installed")
def test_memory_bounded(tmp_path):
    """The same commands on a 26 MB and a tiny dump: the RSS difference stays far
    below the big file's size (ASan builds have a larger but constant base)."""
    big = tmp_path / "Big.mem"
    write_dump(big, LINES, peaks_every=1000)
    small = tmp_path / "Small.mem"
    write_dump(small, 2000, peaks_every=1000)
    size_kb = big.stat().st_size // 1024
    assert size_kb > 20 * 1024
    stack = tmp_path / "Big.stack"
    stack.write_text("1763766000.0#/usr/lib/python3.11/json/encoder.py:1:iterencode\n")
    out = tmp_path / "out"
    out.mkdir()
    slack = 6 * 1024  # KB
    for cmd in (["memg", "--script-only", "-o", str(out)],
                ["peaks", "--peak_delta_time=0"],
                ["decorate-stack"]):
        def args(mem):
            if cmd[0] == "decorate-stack":
                return [CLI] + cmd + [str(mem), str(stack), "1"]
            return [CLI] + cmd + [str(mem)]
        rss_small, _ = maxrss_kb(args(small), tmp_path)
        rss_big, stdout = maxrss_kb(args(big), tmp_path)
        assert rss_big - rss_small < slack, (cmd[0], rss_small, rss_big, size_kb)
        if cmd[0] == "peaks":
            assert len(stdout.splitlines()) == LINES // 1000
    # every line was read; the series is thinned (line by line, memory bounded) to
    # what a 1920-pixel graph shows
    assert 400 < len((out / "memg-plot" / "memg-0.dat").read_text().splitlines()) <= 4 * 1920
