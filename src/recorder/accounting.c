/*
 * accounting.c - allocation accounting (see accounting.h, docs/accounting.md).
 *
 * Counters:
 *  - per thread: a struct tg_acct_thread created by the thread on its first
 *    counted allocation (malloc, never PyMem), reached through a thread-local
 *    pointer and listed in tg_acct_threads.  Only its thread writes it (plain
 *    relaxed load + store, no lock prefix); summaries read it with relaxed loads.
 *    States are never freed during a run, so threads that ended keep their
 *    figures ("retired" by construction); all are freed at the next start.
 *  - process: live bytes as one relaxed atomic (fetch_add), its peak and the
 *    window peak as CAS-max registers; totals are sums over the thread states.
 *  - sites: a site is a node of its thread's calling-context tree (node = parent
 *    node + recorded call; the roots are the thread's outermost recorded calls,
 *    under a per-thread "no python frame" node).  Nodes are interned with the
 *    GIL in the profile function; the hook reads the thread's current node id
 *    (one thread-local read).  Each node has four relaxed atomic counters
 *    (allocated bytes/count, freed bytes/count) in fixed chunks that never move,
 *    because raw-domain hooks update them without the GIL from any thread.
 *    Atomics rather than per-thread arrays: a snapshot then needs no merge and a
 *    thread that ends needs no fold; contention only arises when two threads
 *    allocate at the same site at the same time.
 * A block's site id travels in its pointer-table word (accounting.h), so a free
 * on any thread credits the site that allocated it.
 *
 * Live at the peak (exact): every hook updates the process live bytes and the
 * site counters under one short spin lock (tg_acct_spin), so that the hooks of
 * all three domains, with or without the GIL, form one sequence of states.  When
 * an allocation takes the live bytes above the peak, the peak's sequence number
 * goes up; each site keeps, besides its counters, a copy of them stamped with the
 * sequence number it was taken at, renewed on the first change after a new peak.
 * A site whose stamp is not the current sequence number has not changed since the
 * peak; otherwise its copy holds its counters at the peak.  O(1) per hook, no
 * walk at the peak.  The lock replaces the atomic read-modify-writes the hooks
 * made before (one exchange instead of three lock-prefixed adds); it is never
 * held across a call that can allocate.
 *
 * Sampling (sample_bytes=N, acct_sample.h): only sampled allocations are given a
 * site (with an unbiased weight); the others take the site id 0, "unattributed",
 * which has no counters.  Thread and process figures stay exact.
 */
#include "accounting.h"
#include "acct_sample.h"
#include "alloc_hooks.h"
#include "clock.h"
#include "names.h"
#include "recorder.h"
#include "tg_snapshot.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define TG_RELAXED memory_order_relaxed
/* Owner-only update of a counter that other threads may read. */
#define TG_OWN_ADD(x, v) \
    atomic_store_explicit(&(x), atomic_load_explicit(&(x), TG_RELAXED) + (v), TG_RELAXED)
#define TG_LOAD(x) atomic_load_explicit(&(x), TG_RELAXED)

_Atomic int tg_acct_on;

/* --- per-thread state ---------------------------------------------------- */

struct tg_acct_thread {
    struct tg_acct_thread *next;       /* tg_acct_threads link; tg_acct_lock */
    unsigned long ident;               /* pthread id; immutable */
    unsigned long native_id;           /* OS thread id; immutable */
    _Atomic int64_t alloc_calls;       /* owner writes, anyone reads (relaxed) */
    _Atomic int64_t free_calls;
    _Atomic int64_t requested;         /* bytes requested by its allocations */
    _Atomic int64_t freed;             /* bytes of the blocks it freed */
    _Atomic int64_t peak;              /* highest requested - freed seen */
    _Atomic int64_t hist_alloc[TG_ACCT_BINS];  /* requested sizes */
    _Atomic int64_t hist_free[TG_ACCT_BINS];   /* freed sizes */
    uint32_t ix;                       /* index in the run's thread list; immutable */
    uint32_t cur_site;                 /* node of new allocations; owner only */
    uint32_t root;                     /* the thread's "no python frame" node, 0
                                        * until its first recorded call; owner (GIL) */
    uint32_t *stack;                   /* nodes of the open recorded calls; owner (GIL) */
    size_t depth, cap;                 /* owner only */
    struct tg_acct_sampler sampler;    /* sample_bytes mode; owner only */
};

/* The calling thread's state, valid iff gen == tg_acct_gen.  initial-exec, as
 * alloc_hooks.c's tg_tls: read by every hook, it is then one %fs-relative load
 * instead of a __tls_get_addr call (16 bytes of glibc's static TLS reserve). */
static _Thread_local struct {
    struct tg_acct_thread *t;
    uint64_t gen;
} tg_acct_tls __attribute__((tls_model("initial-exec")));

/* Run generation; written with the GIL at start, read by hooks (relaxed). */
static _Atomic uint64_t tg_acct_gen;
/* Guards tg_acct_threads (appends from hooks on any thread, reads with GIL). */
static pthread_mutex_t tg_acct_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tg_acct_thread *tg_acct_threads;
static uint32_t tg_acct_nthreads;    /* ix of the next state; tg_acct_lock */
/* The recorder of the run (thread names for snapshots); set at start, cleared at
 * finish and in a forked child.  GIL. */
static struct tg_recorder *tg_acct_rec;
/* Wall-clock start of the run, written into snapshots so that the CLI can tell
 * two snapshots of one run from snapshots of two runs.  GIL. */
static struct timespec tg_acct_t0;
/* Whether the last run had accounting; GIL. */
static int tg_acct_had_run;

/* The hooks' lock: orders every change of the process live bytes, the peak
 * registers and the site counters (see the top of the file).  A test-and-set
 * spin lock that yields the CPU after a short spin: it is held for a few dozen
 * instructions, by a GIL holder or a raw-domain hook without the GIL.  Nothing
 * that can allocate runs under it (a hook would deadlock on it). */
static _Atomic int tg_acct_spin;

/* Process figures: written under tg_acct_spin (load + store), read anywhere
 * with relaxed loads. */
static _Atomic int64_t tg_acct_live;
static _Atomic int64_t tg_acct_peak;
static _Atomic int64_t tg_acct_win_peak;
static _Atomic int tg_acct_nwin;  /* open windows; the hooks skip win_peak at 0 */

/* The process peak: its sequence number (bumped at each new peak, from 1 at
 * start) and when it was reached (CLOCK_REALTIME ns).  tg_acct_spin. */
static uint64_t tg_peak_seq;
static int64_t tg_peak_ns;

/* Sampling: mean bytes between samples (0: every allocation is attributed) and
 * the seed of the per-thread generators.  Written with the GIL at start before
 * accounting is switched on, read by hooks (relaxed). */
static _Atomic int64_t tg_acct_sample;
static uint64_t tg_acct_seed;

/* --- sites ----------------------------------------------------------------- */

struct tg_acct_site_ctr {
    /* Now: written under tg_acct_spin (load + store), read relaxed anywhere.
     * Counts are fixed-point (TG_ACCT_CNT_ONE per block; sampled weights are
     * fractions). */
    _Atomic int64_t alloc_bytes, alloc_count;
    _Atomic int64_t free_bytes, free_count;
    /* The four above at the process peak, valid when stamp == tg_peak_seq
     * (otherwise the site has not changed since the peak).  tg_acct_spin. */
    uint64_t stamp;
    int64_t pk[4];
};

#define TG_SITE_CHUNK_BITS 12
#define TG_SITE_CHUNK (1u << TG_SITE_CHUNK_BITS)
#define TG_SITE_NCHUNKS (TG_ACCT_MAX_SITES / TG_SITE_CHUNK)
/* Id 0: no site ("unattributed": an allocation sampling skipped, or a block of
 * a time accounting was off); it has no counters.  TG_SITE_NOTHREAD:
 * allocations outside any recorded call by a thread that has not yet made one
 * (its thread is unknown), written as node 0 in snapshots.  The last id collects
 * the nodes that do not fit once the table is full. */
#define TG_SITE_NONE 0u
#define TG_SITE_NOTHREAD (TG_ACCT_MAX_SITES - 2)
#define TG_SITE_FULL (TG_ACCT_MAX_SITES - 1)

/* Counter chunks: a chunk pointer is published (release) before any id in it is
 * handed out, and never changes until the next start. */
