/*
 * acct_state.h - allocation accounting's runtime state (one struct tg_acct,
 * each field saying what protects it) and the hooks that update it: the
 * allocator hooks' tg_acct_alloc / tg_acct_free and the profile function's
 * tg_acct_push / tg_acct_pop (docs/accounting.md).
 *
 * Counters:
 *  - per thread: a struct tg_acct_thread created by the thread on its first
 *    counted allocation (malloc, never PyMem), reached through a thread-local
 *    pointer and listed in tg_acct.threads.  Only its thread writes it (plain
 *    relaxed load + store, no lock prefix); summaries read it with relaxed loads.
 *    States are never freed during a run, so threads that ended keep their
 *    figures ("retired" by construction); all are freed at the next start
 *    (an aggregate run frees a folded thread's open-calls stack and recycles
 *    its nodes, acct_recycle.h; the state itself stays).
 *  - process: live bytes, its peak and the window peak, under the spin lock;
 *    totals are sums over the thread states.
 *  - sites (acct_sites.h): nodes of each thread's calling-context tree,
 *    interned with the GIL in the profile function; the hook reads the thread's
 *    current node id (one thread-local read).  Each node has four counters in
 *    fixed chunks that never move, because raw-domain hooks update them without
 *    the GIL from any thread.  Shared counters rather than per-thread arrays: a
 *    snapshot then needs no merge and a thread that ends needs no fold.
 * A block's site id travels in its pointer-table word (acct_sites.h), so a free
 * on any thread credits the site that allocated it.
 *
 * Live at the peak (exact): every hook updates the process live bytes and the
 * site counters under one short spin lock (tg_acct.spin), so that the hooks of
 * all three domains, with or without the GIL, form one sequence of states.  When
 * an allocation takes the live bytes above the peak, the peak's sequence number
 * goes up; each site keeps, besides its counters, a copy of them stamped with the
 * sequence number it was taken at, renewed on the first change after a new peak.
 * A site whose stamp is not the current sequence number has not changed since the
 * peak; otherwise its copy holds its counters at the peak.  O(1) per hook, no
 * walk at the peak.  The lock is never held across a call that can allocate.
 *
 * Sampling (sample_bytes=N, acct_sample.h): only sampled allocations are given a
 * site (with an unbiased weight); the others take the site id 0, "unattributed",
 * which has no counters.  Thread and process figures stay exact.
 */
#ifndef TG_ACCT_STATE_H
#define TG_ACCT_STATE_H

#include "tg_compat.h"
#include "acct_sample.h"
#include "acct_sites.h"
#include "acct_when.h"
#include "acct_recycle.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#pragma GCC visibility push(hidden)

struct tg_thread_table;

/* Power-of-two size bins: bin b holds sizes with bit length b (0 for size 0,
 * 1 for 1, 2 for 2..3, ..., 21 for 1 MiB..2 MiB-1). */
#define TG_ACCT_BINS 65

/* The histogram bin of SIZE (TG_ACCT_BINS). */
static inline int
tg_acct_bin(size_t size)
{
    return size == 0 ? 0 : 64 - __builtin_clzll((unsigned long long)size);
}

/* tg_acct_bin of a SIZE known not to be 0 (the hooks' light paths leave size
 * 0 to the general path): a bit scan, no test. */
static inline unsigned
tg_acct_bin_nz(size_t size)
{
    return 64u - (unsigned)__builtin_clzll((unsigned long long)size);
}

/* Whether accounting is on for this run; written with the GIL at enable and
 * disable, read by the hooks (relaxed: a hook racing with the switch either
 * counts or does not, both are safe).  Kept out of struct tg_acct: the hooks'
 * first test, read by the hook files with one RIP-relative load. */
extern _Atomic int tg_acct_on __attribute__((visibility("hidden")));

/* Sampled mode's light paths (hook_count.h) may run on a thread whose
 * accounting state's generation (tg_tls.acct_gen) equals this: tg_acct.gen
 * while accounting is on in sampled mode, TG_ACCT_NO_GEN (which no state has)
 * otherwise.  One compare then stands for "accounting on, sampled mode, the
 * thread's state current" (it was three tests and a NULL test, in the hooks of
 * every allocation and free).  Written with the GIL at start (after everything
 * the light paths read is set) and at stop and in a forked child (before
 * anything else); relaxed, as tg_acct_on. */
#define TG_ACCT_NO_GEN UINT64_MAX
/* tg_tls.acct_gen of a thread whose exit took its state away
 * (tg_acct_thread_exit): no run's generation, nor TG_ACCT_NO_GEN, so that no
 * hook finds a state, and tg_acct_self makes none (late hooks of the thread's
 * own teardown count in no thread and at no site of it). */
