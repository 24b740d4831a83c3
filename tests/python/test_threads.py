"""Cross-thread frees (threadgraph threads, summary.json "freed_by";
docs/accounting.md "Cross-thread frees").

A producer puts N bytearrays of SIZE bytes on a queue.Queue and a consumer
takes and drops them: exactly the handed-over arrays (each a buffer of SIZE + 1
bytes and an object of bytearray.__basicsize__) are allocated in Producer and
freed in Consumer.  The pair comes from accounting's per-block table, so the
run has accounting on; the capture and the text dumps are written together
(format "both"), and `threads` prints the same from either.
"""
import json
import os
import shutil
import subprocess

import pytest

import threadgraph
from tgtest import only_dir, run_scenario

CLI = os.path.join(os.path.dirname(threadgraph.__file__), "_bin", "threadgraph")
N, SIZE = 20, 100_000
ITEM = SIZE + 1 + bytearray.__basicsize__   # what one handed-over item holds
HEADER = 64                                  # a block header, per item
START_UP = 8192                              # a thread's own bookkeeping

PROGRAM = """
import queue
import threading
from threadgraph import ProcessProfile

N, SIZE = %d, %d
q = queue.Queue()

def producer():
    for i in range(N):
        q.put(bytearray(SIZE))
    q.put(None)

def consumer():
    while True:
        item = q.get()
        if item is None:
            break
        del item

p = ProcessProfile(default_log_path="out", format="both", accounting=True)
p.trackStack(True)
p.enable()
ts = [threading.Thread(target=producer, name="Producer"),
      threading.Thread(target=consumer, name="Consumer")]
for t in ts:
    t.start()
for t in ts:
    t.join()
p.disable()
""" % (N, SIZE)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("threads")
    run_scenario(tmp, PROGRAM)
    return only_dir(str(tmp / "out"))