static struct tg_acct_site_ctr *_Atomic tg_site_chunks[TG_SITE_NCHUNKS];

/* A function entry: what the recorder writes for a call (GIL only). */
struct tg_acct_func {
    char *file, *func;     /* as the recorder passed them (one malloc: file) */
    size_t file_len, func_len;
    long line;
    int esc;               /* file and func still need escaping on output */
    uint64_t hash;
};

/* Calling-context tree nodes (GIL only).  A thread's root node has fid 0 and
 * parent 0 and is not in the hash (it is found through the thread's state);
 * every other node has a real parent, which makes (parent, fid) its key and
 * gives it its parent's thread.  A parent always has a smaller id. */
struct tg_acct_node {
    uint32_t parent;   /* enclosing node, 0 for a root */
    uint32_t fid;      /* the recorded call, 0 for a root */
    uint32_t tix;      /* owner thread's ix */
};

/* Interning tables; all GIL only.  fid 0 and sid 0 are "no frame". */
static struct tg_acct_func *tg_funcs;
static size_t tg_nfuncs, tg_funcs_cap;
static uint32_t *tg_func_hash;       /* open addressing: fid or 0 */
static size_t tg_func_hash_mask;
static struct tg_acct_node *tg_nodes;
static size_t tg_nnodes, tg_nodes_cap;
static uint32_t *tg_node_hash;       /* open addressing: sid or 0 */
static size_t tg_node_hash_mask;

/* --- run configuration (GIL) ------------------------------------------------ */

static char *tg_acct_outdir;
static int tg_acct_compress;
static unsigned tg_acct_nsnap;       /* snapshots written this run */

struct tg_acct_sched {
    int active;
    long start, stop, every;
    long next;                  /* next count (calls or milliseconds) that snapshots */
    PyObject *code;             /* strong ref, or NULL for seconds */
    long calls;                 /* calls of code seen */
    double t0;                  /* monotonic seconds at schedule */
};
static struct tg_acct_sched tg_sched;
/* First periodic-snapshot failure of the run ("" if none): the profile function
 * never raises, so disable() reports it.  GIL. */
static char tg_acct_sched_err[512];

/* --- windows (GIL) ------------------------------------------------------------ */

struct tg_acct_figs {
    int64_t alloc_calls, free_calls, requested, freed, live;
};

#define TG_MAX_WINDOWS 64
struct tg_acct_window {
    long id;
    char *name;
    struct tg_acct_thread *thread;     /* opener's state (may be NULL) */
    struct tg_acct_figs proc0, thr0;   /* figures at open */
    int64_t saved_peak;                /* win_peak register before our reset */
    double t0;
};
static struct tg_acct_window tg_windows[TG_MAX_WINDOWS];
static int tg_nwindows;
static long tg_window_ids;
static PyObject *tg_closed_windows;   /* list of dicts for summary.json */

/* --- helpers -------------------------------------------------------------- */

static inline int
tg_acct_bin(size_t size)
{
    return size == 0 ? 0 : 64 - __builtin_clzll((unsigned long long)size);
}

static void __attribute__((noinline, cold))
tg_acct_spin_wait(void)
{
    unsigned spins = 0;
    do {
        while (atomic_load_explicit(&tg_acct_spin, TG_RELAXED)) {
            if (++spins < 128) {
#if defined(__x86_64__) || defined(__i386__)
                __builtin_ia32_pause();
#elif defined(__aarch64__)
                __asm__ __volatile__("yield");
#endif
            } else {
                sched_yield();  /* the holder may have been preempted */
            }
        }
    } while (atomic_exchange_explicit(&tg_acct_spin, 1, memory_order_acquire));
}

static inline void
tg_acct_spin_lock(void)
{
    if (atomic_exchange_explicit(&tg_acct_spin, 1, memory_order_acquire))
        tg_acct_spin_wait();
}

static inline void
tg_acct_spin_unlock(void)
{
    atomic_store_explicit(&tg_acct_spin, 0, memory_order_release);
}

/* fork(): the child has one thread; a hook of another thread may have held the
 * lock at the fork, and the child's hooks must not wait for it.  (The child does
 * no accounting: what the holder left half-done does not matter.) */
static void
tg_acct_atfork_child(void)
{
    atomic_store_explicit(&tg_acct_spin, 0, TG_RELAXED);
}

static void
tg_acct_atfork_register(void)
{
    pthread_atfork(NULL, NULL, tg_acct_atfork_child);
}

