"""The reader stays bounded and linear on any capture (docs/security.md).

A hostile capture is small: a few bytes of zstd can stand for a MiB of records,
a few bytes can define a thread, ids can be chosen to collide in a hash table.
Each test runs the CLI with a CPU-time limit far above what the input needs
(RLIMIT_CPU: a resource bound, not a timing assertion) and reads its peak RSS
(wait4), then checks the figure against a bound the input allows.
"""
import os
import resource
import shutil
import struct
import subprocess

import pytest

import capture_encode as ce
from clisupport import CLI
from test_capture import chunk, code, header, thread

# Generous: the tests need well under a second each; the quadratic or unbounded
# readers they catch need minutes or gigabytes.
CPU_SECONDS = 20
# Peak RSS a small capture may cost (the ASan build's shadow memory included).
RSS_MB = 200
# An ASan build (make check-asan) takes 2 to 3 times the memory of a plain one.
with open(CLI, "rb") as _f:
    ASAN = b"__asan_init" in _f.read()


def run_bounded(tmp_path, *args):
    """Runs the CLI under RLIMIT_CPU; returns (exit status, stdout, stderr, peak RSS in MB)."""
    out, err = tmp_path / "stdout", tmp_path / "stderr"

    def limit():
        resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))

    with open(out, "wb") as o, open(err, "wb") as e:
        p = subprocess.Popen([CLI] + [str(a) for a in args], stdout=o, stderr=e,
                             preexec_fn=limit)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") \
            else (status >> 8 if os.WIFEXITED(status) else -os.WTERMSIG(status))
    return (p.returncode, out.read_text(errors="replace"), err.read_text(errors="replace"),
            ru.ru_maxrss / 1024)


def zstd_frame(data, tmp_path):
    src = tmp_path / "frame.bin"
    src.write_bytes(data)
    return subprocess.run(["zstd", "-q", "-19", "-c", str(src)], check=True,
                          capture_output=True).stdout


