"""threadgraph live in a real terminal (tmux): a run being written, its threads'
figures, and the terminal given back on q (docs/attach.md, "threadgraph live").

The program is held by a FIFO until the view has shown its threads; the test
waits on the pane's content (capture-pane), never on time.  Runs on 3.11 and
3.12 only (a terminal test: its cost is tmux's, the same on every Python).
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from tgtest import env_with_package

pytestmark = [
    pytest.mark.skipif(sys.version_info[:2] not in ((3, 11), (3, 12)),
                       reason="the terminal tests run on 3.11 and 3.12 only"),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

PROGRAM = r'''
import sys, threading
keep = []

def grow(n):
    return [bytearray(1000) for _ in range(n)]

def worker(n):
    for i in range(3):
        keep.append(grow(n))

threads = [threading.Thread(target=worker, args=(100 * (i + 1),), name="w%d" % i)
           for i in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
named = threading.Thread(target=grow, args=(1,),
                         name="pool-worker-with-a-rather-long-name-that-goes-on-%d" % 7)
named.start()
named.join()
main_kept = grow(300)  # returned inside <module>, still open below
with open(sys.argv[1]) as gate:  # until the test has seen the view
    gate.read()
'''

PANE_WAIT = 120.0  # a bound on a wait for the pane's content, never reached when it works


class Tmux:
    def __init__(self, tmp_path, command):
        self.sock = str(tmp_path / "tmux.sock")
        self.run("new-session", "-d", "-s", "t", "-x", "150", "-y", "40", command)

    def run(self, *args):
        return subprocess.run(["tmux", "-S", self.sock] + list(args), check=True,
                              stdout=subprocess.PIPE, universal_newlines=True).stdout

    def pane(self):
        return self.run("capture-pane", "-p", "-t", "t")

    def wait_for(self, predicate):
        deadline = time.monotonic() + PANE_WAIT
        while True:
            text = self.pane()
            if predicate(text):
                return text
            if time.monotonic() > deadline:
                pytest.fail("the pane never showed it:\n" + text)
            time.sleep(0.1)

    def close(self):
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], stderr=subprocess.DEVNULL)


ROW = re.compile(r"^[ >](w\d)\s+(\S+ \S+)\s+(\S+ \S+)\s+(\S+ \S+)\s+(\S+ \S+)\s+(\d+)\s*$", re.M)


def view_bytes(text):
    """A byte count the view spelt ("936.6 KB"), to its rounding."""
    value, unit = text.split()
    return float(value) * {"B": 1, "KB": 1024, "MB": 1 << 20, "GB": 1 << 30}[unit]


def kb(v):
    """The view's spelling of a byte count (live_bytes in cmd_live.c)."""
    a = abs(v)
    s = "-" if v < 0 else ""
    if a < 1024:
        return "%s%d B" % (s, a)
    if a < 1024 * 1024:
        return "%s%.1f KB" % (s, a / 1024)
    return "%s%.2f MB" % (s, a / (1024 * 1024))


def cli(*args):
    return subprocess.run([sys.executable, "-m", "threadgraph"] + list(args), check=True,
                          stdout=subprocess.PIPE, universal_newlines=True,
                          env=env_with_package(keep_cli=True)).stdout


