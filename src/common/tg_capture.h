/*
 * tg_capture.h - the binary capture format (capture.tg), shared by the recorder
 * (which writes it) and the analysis library (which reads it).
 *
 * docs/formats.md "Binary capture" describes it for users; this header is its
 * single definition in code.  Everything here is plain C (no Python), so both
 * halves and the C unit tests include it.
 *
 * Layout (all fixed-size integers little-endian):
 *
 *   header     TG_CAP_HEADER_SIZE bytes (struct layout below, written once)
 *   chunk*     { u8 kind; u8 flags; u16 reserved (0); u32 stream; u32 len; }
 *              followed by LEN payload bytes
 *
 * A chunk is written with one write(2) on a descriptor opened O_APPEND, so a
 * killed process leaves at most its last chunk incomplete.  A stream (one per
 * thread, TG_CAP_STREAM_PROCESS for process samples, TG_CAP_STREAM_META for
 * definitions) is the concatenation of its chunks' payloads in file order; no
 * record straddles two chunks.
 *
 * Thread stream records (TG_CAP_CHUNK_EVENTS), varints are LEB128:
 *
 *   CALL    varint (code << 1 | 0)   code >= 1: a code id defined earlier
 *           [varint dt_us]           if TG_CAP_F_TIME
 *           [varint zz(line)]        only if the code is TG_CAP_CODE_C: the
 *                                    caller's current line (may be -1)
 *   RETURN  varint (zz(line - ref) << 1 | 1)
 *                                    ref = the code's first line (Python) or
 *                                    the line of the matching CALL (C)
 *           [varint dt_us]           if TG_CAP_F_TIME
 *           [varint zz(delta)]       if TG_CAP_F_MEMORY
 *   SPECIAL varint 0 (CALL of code 0), then u8 TG_CAP_EV_*, then its fields
 *
 * zz() is zigzag (0,-1,1,-2.. -> 0,1,2,3..).  dt_us is the microseconds since the
 * stream's previous timed record (the header's start_us for the first); times
 * never decrease within a stream.  A RETURN closes the innermost open CALL, and
 * takes its code from it: a recorder that cannot write a CALL must not write its
 * RETURN either (a DROPPED event counts them), or the reader, finding a RETURN
 * with no open CALL, refuses the stream as corrupt.  An UNWOUND event closes
 * calls whose returns the recorder never saw, so that the next RETURN closes
 * the call it belongs to; it writes no .mem line on export.
 *
 * Record numbers: the k-th RETURN of a thread's stream is line k of the
 * thread's exported .mem file; the k-th CALL is line k of its .stack file.
 *
 * Segments (a run with a size limit, ProcessProfile(max_size=...)): instead of
 * capture.tg the run writes capture-000001.tg, capture-000002.tg, ... (the
 * number in the name and in the header's segment field), each a capture of its
 * own layout, and deletes the oldest whole while the files' total would pass
 * the limit.  Every segment after the first opens with a head: chunks flagged
 * TG_CAP_CHUNK_HEAD that repeat what its records need from the segments before
 * (every code definition written so far, the THREAD definition of every thread
 * still running, and a STATE per stream: its time, record counts, memory and
 * open calls at the segment's start).  A reader starts at the oldest segment
 * kept, takes that segment's head, and skips the heads of the later ones (their
 * contents are already known); the streams continue across segments.
 */
#ifndef TG_CAPTURE_H
#define TG_CAPTURE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* File name of the capture inside a run directory. */
#define TG_CAP_FILENAME "capture.tg"

/* First 8 bytes: non-ASCII first byte and CR LF / ^Z / LF catch text-mode
 * transfers and truncation at the first line, as PNG's signature does. */
#define TG_CAP_MAGIC "\x89TGCAP\r\n"
#define TG_CAP_MAGIC_LEN 8
/* 2: thread streams may hold LEVEL events (TG_CAP_EV_LEVEL).  Readers read
 * every version from 1 to this one. */
#define TG_CAP_VERSION 2

