"""memg --held keeps its intermediate series small: each thread's steps once, in
binary, and no unthinned copy of the threads' sum.  Before, every step was
written as text, read back with sscanf, and the sum of all threads written
unthinned too (a 928 MB capture: 1.66 GB of temporary files, 126 s)."""
import resource
import subprocess

from clisupport import CLI

THREADS = 4
STEPS = 60_000
SITE = "<thread memory>:0:sampled"


def write_sampled_run(path):
    """THREADS threads of a sampled run (readings of each thread's memory, no
    .stack needed), their readings interleaved in time."""
    path.mkdir()
    for t in range(THREADS):
        lines = ("%d.%06d#%s=>%d\n" % (1763766000 + i // 1000, (i % 1000) * 1000 + t,
                                       SITE, 1048576 * (1 + t) + (i * 7919 + t) % 65536)
                 for i in range(STEPS))
        (path / ("Worker-%d.mem" % t)).write_text("".join(lines))
    return path


def run_limited(args, limit, cwd):
    def cap():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return subprocess.run([CLI] + [str(a) for a in args], cwd=cwd, preexec_fn=cap,
                          capture_output=True, text=True, timeout=120)


def test_held_temporary_files_bounded(tmp_path):
    run = write_sampled_run(tmp_path / "run")
    out = tmp_path / "out"
    # the sum of all threads as text was THREADS * STEPS lines of about 27
    # bytes (6.5 MB); a thread's binary series is STEPS points of 34 bytes (2 MB)
    limit = 4 * 1024 * 1024
    r = run_limited(["memg", "--held", "--script-only", "-o", out, run], limit, tmp_path)
    assert r.returncode == 0, (r.returncode, r.stderr)
    plot = out / "memg-held-plot"
    assert sorted(p.name for p in plot.iterdir()) == sorted(
        ["held-%d.dat" % t for t in range(THREADS)] + ["held-all.dat", "held-peak.dat",
                                                      "memg-held.gp"])
    # the sum is thinned (to what the graph shows) as it is written: its points
    # are the sums at those times, in order, first and last kept
    levels = [0] * THREADS
    sums = []
    for i in range(STEPS):
        for t in range(THREADS):
            levels[t] = 1048576 * (1 + t) + (i * 7919 + t) % 65536
            sums.append("%d.%06d %d" % (1763766000 + i // 1000, (i % 1000) * 1000 + t,
                                        sum(levels)))
    got = (plot / "held-all.dat").read_text().splitlines()
    assert 100 < len(got) < len(sums) // 10
    assert got[0] == sums[0]
    end = got.pop()  # the last level carried on to the graph's end
    assert end.split()[1] == sums[-1].split()[1]
    at = 0
    for line in got:
        at = sums.index(line, at) + 1
    peak = max(int(s.split()[1]) for s in sums)
    assert any(int(l.split()[1]) == peak for l in got)
    held = (out / "memg-held.txt").read_text().splitlines()
    assert held[0].endswith("(%d bytes) at %s" % (peak, next(
        s.split()[0] for s in sums if int(s.split()[1]) == peak)))
