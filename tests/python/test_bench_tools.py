"""The benchmark harness's per-call tool (bench/event_cost.py) runs against this
threadgraph and reports what it measured, in its documented format."""
import os
import re
import subprocess
import sys

from tgtest import env_with_package

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EVENT_COST = os.path.join(REPO, "bench", "event_cost.py")


def test_event_cost_reports_ns_per_call_for_each_loop():
    out = subprocess.run([sys.executable, EVENT_COST, "--configs", "tg-binary,none",
                          "--rounds", "2", "--calls", "3000"],
                         env=env_with_package(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = re.findall(r"^(calls|allocs)\s+(\S+)\s+(\d+\.\d) ns/call \[(\d+\.\d)-(\d+\.\d)\]",
                      out.stdout, re.M)
    assert sorted((loop, cfg) for loop, cfg, *_ in rows) == [
        ("allocs", "none"), ("allocs", "tg-binary"), ("calls", "none"), ("calls", "tg-binary")
    ], out.stdout
    # Figures only, never their size: a test must not depend on the machine's
    # speed (a loaded machine made 'none' slower than 'tg-binary' here once).
    for _, _, m, q1, q3 in rows:
        assert 0 < float(q1) <= float(m) <= float(q3), out.stdout


def test_event_cost_rejects_an_unknown_loop():
    out = subprocess.run([sys.executable, EVENT_COST, "--loops", "spin"],
                         env=env_with_package(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "unknown loop 'spin'" in out.stderr, out.stderr
