/*
 * capture_write.h - the recorder's side of the binary capture (capture.tg, format in
 * src/common/tg_capture.h and docs/formats.md): the shared capture file, its
 * pending code definitions, per-stream counters, the record encoders and the
 * (ml, module) -> id table of C functions.
 *
 * Plain C (no Python): tests/c/test_capture.c links capture_write.c alone.
 *
 * Concurrency: one struct tg_cap per run.  Its descriptor, counters and
 * everything a write touches are protected by `lock`, which the writer holds
 * across zstd compression and write(2).  The pending definitions alone are
 * protected by `defs_lock`, a short lock never held across I/O: a code is
 * defined (tg_cap_define) by a thread holding the GIL at its first call, and a
 * slow or blocked sink (a full pipe, a stalled NFS) must not stop it there.
 * Thread streams are tg_writer buffers in chunk mode (writer.h): their
 * consumers hand whole records to tg_cap_chunk_out, which, under `lock`,
 * swaps the pending definitions out under `defs_lock` (q <-> wq), lets
 * go of it, then writes them and the chunk.  A producer defines a code (under
 * `defs_lock`) before it appends a record that uses it and publishes the
 * record with a release store; a consumer loads the published length
 * (acquire) before it takes `lock` and then `defs_lock`, so every definition a
 * flushed record uses is written before it.  Definitions made meanwhile wait
 * in the other buffer for the next chunk.
 * Threads start and end the same way: tg_cap_thread queues the THREAD payload
 * and tg_cap_deposit queues the end (the counters for END), both under
 * `defs_lock` alone (a thread start with the GIL held; an end from the
 * flusher).  The writer swaps them out with the definitions and writes, in
 * this order: the CODES, the queued THREAD chunks, then applies the queued
 * ends (the END counters; in
 * a segmented capture the stream is no longer live, so later heads leave its
 * THREAD out, except for the ends of disable(): tg_cap_keep_ended), and then
 * its own chunk.  A thread's THREAD is queued before its
 * first record is appended, so it precedes every chunk of the stream; its end
 * is queued after every other chunk of the stream has been written (by the
 * flusher, which closes an ended thread's stream and then queues its end;
 * thread_py.c tg_thread_close_ended), so an end applied in the same pass never
 * drops a live stream from a head.  A thread's end never waits for a write,
 * not even one of its own stream that is stuck: the flusher does the
 * writing.  tg_cap_finish writes what is queued before
 * the END; a close without it (a failed enable, a forked child) drops it.
 * Lock order: a writer's io_lock, then the capture's `lock`, then `defs_lock`
 * (tg_cap_define, tg_cap_thread and tg_cap_deposit take defs_lock alone).
 * fork() takes defs_lock alone, never `lock` (tg_cap_prepare_fork): a fork
 * never waits for a write in progress; the child leaves that write's state
 * alone (tg_cap_drop_in_child).
 *
 * Segments (tg_cap_open_segments, a run's max_size): the capture rotates into a
 * new segment file when the current one reaches seg_max bytes (or twice its
 * head), under `lock`,
 * before the data chunk that would pass it.  What a new segment's head repeats
 * is kept here as it is written: every CODES payload (alldefs), each live
 * thread's THREAD payload, and each stream's state, followed by decoding every
 * chunk this file writes (the stream's time, counters, memory and open calls:
 * struct tg_cap_shadow).  That decoding runs in whoever writes the chunk (the
 * flusher, mostly), only in a segmented capture.
 */
#ifndef TG_REC_CAPTURE_H
#define TG_REC_CAPTURE_H

#include "tg_capture.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#pragma GCC visibility push(hidden)

/* A CODES chunk holds at most this many bytes of definitions (but a single
 * longer one): pending definitions are written as several chunks if need be. */
#define TG_CAP_DEFS_MAX (64 * 1024)

/* Counters of one thread stream for the END trailer. */
struct tg_cap_stat {
    uint32_t stream;
    uint64_t calls, returns, dropped;
};

/* A thread's end, queued by tg_cap_deposit until the writer applies it. */
struct tg_cap_end {
    struct tg_cap_stat stat;  /* its counters for END */
};

/* A growable byte buffer: LEN bytes used of CAP at DATA (malloc'ed, or NULL). */
struct tg_cap_buf {
    unsigned char *data;
    size_t len, cap;
};

