#!/usr/bin/env python3
"""Encode text dumps into a binary capture (capture.tg), for tests and the bench.

    python3 tests/cli/capture_encode.py OUT FILE... [--chunk N] [--no-time]
                                        [--no-end] [--cut N] [--dropped THREAD:K:N]

FILEs are a run's text dumps: THREAD.mem, THREAD.stack, process.mem, written
with timestamps of at most six decimals (export writes exactly six).  The capture
follows docs/formats.md "Binary capture" and src/common/tg_capture.h, written
here independently of the C reader so that each checks the other:

- the records of a thread are rebuilt in event order from its .stack (calls in
  pre-order, with their depth) and its .mem (returns in post-order): before a
  call at depth D the open calls at depth >= D return, each taking the next .mem
  line; a thread with only a .mem gets one call per return (at the return's
  time), one with only a .stack gets its returns from the depths;
- a code is (FILE, FUNCTION): a Python code with its first line when all its
  .stack lines agree (or it has none: its first .mem line), else a C code whose
  calls carry their line;
- chunks of at most --chunk payload bytes, the streams' chunks interleaved round
  robin, code definitions written just before the first chunk that uses them;
- an END chunk with each thread's call and return counts (unless --no-end);
  --cut N keeps only the first N bytes; --dropped THREAD:K:N puts a SPECIAL
  "N records dropped" before the K-th record of THREAD and counts N in END.
"""
import argparse
import os
import struct
import sys

MAGIC = b"\x89TGCAP\r\n"
VERSION = 1
F_TIME, F_MEMORY, F_STACK, F_PROCESS = 1, 2, 4, 8
K_EVENTS, K_CODES, K_THREAD, K_PROCESS, K_END = 1, 2, 3, 4, 5
STREAM_META, STREAM_PROCESS, STREAM_FIRST = 0, 1, 2
CODE_PY, CODE_C = 0, 1


class EncodeError(Exception):
    pass


def varint(v):
    if v < 0:
        raise EncodeError("negative varint %d" % v)
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def zz(v):
    return (v << 1) if v >= 0 else ((-v) << 1) - 1


def text(b):
    return varint(len(b)) + b


def parse_time(t):
    """b"SECONDS[.FRACTION]" -> microseconds (at most six decimals)."""
    sec, _, frac = t.partition(b".")
    if len(frac) > 6:
        raise EncodeError("time %r has more than six decimals" % t)
    return int(sec) * 1000000 + int((frac + b"000000")[:6])


def split_site(site):
    f, line, func = site.rsplit(b":", 2)
    return f, int(line), func


def read_lines(path):
    with open(path, "rb") as f:
        data = f.read()
    return data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n")


def parse_mem(path, timed):
    recs = []
    for ln in read_lines(path):
        t = None
        if timed:
            tt, _, ln = ln.partition(b"#")
            t = parse_time(tt)
        site, _, delta = ln.rpartition(b"=>")
        f, line, func = split_site(site)
        recs.append((t, f, line, func, int(delta)))
    return recs


def parse_stack(path, timed):
    recs = []
    for ln in read_lines(path):
        s = ln.lstrip(b" ")
        depth = len(ln) - len(s)
        t = None
        if timed:
            tt, _, s = s.partition(b"#")
            t = parse_time(tt)
        f, line, func = split_site(s)
        recs.append((depth, t, f, line, func))
    return recs


def parse_process(path, timed):
    recs = []
    for ln in read_lines(path):
        t = None
        if timed:
            tt, _, ln = ln.partition(b"#")
            t = parse_time(tt)
        recs.append((t, int(ln)))
    return recs


def thread_events(mem, stack):
    """One thread's records in event order: ("C", t, f, line, func) and
    ("R", t, f, line, func, delta)."""
    ev = []
    if stack is None:
        for t, f, line, func, delta in mem:
            ev.append(("C", t, f, line, func, "synth"))
            ev.append(("R", t, f, line, func, delta))
        return ev
    mi = 0
    open_ = []

    def close():
        nonlocal mi
        depth, t, f, line, func = open_.pop()
        if mem is None:
            ev.append(("R", t_last[0], f, line, func, 0))
            return
        if mi >= len(mem):
            raise EncodeError("more calls close than the .mem has returns")
        rt, rf, rline, rfunc, delta = mem[mi]
        mi += 1
        if (rf, rfunc) != (f, func):
            raise EncodeError("return %d (%r) does not match its call (%r)" % (mi, rfunc, func))
        ev.append(("R", rt, rf, rline, rfunc, delta))

    t_last = [None]
    for depth, t, f, line, func in stack:
        if depth > len(open_):
            raise EncodeError("a call at depth %d with %d open" % (depth, len(open_)))
        while len(open_) > depth:
            close()
        ev.append(("C", t, f, line, func))
        t_last[0] = t
        open_.append((depth, t, f, line, func))
    if mem is not None:
        while open_ and mi < len(mem):
            close()
        if mi != len(mem):
            raise EncodeError("%d returns left over" % (len(mem) - mi))
    return ev


