"""threadgraph folded, flamegraph and report on a small planted run
(tests/cli/fixtures/flamerun: two threads' .stack/.mem dumps, a final and a peak
snapshot, an accounting summary), whose values were worked out by hand:

  MainThread: main (4000) > load (3500) > fill (3000); main > load (-200); main > len (0)
  worker 1:   run (1000) > step;odd (1000); never (no return: still running)
"""
import base64
import gzip
import os
import re
import shutil
import xml.etree.ElementTree as ET

import pytest

from clisupport import FIXTURES, HAVE_GNUPLOT

RUN = os.path.join(FIXTURES, "flamerun")
SVG = "{http://www.w3.org/2000/svg}"
INNER = 1200 - 20  # the default width minus both margins: the root's width in px
MAIN = "main (/app/main.py:1)"
LOAD = MAIN + ";load (/app/load.py:5)"
FILL = LOAD + ";fill (/app/cache.py:3)"

EXPECTED = {
    "alloc": {"<no thread>;<no python frame>": 270, "MainThread;<no python frame>": 100,
              "MainThread;" + MAIN: 500, "MainThread;" + LOAD: 700,
              "MainThread;" + FILL: 3000, "worker 1;run (/app/work.py:10)": 1000},
    "live": {"<no thread>;<no python frame>": 94, "MainThread;<no python frame>": 100,
             "MainThread;" + FILL: 3000, "worker 1;run (/app/work.py:10)": 1100},
    "peak": {"MainThread;" + MAIN: 1000, "MainThread;" + LOAD: 2000,
             "MainThread;" + FILL: 5000, "worker 1;run (/app/work.py:10)": 1000},
    # own deltas: main 4000-(3500-200+0)=700, load 3500-3000=500 and -200 (left out),
    # fill 3000, run 1000-1000=0, step 1000; ';' in a name becomes ','
    "delta": {"MainThread;" + MAIN: 700, "MainThread;" + LOAD: 500,
              "MainThread;" + FILL: 3000,
              "worker 1;run (/app/work.py:10);step,odd (/app/work.py:20)": 1000},
    # own times in microseconds: main 2000-(300+300+100), load 200+300, fill 100 ...
    "time": {"MainThread;" + MAIN: 1300, "MainThread;" + MAIN + ";len (builtins:9)": 100,
             "MainThread;" + LOAD: 500, "MainThread;" + FILL: 100,
             "worker 1;run (/app/work.py:10)": 70,
             "worker 1;run (/app/work.py:10);step,odd (/app/work.py:20)": 30},
}


def folded(tg, *args):
    r = tg("folded", *args)
    assert r.returncode == 0, r.stderr
    out = {}
    for line in r.stdout.splitlines():
        stack, value = line.rsplit(" ", 1)
        assert stack not in out, "stack printed twice: %r" % line
        out[stack] = int(value)
    return out, r


def snapshot_column(path, col):
    """Sum of one counter column over a snapshot's nodes (an independent reading)."""
    total = 0
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            total += int(line.split(" ", 7)[col])
    return total


@pytest.mark.parametrize("metric", sorted(EXPECTED))
def test_folded_metrics(tg, metric):
    out, r = folded(tg, "--metric", metric, RUN)
    assert out == EXPECTED[metric]
    if metric in ("delta", "time"):
        assert "1 call had no return record" in r.stderr


def test_folded_totals_are_the_snapshot_totals(tg):
    final = os.path.join(RUN, "snapshot-1-final")
    peak = os.path.join(RUN, "snapshot-2-peak")
    assert sum(folded(tg, RUN)[0].values()) == snapshot_column(final, 5)
    assert sum(folded(tg, "--metric", "live", RUN)[0].values()) == snapshot_column(final, 3)
    assert sum(folded(tg, "--metric", "peak", RUN)[0].values()) == snapshot_column(peak, 3)
    # a snapshot file instead of the run directory
    assert folded(tg, "--metric", "live", final)[0] == EXPECTED["live"]