/* What the threads queue for the writer: the capture has two, `q`, filled
 * under defs_lock, and `wq`, emptied by the writer under `lock`; the writer
 * swaps them (so a thread waits for the swap, never for a write). */
struct tg_cap_queue {
    struct tg_cap_buf defs;   /* code definitions, whole ones back to back (a
                               * CODES payload, maybe longer than one) */
    struct tg_cap_buf thr;    /* THREAD chunks: stream (u32), payload length
                               * (u32), payload, back to back */
    struct tg_cap_buf ends;   /* thread ends: struct tg_cap_end, in order (len
                               * and cap in bytes) */
};

/* An open call of a stream, as its CALL wrote it (segments' STATE). */
struct tg_cap_open_call {
    uint32_t code;            /* code id */
    int64_t line;             /* the CALL's line (C functions only) */
    uint64_t number;          /* its call number */
};

/* A stream's state after the chunks written so far (segmented captures). */
struct tg_cap_shadow {
    int used;                 /* the stream exists (defined, or process samples) */
    int live;                 /* a thread not yet deposited: its THREAD is repeated */
    int broken;               /* a chunk did not decode: no STATE written for it */
    unsigned char *def;       /* THREAD payload (malloc'ed), or NULL */
    size_t def_len;
    int64_t t_us;             /* time of its last timed record */
    uint64_t calls, returns;  /* thread: CALLs, RETURNs; process: samples in calls */
    int64_t mem;              /* thread: its memory now, as live counts it (the
                               * sum of lvl[0..top]); process: last BYTES */
    struct tg_cap_open_call *open;  /* open calls, innermost last (malloc'ed) */
    size_t depth, open_cap;
    int64_t *lvl;             /* thread: open_cap sums by depth: lvl[k], the
                               * DELTAs of the calls at depth k that returned
                               * since the last return at a shallower depth
                               * (malloc'ed; nonzero only in [0, top]) */
    size_t top;               /* depth of the last RETURN (0 before any) */
};

struct tg_cap {
    pthread_mutex_t lock;     /* guards every field below marked "lock" (all but
                               * those marked otherwise), after open; held
                               * across compression and write(2) */
    pthread_mutex_t defs_lock;  /* guards q and defs_open only;
                               * never held across I/O or while taking
                               * `lock` (order: lock, then defs_lock) */
    int fd;                   /* capture.tg, O_APPEND; -1 when closed; lock
                               * (tg_cap_usable peeks at it) */
    dev_t dev;                /* identity of the file on fd (see tg_fd_is_ours) */
    ino_t ino;
    int err;                  /* errno of the first failed write: capture stopped;
                               * written under lock with atomic stores, read
                               * without it (atomic loads) by tg_cap_define and
                               * tg_cap_usable */
    int dropped_child;        /* set in a forked child: inherited, never written */
    uint32_t flags;           /* TG_CAP_F_* of the header */
    int64_t start_us;         /* header start_us; immutable after open */
    uint64_t epoch;           /* unique per opened capture (code ids are per epoch);
                               * immutable after open */
    uint32_t next_code;       /* next code id to assign; the GIL (its only users,
                               * tg_cap_new_code_id's callers, hold it); set at
                               * open */
    int defs_open;            /* definitions are taken (open, not closed, not a
                               * forked child's); defs_lock */
    struct tg_cap_queue q;    /* queued by the threads; defs_lock */
    struct tg_cap_queue wq;   /* taken from q by the writer, being written
                               * (empty between writes but after a failed
                               * one); lock */
    struct tg_cap_stat *stats;  /* streams' counters, from the applied ends;
                               * lock */
    size_t n_stats, stats_cap;  /* lock */
    char *path;               /* for messages; malloc'ed; set at open, then
                               * read-only until close */
    int compress;             /* zstd-compress events and process chunks (set
                               * by tg_cap_open; only with TG_HAVE_ZSTD) */
    void *zctx;               /* ZSTD_CCtx, or NULL; lock */
    unsigned char *zbuf;      /* compression output; lock */
    size_t zbuf_cap;
    unsigned char header[TG_CAP_HEADER_SIZE];  /* as written; each segment's
                               * with its own number; immutable after open */
    /* Segments (max_size > 0); all under lock. */
    uint64_t max_size;        /* the segments' total stays within it (but
                               * over_limit) */
    uint64_t seg_max;         /* a segment's size before the next starts (or
                               * twice its head: tg_cap_seg_target) */
    char *dir;                /* the run directory the segments are in (malloc'ed) */
    uint32_t seg_no;          /* the current segment's number (>= 1) */
    uint32_t seg_first;       /* the oldest segment kept */
    uint64_t *seg_sizes;      /* bytes of segment seg_first + i (i < seg_no - seg_first + 1) */
    size_t seg_sizes_cap;
    uint64_t seg_head;        /* bytes of the current segment's header and head */
    uint64_t segs_deleted;    /* segments dropped so far */
    int keep_ended;           /* an end keeps its stream in later heads
                               * (tg_cap_keep_ended) */
    uint64_t over_limit;      /* the most bytes the segments kept passed max_size
                               * by: a head (and one chunk) longer than the limit
                               * allows; 0 when it held.  Kept after close (reset
                               * by tg_cap_open_segments) for the run's report */
    unsigned char *alldefs;   /* every CODES payload written, back to back */
    size_t alldefs_len, alldefs_cap;
    size_t *defs_ends;        /* end offset in alldefs of each payload */
    size_t n_defs_ends, defs_ends_cap;
    unsigned char *kinds;     /* code id -> TG_CAP_CODE_* + 1 (decoding CALLs),
                               * noted as the definitions are written (a CALL
                               * is always written after its code's) */
    size_t kinds_cap;
    struct tg_cap_shadow *sh; /* by stream id */
    size_t n_sh;
};

