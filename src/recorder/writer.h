/*
 * writer.h - buffered, whole-line output streams for the dump files.
 *
 * A writer owns either a file descriptor (the default files) or a sink: a
 * function its opener gives (the capture's chunks, capture_write.c; a Python file
 * object, sinks.c).  Records are appended into a 64 KiB buffer that only
 * ever holds whole lines, and leave the process with one write(2) (or one sink
 * call) per flush, so a killed process leaves at most its last line incomplete.
 * Plain C: writer.c links alone (tests/c/test_writer.c); it knows neither Python
 * nor the rest of the recorder, which it reaches only through the callbacks its
 * creator sets (the sink, the flush request).
 *
 * Concurrency: one producer at a time appends (the owning thread's profile
 * function, or any thread for process.mem, always with the GIL), without a lock:
 * the bytes are written, then `len` is published with a release store.  The
 * consumer side (writing bytes out) is serialised by `io_lock`, held across
 * the write; buffer moves by `lock`, which is never held across I/O: a
 * consumer takes io_lock, then lock, claims what it writes (a handed-off
 * buffer out of the queue, or [flushed, len) by advancing `flushed`), lets go
 * of lock for the write and takes it again after.  Only io_lock holders
 * recycle or free a buffer, so the one being written stays.  The buffer is
 * rewound (len = flushed = 0) or grown only by a GIL holder, under both
 * locks, when no producer can be running.  So the hot path takes no lock at
 * all.  The flusher first peeks, without the locks, at whether there is
 * anything to write (`len`, `flushed`, `nfull`, `buf`): those fields are
 * atomics (relaxed), so the peek is no data race (make check-tsan); the locked
 * path reads them again.
 *
 * A descriptor writer whose buffer fills does not write it itself (a 64 KiB
 * write(2) in the program's thread, with the GIL held, was a sixth of the
 * recorder's cost on call-heavy code, and the write may be stuck on a blocked
 * sink): under `lock` alone it queues the buffer for the flusher (`fullq`),
 * takes the spare one (or a new one; for a record longer than a buffer, one
 * made to its size, handed off in turn) and asks its creator to wake the flusher
 * (the `kick` callback, tg_writer_set_kick; a writer without one writes its
 * buffer itself).  It never waits for a write: when TG_WRITER_QUEUED_MAX
 * buffers wait already, the record is refused (reserve returns NULL; the recorder
 * counts it dropped and marks the gap in the stream) and the next one tries
 * again.  Bytes always leave in order: whoever writes holds io_lock and
 * writes the queue, oldest first, before the current buffer; a buffer queued
 * while its range is being written is queued from the end of that range.
 * Owner-only sinks (Python streams) are only ever touched with the GIL and take
 * no lock (a Python write may release the GIL; holding a lock across it could
 * deadlock a fork); the flusher never writes them.  Buffers come from malloc(),
 * never PyMem, so the tracer's own memory is invisible to the allocator hooks;
 * a closed writer's 64 KiB buffers are pooled for the next ones
 * (tg_writer_pooled), so threads coming and going do not churn the heap.
 */
#ifndef TG_WRITER_H
#define TG_WRITER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#pragma GCC visibility push(hidden)

#define TG_WRITER_BUFSIZE (64 * 1024)

/* Where a writer's bytes go when it has no descriptor (tg_writer_open_sink).
 * Defined once, static, by the code that opens such writers. */
struct tg_writer_sink {
    /* Take LEN bytes of whole records at BUF (CTX and TAG as given at open).
     * Returns 0, or an errno, which stops the stream for good.  Called with the
     * writer's lock held by whichever consumer flushes (the flusher included,
     * without the GIL) unless owner_only. */
    int (*write)(void *ctx, uint64_t tag, const char *buf, size_t len);
    /* At release, after the last write (may be NULL): let go of CTX.  DROPPED:
     * the writer was dropped in a forked child, nothing may be written.  Returns
     * 0 or an errno (reported like a failed write). */
    int (*close)(void *ctx, int dropped);
    /* 1: only the producer's side flushes it, with the GIL, and no lock is taken
     * (a Python stream): the flusher skips it.  The writer's len is already 0
     * when write is called, so write must copy the bytes before it runs anything
     * that may append to the writer again (its own records are kept, in order). */
    int owner_only;
};

/* At most this many filled buffers, of all streams (64 MiB), wait for the
 * flusher: past them (a sink stuck, or slower than the program, for that
 * long) the records of a stream whose buffer fills are dropped and counted,
 * never waited for.  Process-wide, so that a burst of one stream (a deep
 * recursion unwinding) passes whole while the flusher catches up.  A buffer
 * made for a record longer than TG_WRITER_BUFSIZE counts as as many as its
 * size fills. */
#define TG_WRITER_QUEUED_MAX 1024

/* A filled buffer handed to the flusher: its bytes [from, len) are to write. */
struct tg_writer_full {
    char *buf;
    size_t from, len;
    size_t cap;      /* its size: TG_WRITER_BUFSIZE, or more for a long record */
    unsigned slots;  /* its weight against TG_WRITER_QUEUED_MAX: cap in
                      * TG_WRITER_BUFSIZE units, rounded up */
};

