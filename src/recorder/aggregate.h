/*
 * aggregate.h - plain C: aggregate=True's state, a call-path tree and a memory
 * curve per thread, and its file (aggregate.tga, docs/formats.md "Aggregate").
 *
 * Each thread owns its tree (a node per (parent, function, line), with the
 * count, total and largest delta and time of the calls on that path) and its
 * curve (the thread's memory, min and max per bucket of width_us; when the
 * curve would pass TG_AGG_BUCKETS buckets, adjacent pairs are merged and the
 * width doubles, so it stays bounded however long the run).  The thread is the
 * only writer of both; the flusher reads them without a lock: nodes live in
 * chunks that never move and are published by a release store of the count,
 * counters are relaxed atomics (plain loads and stores on x86-64), and the
 * curve's merges are bracketed by a sequence count the reader checks.
 * Function names are interned once per run in an append-only table (its
 * writers hold the GIL), published the same way.
 *
 * Threads that ended are kept whole up to TG_AGG_KEEP_ENDED, the most recent;
 * past that the oldest is folded into its family's entry (its base name with
 * every run of digits made "*": "Thread-7 (handler)" into "Thread-* (handler)")
 * and freed, so that a program starting a thread per request keeps the file
 * and the recorder's memory bounded.  At most TG_AGG_FAMILIES families get an
 * entry of their own; the threads of any other fold into one entry named "*".
 * A folded entry is a tg_agg_thread without an owner: its tree and curve are
 * changed only under the lock, as the flusher reads them.  With memory=thread
 * its curve is the sum of its threads' memory, an ended thread counting at its
 * last reading in every bucket after its end (it still holds that), so the
 * entry's curve has a reading in every bucket from its first thread's start.
 *
 * tg_agg_write writes the whole state to <outdir>/.aggregate.tga.tmp and
 * renames it to aggregate.tga: a reader (or a SIGKILL) sees the previous
 * complete file or the new one, never a part.
 */
#ifndef TG_AGGREGATE_H
#define TG_AGGREGATE_H

#include "names.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

#define TG_AGG_FILENAME "aggregate.tga"
#define TG_AGG_TMPNAME ".aggregate.tga.tmp"
#define TG_AGG_MAGIC "threadgraph-aggregate 2"
#define TG_AGG_CHUNK 1024u         /* nodes (functions) per chunk */
#define TG_AGG_MAX_CHUNKS 1024u    /* chunks per thread: 1M call paths */
#define TG_AGG_FUNC_CHUNKS 1024u   /* chunks of the function table: 1M functions */
#define TG_AGG_BUCKETS 512u        /* curve buckets before two merge into one */
#define TG_AGG_BUCKET_US 1000      /* the curve's first bucket width (1 ms): the
                                    * 512 reached within 0.512 s, so that a run
                                    * twice as long is about as big from 1 s on */
#define TG_AGG_NONE UINT32_MAX     /* no node: the call is not counted */
#define TG_AGG_KEEP_ENDED 16u      /* ended threads kept whole, the most recent */
#define TG_AGG_FAMILIES 16u        /* folded entries by name, besides the one "*" */

struct tg_agg_node {
    uint32_t parent;               /* node index (0: the thread's root); immutable */
    uint32_t func;                 /* function id (tg_agg_func_add); immutable */
    uint32_t line;                 /* first line (Python) or calling line (C); immutable */
    _Atomic uint64_t count;        /* owner stores, the flusher reads (relaxed) */
    _Atomic int64_t total;         /* sum of the calls' deltas; as count */
    _Atomic int64_t max;           /* largest delta; as count */
    _Atomic int64_t time_us;       /* sum of the calls' durations; as count */
};

