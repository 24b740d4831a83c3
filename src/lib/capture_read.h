/*
 * capture_read.h - reading a binary capture (capture.tg, src/common/tg_capture.h).
 *
 * tg_capture_open() maps the file, checks its header, reads the code and thread
 * definitions and the END trailer, and splits the chunks into per-stream lists
 * of payloads (no record is decoded yet, nothing is copied).  A cursor
 * (struct tg_capcur) then decodes one stream's records in order: the calls and
 * returns of a thread, or the process samples.  Memory use does not depend on
 * the number of records: a cursor holds only the calls still open.
 *
 * A segmented capture (capture-N.tg files, a run with max_size) is read as one:
 * the segments kept, oldest first, the first one's head giving each stream's
 * state at its start (the open calls, times and record numbers continue).
 *
 * A capture cut short (a killed process, a partial copy) is not an error: its
 * last, incomplete chunk is used up to its last complete record, and the
 * capture says so (cut, has_end) for the caller to warn; of a segmented one,
 * only the newest segment may be (an older one cut is an error).  Anything else that
 * breaks the format is an error with the byte offset where it was found.
 */
#ifndef TG_CAPTURE_READ_H
#define TG_CAPTURE_READ_H

#include <stddef.h>
#include <stdint.h>

#include "diag.h"
#include "tg_capture.h"

/* A code definition (TG_CAP_CHUNK_CODES); texts point into the mapping. */
struct tg_cap_code {
	const char *file;      /* FILE as the text formats write it (escaped) */
	const char *func;      /* FUNCTION, likewise */
	uint32_t file_len, func_len;
	uint64_t first_line;   /* Python: co_firstlineno; C: 0 */
	unsigned kind;         /* TG_CAP_CODE_* */
};

/* One chunk payload of a stream. */
struct tg_cap_span {
	const unsigned char *p; /* first payload byte (in the mapping) */
	uint32_t len;           /* payload bytes present */
	uint32_t partial;       /* the chunk was cut short: its last record may be too */
	uint32_t zsize;         /* a zstd frame of zsize bytes of records, decompressed
				 * by the cursor that reaches it; 0: the records */
};

/* Largest records of one zstd chunk a reader decompresses (the recorder
 * compresses chunks of at most 64 KiB): a few bytes of a hostile frame cannot
 * ask for more than this. */
#define TG_CAP_ZSTD_MAX (1u << 20)
/* Largest total of zstd records decompressed at once, all cursors and the code
 * definitions of one capture: the reader's memory does not grow with the
 * compression ratio of the file. */
#define TG_CAP_ZSTD_BUDGET (256u << 20)

/* The decompressed bytes a capture holds (its definitions) and its cursors
 * hold (one chunk each), against TG_CAP_ZSTD_BUDGET. */
struct tg_cap_zbudget {
	size_t live;
};

/* A list of spans, in file order. */
struct tg_cap_spans {
	struct tg_cap_span *v;
	size_t n, alloc;
};

/* An open call on a cursor's stack. */
struct tg_cap_open {
	const struct tg_cap_code *code;
	int64_t ref;            /* line a RETURN's line is relative to */
	unsigned long number;   /* its call number */
	int64_t t_us;           /* its time; TG_CAP_T_UNKNOWN: open at a segment's
				 * start (its CALL is in a dropped segment) */
};

/* A call's time that the records read do not hold. */
#define TG_CAP_T_UNKNOWN INT64_MIN

/* A stream's state where the records read start (a segment's STATE chunk). */
struct tg_cap_base {
	int64_t t_us;           /* the stream's time */
	uint64_t calls, returns; /* records before (process: samples in calls) */
	int64_t mem;            /* thread: its memory before, as live counts it;
				 * process: BYTES */
	struct tg_cap_open *open; /* calls open, outermost first (owned) */
	size_t depth;
	int64_t *lvl;           /* thread: MEM by depth (live.c's OPEN sums), n_lvl
				 * of them (owned); NULL: all of it at depth 0 (a
				 * segment from before they were written) */
	size_t n_lvl;
};

/* A thread (TG_CAP_CHUNK_THREAD) and its stream. */
struct tg_cap_thread {
	uint32_t stream;        /* stream id (>= TG_CAP_STREAM_FIRST) */
	uint64_t native_id, ident;
	char *base;             /* file base name, NUL-terminated (owned) */
	char *name;             /* threading name, NUL-terminated (owned) */
	struct tg_cap_spans spans;
	uint64_t end_calls, end_returns, dropped; /* from the END chunk (0 without) */
	uint64_t offset;        /* file offset of the definition (in its segment) */
	const unsigned char *at; /* the definition, in its file's mapping (messages) */
	int has_state;          /* state is set (a segment's STATE) */
	struct tg_cap_base state;
};