def test_live_follows_a_run_and_gives_the_terminal_back(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    gate = str(tmp_path / "gate")
    os.mkfifo(gate)
    run = subprocess.Popen([sys.executable, "-m", "threadgraph", "run", "-o",
                            str(tmp_path / "base"), str(tmp_path / "prog.py"), gate],
                           cwd=str(tmp_path), env=env_with_package(keep_cli=True),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    run_dir = str(tmp_path / "base" / str(run.pid))
    live = " ".join(shlex.quote(a) for a in
                    [sys.executable, "-m", "threadgraph", "live", run_dir])
    script = ('a=$(stty -g); %s; s=$?; [ "$a" = "$(stty -g)" ] && echo RESTORED; '
              'echo EXIT=$s; exec sleep 600' % live)
    term = Tmux(tmp_path, "sh -c %s" % shlex.quote(script))
    try:
        # The run's threads appear while it is still running.
        text = term.wait_for(lambda t: len(ROW.findall(t)) == 3 and "recording" in t)
        assert run.poll() is None
        assert re.search(r"recording, latest record \d+\.\d s ago$", text, re.M), text
        # A thread's memory now counts the calls returned inside calls still
        # open (the main thread's grow(300), in <module>), and a long name keeps
        # its head and its tail.  The main thread's records reach the disk at the
        # flusher's next pass, which may come after the named thread's (an ended
        # thread's files are written at once): wait for its grow(300) to show.
        def main_grown(t):
            m = re.search(r"^ MainThread\s+(\S+) (\S+)", t, re.M)
            return m is not None and m.group(2) == "KB" and float(m.group(1)) >= 290
        term.wait_for(lambda t: main_grown(t) and re.search(
            r"^ pool-worker-with-a-rat\S*\.\.\S*-goes-on-7 ", t, re.M) is not None)
        with open(gate, "w") as f:
            f.write("end\n")
        assert run.wait(timeout=120) == 0
        text = term.wait_for(lambda t: "run ended" in t)
        rows = {m[0]: m[1:] for m in ROW.findall(text)}
        assert sorted(rows) == ["w0", "w1", "w2"]
        # The figures are those of the finished run: each thread's largest call
        # is its largest peak (threadgraph peaks), its returns its records.
        peaks = json.loads(cli("peaks", "--peak", "0", "--peak_delta_time", "0",
                               "--peak_delta_value", "0", "--json", run_dir))
        exported = tmp_path / "exported"
        cli("export", "-q", "-o", str(exported), run_dir)
        for name, (now, change, peak, largest, returns) in rows.items():
            deltas = [p["delta"] for p in peaks if p["thread"] == name]
            assert largest == kb(max(deltas)), (name, largest, deltas)
            with open(str(exported / (name + ".mem"))) as f:
                assert int(returns) == sum(1 for _ in f)
            # the workers only grow, but for what their thread's end frees
            # (threading's own code: LEVEL marks, docs/formats.md)
            assert 0 <= view_bytes(peak) - view_bytes(now) <= 2048, (name, now, peak)
        # The same figures without a terminal, but CHANGE/s: it is the change
        # since the previous reading, so it depends on when each view read the
        # capture.
        once = cli("live", "--once", run_dir)
        assert ({m[0]: m[1:2] + m[3:] for m in ROW.findall(once)}
                == {name: r[:1] + r[2:] for name, r in rows.items()})
        # The keys: sort, select a thread (its functions), all threads, pause.
        term.run("send-keys", "-t", "t", "s")
        term.wait_for(lambda t: "s sort (change)" in t)
        term.run("send-keys", "-t", "t", "j")
        text = term.wait_for(lambda t: re.search(r"^>\S", t, re.M) is not None)
        chosen = re.search(r"^>(\S+)", text, re.M).group(1)
        term.wait_for(lambda t: "calls, thread %s" % chosen in t)
        term.run("send-keys", "-t", "t", "a")
        term.wait_for(lambda t: "calls, all threads" in t and not re.search(r"^>", t, re.M))
        # An 80-column terminal: every line fits (the title is still the first
        # line), the long name keeps its head and tail.
        term.run("resize-window", "-t", "t", "-x", "80", "-y", "30")
        # (tmux clips the frame drawn for 150 columns at 80: the redrawn one is
        # the one whose lines are all shorter)
        narrow = term.wait_for(lambda t: max(len(line) for line in t.splitlines()) < 80
                               and re.search(r"^ pool-worker-\S*\.\.\S*on-7 ", t, re.M))
        assert narrow.startswith("threadgraph live  "), narrow
        term.run("send-keys", "-t", "t", "p")
        term.wait_for(lambda t: "PAUSED" in t)
        term.run("send-keys", "-t", "t", "q")
        text = term.wait_for(lambda t: "EXIT=" in t)
        assert "RESTORED" in text and "EXIT=0" in text
        assert "THREAD" not in text  # the alternate screen is gone
    finally:
        term.close()
        if run.poll() is None:
            run.kill()
        run.wait()


def test_live_needs_a_terminal_or_once(tmp_path):
    r = subprocess.run([sys.executable, "-m", "threadgraph", "live", str(tmp_path)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, env=env_with_package(keep_cli=True))
    assert r.returncode != 0 and "--once" in r.stderr


def test_run_live_keeps_the_programs_output_off_the_view(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM.replace(
        "with open(sys.argv[1])", "print('the program speaks', flush=True)\n"
        "sys.stderr.write('and complains\\n')\nwith open(sys.argv[1])"))
    gate = str(tmp_path / "gate")
    os.mkfifo(gate)
    run = " ".join(shlex.quote(a) for a in
                   [sys.executable, "-m", "threadgraph", "run", "--live", "-o",
                    str(tmp_path / "base"), str(tmp_path / "prog.py"), gate])
    script = ('cd %s; a=$(stty -g); %s; s=$?; [ "$a" = "$(stty -g)" ] && echo RESTORED; '
              'echo EXIT=$s; exec sleep 600' % (shlex.quote(str(tmp_path)), run))
    term = Tmux(tmp_path, "sh -c %s" % shlex.quote(script))
    try:
        term.wait_for(lambda t: len(ROW.findall(t)) == 3 and "recording" in t)
        with open(gate, "w") as f:
            f.write("end\n")
        text = term.wait_for(lambda t: "run ended" in t)
        assert "the program speaks" not in text and "complains" not in text
        term.run("send-keys", "-t", "t", "q")
        text = term.wait_for(lambda t: "EXIT=" in t)
        assert "RESTORED" in text and "EXIT=0" in text
        assert "the program's output: " in text and "program exited with status 0" in text
        (run_dir,) = [p for p in (tmp_path / "base").iterdir() if p.is_dir()]
        output = (run_dir / "output.txt").read_text()
        assert "the program speaks\n" in output and "and complains\n" in output
    finally:
        term.close()


def test_live_shows_call_sites_by_live_bytes_with_accounting(tmp_path):
    # With accounting the view lists the newest snapshot's call sites by live
    # bytes (here the final one), the figures `threadgraph top` gives.
    prog = tmp_path / "prog.py"
    prog.write_text("keep = []\n"
                    "def grow(n):\n"
                    "    return [bytearray(1000) for _ in range(n)]\n"
                    "for i in range(3):\n"
                    "    keep.append(grow(300))\n")
    cli("run", "--accounting", "-o", str(tmp_path / "out"), str(prog))
    run_dir = str(tmp_path / "out" / os.listdir(str(tmp_path / "out"))[0])
    once = cli("live", "--once", run_dir)
    assert "top call sites by live bytes, all threads (snapshot-1-final" in once, once
    top = cli("top", "--merge-threads", "--depth", "1", run_dir).splitlines()
    first = top[2].split()  # LIVE_BYTES LIVE_COUNT TOTAL_BYTES TOTAL_COUNT THREAD SITE
    # grow's list comprehension (its own frame before 3.12, inlined into grow after)
    assert first[-1].endswith((":<listcomp>", ":grow")), top
    site = [line for line in once.splitlines() if line.endswith(first[-1])]
    assert site and site[0].split()[:3] == kb(int(first[0])).split() + [first[1]], once
    # Without accounting there is no such panel.
    cli("run", "-o", str(tmp_path / "plain"), str(prog))
    plain = str(tmp_path / "plain" / os.listdir(str(tmp_path / "plain"))[0])
    assert "call sites" not in cli("live", "--once", plain)


def test_live_call_sites_list_only_what_holds_memory(tmp_path):
    # A site whose blocks were all freed (churn's) holds nothing live: the panel
    # of sites by live bytes leaves it out, as it leaves out every other site
    # that holds nothing, however few hold something.
    prog = tmp_path / "prog.py"
    prog.write_text("import threading\n"
                    "keep = []\n"
                    "def churn():\n"
                    "    for _ in range(400):\n"
                    "        x = bytearray(100000)\n"
                    "        del x\n"
                    "def grow():\n"
                    "    keep.append(bytearray(8 << 20))\n"
                    "def work():\n"
                    "    churn()\n"
                    "    grow()\n"
                    "t = threading.Thread(target=work, name='w')\n"
                    "t.start()\n"
                    "t.join()\n")
    # one sample per MiB: churn's 40 MB are sampled, all freed; grow's block kept
    subprocess.run([sys.executable, "-m", "threadgraph", "run", "--sampled",
                    "--sample-bytes", "1048576", "-o", str(tmp_path / "out"), str(prog)],
                   check=True, env=env_with_package({"THREADGRAPH_SAMPLE_SEED": "7"}), timeout=120,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run_dir = str(tmp_path / "out" / os.listdir(str(tmp_path / "out"))[0])
    top = cli("top", "--merge-threads", "--depth", "1", run_dir)
    assert re.search(r"^ +0 +0 +[1-9]\d* .*:churn$", top, re.M), top  # sampled, all freed
    once = cli("live", "--once", run_dir)
    panel = once.split("top call sites by live bytes", 1)[1].splitlines()[1:]
    assert panel and panel[0].endswith(":grow"), once
    assert not [line for line in panel if line.endswith(":churn")], once


def test_live_escapes_a_hostile_thread_name(tmp_path):
    # A thread's name is the program's: C1 controls (U+009B is CSI) and
    # bidirectional controls (U+202E) reach the terminal as '?', never raw.
    prog = tmp_path / "prog.py"
    prog.write_text("import threading\n"
                    "keep = []\n"
                    "t = threading.Thread(target=lambda: keep.append(bytearray(300000)),\n"
                    "                     name='evil\\u202ecod\\u009b31m')\n"
                    "t.start()\n"
                    "t.join()\n")
    cli("run", "-o", str(tmp_path / "out"), str(prog))
    run_dir = str(tmp_path / "out" / os.listdir(str(tmp_path / "out"))[0])
    once = subprocess.run([sys.executable, "-m", "threadgraph", "live", "--once", run_dir],
                          check=True, stdout=subprocess.PIPE,
                          env=env_with_package(keep_cli=True)).stdout
    assert b"evil?cod?31m" in once, once
    assert not re.search(b"\xc2[\x80-\x9f]|\xe2\x80[\x8e\x8f\xaa-\xae]|\xe2\x81[\xa6-\xa9]",
                         once), once


SAMPLED_PROGRAM = r'''
import sys, threading, time
keep = {}

def worker(i):
    mine = keep.setdefault(threading.current_thread().name, [])
    for _ in range(10 * (i + 1)):
        mine.append(bytearray(100000))
        time.sleep(0.01)
    mine.append(bytearray(200000))  # sampled (sample_bytes 4096): the last reading

threads = [threading.Thread(target=worker, args=(i,), name="w%d" % i) for i in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
with open(sys.argv[1]) as gate:  # until the test has seen the view
    gate.read()
'''


def last_readings(run_dir, name):
    """The BYTES of each reading of thread NAME's curve (docs/formats.md)."""
    with open(os.path.join(run_dir, name + ".mem")) as f:
        return [int(line.rsplit("=>", 1)[1]) for line in f]


def mb(text):
    value, unit = text.split()
    return float(value) * {"B": 1, "KB": 1024, "MB": 1024 * 1024}[unit]


def test_live_follows_a_sampled_run(tmp_path):
    # A sampled run writes no capture: the view follows its threads' curves,
    # each thread's NOW its latest reading, and the call sites of the periodic
    # snapshots that --snapshot-every writes while it runs.
    (tmp_path / "prog.py").write_text(SAMPLED_PROGRAM)
    gate = str(tmp_path / "gate")
    os.mkfifo(gate)
    run = " ".join(shlex.quote(a) for a in
                   [sys.executable, "-m", "threadgraph", "run", "--sampled", "--live",
                    "--sample-bytes", "4096", "--snapshot-every", "0.1", "-o",
                    str(tmp_path / "base"), str(tmp_path / "prog.py"), gate])
    script = ('cd %s; a=$(stty -g); %s; s=$?; [ "$a" = "$(stty -g)" ] && echo RESTORED; '
              'echo EXIT=$s; exec sleep 600' % (shlex.quote(str(tmp_path)), run))
    term = Tmux(tmp_path, "sh -c %s" % shlex.quote(script))
    try:
        # Every worker has its final reading (the 200000-byte block, after
        # its others): the program now waits at the gate.
        def done(t):
            rows = {m[0]: m for m in ROW.findall(t)}
            return (sorted(rows) == ["w0", "w1", "w2"] and "recording" in t
                    and all(mb(rows["w%d" % i][1]) > (10 * (i + 1) * 100000 + 200000)
                            * 0.98 for i in range(3)))
        text = term.wait_for(done)
        assert re.search(r"recording, latest reading \d+\.\d s ago$", text, re.M), text
        assert " NOW    CHANGE/s        PEAK      LATEST  READINGS" in text, text
        (run_dir,) = [str(p) for p in (tmp_path / "base").iterdir() if p.is_dir()]
        rows = {m[0]: m[1:] for m in ROW.findall(text)}
        for name, (now, change, peak, latest, readings) in rows.items():
            curve = last_readings(run_dir, name)
            assert now == kb(curve[-1]) and peak == kb(max(curve)), (name, now, curve)
            assert int(readings) == len(curve)
            assert re.match(r"\d+\.\d s$", latest), latest
        # The periodic snapshots' call sites: the workers' block.
        text = term.wait_for(lambda t: re.search(
            r"top call sites by live bytes, all threads \(snapshot-\d+-t-[\d.]+s, written", t))
        assert re.search(r"^\s+\S+ \S+\s+\d+\s+\S*prog\.py:\d+:worker$", text, re.M), text
        with open(gate, "w") as f:
            f.write("end\n")
        text = term.wait_for(lambda t: "run ended" in t)
        term.run("send-keys", "-t", "t", "q")
        text = term.wait_for(lambda t: "EXIT=" in t)
        assert "RESTORED" in text and "EXIT=0" in text
    finally:
        term.close()


def test_live_once_reads_a_sampled_runs_curves(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(SAMPLED_PROGRAM)
    gate = tmp_path / "gate"
    gate.write_text("")
    cli("run", "--sampled", "--sample-bytes", "4096", "-o", str(tmp_path / "out"), str(prog),
        str(gate))
    (run_dir,) = [str(p) for p in (tmp_path / "out").iterdir()]
    once = cli("live", "--once", run_dir)
    assert "run ended" in once.splitlines()[0], once
    rows = {m[0]: m[1:] for m in ROW.findall(once)}
    assert sorted(rows) == ["w0", "w1", "w2"], once
    summary = json.loads((tmp_path / "out" / os.path.basename(run_dir)
                          / "summary.json").read_text())
    for name, (now, change, peak, latest, readings) in rows.items():
        curve = last_readings(run_dir, name)
        assert (now, peak, int(readings)) == (kb(curve[-1]), kb(max(curve)), len(curve))
    # The exact peak of each thread is the summary's; the curve's peak is a
    # reading of it, taken at a sample (here at the last, largest block).
    threads = {t["name"]: t for t in summary["threads"]}
    for name in rows:
        assert max(last_readings(run_dir, name)) <= threads[name]["peak_bytes"]
        assert max(last_readings(run_dir, name)) >= threads[name]["peak_bytes"] - 16384
    # The final snapshot gives the call sites.
    assert re.search(r"top call sites by live bytes, all threads \(snapshot-\d+-final", once)
    # A damaged curve: an error naming the file and line, exit 1.
    with open(os.path.join(run_dir, "w1.mem"), "a") as f:
        f.write("12.5#app.py:3:work=>10\n")
    r = subprocess.run([sys.executable, "-m", "threadgraph", "live", "--once", run_dir],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, env=env_with_package(keep_cli=True))
    n = len(last_readings(run_dir, "w1"))
    assert r.returncode == 1, r
    assert "w1.mem:%d: not a reading of a sampled run's memory curve" % n in r.stderr, r.stderr


def test_live_once_reads_a_sampled_run_without_timestamps(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(SAMPLED_PROGRAM)
    gate = tmp_path / "gate"
    gate.write_text("")
    cli("run", "--sampled", "--no-timestamps", "--sample-bytes", "4096", "-o",
        str(tmp_path / "out"), str(prog), str(gate))
    (run_dir,) = [str(p) for p in (tmp_path / "out").iterdir()]
    once = cli("live", "--once", run_dir)
    assert once.splitlines()[0].endswith("run ended"), once
    rows = {m[0]: m[1:] for m in ROW_NO_AGE.findall(once)}
    assert sorted(rows) == ["w0", "w1", "w2"], once
    for name, (now, change, peak, readings) in rows.items():
        with open(os.path.join(run_dir, name + ".mem")) as f:
            curve = [int(line.rsplit("=>", 1)[1]) for line in f]
        assert (now, peak, int(readings)) == (kb(curve[-1]), kb(max(curve)), len(curve))


FREER_PROGRAM = r'''
import threading, time
def work():
    keep = [bytearray(1 << 20) for _ in range(64)]
    del keep[:]          # frees all it held: no reading is taken at a free
    time.sleep(0.5)      # nor while it idles; one where it ends
t = threading.Thread(target=work, name="freer")
t.start()
t.join()
time.sleep(0.5)          # the run goes on after the thread's last reading
'''

# a row of a sampled run: NOW, CHANGE, PEAK, LATEST (seconds), READINGS
ROW_AGE = re.compile(r"^[ >](\w+)\s+(\S+ \S+)\s+(\S+ \S+)\s+(\S+ \S+)\s+([\d.]+) s\s+(\d+)\s*$",
                     re.M)


def test_live_once_dates_a_sampled_threads_now_from_the_runs_end(tmp_path):
    """A sampled run's NOW is a thread's latest reading, taken at a sampled
    allocation or where the thread ended: a thread that freed everything,
    idled and ended shows what it held at its end, not its last sample's 64
    MiB; and once the run ended LATEST gives its age at the run's end
    (runinfo.json's end_time), not at the run's newest reading."""
    prog = tmp_path / "prog.py"
    prog.write_text(FREER_PROGRAM)
    cli("run", "--sampled", "--sample-bytes", "1048576", "-o", str(tmp_path / "out"),
        str(prog))
    (run_dir,) = [str(p) for p in (tmp_path / "out").iterdir()]
    once = cli("live", "--once", run_dir)
    assert "their memory at their latest readings" in once, once
    rows = {m[0]: m[1:] for m in ROW_AGE.findall(once)}
    assert "freer" in rows, once
    now, _change, _peak, latest, readings = rows["freer"]
    with open(os.path.join(run_dir, "freer.mem")) as f:
        last = f.read().splitlines()[-1]
    t_last, value = float(last.split("#", 1)[0]), int(last.rsplit("=>", 1)[1])
    with open(os.path.join(run_dir, "runinfo.json")) as f:
        end = json.load(f)["end_time"]
    assert now == kb(value) and value < 1 << 20, (now, value)  # what it held at its end
    with open(os.path.join(run_dir, "freer.mem")) as f:
        assert max(int(l.rsplit("=>", 1)[1]) for l in f) > 32 << 20
    threads = json.loads(cli("threads", "--json", run_dir))
    assert [t["live_at_end"] for t in threads["threads"] if t["name"] == "freer"] == [0], threads
    assert abs(float(latest) - (end - t_last)) <= 0.051, (latest, end - t_last, once)


# a row whose LATEST is "-" (no timestamps)
ROW_NO_AGE = re.compile(r"^[ >](w\d)\s+(\S+ \S+)\s+(\S+ \S+)\s+(\S+ \S+)\s+-\s+(\d+)\s*$",
                        re.M)


def test_live_refuses_a_text_run_clearly(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text("x = [bytearray(1000) for _ in range(10)]\n")
    cli("run", "--format", "text", "-o", str(tmp_path / "out"), str(prog))
    (run_dir,) = [str(p) for p in (tmp_path / "out").iterdir()]
    r = subprocess.run([sys.executable, "-m", "threadgraph", "live", "--once", run_dir],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, env=env_with_package(keep_cli=True))
    assert r.returncode == 1 and "is a run of text dumps (--format text)" in r.stderr, r


def test_live_of_a_pid_is_told_from_a_run_directory(tmp_path, monkeypatch):
    # `threadgraph live PID [attach options]` attaches first (Python); anything
    # else is the C view of a run directory.  The PID may come before options
    # that take values (`-o BASE`, `--snapshot-every 10`).
    from threadgraph.__main__ import live_of_pid

    monkeypatch.chdir(str(tmp_path))
    (tmp_path / "4242").mkdir()  # a run directory named like a pid
    assert live_of_pid(["999999"])
    assert live_of_pid(["--sampled", "999999"])
    assert live_of_pid(["999999", "--sampled", "--snapshot-every", "10", "-o", "base"])
    assert not live_of_pid(["4242"])
    assert not live_of_pid(["--once", "base/4242"])
    assert not live_of_pid(["--sort", "now", "threadgraph-app"])


def test_live_follows_an_aggregate_run(tmp_path):
    # An aggregate run writes no capture: the view reads its aggregate.tga,
    # rewritten every second, from the start (before the first one it waits).
    (tmp_path / "prog.py").write_text(PROGRAM)
    gate = str(tmp_path / "gate")
    os.mkfifo(gate)
    run = " ".join(shlex.quote(a) for a in
                   [sys.executable, "-m", "threadgraph", "run", "--aggregate", "--live", "-o",
                    str(tmp_path / "base"), str(tmp_path / "prog.py"), gate])
    script = ('cd %s; a=$(stty -g); %s; s=$?; [ "$a" = "$(stty -g)" ] && echo RESTORED; '
              'echo EXIT=$s; exec sleep 600' % (shlex.quote(str(tmp_path)), run))
    term = Tmux(tmp_path, "sh -c %s" % shlex.quote(script))
    try:
        text = term.wait_for(lambda t: len(ROW.findall(t)) == 3 and "recording" in t)
        assert re.search(r"recording, latest record \d+\.\d s ago$", text, re.M), text
        with open(gate, "w") as f:
            f.write("end\n")
        text = term.wait_for(lambda t: "run ended" in t)
        term.run("send-keys", "-t", "t", "q")
        assert "EXIT=0" in term.wait_for(lambda t: "EXIT=" in t)
    finally:
        term.close()
    (run_dir,) = [str(p) for p in (tmp_path / "base").iterdir() if p.is_dir()]
    once = cli("live", "--once", run_dir)
    rows = {m[0]: m[1:] for m in ROW.findall(once)}
    assert sorted(rows) == ["w0", "w1", "w2"], once
    # Each worker's largest call is the largest of its call paths' (the MAX of
    # its n lines, docs/formats.md "Aggregate"), its calls those counted on
    # them, its memory now and peak the top of its curve.
    paths, thread = {}, None
    with open(os.path.join(run_dir, "aggregate.tga")) as f:
        for line in f:
            fields = line.split()
            if fields[0] == "t":
                thread = line.rstrip("\n").split(" ", 3)[3]
            elif fields[0] == "n":
                paths.setdefault(thread, []).append((int(fields[4]), int(fields[6])))
    summary = cli("summary", run_dir)
    for name, (now, change, peak, largest, returns) in rows.items():
        assert largest == kb(max(m for _, m in paths[name])), (name, largest)
        assert int(returns) == sum(c for c, _ in paths[name])
        assert re.search(r"^%s: %s calls on " % (name, returns), summary, re.M), summary
        # (a thread frees a few bytes as it ends: NOW, the top of the latest
        # bucket, may be just below the peak)
        grown = 100 * (int(name[1]) + 1) * 3 * 1000
        assert grown <= mb(now) <= mb(peak) and mb(now) >= 0.99 * mb(peak), (name, now, peak)
    assert "top functions by net bytes of their calls, all threads" in once
    assert re.search(r"^\s+\S+ \S+\s+\d+\s+grow\s+\S*prog\.py:\d+$", once, re.M), once


BOUNDED = r'''
import sys

def leaf(i):
    return [i] * (i % 7)

for i in range(100000):  # some 1.5 MB of records: several times --max-size
    leaf(i)
with open(sys.argv[1]) as gate:  # until the test has seen the view
    gate.read()
'''
KEPT = re.compile(r"^a capture of limited size: segments (\d+)-(\d+) kept, the (\d+) before them "
                  r"dropped; the segments kept were written from \d+\.\d{3} s( to \d+\.\d{3} s)? "
                  r"after its start$", re.M)


def test_live_says_a_capture_of_limited_size_shows_the_records_kept(tmp_path):
    """Of a run with --max-size the view reads the segments kept: its status
    line says which part of the run they cover, as every command's warning
    does (PEAK, LARGEST, RETURNS and the functions are of those records)."""
    (tmp_path / "prog.py").write_text(BOUNDED)
    gate = str(tmp_path / "gate")
    os.mkfifo(gate)
    run = subprocess.Popen([sys.executable, "-m", "threadgraph", "run", "--max-size", "256K",
                            "-o", str(tmp_path / "base"), str(tmp_path / "prog.py"), gate],
                           cwd=str(tmp_path), env=env_with_package(keep_cli=True),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    run_dir = str(tmp_path / "base" / str(run.pid))
    live = " ".join(shlex.quote(a) for a in
                    [sys.executable, "-m", "threadgraph", "live", run_dir])
    term = Tmux(tmp_path, "sh -c %s" % shlex.quote(live + "; exec sleep 600"))
    try:
        # while it is written: no end yet
        text = term.wait_for(lambda t: KEPT.search(t) is not None and "recording" in t)
        m = KEPT.search(text)
        assert int(m.group(3)) == int(m.group(1)) - 1 > 0 and not m.group(4), text
        lines = text.splitlines()
        # the title and the process line as before, then the status line
        assert lines[0].startswith("threadgraph live  ") and lines[1].startswith("process: ")
        assert KEPT.match(lines[2]) and lines[3].lstrip().startswith("THREAD"), text
        with open(gate, "w") as f:
            f.write("end\n")
        assert run.wait(timeout=120) == 0
        text = term.wait_for(lambda t: "run ended" in t)
        assert KEPT.search(text).group(4), text  # the end now known
        term.run("send-keys", "-t", "t", "q")
    finally:
        term.close()
        if run.poll() is None:
            run.kill()
        run.wait()
    # the same line without a terminal, as the commands' warning says it
    once = cli("live", "--once", run_dir)
    warned = subprocess.run([sys.executable, "-m", "threadgraph", "peaks", run_dir],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True, env=env_with_package(keep_cli=True))
    said = KEPT.search(once)
    assert said and ("warning: " + said.group(0)) in warned.stderr, (once, warned.stderr)


SMALL_PROGRAM = r'''
import threading
keep = []

def grow(n):
    return [bytearray(1000) for _ in range(n)]

threads = [threading.Thread(target=lambda n=n: keep.append(grow(n)), name="w%d" % n)
           for n in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
'''


def test_live_fits_a_small_terminal(tmp_path):
    """Terminals of few lines: the frame is no taller than the terminal, so its
    title, the process line and the header stay on screen (a frame that was
    taller scrolled them off) and the keys' line is the last one."""
    (tmp_path / "prog.py").write_text(SMALL_PROGRAM)
    subprocess.run([sys.executable, "-m", "threadgraph", "run", "-o", str(tmp_path / "base"),
                    str(tmp_path / "prog.py")], check=True, cwd=str(tmp_path),
                   env=env_with_package(keep_cli=True), stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    (run_dir,) = [str(p) for p in (tmp_path / "base").iterdir()]
    live = " ".join(shlex.quote(a) for a in
                    [sys.executable, "-m", "threadgraph", "live", run_dir])
    for width, height in ((40, 12), (100, 8), (60, 16)):
        term = Tmux.__new__(Tmux)
        term.sock = str(tmp_path / ("tmux-%dx%d.sock" % (width, height)))
        term.run("new-session", "-d", "-s", "t", "-x", str(width), "-y", str(height),
                 "sh -c %s" % shlex.quote(live + "; exec sleep 600"))
        try:
            def drawn(t):
                shown = t.rstrip("\n").splitlines()
                return bool(shown) and shown[-1].startswith("q quit")
            text = term.wait_for(drawn)
            lines = text.rstrip("\n").splitlines()
            assert len(lines) <= height and max(len(line) for line in lines) < width, text
            assert lines[0].startswith("threadgraph live  "), text
            assert lines[1].startswith("process: RSS "), text
            assert lines[2].startswith(" THREAD "), text
            assert re.search(r"^ \.\.\. \d+ more threads", text, re.M), text
            term.run("send-keys", "-t", "t", "q")
        finally:
            term.close()


REQUESTS = r'''
import sys, threading
hold = threading.Event()

def request(i):
    return bytearray(100 * i)

for i in range(40):  # a thread per request, each ended
    t = threading.Thread(target=request, args=(i,), name="req-%d" % i)
    t.start()
    t.join()
pool = [threading.Thread(target=hold.wait, name="pool-%d" % i) for i in range(2)]
for t in pool:
    t.start()
print("ready", flush=True)
with open(sys.argv[1]) as gate:  # until the test has read the view
    gate.read()
hold.set()
for t in pool:
    t.join()
'''


def _proc_threads(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(next(l for l in f if l.startswith("Threads:")).split()[1])


def test_live_process_line_tells_threads_running_from_threads_seen(tmp_path):
    """The process line's thread count: the threads the process runs now
    (/proc), beside the threads the run has seen, the ended ones included (a
    thread per request makes those grow without bound: not a thread leak)."""
    (tmp_path / "prog.py").write_text(REQUESTS)
    gate = str(tmp_path / "gate")
    os.mkfifo(gate)
    run = subprocess.Popen([sys.executable, "-m", "threadgraph", "run", "-o",
                            str(tmp_path / "base"), str(tmp_path / "prog.py"), gate],
                           cwd=str(tmp_path), env=env_with_package(keep_cli=True),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
    run_dir = str(tmp_path / "base" / str(run.pid))
    try:
        assert run.stdout.readline() == "ready\n"
        seen = 1 + 40 + 2  # MainThread, the requests, the pool
        deadline = time.monotonic() + PANE_WAIT
        while True:  # until the flusher has handed the pool's records over
            text = cli("live", "--once", run_dir)
            m = re.search(r"^process: RSS .*  threads (\d+) running, (\d+) seen  ", text, re.M)
            if m and int(m.group(2)) == seen or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        running = _proc_threads(run.pid)
        assert m and int(m.group(1)) == running < seen, text
        assert int(m.group(2)) == seen, text
        with open(gate, "w") as f:
            f.write("end\n")
        assert run.wait(timeout=120) == 0
    finally:
        if run.poll() is None:
            run.kill()
        run.wait()
    # ended: no process to count, the threads seen only
    text = cli("live", "--once", run_dir)
    assert re.search(r"^process: RSS .*  threads %d seen  their memory now " % seen,
                     text, re.M), text
    assert "running" not in text.splitlines()[1], text


LEAKER = r'''
import sys, threading, time
CHUNK, PERIOD = 8192, 0.05
kept = []
stop = threading.Event()

def leak_one():
    kept.append(bytearray(CHUNK))

def leaker():
    while not stop.is_set():
        leak_one()
        time.sleep(PERIOD)

t = threading.Thread(target=leaker, name="w9")
t.start()
with open(sys.argv[1]) as gate:  # until the test has seen the view
    gate.read()
stop.set()
t.join()
'''
LEAK_RATE = 8192 / 0.05  # the leaker's bytes per second, at most (its sleeps add time)
# A reading sees the records up to the recorder's last flush (every 0.5 s):
# over a period of about a second one flush more or less changes the rate by
# half; twice the rate is never reached by a rate, always by the change over
# the pause below (seven seconds' worth)
RATE_SLACK = 2.0
PAUSE = 6.0


def test_live_change_is_per_second_whatever_the_period(tmp_path):
    """CHANGE/s is NOW's change divided by the seconds between the two
    readings: after a pause (a period of seven seconds, as a long capture's
    slow readings make it) a steady leaker shows its rate, not seven seconds'
    growth."""
    (tmp_path / "prog.py").write_text(LEAKER)
    gate = str(tmp_path / "gate")
    os.mkfifo(gate)
    run = subprocess.Popen([sys.executable, "-m", "threadgraph", "run", "-o",
                            str(tmp_path / "base"), str(tmp_path / "prog.py"), gate],
                           cwd=str(tmp_path), env=env_with_package(keep_cli=True),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    run_dir = str(tmp_path / "base" / str(run.pid))
    live = " ".join(shlex.quote(a) for a in
                    [sys.executable, "-m", "threadgraph", "live", run_dir])
    term = Tmux(tmp_path, "sh -c %s" % shlex.quote(live + "; exec sleep 600"))

    def change(t):
        rows = {m[0]: m[1:] for m in ROW.findall(t)}
        return view_bytes(rows["w9"][1]) if "w9" in rows else None

    try:
        text = term.wait_for(lambda t: (change(t) or 0) > 0 and "recording" in t)
        assert " NOW    CHANGE/s        PEAK     LARGEST   RETURNS" in text, text
        term.run("send-keys", "-t", "t", "p")
        term.wait_for(lambda t: "PAUSED" in t)
        time.sleep(PAUSE)
        term.run("send-keys", "-t", "t", "p")
        # every frame of the next seconds: the first reading after the pause
        # (against the one before it) and those after it
        seen = []
        deadline = time.monotonic() + 4.0
        while time.monotonic() < deadline:
            text = term.pane()
            if "PAUSED" not in text and change(text) is not None:
                seen.append(change(text))
            time.sleep(0.05)
        assert seen and max(seen) > 0, seen
        assert max(seen) <= LEAK_RATE * RATE_SLACK, (seen, LEAK_RATE)
        with open(gate, "w") as f:
            f.write("end\n")
        assert run.wait(timeout=120) == 0
    finally:
        term.close()
        if run.poll() is None:
            run.kill()
        run.wait()