#define TG_ACCT_EXITED_GEN (UINT64_MAX - 1)
extern _Atomic uint64_t tg_acct_light_gen __attribute__((visibility("hidden")));

#define TG_RELAXED memory_order_relaxed
/* Owner-only update of a counter that other threads may read. */
#define TG_OWN_ADD(x, v) \
    atomic_store_explicit(&(x), atomic_load_explicit(&(x), TG_RELAXED) + (v), TG_RELAXED)
#define TG_LOAD(x) atomic_load_explicit(&(x), TG_RELAXED)
/* TG_OWN_ADD on the hot paths (the allocator hooks' light paths, the
 * recorder's record counts).  On x86-64 one add to memory: not locked, its
 * store is one aligned 8-byte store as TG_OWN_ADD's is, so a relaxed load on
 * another thread sees the old or the new value, never a mix; C's atomics can
 * say this only as a load, an add and a store.  Elsewhere, and under
 * ThreadSanitizer (which does not see into asm), TG_OWN_ADD. */
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define TG_HOOK_OWN_ADD(x, v) \
    __asm__ __volatile__("addq %1, %0" : "+m"(*(int64_t *)&(x)) : "er"((int64_t)(v)))
#else
#define TG_HOOK_OWN_ADD(x, v) TG_OWN_ADD(x, v)
#endif

/* A thread's counters and calling-context stack. */
struct tg_acct_thread {
    struct tg_acct_thread *next;       /* tg_acct.threads link; tg_acct.lock */
    unsigned long ident;               /* pthread id; immutable */
    unsigned long native_id;           /* OS thread id; immutable */
    _Atomic int64_t requested;         /* bytes requested by its allocations;
                                        * owner writes, anyone reads (relaxed) */
    _Atomic int64_t freed;             /* bytes of the blocks it freed */
    _Atomic int64_t peak;              /* highest requested - freed seen */
    _Atomic int64_t hist_alloc[TG_ACCT_BINS];  /* requested sizes; their sum is
                                                * the allocation calls */
    _Atomic int64_t hist_free[TG_ACCT_BINS];   /* freed sizes; their sum is the
                                                * free calls */
    uint32_t ix;                       /* index in the run's thread list; immutable */
    uint32_t cur_site;                 /* node of new allocations; owner only */
    uint32_t root;                     /* the thread's "no python frame" node, 0
                                        * until its first recorded call; owner (GIL) */
    uint32_t *stack;                   /* nodes of the open recorded calls; owner (GIL) */
    size_t depth, cap;                 /* owner only */
    struct tg_acct_sampler sampler;    /* sample_bytes mode; owner only */
    /* The running states' list, which tg_acct_live_now sums: a state leaves it
     * when its thread exits (tg_acct.ended_live then holds its last figure).
     * tg_acct.lock. */
    struct tg_acct_thread *run_next, *run_prev;
    int ended;                         /* its thread exited; tg_acct.lock */
    /* tg_acct.ended's link: an aggregate run's exited threads not yet folded
     * (acct_recycle.h); tg_acct.lock.  IN_ENDED: on that list; tg_acct.lock. */
    struct tg_acct_thread *ended_next;
    int in_ended;
    int64_t when_next;                 /* thread>SIZE: next level due a snapshot
                                        * (0: the limit; acct_when.h); owner only */
    int when_pending;                  /* live, rss: due when this thread could
                                        * not write them (no GIL): tried again at
                                        * its next allocation; owner only */
};

/* Cross-thread frees: the bytes and blocks allocated in one thread and freed
 * in another, per (allocating thread, freeing thread).  A block's allocating
 * thread is its site's (struct tg_acct_site_ctr tix1): blocks without a thread
 * (TG_SITE_NOTHREAD, TG_SITE_FULL, and under sampling the unsampled ones,
 * TG_SITE_NONE) are not paired; sampled blocks count their weight, as at their
 * site.  A fixed open-addressing table made at start, so that the free hook
 * never allocates; a free in the allocating thread costs one compare. */
#define TG_ACCT_PAIRS 4096                 /* a power of two */
struct tg_acct_pair {
    uint32_t a1;                           /* allocating thread ix + 1; 0: empty slot */
    uint32_t f;                            /* freeing thread ix */
    int64_t bytes, count;                  /* count fixed-point (TG_ACCT_CNT_ONE) */
};

/* Figures of a thread or of the process. */
struct tg_acct_figs {
    int64_t alloc_calls, free_calls, requested, freed, live;
};

/* An open window (acct_py.h builds its figures into a dict at close). */
#define TG_MAX_WINDOWS 64
struct tg_acct_window {
    long id;
    char *name;
    struct tg_acct_thread *thread;     /* opener's state (may be NULL) */
    struct tg_acct_figs proc0, thr0;   /* figures at open */
    int64_t saved_peak;                /* win_peak register before our reset */
    double t0;
};