/* One file of the capture: capture.tg, or a segment. */
struct tg_cap_seg {
	char *path;             /* owned */
	const unsigned char *map; /* the whole file, read-only */
	size_t size;
	uint32_t no;            /* segment number (0: capture.tg) */
};

/* id -> index + 1 (0: absent): an array for small ids, a hash table for the rest. */
struct tg_cap_idmap {
	uint32_t *direct;       /* direct[id] for id < ndirect */
	size_t ndirect;
	uint64_t *hkeys;        /* open addressing, hcap a power of two (0: empty slot) */
	uint32_t *hvals;
	size_t hcap, hn;
	uint64_t seed;          /* random per map: the file cannot choose ids whose
				 * slots collide (a probe chain as long as the map) */
};

/* The id maps' hash of k under seed (a 64-bit finalizer of the seeded key). */
static inline uint64_t tg_cap_hash(uint64_t k, uint64_t seed)
{
	k ^= seed;
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ULL;
	k ^= k >> 33;
	return k;
}

struct tg_capture {
	char *path;             /* the capture file's path (the newest segment's; owned) */
	const unsigned char *map; /* that file, read-only (segs[n_segs - 1]) */
	size_t size;
	struct tg_cap_seg *segs; /* the files read, oldest first */
	size_t n_segs;
	uint32_t seg_first, seg_last; /* numbers of the oldest and newest read (0: one file) */
	uint32_t skip_lo, skip_hi;    /* older segments there but left out, as the newest
				       * run of consecutive numbers is read (one is
				       * missing after skip_hi); 0 when none */
	size_t n_skipped;             /* how many */
	int64_t kept_from_us;   /* segments before seg_first were dropped: when the
				 * oldest kept began (its head's time; else start_us).
				 * Its chunks were written later, but a chunk may
				 * hold a thread's older records */
	uint64_t orphan_chunks; /* event chunks of threads whose definition was in a
				 * dropped segment (skipped) */
	int has_process_base;
	struct tg_cap_base process_base;
	uint32_t version, flags; /* header: TG_CAP_VERSION, TG_CAP_F_* */
	int64_t start_us;       /* time base, Unix microseconds */
	uint32_t memory_mode, clock, pid;
	struct tg_cap_code *codes; /* in definition order */
	size_t n_codes, codes_alloc;
	struct tg_cap_idmap code_ids;   /* code id -> index into codes */
	struct tg_cap_thread *threads;  /* in definition (attach) order */
	size_t n_threads, threads_alloc;
	struct tg_cap_idmap stream_ids; /* stream id -> index into threads */
	struct tg_cap_spans process;    /* process samples */
	int has_end;            /* an END chunk was read: the run ended cleanly */
	int64_t end_us;
	int cut;                /* the file ends inside a chunk (or its header) */
	uint64_t cut_at;        /* offset of that chunk */
	uint32_t empty_last;    /* a newest segment left out: cut short in its
				 * header (its number), else 0 */
	uint64_t skipped_chunks; /* chunks of unknown kinds, skipped */
	unsigned char **owned;  /* decompressed zstd definitions (codes point into them) */
	size_t n_owned, owned_alloc;
	struct tg_cap_zbudget *zb; /* owned; mutable through a const capture (cursors) */
};

/*
 * Non-zero when the n bytes at p start with the capture magic (n >= 8 needed).
 */
int tg_capture_is_magic(const void *p, size_t n);

/*
 * Non-zero when path names a capture: a directory holding capture.tg, a file
 * named capture.tg, or a file that starts with the magic.  Sets *file (owned by
 * the caller, free()) to the capture file's path when it returns non-zero.
 * Never fails: anything it cannot read is "not a capture".
 */
int tg_capture_detect(const char *path, char **file);

/* Non-zero when the file name base (no directory) is a segment's: capture-N.tg;
 * *no gets N. */
int tg_capture_segment_name(const char *base, uint32_t *no);
/* Non-zero when B[0..N) can be a thread's file base name, as the recorder writes
 * them (a capture's thread records, aggregate.tga's thread lines): no '/' or
 * control byte (written %HH), not empty, no leading '.' ("." and ".." are
 * written %2E), not the process file's. */
int tg_capture_base_ok(const char *b, size_t n);

/* The file and offset in it of byte at (in a mapping of cap), for messages;
 * a byte of a decompressed chunk is given its offset from the newest file. */