/* Whether this build can compress chunks (zstd, TG_HAVE_ZSTD). */
int tg_cap_can_compress(void);

/* Make CAP closed and empty (call once before use). */
void tg_cap_init(struct tg_cap *cap);
/* Create PATH (O_EXCL|O_NOFOLLOW|O_APPEND, 0644) and write the header.  START_US
 * is the time base, FLAGS TG_CAP_F_*.  COMPRESS: events and process chunks are
 * zstd frames (TG_CAP_CHUNK_ZSTD) when that is smaller, if tg_cap_can_compress().
 * Returns 0, or -errno (CAP stays closed). */
int tg_cap_open(struct tg_cap *cap, const char *path, uint32_t flags, int64_t start_us,
                uint32_t memory_mode, uint32_t clock, uint32_t pid, int compress);
/* The smallest max_size tg_cap_open_segments accepts. */
#define TG_CAP_MAX_SIZE_MIN (256u * 1024)
/* A segment is an eighth of max_size (and at least TG_CAP_SEG_MIN bytes). */
#define TG_CAP_SEGS 8
#define TG_CAP_SEG_MIN (64u * 1024)

/* tg_cap_open with segments: DIR/capture-000001.tg onwards, rotated so that
 * the segments' total stays within MAX_SIZE bytes (>= TG_CAP_MAX_SIZE_MIN), but
 * while a segment is started (its head written before the oldest are deleted)
 * and when one segment's head alone is too long (tg_cap_over_limit).  Returns
 * 0, or -errno (-EINVAL: MAX_SIZE too small). */
int tg_cap_open_segments(struct tg_cap *cap, const char *dir, uint64_t max_size,
                         uint32_t flags, int64_t start_us, uint32_t memory_mode,
                         uint32_t clock, uint32_t pid, int compress);
/* The current segment's path (the capture's path without segments), for
 * messages; the lock is taken.  Returns a malloc'ed copy or NULL. */
char *tg_cap_current_path(struct tg_cap *cap);
/* Segments dropped so far (0 without segments). */
uint64_t tg_cap_segments_dropped(struct tg_cap *cap);
/* The most bytes the segments kept passed max_size by (0: within it; without
 * segments, 0): the current segment's head and one chunk alone were longer, so
 * no dropping of older segments could keep the limit.  Valid after close. */
uint64_t tg_cap_over_limit(struct tg_cap *cap);

/* Whether CAP is open and not stopped (racy peek, for fast checks). */
int tg_cap_usable(struct tg_cap *cap);
/* A new code id of this capture (>= 1).  Lock not needed: the callers hold the
 * GIL; 0 if the ids ran out. */