def tg(*args):
    r = subprocess.run([CLI] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    assert r.returncode == 0, r.stderr
    return r


def check_handover(freed_by):
    pairs = {(p["allocated_in"], p["freed_in"]): p for p in freed_by}
    handed = pairs[("Producer", "Consumer")]
    assert N * ITEM <= handed["bytes"] <= N * (ITEM + HEADER)
    assert 2 * N <= handed["blocks"] <= 2 * N + 4   # an object and a buffer per item
    # nothing of that size went the other way
    back = pairs.get(("Consumer", "Producer"), {"bytes": 0})
    assert back["bytes"] < N * HEADER


def test_summary_json_has_the_pairs(run):
    with open(os.path.join(run, "summary.json")) as f:
        doc = json.load(f)
    check_handover(doc["freed_by"])
    assert doc["freed_by_lost_bytes"] == 0
    threads = {t["name"]: t for t in doc["threads"]}
    # what Producer made and is still live: not the handed-over arrays
    assert threads["Producer"]["live_at_end_bytes"] < START_UP
    assert threads["Producer"]["total_requested_bytes"] >= N * ITEM


def test_threads_json(run):
    doc = json.loads(tg("threads", "--json", run).stdout)
    assert set(doc) == {"threads", "freed_by"}
    for t in doc["threads"]:
        assert set(t) == {"name", "allocated", "freed", "peak", "live_at_end"}
    for p in doc["freed_by"]:
        assert set(p) == {"allocated_in", "freed_in", "bytes", "blocks"}
    check_handover(doc["freed_by"])
    with open(os.path.join(run, "summary.json")) as f:
        summary = json.load(f)
    assert doc["freed_by"] == summary["freed_by"]
    threads = {t["name"]: t for t in doc["threads"]}
    s = {t["name"]: t for t in summary["threads"]}
    for name in ("Producer", "Consumer"):
        assert threads[name] == {"name": name,
                                 "allocated": s[name]["total_requested_bytes"],
                                 "freed": s[name]["freed_bytes"],
                                 "peak": s[name]["peak_bytes"],
                                 "live_at_end": s[name]["live_at_end_bytes"]}
    # Consumer freed the arrays: its own balance is negative, Producer's is not
    assert threads["Consumer"]["freed"] >= N * ITEM
    assert threads["Producer"]["peak"] >= N * ITEM


def test_threads_text_table(run):
    out = tg("threads", run).stdout
    lines = out.splitlines()
    assert lines[0].split() == ["THREAD", "ALLOCATED", "FREED", "PEAK", "LIVE", "AT", "END"]
    assert "Freed by another thread than the one that allocated it:" in lines
    row = [l for l in lines if l.split()[:2] == ["Producer", "Consumer"]]
    assert row and row[0].split()[-1] == str(
        json.loads(tg("threads", "--json", run).stdout)["freed_by"][0]["blocks"])


def test_threads_without_accounting_says_so(run, tmp_path):
    # the text dumps alone: held memory only, and why the rest is missing
    for n in os.listdir(run):
        if n.endswith((".mem", ".stack")):
            shutil.copy(os.path.join(run, n), str(tmp_path))
    r = tg("threads", "--json", str(tmp_path))
    assert "need a run with accounting on" in r.stderr
    doc = json.loads(r.stdout)
    assert doc["freed_by"] == []
    t = {x["name"]: x for x in doc["threads"]}
    assert t["Producer"]["allocated"] is None and t["Producer"]["freed"] is None
    # Producer's held memory (its own balance) keeps the arrays Consumer freed
    assert N * ITEM <= t["Producer"]["peak"] <= N * (ITEM + HEADER) + START_UP
    assert N * ITEM <= t["Producer"]["live_at_end"] <= t["Producer"]["peak"]
    assert t["Consumer"]["live_at_end"] < -N * ITEM + START_UP   # it freed what it did not make
    # the capture alone gives the same figures, within a thread's start-up:
    # its LEVEL marks (docs/formats.md) also see what the threads' open calls
    # (threading's own code) allocated and freed themselves
    cap = tmp_path / "cap"
    cap.mkdir()
    shutil.copy(os.path.join(run, "capture.tg"), str(cap))
    c = {x["name"]: x for x in json.loads(tg("threads", "--json", str(cap)).stdout)["threads"]}
    assert sorted(c) == sorted(t)
    for name in ("Producer", "Consumer"):
        for k in ("peak", "live_at_end"):
            assert abs(c[name][k] - t[name][k]) <= START_UP, (name, k, c[name], t[name])
    text = tg("threads", str(tmp_path)).stdout
    assert "ALLOCATED and FREED and the\ncross-thread frees need a run with accounting" in text


def test_report_tables(run, tmp_path):
    out = tmp_path / "r.html"
    tg("report", run, "-o", str(out))
    html = out.read_text()
    handed = json.loads(tg("threads", "--json", run).stdout)["freed_by"][0]
    assert ('<tr><td>Producer</td><td>Consumer</td><td class="num">%d</td>'
            '<td class="num">%d</td></tr>' % (handed["bytes"], handed["blocks"])) in html
    # the largest peak's shares: Producer drove it
    shares = html[html.index("Who drove it"):]
    assert shares.index("<tr><td>Producer</td>") < shares.index("<tr><td>MainThread</td>")


SAMPLED = PROGRAM.replace("N, SIZE = %d, %d" % (N, SIZE), "N, SIZE = 8, 1 << 20").replace(
    'format="both", accounting=True', 'format="binary", sample_bytes=65536')


def test_sampled_pairs_are_estimates(tmp_path):
    # under sample_bytes a block is paired when it is sampled, with its weight:
    # 1 MiB buffers are all but surely sampled (weight ~ their size), the small
    # objects rarely (weight ~ 64 KiB each), so the pair is N MiB within a few KiB
    run_scenario(tmp_path, SAMPLED, env={"THREADGRAPH_SAMPLE_SEED": "7"})
    run = only_dir(str(tmp_path / "out"))
    doc = json.loads(tg("threads", "--json", run).stdout)
    pairs = {(p["allocated_in"], p["freed_in"]): p for p in doc["freed_by"]}
    handed = pairs[("Producer", "Consumer")]["bytes"]
    assert abs(handed - 8 * ((1 << 20) + 1)) < 8 * (1 << 20) // 100