static double
tg_acct_monotonic(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline struct tg_acct_site_ctr *
tg_site_ctr(uint32_t sid)
{
    struct tg_acct_site_ctr *c =
        atomic_load_explicit(&tg_site_chunks[sid >> TG_SITE_CHUNK_BITS], memory_order_acquire);
    return c ? &c[sid & (TG_SITE_CHUNK - 1)] : NULL;
}

/* The calling thread's state for this run, created on first use; NULL if out
 * of memory.  Any thread, no GIL needed: only malloc and a mutex. */
static struct tg_acct_thread *
tg_acct_self(void)
{
    uint64_t gen = atomic_load_explicit(&tg_acct_gen, TG_RELAXED);
    struct tg_acct_thread *t;

    if (tg_acct_tls.gen == gen && tg_acct_tls.t != NULL)
        return tg_acct_tls.t;
    t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->ident = PyThread_get_thread_ident();
    t->native_id = PyThread_get_thread_native_id();
    t->cur_site = TG_SITE_NOTHREAD;
    pthread_mutex_lock(&tg_acct_lock);
    t->ix = tg_acct_nthreads++;
    t->next = tg_acct_threads;
    tg_acct_threads = t;
    pthread_mutex_unlock(&tg_acct_lock);
    {
        int64_t mean = atomic_load_explicit(&tg_acct_sample, TG_RELAXED);
        if (mean > 0)
            tg_acct_sampler_init(&t->sampler, tg_acct_seed, t->ix, mean);
    }
    tg_acct_tls.t = t;
    tg_acct_tls.gen = gen;
    return t;
}

/* --- hooks ------------------------------------------------------------------ */

/* Keep C's counters at the peak before its first change since the peak (see
 * the top of the file).  tg_acct_spin held. */
static inline void
tg_site_touch_locked(struct tg_acct_site_ctr *c)
{
    if (c->stamp != tg_peak_seq) {
        c->pk[0] = TG_LOAD(c->alloc_bytes);
        c->pk[1] = TG_LOAD(c->alloc_count);
        c->pk[2] = TG_LOAD(c->free_bytes);
        c->pk[3] = TG_LOAD(c->free_count);
        c->stamp = tg_peak_seq;
    }
}

/* A new process peak of LIVE bytes (tg_acct_spin held): out of line, so that
 * the clock read does not weigh on the common path. */
static void __attribute__((noinline))
tg_acct_new_peak_locked(int64_t live)
{
    atomic_store_explicit(&tg_acct_peak, live, TG_RELAXED);
    tg_peak_seq++;
    tg_peak_ns = tg_clock_now_ns();
}

/* The weight of a block of SIZE bytes attributed to a site: its size and one
 * block, or under sampling (MEAN > 0) its sampled weight (acct_sample.h). */
static inline void
tg_acct_weight(size_t size, int64_t mean, int64_t *bytes, int64_t *count)
{
    if (mean > 0) {
        tg_acct_sample_weight(size, mean, bytes, count);
    } else {
        *bytes = (int64_t)size;
        *count = TG_ACCT_CNT_ONE;
    }
}

uint64_t
tg_acct_alloc(size_t size)
{
    struct tg_acct_thread *t = tg_acct_self();
    struct tg_acct_site_ctr *c = NULL;
    uint32_t sid = TG_SITE_NOTHREAD;
    int64_t live, wb = 0, wc = 0, mean = atomic_load_explicit(&tg_acct_sample, TG_RELAXED);

    if (size > TG_ACCT_SIZE_MASK)  /* >= 16 TiB: counted at the mask (documented) */
        size = TG_ACCT_SIZE_MASK;
    if (t != NULL) {
        int64_t own;
        sid = t->cur_site;
        TG_OWN_ADD(t->alloc_calls, 1);
        TG_OWN_ADD(t->requested, (int64_t)size);
        TG_OWN_ADD(t->hist_alloc[tg_acct_bin(size)], 1);
        own = TG_LOAD(t->requested) - TG_LOAD(t->freed);
        if (own > TG_LOAD(t->peak))
            atomic_store_explicit(&t->peak, own, TG_RELAXED);
        if (mean > 0 && !tg_acct_sampler_hit(&t->sampler, size, mean))
            sid = TG_SITE_NONE;
    } else if (mean > 0) {
        sid = TG_SITE_NONE;  /* no state, no sampler: the process figures only */
    }
    if (sid != TG_SITE_NONE) {
        tg_acct_weight(size, mean, &wb, &wc);
        c = tg_site_ctr(sid);
    }
    tg_acct_spin_lock();
    if (c != NULL) {
        /* The site first, then the peak: the allocation that makes a peak is
         * part of it. */
        tg_site_touch_locked(c);
        TG_OWN_ADD(c->alloc_bytes, wb);
        TG_OWN_ADD(c->alloc_count, wc);
    }
    live = TG_LOAD(tg_acct_live) + (int64_t)size;
    atomic_store_explicit(&tg_acct_live, live, TG_RELAXED);
    if (live > TG_LOAD(tg_acct_peak))
        tg_acct_new_peak_locked(live);
    if (TG_LOAD(tg_acct_nwin) && live > TG_LOAD(tg_acct_win_peak))
        atomic_store_explicit(&tg_acct_win_peak, live, TG_RELAXED);
    tg_acct_spin_unlock();
    return (uint64_t)size | ((uint64_t)sid << TG_ACCT_SIZE_BITS);
}

size_t
tg_acct_free(uint64_t word, int count_thread)
{
    size_t size = TG_ACCT_ENTRY_SIZE(word);
    uint32_t sid = (uint32_t)(word >> TG_ACCT_SIZE_BITS);
    struct tg_acct_site_ctr *c = NULL;
    int64_t wb = 0, wc = 0;

    if (count_thread) {
        struct tg_acct_thread *t = tg_acct_self();
        if (t != NULL) {
            TG_OWN_ADD(t->free_calls, 1);
            TG_OWN_ADD(t->freed, (int64_t)size);
            TG_OWN_ADD(t->hist_free[tg_acct_bin(size)], 1);
        }
    }
    if (sid != TG_SITE_NONE) {
        tg_acct_weight(size, atomic_load_explicit(&tg_acct_sample, TG_RELAXED), &wb, &wc);
        c = tg_site_ctr(sid);
    }
    tg_acct_spin_lock();
    if (c != NULL) {
        tg_site_touch_locked(c);
        TG_OWN_ADD(c->free_bytes, wb);
        TG_OWN_ADD(c->free_count, wc);
    }
    atomic_store_explicit(&tg_acct_live, TG_LOAD(tg_acct_live) - (int64_t)size, TG_RELAXED);
    tg_acct_spin_unlock();
    return size;
}

/* --- interning (GIL) ------------------------------------------------------- */

static uint64_t
tg_acct_hash(const char *s, size_t n, uint64_t h)
{
    size_t i;
    for (i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

/* Publish counters for SID (allocating its chunk); 0 or -1. */
static int
tg_site_chunk_ensure(uint32_t sid)
{
    size_t k = sid >> TG_SITE_CHUNK_BITS;
    struct tg_acct_site_ctr *c;
    if (atomic_load_explicit(&tg_site_chunks[k], TG_RELAXED) != NULL)
        return 0;
    c = calloc(TG_SITE_CHUNK, sizeof(*c));
    if (c == NULL)
        return -1;
    atomic_store_explicit(&tg_site_chunks[k], c, memory_order_release);
    return 0;
}

/* Double an open-addressing table of ids; REHASH gives an id's hash. */
static int
tg_idhash_grow(uint32_t **tab, size_t *mask, size_t n, uint64_t (*rehash)(uint32_t))
{
    size_t cap = *tab ? (*mask + 1) * 2 : 1024, i;
    uint32_t *nt = calloc(cap, sizeof(*nt));
    if (nt == NULL)
        return -1;
    for (i = 1; i < n; i++) {
        size_t j = rehash((uint32_t)i) & (cap - 1);
        while (nt[j])
            j = (j + 1) & (cap - 1);
        nt[j] = (uint32_t)i;
    }
    free(*tab);
    *tab = nt;
    *mask = cap - 1;
    return 0;
}

static uint64_t tg_func_rehash(uint32_t id) { return tg_funcs[id].hash; }

static uint64_t
tg_node_key_hash(uint32_t fid, uint32_t parent)
{
    uint64_t h = ((uint64_t)fid << 32 | parent) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 31);
}

/* A root's key cannot match a lookup (parent 0); salted with its thread so that
 * the roots of many threads do not pile up in one probe chain. */
static uint64_t tg_node_rehash(uint32_t id)
{
    const struct tg_acct_node *n = &tg_nodes[id];
    return n->parent ? tg_node_key_hash(n->fid, n->parent) : tg_node_key_hash(UINT32_MAX, n->tix);
}

/* Direct-mapped cache in front of tg_func_intern, keyed by the addresses of the
 * strings the recorder passes (they live in the code object's cache entry or the
 * C function's definition, so they repeat call after call).  A hit is confirmed
 * by comparing the text: a freed code object's address may be reused.  GIL. */
#define TG_FCACHE_SIZE 4096
static struct {
    const char *file, *func;
    long line;
    uint32_t fid;
} tg_fcache[TG_FCACHE_SIZE];

static uint32_t tg_func_intern_slow(const char *file, size_t file_len, long line,
                                    const char *func, size_t func_len, int esc);

static inline uint32_t
tg_func_intern(const char *file, size_t file_len, long line, const char *func,
               size_t func_len, int esc)
{
    uint64_t h = ((uint64_t)(uintptr_t)file ^ ((uint64_t)(uintptr_t)func * 31)
                  ^ (uint64_t)line) * 0x9E3779B97F4A7C15ull;
    size_t k = (size_t)(h >> 52) & (TG_FCACHE_SIZE - 1);
    uint32_t fid = tg_fcache[k].fid;

    if (fid != 0 && fid < tg_nfuncs && tg_fcache[k].file == file && tg_fcache[k].func == func
            && tg_fcache[k].line == line) {
        struct tg_acct_func *f = &tg_funcs[fid];
        if (f->esc == esc && f->file_len == file_len && f->func_len == func_len
                && memcmp(f->file, file, file_len) == 0 && memcmp(f->func, func, func_len) == 0)
            return fid;
    }
    fid = tg_func_intern_slow(file, file_len, line, func, func_len, esc);
    if (fid != 0) {
        tg_fcache[k].file = file;
        tg_fcache[k].func = func;
        tg_fcache[k].line = line;
        tg_fcache[k].fid = fid;
    }
    return fid;
}

/* Function id of (FILE, LINE, FUNC) as the recorder passed them (raw bytes;
 * ESC: they still need escaping on output); 0 on failure. */
static uint32_t
tg_func_intern_slow(const char *file, size_t file_len, long line, const char *func,
               size_t func_len, int esc)
{
    uint64_t h = tg_acct_hash(file, file_len, 0xcbf29ce484222325ull ^ (uint64_t)line);
    struct tg_acct_func *f;
    size_t j;
    char *mem;

    h = tg_acct_hash(func, func_len, h * 31 + (uint64_t)esc);
    if (tg_func_hash != NULL) {
        for (j = h & tg_func_hash_mask; tg_func_hash[j]; j = (j + 1) & tg_func_hash_mask) {
            f = &tg_funcs[tg_func_hash[j]];
            if (f->hash == h && f->line == line && f->esc == esc && f->file_len == file_len
                    && f->func_len == func_len && memcmp(f->file, file, file_len) == 0
                    && memcmp(f->func, func, func_len) == 0)
                return tg_func_hash[j];
        }
    }
    if (tg_nfuncs == 0)
        tg_nfuncs = 1;  /* id 0 is "no frame" */
    if (tg_nfuncs >= UINT32_MAX / 2)
        return 0;
    if (tg_nfuncs >= tg_funcs_cap) {
        size_t cap = tg_funcs_cap ? tg_funcs_cap * 2 : 1024;
        struct tg_acct_func *nf = realloc(tg_funcs, cap * sizeof(*nf));
        if (nf == NULL)
            return 0;
        tg_funcs = nf;
        tg_funcs_cap = cap;
    }
    if (tg_func_hash == NULL || (tg_nfuncs + 1) * 2 > tg_func_hash_mask + 1) {
        if (tg_idhash_grow(&tg_func_hash, &tg_func_hash_mask, tg_nfuncs, tg_func_rehash) < 0)
            return 0;
    }
    mem = malloc(file_len + func_len + 2);
    if (mem == NULL)
        return 0;
    f = &tg_funcs[tg_nfuncs];
    f->file = mem;
    memcpy(mem, file, file_len);
    mem[file_len] = '\0';
    f->func = mem + file_len + 1;
    memcpy(f->func, func, func_len);
    f->func[func_len] = '\0';
    f->file_len = file_len;
    f->func_len = func_len;
    f->line = line;
    f->esc = esc;
    f->hash = h;
    for (j = h & tg_func_hash_mask; tg_func_hash[j]; j = (j + 1) & tg_func_hash_mask)
        ;
    tg_func_hash[j] = (uint32_t)tg_nfuncs;
    return (uint32_t)tg_nfuncs++;
}

/* A new node (PARENT, FID) of thread TIX, not yet in the hash; its id, or
 * TG_SITE_FULL when the table is full or memory runs out. */
static uint32_t
tg_node_add(uint32_t parent, uint32_t fid, uint32_t tix, uint64_t h)
{
    size_t j;

    if (tg_nnodes == 0)
        tg_nnodes = 1;
    if (tg_nnodes >= TG_SITE_NOTHREAD)
        return TG_SITE_FULL;
    if (tg_nnodes >= tg_nodes_cap) {
        size_t cap = tg_nodes_cap ? tg_nodes_cap * 2 : 1024;
        struct tg_acct_node *ns = realloc(tg_nodes, cap * sizeof(*ns));
        if (ns == NULL)
            return TG_SITE_FULL;
        tg_nodes = ns;
        tg_nodes_cap = cap;
    }
    if (tg_node_hash == NULL || (tg_nnodes + 1) * 2 > tg_node_hash_mask + 1) {
        if (tg_idhash_grow(&tg_node_hash, &tg_node_hash_mask, tg_nnodes, tg_node_rehash) < 0)
            return TG_SITE_FULL;
    }
    if (tg_site_chunk_ensure((uint32_t)tg_nnodes) < 0)
        return TG_SITE_FULL;
    tg_nodes[tg_nnodes].parent = parent;
    tg_nodes[tg_nnodes].fid = fid;
    tg_nodes[tg_nnodes].tix = tix;
    for (j = h & tg_node_hash_mask; tg_node_hash[j]; j = (j + 1) & tg_node_hash_mask)
        ;
    tg_node_hash[j] = (uint32_t)tg_nnodes;
    return (uint32_t)tg_nnodes++;
}

/* The child of node PARENT (a real node, not 0 nor TG_SITE_FULL) for the call
 * FID; TG_SITE_FULL when the table is full. */
static uint32_t
tg_node_intern(uint32_t parent, uint32_t fid)
{
    uint64_t h = tg_node_key_hash(fid, parent);
    size_t j;

    if (tg_node_hash != NULL) {
        for (j = h & tg_node_hash_mask; tg_node_hash[j]; j = (j + 1) & tg_node_hash_mask) {
            struct tg_acct_node *n = &tg_nodes[tg_node_hash[j]];
            if (n->fid == fid && n->parent == parent)
                return tg_node_hash[j];
        }
    }
    return tg_node_add(parent, fid, tg_nodes[parent].tix, h);
}

/* The thread's root node ("no python frame" of thread T), made on first use. */
static uint32_t
tg_acct_root(struct tg_acct_thread *t)
{
    if (t->root == 0)
        t->root = tg_node_add(0, 0, t->ix, tg_node_key_hash(UINT32_MAX, t->ix));
    return t->root;
}

void
tg_acct_push(const char *file, size_t file_len, long line, const char *func,
             size_t func_len, int esc)
{
    struct tg_acct_thread *t = tg_acct_self();
    uint32_t fid, parent, node;

    if (t == NULL)
        return;
    if (t->depth > t->cap) {  /* already past a failed grow */
        t->depth++;
        return;
    }
    if (t->depth == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        uint32_t *ns = realloc(t->stack, cap * sizeof(*ns));
        if (ns == NULL) {
            /* Keep push/pop paired: count the frame, charge its caller's site. */
            t->depth++;
            return;
        }
        t->stack = ns;
        t->cap = cap;
    }
    parent = t->depth ? t->stack[t->depth - 1] : tg_acct_root(t);
    fid = tg_func_intern(file, file_len, line, func, func_len, esc);
    /* Below a full table everything stays in the overflow node: a recursion
     * past the capacity costs no more nodes. */
    node = fid && parent != TG_SITE_FULL ? tg_node_intern(parent, fid) : TG_SITE_FULL;
    t->stack[t->depth] = node;
    t->cur_site = node;
    t->depth++;
}

void
tg_acct_pop(void)
{
    struct tg_acct_thread *t = tg_acct_self();
    if (t == NULL || t->depth == 0)
        return;
    t->depth--;
    if (t->depth > t->cap)  /* frames that did not fit (see push) */
        return;
    t->cur_site = t->depth ? t->stack[t->depth - 1] : t->root ? t->root : TG_SITE_NOTHREAD;
}

/* --- snapshots (GIL) -------------------------------------------------------- */

/* Output sink: stdio or gzip. */
struct tg_sink {
    FILE *f;
    gzFile gz;
    int err;
};

static void
tg_sink_printf(struct tg_sink *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
tg_sink_printf(struct tg_sink *s, const char *fmt, ...)
{
    char buf[8192];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n < 0) {
        s->err = EINVAL;
        return;
    }
    if ((size_t)n >= sizeof(buf))
        n = sizeof(buf) - 1;
    if (s->gz != NULL) {
        if (n > 0 && gzwrite(s->gz, buf, (unsigned)n) != n)
            s->err = EIO;
    } else if (fwrite(buf, 1, (size_t)n, s->f) != (size_t)n) {
        s->err = errno ? errno : EIO;
    }
}

/* Write FILE or FUNC of an entry, escaped as the records are. */
static void
tg_sink_put_text(struct tg_sink *s, const char *txt, size_t len, int esc)
{
    char small[512], *buf = small;
    size_t n = esc ? tg_escaped_len(txt, len) : len;
    if (n + 1 > sizeof(small) && (buf = malloc(n + 1)) == NULL) {
        s->err = ENOMEM;
        return;
    }
    if (esc)
        tg_escape(buf, txt, len);
    else
        memcpy(buf, txt, len);
    buf[n] = '\0';
    if (s->gz != NULL) {
        if (n > 0 && gzwrite(s->gz, buf, (unsigned)n) != (int)n)
            s->err = EIO;
    } else if (fwrite(buf, 1, n, s->f) != n) {
        s->err = EIO;
    }
    if (buf != small)
        free(buf);
}

static void
tg_sink_put_func(struct tg_sink *s, uint32_t fid)
{
    struct tg_acct_func *f;
    if (fid == 0 || fid >= tg_nfuncs) {
        tg_sink_printf(s, "%s", TG_SNAP_CALL_NO_FRAME);
        return;
    }
    f = &tg_funcs[fid];
    tg_sink_put_text(s, f->file, f->file_len, f->esc);
    tg_sink_printf(s, ":%ld:", f->line);
    tg_sink_put_text(s, f->func, f->func_len, f->esc);
}

/* Base names of the run's threads by ix (into R's log, or "native-<tid>" in
 * NATIVE, which holds TG_BASENAME_CAP bytes per thread); N threads. */
static void
tg_acct_thread_bases(struct tg_recorder *r, const char **names, char *native, size_t n)
{
    struct tg_acct_thread *t;
    size_t i;

    for (i = 0; i < n; i++)
        names[i] = NULL;
    pthread_mutex_lock(&tg_acct_lock);
    t = tg_acct_threads;
    pthread_mutex_unlock(&tg_acct_lock);
    /* The list only grows at its head: walking from a read head is safe. */
    if (r != NULL)
        pthread_mutex_lock(&r->reg_lock);
    for (; t != NULL; t = t->next) {
        if (t->ix >= n)
            continue;
        for (i = r != NULL ? r->n_log : 0; i-- > 0;) {
            if (r->log[i].ident == t->ident && r->log[i].native_id == t->native_id) {
                names[t->ix] = r->log[i].base;
                break;
            }
        }
        if (names[t->ix] == NULL) {
            char *buf = native + (size_t)t->ix * TG_BASENAME_CAP;
            snprintf(buf, TG_BASENAME_CAP, "native-%lu", t->native_id);
            names[t->ix] = buf;
        }
    }
    if (r != NULL)
        pthread_mutex_unlock(&r->reg_lock);
}

/* The counters a snapshot writes for one node. */
struct tg_snap_row {
    int64_t ab, ac, fb, fc;   /* allocated bytes/count, freed bytes/count (counts fixed-point) */
};

/* What a snapshot reports, taken in one go under tg_acct_spin. */
struct tg_snap_view {
    struct tg_snap_row *rows;  /* [0]: TG_SITE_NOTHREAD (written as node 0),
                                * [1, nids): nodes, [nids]: TG_SITE_FULL */
    int64_t live, peak;        /* process live and peak bytes */
    int64_t peak_ns;           /* when the peak was reached (0: no allocation yet) */
};

/* Fill V->rows (NIDS + 1 of them, allocated by the caller: nothing allocates
 * under the lock) with each node's counters now, or AT_PEAK at the process peak,
 * and the process figures.  GIL held (no node is added meanwhile). */
static void
tg_acct_view_take(struct tg_snap_view *v, size_t nids, int at_peak)
{
    size_t i;

    tg_acct_spin_lock();
    for (i = 0; i <= nids; i++) {
        uint32_t id = i == 0 ? TG_SITE_NOTHREAD : i < nids ? (uint32_t)i : TG_SITE_FULL;
        struct tg_acct_site_ctr *c = tg_site_ctr(id);
        struct tg_snap_row *r = &v->rows[i];
        if (c == NULL) {
            memset(r, 0, sizeof(*r));
        } else if (at_peak && c->stamp == tg_peak_seq) {
            r->ab = c->pk[0];
            r->ac = c->pk[1];
            r->fb = c->pk[2];
            r->fc = c->pk[3];
        } else {
            r->ab = TG_LOAD(c->alloc_bytes);
            r->ac = TG_LOAD(c->alloc_count);
            r->fb = TG_LOAD(c->free_bytes);
            r->fc = TG_LOAD(c->free_count);
        }
    }
    v->live = TG_LOAD(tg_acct_live);
    v->peak = TG_LOAD(tg_acct_peak);
    v->peak_ns = tg_peak_ns;
    tg_acct_spin_unlock();
}

/* A fixed-point count (TG_ACCT_CNT_ONE per block) rounded to blocks. */
static long long
tg_cnt_round(int64_t v)
{
    return v >= 0 ? (long long)((v + TG_ACCT_CNT_ONE / 2) >> TG_ACCT_CNT_SHIFT)
                  : -(long long)((-v + TG_ACCT_CNT_ONE / 2) >> TG_ACCT_CNT_SHIFT);
}

/* Write the snapshot file PATH (tmp + rename): the nodes that hold counts and
 * their ancestors, parents first (docs/formats.md).  AT_PEAK: the counters at
 * the process peak, with the peak's time and the peak as the process live
 * bytes.  0 or -errno. */
static int
tg_acct_write_snapshot(const char *path, const char *label, unsigned number, int at_peak)
{
    size_t nids = tg_nnodes > 0 ? tg_nnodes : 1, nthr, i;
    uint8_t *keep = NULL, *tused = NULL;
    const char **tnames = NULL;
    char *native = NULL;
    int64_t sums[4] = {0, 0, 0, 0}, mean = atomic_load(&tg_acct_sample);
    struct tg_snap_view v = {NULL, 0, 0, 0};
    char *tmp;
    struct tg_sink s = {NULL, NULL, 0};
    struct timespec now;
    long long tsec;
    long tusec;
    int ret = 0;

    pthread_mutex_lock(&tg_acct_lock);
    nthr = tg_acct_nthreads;
    pthread_mutex_unlock(&tg_acct_lock);
    tmp = malloc(strlen(path) + 8);
    keep = calloc(nids + 1, 1);   /* [nids]: the overflow node */
    tused = calloc(nthr + 1, 1);
    tnames = calloc(nthr + 1, sizeof(*tnames));
    native = malloc((nthr + 1) * TG_BASENAME_CAP);
    v.rows = malloc((nids + 1) * sizeof(*v.rows));
    if (tmp == NULL || keep == NULL || tused == NULL || tnames == NULL || native == NULL
            || v.rows == NULL) {
        ret = -ENOMEM;
        goto out_free;
    }
    clock_gettime(CLOCK_REALTIME, &now);
    tg_acct_view_take(&v, nids, at_peak);
    tg_acct_thread_bases(tg_acct_rec, tnames, native, nthr);
    /* Nodes with counts, then their ancestors up to (not including) the thread's
     * root: a child of a root is written as a root itself.  Each node is marked
     * once, so this is O(nodes). */
    for (i = 0; i <= nids; i++) {
        const struct tg_snap_row *r = &v.rows[i];
        uint32_t p;
        if (r->ac == 0 && r->fc == 0)
            continue;
        sums[0] += r->ab - r->fb;
        sums[1] += r->ac - r->fc;
        sums[2] += r->ab;
        sums[3] += r->ac;
        keep[i] = 1;
        if (i == 0 || i == nids)
            continue;
        for (p = tg_nodes[i].parent; p != 0 && tg_nodes[p].parent != 0 && !keep[p];
             p = tg_nodes[p].parent)
            keep[p] = 1;
    }
    for (i = 1; i < nids; i++)
        if (keep[i] && tg_nodes[i].tix < nthr)
            tused[tg_nodes[i].tix] = 1;
    sprintf(tmp, "%s.tmp", path);
    if (tg_acct_compress) {
        s.gz = gzopen(tmp, "wb6");
        if (s.gz == NULL) {
            ret = errno ? -errno : -EIO;
            goto out_free;
        }
    } else {
        s.f = fopen(tmp, "w");
        if (s.f == NULL) {
            ret = -errno;
            goto out_free;
        }
    }
    tsec = (long long)now.tv_sec;
    tusec = now.tv_nsec / 1000;
    if (at_peak) {
        /* When the peak was reached (the start of the run if nothing was). */
        int64_t ns = v.peak_ns > 0 ? v.peak_ns
                     : (int64_t)tg_acct_t0.tv_sec * 1000000000 + tg_acct_t0.tv_nsec;
        tsec = (long long)(ns / 1000000000);
        tusec = (long)(ns % 1000000000 / 1000);
        v.live = v.peak;
    }
    tg_sink_printf(&s, TG_SNAP_MAGIC TG_SNAP_VERSION_STR "\n"
                   TG_SNAP_HDR(TG_SNAP_KEY_LABEL) "%s\n"
                   TG_SNAP_HDR(TG_SNAP_KEY_NUMBER) "%u\n"
                   TG_SNAP_HDR(TG_SNAP_KEY_TIME) "%lld.%06ld\n"
                   TG_SNAP_HDR(TG_SNAP_KEY_PID) "%ld\n"
                   TG_SNAP_HDR(TG_SNAP_KEY_RUN_START) "%lld.%06ld\n"
                   TG_SNAP_HDR(TG_SNAP_KEY_LIVE_BYTES) "%lld\n"
                   TG_SNAP_HDR(TG_SNAP_KEY_LIVE_COUNT) "%lld\n"
                   TG_SNAP_HDR(TG_SNAP_KEY_TOTAL_BYTES) "%lld\n"
                   TG_SNAP_HDR(TG_SNAP_KEY_TOTAL_COUNT) "%lld\n"
                   TG_SNAP_HDR(TG_SNAP_KEY_PROCESS_LIVE) "%lld\n"
                   TG_SNAP_HDR(TG_SNAP_KEY_PROCESS_PEAK) "%lld\n",
                   label, number, tsec, tusec, (long)getpid(),
                   (long long)tg_acct_t0.tv_sec, tg_acct_t0.tv_nsec / 1000,
                   (long long)sums[0], tg_cnt_round(sums[1]), (long long)sums[2],
                   tg_cnt_round(sums[3]), (long long)v.live, (long long)v.peak);
    if (mean > 0)
        tg_sink_printf(&s, TG_SNAP_HDR(TG_SNAP_KEY_SAMPLED) "%lld\n", (long long)mean);
    for (i = 0; i < nthr; i++)
        if (tused[i])
            tg_sink_printf(&s, TG_SNAP_HDR(TG_SNAP_KEY_THREAD) "%zu %s\n", i, tnames[i]);
    tg_sink_printf(&s, TG_SNAP_COLUMNS "\n");
    for (i = 0; i <= nids && !s.err; i++) {
        uint32_t id = i < nids ? (uint32_t)i : TG_SITE_FULL;
        const struct tg_snap_row *r = &v.rows[i];
        const struct tg_acct_node *n = id != 0 && id != TG_SITE_FULL ? &tg_nodes[id] : NULL;
        if (!keep[i])
            continue;
        tg_sink_printf(&s, "%lu ", (unsigned long)id);
        if (n != NULL && n->parent != 0 && tg_nodes[n->parent].parent != 0)
            tg_sink_printf(&s, "%lu ", (unsigned long)n->parent);
        else
            tg_sink_printf(&s, TG_SNAP_NONE_REF " ");
        if (n != NULL && n->tix < nthr)
            tg_sink_printf(&s, "%lu ", (unsigned long)n->tix);
        else
            tg_sink_printf(&s, TG_SNAP_NONE_REF " ");
        tg_sink_printf(&s, "%lld %lld %lld %lld ", (long long)(r->ab - r->fb),
                       tg_cnt_round(r->ac - r->fc), (long long)r->ab, tg_cnt_round(r->ac));
        if (id == TG_SITE_FULL)
            tg_sink_printf(&s, "%s", TG_SNAP_CALL_TABLE_FULL);
        else
            tg_sink_put_func(&s, n != NULL ? n->fid : 0);
        tg_sink_printf(&s, "\n");
    }
    if (s.gz != NULL) {
        if (gzclose(s.gz) != Z_OK && !s.err)
            s.err = EIO;
    } else if (fclose(s.f) != 0 && !s.err) {
        s.err = errno ? errno : EIO;
    }
    if (s.err) {
        unlink(tmp);
        ret = -s.err;
    } else if (rename(tmp, path) != 0) {
        ret = -errno;
        unlink(tmp);
    }
out_free:
    free(v.rows);
    free(keep);
    free(tused);
    free(tnames);
    free(native);
    free(tmp);
    return ret;
}

/* snapshot-<N>-<LABEL>[.gz]: now, or AT_PEAK at the process peak. */
static PyObject *
tg_acct_snapshot_write(const char *label, int at_peak)
{
    char base[TG_BASENAME_CAP];
    char *path;
    size_t n;
    int busy = tg_tls.busy, ret;
    PyObject *res = NULL;

    if (tg_acct_outdir == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "allocation accounting is not on");
        return NULL;
    }
    tg_tls.busy |= TG_BUSY_TRACER;  /* our own buffers are not the program's */
    tg_safe_basename(label, strlen(label), base);
    n = strlen(tg_acct_outdir) + strlen(base) + 40 + TG_LIT_LEN(TG_SNAP_FILE_PREFIX);
    path = malloc(n);
    if (path == NULL) {
        tg_tls.busy = busy;
        return PyErr_NoMemory();
    }
    tg_acct_nsnap++;
    snprintf(path, n, "%s/" TG_SNAP_FILE_PREFIX "%u-%s%s", tg_acct_outdir, tg_acct_nsnap, base,
             tg_acct_compress ? ".gz" : "");
    ret = tg_acct_write_snapshot(path, label, tg_acct_nsnap, at_peak);
    tg_tls.busy = busy;
    if (ret < 0) {
        errno = -ret;
        PyErr_SetFromErrnoWithFilename(PyExc_OSError, path);
    } else {
        res = PyUnicode_DecodeFSDefault(path);
    }
    free(path);
    return res;
}

PyObject *
tg_acct_snapshot(const char *label)
{
    return tg_acct_snapshot_write(label, 0);
}

PyObject *
tg_acct_snapshot_peak(void)
{
    return tg_acct_snapshot_write(TG_SNAP_PEAK_LABEL, 1);
}

/* --- periodic snapshots ------------------------------------------------------ */

int
tg_acct_schedule(long start, long stop, long every, PyObject *code)
{
    if (every <= 0 || start < 0 || (stop >= 0 && stop < start)) {
        PyErr_SetString(PyExc_ValueError,
                        "need every > 0, start_after >= 0 and stop_after >= start_after");
        return -1;
    }
    Py_CLEAR(tg_sched.code);
    Py_XINCREF(code);
    tg_sched.code = code;
    tg_sched.start = start;
    tg_sched.stop = stop;
    tg_sched.every = every;
    tg_sched.next = start;
    tg_sched.calls = 0;
    tg_sched.t0 = tg_acct_monotonic();
    tg_sched.active = 1;
    return 0;
}

/* Write the periodic snapshot labelled by the count reached; failures are
 * swallowed (the hook never raises) and noted as a skipped number. */
static void
tg_acct_sched_fire(long count)
{
    char label[64];
    PyObject *p;
    tg_saved_exc saved;

    if (tg_sched.code != NULL) {
        snprintf(label, sizeof(label), "call-%ld", count);
    } else {
        /* milliseconds as seconds, no trailing zeros: t-2s, t-0.25s */
        int n = snprintf(label, sizeof(label), "t-%ld.%03ld", count / 1000, count % 1000);
        while (n > 0 && label[n - 1] == '0')
            n--;
        if (n > 0 && label[n - 1] == '.')
            n--;
        snprintf(label + n, sizeof(label) - (size_t)n, "s");
    }
    tg_exc_save(&saved);
    p = tg_acct_snapshot(label);
    if (p == NULL && tg_acct_sched_err[0] == '\0') {
        PyObject *t, *v, *tb, *msg;
        PyErr_Fetch(&t, &v, &tb);
        msg = v != NULL ? PyObject_Str(v) : NULL;
        snprintf(tg_acct_sched_err, sizeof(tg_acct_sched_err), "periodic snapshot %s failed: %s",
                 label, msg != NULL && PyUnicode_Check(msg) ? PyUnicode_AsUTF8(msg) : "?");
        Py_XDECREF(msg);
        Py_XDECREF(t);
        Py_XDECREF(v);
        Py_XDECREF(tb);
    }
    Py_XDECREF(p);
    PyErr_Clear();
    tg_exc_restore(&saved);
    tg_sched.next += tg_sched.every;
    if (tg_sched.stop >= 0 && tg_sched.next > tg_sched.stop)
        tg_sched.active = 0;
}

void
tg_acct_on_call(PyObject *code)
{
    if (!tg_sched.active)
        return;
    if (tg_sched.code != NULL) {
        if (code != tg_sched.code)
            return;
        tg_sched.calls++;
        if (tg_sched.calls >= tg_sched.next)
            tg_acct_sched_fire(tg_sched.calls);
    } else {
        double el_ms = (tg_acct_monotonic() - tg_sched.t0) * 1000.0;
        if (el_ms >= (double)tg_sched.next)
            tg_acct_sched_fire(tg_sched.next);
    }
}

/* --- figures (GIL) ------------------------------------------------------------- */

static void
tg_thread_figs(struct tg_acct_thread *t, struct tg_acct_figs *f)
{
    f->alloc_calls = TG_LOAD(t->alloc_calls);
    f->free_calls = TG_LOAD(t->free_calls);
    f->requested = TG_LOAD(t->requested);
    f->freed = TG_LOAD(t->freed);
    f->live = f->requested - f->freed;
}

static void
tg_process_figs(struct tg_acct_figs *f)
{
    struct tg_acct_thread *t;
    memset(f, 0, sizeof(*f));
    pthread_mutex_lock(&tg_acct_lock);
    for (t = tg_acct_threads; t != NULL; t = t->next) {
        struct tg_acct_figs g;
        tg_thread_figs(t, &g);
        f->alloc_calls += g.alloc_calls;
        f->free_calls += g.free_calls;
        f->requested += g.requested;
        f->freed += g.freed;
    }
    pthread_mutex_unlock(&tg_acct_lock);
    /* Exact live bytes: frees made by the tracer count here but in no thread. */
    f->live = TG_LOAD(tg_acct_live);
}

/* d[key] = v, stealing V (which may be NULL after a failed constructor). */
static int
tg_dict_set_steal(PyObject *d, const char *key, PyObject *v)
{
    int r;
    if (v == NULL)
        return -1;
    r = PyDict_SetItemString(d, key, v);
    Py_DECREF(v);
    return r;
}

static PyObject *
tg_hist_list(_Atomic int64_t *h)
{
    PyObject *l = PyList_New(TG_ACCT_BINS);
    int i;
    if (l == NULL)
        return NULL;
    for (i = 0; i < TG_ACCT_BINS; i++) {
        PyObject *v = PyLong_FromLongLong((long long)TG_LOAD(h[i]));
        if (v == NULL) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, i, v);
    }
    return l;
}

