"""An independent pure-Python reader of the binary capture (docs/formats.md
"Binary capture"), used as the oracle of the recorder tests: it decodes
capture.tg and renders the text files that text mode writes for the same run.

Written from the format page only (not from the C code), so a test that
compares its rendering with the recorder's own text files checks both.
"""
import shutil
import struct
import subprocess

MAGIC = b"\x89TGCAP\r\n"
F_TIME, F_MEMORY, F_STACK, F_PROCESS = 1, 2, 4, 8
EVENTS, CODES, THREAD, PROCESS, END = 1, 2, 3, 4, 5


def varint(buf, pos):
    shift = value = 0
    while True:
        if pos >= len(buf):
            raise EOFError("varint cut short")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def zstd_decompress(frame):
    """One zstd frame, through the zstandard module or the zstd command."""
    try:
        import zstandard
        return zstandard.ZstdDecompressor().decompress(frame)
    except ImportError:
        pass
    if shutil.which("zstd") is None:
        raise RuntimeError("no zstd decoder (zstandard module or zstd command)")
    return subprocess.run(["zstd", "-d", "-c", "-q"], input=bytes(frame),
                          stdout=subprocess.PIPE, check=True).stdout


def can_decompress():
    try:
        import zstandard  # noqa: F401
        return True
    except ImportError:
        return shutil.which("zstd") is not None


def unzz(u):
    return (u >> 1) ^ -(u & 1)


def blob(buf, pos):
    n, pos = varint(buf, pos)
    if pos + n > len(buf):
        raise EOFError("string cut short")
    return bytes(buf[pos:pos + n]), pos + n


