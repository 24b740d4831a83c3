"""threadgraph summary, hist, top and diff on small accounting fixtures
(tests/cli/fixtures/accounting: two snapshots, one gzip-compressed, a summary)."""
import gzip
import os
import re

import pytest

from clisupport import FIXTURES, HAVE_GNUPLOT, REPO

ACC = os.path.join(FIXTURES, "accounting")
BEFORE = os.path.join(ACC, "snapshot-1-before")
FINAL = os.path.join(ACC, "snapshot-2-final")
LEAK_SITE = "/app/leak.py:3:leak it<-/app/main.py:1:main"
COMMANDS = ["summary", "hist", "top", "diff"]
OPT = re.compile(r"(?<![\w-])--[a-z][a-z_-]*[a-z]")


def rows(text):
    return [l.split(None, 4) if not l.startswith(" ") else l.split(None, 4)
            for l in text.splitlines() if l and not l.startswith("#")][1:]


def test_top_live_and_total(tg):
    r = tg("top", FINAL)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == (
        "# %s label final: 4 sites, live 1004500 bytes, allocated 2110000 bytes" % FINAL)
    # a version 1 snapshot: sites as written, no thread ("-")
    data = [l.split(None, 5) for l in r.stdout.splitlines()[2:]]
    assert data[0] == ["1000057", "2", "1000057", "2", "-", LEAK_SITE]
    assert [d[0] for d in data] == ["1000057", "2500", "1000", "943"]
    r = tg("top", "--sort", "total", "--top", "1", FINAL)
    assert r.returncode == 0, r.stderr
    data = [l.split(None, 5) for l in r.stdout.splitlines()[2:]]
    assert data == [["943", "1", "1100443", "26", "-",
                     "/app/churn.py:5:churn<-/app/main.py:1:main"]]


def test_top_reads_gzip_and_run_dirs(tg, tmp_path):
    plain = tg("top", FINAL).stdout.splitlines()[1:]
    assert tg("top", os.path.join(ACC, "final.gz")).stdout.splitlines()[1:] == plain
    assert tg("top", ACC).stdout.splitlines()[1:] == plain
    # a run directory whose only snapshots are compressed
    with open(BEFORE, "rb") as f:
        (tmp_path / "snapshot-1-x.gz").write_bytes(gzip.compress(f.read()))
    r = tg("top", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "snapshot-1-x.gz label before" in r.stdout


def test_diff_largest_growth_first(tg):
    r = tg("diff", "--base", BEFORE, FINAL)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[2] == "# growth: +1001500 bytes live, +2101000 bytes allocated"
    data = [l.split(None, 6) for l in lines[4:]]
    assert data == [
        ["+1000057", "+2", "0", "1000057", "+1000057", "*", LEAK_SITE],
        ["+943", "+1", "0", "943", "+1100443", "*", "/app/churn.py:5:churn<-/app/main.py:1:main"],
        ["+500", "+1", "2000", "2500", "+500", "*", "<no python frame>"],
    ]
    r = tg("diff", "--base", BEFORE, ACC, "--top", "1")
    assert [l.split(None, 6)[6] for l in r.stdout.splitlines()[4:]] == [LEAK_SITE]
    # the other way round the leak is the largest shrink: last
    r = tg("diff", "--base", FINAL, BEFORE)
    assert r.stdout.splitlines()[-1].split(None, 6)[6] == LEAK_SITE


def test_summary_table_and_json(tg):
    r = tg("summary", ACC)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["total_requested_bytes", "freed_bytes", "alloc_calls",
                                "free_calls", "live_bytes", "peak_bytes"]
    assert lines[1].split() == ["process", "2110000", "1105500", "70", "54", "1004500", "5005000"]
    assert lines[2].split() == ["thread", "leaker", "1000057", "0", "2", "0", "1000057", "1000057"]
    assert lines[3].split() == ["window", "event", "loop", "8000000", "8000000", "2", "2", "0",
                                "5005000"]
    r = tg("summary", "--json", ACC)
    assert r.returncode == 0, r.stderr
    assert '"peak_bytes": 5005000' in r.stdout


def test_hist_table(tg, tmp_path):
    r = tg("hist", "--no-graph", ACC)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[:5] == [
        "process",
        " BIN SIZE              ALLOCATIONS          FREES",
        "   6 32-63                      59             44",
        "  17 64Ki-128Ki                 10             10",
        "  20 512Ki-1024Ki                1              0",
    ]
    assert "thread leaker" in r.stdout
    r = tg("hist", "--script-only", "-o", str(tmp_path), ACC)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "hist-plot" / "hist.dat").read_text().splitlines() == [
        "6 32-63 59 44", "7 64-127 NaN NaN", "8 128-255 NaN NaN", "9 256-511 NaN NaN",
        "10 512-1023 NaN NaN", "11 1Ki-2Ki NaN NaN", "12 2Ki-4Ki NaN NaN",
        "13 4Ki-8Ki NaN NaN", "14 8Ki-16Ki NaN NaN", "15 16Ki-32Ki NaN NaN",
        "16 32Ki-64Ki NaN NaN", "17 64Ki-128Ki 10 10", "18 128Ki-256Ki NaN NaN",
        "19 256Ki-512Ki NaN NaN", "20 512Ki-1024Ki 1 NaN"]
    assert "plot 'hist.dat'" in (tmp_path / "hist-plot" / "hist.gp").read_text()