size_t tg_capture_offset(const struct tg_capture *cap, const void *at, const char **path);

/*
 * Opens the capture file at path (a file, not a run directory); a segment
 * (capture-N.tg) opens every segment kept beside it.  Returns 0, or
 * -1 with d->msg set: unreadable, not a capture, a newer version, a header cut
 * short, zstd-compressed chunks when built without libzstd, or a broken
 * definition.  cap needs tg_capture_close() only after success.
 */
int tg_capture_open(struct tg_capture *cap, const char *path, struct tg_diag *d);
void tg_capture_close(struct tg_capture *cap);

/* id's value in m (0: absent); inline, once per decoded call. */
static inline uint32_t tg_cap_idmap_get(const struct tg_cap_idmap *m, uint64_t id)
{
	size_t i;

	if (id < m->ndirect)
		return m->direct[id];
	if (!m->hcap)
		return 0;
	for (i = tg_cap_hash(id, m->seed) & (m->hcap - 1); m->hkeys[i]; i = (i + 1) & (m->hcap - 1))
		if (m->hkeys[i] == id)
			return m->hvals[i];
	return 0;
}

/* The code of id, or NULL when undefined. */
static inline const struct tg_cap_code *tg_capture_code(const struct tg_capture *cap,
							 uint64_t id)
{
	uint32_t ix = tg_cap_idmap_get(&cap->code_ids, id);

	return ix ? &cap->codes[ix - 1] : NULL;
}

/* Total records the recorder reported as dropped (END chunk), all threads. */
uint64_t tg_capture_dropped(const struct tg_capture *cap);

/* --- cursors ------------------------------------------------------------- */

enum tg_cap_rec {
	TG_CAP_REC_CALL = 1,
	TG_CAP_REC_RETURN,
	TG_CAP_REC_SAMPLE,
	TG_CAP_REC_LEVEL,       /* the thread's memory here (TG_CAP_EV_LEVEL):
				 * only to a cursor that wants TG_CAP_WANT_LEVEL */
};

/* One decoded record. */
struct tg_cap_rec_data {
	enum tg_cap_rec type;
	const struct tg_cap_code *code; /* CALL, RETURN: the function */
	int64_t line;           /* CALL: .stack LINE; RETURN: .mem LINE */
	unsigned depth;         /* CALL: open calls before it (.stack indent) */
	int64_t t_us;           /* time (start_us when the capture has no times) */
	int64_t value;          /* RETURN: DELTA; SAMPLE: BYTES; LEVEL: the thread's
				 * memory since its stream began */
	unsigned long number;   /* CALL: k-th call; RETURN: k-th return; SAMPLE: k-th */
	unsigned long call_number; /* RETURN: the number of the CALL it closes */
	int64_t call_t_us;      /* RETURN: that CALL's time, or TG_CAP_T_UNKNOWN */
};

struct tg_capcur {
	const struct tg_capture *cap;
	const struct tg_cap_thread *thread; /* NULL for the process stream */
	const struct tg_cap_span *spans;
	size_t n_spans, si;     /* spans, index of the current one */
	const unsigned char *p, *end; /* undecoded bytes of the current span */
	int partial;            /* the current span was cut short */
	int timed;              /* records carry dt_us */
	int memory;             /* RETURNs carry a delta */
	int64_t t_us;           /* time of the last timed record */
	int64_t bytes;          /* process: the last sample's BYTES */
	struct tg_cap_open *open; /* open calls, innermost last */
	size_t depth, open_alloc;
	unsigned long calls, returns, samples; /* records decoded so far */
	uint64_t dropped;       /* records the recorder reported lost (SPECIAL) */
	uint64_t unwound;       /* calls closed without a RETURN (SPECIAL) */
	int cut;                /* stopped at a record cut short */
	size_t cut_si, cut_pos; /* (cut) where that record begins: its span, and its
				 * byte in the span's records (a mark resumes there) */
	int no_state;           /* out of memory for the open calls of the stream's
				 * state (a segment's head): reading it fails */
	int64_t *starts;        /* the last LEVEL record's open calls' starts (memory
				 * when each was made, outermost first), n_starts of
				 * them: c->depth, or 0 when the event gave none that
				 * match the open calls (owned) */
	size_t n_starts, starts_alloc;
	unsigned char *zbuf;    /* the current span's records when it is zstd (owned) */
	size_t zalloc;          /* bytes of zbuf, counted in the capture's budget */
	void *zctx;             /* ZSTD_DCtx, made on the first zstd span (owned) */
};