/* Periodic snapshots (acct_schedule.h). */
struct tg_acct_sched {
    int active;
    long start, stop, every;
    long next;                  /* next count (calls or milliseconds) that snapshots */
    PyObject *code;             /* strong ref, or NULL for seconds */
    long calls;                 /* calls of code seen */
    double t0;                  /* monotonic seconds at schedule */
};

/* Accounting's whole runtime state.  "GIL": only touched by a thread holding
 * the GIL (the profile function, enable/disable, the binding's methods).
 * "spin": written under .spin (load + store), readable anywhere relaxed.
 * "atomic": relaxed atomics written with the GIL, read by any hook. */
struct tg_acct {
    /* Sites: interning with the GIL, counters under spin (acct_sites.h).
     * First, so that the hooks reach its counter chunks at offset 0. */
    struct tg_acct_sites sites;

    /* Run generation: a thread's state is valid iff its TLS copy equals it.
     * atomic (bumped with the GIL at start). */
    _Atomic uint64_t gen;
    /* Guards .threads and .nthreads (appends from hooks on any thread, reads
     * with the GIL).  The list only grows at its head during a run, so a reader
     * may walk it from a head read under the lock. */
    pthread_mutex_t lock;
    struct tg_acct_thread *threads;    /* .lock */
    uint32_t nthreads;                 /* ix of the next state; .lock */
    /* The states whose thread still runs (struct tg_acct_thread run_next), and
     * requested - freed of those whose thread exited, at its exit (a thread
     * that exited allocates and frees no more: its figure is final).  So
     * sampled mode's live bytes (tg_acct_live_now), read at every sample, are a
     * walk of the running threads, not of every thread the run has seen.
     * .lock; lock_gen is the run's generation, changed under .lock (NO_GEN
     * from the moment the states are freed), so that a thread's exit knows
     * whether its state is still there. */
    struct tg_acct_thread *running;
    int64_t ended_live;
    uint64_t lock_gen;
    /* The states whose thread exited and which no fold has taken yet
     * (struct tg_acct_thread ended_next), newest first, so that an aggregate
     * run's fold finds the state of the thread it folds among a few
     * (acct_recycle.h) and not among every thread of the run.  .lock. */
    struct tg_acct_thread *ended;
    /* An aggregate run's ended threads folded into their family
     * (acct_recycle.h): their nodes recycled.  GIL. */
    struct tg_acct_fold fold;

    /* The hooks' lock: orders every change of the process live bytes, the peak
     * registers and the site counters (see the top of the file).  A
     * test-and-set spin lock that yields the CPU after a short spin: it is held
     * for a few dozen instructions, by a GIL holder or a raw-domain hook
     * without the GIL.  Nothing that can allocate runs under it. */
    _Atomic int spin;
    _Atomic int64_t live;              /* process live bytes; spin */
    _Atomic int64_t peak;              /* their highest value; spin */
    _Atomic int64_t win_peak;          /* highest since the latest window open; spin */
    _Atomic int nwin;                  /* open windows (hooks skip win_peak at 0); spin */
    uint64_t peak_seq;                 /* bumped at each new peak, from 1; spin */
    int64_t peak_ns;                   /* when the peak was reached (CLOCK_REALTIME); spin */

    /* Sampling: mean bytes between samples (0: every allocation is attributed),
     * atomic, and the seed of the per-thread generators (written with the GIL
     * at start before accounting is switched on, then read-only). */
    _Atomic int64_t sample;
    uint64_t seed;
    /* Sampled mode (sampled.h): the site of a sampled allocation, read from the
     * thread's frames, or NULL when sites are the calling context the profile
     * function keeps (tg_acct_push).  Written with the GIL at start before
     * accounting is switched on, then read-only. */
    uint32_t (*stack_site)(struct tg_acct_thread *t);
    /* Sampled mode keeps no process counter on the hooks' common path: an
     * allocation or free that is not sampled touches its thread's counters
     * only (no lock, no shared line), and the process's live bytes are the sum
     * over the threads (tg_acct_live_now) less what the tracer freed of the
     * program's blocks, counted here (relaxed atomic).  Its peak is then
     * looked for at the sampled allocations ("Sampled mode" in docs/api.md). */
    _Atomic int64_t tracer_freed;

    /* Cross-thread frees (struct tg_acct_pair).  The array is made with the GIL
     * at start, before accounting is switched on (NULL if out of memory: every
     * pair then counts as lost), and freed at the next start; its slots and
     * the lost figures (pairs that found no free slot) are written and read
     * under .spin. */
    struct tg_acct_pair *pairs;
    int64_t pairs_lost_bytes, pairs_lost_count;