struct tg_agg_thread {
    struct tg_agg_thread *next;    /* the run's list; tg_agg.lock */
    char *base;                    /* file base name of the thread; immutable */
    unsigned long native_id;       /* immutable (0: a folded entry) */
    uint64_t tag;                  /* the caller's name for it (the recorder: its
                                    * thread log's seq); immutable */
    uint64_t ended;                /* 0: running or folded; else its end's rank; lock */
    uint64_t folded;               /* ended threads folded into it (0: a thread); lock */
    struct tg_agg_node *chunks[TG_AGG_MAX_CHUNKS]; /* owner allocates; published by n */
    _Atomic uint32_t n;            /* nodes published (release by the owner) */
    uint32_t *slots;               /* node index + 1 by (parent, func, line); owner */
    size_t slots_cap;              /* power of two; owner */
    _Atomic uint64_t dropped;      /* calls not counted (no node); owner stores */
    /* the curve */
    int64_t start_us;              /* the run's start; immutable */
    _Atomic uint32_t seq;          /* odd while a merge runs; owner stores */
    _Atomic int64_t width_us;      /* bucket width; owner stores (inside seq) */
    _Atomic uint32_t nb;           /* buckets in use; as width_us */
    uint32_t cur;                  /* bucket of the last reading; owner */
    int64_t cur_end_us;            /* end of that bucket; owner */
    int64_t last;                  /* the memory after the curve's last bucket: a
                                    * thread's last reading (owner stores; read
                                    * under the lock once it ended), a folded
                                    * entry's the sum of its threads' (lock) */
    _Atomic int64_t bmin[TG_AGG_BUCKETS]; /* INT64_MAX: empty; owner stores */
    _Atomic int64_t bmax[TG_AGG_BUCKETS];
};

struct tg_agg_func {
    int is_c;
    char *file;                    /* escaped FILE and FUNCTION (docs/formats.md) */
    char *func;
};

struct tg_agg {
    int on;                        /* aggregate=True; configuration */
    uint64_t epoch;                /* names this run's function ids (never 0) */
    int64_t start_us;              /* the run's start (wall clock, us) */
    int64_t bucket_us;             /* the curves' first bucket width; configuration */
    const char *memory;            /* "thread", "process" or "rss"; configuration */
    pthread_mutex_t lock;          /* guards threads (the list) and write_err; the
                                      file is made in memory under it, written
                                      after (never I/O under it: thread starts
                                      and ends take it with the GIL held) */
    struct tg_agg_thread *threads; /* lock */
    struct tg_agg_func *fchunks[TG_AGG_FUNC_CHUNKS]; /* GIL writes; published by n_funcs */
    _Atomic uint32_t n_funcs;      /* functions published (release) */
    int write_err;                 /* errno of the last failed write (0: none); lock */
    uint64_t ends;                 /* threads that ended (their ranks); lock */
    uint32_t n_ended;              /* ended threads kept whole; lock */
    uint32_t n_families;           /* folded entries other than "*"; lock */
};

/* Starts a run's state at START_US, curves starting with buckets of
 * BUCKET_US (the lock initialised by the caller once). */
void tg_agg_open(struct tg_agg *a, int64_t start_us, const char *memory, int64_t bucket_us);
/* Frees every thread and function; the flusher stopped.  Safe twice. */
void tg_agg_close(struct tg_agg *a);
/* Forgets the state without using the lock (a forked child: the parent's). */
void tg_agg_drop_in_child(struct tg_agg *a);

/* A new thread listed in A, or NULL (out of memory).  Its base name is copied;
 * TAG is given back when it is folded. */
struct tg_agg_thread *tg_agg_thread_new(struct tg_agg *a, const char *base,
                                        unsigned long native_id, uint64_t tag);

/* AT's thread ended (its owner, which no longer touches it): AT is kept
 * whole, and the oldest ended thread past TG_AGG_KEEP_ENDED is folded into its
 * family's entry and freed.  Returns 1 when a thread was folded, its tag in
 * *FOLDED_TAG and its entry's name in FAMILY (TG_AGG_FAMILY_CAP bytes; may be
 * NULL), else 0.  Takes the lock. */
int tg_agg_thread_end(struct tg_agg *a, struct tg_agg_thread *at, uint64_t *folded_tag,
                      char *family);
/* Room for a family's name: a base name and "~*". */
#define TG_AGG_FAMILY_CAP (TG_BASENAME_CAP + 2)

/* Interns a function: its id (>= 1), or 0 (out of memory, table full).  The
 * texts are copied.  One writer at a time (the GIL). */
uint32_t tg_agg_func_add(struct tg_agg *a, int is_c, const char *file, size_t file_len,
                         const char *func, size_t func_len);