def test_folded_thread_and_merge(tg):
    out, _ = folded(tg, "--thread", "worker 1", "--metric", "delta", RUN)
    assert out == {"run (/app/work.py:10);step,odd (/app/work.py:20)": 1000}
    out, _ = folded(tg, "--merge-threads", RUN)
    assert out == {"<no python frame>": 370, MAIN: 500, LOAD: 700, FILL: 3000,
                   "run (/app/work.py:10)": 1000}
    r = tg("folded", "--thread", "nosuch", RUN)
    assert r.returncode == 1 and "no thread 'nosuch'" in r.stderr
    r = tg("folded", "--thread", "x", "--merge-threads", RUN)
    assert r.returncode == 2


def test_folded_says_what_the_run_lacks(tg, tmp_path):
    for name in ("MainThread.mem", "snapshot-1-final"):
        shutil.copy(os.path.join(RUN, name), str(tmp_path))
    r = tg("folded", "--metric", "peak", tmp_path)
    assert r.returncode == 1
    assert "snapshot-N-peak" in r.stderr and "accounting" in r.stderr
    r = tg("folded", "--metric", "delta", tmp_path)
    assert r.returncode == 1 and "--stack" in r.stderr
    r = tg("folded", "--metric", "nosuch", RUN)
    assert r.returncode == 2 and "unknown metric" in r.stderr
    r = tg("folded", "--no_time", "--metric", "time", RUN)
    assert r.returncode == 1 and "timestamps" in r.stderr
    r = tg("folded", RUN, RUN)
    assert r.returncode == 2


def test_a_thread_without_its_stack_file_is_left_out_with_a_warning(tg, tmp_path):
    """The delta and time metrics pair each thread's .stack and .mem: a .mem
    without its .stack is left out, and folded, flamegraph and the report say so
    (they used to drop the thread silently, exit 0)."""
    run = tmp_path / "run"
    shutil.copytree(RUN, str(run))
    os.remove(str(run / "worker 1.stack"))
    for metric in ("delta", "time"):
        r = tg("folded", "--metric", metric, run)
        assert r.returncode == 0, r.stderr
        assert "worker 1" not in r.stdout
        assert ("warning: thread 'worker 1' left out: no .stack file beside '%s' (the %s "
                "metric pairs each thread's .stack and .mem)" % (run / "worker 1.mem", metric)
                ) in r.stderr, r.stderr
    r = tg("flamegraph", "--metric", "delta", "-o", tmp_path / "f.svg", run)
    assert r.returncode == 0 and "thread 'worker 1' left out" in r.stderr, r.stderr
    # --thread names one thread: the others' files are not looked at
    r = tg("folded", "--metric", "delta", "--thread", "MainThread", run)
    assert r.returncode == 0 and "left out" not in r.stderr, r.stderr
    # several: counted, the first named; process.mem is no thread; a .mem.gz counts
    shutil.copy(str(run / "MainThread.mem"), str(run / "W2.mem"))
    with open(str(run / "MainThread.mem"), "rb") as f, \
            gzip.open(str(run / "W3.mem.gz"), "wb") as g:
        g.write(f.read())
    r = tg("folded", "--metric", "delta", run)
    assert r.returncode == 0, r.stderr
    assert ("warning: 3 threads left out: no .stack file beside their .mem ('%s' and 2 "
            "others;" % (run / "W2.mem")) in r.stderr, r.stderr
    # the report (no accounting: a delta flame graph) notes it in its flame graph
    for name in os.listdir(str(run)):
        if name.startswith(("snapshot-", "summary")) or name in ("W2.mem", "W3.mem.gz"):
            os.remove(str(run / name))
    r = tg("report", "-o", tmp_path / "r.html", run)
    assert r.returncode == 0, r.stderr
    assert "thread 'worker 1' left out of the delta flame graph: no .stack file" in r.stderr
    assert "left out of the delta flame graph" in (tmp_path / "r.html").read_text()
    # intact: no such warning
    r = tg("folded", "--metric", "delta", RUN)
    assert r.returncode == 0 and "left out" not in r.stderr, r.stderr


