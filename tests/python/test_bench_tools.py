"""The benchmark harness's per-call tool (bench/event_cost.py) runs against this
threadgraph and reports what it measured, in its documented format."""
import os
import re
import statistics
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


def test_cpu_table_compares_every_configuration_at_equal_page_faults(capsys):
    """bench/cpu_table.py's fault table: runs whose CPU time is a constant per
    configuration plus a shared cost per page fault give back each constant's
    ratio over the unprofiled run's, at the unprofiled run's median faults,
    whatever faults each configuration's runs took."""
    sys.path.insert(0, os.path.join(REPO, "bench"))
    try:
        import cpu_table
    finally:
        sys.path.pop(0)
    per_fault = 1.5e-6
    base = {"none": 1.0, "noop": 1.02, "tg-sampled": 1.05}
    faults = {"none": [400e3, 520e3, 430e3, 510e3], "noop": [450e3, 500e3, 470e3],
              "tg-sampled": [505e3, 490e3, 515e3, 480e3]}
    runs = {"numpy_heavy": {c: [(base[c] + per_fault * f, f) for f in fs]
                            for c, fs in faults.items()}}
    cpu_table.fault_table(["noop", "tg-sampled"], ["numpy_heavy"], runs)
    out = capsys.readouterr().out
    head, rule, row = [line for line in out.splitlines() if line.startswith("|")][:3]
    cells = dict(zip(head.strip("|").split("|"), row.strip("|").split("|")))
    cells = {k.strip(): v.strip() for k, v in cells.items()}
    assert cells["CPU per fault"] == "1.50 us", cells
    assert cells["faults: none (median)"] == "470 K", cells
    at = {c: base[c] + per_fault * 470e3 for c in base}  # 1.705 s unprofiled
    assert cells["noop / none at equal faults"] == "%.3f" % (at["noop"] / at["none"]), cells
    assert cells["tg-sampled / none at equal faults"] == "%.3f" % (at["tg-sampled"] / at["none"])
    # tg-sampled's runs took more faults than the unprofiled ones: its plain
    # median ratio is higher than the one at equal faults
    assert statistics.median(t for t, _ in runs["numpy_heavy"]["tg-sampled"]) / \
        statistics.median(t for t, _ in runs["numpy_heavy"]["none"]) > at["tg-sampled"] / at["none"]
    # the faults hardly vary (glibc's thresholds fixed): no fit, no table
    flat = {"numpy_heavy": {c: [(base[c], 500e3)] * 4 for c in base}}
    cpu_table.fault_table(["noop", "tg-sampled"], ["numpy_heavy"], flat)
    assert capsys.readouterr().out == ""