static PyObject *
tg_figs_dict(const struct tg_acct_figs *f, int64_t peak)
{
    return Py_BuildValue("{s:L,s:L,s:L,s:L,s:L,s:L}",
                         "total_requested_bytes", (long long)f->requested,
                         "freed_bytes", (long long)f->freed,
                         "alloc_calls", (long long)f->alloc_calls,
                         "free_calls", (long long)f->free_calls,
                         "live_bytes", (long long)f->live,
                         "peak_bytes", (long long)peak);
}

/* Name of thread T from the recorder's log (new str), or "native-<id>". */
static PyObject *
tg_thread_name(struct tg_recorder *r, struct tg_acct_thread *t, PyObject **base)
{
    size_t i;
    *base = NULL;
    if (r != NULL) {
        pthread_mutex_lock(&r->reg_lock);
        for (i = r->n_log; i-- > 0;) {
            if (r->log[i].ident == t->ident && r->log[i].native_id == t->native_id) {
                PyObject *n = PyUnicode_DecodeUTF8(r->log[i].name, (Py_ssize_t)r->log[i].name_len,
                                                   "surrogateescape");
                *base = PyUnicode_FromString(r->log[i].base);
                pthread_mutex_unlock(&r->reg_lock);
                return n;
            }
        }
        pthread_mutex_unlock(&r->reg_lock);
    }
    *base = PyUnicode_FromFormat("native-%lu", t->native_id);
    return PyUnicode_FromFormat("native-%lu", t->native_id);
}

