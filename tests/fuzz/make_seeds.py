#!/usr/bin/env python3
"""Writes the seed corpus tests/fuzz/seeds/<target>/ from tests/cli/fixtures.

Run from anywhere; rewrites the seed directories (the seeds are kept in git, so
this only needs rerunning when the fixtures or the targets change).
"""
import gzip
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "cli", "fixtures")
SEEDS = os.path.join(HERE, "seeds")


def read(*p):
    with open(os.path.join(FIX, *p), "rb") as f:
        return f.read()


def lines(*p):
    return read(*p).splitlines()


def write(target, name, data):
    d = os.path.join(SEEDS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    shutil.rmtree(SEEDS, ignore_errors=True)
    mem7 = read("tutorial", "Thread-7.mem")
    stack7 = read("tutorial", "Thread-7.stack")
    odd = [b"1394031433.4#a:b#c=>d.py:1:2:f=>-5", b"1.#x:1:y=>+0", b"x:99:f=>1",
           b"1394031433.456789#/p/q.py:123456789:g\\x1b=>-9223372036",
           b"12#C:\\dir\\f.py:7:<lambda>=>1\r", b"#:1:=>", b"1#::=>=>1"]
    for i, ln in enumerate(lines("tutorial", "Thread-7.mem")[:8] +
                           lines("notime", "Worker.mem") + odd):
        write("fuzz_memrec", "line%02d" % i, ln)
    for i, ln in enumerate(lines("tutorial", "Thread-7.stack")[:8] +
                           lines("notime", "Worker.stack") +
                           [b"   1.5#a:b:1:c", b"      x:1:y", b"1#:0:"]):
        write("fuzz_stackrec", "line%02d" % i, ln)
    for i, ln in enumerate(lines("tutorial", "process.mem") + lines("notime", "process.mem") +
                           [b"1394031433.123456789012345678901#-1", b"+0", b"1.#1"]):
        write("fuzz_procrec", "line%02d" % i, ln)
    for name in ("Thread-7.mem", "Thread-7.stack", "process.mem", "MainThread.mem"):
        write("fuzz_linereader", name, read("tutorial", name))
    write("fuzz_linereader", "Thread-7.mem.gz", gzip.compress(mem7))
    write("fuzz_linereader", "crlf-nonl", b"a\r\nb\r\n\r\nlast")
    write("fuzz_linereader", "overlong", b"x" * (64 * 1024 + 10) + b"\nshort\n" + b"y" * 70000)
    write("fuzz_linereader", "binary", bytes(range(32)) * 8)
    write("fuzz_linereader", "nul-bytes", b"1#a:1:f=>1\nx\0y\n\0\n" + b"z" * 5000 + b"\0\nlast\0")
    write("fuzz_decorate", "tutorial-line30", b"30\0" + mem7 + b"\0" + stack7)
    write("fuzz_decorate", "tutorial-text",
          b"1394031433.4#/data/code/thread_graph/examples/main.py:39:doStuff=>167936\0" +
          mem7 + b"\0" + stack7)
    write("fuzz_decorate", "tutorial-legend",
          b"19: Thread-7>/data/code/thread_graph/examples/main.py:39:doStuff=>167936\0" +
          mem7 + b"\0" + stack7)
    write("fuzz_decorate", "small", b"3\0" + b"1#a:2:g=>1\n2#a:3:f=>5\n3#a:1:r=>9\n" +
          b"\0" + b"0#a:1:r\n 1#a:2:g\n 2#a:3:f\n")
    # regression: an empty FILE as the subtree's first text applied an offset
    # to the still-NULL arena (UBSan: applying zero offset to null pointer)
    write("fuzz_decorate", "regress-empty-file",
          b"3\0" + b"1#a:2:g=>5\n2#`:3:f=a>5\n3#:1:r=>9\n" + b"\0" +
          b"0#a:1:r\n 1#:2:r\n 1#:2:g>")
    write("fuzz_decorate", "regress-all-empty", b"3\0" + b"0#:1:\n1#:2:=>5\n2#:1:=>9\n" +
          b"\0" + b"0#:1:\n 1#:2:\n")
    for i, t in enumerate([b"05/03/2014 15:30", b"05/03/14 15:30", b"05/03/2014", b"05/03/14",
                           b"15:30", b"29/02/2000", b"31/12/1969 23:59", b"00:00"]):
        write("fuzz_timeparse", "t%d" % i, t)
    for i, n in enumerate([b"Thread-7", b"x`touch /tmp/pwned`", b"it's", b"a'\n'b\r\x1b",
                           b"\"; system(\"id\"); \"", b"@outfile", b"\xc3\xa9t\xc3\xa9"]):
        write("fuzz_gpquote", "s%d" % i, n)
    for i, n in enumerate([b"MainThread", b"Thread-1", b"../../etc/x", b"a/b", b"\x00",
                           b"..", b".", b"process", b"\x1b[2J", b"", b"%2E", b"~2",
                           "\u00e9t\u00e9 \u65e5\u672c".encode(), b"x" * 300,
                           b"\xf0\x9f\x98\x80" * 60, b"process\0process\0process~2",
                           b"a\0a\0a~2\0a~3"]):
        write("fuzz_names", "n%02d" % i, n)
    # regressions: a lead byte without its continuation bytes once let the
    # bytes after it ('/', control bytes) through unescaped
    for i, n in enumerate([b"\xefc\x01", b"\xc0/..", b"\xe0\x80/x", b"\xf0\n\x1b[2J"]):
        write("fuzz_names", "regress-utf8-%d" % i, n)
    write("fuzz_peaks", "tutorial-thread7", b"\x00" + mem7)
    write("fuzz_peaks", "tutorial-thread7-json-top", b"\x62" + mem7)
    write("fuzz_peaks", "notime", b"\x03" + read("notime", "Worker.mem"))
    # regression: TIME "05" was copied into --json as a number with a leading zero
    write("fuzz_peaks", "regress-json-time", b"\x00" + b"05#a:1:f=>999999\n007.5#a:1:f=>-999999\n")
    write("fuzz_peaks", "c1-controls", b"\x00" + b"1#a\xc2\x9b.py:1:f\xc2\x85=>999999\n")
    write("fuzz_peaks", "thread6", b"\x1e" + read("tutorial", "Thread-6.mem"))
    # snapshots: option byte (depth, --merge-threads, --sort total), then the file
    for i, (opt, parts) in enumerate([
            (0x05, ("accounting2", "run-a", "snapshot-2-final")),
            (0x09, ("accounting2", "run-a", "snapshot-2-final")),
            (0x10, ("accounting2", "run-b", "snapshot-1-final")),
            (0x02, ("accounting2", "run-a", "snapshot-1-before")),
            (0x05, ("accounting", "snapshot-2-final")),
            (0x18, ("accounting", "snapshot-1-before"))]):
        write("fuzz_snapshot", "snap%d" % i, bytes([opt]) + read(*parts))
    write("fuzz_snapshot", "gz", b"\x03" + gzip.compress(
        read("accounting2", "run-a", "snapshot-2-final"), mtime=0))
    write("fuzz_snapshot", "hostile", b"\x00" + b"# threadgraph snapshot 2\n# label: \x1b[2J\n"
          b"# thread: 0 a\x07\n# thread: 1 ok\n0 - 1 1 1 1 1 <no python frame>\n"
          b"1 0 1 1 1 1 1 x\x1bq\n2 0 1 -1 -1 -1 -1 f<-g\n2 1 1 1 1 1 1 dup\n"
          b"3 9 1 1 1 1 1 orphan\n4 3 1 1 1 1 1 child\n")
    capture_seeds()


def canonical(data):
    """Dump text with six-decimal times, as export writes them."""
    out = []
    for ln in data.split(b"\n")[:-1]:
        s = ln.lstrip(b" ")
        t, _, rest = s.partition(b"#")
        sec, _, fr = t.partition(b".")
        out.append(ln[:len(ln) - len(s)] + sec + b"." + (fr + b"000000")[:6] + b"#" + rest)
    return b"".join(x + b"\n" for x in out)


def capture_seeds():
    """Binary captures made by tests/cli/capture_encode.py from the fixtures."""
    import sys
    import tempfile
    sys.path.insert(0, os.path.join(HERE, "..", "cli"))
    import capture_encode as ce
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("Thread-7.mem", "Thread-7.stack", "process.mem", "MainThread.mem",
                     "Thread-6.mem"):
            with open(os.path.join(tmp, name), "wb") as f:
                f.write(canonical(read("tutorial", name)))
        for name in ("Worker.mem", "process.mem"):
            with open(os.path.join(tmp, "nt-" + name), "wb") as f:
                f.write(read("notime", name))
        p = lambda *n: [os.path.join(tmp, x) for x in n]  # noqa: E731
        t7 = ce.encode(p("Thread-7.mem", "Thread-7.stack", "process.mem"), chunk=64)
        write("fuzz_capture", "tutorial-thread7", t7)
        write("fuzz_capture", "tutorial-thread7-cut", t7[:len(t7) * 2 // 3])
        write("fuzz_capture", "tutorial-mem-only",
              ce.encode(p("MainThread.mem", "Thread-6.mem", "Thread-7.mem", "process.mem")))
        write("fuzz_capture", "stack-only", ce.encode(p("Thread-7.stack"), chunk=30))
        write("fuzz_capture", "dropped-noend",
              ce.encode(p("Thread-7.mem", "Thread-7.stack"), dropped=["Thread-7:4:2"], end=False))
        os.rename(os.path.join(tmp, "nt-Worker.mem"), os.path.join(tmp, "Worker.mem"))
        write("fuzz_capture", "notime", ce.encode(p("Worker.mem"), timed=False, chunk=20))
    # regression: process sizes summed past 2^63 (UBSan: signed integer overflow)
    hdr = ce.MAGIC + ce.struct.pack("<IIqIIII", 1, ce.F_PROCESS, 0, 0, 0, 1, 0)
    body = ce.varint(ce.zz(-(1 << 62))) * 3
    write("fuzz_capture", "regress-sample-overflow",
          hdr + ce.struct.pack("<BBHII", ce.K_PROCESS, 0, 0, 1, len(body)) + body)

    # folded/flamegraph: mode byte (time, no timestamps, snapshot), then for dumps
    # the .stack part's length in 16-byte units, the .stack part padded with
    # newlines, and the .mem part
    for thread in ("MainThread", "worker 1"):
        stack = read("flamerun", thread + ".stack")
        units = (len(stack) + 15) // 16
        stack += b"\n" * (units * 16 - len(stack))
        for mode in (0, 1):
            write("fuzz_fold", "%s-%d" % (thread.replace(" ", "_"), mode),
                  bytes([mode, units]) + stack + read("flamerun", thread + ".mem"))
    for name in ("snapshot-1-final", "snapshot-2-peak"):
        write("fuzz_fold", name, b"\x04" + read("flamerun", name))


if __name__ == "__main__":
    main()