uint32_t tg_cap_new_code_id(struct tg_cap *cap);
/* Queue the definition of code ID (kind TG_CAP_CODE_*, FIRSTLINE, FILE and FUNC
 * already escaped); written before the next chunk.  Takes only defs_lock, so
 * it never waits for a write in progress.  Returns 0 or -1 (out of memory /
 * stopped: do not use ID). */
int tg_cap_define(struct tg_cap *cap, uint32_t id, int kind, uint32_t firstline,
                  const char *file, size_t file_len, const char *func, size_t func_len);
/* Write one chunk KIND of STREAM with payload BUF/LEN (whole records), after the
 * pending definitions.  Returns 0 or an errno (the capture stops at the first
 * failure; later calls return that errno without writing). */
int tg_cap_chunk_out(struct tg_cap *cap, int kind, uint32_t stream, const void *buf,
                     size_t len);
/* Queue the thread definition (THREAD chunk) of STREAM, written before the
 * next chunk: call it before the stream's first record.  Takes only
 * defs_lock.  Returns 0 or an errno (out of memory, or the capture is closed
 * or stopped). */
int tg_cap_thread(struct tg_cap *cap, uint32_t stream, uint64_t native_id, uint64_t ident,
                  const char *base, size_t base_len, const char *name, size_t name_len);
/* Queue STREAM's end (thread close): its final counters, for the END.  Call
 * it after every chunk of the stream has been written (the flusher, after
 * tg_writer_close_nogil): the stream's records never follow its end.  Takes
 * only defs_lock.  Returns 0 or -1 (out of memory: the stream is left out of
 * the END counters). */
int tg_cap_deposit(struct tg_cap *cap, uint32_t stream, uint64_t calls, uint64_t returns,
                   uint64_t dropped);
/* Write the pending definitions and the END trailer (END_US, the deposited
 * counters), then close.  Returns 0 or an errno (the file is closed anyway). */
int tg_cap_finish(struct tg_cap *cap, int64_t end_us);
/* From now on until the capture closes, an end applied keeps its stream live
 * in the heads of later segments: disable() ends every thread, one after
 * another, and the last chunk of a thread ended first may lie in a segment that
 * the writing of the others' last chunks drops; the segments kept must still
 * carry every thread that ran up to the end of the run.  Takes `lock`. */
void tg_cap_keep_ended(struct tg_cap *cap);
/* Close without writing the trailer and free everything; safe twice. */
void tg_cap_close(struct tg_cap *cap);
/* Destroy the lock (after the last close). */
void tg_cap_destroy(struct tg_cap *cap);
/* Test gate: while closed (tg_cap_gate_set(1)), every capture write waits just
 * before its write(2), with the capture's lock held, as a write into a full
 * pipe or a stalled NFS would: a deterministic blocked sink for tests
 * (threadgraph._recorder._test_capture_gate).  Process-wide; open by default,
 * and costs one relaxed load per write while open. */
void tg_cap_gate_set(int closed);
/* Wait until a writer waits at the closed gate (returns at once if open). */
void tg_cap_gate_wait_blocked(void);

/* pthread_atfork, prepare and parent: take and release CAP's defs_lock (short,
 * never held across I/O) around fork(); never `lock`, which a write holds
 * across write(2): a fork must not wait for the disk. */
void tg_cap_prepare_fork(struct tg_cap *cap);
void tg_cap_after_fork_parent(struct tg_cap *cap);
/* In a forked child, after tg_cap_prepare_fork: forget pending definitions,
 * close the inherited descriptor unwritten, release defs_lock.  If `lock` was
 * held at the fork (a write of another thread), what it guards is left
 * untouched (leaked) and the lock made anew.  The test gate starts open.  No
 * malloc or free (the queued buffers are freed by the next close). */
void tg_cap_drop_in_child(struct tg_cap *cap);

/* --- record encoders (the hot path: no division, no formatting) ---------- */

/* Longest record the encoders below write, SPECIAL DROPPED prefix included. */
#define TG_CAP_RECORD_MAX (5 * TG_CAP_VARINT_MAX + 2)

/* SPECIAL "N records dropped here". */
static inline unsigned char *tg_cap_enc_dropped(unsigned char *p, uint64_t n)
{
    *p++ = 0;
    *p++ = TG_CAP_EV_DROPPED;
    return tg_cap_put_varint(p, n);
}