static PyObject *
tg_acct_figures_impl(struct tg_recorder *r)
{
    struct tg_acct_figs pf;
    struct tg_acct_thread *t;
    PyObject *res = NULL, *proc = NULL, *threads = NULL, *ha = NULL, *hf = NULL;
    int64_t pha[TG_ACCT_BINS], phf[TG_ACCT_BINS];
    int i;

    memset(pha, 0, sizeof(pha));
    memset(phf, 0, sizeof(phf));
    tg_process_figs(&pf);
    threads = PyList_New(0);
    if (threads == NULL)
        goto done;
    pthread_mutex_lock(&tg_acct_lock);
    t = tg_acct_threads;
    pthread_mutex_unlock(&tg_acct_lock);
    /* The list only grows at its head: walking from a read head is safe. */
    for (; t != NULL; t = t->next) {
        struct tg_acct_figs f;
        PyObject *d, *name, *base, *a, *b;
        tg_thread_figs(t, &f);
        for (i = 0; i < TG_ACCT_BINS; i++) {
            pha[i] += TG_LOAD(t->hist_alloc[i]);
            phf[i] += TG_LOAD(t->hist_free[i]);
        }
        if (f.alloc_calls == 0 && f.free_calls == 0)
            continue;
        d = tg_figs_dict(&f, TG_LOAD(t->peak));
        name = tg_thread_name(r, t, &base);
        a = tg_hist_list(t->hist_alloc);
        b = tg_hist_list(t->hist_free);
        if (d == NULL || name == NULL || base == NULL || a == NULL || b == NULL
                || PyDict_SetItemString(d, "name", name) < 0
                || PyDict_SetItemString(d, "base", base) < 0
                || tg_dict_set_steal(d, "native_id", PyLong_FromUnsignedLong(t->native_id)) < 0
                || PyDict_SetItemString(d, "hist_alloc", a) < 0
                || PyDict_SetItemString(d, "hist_free", b) < 0
                || PyList_Append(threads, d) < 0) {
            Py_XDECREF(d);
            Py_XDECREF(name);
            Py_XDECREF(base);
            Py_XDECREF(a);
            Py_XDECREF(b);
            goto done;
        }
        Py_DECREF(d);
        Py_DECREF(name);
        Py_DECREF(base);
        Py_DECREF(a);
        Py_DECREF(b);
    }
    proc = tg_figs_dict(&pf, TG_LOAD(tg_acct_peak));
    if (proc == NULL)
        goto done;
    ha = PyList_New(TG_ACCT_BINS);
    hf = PyList_New(TG_ACCT_BINS);
    if (ha == NULL || hf == NULL)
        goto done;
    for (i = 0; i < TG_ACCT_BINS; i++) {
        PyList_SET_ITEM(ha, i, PyLong_FromLongLong((long long)pha[i]));
        PyList_SET_ITEM(hf, i, PyLong_FromLongLong((long long)phf[i]));
    }
    if (PyDict_SetItemString(proc, "hist_alloc", ha) < 0
            || PyDict_SetItemString(proc, "hist_free", hf) < 0)
        goto done;
    res = Py_BuildValue("{s:O,s:O,s:O,s:I,s:L}", "process", proc, "threads", threads,
                        "windows", tg_closed_windows ? tg_closed_windows : Py_None,
                        "snapshots", tg_acct_nsnap,
                        "sample_bytes", (long long)atomic_load(&tg_acct_sample));
done:
    Py_XDECREF(proc);
    Py_XDECREF(threads);
    Py_XDECREF(ha);
    Py_XDECREF(hf);
    return res;
}

