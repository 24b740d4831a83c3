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


def test_live_reads_a_sampled_runs_curves_with_crlf_line_ends(tmp_path, tg):
    """Lines may end with \\r\\n (docs/cli.md "Malformed lines"), as every
    other command reads them: live --once on a sampled run said
    'error: T.mem:1: bad memory delta' and exited 1."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "runinfo.json").write_text(
        '{"format": 1, "pid": 1, "ppid": 0, "start_time": 1700000000.0, '
        '"end_time": 1700000001.0, "mode": "sampled", "aggregate": false, '
        '"timestamps": true, "threads": [{"name": "T", "native_id": 5, "ident": 5, '
        '"mem": "T.mem", "stack": null}]}\n')
    (run / "T.mem").write_bytes(b"1700000000.100000#<thread memory>:0:sampled=>1000\r\n"
                                b"1700000000.200000#<thread memory>:0:sampled=>5000\r\n")
    r = tg("live", "--once", run)
    assert r.returncode == 0, r.stderr
    row = [l for l in r.stdout.splitlines() if l.startswith(" T ")]
    assert row and "4.9 KB" in row[0] and row[0].split()[-1] == "2", r.stdout