def test_folded_delta_without_timestamps(tg, tmp_path):
    for name in os.listdir(RUN):
        if name.endswith((".mem", ".stack")):
            with open(os.path.join(RUN, name)) as f:
                text = re.sub(r"^( *)\d+\.\d+#", r"\1", f.read(), flags=re.M)
            (tmp_path / name).write_text(text)
    out, _ = folded(tg, "--no_time", "--metric", "delta", tmp_path)
    assert out == EXPECTED["delta"]


def sampled_copy(tmp_path):
    with open(os.path.join(RUN, "snapshot-2-peak")) as f:
        lines = f.read().splitlines(True)
    lines.insert(2, "# sampled: 4096\n")
    (tmp_path / "snapshot-2-peak").write_text("".join(lines))
    return tmp_path


def test_sampled_snapshot_is_said_to_be_estimates(tg, tmp_path):
    run = sampled_copy(tmp_path)
    out, r = folded(tg, "--metric", "peak", run)
    assert out == EXPECTED["peak"]
    assert "estimates" in r.stderr
    svg = tmp_path / "f.svg"
    r = tg("flamegraph", "--metric", "peak", "-o", svg, run)
    assert r.returncode == 0, r.stderr
    title = ET.parse(str(svg)).getroot().findall(SVG + "text")[0]
    assert "sampled: estimates" in "".join(title.itertext())
    shutil.copy(os.path.join(RUN, "summary.txt"), str(run))
    r = tg("report", "--metric", "peak", "-o", tmp_path / "r.html", run)
    assert r.returncode == 0, r.stderr
    html = (tmp_path / "r.html").read_text()
    assert "the peak values are estimates" in html and "(sampled: estimates)" in html


def frames(svg_path):
    """{frame text: (x, width)} of every frame box in a flame graph."""
    root = ET.parse(str(svg_path)).getroot()
    out = {}
    for g in root.iter(SVG + "g"):
        if "f" not in g.get("class", "").split():
            continue
        name = g.find(SVG + "title").text.split("\n")[0]
        rect = g.find(SVG + "rect")
        out.setdefault(name, []).append((float(rect.get("x")), float(rect.get("width"))))
    return root, out


def test_flamegraph_widths(tg, tmp_path):
    svg = tmp_path / "flame.svg"
    r = tg("flamegraph", RUN, "-o", svg)
    assert r.returncode == 0, r.stderr
    root, fr = frames(svg)
    assert root.get("width") == "1200"
    total = sum(EXPECTED["alloc"].values())
    assert fr["all"] == [(10.0, INNER)]
    fill = fr["fill (/app/cache.py:3)"]
    assert len(fill) == 1 and fill[0][1] == pytest.approx(3000 / total * INNER, abs=1e-3)
    # a caller is as wide as itself and its callees
    assert fr["main (/app/main.py:1)"][0][1] == pytest.approx(4200 / total * INNER, abs=1e-3)
    assert fr["MainThread"][0][1] == pytest.approx(4300 / total * INNER, abs=1e-3)
    # callees start at their caller's left edge
    assert fill[0][0] == pytest.approx(fr["load (/app/load.py:5)"][0][0], abs=1e-3)
    # self-contained: one inline script, nothing referenced outside
    text = svg.read_text()
    assert "<script" in text and not re.search(r"(href|src)=\"(https?:|//)", text)
    # the delta graph draws the escaped name and says what it left out
    r = tg("flamegraph", "--metric", "delta", RUN, "-o", svg)
    assert r.returncode == 0, r.stderr
    root, fr = frames(svg)
    assert "step,odd (/app/work.py:20)" in fr
    assert "own-code frees not shown: 200 B" in svg.read_text()