/* --- windows (GIL) ----------------------------------------------------------- */

static long
tg_acct_window_open_impl(const char *name)
{
    struct tg_acct_window *w;
    int64_t live;

    if (!atomic_load(&tg_acct_on)) {
        PyErr_SetString(PyExc_RuntimeError, "allocation accounting is not on");
        return -1;
    }
    if (tg_nwindows == TG_MAX_WINDOWS) {
        PyErr_SetString(PyExc_RuntimeError, "too many open windows");
        return -1;
    }
    w = &tg_windows[tg_nwindows];
    w->name = strdup(name);
    if (w->name == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    w->id = ++tg_window_ids;
    w->thread = tg_acct_self();
    if (w->thread != NULL)
        tg_thread_figs(w->thread, &w->thr0);
    else
        memset(&w->thr0, 0, sizeof(w->thr0));
    tg_process_figs(&w->proc0);
    w->t0 = tg_acct_monotonic();
    /* The register now tracks the peak since this open; what it held (the peak
     * since the previous open) is kept for the windows still open.  Under the
     * hooks' lock: they update the register with a load and a store. */
    tg_acct_spin_lock();
    live = TG_LOAD(tg_acct_live);
    w->saved_peak = TG_LOAD(tg_acct_win_peak);
    atomic_store_explicit(&tg_acct_win_peak, live, TG_RELAXED);
    tg_nwindows++;
    atomic_store_explicit(&tg_acct_nwin, tg_nwindows, TG_RELAXED);
    tg_acct_spin_unlock();
    return w->id;
}

static PyObject *
tg_acct_window_close_impl(long id)
{
    struct tg_acct_window *w = NULL;
    struct tg_acct_figs p1, t1, pd, td;
    int64_t peak;
    int i, k;
    PyObject *d = NULL, *pdict = NULL, *tdict = NULL;

    for (i = 0; i < tg_nwindows; i++)
        if (tg_windows[i].id == id)
            w = &tg_windows[i];
    if (w == NULL) {
        PyErr_SetString(PyExc_ValueError, "no such open window");
        return NULL;
    }
    k = (int)(w - tg_windows);
    /* Peak over [open, now]: the register (since the latest open) and what each
     * later-opened window saved (the stretch before its own open). */
    tg_acct_spin_lock();
    peak = TG_LOAD(tg_acct_win_peak);
    for (i = k + 1; i < tg_nwindows; i++)
        if (tg_windows[i].saved_peak > peak)
            peak = tg_windows[i].saved_peak;
    /* Removing window k: its stretch merges into the next one's (or the register). */
    if (k + 1 < tg_nwindows) {
        if (w->saved_peak > tg_windows[k + 1].saved_peak)
            tg_windows[k + 1].saved_peak = w->saved_peak;
    } else if (w->saved_peak > TG_LOAD(tg_acct_win_peak)) {
        atomic_store_explicit(&tg_acct_win_peak, w->saved_peak, TG_RELAXED);
    }
    tg_acct_spin_unlock();
    tg_process_figs(&p1);
    if (w->thread != NULL)
        tg_thread_figs(w->thread, &t1);
    else
        memset(&t1, 0, sizeof(t1));
    pd.alloc_calls = p1.alloc_calls - w->proc0.alloc_calls;
    pd.free_calls = p1.free_calls - w->proc0.free_calls;
    pd.requested = p1.requested - w->proc0.requested;
    pd.freed = p1.freed - w->proc0.freed;
    pd.live = p1.live - w->proc0.live;
    td.alloc_calls = t1.alloc_calls - w->thr0.alloc_calls;
    td.free_calls = t1.free_calls - w->thr0.free_calls;
    td.requested = t1.requested - w->thr0.requested;
    td.freed = t1.freed - w->thr0.freed;
    td.live = t1.live - w->thr0.live;
    pdict = tg_figs_dict(&pd, peak);
    tdict = tg_figs_dict(&td, 0);
    if (pdict == NULL || tdict == NULL)
        goto done;
    if (tg_dict_set_steal(pdict, "live_bytes_at_start", PyLong_FromLongLong(w->proc0.live)) < 0
            || tg_dict_set_steal(pdict, "peak_above_start_bytes",
                                 PyLong_FromLongLong(peak - w->proc0.live)) < 0)
        goto done;
    PyDict_DelItemString(tdict, "peak_bytes");
    d = Py_BuildValue("{s:s,s:d,s:O,s:O}", "name", w->name,
                      "seconds", tg_acct_monotonic() - w->t0, "process", pdict, "thread", tdict);
    if (d != NULL && tg_closed_windows != NULL && PyList_Append(tg_closed_windows, d) < 0)
        Py_CLEAR(d);
done:
    Py_XDECREF(pdict);
    Py_XDECREF(tdict);
    free(w->name);
    memmove(w, w + 1, (size_t)(tg_nwindows - k - 1) * sizeof(*w));
    tg_nwindows--;
    atomic_store(&tg_acct_nwin, tg_nwindows);
    return d;
}

/* --- start / stop ------------------------------------------------------------ */

static void
tg_acct_free_all(void)
{
    struct tg_acct_thread *t, *next;
    size_t i;

    pthread_mutex_lock(&tg_acct_lock);
    t = tg_acct_threads;
    tg_acct_threads = NULL;
    tg_acct_nthreads = 0;
    pthread_mutex_unlock(&tg_acct_lock);
    for (; t != NULL; t = next) {
        next = t->next;
        free(t->stack);
        free(t);
    }
    for (i = 1; i < tg_nfuncs; i++)
        free(tg_funcs[i].file);
    free(tg_funcs);
    free(tg_func_hash);
    free(tg_nodes);
    free(tg_node_hash);
    tg_funcs = NULL;
    tg_func_hash = NULL;
    tg_nodes = NULL;
    tg_node_hash = NULL;
    tg_nfuncs = tg_funcs_cap = tg_nnodes = tg_nodes_cap = 0;
    memset(tg_fcache, 0, sizeof(tg_fcache));
    tg_func_hash_mask = tg_node_hash_mask = 0;
    for (i = 0; i < TG_SITE_NCHUNKS; i++) {
        free(atomic_load(&tg_site_chunks[i]));
        atomic_store(&tg_site_chunks[i], NULL);
    }
    for (i = 0; i < (size_t)tg_nwindows; i++)
        free(tg_windows[i].name);
    tg_nwindows = 0;
    atomic_store(&tg_acct_nwin, 0);
    Py_CLEAR(tg_closed_windows);
    Py_CLEAR(tg_sched.code);
    memset(&tg_sched, 0, sizeof(tg_sched));
}

/* The sampling seed: THREADGRAPH_SAMPLE_SEED (a decimal or 0x number) for
 * reproducible runs, else fresh from the clock and the pid. */
static uint64_t
tg_acct_pick_seed(void)
{
    const char *e = getenv("THREADGRAPH_SAMPLE_SEED");
    struct timespec ts;
    if (e != NULL && *e != '\0') {
        char *end;
        unsigned long long v = strtoull(e, &end, 0);
        if (*end == '\0')
            return (uint64_t)v;
    }
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 32);
}

