"""aggregate=True with accounting and a thread per request: the recorder's
calling-context nodes do not grow with the threads that came and went
(src/recorder/acct_recycle.h; docs/accounting.md "Thread churn").

A folded thread's nodes without live blocks are added to its family's anchor
and their ids recycled: the nodes in use after 3N threads are those after N
(plus what blocks still live hold), the final snapshot says, path by path of
each folded family under the handler, exactly what the same run without
recycling (THREADGRAPH_ACCT_NO_RECYCLE) says, and the one at the peak no more.
"""
import os
from collections import defaultdict

from tgtest import only_dir, run_scenario

import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "cli"))
from clisupport import CLI  # noqa: E402
import subprocess  # noqa: E402

THREADS = 400
MARK = 150  # nodes in use read after MARK threads and after THREADS

CHURN = """
import gc, sys, threading
import threadgraph
from threadgraph import _recorder

def leaf(i):
    return [i] * (i % 7)

cache = []

def handler(k):
    keep = []
    for i in range(20):
        keep.append(leaf(i))
    if k % 50 == 0:
        cache.append(keep)  # a request's cached result: its blocks stay live

gc.disable()
p = threadgraph.ProcessProfile(default_log_path="out", aggregate=True, accounting=True)
p.enable()
seen = []
for k in range(THREADS):
    t = threading.Thread(target=handler, args=(k,), name="req-%d" % k if k % 3 == 0 else None)
    t.start()
    t.join()
    if k + 1 in (MARK, THREADS):
        seen.append(_recorder._test_acct_nodes())
p.disable()
print(seen)
""".replace("MARK", str(MARK)).replace("THREADS", str(THREADS))


def by_family_path(path):
    """{(thread name, call path): [live bytes, live blocks, bytes, blocks]} of a
    snapshot, and its process live bytes and peak."""
    names, nodes, head = {}, {}, {}
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            if line.startswith("# thread: "):
                ix, _, base = line[10:-1].partition(" ")
                names[ix] = base
            elif line.startswith("# "):
                key, _, value = line[2:-1].partition(": ")
                head[key] = value
            else:
                fields = line[:-1].split(" ", 7)
                if fields[0].isdigit():
                    nodes[fields[0]] = fields
    out = defaultdict(lambda: [0, 0, 0, 0])
    for fields in nodes.values():
        calls, up = [], fields
        while True:
            # the scenario's path names its run's directory
            calls.append(up[7][up[7].find("scenario.py"):] if "scenario.py" in up[7] else up[7])
            if up[1] == "-":
                break
            up = nodes[up[1]]
        key = (names.get(fields[2], fields[2]), tuple(calls))
        for i in range(4):
            out[key][i] += int(fields[3 + i])
    return dict(out), (head.get("process_live_bytes"), head.get("process_peak_bytes"))


def test_thread_churn_keeps_nodes_bounded_and_files_unchanged(tmp_path):
    runs = {}
    for kind, env in (("recycled", {}), ("kept", {"THREADGRAPH_ACCT_NO_RECYCLE": "1"})):
        d = tmp_path / kind
        d.mkdir()
        env.update(PYTHONHASHSEED="0")
        r = run_scenario(d, CHURN, env=env)
        runs[kind] = (eval(r.stdout.strip()), only_dir(d / "out"))
    (n1, t1, r1), (n2, t2, r2) = runs["recycled"][0]
    # Without recycling each thread keeps its ~35 nodes: the 250 threads
    # between the readings add some 9,000.  With it, only the nodes at which
    # a cached list is still live (and their ancestors: 5 threads of the 250
    # here, a handful of nodes each) and the trees of threads whose OS thread had not yet exited at
    # their fold (retried at the next folds): at most the trees of 16 threads.
    assert t2 - t1 >= (THREADS - MARK) * 3 // 4, runs["recycled"][0]
    assert r2 > r1, runs["recycled"][0]
    assert n2 - n1 <= 16 * 40, runs["recycled"][0]
    (k1, kt1, _), (k2, kt2, _) = runs["kept"][0]
    assert kt1 == kt2 == 0 and k2 - k1 > 10 * (THREADS - MARK), runs["kept"][0]
    # The folded families' paths under the handler say the same, path by
    # path (the other paths are not the same from run to run: the main
    # thread's waits, threading's set of locks that it empties at join, and
    # where the peak falls), and at the peak no path of theirs had more than
    # at the end (a double count of a recycled node's copy at the peak would).
    final = {}
    for kind in runs:
        rows, _ = by_family_path(os.path.join(runs[kind][1], "snapshot-1-final"))
        final[kind] = {k: v for k, v in rows.items()
                       if "*" in k[0] and any(c.endswith(":handler") for c in k[1])}
    assert final["recycled"] == final["kept"]
    assert len(final["recycled"]) >= 4, final["recycled"]
    # the handler's cached lists are still live, in their families
    assert any(k[1][0].endswith(":handler") and v[0] > 0 for k, v in final["recycled"].items())
    peak, _ = by_family_path(os.path.join(runs["recycled"][1], "snapshot-2-peak"))
    for k, v in peak.items():
        if k in final["recycled"]:
            assert v[2] <= final["recycled"][k][2] and v[3] <= final["recycled"][k][3], k
    # the commands read the renumbered files
    for snap in ("snapshot-1-final", "snapshot-2-peak"):
        r = subprocess.run([CLI, "top", os.path.join(runs["recycled"][1], snap)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
