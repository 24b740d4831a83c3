"""folded, flamegraph and report on a real recorded run.

A planted program (two threads, known allocations) runs under
`threadgraph run --accounting --stack`; the expected folded stacks are computed
here, independently, from the files the recorder wrote (the snapshot's nodes, the
.stack/.mem pairing), and must equal what `threadgraph folded` prints, stack by
stack and in total.  The flame graph must hold the planted frames with widths in
proportion, and `threadgraph run` must print the report command, which works.

Each test runs on a text run (`--format text`) and on a binary one (the default
capture.tg), whose expected values come from its exported text (`threadgraph
export`); on the binary run folded, flamegraph and report must also print exactly
what they print on that exported text.
"""
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

TIMEOUT = 120
SVG = "{http://www.w3.org/2000/svg}"
INNER = 1200 - 20  # the flame graph's default width minus its margins

PLANTED = """\
import threading
keep = []

def leaf_alloc(n):
    return bytearray(n)

def middle(n):
    keep.append(leaf_alloc(n))
    tmp = leaf_alloc(n // 2)
    del tmp

def worker():
    for i in range(3):
        middle(300000)

def main():
    t = threading.Thread(target=worker, name="planted worker")
    t.start()
    t.join()
    middle(100000)

main()
"""


def threadgraph_cmd():
    script = os.path.join(os.path.dirname(sys.executable), "threadgraph")
    return [script] if os.path.exists(script) else [sys.executable, "-m", "threadgraph"]


def tg(args, cwd):
    env = dict(os.environ)
    env.pop("TG_CLI", None)
    # the capture's held memory as its text export gives it (no LEVEL marks,
    # docs/formats.md): the report of one is the report of the other
    env["THREADGRAPH_NO_LEVEL_MARKS"] = "1"
    return subprocess.run(threadgraph_cmd() + [str(a) for a in args], cwd=str(cwd), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=TIMEOUT)