def test_flamegraph_escapes_names(tg, tmp_path):
    nasty = '<b>&"\'x</b>'
    lines = open(os.path.join(RUN, "snapshot-1-final")).read().replace(
        "/app/cache.py:3:fill", "/app/c<&>.py:3:" + nasty)
    (tmp_path / "snapshot-1-final").write_text(lines + "8 7 1 5 1 5 1 /app/\xff\xfe.py:1:bad\n")
    svg = tmp_path / "flame.svg"
    r = tg("flamegraph", tmp_path, "-o", svg)
    assert r.returncode == 0, r.stderr
    _, fr = frames(svg)  # parses: the text is escaped and valid UTF-8
    assert nasty + " (/app/c<&>.py:3)" in fr


def test_flamegraph_many_frames_stays_readable(tg, tmp_path):
    """20,000 distinct frames: the narrow ones are merged or hidden and counted."""
    lines = ["# threadgraph snapshot 2", "# label: final", "# thread: 0 MainThread",
             "1 - 0 0 0 10 1 /app/main.py:1:main"]
    node = 2
    big = 0
    for i in range(200):  # 200 modules, each with 100 functions of very unequal sizes
        mod = node
        lines.append("%d 1 0 0 0 0 0 /app/mod%d.py:1:module_%d" % (mod, i, i))
        node += 1
        for j in range(99):
            size = 1000000 if (i % 50 == 0 and j == 0) else 1 + (i * 7 + j * 13) % 50
            big += size
            lines.append("%d %d 0 %d 1 %d 1 /app/mod%d.py:%d:f_%d_%d"
                         % (node, mod, size, size, i, j + 2, i, j))
            node += 1
    (tmp_path / "snapshot-1-final").write_text("\n".join(lines) + "\n")
    svg = tmp_path / "flame.svg"
    r = tg("flamegraph", tmp_path, "-o", svg)
    assert r.returncode == 0, r.stderr
    m = re.search(r"(\d+) frames drawn, (\d+) narrower than 0.1 px hidden", r.stderr)
    assert m, r.stderr
    drawn, hidden = int(m.group(1)), int(m.group(2))
    root, fr = frames(svg)
    assert drawn + hidden == node - 1 + 2  # the nodes, the thread frame and "all"
    assert hidden > 10000
    sub = "".join(root.findall(SVG + "text")[1].itertext())
    assert "%d frames narrower than 0.1 px hidden" % hidden in sub
    boxes = [n for n in fr if re.match(r"\[\d+ small frames\]$", n)]
    assert boxes
    assert os.path.getsize(str(svg)) < 2000000
    # every level still adds up: the children of "all" span the root
    total = big + 10
    assert fr["main (/app/main.py:1)"][0][1] == pytest.approx(INNER, abs=1e-3)
    assert fr["f_0_0 (/app/mod0.py:2)"][0][1] == pytest.approx(1000000 / total * INNER,
                                                                abs=1e-3)


@pytest.mark.skipif(not HAVE_GNUPLOT, reason="gnuplot not installed")
def test_report_process_rebase_default_is_memg_s(tg, tmp_path):
    """report --process draws the process line as memg does: absolute MB on a
    second axis unless --process_rebase N is given; --help says so (it claimed
    a default rebase of 30000 KB, which is not applied)."""
    def process_titles(*opts):
        out = tmp_path / "r.html"
        r = tg("report", "--process", *(list(opts) + [RUN, "-o", out]))
        assert r.returncode == 0, r.stderr
        titles = set()
        for m in re.finditer(r"data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)", out.read_text()):
            svg = base64.b64decode(m.group(1)).decode("utf-8", "replace")
            titles |= set(re.findall(r"Process \([^<)]*\)", svg))
        return titles
    assert process_titles() == {"Process (MB, right axis)"}
    assert process_titles("--process_rebase", "30000") == {"Process (KB - 30000)"}
    helptext = " ".join(tg("report", "--help").stdout.split())
    assert "(default 30000)" not in helptext
    assert "default: absolute MB on a second axis" in helptext


