"""A real multi-threaded run's text dumps, encoded into a binary capture by
tests/cli/capture_encode.py, read back by the CLI: `threadgraph export` gives the
recorder's text byte for byte, and peaks and decorate-stack print the same on the
capture as on the text.  (The recorder's own capture is tested beside it; this
test checks the reader against everything the text recorder really writes: C
functions, generators, exceptions, threads still running, odd thread names.)
"""
import inspect
import os
import subprocess
import sys

import pytest

import threadgraph
from tgtest import only_dir, run_scenario

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "cli"))
import capture_encode as ce  # noqa: E402
from clisupport import CLI  # noqa: E402

TEXT_KW = "format='text', " if "format" in inspect.signature(
    threadgraph.ProcessProfile.__init__).parameters else ""

SCENARIO = """
import threading, time
import threadgraph

def gen(n):
    for i in range(n):
        yield [i] * 50

def boom(k):
    if k % 7 == 0:
        raise ValueError(k)
    return bytearray(k * 10)

def work(n):
    keep = []
    for i in range(n):
        keep.append(sorted(range(i % 40)))
        for chunk in gen(3):
            keep.append(len(chunk))
        try:
            boom(i)
        except ValueError:
            pass
        if i % 50 == 0:
            keep.append(bytearray(300000))
    return keep

p = threadgraph.ProcessProfile(TEXT_KWdefault_log_path="out")
p.trackStack()
p.setProcessMemoryFrequence(50)
p.enable()
ts = [threading.Thread(target=work, args=(300,), name=name)
      for name in ("worker-1", "w\\u00e9 2", "x.y")]
for t in ts:
    t.start()
work(200)
for t in ts:
    t.join()
p.disable()
""".replace("TEXT_KW", TEXT_KW)


def cli(*args):
    return subprocess.run([CLI] + [str(a) for a in args], capture_output=True, text=True,
                          errors="replace", timeout=120)


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("roundtrip")
    run_scenario(tmp, SCENARIO)
    text = only_dir(tmp / "out")
    dumps = sorted(f for f in os.listdir(text) if f.endswith((".mem", ".stack")))
    assert len(dumps) == 9, dumps  # 4 threads x 2, process.mem
    cap = tmp / "cap"
    cap.mkdir()
    (cap / "capture.tg").write_bytes(ce.encode([os.path.join(text, f) for f in dumps],
                                               chunk=4096))
    return text, dumps, cap


def test_export_is_the_recorders_text(real_run, tmp_path):
    text, dumps, cap = real_run
    r = cli("export", "-o", tmp_path / "x", cap)
    assert r.returncode == 0, r.stderr
    # and runinfo.json: the threads' files and native ids (report's collector marks)
    assert sorted(os.listdir(tmp_path / "x")) == sorted(dumps + ["runinfo.json"])
    for f in dumps:
        with open(os.path.join(text, f), "rb") as a, open(tmp_path / "x" / f, "rb") as b:
            assert a.read() == b.read(), f


def test_peaks_and_decorate_same_on_capture(real_run, tmp_path):
    text, dumps, cap = real_run
    mems = [os.path.join(text, f) for f in dumps if f.endswith(".mem")]
    a = cli("peaks", "--peak=100", "--peak_delta_time=0", *mems)
    b = cli("peaks", "--peak=100", "--peak_delta_time=0", cap)
    assert a.returncode == 0 and b.returncode == 0, (a.stderr, b.stderr)
    assert a.stdout.strip()
    rows_a = [ln.split("\t") for ln in a.stdout.splitlines()]
    rows_b = [ln.split("\t") for ln in b.stdout.splitlines()]
    # the same peaks; MEMFILE names the text file vs the capture's export path
    assert [r[:4] + r[5:] for r in rows_a] == [r[:4] + r[5:] for r in rows_b]
    for row in rows_a[:6]:
        base = os.path.basename(row[4])[:-len(".mem")]
        d1 = cli("decorate-stack", row[4], os.path.join(text, base + ".stack"), row[5])
        d2 = cli("decorate-stack", cap, base, row[5])
        assert d1.returncode == 0, d1.stderr
        assert (d2.returncode, d2.stdout) == (0, d1.stdout)
