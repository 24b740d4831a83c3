"""Mappings per second under native=True with many live mappings (bench/RESULTS.md,
"Native mapping table").

    python3 bench/native_mmap.py [--live N] [--cycles N] [--reps N]

In a fresh process each: enables ProcessProfile(native=True) (binary capture in
a temporary directory), maps LIVE anonymous pages with the mmap module and keeps
them, then times CYCLES rounds of one more anonymous mapping made and unmapped
(mmap.mmap(-1, 4096) and close(): an mmap and a munmap through the hooks, each
entering or removing a range of the table while LIVE others are in it).  Prints
one JSON object: mappings per second (the best of REPS runs) with and without
the recorder, and every run's figure.  Needs threadgraph importable by this
Python; Linux.
"""
import argparse
import json
import subprocess
import sys

CHILD = r'''
import mmap, sys, tempfile, time
live, cycles, native = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
if native:
    from threadgraph import ProcessProfile
    d = tempfile.mkdtemp()
    p = ProcessProfile(default_log_path=d, native=True)
    p.enable()
keep = [mmap.mmap(-1, 4096) for _ in range(live)]
t0 = time.perf_counter()
for _ in range(cycles):
    mmap.mmap(-1, 4096).close()
t1 = time.perf_counter()
if native:
    p.disable()
print(cycles / (t1 - t0))
'''


def run(live, cycles, native):
    out = subprocess.run([sys.executable, "-c", CHILD, str(live), str(cycles),
                          "1" if native else "0"],
                         check=True, stdout=subprocess.PIPE, universal_newlines=True)
    return float(out.stdout.split()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--live", type=int, default=10000)
    ap.add_argument("--cycles", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    runs = {"native": [], "off": []}
    for _ in range(a.reps):
        runs["off"].append(run(a.live, a.cycles, False))
        runs["native"].append(run(a.live, a.cycles, True))
    print(json.dumps({"python": sys.version.split()[0], "live": a.live, "cycles": a.cycles,
                      "mappings_per_s_native": round(max(runs["native"])),
                      "mappings_per_s_off": round(max(runs["off"])),
                      "runs": {k: [round(v) for v in vs] for k, vs in runs.items()}}))


if __name__ == "__main__":
    main()