def test_report_sections(tg, tmp_path):
    out = tmp_path / "report.html"
    r = tg("report", "--peak", "1", "--peak_delta_time", "0", "--peak_delta_value", "0",
           RUN, "-o", out)
    assert r.returncode == 0, r.stderr
    html = out.read_text()
    for anchor in ("held", "memory", "peaks", "flamegraph-peak", "flamegraph-alloc",
                   "accounting"):
        assert html.count('id="%s"' % anchor) == 1
        assert 'href="#%s"' % anchor in html
    for svg_id in ("flame-peak", "flame-alloc"):
        assert html.count('id="%s"' % svg_id) == 1
    links = re.findall(r'href="#(peak-\d+)"', html)
    assert len(links) == 3  # fill, load and main: the returns above 1 KB
    for link in links:
        assert 'id="%s"' % link in html
    # the peak of fill links to decorate-stack's subtree of that call
    fill = re.search(r'<section class="peak" id="(peak-\d+)"><h3>[^<]*MainThread &gt; '
                     r'<code>/app/cache.py:4:fill=&gt;3000</code></h3>\n<pre>([^<]*)</pre>', html)
    assert fill, html
    assert fill.group(2).startswith("fill@/app/cache.py:3-4, Time: ")
    assert "Memory: 3000 B" in fill.group(2)
    # numbers that look wrong are explained where they are shown
    assert "a temporary its caller frees right after counts as the call's growth" in html
    assert "a garbage collection run during a call counts all it freed to that call" in html
    # times for people ("48.9 ms"), not repr(float) seconds ("9.5367431640625e-07 s")
    main = re.search(r"main@/app/main.py:1-2, Time: [0-9.]+ (ns|us|ms|s|min), Memory: 4000 B\n"
                     r"  load@/app/load.py:5-7, [^\n]*Memory: 3500 B\n"
                     r"    fill@/app/cache.py:3-4, ", html)
    assert main, html
    assert "total_requested_bytes" in html
    assert not re.search(r"(href|src)=\"(https?:|//)", html)
    assert "<script src" not in html
    if HAVE_GNUPLOT:
        # held memory, memory by thread, allocation sizes
        assert html.count('src="data:image/svg+xml;base64,') == 3
    else:
        assert "needs gnuplot" in html


def test_report_without_gnuplot_renders_the_rest(tg, tmp_path):
    out = tmp_path / "report.html"
    r = tg("report", RUN, "-o", out, env={"GNUPLOT": str(tmp_path / "no-gnuplot")})
    assert r.returncode == 0, r.stderr
    html = out.read_text()
    assert "the graph needs gnuplot" in html and "gnuplot not found" in r.stderr
    assert 'id="flame-alloc"' in html and "total_requested_bytes" in html
    assert "data:image/svg+xml" not in html


def test_report_warns_about_an_unreadable_accounting_summary(tg, tmp_path):
    """Summary files that are there but unreadable are warned about."""
    for name in os.listdir(RUN):
        shutil.copy(os.path.join(RUN, name), str(tmp_path))
    (tmp_path / "summary.txt").write_bytes(b"not a summary\n")
    out = tmp_path / "report.html"
    r = tg("report", tmp_path, "-o", out, env={"GNUPLOT": str(tmp_path / "no-gnuplot")})
    assert r.returncode == 0, r.stderr
    assert "warning: no accounting summary: " in r.stderr, r.stderr
    assert "no accounting summary: " in out.read_text()


