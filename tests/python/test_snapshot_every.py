"""Periodic snapshots by time (ProcessProfile.snapshot_every(seconds=True),
`threadgraph run --snapshot-every SECONDS`; docs/accounting.md): in a full run
they are looked for at Python calls, in a sampled run, which sees no call, at
the sampled allocations; each names the site that grew."""
import os
import re
import subprocess
import sys

import pytest

from tgtest import env_with_package, only_dir, read_lines

PROGRAM = """
import threading, time
KEEP = []

def block():                 # a Python call: where a full run looks at the time
    return bytearray(100 << 10)

def grow():                  # 100 KiB blocks over about 0.8 s
    for _ in range(40):
        KEEP.append(block())
        time.sleep(0.02)

t = threading.Thread(target=grow, name="grower")
t.start()
t.join()
print("ok")
"""


def periodic(run_dir):
    """[(number, seconds)] of the periodic snapshots by time, in order."""
    out = []
    for name in os.listdir(run_dir):
        m = re.match(r"snapshot-(\d+)-t-([\d.]+)s$", name)
        if m:
            out.append((int(m.group(1)), float(m.group(2))))
    return sorted(out)


def largest_site(path):
    """The call (FILE:LINE:FUNC) of the site with the most live bytes."""
    best = None
    for line in read_lines(path):
        if not line.startswith("#"):
            f = line.split(" ", 7)
            if best is None or int(f[3]) > best[0]:
                best = (int(f[3]), f[7])
    return best[1]


def run(tmp_path, *options):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    return subprocess.run([sys.executable, "-m", "threadgraph", "run"] + list(options)
                          + ["-o", "out", str(prog)], cwd=str(tmp_path),
                          env=env_with_package(), timeout=120, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True)


@pytest.mark.parametrize("mode", [["--sampled", "--sample-bytes", "65536"], ["--format", "text"]])
def test_snapshot_every_writes_snapshots_while_the_run_goes_on(tmp_path, mode):
    res = run(tmp_path, "--snapshot-every", "0.1", *mode)
    assert res.returncode == 0 and res.stdout == "ok\n", res.stderr
    run_dir = only_dir(tmp_path / "out")
    snaps = periodic(run_dir)
    # the first after 0.1 s, then every 0.1 s: at least a few in 0.8 s
    assert len(snaps) >= 3, os.listdir(run_dir)
    times = [t for _, t in snaps]
    assert times[0] == 0.1 and all(abs(b - a - 0.1) < 1e-9 for a, b in zip(times, times[1:]))
    # the last one while grow() ran names its blocks
    last = os.path.join(run_dir, "snapshot-%d-t-%gs" % snaps[-1])
    assert largest_site(last).endswith((":grow", ":block")), last


def test_snapshot_every_through_the_api_in_sampled_mode(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text("from threadgraph import ProcessProfile\n"
                    "p = ProcessProfile(default_log_path='out', mode='sampled', "
                    "sample_bytes=65536)\n"
                    "p.snapshot_every(every=0.1, start_after=0.1, seconds=True)\n"
                    "p.enable()\n" + PROGRAM + "p.disable()\n")
    res = subprocess.run([sys.executable, str(prog)], cwd=str(tmp_path),
                         env=env_with_package(), timeout=120, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True)
    assert res.returncode == 0 and res.stdout == "ok\n", res.stderr
    assert len(periodic(only_dir(tmp_path / "out"))) >= 3


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "x", "1e9", "0.0001"])
def test_snapshot_every_refuses_a_bad_period(tmp_path, bad):
    res = run(tmp_path, "--snapshot-every", bad)
    assert res.returncode == 2, res
    assert "--snapshot-every" in res.stderr and ("0.001 to 86400" in res.stderr
                                                 or "not a number" in res.stderr), res.stderr
    assert not (tmp_path / "out").exists()