int
tg_acct_start(const char *outdir, int compress, long long sample_bytes,
              struct tg_recorder *r)
{
    static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

    if (sample_bytes < 0 || sample_bytes > TG_ACCT_SAMPLE_MAX) {
        PyErr_Format(PyExc_ValueError, "sample_bytes must be between 0 and %lld",
                     (long long)TG_ACCT_SAMPLE_MAX);
        return -1;
    }
    pthread_once(&atfork_once, tg_acct_atfork_register);
    /* States of the last run are freed only now: a raw-domain hook that was
     * still running when it ended may have been writing into them. */
    tg_acct_free_all();
    free(tg_acct_outdir);
    tg_acct_outdir = strdup(outdir);
    tg_closed_windows = PyList_New(0);
    if (tg_acct_outdir == NULL || tg_closed_windows == NULL
            || tg_site_chunk_ensure(TG_SITE_NONE) < 0 || tg_site_chunk_ensure(TG_SITE_FULL) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    tg_acct_compress = compress;
    tg_acct_rec = r;
    clock_gettime(CLOCK_REALTIME, &tg_acct_t0);
    tg_acct_nsnap = 0;
    tg_acct_sched_err[0] = '\0';
    atomic_store(&tg_acct_live, 0);
    atomic_store(&tg_acct_peak, 0);
    atomic_store(&tg_acct_win_peak, 0);
    tg_peak_seq = 1;   /* site stamps start at 0: "unchanged since the peak" */
    tg_peak_ns = 0;
    tg_acct_seed = tg_acct_pick_seed();
    atomic_store(&tg_acct_sample, (int64_t)sample_bytes);
    atomic_fetch_add(&tg_acct_gen, 1);
    tg_acct_had_run = 1;
    /* The enabling thread's root now, so that its allocations outside recorded
     * calls are its own from the start (other threads get theirs at their first
     * recorded call). */
    {
        int busy = tg_tls.busy;
        struct tg_acct_thread *t;
        tg_tls.busy |= TG_BUSY_TRACER;
        t = tg_acct_self();
        if (t != NULL)
            t->cur_site = tg_acct_root(t);
        tg_tls.busy = busy;
    }
    atomic_store(&tg_acct_on, 1);
    return 0;
}

void
tg_acct_stop(void)
{
    atomic_store(&tg_acct_on, 0);
    tg_sched.active = 0;
}

void
tg_acct_fork_child(void)
{
    tg_acct_rec = NULL;
    atomic_store(&tg_acct_on, 0);
    tg_sched.active = 0;
    tg_acct_had_run = 0;
}

int
tg_acct_was_on(void)
{
    return tg_acct_had_run;
}

int
tg_acct_finish(struct tg_recorder *r)
{
    PyObject *p;
    tg_acct_rec = r;
    while (tg_nwindows > 0) {  /* windows left open end with the run */
        p = tg_acct_window_close(tg_windows[tg_nwindows - 1].id);
        Py_XDECREF(p);
        PyErr_Clear();
    }
    p = tg_acct_snapshot(TG_SNAP_FINAL_LABEL);
    if (p != NULL) {
        Py_DECREF(p);
        p = tg_acct_snapshot_peak();
    }
    tg_acct_rec = NULL;  /* R may go away after the run */
    if (p == NULL)
        return -1;
    Py_DECREF(p);
    if (tg_acct_sched_err[0] != '\0') {
        PyErr_SetString(PyExc_RuntimeError, tg_acct_sched_err);
        return -1;
    }
    return 0;
}

long
tg_acct_window_open(const char *name)
{
    /* What we allocate to report is the tracer's, not the program's. */
    int busy = tg_tls.busy;
    long res;
    tg_tls.busy |= TG_BUSY_TRACER;
    res = tg_acct_window_open_impl(name);
    tg_tls.busy = busy;
    return res;
}

PyObject *
tg_acct_window_close(long id)
{
    /* What we allocate to report is the tracer's, not the program's. */
    int busy = tg_tls.busy;
    PyObject * res;
    tg_tls.busy |= TG_BUSY_TRACER;
    res = tg_acct_window_close_impl(id);
    tg_tls.busy = busy;
    return res;
}

PyObject *
tg_acct_figures(struct tg_recorder *r)
{
    /* What we allocate to report is the tracer's, not the program's. */
    int busy = tg_tls.busy;
    PyObject * res;
    tg_tls.busy |= TG_BUSY_TRACER;
    res = tg_acct_figures_impl(r);
    tg_tls.busy = busy;
    return res;
}
