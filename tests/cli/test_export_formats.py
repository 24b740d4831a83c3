"""threadgraph export --pprof / --speedscope on the fixtures: a format 1
accounting snapshot, the tutorial's text dumps (no accounting: the per-call
deltas), and the bound on a deep profile.  The planted-allocation tests, with
an independent protobuf reader, are tests/python/test_export_profiles.py."""
import gzip
import json
import os

from clisupport import FIXTURES

ACC = os.path.join(FIXTURES, "accounting")


def speedscope(tg, tmp_path, *args):
    out = tmp_path / "p.json"
    r = tg("export", "--speedscope", out, *args)
    assert r.returncode == 0, r.stderr
    with open(str(out)) as f:
        doc = json.load(f)
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = doc["shared"]["frames"]
    stacks = {}
    for p in doc["profiles"]:
        assert p["type"] == "sampled" and p["unit"] == "bytes"
        assert len(p["samples"]) == len(p["weights"])
        assert p["endValue"] == sum(p["weights"]) and p["startValue"] == 0
        for st, w in zip(p["samples"], p["weights"]):
            key = (p["name"], tuple(frames[i]["name"] for i in st))
            stacks[key] = stacks.get(key, 0) + w
    return r, stacks


def test_format1_snapshot(tg, tmp_path):
    # a format 1 site "leak.py:3:leak it<-main.py:1:main": outermost first in speedscope
    r, stacks = speedscope(tg, tmp_path, ACC)
    assert stacks[("<no thread>", ("main", "leak it"))] == 1000057
    assert stacks[("<no thread>", ("main", "churn"))] == 1100443
    r, stacks = speedscope(tg, tmp_path, "--metric", "live", ACC)
    assert stacks[("<no thread>", ("main", "churn"))] == 943
    out = tmp_path / "p.pb.gz"
    r = tg("export", "--pprof", "-o", out, os.path.join(ACC, "final.gz"))
    assert r.returncode == 0, r.stderr
    # a format 1 snapshot names no threads: all its samples are "<no thread>"
    assert ("wrote a pprof profile of 4 samples (0 threads, and 4 samples with no "
            "thread, labelled '<no thread>')") in r.stderr
    with gzip.open(str(out)) as f:
        data = f.read()
    # string_table's first entry is "" (field 6, length 0), the thread label's key there
    assert b"\x32\x00" in data and b"thread" in data and b"leak it" in data


def test_no_thread_is_not_counted_as_a_thread(tg, tmp_path):
    # allocations made before a thread's first call have no thread: their
    # "<no thread>" label is not a thread, and speedscope opens on a real one
    snap = tmp_path / "snapshot-1-final"
    snap.write_text("# threadgraph snapshot 2\n# thread: 0 MainThread\n# thread: 1 Loader\n"
                    "# columns: ID PARENT THREAD LIVE_BYTES LIVE_COUNT TOTAL_BYTES "
                    "TOTAL_COUNT CALL\n"
                    "0 - - 94 1 622 4 <no python frame>\n"
                    "1 - 0 100 1 200 2 /m.py:1:main\n"
                    "2 - 1 300 1 300 1 /l.py:1:load\n"
                    "3 2 1 0 0 50 1 /l.py:5:parse\n")
    r = tg("export", "--pprof", "-o", tmp_path / "p.pb.gz", "--speedscope",
           tmp_path / "p.json", snap)
    assert r.returncode == 0, r.stderr
    tail = "(2 threads, and 1 sample with no thread, labelled '<no thread>')"
    assert "wrote a pprof profile of 4 samples " + tail in r.stderr, r.stderr
    assert "wrote a speedscope profile of 4 samples " + tail in r.stderr, r.stderr
    with open(str(tmp_path / "p.json")) as f:
        doc = json.load(f)
    assert [p["name"] for p in doc["profiles"]] == ["MainThread", "Loader", "<no thread>"]
    assert doc["activeProfileIndex"] == 0
    # without it, the count is the threads'
    snap.write_text("\n".join(snap.read_text().splitlines()[:4] + ["1 - 0 100 1 200 2 /m.py:1:main"])
                    + "\n")
    r = tg("export", "--pprof", "-o", tmp_path / "q.pb.gz", snap)
    assert r.returncode == 0, r.stderr
    assert "wrote a pprof profile of 1 sample (1 thread) to " in r.stderr, r.stderr


def test_text_dumps_without_accounting(tg, tmp_path, tutorial):
    r, stacks = speedscope(tg, tmp_path, tutorial)
    assert "has no allocation accounting" in r.stderr
    assert stacks and all(w > 0 for w in stacks.values())
    assert {name for name, _ in stacks} <= {n[:-4] for n in os.listdir(tutorial)
                                            if n.endswith(".mem")}