@pytest.mark.skipif(not HAVE_GNUPLOT, reason="gnuplot not installed")
def test_hist_graph(tg, tmp_path):
    r = tg("hist", "-o", str(tmp_path), ACC)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "hist.svg").stat().st_size > 0


def test_hist_log_axis_shows_a_bin_of_one(tg, tmp_path):
    # the log scale started at 1: a bin with one allocation had no height
    r = tg("hist", "--script-only", "-o", str(tmp_path), ACC)
    assert r.returncode == 0, r.stderr
    gp = (tmp_path / "hist-plot" / "hist.gp").read_text()
    assert "set logscale y\nset yrange [0.5:*]\n" in gp


def test_bad_input(tg, tmp_path):
    assert tg("top").returncode == 2
    assert tg("diff", FINAL).returncode == 2
    assert tg("top", "--sort", "size", FINAL).returncode == 2
    r = tg("top", str(tmp_path))
    assert r.returncode == 1 and "no snapshot" in r.stderr
    r = tg("summary", str(tmp_path))
    assert r.returncode == 1 and "no summary.txt" in r.stderr
    (tmp_path / "x").write_text("hello\n")
    r = tg("top", str(tmp_path / "x"))
    assert r.returncode == 1 and "not a threadgraph snapshot" in r.stderr
    bad = tmp_path / "snapshot-1-bad"
    bad.write_text("# threadgraph snapshot 1\n12 x 3 4 site\n5 1 5 1 ok site\n")
    r = tg("top", str(bad))
    assert r.returncode == 0 and "ok site" in r.stdout and "warning" in r.stderr
    r = tg("top", "--strict", str(bad))
    assert r.returncode == 1


def sections():
    with open(os.path.join(REPO, "docs", "cli.md")) as f:
        text = f.read()
    parts = re.split(r"^## ", text, flags=re.M)
    return {p.split("\n", 1)[0].strip(): p for p in parts[1:]}


def test_documented_options_in_help(tg):
    docs = sections()
    for cmd in COMMANDS:
        assert cmd in docs, cmd
        documented = set(OPT.findall(docs[cmd]))
        in_help = set(OPT.findall(tg(cmd, "--help").stdout))
        assert documented - in_help == set(), (cmd, documented - in_help)
        assert in_help - documented - {"--help"} == set(), (cmd, in_help - documented)


# --- format 2: calling-context trees per thread -------------------------------------

ACC2 = os.path.join(FIXTURES, "accounting2")
RUN_A = os.path.join(ACC2, "run-a")
RUN_B = os.path.join(ACC2, "run-b")
FILL = "/app/cache.py:3:fill"


def table(text, nnum):
    """Data rows as (numbers..., thread, site); fixture sites have no spaces,
    thread names may."""
    out = []
    for l in text.splitlines():
        if l.startswith("#") or l.lstrip().startswith(("LIVE", "SITE")):
            continue
        site = "<no python frame>" if l.endswith("<no python frame>") else l.split()[-1]
        t = l[:len(l) - len(site)].split()
        out.append(tuple(t[:nnum]) + (" ".join(t[nnum:]), site))
    return out