def test_report_of_a_run_without_stacks_or_accounting(tg, tmp_path):
    shutil.copy(os.path.join(RUN, "MainThread.mem"), str(tmp_path))
    out = tmp_path / "report.html"
    r = tg("report", "--peak", "1", tmp_path, "-o", out)
    assert r.returncode == 0, r.stderr
    html = out.read_text()
    assert "allocation accounting is turned on with" in html and "no .stack files" in html
    # accounting is off by default: its absence is noted on the page, not warned
    # about (the command `threadgraph run` prints would warn after every run)
    assert "warning" in r.stderr and "accounting" not in r.stderr, r.stderr
    assert 'href="#peak-' not in html  # no subtree to link to
    assert "flame graph (delta) left out" in html
    r = tg("report", tmp_path / "nosuch", "-o", out)
    assert r.returncode == 1


def test_documented_options_are_the_help_options(tg):
    """docs/cli.md's sections of the three commands and their --help agree."""
    from clisupport import REPO
    with open(os.path.join(REPO, "docs", "cli.md")) as f:
        parts = re.split(r"^## ", f.read(), flags=re.M)
    docs = {p.split("\n", 1)[0].strip(): p for p in parts[1:]}
    opt = re.compile(r"(?<![\w-])--[a-z][a-z_-]*[a-z]")
    for cmd in ("folded", "flamegraph", "report"):
        documented = set(opt.findall(docs[cmd]))
        in_help = set(opt.findall(tg(cmd, "--help").stdout))
        assert documented - in_help == set(), (cmd, documented - in_help)
        assert in_help - documented - {"--help"} == set(), (cmd, in_help - documented)


@pytest.mark.skipif(not HAVE_GNUPLOT, reason="gnuplot not installed")
def test_report_process_rebase_reaches_the_memory_graph(tg, tmp_path):
    # --process_rebase is documented for report as for memg; report ignored it
    def graph(*opts):
        out = tmp_path / "r.html"
        r = tg("report", "--process", *opts, RUN, "-o", out)
        assert r.returncode == 0, r.stderr
        data = re.search(r'alt="memory by thread" src="data:image/svg\+xml;base64,([^"]+)"',
                         out.read_text()).group(1)
        return base64.b64decode(data).decode("utf-8", "replace")
    assert "Process (KB - 5500)" in graph("--process_rebase", "5500")
    assert "Process (MB, right axis)" in graph()


def test_flamegraph_without_accounting_says_which_metrics_work(tg, tmp_path):
    r = tg("flamegraph", "--metric", "alloc", os.path.join(FIXTURES, "tutorial"),
           "-o", tmp_path / "f.svg")
    assert r.returncode == 1
    assert "no snapshot in" in r.stderr and "--metric delta or --metric time need no " \
        "accounting" in r.stderr, r.stderr


def test_without_accounting_the_default_metric_is_delta(tg, tmp_path):
    """A plain `threadgraph run` (no --accounting) has a flame graph: its recorded
    deltas, with a note saying what --accounting would give."""
    tut = os.path.join(FIXTURES, "tutorial")
    r = tg("flamegraph", tut, "-o", tmp_path / "f.svg")
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith("note: '%s' has no allocation accounting (threadgraph run "
                               "--accounting): showing --metric delta" % tut), r.stderr
    assert "<title>delta: " in (tmp_path / "f.svg").read_text() or \
        ">delta: " in (tmp_path / "f.svg").read_text()
    a, b = tg("folded", tut), tg("folded", "--metric", "delta", tut)
    assert a.returncode == b.returncode == 0 and a.stdout == b.stdout and a.stdout
    assert "no allocation accounting" in a.stderr and "note" not in b.stderr


def test_report_header_names_at_most_20_threads(tg, tmp_path):
    run = tmp_path / "many"
    run.mkdir()
    for i in range(30):
        (run / ("T%02d.mem" % i)).write_text("100.%02d#a.py:1:f=>4096\n" % i)
    out = tmp_path / "r.html"
    r = tg("report", run, "-o", out, env={"GNUPLOT": str(tmp_path / "no-gnuplot")})
    assert r.returncode == 0, r.stderr
    meta = re.search(r'<p class="meta">Run <code>[^<]*</code>: ([^\n]*)</p>', out.read_text())
    assert meta, out.read_text()[:2000]
    assert meta.group(1).startswith("30 threads (T00, T01, ")
    assert "T19 and 10 more)" in meta.group(1) and "T20" not in meta.group(1)