class Encoder:
    def __init__(self, timed, chunk):
        self.timed = timed
        self.chunk = chunk
        self.codes = {}        # (file, func) -> (id, kind, first)
        self.defined = set()
        self.out = bytearray()

    def plan_codes(self, threads):
        lines = {}
        for ev in threads.values():
            for e in ev:
                key = (e[2], e[4])
                if e[0] == "C" and len(e) == 5:
                    lines.setdefault(key, set()).add(e[3])
                elif key not in lines:
                    lines.setdefault(key, set())
        for ev in threads.values():
            for e in ev:
                key = (e[2], e[4])
                if key in self.codes:
                    continue
                ls = lines[key]
                if len(ls) == 1:
                    kind, first = CODE_PY, next(iter(ls))
                elif not ls:
                    first = next(x[3] for x in ev if x[0] == "R" and (x[2], x[4]) == key)
                    kind = CODE_PY
                else:
                    kind, first = CODE_C, 0
                self.codes[key] = (len(self.codes) + 1, kind, first)

    def chunk_header(self, kind, stream, payload, flags=0):
        return struct.pack("<BBHII", kind, flags, 0, stream, len(payload)) + payload

    def thread_records(self, ev, dropped_at=None):
        """The thread's records as a list of (bytes, code ids used)."""
        recs = []
        prev = None
        stack = []
        for k, e in enumerate(ev):
            if dropped_at and dropped_at[0] == k:
                recs.append((varint(0) + bytes([1]) + varint(dropped_at[1]), ()))
            t = e[1]
            dt = b""
            if self.timed:
                if prev is not None and t < prev:
                    raise EncodeError("time goes back in a thread")
                dt = varint(t - (self.start if prev is None else prev))
                prev = t
            cid, kind, first = self.codes[(e[2], e[4])]
            if e[0] == "C":
                line = e[3]
                if kind == CODE_C:
                    stack.append((cid, line))
                    recs.append((varint(cid << 1) + dt + varint(zz(line)), (cid,)))
                else:
                    stack.append((cid, first))
                    recs.append((varint(cid << 1) + dt, (cid,)))
            else:
                ccid, ref = stack.pop()
                if ccid != cid:
                    raise EncodeError("return of another code")
                b = varint((zz(e[3] - ref) << 1) | 1) + dt
                if self.memory:
                    b += varint(zz(e[5]))
                recs.append((b, ()))
        return recs

    def process_records(self, samples):
        recs = []
        prev_t, prev_b = None, 0
        for t, b in samples:
            dt = b""
            if self.timed:
                dt = varint(t - (self.start if prev_t is None else prev_t))
                prev_t = t
            recs.append((dt + varint(zz(b - prev_b)), ()))
            prev_b = b
        return recs

    def split(self, recs):
        chunks, cur, used = [], bytearray(), set()
        for b, ids in recs:
            if cur and len(cur) + len(b) > self.chunk:
                chunks.append((bytes(cur), used))
                cur, used = bytearray(), set()
            cur += b
            used.update(ids)
        if cur:
            chunks.append((bytes(cur), used))
        return chunks

    def code_def(self, key):
        cid, kind, first = self.codes[key]
        return varint(cid) + bytes([kind]) + varint(first) + text(key[0]) + text(key[1])