struct tg_writer {
    pthread_mutex_t io_lock;  /* serialises consumers (flushes: the bytes leave in
                             * order); held across write(2) and the sink's
                             * write; taken before `lock` */
    pthread_mutex_t lock;   /* buffer moves (handoff queue, spare, flushed, buf);
                             * never held across I/O, so the producer's
                             * handoff never waits for a write */
    int fd;                 /* open descriptor, or -1; set at open, cleared by release */
    const struct tg_writer_sink *sink;  /* or NULL: write(2) to fd; set at open */
    void *sink_ctx;         /* the sink's CTX; set at open, cleared by release */
    uint64_t sink_tag;      /* the sink's TAG; set at open */
    void *pyfile;           /* sink_ctx when the sink is owner_only (a Python stream),
                             * else NULL: the test the hot path makes; GIL */
    void (*kick)(void *ctx);  /* asks the flusher to write a handed-off buffer (GIL
                               * held), or NULL: no handoff; set by the creator */
    void *kick_ctx;         /* its argument; as kick */
    char *_Atomic buf;      /* malloc'ed; moved (realloc) only under lock by a GIL
                             * holder; atomic: the flusher peeks at it unlocked */
    size_t cap;             /* size of buf; as buf */
    _Atomic size_t len;     /* end of appended lines; producer publishes (release) */
    _Atomic size_t lim;     /* the fast path's bound: a record of N bytes is appended
                             * at once while len + N <= lim.  cap while the buffer
                             * holds lines and the stream is usable, else 0 (empty
                             * buffer: its first line stamps first_ns; stopped or
                             * dropped stream).  Raised only by the producer's slow
                             * path, which re-reads err after raising it; lowered
                             * to 0 by whoever empties the buffer or stops the
                             * stream (tg_writer_stop: err first, then lim; both
                             * sides seq_cst, so the producer never keeps cap for
                             * a stopped stream) */
    _Atomic size_t flushed; /* bytes of buf already written; written under lock,
                             * atomic: the flusher peeks at it unlocked */
    struct tg_writer_full *fullq;  /* filled buffers handed to the flusher,
                             * oldest first (malloc'ed); lock */
    unsigned fullq_cap;     /* lock */
    _Atomic unsigned nfull; /* entries in fullq; written under lock, atomic: the
                             * flusher peeks at it unlocked */
    _Atomic unsigned nslots;  /* their slots (tg_writer_full); written under lock,
                             * atomic: a forked child reads it when the lock
                             * was held at the fork */
    char *spare;            /* an empty TG_WRITER_BUFSIZE buffer, or NULL; lock */
    int64_t first_ns;       /* monotonic time of the oldest line since the last rewind
                             * (Python streams' age check); producer only */
    _Atomic int err;        /* errno of the first failed write: the stream is stopped */
    int dropped;            /* set in a forked child: inherited data is discarded */
    int in_sink_write;      /* an owner-only sink's write is in progress; GIL */
    char *path;             /* for error messages; malloc'ed */
    dev_t dev;              /* identity of the file opened on fd: a program that */
    ino_t ino;              /* closes and reopens descriptors must not get our
                             * records or lose its file to our close() */
};

/* Make W a closed, empty writer (safe to release), with no kick.  Call once
 * before use. */
void tg_writer_init(struct tg_writer *w);
/* Handing off a full buffer calls KICK(CTX) (with the GIL, on the producer's
 * slow path only) to have the flusher write it; the creator of W sets this once,
 * it outlives every open and release.  KICK NULL: W's producer writes full
 * buffers itself. */
void tg_writer_set_kick(struct tg_writer *w, void (*kick)(void *ctx), void *ctx);
/* Open PATH (O_EXCL|O_NOFOLLOW, 0644) into W.  Returns 0, or -errno and leaves W
 * stopped (err set) but safe to release. */
int tg_writer_open_path(struct tg_writer *w, const char *path);
/* Every flush of W goes to SINK (static) with CTX and TAG; LABEL names W in
 * messages.  Returns 0, with W owning CTX (released through sink->close), or
 * -ENOMEM with CTX still the caller's and W closed. */
int tg_writer_open_sink(struct tg_writer *w, const struct tg_writer_sink *sink, void *ctx,
                        uint64_t tag, const char *label);
/* Whether records may still be appended. */
static inline int tg_writer_usable(struct tg_writer *w)
{
    return w->buf != NULL && !atomic_load_explicit(&w->err, memory_order_relaxed)
           && !w->dropped;
}
/* The slow path of tg_writer_reserve: first line of an empty buffer (stamps
 * first_ns), full buffer (handed off; without a kick, flushed or grown),
 * stopped stream. */
char *tg_writer_reserve_slow(struct tg_writer *w, size_t n);
/* Producer (GIL held): space for N more bytes at the end of the buffer, flushing
 * or growing first as needed; NULL if the stream is stopped or memory ran out.
 * Follow with tg_writer_commit.  Inline: on most records it is two loads and one
 * compare against lim (an empty, released, stopped or dropped writer has lim 0
 * and takes the slow path). */