def test_top_per_thread_contexts(tg):
    r = tg("top", RUN_A)
    assert r.returncode == 0, r.stderr
    assert table(r.stdout, 4) == [
        ("3000", "4", "3000", "4", "MainThread", FILL + "<-/app/load.py:5:load<-/app/main.py:1:main"),
        ("3000", "3", "5000", "7", "worker 1", FILL + "<-/app/load.py:5:load<-/app/worker.py:2:run"),
        ("1000", "2", "1000", "2", "MainThread",
         FILL + "<-/app/refresh.py:8:refresh<-/app/main.py:1:main"),
        ("100", "1", "100", "1", "MainThread", "<no python frame>"),
    ]


def test_top_depth_and_merge_threads(tg):
    # one frame: per function and thread, the two MainThread paths summed
    r = tg("top", "--depth", "1", RUN_A)
    assert r.returncode == 0, r.stderr
    assert table(r.stdout, 4)[:2] == [("4000", "6", "4000", "6", "MainThread", FILL),
                                      ("3000", "3", "5000", "7", "worker 1", FILL)]
    assert ": 3 sites," in r.stdout.splitlines()[0]
    r = tg("top", "--depth", "2", "--merge-threads", "--sort", "total", RUN_A)
    assert r.returncode == 0, r.stderr
    assert table(r.stdout, 4) == [
        ("6000", "7", "8000", "11", "*", FILL + "<-/app/load.py:5:load"),
        ("1000", "2", "1000", "2", "*", FILL + "<-/app/refresh.py:8:refresh"),
        ("100", "1", "100", "1", "*", "<no python frame>"),
    ]
    # all frames: the same as the default here (the contexts are 3 deep)
    assert tg("top", "--depth", "0", RUN_A).stdout == tg("top", RUN_A).stdout


def test_diff_same_run_per_thread(tg):
    r = tg("diff", "--base", os.path.join(RUN_A, "snapshot-1-before"), RUN_A)
    assert r.returncode == 0, r.stderr
    assert table(r.stdout, 5) == [
        ("+3000", "+3", "0", "3000", "+5000", "worker 1",
         FILL + "<-/app/load.py:5:load<-/app/worker.py:2:run"),
        ("+2000", "+2", "1000", "3000", "+2000", "MainThread",
         FILL + "<-/app/load.py:5:load<-/app/main.py:1:main"),
        ("+1000", "+2", "0", "1000", "+1000", "MainThread",
         FILL + "<-/app/refresh.py:8:refresh<-/app/main.py:1:main"),
    ]


def test_diff_two_runs_merges_threads(tg):
    """The worker thread is "worker 1" in one run and "worker 7" in the other:
    merged (the default across runs), only the real growth shows."""
    r = tg("diff", "--base", RUN_A, RUN_B)
    assert r.returncode == 0, r.stderr
    assert table(r.stdout, 5) == [
        ("+2000", "+2", "3000", "5000", "+2000", "*",
         FILL + "<-/app/load.py:5:load<-/app/worker.py:2:run")]
    assert tg("diff", "--merge-threads", "--base", RUN_A, RUN_B).stdout == r.stdout
    r = tg("diff", "--per-thread", "--depth", "1", "--base", RUN_A, RUN_B)
    assert r.returncode == 0, r.stderr
    assert table(r.stdout, 5) == [
        ("+5000", "+5", "0", "5000", "+7000", "worker 7", FILL),
        ("-3000", "-3", "3000", "0", "-5000", "worker 1", FILL)]
    assert tg("diff", "--per-thread", "--merge-threads", "--base", RUN_A, RUN_B).returncode == 2