/* Starts a cursor over thread t's stream (t NULL: the process stream). */
void tg_capcur_init(struct tg_capcur *c, const struct tg_capture *cap,
		    const struct tg_cap_thread *t);
void tg_capcur_release(struct tg_capcur *c);

/*
 * Decodes the next record into *r.  Returns 1, 0 at the end of the stream (or
 * at the cut of a capture cut short: c->cut), or -1 with d->msg set when the
 * stream is corrupt (a RETURN without a call, an undefined code, a record
 * running past its chunk, a time overflow, a zstd chunk that does not
 * decompress...) or its zstd chunk would pass the memory budget.
 */
int tg_capcur_next(struct tg_capcur *c, struct tg_cap_rec_data *r, struct tg_diag *d);

/* The same, returning only the thread records of the kinds in want (the others
 * are decoded and skipped: calls still open, returns still close). */
#define TG_CAP_WANT_CALL   1u
#define TG_CAP_WANT_RETURN 2u
#define TG_CAP_WANT_LEVEL  4u   /* LEVEL events (r->depth: the open calls) */
int tg_capcur_next_of(struct tg_capcur *c, struct tg_cap_rec_data *r, unsigned want,
		      struct tg_diag *d);
/* tg_capcur_next_of() for returns only, and for calls only. */
int tg_capcur_next_return(struct tg_capcur *c, struct tg_cap_rec_data *r, struct tg_diag *d);
int tg_capcur_next_call(struct tg_capcur *c, struct tg_cap_rec_data *r, struct tg_diag *d);

/* --- marks: a cursor continued in a later opening ------------------------ */

/* An open call as a mark keeps it: its code by index into the capture's codes,
 * which are in definition order, the same in every opening of one run's capture
 * (a segment's head repeats them as first written). */
struct tg_cap_mark_open {
	uint32_t code_ix;
	int64_t ref, t_us;
	unsigned long number;
};

/*
 * Where a cursor that reached the end of its stream stopped, and its state
 * there, in terms that do not depend on one opening of the capture: a later
 * tg_capture_open() of the same capture, grown since (or its oldest segments
 * dropped), continues the stream from there with tg_capcur_resume().  A span
 * is named by its segment and offset, which appending does not move; a chunk
 * cut short at the mark is resumed at its record cut short, re-read whole.
 */
struct tg_capcur_mark {
	int at_start;           /* the stream had no records yet: none below is a place */
	uint32_t seg;           /* the segment of the span it stopped in (0: capture.tg) */
	uint64_t off;           /* that span's payload offset in its file */
	size_t pos;             /* bytes of the span's records decoded (zstd: decompressed) */
	int64_t t_us, bytes;    /* the cursor's time; process: the last BYTES */
	unsigned long calls, returns, samples;
	uint64_t dropped, unwound;
	struct tg_cap_mark_open *open; /* its open calls, outermost first (owned) */
	size_t depth, alloc;
};

void tg_capcur_mark_init(struct tg_capcur_mark *m);
void tg_capcur_mark_release(struct tg_capcur_mark *m);
/*
 * Takes into M where C, whose last tg_capcur_next*() returned 0 (the end of its
 * stream, or its cut), stopped.  0, or -1 out of memory (M unchanged but for
 * its stack's room).
 */
int tg_capcur_mark_take(const struct tg_capcur *c, struct tg_capcur_mark *m,
			struct tg_diag *d);
/*
 * Starts C over thread T's stream of CAP (T NULL: the process stream) where M
 * was taken, in an earlier opening of the same capture.  Returns 1 (C goes on
 * from there: its next record is the first one after M), 0 when the stream
 * cannot go on from M in this opening (its span is gone or is another chunk,
 * records between M and the segments kept were dropped unread, a code index
 * out of range: the caller reads the stream from its start instead), or -1
 * with d->msg (a zstd chunk that does not decompress, out of memory).  C needs
 * tg_capcur_release() whatever it returns.
 */
int tg_capcur_resume(struct tg_capcur *c, const struct tg_capture *cap,
		     const struct tg_cap_thread *t, const struct tg_capcur_mark *m,
		     struct tg_diag *d);

/*
 * Writes t_us as "SECONDS.MICROS" (six decimals, the text formats' TIME) into
 * buf (at least TG_CAP_TIME_MAX bytes); returns the length.
 */
#define TG_CAP_TIME_MAX 32
size_t tg_cap_fmt_time(char *buf, int64_t t_us);

/* TIME's value as the text parsers compute it from the same text. */
static inline double tg_cap_time_value(int64_t t_us)
{
	return (double)(t_us / 1000000) + (double)(t_us % 1000000) * 1e-6;
}

#endif
