"""threadgraph live on damaged runs."""
import os
import shutil


def test_live_total_of_a_damaged_aggregate_does_not_wrap(tmp_path, tg, fixtures):
    """Buckets at the int64 bound (a damaged aggregate.tga the reader takes):
    live --once added the threads' memory in a signed overflow (UBSan's
    'signed integer overflow' in cmd_live.c) and printed a wrapped, negative
    total; it is held at the bound."""
    run = tmp_path / "run"
    shutil.copytree(os.path.join(fixtures, "aggregate-v2"), str(run))
    path = run / "aggregate.tga"
    lines = path.read_text().split("\n")
    big = str((1 << 63) - 1)
    lines = [" ".join(l.split(" ")[:2] + [big, big]) if l.startswith("b ") else l
             for l in lines]
    path.write_text("\n".join(lines))
    r = tg("live", "--once", run)
    assert r.returncode == 0, r.stderr
    assert "runtime error" not in r.stderr, r.stderr
    line = [l for l in r.stdout.splitlines() if l.startswith("process:")][0]
    assert "now -" not in line, line