def encode(files, timed=True, chunk=65536, end=True, dropped=None, header=None):
    """files: paths of text dumps.  Returns the capture's bytes."""
    mems, stacks, proc = {}, {}, None
    for p in files:
        name = os.path.basename(p)
        base, _, suffix = name.rpartition(".")
        if name == "process.mem":
            proc = parse_process(p, timed)
        elif suffix == "mem":
            mems[base] = parse_mem(p, timed)
        elif suffix == "stack":
            stacks[base] = parse_stack(p, timed)
        else:
            raise EncodeError("not a dump file: %s" % p)
    bases = sorted(set(mems) | set(stacks))
    if mems and stacks and set(mems) != set(stacks):
        raise EncodeError("some threads have a .stack and some not: one flag for all")
    flags = (F_TIME if timed else 0) | (F_MEMORY if mems else 0) | \
        (F_STACK if stacks else 0) | (F_PROCESS if proc is not None else 0)
    enc = Encoder(timed, chunk)
    enc.memory = bool(mems)
    threads = {b: thread_events(mems.get(b), stacks.get(b)) for b in bases}
    times = [e[1] for ev in threads.values() for e in ev if e[1] is not None]
    times += [t for t, _ in (proc or []) if t is not None]
    enc.start = min(times) if (timed and times) else 0
    enc.plan_codes(threads)
    drop = {}
    if dropped:
        for spec in dropped:
            b, k, n = spec.rsplit(":", 2)
            drop[b.encode() if isinstance(b, str) else b] = (int(k), int(n))
    streams = []
    for i, b in enumerate(bases):
        bb = b.encode() if isinstance(b, str) else b
        recs = enc.thread_records(threads[b], drop.get(bb))
        streams.append((STREAM_FIRST + i, bb, enc.split(recs)))
    out = bytearray()
    hdr = dict(version=VERSION, flags=flags, start=enc.start, mode=0, clock=0, pid=4242)
    hdr.update(header or {})
    out += MAGIC + struct.pack("<IIqIIII", hdr["version"], hdr["flags"], hdr["start"],
                               hdr["mode"], hdr["clock"], hdr["pid"], 0)
    pchunks = enc.split(enc.process_records(proc)) if proc is not None else []
    # round robin over the streams' chunks
    queues = [(sid, b, list(chs)) for sid, b, chs in streams]
    queues.append((STREAM_PROCESS, None, list(pchunks)))
    introduced = set()
    while any(q[2] for q in queues):
        for sid, b, chs in queues:
            if not chs:
                continue
            payload, used = chs.pop(0)
            if sid != STREAM_PROCESS and sid not in introduced:
                out += enc.chunk_header(K_THREAD, sid, varint(1000 + sid) + varint(7000 + sid) +
                                        text(b) + text(b))
                introduced.add(sid)
            new = sorted(k for k, v in enc.codes.items() if v[0] in used and k not in enc.defined)
            if new:
                out += enc.chunk_header(K_CODES, STREAM_META, b"".join(enc.code_def(k) for k in new))
                enc.defined.update(new)
            out += enc.chunk_header(K_PROCESS if sid == STREAM_PROCESS else K_EVENTS, sid, payload)
    for sid, b, chs in streams:  # threads without records are defined too
        if sid not in introduced:
            out += enc.chunk_header(K_THREAD, sid, varint(1000 + sid) + varint(7000 + sid) +
                                    text(b) + text(b))
    if end:
        end_t = max(times) if (timed and times) else 0
        body = struct.pack("<q", end_t) + varint(len(streams))
        for i, (sid, b, _) in enumerate(streams):
            ev = threads[bases[i]]
            n_drop = drop.get(b, (0, 0))[1]
            body += varint(sid) + varint(sum(1 for e in ev if e[0] == "C")) + \
                varint(sum(1 for e in ev if e[0] == "R")) + varint(n_drop)
        out += enc.chunk_header(K_END, STREAM_META, body)
    return bytes(out)