@pytest.fixture(scope="module", params=["text", "binary"])
def run(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("flame-" + request.param)
    (tmp / "planted.py").write_text(textwrap.dedent(PLANTED))
    fmt = ["--format", "text"] if request.param == "text" else []
    res = tg(["run"] + fmt + ["--accounting", "--stack", "-o", "out", "planted.py"], tmp)
    assert res.returncode == 0, res.stderr
    dirs = [d for d in glob.glob(str(tmp / "out" / "*")) if os.path.isdir(d)]
    assert len(dirs) == 1, dirs
    d = dirs[0]
    dumps = d
    if request.param == "binary":
        assert os.path.exists(os.path.join(d, "capture.tg"))
        assert not glob.glob(os.path.join(d, "*.mem")) + glob.glob(os.path.join(d, "*.stack"))
        # the same run in text: its other files, and the dumps export writes
        dumps = str(tmp / "exported" / os.path.basename(d))
        os.makedirs(dumps)
        for name in os.listdir(d):
            if name != "capture.tg" and os.path.isfile(os.path.join(d, name)):
                shutil.copy(os.path.join(d, name), os.path.join(dumps, name))
        exp = tg(["export", "-q", "-o", dumps, d], tmp)
        assert exp.returncode == 0, exp.stderr
        assert glob.glob(os.path.join(dumps, "*.stack"))
    return {"dir": d, "dumps": dumps, "cwd": tmp, "stderr": res.stderr,
            "format": request.param, "file": os.path.abspath(str(tmp / "planted.py"))}


def folded(run_dir, *args):
    res = tg(["folded"] + list(args) + [run_dir], run_dir)
    assert res.returncode == 0, res.stderr
    out = {}
    for line in res.stdout.splitlines():
        stack, value = line.rsplit(" ", 1)
        assert stack not in out
        out[stack] = int(value)
    return out


def frame(call):
    """The frame text of a FILE:LINE:FUNCTION call, as docs/flamegraph.md says."""
    m = re.match(r"^(.*):(\d+):([^:]*)$", call)
    text = "%s (%s:%s)" % (m.group(3), m.group(1), m.group(2)) if m else call
    return re.sub(r"[\x00-\x1f\x7f]", "?", text.replace(";", ","))


def snapshot_stacks(path, column):
    """{stack: value} from a snapshot's nodes, the thread as root frame."""
    threads, nodes, out = {}, {}, {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# thread: "):
                ix, name = line[10:].split(" ", 1)
                threads[ix] = name
            if line.startswith("#") or not line:
                continue
            nid, parent, thread, lb, lc, tb, tc, call = line.split(" ", 7)
            value = int({"live": lb, "total": tb}[column])
            prefix = nodes[parent] if parent != "-" else [threads.get(thread, "<no thread>")]
            nodes[nid] = prefix + [frame(call)]
            if value > 0:
                key = ";".join(nodes[nid])
                out[key] = out.get(key, 0) + value
    return out


STACK_RE = re.compile(r"^( *)(\d+\.\d+)#(.*):(\d+):([^:]*)$")
MEM_RE = re.compile(r"^(\d+\.\d+)#(.*):(\d+):([^:]*)=>(-?\d+)$")


def micros(text):
    sec, frac = text.split(".")
    return int(sec) * 1000000 + int((frac + "000000")[:6])


def dump_stacks(run_dir, metric):
    """{stack: value} for delta or time, pairing each thread's .stack and .mem."""
    out = {}
    for stack_path in sorted(glob.glob(os.path.join(run_dir, "*.stack"))):
        thread = os.path.basename(stack_path)[:-6]
        with open(stack_path[:-6] + ".mem") as f:
            rets = [MEM_RE.match(l.rstrip("\n")) for l in f if l.strip()]
        rets.reverse()
        calls = []  # open: [depth, path, t_call, kids_delta, kids_time]

        def close():
            depth, path, t0, kd, kt = calls.pop()
            if not rets:
                return  # still running at the end: counts nothing
            r = rets.pop()
            delta, dur = int(r.group(5)), micros(r.group(1)) - t0
            own = delta - kd if metric == "delta" else dur - kt
            if own > 0:
                key = ";".join(path)
                out[key] = out.get(key, 0) + own
            if calls:
                calls[-1][3] += delta
                calls[-1][4] += dur

        with open(stack_path) as f:
            for line in f:
                m = STACK_RE.match(line.rstrip("\n"))
                depth = len(m.group(1))
                while calls and calls[-1][0] >= depth:
                    close()
                path = (calls[-1][1] if calls else [thread]) + [
                    frame("%s:%s:%s" % (m.group(3), m.group(4), m.group(5)))]
                calls.append([depth, path, micros(m.group(2)), 0, 0])
        while calls:
            close()
    return out


def test_folded_equals_the_recorded_values(run):
    d = run["dir"]
    final = sorted(glob.glob(os.path.join(d, "snapshot-*-final")))[-1]
    for metric, column in (("alloc", "total"), ("live", "live")):
        want = snapshot_stacks(final, column)
        got = folded(d, "--metric", metric)
        assert got == want, metric
        assert sum(got.values()) == sum(want.values())
    for metric in ("delta", "time"):
        got = folded(d, "--metric", metric)
        assert got == dump_stacks(run["dumps"], metric), metric


def test_planted_frames_carry_the_planted_bytes(run):
    d, path = run["dir"], run["file"]
    alloc = folded(d, "--metric", "alloc")
    leaf = "leaf_alloc (%s:4)" % path
    worker = [v for k, v in alloc.items() if k.startswith("planted worker;")
              and k.endswith("middle (%s:7);%s" % (path, leaf))]
    # three calls of middle(300000): 300000 kept and 150000 freed each
    assert len(worker) == 1 and 3 * 450000 <= worker[0] < 3 * 450000 + 4096
    live = folded(d, "--metric", "live", "--thread", "planted worker")
    kept = [v for k, v in live.items() if k.endswith(leaf)]
    assert len(kept) == 1 and 900000 <= kept[0] < 900000 + 4096
    # merged threads: MainThread's middle(100000) joins the worker's under one stack
    merged = folded(d, "--metric", "live", "--merge-threads")
    assert not any(k.startswith(("MainThread;", "planted worker;")) for k in merged)
    assert sum(merged.values()) == sum(folded(d, "--metric", "live").values())


def test_peak_metric(run):
    d = run["dir"]
    peaks = sorted(glob.glob(os.path.join(d, "snapshot-*-peak")))
    res = tg(["folded", "--metric", "peak", d], d)
    if not peaks:  # a recorder that does not write the live-at-peak snapshot
        assert res.returncode == 1 and "accounting" in res.stderr
        return
    assert res.returncode == 0, res.stderr
    assert folded(d, "--metric", "peak") == snapshot_stacks(peaks[-1], "live")


def test_flamegraph_holds_the_planted_frames(run, tmp_path):
    d, path = run["dir"], run["file"]
    svg = tmp_path / "flame.svg"
    res = tg(["flamegraph", "--metric", "alloc", "--thread", "planted worker", d, "-o", svg],
             tmp_path)
    assert res.returncode == 0, res.stderr
    root = ET.parse(str(svg)).getroot()
    widths = {}
    for g in root.iter(SVG + "g"):
        if "f" in g.get("class", "").split():
            name = g.find(SVG + "title").text.split("\n")[0]
            widths.setdefault(name, []).append(float(g.find(SVG + "rect").get("width")))
    alloc = folded(d, "--metric", "alloc", "--thread", "planted worker")
    total = sum(alloc.values())
    assert widths["all"] == [pytest.approx(INNER)]
    leaf = "leaf_alloc (%s:4)" % path
    leaf_total = sum(v for k, v in alloc.items() if k.endswith(leaf))
    assert widths[leaf] == [pytest.approx(leaf_total / total * INNER, abs=1e-3)]
    assert leaf_total / total > 0.9  # the planted allocations dominate the thread


def test_run_prints_the_report_command_and_it_works(run):
    line = [l for l in run["stderr"].splitlines() if "threadgraph report " in l]
    assert len(line) == 1, run["stderr"]
    argv = shlex.split(line[0])
    assert argv[0] == "threadgraph"
    res = tg(argv[1:], run["cwd"])
    assert res.returncode == 0, res.stderr
    html_path = os.path.join(str(run["cwd"]), argv[-1])
    with open(html_path) as f:
        html = f.read()
    assert 'id="flame-alloc"' in html and "total_requested_bytes" in html
    assert "leaf_alloc (%s:4)" % run["file"] in html


def test_binary_run_reads_as_its_exported_text(run, tmp_path):
    """folded, flamegraph and report on the capture print what they print on the
    text that export writes from it (the same relative run path in both)."""
    if run["format"] != "binary":
        pytest.skip("the binary run's check")
    cap_cwd, text_cwd = os.path.dirname(run["dir"]), os.path.dirname(run["dumps"])
    name = os.path.basename(run["dir"])
    cases = [["folded", "--metric", m] + o + [name]
             for m in ("delta", "time")
             for o in ([], ["--merge-threads"], ["--thread", "planted worker"])]
    cases += [["flamegraph", "--metric", "delta", name, "-o", str(tmp_path / "f.svg")],
              ["report", "--metric", "delta", "--peak", "100", name, "-o",
               str(tmp_path / "r.html")]]
    for args in cases:
        out = args[-1] if args[-2] == "-o" else None
        rt = tg(args, text_cwd)
        text_out = open(out, "rb").read() if out else None
        rc = tg(args, cap_cwd)
        assert rc.returncode == 0, rc.stderr
        assert (rc.returncode, rc.stdout, rc.stderr) == (rt.returncode, rt.stdout, rt.stderr), args
        if out:
            assert open(out, "rb").read() == text_out, args
    html = open(str(tmp_path / "r.html")).read()
    # the planted 300000-byte returns are peaks with their decorated subtree
    assert '<section class="peak"' in html and "leaf_alloc@" in html
    assert 'id="flame-delta"' in html


# Recording started deep in a call chain (as threadgraph attach starts it): the
# frames running at enable() have no call record and their returns are ignored.
STARTED_INSIDE = """\
import sys
from threadgraph import ProcessProfile
p = ProcessProfile(default_log_path="out")
p.trackStack()
keep = []
def work():
    return [bytearray(1000) for _ in range(100)]
def do_GET():
    keep.append(work())
def inner():
    p.enable()
    do_GET()
    do_GET()
def middle():
    inner()
    do_GET()
def outer():
    middle()
    do_GET()
    p.disable()
outer()
"""


def test_calls_made_inside_frames_running_at_enable_are_folded(tmp_path):
    (tmp_path / "inside.py").write_text(STARTED_INSIDE)
    res = subprocess.run([sys.executable, "inside.py"], cwd=str(tmp_path),
                         stderr=subprocess.PIPE, universal_newlines=True, timeout=TIMEOUT)
    assert res.returncode == 0, res.stderr
    (d,) = glob.glob(str(tmp_path / "out" / "*"))
    stacks = folded(d, "--metric", "delta")
    # The four do_GET calls are roots of the thread's stacks, with what their
    # callee kept (4 x 100 blocks of 1000 bytes); the frames running at enable()
    # (outer, middle, inner) appear nowhere.
    kept = sum(v for s, v in stacks.items()
               if s.startswith("MainThread;do_GET (") and ";work (" in s)
    assert kept >= 4 * 100 * 1000, stacks
    assert not [s for s in stacks if re.search(r"\b(outer|middle|inner) \(", s)], stacks