    /* Run configuration and bookkeeping; GIL. */
    struct tg_thread_table *thread_table; /* the recorder's (thread.h): names
                                        * threads in snapshots; NULL outside
                                        * start..finish and in a forked child */
    struct timespec t0;                /* wall-clock start of the run */
    int had_run;                       /* whether the last run had accounting */
    char *outdir;
    int compress;
    unsigned nsnap;                    /* snapshots written this run */

    /* Threshold snapshots (acct_when.h; each field says what protects it). */
    struct tg_acct_when when;

    /* Periodic snapshots and their first failure ("" if none: the profile
     * function never raises, so disable() reports it); GIL. */
    struct tg_acct_sched sched;
    char sched_err[512];

    /* Windows; GIL (win_peak and nwin above are the hooks' part). */
    struct tg_acct_window windows[TG_MAX_WINDOWS];
    int nwindows;
    long window_ids;
    PyObject *closed_windows;          /* list of dicts for summary.json */
};

extern struct tg_acct tg_acct;

/* --- the hooks (acct_state.c) ------------------------------------------------ */

/* Hooks (any thread, no GIL needed, never allocate through Python).
 * tg_acct_alloc counts an allocation of SIZE bytes by the calling thread at its
 * current site and returns the pointer-table word to store for the block.
 * tg_acct_free counts the release of a block whose table word is WORD and
 * returns its size; COUNT_THREAD is 0 when the tracer itself frees the block
 * (the site and process still lose it). */
uint64_t tg_acct_alloc(size_t size);
size_t tg_acct_free(uint64_t word, int count_thread);

/* Profile function (GIL): a recorded call was opened / closed. */
void tg_acct_push(const char *file, size_t file_len, long line, const char *func,
                  size_t func_len, int esc);
void tg_acct_pop(void);

/* Whether thread T's new peak OWN is due a threshold snapshot (acct_when.h):
 * one relaxed load when no thread>SIZE condition is set.  T's owner. */
static inline int
tg_acct_when_thread_due(struct tg_acct_thread *t, int64_t own)
{
    int64_t lim = atomic_load_explicit(&tg_acct.when.limit[TG_WHEN_THREAD], memory_order_relaxed);
    return lim != 0 && own > (t->when_next > lim ? t->when_next : lim);
}

/* The calling thread's state for this run, created on first use; NULL if out
 * of memory.  Any thread, no GIL needed: only malloc and a mutex. */
struct tg_acct_thread *tg_acct_self(void);
/* Make the pthread key through which a thread's exit takes its state off the
 * running list (struct tg_acct running); once per process, at start (GIL). */
void tg_acct_running_init(void);
/* Thread T's root node ("no python frame"), made on first use (GIL). */
uint32_t tg_acct_root(struct tg_acct_thread *t);

/* Thread T's figures now; the process's (sums over the threads, the exact
 * live bytes).  Any thread. */
void tg_acct_thread_figs(struct tg_acct_thread *t, struct tg_acct_figs *f);
void tg_acct_process_figs(struct tg_acct_figs *f);

/* The process's live bytes now: the exact counter, or in sampled mode the sum
 * over the threads (see tracer_freed).  Any thread, not under the spin lock
 * (it takes tg_acct.lock). */
int64_t tg_acct_live_now(void);
/* The running thread IDENT's own bytes (requested less freed) into *OWN: 0,
 * or -1 when no running state has that ident.  Takes tg_acct.lock. */
int tg_acct_thread_own(unsigned long ident, int64_t *own);

/* Sampled mode, at the end of a run (GIL, hooks off): the process's peak is
 * at least its live bytes now (between samples it is not looked for). */
void tg_acct_peak_settle(void);

/* Copies the cross-thread pairs into OUT (TG_ACCT_PAIRS slots, empty ones
 * with a1 0) and the lost figures; takes the spin lock (allocates nothing).
 * Any thread. */
void tg_acct_pairs_copy(struct tg_acct_pair *out, int64_t *lost_bytes, int64_t *lost_count);

/* Monotonic seconds. */
double tg_acct_monotonic(void);

/* The spin lock (see struct tg_acct). */
void tg_acct_spin_wait(void) __attribute__((noinline, cold));

static inline void
tg_acct_spin_lock(void)
{
    if (atomic_exchange_explicit(&tg_acct.spin, 1, memory_order_acquire))
        tg_acct_spin_wait();
}

static inline void
tg_acct_spin_unlock(void)
{
    atomic_store_explicit(&tg_acct.spin, 0, memory_order_release);
}

#pragma GCC visibility pop

#endif /* TG_ACCT_STATE_H */