/* The slow path of tg_agg_enter: a new node. */
uint32_t tg_agg_enter_slow(struct tg_agg_thread *at, uint32_t parent, uint32_t func,
                           uint32_t line);
/* The slow path of tg_agg_curve: a new bucket, merging when full. */
void tg_agg_curve_slow(struct tg_agg_thread *at, int64_t now_us, int64_t bytes);

static inline struct tg_agg_node *
tg_agg_node_at(struct tg_agg_thread *at, uint32_t i)
{
    return &at->chunks[i / TG_AGG_CHUNK][i % TG_AGG_CHUNK];
}

static inline size_t
tg_agg_hash(uint32_t parent, uint32_t func, uint32_t line)
{
    uint64_t h = ((uint64_t)parent << 32 | func) * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t)line * 0xC2B2AE3D27D4EB4Full;
    return (size_t)(h ^ (h >> 29));
}

/* The node of a call of FUNC at LINE under PARENT (TG_AGG_NONE: not counted,
 * a parent that was not counted either).  Owner only. */
static inline uint32_t
tg_agg_enter(struct tg_agg_thread *at, uint32_t parent, uint32_t func, uint32_t line)
{
    size_t mask, i;
    if (parent == TG_AGG_NONE || func == 0)
        return TG_AGG_NONE;
    mask = at->slots_cap - 1;
    for (i = tg_agg_hash(parent, func, line) & mask;; i = (i + 1) & mask) {
        uint32_t s = at->slots[i];
        struct tg_agg_node *n;
        if (s == 0)
            return tg_agg_enter_slow(at, parent, func, line);
        n = tg_agg_node_at(at, s - 1);
        if (n->parent == parent && n->func == func && n->line == line)
            return s - 1;
    }
}

/* A call on path NODE returned: DELTA bytes, DT_US microseconds.  Owner only. */
static inline void
tg_agg_leave(struct tg_agg_thread *at, uint32_t node, int64_t delta, int64_t dt_us)
{
    struct tg_agg_node *n;
    if (node == TG_AGG_NONE) {
        atomic_store_explicit(&at->dropped,
                              atomic_load_explicit(&at->dropped, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        return;
    }
    n = tg_agg_node_at(at, node);
    atomic_store_explicit(&n->count, atomic_load_explicit(&n->count, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    atomic_store_explicit(&n->total, atomic_load_explicit(&n->total, memory_order_relaxed)
                          + delta, memory_order_relaxed);
    if (delta > atomic_load_explicit(&n->max, memory_order_relaxed)
            || atomic_load_explicit(&n->count, memory_order_relaxed) == 1)
        atomic_store_explicit(&n->max, delta, memory_order_relaxed);
    atomic_store_explicit(&n->time_us, atomic_load_explicit(&n->time_us, memory_order_relaxed)
                          + (dt_us > 0 ? dt_us : 0), memory_order_relaxed);
}

/* The thread's memory is BYTES at NOW_US.  Owner only. */
static inline void
tg_agg_curve(struct tg_agg_thread *at, int64_t now_us, int64_t bytes)
{
    uint32_t c = at->cur;
    at->last = bytes;  /* what a fold carries past the thread's end */
    if (__builtin_expect(now_us >= at->cur_end_us, 0)) {
        tg_agg_curve_slow(at, now_us, bytes);
        return;
    }
    if (bytes < atomic_load_explicit(&at->bmin[c], memory_order_relaxed))
        atomic_store_explicit(&at->bmin[c], bytes, memory_order_relaxed);
    if (bytes > atomic_load_explicit(&at->bmax[c], memory_order_relaxed))
        atomic_store_explicit(&at->bmax[c], bytes, memory_order_relaxed);
}

/*
 * Writes A to <OUTDIR>/aggregate.tga (through TG_AGG_TMPNAME and a rename),
 * END_US the time of the state.  The flusher, or disable() with it stopped.
 * Returns 0 or an errno (also kept in a->write_err).
 */
int tg_agg_write(struct tg_agg *a, const char *outdir, int64_t end_us);

#pragma GCC visibility pop

#endif /* TG_AGGREGATE_H */