def test_bad_format2_input(tg, tmp_path):
    with open(os.path.join(RUN_A, "snapshot-2-final")) as f:
        good = f.read()
    # a node whose parent is missing: reported with its line, left out
    bad = tmp_path / "snapshot-1-bad"
    bad.write_text(good.replace("\n9 8 1 ", "\n9 77 1 "))
    r = tg("top", str(bad))
    assert r.returncode == 0, r.stderr
    assert "%s:23: malformed line skipped (parent node not listed before)" % bad in r.stderr
    assert "%s:24: malformed" % bad in r.stderr     # its child went with it
    assert "worker" not in r.stdout
    r = tg("top", "--strict", str(bad))
    assert r.returncode == 1 and "%s:23" % bad in r.stderr
    # hostile thread name: refused, not printed
    bad.write_text(good.replace("# thread: 1 worker 1", "# thread: 1 \x1b]0;owned\x07"))
    r = tg("top", "--strict", str(bad))
    assert r.returncode == 1 and "\x1b" not in r.stdout + r.stderr
    # an unknown format version
    bad.write_text(good.replace("snapshot 2", "snapshot 3"))
    r = tg("top", str(bad))
    assert r.returncode == 1
    assert "%s:1: unsupported snapshot format" % bad in r.stderr
    # a truncated .gz
    data = gzip.compress(good.encode())
    (tmp_path / "snapshot-2-cut.gz").write_bytes(data[:len(data) // 2])
    r = tg("top", str(tmp_path / "snapshot-2-cut.gz"))
    assert r.returncode == 1 and "snapshot-2-cut.gz" in r.stderr
    # contexts too long to print whole
    lines = ["# threadgraph snapshot 2", "# thread: 0 t"]
    lines += ["%d %s 0 1 1 1 1 /app/deep.py:1:%s" % (i, i - 1 if i else "-", "f" * 200)
              for i in range(4000)]
    bad.write_text("\n".join(lines) + "\n")
    r = tg("top", "--depth", "0", str(bad))
    assert r.returncode == 1 and "too deep to print whole" in r.stderr
    r = tg("top", str(bad), "--top", "1")
    assert r.returncode == 0 and r.stdout.count("<-") == 4


def test_hist_of_one_thread(tg, tmp_path):
    r = tg("hist", "--thread", "leaker", "--script-only", "-o", str(tmp_path), ACC)
    assert r.returncode == 0, r.stderr
    rows = (tmp_path / "hist-plot" / "hist.dat").read_text().splitlines()
    # leaker's own bins only: one 32-63 byte block and one 512Ki-1024Ki block,
    # neither freed (the process table has 59 and 10 allocations there).
    assert rows[0] == "6 32-63 1 NaN" and rows[-1] == "20 512Ki-1024Ki 1 NaN", rows
    assert all(r.endswith("NaN NaN") for r in rows[1:-1]), rows
    assert "set title 'Allocation sizes, thread leaker (power-of-two bins)'" in \
        (tmp_path / "hist-plot" / "hist.gp").read_text()
    r = tg("hist", "--thread", "nobody", "--no-graph", ACC)
    assert r.returncode == 1 and "no thread named 'nobody'" in r.stderr


SNAP_HEAD = ("# threadgraph snapshot 1\n# label: %s\n# number: %d\n"
             "# time: 1700000000.000000\n# pid: 42\n"
             "# columns: LIVE_BYTES LIVE_COUNT TOTAL_BYTES TOTAL_COUNT SITE\n")
INT64_MAX = (1 << 63) - 1


def test_counters_at_int64_limits_saturate(tg, tmp_path):
    """Counters near the int64 limits (a damaged or hostile snapshot): sums of sites
    that print the same and differences of two snapshots saturate instead of
    wrapping around (signed overflow, which UBSan reports)."""
    big = "%d %d %d %d" % ((INT64_MAX,) * 4)
    a = tmp_path / "a"
    a.write_text(SNAP_HEAD % ("a", 1) + big + " /app/a.py:1:f\n" + big + " /app/a.py:1:f\n"
                 "-%d 1 1 1 /app/b.py:1:g\n" % INT64_MAX)
    b = tmp_path / "b"
    b.write_text(SNAP_HEAD % ("b", 2) + "%d 1 1 1 /app/b.py:1:g\n" % INT64_MAX)
    r = tg("top", a)
    assert r.returncode == 0, r.stderr
    row = [l.split() for l in r.stdout.splitlines() if l.endswith("/app/a.py:1:f")]
    assert row and row[0][:4] == [str(INT64_MAX)] * 4, r.stdout
    r = tg("diff", "--base", a, b)
    assert r.returncode == 0, r.stderr
    row = [l.split() for l in r.stdout.splitlines() if l.endswith("/app/b.py:1:g")]
    assert row and row[0][0] == "+%d" % INT64_MAX, r.stdout