/*
 * Header, TG_CAP_HEADER_SIZE bytes:
 *   off  size
 *   0    8   magic TG_CAP_MAGIC
 *   8    4   u32 version (TG_CAP_VERSION)
 *   12   4   u32 flags (TG_CAP_F_*)
 *   16   8   i64 start_us: Unix time in microseconds, the time base of streams
 *   24   4   u32 memory mode (0 thread, 1 process, 2 rss: docs/api.md)
 *   28   4   u32 clock (0 gettime, 1 tsc: runinfo.json "clock")
 *   32   4   u32 pid
 *   36   4   u32 segment number (0: a capture.tg of one file; else the N of
 *              capture-N.tg; a reader of version 1 without segments ignores it)
 */
#define TG_CAP_HEADER_SIZE 40

/* Header flags: which fields the records carry, what the text export writes. */
#define TG_CAP_F_TIME    0x1u  /* records carry dt_us (text: TIME# prefixes) */
#define TG_CAP_F_MEMORY  0x2u  /* RETURNs carry delta (text: .mem files) */
#define TG_CAP_F_STACK   0x4u  /* text export writes .stack files */
#define TG_CAP_F_PROCESS 0x8u  /* process.mem samples are recorded */

/* Segment files: TG_CAP_SEG_PREFIX, the number (at least TG_CAP_SEG_DIGITS
 * digits, zero-padded), TG_CAP_SEG_SUFFIX. */
#define TG_CAP_SEG_PREFIX "capture-"
#define TG_CAP_SEG_SUFFIX ".tg"
#define TG_CAP_SEG_DIGITS 6

/* Chunk header: u8 kind, u8 flags, u16 reserved, u32 stream, u32 len. */
#define TG_CAP_CHUNK_HEADER_SIZE 12
/* Largest payload a reader accepts (the recorder writes at most 64 KiB). */
#define TG_CAP_CHUNK_MAX (16u * 1024 * 1024)

enum tg_cap_chunk_kind {
	TG_CAP_CHUNK_EVENTS  = 1, /* a thread stream's records (stream = thread id) */
	TG_CAP_CHUNK_CODES   = 2, /* code definitions (stream TG_CAP_STREAM_META) */
	TG_CAP_CHUNK_THREAD  = 3, /* one thread definition (stream = its id) */
	TG_CAP_CHUNK_PROCESS = 4, /* process.mem samples (TG_CAP_STREAM_PROCESS) */
	TG_CAP_CHUNK_END     = 5, /* trailer, written by disable() (TG_CAP_STREAM_META) */
	TG_CAP_CHUNK_STATE   = 6, /* a stream's state at a segment's start (head only) */
};

/* Chunk flags. */
#define TG_CAP_CHUNK_ZSTD 0x1u /* payload is one zstd frame of the records */
#define TG_CAP_CHUNK_HEAD 0x2u /* part of a segment's head: read in the first
				* segment read, skipped in the later ones */

/* Stream ids: threads are numbered from TG_CAP_STREAM_FIRST in attach order. */
#define TG_CAP_STREAM_META    0u
#define TG_CAP_STREAM_PROCESS 1u
#define TG_CAP_STREAM_FIRST   2u

/*
 * TG_CAP_CHUNK_CODES payload: one or more definitions
 *   varint id (>= 1, each id defined once per capture)
 *   u8     kind (TG_CAP_CODE_*)
 *   varint first line (Python; 0 for C functions)
 *   varint file length, FILE bytes  (escaped exactly as the .mem text writes
 *   varint func length, FUNCTION bytes  them: export copies them verbatim)
 * A code is defined before the first chunk whose records use it.
 */
enum tg_cap_code_kind {
	TG_CAP_CODE_PYTHON = 0,
	TG_CAP_CODE_C = 1, /* FILE is the owner (module, type or "<builtin>"), CALLs carry a line */
};

/*
 * TG_CAP_CHUNK_THREAD payload, written when the thread attaches, before any of
 * its EVENTS chunks:
 *   varint native_id, varint ident,
 *   varint base length, BASE bytes (the file base name, formats.md rules:
 *   export writes BASE.mem and BASE.stack),
 *   varint name length, NAME bytes (threading name, UTF-8)
 */

