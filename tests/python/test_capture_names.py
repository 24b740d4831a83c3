"""Every capture the recorder writes is read back: names of any size and content.

A thread name, a file name or a function name comes from the program and can
hold anything, of any length.  The recorder cuts such texts to TG_TEXT_MAX
bytes (src/recorder/names.h: a record stays a line the readers take, a
definition a chunk), keeping two cut texts distinct; the readers take every
capture and text dump it writes, with --strict.
"""
import json
import os
import random
import re
import subprocess
import sys

import tgcapture
from tgtest import env_with_package, only_dir

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "cli"))
from clisupport import CLI  # noqa: E402

TEXT_MAX = 8192  # src/recorder/names.h

PROGRAM = r'''
import random, sys, threading, threadgraph

seed, fmt, base = int(sys.argv[1]), sys.argv[2], sys.argv[3]
rng = random.Random(seed)
ALPHABET = ["a", "/", "..", "%", "\\", ":", "#", "=>", "\n", "\r", "\x00", "\x1b[2J", "\x7f",
            "\u009b", "\u202e", "\udcff", "é", "漢", "🙂", " ", "~2", "process"]


def text(alphabet=ALPHABET):
    size = rng.choice([0, 1, 5, 200, 3000, 9000, 30000])
    s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
    return (s + "x" * size + s)[: size + 40] if size else s



def make_function(name, depth):
    def f(n):
        if n > 0:
            g(n - 1)
        return [0] * rng.randint(0, 50)
    f.__code__ = f.__code__.replace(co_name=name, co_filename=text() or "f.py")
    return f


def g(n):
    rng.choice(FUNCS)(n)
    len("x")


FUNCS = [make_function(text(), i) for i in range(6)]
FUNCS.append(make_function("a:1:b", 0))  # FUNCTION is after a record's last ':'
# two long names that differ only past the cut: they must stay two functions
FUNCS += [make_function("L" * 20000 + "one", 0), make_function("L" * 20000 + "two", 0)]


def work():
    for _ in range(rng.randint(1, 8)):
        g(rng.randint(0, 4))
    FUNCS[-1](0)
    FUNCS[-2](0)
    FUNCS[-3](0)


p = threadgraph.ProcessProfile(format=fmt, default_log_path=base, profile="both")
p.trackStack()
p.enable()
threads = [threading.Thread(target=work, name=text()) for _ in range(rng.randint(1, 5))]
threads.append(threading.Thread(target=work, name="T" * 20000 + "a"))
threads.append(threading.Thread(target=work, name="T" * 20000 + "b"))
for t in threads:
    t.start()
for t in threads:
    t.join()
work()
p.disable()
'''


def cli(*args):
    return subprocess.run([CLI] + [str(a) for a in args], capture_output=True, text=True,
                          errors="replace", timeout=120)


def record(tmp_path, seed, fmt):
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    base = tmp_path / ("%s-%d" % (fmt, seed))
    subprocess.run([sys.executable, str(script), str(seed), fmt, str(base)], check=True,
                   env=env_with_package(None), capture_output=True, timeout=120)
    return only_dir(base)


def test_every_capture_the_recorder_writes_is_read(tmp_path):
    """Random programs with random names (seeded: each run does the same), in both
    formats: every command reads the run with --strict, and the capture's export
    has the text dump's shape (same files, records on one line each, FILE and
    FUNCTION at most TEXT_MAX bytes, the two long names kept apart)."""
    for seed in range(2):
        runs = {fmt: record(tmp_path, seed, fmt) for fmt in ("binary", "text")}
        out = tmp_path / ("export-%d" % seed)
        r = cli("export", runs["binary"], "-o", out)
        assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
        for fmt, run in list(runs.items()) + [("export", str(out))]:
            for args in (["peaks", "--strict", "--peak=3"],
                         ["folded", "--strict", "--metric", "delta"]):
                r = cli(*args, run)
                assert r.returncode == 0, (seed, fmt, args, r.stderr[-3000:])
                assert "warning" not in r.stderr, (seed, fmt, args, r.stderr[-3000:])
        for fmt, d in (("text", runs["text"]), ("export", str(out))):
            funcs = set()
            for name in os.listdir(d):
                if not name.endswith(".mem") or name == "process.mem":
                    continue
                with open(os.path.join(d, name), "rb") as f:
                    for line in f.read().split(b"\n")[:-1]:
                        site = line.split(b"#", 1)[1].rsplit(b"=>", 1)[0]
                        assert site.count(b":") >= 2, line[:300]
                        file_, _, func = site.rsplit(b":", 2)
                        assert len(file_) <= TEXT_MAX and len(func) <= TEXT_MAX, (fmt, name)
                        funcs.add(func)
            assert b"a\\x3a1\\x3ab" in funcs, fmt  # a name's ':' is written \x3a
            longs = [f for f in funcs if f.startswith(b"L" * 100)]
            assert len(longs) == 2 and all(len(f) == TEXT_MAX for f in longs), (fmt, longs)


def test_a_20_mb_thread_name_keeps_the_capture_readable(tmp_path):
    """A thread named with 20 MB of text: its definition used to make a chunk
    longer than the readers take ("chunk longer than 16 MB")."""
    script = tmp_path / "big.py"
    script.write_text(
        "import sys, threading, threadgraph\n"
        "p = threadgraph.ProcessProfile(format='binary', default_log_path=sys.argv[1])\n"
        "p.enable()\n"
        "t = threading.Thread(target=lambda: [0] * 100, name='n' * 20000000)\n"
        "t.start(); t.join()\n"
        "p.disable()\n")
    base = tmp_path / "out"
    subprocess.run([sys.executable, str(script), str(base)], check=True,
                   env=env_with_package(None), capture_output=True, timeout=120)
    run = only_dir(base)
    assert os.path.getsize(os.path.join(run, "capture.tg")) < 1000000
    r = cli("peaks", "--strict", run)
    assert r.returncode == 0, r.stderr
    # runinfo.json names the thread as the capture does (it held all 20 MB)
    assert os.path.getsize(os.path.join(run, "runinfo.json")) < 100000
    with open(os.path.join(run, "runinfo.json")) as f:
        names = [t["name"] for t in json.load(f)["threads"]]
    cap = tgcapture.load(os.path.join(run, "capture.tg"))
    assert sorted(names) == sorted(cap.threads[s]["name"] for s in cap.order)
    (long,) = [n for n in names if n.startswith("n")]
    assert re.fullmatch("n{8175}~[0-9a-f]{16}", long), long[-40:]