def encode_stream(mem_path, stack_path, proc_path, out_path, chunk=65536):
    """One thread's big dumps (bench/gen_dump.py's MainThread.mem, .stack and
    process.mem, timestamped, pairing) to OUT in one pass with bounded memory.

    Every (FILE, FUNCTION, .stack LINE) is its own Python code, so C functions need
    no first pass; the export is the same text.  Returns the capture's size.
    """
    base = os.path.basename(mem_path).rpartition(".")[0].encode()
    sid = STREAM_FIRST
    codes = {}
    out = open(out_path, "wb")
    ch = struct.Struct("<BBHII")

    def emit(kind, stream, payload):
        out.write(ch.pack(kind, 0, 0, stream, len(payload)))
        out.write(payload)

    times = []
    with open(proc_path, "rb") as fp:
        samples = [ln.split(b"#") for ln in fp.read().split(b"\n") if ln]
    with open(stack_path, "rb") as fs:
        first = fs.readline()
    t0 = first.lstrip(b" ").partition(b"#")[0]
    start = min([parse_time(t0)] + [parse_time(t) for t, _ in samples[:1]])
    out.write(MAGIC + struct.pack("<IIqIIII", VERSION, F_TIME | F_MEMORY | F_STACK | F_PROCESS,
                                  start, 0, 0, 4242, 0))
    emit(K_THREAD, sid, varint(1) + varint(1) + text(base) + text(base))
    buf = bytearray()
    newdefs = bytearray()
    prev = start
    open_ = []  # refs of the open calls
    calls = returns = 0
    vcache = [varint(i) for i in range(1 << 14)]

    def vi(v):
        return vcache[v] if v < 16384 else varint(v)

    def flush():
        nonlocal buf, newdefs
        if newdefs:
            emit(K_CODES, STREAM_META, bytes(newdefs))
            newdefs = bytearray()
        if buf:
            emit(K_EVENTS, sid, bytes(buf))
            buf = bytearray()

    with open(mem_path, "rb") as fm, open(stack_path, "rb") as fs:
        mem_iter = iter(fm)

        def ret():
            nonlocal prev, returns
            ln = next(mem_iter)
            tt, _, rest = ln.partition(b"#")
            sec, _, fr = tt.partition(b".")
            t = int(sec) * 1000000 + int(fr)
            site, _, delta = rest.rpartition(b"=>")
            line = int(site.rsplit(b":", 2)[1])
            z = line - open_.pop()
            d = int(delta)
            buf.extend(vi(((z << 1 if z >= 0 else ((-z) << 1) - 1) << 1) | 1))
            buf.extend(vi(t - prev))
            buf.extend(vi(d << 1 if d >= 0 else ((-d) << 1) - 1))
            prev = t
            returns += 1

        for ln in fs:
            s = ln.lstrip(b" ")
            depth = len(ln) - len(s)
            while len(open_) > depth:
                ret()
            tt, _, site = s.rstrip(b"\n").partition(b"#")
            sec, _, fr = tt.partition(b".")
            t = int(sec) * 1000000 + int(fr)
            c = codes.get(site)
            if c is None:
                f, line, func = site.rsplit(b":", 2)
                c = codes[site] = (len(codes) + 1, int(line))
                newdefs.extend(varint(c[0]) + bytes([CODE_PY]) + varint(c[1]) + text(f) +
                               text(func))
            buf.extend(vi(c[0] << 1))
            buf.extend(vi(t - prev))
            prev = t
            open_.append(c[1])
            calls += 1
            if len(buf) > chunk - 64:
                flush()
        for _ in iter(int, 1):
            if not open_:
                break
            try:
                ret()
            except StopIteration:
                break
    flush()
    prev_t, prev_b = start, 0
    pbuf = bytearray()
    for tt, b in samples:
        t, b = parse_time(tt), int(b)
        pbuf += varint(t - prev_t) + varint(zz(b - prev_b))
        prev_t, prev_b = t, b
        if len(pbuf) > chunk - 64:
            emit(K_PROCESS, STREAM_PROCESS, bytes(pbuf))
            pbuf = bytearray()
    if pbuf:
        emit(K_PROCESS, STREAM_PROCESS, bytes(pbuf))
    emit(K_END, STREAM_META, struct.pack("<q", max(prev, prev_t)) + varint(1) + varint(sid) +
         varint(calls) + varint(returns) + varint(0))
    out.close()
    return os.path.getsize(out_path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--chunk", type=int, default=65536)
    ap.add_argument("--no-time", action="store_true")
    ap.add_argument("--no-end", action="store_true")
    ap.add_argument("--cut", type=int)
    ap.add_argument("--dropped", action="append")
    a = ap.parse_args(argv)
    try:
        data = encode(a.files, timed=not a.no_time, chunk=a.chunk, end=not a.no_end,
                      dropped=a.dropped)
    except EncodeError as e:
        print("capture_encode: %s" % e, file=sys.stderr)
        return 1
    if a.cut is not None:
        data = data[:a.cut]
    with open(a.out, "wb") as f:
        f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