static inline char *
tg_writer_reserve(struct tg_writer *w, size_t n)
{
    size_t len = atomic_load_explicit(&w->len, memory_order_relaxed);
    if (__builtin_expect(len + n <= atomic_load_explicit(&w->lim, memory_order_relaxed), 1))
        return w->buf + len;
    return tg_writer_reserve_slow(w, n);
}
/* Producer: publish USED bytes written at the pointer reserve returned. */
static inline void tg_writer_commit(struct tg_writer *w, size_t used)
{
    size_t len = atomic_load_explicit(&w->len, memory_order_relaxed);
    atomic_store_explicit(&w->len, len + used, memory_order_release);
}
/* Producer: publish the bytes written up to END, a pointer into the buffer
 * the last reserve returned space in (tg_writer_commit by the end instead of
 * the length: no reload of len). */
static inline void tg_writer_commit_end(struct tg_writer *w, const char *end)
{
    atomic_store_explicit(&w->len,
                          (size_t)(end - atomic_load_explicit(&w->buf, memory_order_relaxed)),
                          memory_order_release);
}
/* Producer: send its next reserve to the slow path (tg_writer_reserve_slow
 * raises lim again), for a producer that has something to do there first.
 * Only lowers lim, which any side may (see lim). */
static inline void tg_writer_divert(struct tg_writer *w)
{
    atomic_store_explicit(&w->lim, 0, memory_order_relaxed);
}
/* Consumer without the GIL (the flusher): write out what is pending.  Does
 * nothing for owner-only sinks. */
void tg_writer_flush_nogil(struct tg_writer *w);
/* Write W's handed-off buffer if it has one (the flusher, woken by a kick). */
void tg_writer_flush_full_nogil(struct tg_writer *w);
/* Write out what is pending and rewind the buffer.  GIL held, no producer running
 * (the owner itself, disable(), thread end). */
void tg_writer_flush(struct tg_writer *w);
/* The stream of a thread that ended, closed by whoever writes for it (the
 * flusher), no GIL needed: write what is pending (the handed-off buffers,
 * then the rest), close the descriptor and free the buffers.  err and path
 * stay, for the report, and the sink, closed by tg_writer_release, which frees
 * the rest without any write.  Takes io_lock: after any write of W in
 * progress.  No producer may append any more.  Does nothing to owner-only
 * sinks (their producer closes them, with the GIL). */
void tg_writer_close_nogil(struct tg_writer *w);
/* Flush, close (the sink's close too) and free everything; W may be released
 * twice.  GIL held. */
void tg_writer_release(struct tg_writer *w);
/* Destroy the lock (after the last release). */
void tg_writer_destroy(struct tg_writer *w);
/* In a forked child (the pthread_atfork child handler, lifecycle.c): forget
 * pending bytes and close the inherited descriptor without writing (a sink is
 * only closed, with DROPPED, at the release).  fork() takes no writer's lock
 * (a consumer holds it across write(2)): if W's lock was held at the fork,
 * by a write of another thread, W's buffers are left to that write (leaked,
 * never touched) and W's lock is made anew.  No malloc; but not
 * async-signal-safe: an inherited full buffer that cannot become the spare
 * (one is there already) is free()d, which glibc allows in an atfork child
 * handler (its fork() resets the allocator's locks before the handlers run).
 * A fork() from a signal handler must not reach here. */
void tg_writer_drop_in_child(struct tg_writer *w);

/* Filled buffers waiting for a flusher, of all writers (bounded by
 * TG_WRITER_QUEUED_MAX). */
unsigned tg_writer_queued(void);

/* TG_WRITER_BUFSIZE buffers given back by closed writers and kept for the
 * next ones (at most 16, process-wide). */
unsigned tg_writer_pooled(void);
/* In a forked child (the atfork child handler, before any
 * tg_writer_drop_in_child): the pool's lock made anew if a thread not in the
 * child held it (its buffers then left alone); the test gate made anew, open. */
void tg_writer_pool_after_fork_child(void);

/* Test gate of the descriptor writes (the text files: .mem, .stack,
 * process.mem): while closed (tg_writer_gate_set(1)), every write(2) of a
 * descriptor writer waits just before it, with the writer's io_lock held, as a
 * write into a full pipe or a stalled NFS would (testgate.h;
 * threadgraph._recorder._test_text_gate).  Sinks (the capture, Python
 * streams) are not held here: the capture has its own gate.  Process-wide;
 * open by default, one relaxed load per write while open. */
void tg_writer_gate_set(int closed);
/* Wait until a write waits at the closed gate (returns at once if open). */
void tg_writer_gate_wait_blocked(void);

/* CLOCK_MONOTONIC in ns (the age of a Python stream's oldest line). */
int64_t tg_monotonic_ns(void);

/* Whether FD still refers to the file with identity DEV/INO (the program may have
 * closed our descriptor and opened something else under its number).
 * Async-signal-safe (fstat only). */
int tg_fd_is_ours(int fd, dev_t dev, ino_t ino);

#pragma GCC visibility pop

#endif /* TG_WRITER_H */