/* SPECIAL "the N innermost open calls end here without a RETURN". */
static inline unsigned char *tg_cap_enc_unwound(unsigned char *p, uint64_t n)
{
    *p++ = 0;
    *p++ = TG_CAP_EV_UNWOUND;
    return tg_cap_put_varint(p, n);
}

/* SPECIAL "the thread's memory here is LEVEL", TG_CAP_LEVEL_MAX bytes at most. */
#define TG_CAP_LEVEL_MAX (2 + TG_CAP_VARINT_MAX)
static inline unsigned char *tg_cap_enc_level(unsigned char *p, int64_t level)
{
    *p++ = 0;
    *p++ = TG_CAP_EV_LEVEL;
    return tg_cap_put_varint(p, tg_cap_zz(level));
}

/* CALL of CODE (>= 1); DT_US if TIMED; LINE (zigzag: a frame's line may be -1)
 * for C functions (IS_C). */
static inline unsigned char *tg_cap_enc_call(unsigned char *p, uint32_t code, int timed,
                                             uint64_t dt_us, int is_c, int64_t line)
{
    p = tg_cap_put_varint(p, (uint64_t)code << 1);
    if (timed)
        p = tg_cap_put_varint(p, dt_us);
    if (is_c)
        p = tg_cap_put_varint(p, tg_cap_zz(line));
    return p;
}

/* RETURN at line REF + LINE_OFF; DT_US if TIMED; DELTA if MEMORY. */
static inline unsigned char *tg_cap_enc_return(unsigned char *p, int64_t line_off, int timed,
                                               uint64_t dt_us, int memory, int64_t delta)
{
    p = tg_cap_put_varint(p, tg_cap_zz(line_off) << 1 | 1);
    if (timed)
        p = tg_cap_put_varint(p, dt_us);
    if (memory)
        p = tg_cap_put_varint(p, tg_cap_zz(delta));
    return p;
}

/* Process sample: DT_US if TIMED, then the change of BYTES. */
static inline unsigned char *tg_cap_enc_sample(unsigned char *p, int timed, uint64_t dt_us,
                                               int64_t change)
{
    if (timed)
        p = tg_cap_put_varint(p, dt_us);
    return tg_cap_put_varint(p, tg_cap_zz(change));
}

/* --- C function ids: (a, b) pointer pair -> id, open addressing ----------- */

struct tg_cap_idtab_entry {
    uintptr_t a, b;  /* a != 0 in a used slot */
    uint32_t id;
};

struct tg_cap_idtab {
    struct tg_cap_idtab_entry *slots;  /* power-of-two count; owner only (GIL) */
    size_t cap, used;
};

/* Home slot of (A, B) in a table of MASK + 1 slots. */
static inline size_t tg_cap_idtab_slot(uintptr_t a, uintptr_t b, size_t mask)
{
    uint64_t h = ((uint64_t)a ^ ((uint64_t)b << 7) ^ ((uint64_t)a >> 17))
                 * UINT64_C(0x9E3779B97F4A7C15);
    return (size_t)(h >> 32) & mask;
}

/* The id of (A, B) (A != 0), or 0 if absent. */
static inline uint32_t tg_cap_idtab_get(const struct tg_cap_idtab *t, uintptr_t a, uintptr_t b)
{
    size_t mask, i;
    if (t->cap == 0)
        return 0;
    mask = t->cap - 1;
    i = tg_cap_idtab_slot(a, b, mask);
    while (t->slots[i].a != 0) {
        if (t->slots[i].a == a && t->slots[i].b == b)
            return t->slots[i].id;
        i = (i + 1) & mask;
    }
    return 0;
}

/* Enter (A, B) -> ID (absent before).  Returns 0 or -1 (out of memory). */
int tg_cap_idtab_put(struct tg_cap_idtab *t, uintptr_t a, uintptr_t b, uint32_t id);
/* Free the table (CB, if not NULL, sees each entry first). */
void tg_cap_idtab_clear(struct tg_cap_idtab *t, void (*cb)(uintptr_t a, uintptr_t b));

#pragma GCC visibility pop

#endif /* TG_REC_CAPTURE_H */