class Capture:
    """A decoded capture: header fields, codes, threads, streams, trailer."""

    def __init__(self, data):
        if data[:8] != MAGIC:
            raise ValueError("not a capture")
        (self.version, self.flags, self.start_us, self.memory_mode, self.clock,
         self.pid, _) = struct.unpack_from("<IIqIIII", data, 8)
        self.codes = {}      # id -> (kind, firstline, file bytes, func bytes)
        self.threads = {}    # stream -> dict(native_id, ident, base, name)
        self.order = []      # thread streams in definition order
        self.streams = {}    # stream -> bytearray of its payloads
        self.end = None      # (end_us, {stream: (calls, returns, dropped)}) or None
        self.truncated = False
        self.chunk_kinds = []
        pos = 40
        while pos < len(data):
            if pos + 12 > len(data):
                self.truncated = True
                break
            kind, cflags, _, stream, length = struct.unpack_from("<BBHII", data, pos)
            if pos + 12 + length > len(data):
                self.truncated = True
                break
            payload = data[pos + 12:pos + 12 + length]
            pos += 12 + length
            assert cflags in (0, 1), "unknown chunk flags %d" % cflags
            if cflags == 1:
                payload = zstd_decompress(payload)
            self.chunk_kinds.append((kind, stream, cflags))
            if kind == CODES:
                p = 0
                while p < len(payload):
                    cid, p = varint(payload, p)
                    ckind = payload[p]
                    first, p = varint(payload, p + 1)
                    f, p = blob(payload, p)
                    fn, p = blob(payload, p)
                    assert cid not in self.codes, "code %d defined twice" % cid
                    self.codes[cid] = (ckind, first, f, fn)
            elif kind == THREAD:
                native, p = varint(payload, 0)
                ident, p = varint(payload, p)
                base, p = blob(payload, p)
                name, p = blob(payload, p)
                self.threads[stream] = dict(native_id=native, ident=ident,
                                            base=base.decode("utf-8", "surrogateescape"),
                                            name=name.decode("utf-8", "surrogateescape"))
                self.order.append(stream)
            elif kind in (EVENTS, PROCESS):
                if kind == EVENTS:
                    assert stream in self.threads, "events before the thread definition"
                self.streams.setdefault(stream, bytearray()).extend(payload)
                if kind == EVENTS:  # every code used here is defined already
                    self._check_codes(payload)
            elif kind == END:
                end_us = struct.unpack_from("<q", payload, 0)[0]
                n, p = varint(payload, 8)
                counts = {}
                for _ in range(n):
                    s, p = varint(payload, p)
                    c, p = varint(payload, p)
                    r, p = varint(payload, p)
                    d, p = varint(payload, p)
                    counts[s] = (c, r, d)
                self.end = (end_us, counts)

    def _check_codes(self, payload):
        for ev in self._events(payload):
            if ev[0] == "call":
                assert ev[1] in self.codes, "code %d used before its definition" % ev[1]

    def _events(self, buf):
        """Yields ("call", code, dt, line) / ("return", line_off, dt, delta) /
        ("dropped", n) / ("unwound", n) / ("level", memory, starts) from a
        thread stream's bytes."""
        timed = self.flags & F_TIME
        memory = self.flags & F_MEMORY
        p = 0
        while p < len(buf):
            head, p = varint(buf, p)
            if head == 0:
                typ = buf[p]
                n, p = varint(buf, p + 1)
                assert typ in (1, 2, 3)
                if typ == 3:  # LEVEL: memory, then the open calls' starts
                    count, p = varint(buf, p)
                    starts, at = [], 0
                    for _ in range(count):
                        d, p = varint(buf, p)
                        at += unzz(d)
                        starts.append(at)
                    yield ("level", unzz(n), starts)
                    continue
                yield ("dropped" if typ == 1 else "unwound", n)
            elif head & 1 == 0:
                code = head >> 1
                dt = line = None
                if timed:
                    dt, p = varint(buf, p)
                if code in self.codes and self.codes[code][0] == 1:
                    line, p = varint(buf, p)
                    line = (line >> 1) ^ -(line & 1)  # zigzag
                yield ("call", code, dt, line)
            else:
                dt = delta = None
                if timed:
                    dt, p = varint(buf, p)
                if memory:
                    d, p = varint(buf, p)
                    delta = unzz(d)
                yield ("return", unzz(head >> 1), dt, delta)

    def thread_records(self, stream):
        """(calls, returns, dropped): each call (depth, us, file, line, func) and
        each return (us, file, line, func, delta), in stream order."""
        calls, returns, dropped = [], [], 0
        us = self.start_us
        open_ = []
        for ev in self._events(self.streams.get(stream, b"")):
            if ev[0] == "dropped":
                dropped += ev[1]
                continue
            if ev[0] == "level":
                continue
            if ev[0] == "unwound":  # calls closed without a return record
                assert ev[1] <= len(open_)
                del open_[len(open_) - ev[1]:]
                continue
            if ev[2] is not None:
                us += ev[2]
            if ev[0] == "call":
                kind, first, f, fn = self.codes[ev[1]]
                line = ev[3] if kind == 1 else first
                calls.append((len(open_), us, f, line, fn))
                open_.append((f, line, fn))
            else:
                f, ref, fn = open_.pop()
                returns.append((us, f, ref + ev[1], fn, ev[3]))
        return calls, returns, dropped

    def process_samples(self):
        out, us, value = [], self.start_us, 0
        buf, p = self.streams.get(1, b""), 0
        while p < len(buf):
            if self.flags & F_TIME:
                dt, p = varint(buf, p)
                us += dt
            d, p = varint(buf, p)
            value += unzz(d)
            out.append((us, value))
        return out

    # -- the text export ------------------------------------------------------

    def _time(self, us):
        if not self.flags & F_TIME:
            return b""
        return b"%d.%06d#" % (us // 1000000, us % 1000000)

    def render(self):
        """{file name: bytes} of the text files of this capture."""
        files = {}
        for stream in self.order:
            base = self.threads[stream]["base"].encode("utf-8", "surrogateescape")
            calls, returns, _ = self.thread_records(stream)
            if self.flags & F_MEMORY:
                files[base + b".mem"] = b"".join(
                    self._time(us) + b"%s:%d:%s=>%d\n" % (f, line, fn, delta)
                    for us, f, line, fn, delta in returns)
            if self.flags & F_STACK:
                files[base + b".stack"] = b"".join(
                    b" " * depth + self._time(us) + b"%s:%d:%s\n" % (f, line, fn)
                    for depth, us, f, line, fn in calls)
        if self.flags & F_PROCESS:
            files[b"process.mem"] = b"".join(
                self._time(us) + b"%d\n" % v for us, v in self.process_samples())
        return {k.decode("utf-8", "surrogateescape"): v for k, v in files.items()}


def load(path):
    with open(path, "rb") as f:
        return Capture(f.read())