def test_report_reads_gc_runs_with_a_family_silently(tg, tmp_path):
    """gc.txt's optional FAMILY (an aggregate run's folded thread, spaces and
    all) and its '#' lines are read without a word (docs/formats.md "gc.txt");
    a malformed line is still reported."""
    for name in os.listdir(RUN):
        shutil.copy(os.path.join(RUN, name), str(tmp_path))
    gc = tmp_path / "gc.txt"
    gc.write_text("42 1700000000.000100 1700000000.000200 7\n"
                  "43 1700000000.000300 1700000000.000350 12 Thread-* (handler)\n"
                  "# 3 later runs not kept\n")
    env = {"GNUPLOT": str(tmp_path / "no-gnuplot")}
    r = tg("report", tmp_path, "-o", tmp_path / "r.html", env=env)
    assert r.returncode == 0 and "gc.txt" not in r.stderr, r.stderr
    gc.write_text("43 1700000000.000300 1700000000.000350 12 \n")
    r = tg("report", tmp_path, "-o", tmp_path / "r.html", env=env)
    assert r.returncode == 0 and "gc.txt:1: " in r.stderr and "empty FAMILY" in r.stderr, \
        r.stderr


def test_report_reads_gc_runs_with_crlf_line_ends(tg, tmp_path):
    """Lines may end with \\r\\n (docs/cli.md "Malformed lines"): gc.txt's did
    not, each line was 'malformed line skipped (bad COLLECTED)' and the peaks
    lost their "ran the garbage collector" mark."""
    for name in os.listdir(RUN):
        shutil.copy(os.path.join(RUN, name), str(tmp_path))
    gc = tmp_path / "gc.txt"
    gc.write_bytes(b"42 1700000000.000100 1700000000.000200 7\r\n"
                   b"43 1700000000.000300 1700000000.000350 12 Thread-* (handler)\r\n")
    env = {"GNUPLOT": str(tmp_path / "no-gnuplot")}
    r = tg("report", tmp_path, "-o", tmp_path / "r.html", "--strict", env=env)
    assert r.returncode == 0 and "gc.txt" not in r.stderr, r.stderr


def test_a_gzipped_text_run_is_read_by_folded_flamegraph_and_report(tg, tmp_path):
    """A run directory stands for its text dumps 'plain or .gz' (docs/cli.md):
    folded and flamegraph said 'no .stack files ... the run needs stacks' and
    report 'holds no thread dumps ...: not a run directory' for a run whose
    dumps are gzip'd, which peaks, nesting and decorate-stack read."""
    import gzip
    run = tmp_path / "run"
    run.mkdir()
    for name in os.listdir(RUN):
        src = os.path.join(RUN, name)
        if name.endswith((".mem", ".stack")):
            with open(src, "rb") as f, gzip.open(str(run / (name + ".gz")), "wb") as g:
                g.write(f.read())
    plain = tmp_path / "plain"
    plain.mkdir()
    for name in os.listdir(RUN):
        if name.endswith((".mem", ".stack")):
            shutil.copy(os.path.join(RUN, name), str(plain))
    want = tg("folded", plain)
    assert want.returncode == 0 and want.stdout, want.stderr
    r = tg("folded", run)
    assert r.returncode == 0, r.stderr
    assert r.stdout == want.stdout
    r = tg("flamegraph", "-o", tmp_path / "f.svg", run)
    assert r.returncode == 0, r.stderr
    env = {"GNUPLOT": str(tmp_path / "no-gnuplot")}
    r = tg("report", "-o", tmp_path / "r.html", run, env=env)
    assert r.returncode == 0, r.stderr
    assert "stacks recorded" in (tmp_path / "r.html").read_text()