/*
 * TG_CAP_CHUNK_PROCESS payload: samples
 *   [varint dt_us]        if TG_CAP_F_TIME (from the previous sample)
 *   varint zz(bytes - previous bytes)   (previous is 0 for the first)
 */

/*
 * TG_CAP_CHUNK_END payload (the run ended cleanly: a capture without it was
 * cut short and readers say so):
 *   i64 end_us (8 bytes, little-endian)
 *   varint n, then n times:
 *     varint stream, varint calls, varint returns, varint dropped
 * dropped = records the recorder could not write (out of memory, stopped stream).
 */

/*
 * TG_CAP_CHUNK_STATE payload (in a segment's head, flagged TG_CAP_CHUNK_HEAD),
 * the stream's state after the last record of the segments before:
 *   varint t: the stream's time (its last timed record) - start_us
 *   varint a: thread: CALLs so far; process: samples so far
 *   varint b: thread: RETURNs so far; process: 0
 *   varint zz(m): thread: the sum of its outermost calls' deltas so far (its
 *                 memory); process: the last BYTES
 *   varint depth, then depth times, outermost first, an open call:
 *     varint code id, varint call number (the k of its CALL),
 *     [varint zz(line)] only if the code is TG_CAP_CODE_C (as in its CALL)
 * On stream TG_CAP_STREAM_META, t alone counts: every record of the segment is
 * later than it (the latest time written before; the others are 0).
 */

/* Special events (after a varint 0 in a thread stream). */
enum tg_cap_event {
	TG_CAP_EV_DROPPED = 1, /* varint n: n records were lost here */
	TG_CAP_EV_UNWOUND = 2, /* varint n: the n innermost open calls are closed
				* without RETURN records (their returns were not
				* seen: a greenlet switch, another profiler) */
	TG_CAP_EV_LEVEL = 3,   /* varint zz(level), varint n, n x varint
				* zz(start_k - start_k-1) (start_-1 = 0): the
				* thread's memory here and when each of the n open
				* calls was made, outermost first, each what it
				* allocated less what it freed since its stream
				* began (memory mode thread; version 2) */
};

/* --- varints ------------------------------------------------------------- */

/* Longest varint of a 64-bit value. */
#define TG_CAP_VARINT_MAX 10

static inline uint64_t tg_cap_zz(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t tg_cap_unzz(uint64_t u)
{
	return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

/* Writes V at P (room for TG_CAP_VARINT_MAX bytes); returns the end. */
static inline unsigned char *tg_cap_put_varint(unsigned char *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	*p++ = (unsigned char)v;
	return p;
}

/* Reads a varint from [*P, END) into *V and advances *P.  Returns 0, or -1 if
 * the bytes end first or the value has more than 64 bits (*P unchanged). */
static inline int tg_cap_get_varint(const unsigned char **p, const unsigned char *end,
				    uint64_t *v)
{
	const unsigned char *q = *p;
	uint64_t r = 0;
	unsigned shift = 0;

	while (q < end) {
		unsigned char b = *q++;
		if (shift == 63 && b > 1)
			return -1;
		r |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = r;
			*p = q;
			return 0;
		}
		shift += 7;
		if (shift > 63)
			return -1;
	}
	return -1;
}

static inline void tg_cap_put_u32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16);
	p[3] = (unsigned char)(v >> 24);
}

static inline uint32_t tg_cap_get_u32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16
	       | (uint32_t)p[3] << 24;
}

static inline void tg_cap_put_u64(unsigned char *p, uint64_t v)
{
	tg_cap_put_u32(p, (uint32_t)v);
	tg_cap_put_u32(p + 4, (uint32_t)(v >> 32));
}

static inline uint64_t tg_cap_get_u64(const unsigned char *p)
{
	return (uint64_t)tg_cap_get_u32(p) | (uint64_t)tg_cap_get_u32(p + 4) << 32;
}

#endif /* TG_CAPTURE_H */