def test_deep_profile_is_refused(tg, tmp_path):
    # a 6000-deep chain allocating at every level: 18 million stack frames
    snap = tmp_path / "snapshot-1-final"
    lines = ["# threadgraph snapshot 2", "# thread: 0 MainThread",
             "# columns: ID PARENT THREAD LIVE_BYTES LIVE_COUNT TOTAL_BYTES TOTAL_COUNT CALL"]
    lines += ["%d %s 0 8 1 8 1 /r.py:1:rec" % (i + 1, i if i else "-") for i in range(6000)]
    snap.write_text("\n".join(lines) + "\n")
    r = tg("export", "--pprof", "-o", tmp_path / "p.pb.gz", snap)
    assert r.returncode == 1 and "more than 16777216 frames" in r.stderr, r.stderr
    assert not (tmp_path / "p.pb.gz").exists()


def test_usage_errors(tg, tmp_path):
    r = tg("export", "-o", tmp_path / "x", "--speedscope", tmp_path / "p.json", ACC)
    assert r.returncode == 2 and "-o names --pprof's file" in r.stderr
    r = tg("export", "--metric", "live", ACC)
    assert r.returncode == 2 and "--metric chooses --speedscope's weights" in r.stderr
    r = tg("export", "--max-output", "1", "--speedscope", tmp_path / "p.json", ACC)
    assert r.returncode == 2 and "--max-output" in r.stderr


def test_an_output_never_replaces_the_input_or_the_other_output(tg, tmp_path):
    snap = tmp_path / "snapshot-2-final"
    with open(os.path.join(ACC, "snapshot-2-final"), "rb") as f:
        before = f.read()
    snap.write_bytes(before)
    r = tg("export", "--speedscope", snap, snap)
    assert r.returncode == 1 and "is the snapshot to read" in r.stderr
    r = tg("export", "--pprof", "-o", snap, snap)
    assert r.returncode == 1 and "is the snapshot to read" in r.stderr
    assert snap.read_bytes() == before
    out = tmp_path / "p.out"
    r = tg("export", "--pprof", "-o", out, "--speedscope", str(tmp_path / "." / "p.out"), ACC)
    assert r.returncode == 2 and "name the same file" in r.stderr
    assert not out.exists()


def test_an_output_never_replaces_what_a_run_directory_stands_for(tg, tmp_path):
    # a run directory given as the input stands for its final snapshot (or,
    # without accounting, its capture or text dumps): those are inputs too
    import shutil
    runs = {}
    for name in ("accounting", "capture-v2-plain", "tutorial"):
        runs[name] = tmp_path / name
        shutil.copytree(os.path.join(FIXTURES, name), str(runs[name]))
    victims = [(runs["accounting"], "snapshot-2-final", "the run's snapshot"),
               (runs["capture-v2-plain"], "capture.tg", "the run's capture"),
               (runs["tutorial"], "Thread-7.mem", "a dump of the run"),
               (runs["tutorial"], "Thread-7.stack", "a dump of the run")]
    for run, name, what in victims:
        victim = run / name
        before = victim.read_bytes()
        for args in (["--pprof", "-o", victim], ["--speedscope", victim],
                     ["--pprof", "-o", tmp_path / "ok.pb.gz", "--speedscope", victim],
                     ["--speedscope", str(run / "." / name)]):
            r = tg("export", *(args + [run]))
            assert r.returncode == 1, (args, r.stderr)
            assert what in r.stderr and "write the profile to another file" in r.stderr
            assert victim.read_bytes() == before, args
            assert not (tmp_path / "ok.pb.gz").exists()
    # a new file in the run directory is fine
    r = tg("export", "--pprof", "-o", runs["accounting"] / "mem.pb.gz", runs["accounting"])
    assert r.returncode == 0, r.stderr


def test_speedscope_counts_the_samples_it_writes(tg, tmp_path):
    # --metric live leaves out the samples of no live bytes (all freed): the
    # line on stderr counts what the file holds, not the pprof profile's samples
    snap = tmp_path / "snapshot-1-final"
    snap.write_text("# threadgraph snapshot 2\n# thread: 0 MainThread\n# thread: 1 Loader\n"
                    "# columns: ID PARENT THREAD LIVE_BYTES LIVE_COUNT TOTAL_BYTES "
                    "TOTAL_COUNT CALL\n"
                    "0 - - 0 0 622 4 <no python frame>\n"
                    "1 - 0 100 1 200 2 /m.py:1:main\n"
                    "2 - 1 300 1 300 1 /l.py:1:load\n"
                    "3 2 1 0 0 50 1 /l.py:5:parse\n")
    out = tmp_path / "p.json"
    r = tg("export", "--pprof", "-o", tmp_path / "p.pb.gz", "--speedscope", out,
           "--metric", "live", snap)
    assert r.returncode == 0, r.stderr
    with open(str(out)) as f:
        doc = json.load(f)
    written = sum(len(p["samples"]) for p in doc["profiles"])
    assert written == 2
    assert ("wrote a pprof profile of 4 samples (2 threads, and 1 sample with no thread, "
            "labelled '<no thread>')") in r.stderr, r.stderr
    assert "wrote a speedscope profile of 2 samples (2 threads) to" in r.stderr, r.stderr
    r = tg("export", "--speedscope", out, snap)
    assert r.returncode == 0, r.stderr
    assert ("wrote a speedscope profile of 4 samples (2 threads, and 1 sample with no "
            "thread, labelled '<no thread>')") in r.stderr, r.stderr