@pytest.mark.skipif(shutil.which("zstd") is None, reason="needs the zstd command")
def test_zstd_chunks_are_decompressed_one_at_a_time(tg, tmp_path):
    """300 zstd chunks of 1 MiB of records each, 30 KB of file: reading the
    first record decompresses one chunk, not 300 MiB up front."""
    # CALL code 1 (dt 0), RETURN (line +0, dt 0, delta 0)
    pair = ce.varint(1 << 1) + ce.varint(0) + ce.varint(1) + ce.varint(0) + ce.varint(0)
    frame = zstd_frame(pair * ((1 << 20) // len(pair)), tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    data = header(flags=ce.F_TIME | ce.F_MEMORY | ce.F_STACK) + code() + thread() + \
        chunk(1, 2, frame, flags=1) * 300
    (run / "capture.tg").write_bytes(data)
    assert len(data) < 100000
    rc, out, err, rss = run_bounded(tmp_path, "decorate-stack", run, "T", "1")
    assert rc == 0, err
    assert "f@a.py:5" in out
    assert rss < RSS_MB, "%.0f MB for a %d-byte capture" % (rss, len(data))


@pytest.mark.skipif(shutil.which("zstd") is None, reason="needs the zstd command")
def test_zstd_chunk_over_1_mib_is_refused(tg, tmp_path):
    """The recorder compresses 64 KiB chunks: a frame that claims more than 1 MiB
    of records is refused before anything is decompressed."""
    frame = zstd_frame(b"\x02\x01\x00" * 400000, tmp_path)
    (tmp_path / "capture.tg").write_bytes(
        header(flags=ce.F_MEMORY) + code() + thread() + chunk(1, 2, frame, flags=1))
    r = tg("peaks", tmp_path)
    assert r.returncode == 1 and "zstd chunk of more than 1 MB" in r.stderr, r.stderr


def test_opening_is_linear_in_the_thread_count(tmp_path):
    """60,000 thread definitions (a few bytes each): the file-name check used to
    compare each thread with all earlier ones."""
    n = 60000
    run = tmp_path / "run"
    run.mkdir()
    parts = [header()]
    for i in range(n):
        parts.append(thread(stream=2 + i, base=b"t%d" % i))
    (run / "capture.tg").write_bytes(b"".join(parts))
    rc, out, err, rss = run_bounded(tmp_path, "peaks", "--peak=0", run)
    assert rc == 0, err[-2000:]
    # and two threads of one name are still refused, the later one named
    (run / "capture.tg").write_bytes(b"".join(parts) + thread(stream=2 + n, base=b"t7"))
    rc, out, err, rss = run_bounded(tmp_path, "peaks", run)
    assert rc == 1 and "two threads have the same file name" in err
    assert "at byte %d:" % (len(b"".join(parts)) + 12) in err, err


_FMIX_INV = pow(0xff51afd7ed558ccd, -1, 1 << 64)


def _unfmix(h):
    """The id whose (unseeded) 64-bit finalizer is h: the inverse of murmur3's
    fmix64 steps the reader used to hash ids with."""
    h ^= h >> 33
    h = (h * _FMIX_INV) & ((1 << 64) - 1)
    return h ^ (h >> 33)


def test_chosen_ids_do_not_collide(tmp_path):
    """Code ids chosen so that an unseeded hash puts them all in one slot: the
    reader's maps are seeded, so the file cannot choose its collisions."""
    n = 100000
    ids = [i for i in (_unfmix(j << 24) for j in range(1, 3 * n)) if i < 1 << 63][:n]
    assert all(i >= 1 << 20 for i in ids) and len(set(ids)) == n
    calls = b"".join(ce.varint(i << 1) + ce.varint(1) + ce.varint(0) for i in ids[:20000])
    run = tmp_path / "run"
    run.mkdir()
    data = header(flags=ce.F_MEMORY) + thread()
    # whole definitions per chunk
    per = []
    cur = b""
    for k, i in enumerate(ids):
        d1 = ce.varint(i) + bytes([0]) + ce.varint(1) + ce.text(b"a.py") + ce.text(b"f%d" % k)
        if len(cur) + len(d1) > 60000:
            per.append(cur)
            cur = b""
        cur += d1
    per.append(cur)
    data += b"".join(chunk(ce.K_CODES, 0, p) for p in per) + chunk(1, 2, calls)
    (run / "capture.tg").write_bytes(data)
    rc, out, err, rss = run_bounded(tmp_path, "peaks", "--peak=0", run)
    assert rc == 0, err[-2000:]


def test_fuzz_targets_run_bounded():
    """tests/fuzz/run.sh (make fuzz-smoke runs every target through it) gives
    libFuzzer a time, an RSS and a single-allocation limit per input: a small
    input that costs seconds or hundreds of MiB is a finding."""
    from clisupport import REPO
    with open(os.path.join(REPO, "tests", "fuzz", "run.sh")) as f:
        script = f.read()
    call = script[script.index('"$bin" $limit'):]
    call = call[:call.index(">\"$log\"")]
    for flag, most in (("-timeout=", 20), ("-rss_limit_mb=", 2048), ("-malloc_limit_mb=", 512)):
        assert flag in call, flag
        value = int(call.split(flag)[1].split()[0])
        assert 0 < value <= most, (flag, value)


def deep_chain(run, n):
    """A capture of one chain of n nested calls, each with its own delta of 1."""
    call = ce.varint(1 << 1)
    rets = b"".join(ce.varint(1) + ce.varint(ce.zz(k)) for k in range(1, n + 1))
    payload = call * n + rets
    chunks = b"".join(chunk(1, 2, payload[i:i + 60000]) for i in range(0, len(payload), 60000))
    run.mkdir()
    (run / "capture.tg").write_bytes(header(flags=ce.F_MEMORY | ce.F_STACK) + code() +
                                     thread() + chunks)


def test_folded_output_is_bounded(tmp_path):
    """A line of folded stacks repeats its whole stack: a chain of n calls is
    n^2/2 frames of text (a 4 MB snapshot of a 100,000-deep chain wrote 14.7 GB).
    folded refuses past --max-output MB (default 1024), saying how deep the calls
    are and how to go further, before writing anything."""
    run = tmp_path / "run"
    deep_chain(run, 1500)  # 1500 * 1501 / 2 frames of "f (a.py:5)": ~12 MiB
    rc, out, err, rss = run_bounded(tmp_path, "folded", "--metric", "delta",
                                    "--max-output", "4", run)
    assert rc == 1 and out == "", err
    assert "would be more than 4 MB of text" in err and "stacks up to 1501 frames deep" in err, err
    assert "give --max-output 12 to write them" in err, err
    rc, out, err, rss = run_bounded(tmp_path, "folded", "--metric", "delta",
                                    "--max-output", "12", run)
    assert rc == 0, err
    lines = out.splitlines()
    assert len(lines) == 1500 and lines[-1].count(";") == 1500


def test_export_output_is_bounded(tmp_path):
    """A .stack line is indented by its depth: a chain of n calls is n^2/2 spaces
    (a 7 MB capture of a million nested calls wrote 12 GB).  export stops past
    --max-output MB (default 1 GB plus 100 times the capture), says why and how
    to go further, and removes what it wrote."""
    run = tmp_path / "run"
    deep_chain(run, 3000)  # 3000 * 2999 / 2 spaces: 4.3 MiB
    out = tmp_path / "out"
    rc, _, err, rss = run_bounded(tmp_path, "export", "--max-output", "1", "-o", out, run)
    assert rc == 1, err
    assert "the text would be more than 1 MB" in err and "--max-output MB" in err, err
    assert os.listdir(out) == []
    rc, _, err, rss = run_bounded(tmp_path, "export", "-o", out, run)
    assert rc == 0, err
    assert os.path.getsize(out / "T.stack") > 3000 * 2999 // 2


def test_fold_depth_is_bounded(tmp_path):
    """Calls nested past --max-depth (default 10,000) get no frame of their own:
    their values stay their ancestor's, with a warning naming the option.  A
    capture of 2,000,000 calls that never return (2 MB) took ~180 bytes a call
    in folded, flamegraph and report (a 16 MB one 3.2 GB)."""
    run = tmp_path / "run"
    deep_chain(run, 300)
    rc, out, err, _ = run_bounded(tmp_path, "folded", "--metric", "delta", "--max-depth", "100",
                                  run)
    assert rc == 0, err
    assert "200 calls nested deeper than 100" in err and "--max-depth" in err, err
    lines = out.splitlines()
    assert len(lines) == 100 and max(l.count(";") for l in lines) == 100  # thread + 100
    # the deepest kept frame's own delta holds its 200 callees' (each call's own is 1)
    assert lines[-1].endswith(" 201"), lines[-1][-40:]
    rc, out, err, _ = run_bounded(tmp_path, "folded", "--metric", "delta", "--max-depth", "0",
                                  run)
    assert rc == 0 and "deeper" not in err and len(out.splitlines()) == 300, err
    un = tmp_path / "un"
    un.mkdir()
    payload = ce.varint(1 << 1) * 2000000
    (un / "capture.tg").write_bytes(
        header(flags=ce.F_MEMORY | ce.F_STACK) + code() + thread() +
        b"".join(chunk(1, 2, payload[i:i + 60000]) for i in range(0, len(payload), 60000)))
    for cmd in (["folded", "--metric", "delta"],
                ["flamegraph", "--metric", "delta", "-o", tmp_path / "f.svg"],
                ["report", "-o", tmp_path / "r.html"]):
        rc, out, err, rss = run_bounded(tmp_path, *cmd, un)
        assert rc == 0 and "1990000 calls nested deeper" in err, err
        # ~65 B a call (the cursor's open calls; 150-200 under ASan, whose
        # 300 MB bound this passed by a few MB) where it was ~180
        assert rss < (600 if ASAN else 250), (cmd, rss)
