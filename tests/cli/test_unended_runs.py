"""Commands on a run whose end-of-run files are missing: one killed (SIGKILL,
a crash) or still running (runinfo.json's end_time null), and sampled runs.

A run writes its accounting summary and final snapshot at its end; a sampled
run always has accounting and never records calls.  The messages used to send
such a user the wrong way: "was the run made with accounting on?" for a killed
--accounting or --sampled run, and "the run needs stacks (threadgraph run
--stack)" for a sampled one, where --stack is a usage error.
"""
import json
import os
import shutil


def _run_dir(tmp_path, fixtures, mode, ended, accounting=None):
    """A copy of the flamerun fixture's dumps (calls with stacks) without its
    accounting files, or a sampled run's curves, with a runinfo.json."""
    run = tmp_path / "run"
    if mode == "sampled":
        run.mkdir()
        with open(str(run / "MainThread.mem"), "w") as f:
            for i in range(1, 50):
                f.write("1700000000.%06d#<thread memory>:0:sampled=>%d\n" % (i, i * 1000))
    else:
        shutil.copytree(os.path.join(fixtures, "flamerun"), str(run))
        for name in os.listdir(str(run)):
            if name.startswith(("snapshot-", "summary")):
                os.remove(str(run / name))
    info = {"pid": 4242, "mode": mode, "start_time": 1700000000.0,
            "end_time": 1700000001.0 if ended else None, "threads": []}
    if accounting is not None:
        info["accounting"] = accounting
    (run / "runinfo.json").write_text(json.dumps(info))
    return run


def test_a_killed_runs_missing_summary_and_snapshot_say_so(tmp_path, tg, fixtures):
    run = _run_dir(tmp_path, fixtures, "sampled", ended=False)
    for command in ("summary", "hist"):
        r = tg(command, run)
        assert r.returncode == 1, (command, r.stderr)
        assert "no summary.txt in" in r.stderr, r.stderr
        assert "the run has not ended (runinfo.json has no end time" in r.stderr, r.stderr
        assert "accounting on?" not in r.stderr, r.stderr
    for command in ("folded", "top"):
        r = tg(command, run)
        assert r.returncode == 1, (command, r.stderr)
        assert "no snapshot in" in r.stderr and "the run has not ended" in r.stderr, r.stderr
        assert "--stack" not in r.stderr and "accounting on?" not in r.stderr, r.stderr


def test_a_finished_run_without_accounting_keeps_its_message(tmp_path, tg, fixtures):
    run = _run_dir(tmp_path, fixtures, "full", ended=True)
    r = tg("summary", run)
    assert r.returncode == 1 and "(was the run made with accounting on?)" in r.stderr, r.stderr
    r = tg("folded", run)  # the recorded calls instead, said in a note
    assert r.returncode == 0, r.stderr
    assert "has no allocation accounting" in r.stderr, r.stderr


def test_a_killed_full_run_folds_its_calls_and_says_why(tmp_path, tg, fixtures):
    run = _run_dir(tmp_path, fixtures, "full", ended=False)
    r = tg("folded", run)
    assert r.returncode == 0, r.stderr
    assert "note: no snapshot in '%s' yet: the run has not ended" % run in r.stderr, r.stderr
    assert "has no allocation accounting" not in r.stderr, r.stderr
    assert r.stdout.strip(), "no folded lines"


def test_a_sampled_runs_call_metrics_name_the_mode(tmp_path, tg, fixtures):
    for ended in (True, False):
        (tmp_path / str(ended)).mkdir()
        run = _run_dir(tmp_path / str(ended), fixtures, "sampled", ended)
        for metric in ("delta", "time"):
            r = tg("folded", "--metric", metric, run)
            assert r.returncode == 1, r.stderr
            assert ("is a sampled run, which records no calls: the %s metric needs a full run"
                    % metric) in r.stderr, r.stderr
            assert "--stack" not in r.stderr, r.stderr


def test_a_killed_run_without_accounting_does_not_wait_for_its_end(tmp_path, tg, fixtures):
    # SIGKILL of `threadgraph run prog.py` (no --accounting): its summary and
    # snapshots were never to be written, at the end or ever
    run = _run_dir(tmp_path, fixtures, "full", ended=False, accounting=False)
    for command in ("summary", "hist", "top"):
        r = tg(command, run)
        assert r.returncode == 1, (command, r.stderr)
        assert "the run was made without accounting" in r.stderr, (command, r.stderr)
        assert "has not ended" not in r.stderr, (command, r.stderr)
    r = tg("folded", run)
    assert r.returncode == 0, r.stderr
    assert "has no allocation accounting" in r.stderr, r.stderr
    assert "has not ended" not in r.stderr, r.stderr
