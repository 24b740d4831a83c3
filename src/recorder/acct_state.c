/*
 * acct_state.c - accounting's runtime state and the hooks that count into it
 * (see acct_state.h).  The allocator hooks' tg_acct_alloc / tg_acct_free and
 * the profile function's tg_acct_push / tg_acct_pop live here with
 * tg_acct_self, so that their common paths make the same calls as before the
 * split (the interning's fast paths are inline in acct_sites.h).
 */
#include "acct_state.h"
#include "acct_schedule.h"
#include "tls.h"
#include "clock.h"

#include <stdlib.h>
#include <string.h>

_Atomic int tg_acct_on;
_Atomic uint64_t tg_acct_light_gen = TG_ACCT_NO_GEN;

struct tg_acct tg_acct = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .lock_gen = TG_ACCT_NO_GEN,
};

/* A thread's exit (tg_acct_thread_exit) is seen through a pthread key whose
 * value is the thread's state; made once per process. */
static pthread_key_t tg_acct_exit_key;
static int tg_acct_exit_key_ok;
static pthread_once_t tg_acct_exit_once = PTHREAD_ONCE_INIT;

/* The pthread key's destructor: the calling thread is exiting (its
 * interpreter state is gone, its Python allocations are over).  If its state
 * P is the current run's, its requested - freed moves to tg_acct.ended_live
 * and the state leaves the running list; the state itself stays (its figures
 * are the summary's).  A later allocation hook of this thread (none of
 * Python's: another library's thread-exit code with native=True) counts in
 * the process only (TG_ACCT_EXITED_GEN). */
static void
tg_acct_thread_exit(void *p)
{
    struct tg_acct_thread *t = p;

    pthread_mutex_lock(&tg_acct.lock);
    /* P is still allocated only if this thread's state is of the run now
     * current: the states are freed with lock_gen set to NO_GEN first. */
    if (t != NULL && tg_tls.acct == t && tg_tls.acct_gen == tg_acct.lock_gen && !t->ended) {
        tg_acct.ended_live += TG_LOAD(t->requested) - TG_LOAD(t->freed);
        if (t->run_prev != NULL)
            t->run_prev->run_next = t->run_next;
        else
            tg_acct.running = t->run_next;
        if (t->run_next != NULL)
            t->run_next->run_prev = t->run_prev;
        t->run_next = t->run_prev = NULL;
        t->ended = 1;
        /* an aggregate run's fold may now recycle its nodes (acct_recycle.h) */
        t->ended_next = tg_acct.ended;
        tg_acct.ended = t;
        t->in_ended = 1;
        /* No hook of this thread touches the state again: its teardown's
         * late allocations (another library's thread-exit code, with
         * native=True) count in the process only, at no site of it, so
         * that its nodes hold what they hold now (tls.h; the fast paths
         * compare acct_gen and fast_gen, neither of which matches now). */
        tg_tls.acct = NULL;
        tg_tls.acct_gen = TG_ACCT_EXITED_GEN;
        tg_tls.fast_gen = 0;
    }
    pthread_mutex_unlock(&tg_acct.lock);
}

static void
tg_acct_exit_key_make(void)
{
    tg_acct_exit_key_ok = pthread_key_create(&tg_acct_exit_key, tg_acct_thread_exit) == 0;
}

void
tg_acct_running_init(void)
{
    pthread_once(&tg_acct_exit_once, tg_acct_exit_key_make);
}


void
tg_acct_spin_wait(void)
{
    unsigned spins = 0;
    do {
        while (atomic_load_explicit(&tg_acct.spin, TG_RELAXED)) {
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
    } while (atomic_exchange_explicit(&tg_acct.spin, 1, memory_order_acquire));
}

double
tg_acct_monotonic(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

struct tg_acct_thread *
tg_acct_self(void)
{
    uint64_t gen = atomic_load_explicit(&tg_acct.gen, TG_RELAXED);
    struct tg_acct_thread *t;

    if (tg_tls.acct_gen == gen && tg_tls.acct != NULL)
        return tg_tls.acct;
    if (tg_tls.acct_gen == TG_ACCT_EXITED_GEN)
        return NULL;  /* its exit took its state (tg_acct_thread_exit) */
    t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->ident = PyThread_get_thread_ident();
    t->native_id = PyThread_get_thread_native_id();
    t->cur_site = TG_SITE_NOTHREAD;
    pthread_mutex_lock(&tg_acct.lock);
    t->ix = tg_acct.nthreads++;
    t->next = tg_acct.threads;
    tg_acct.threads = t;
    t->run_next = tg_acct.running;
    if (t->run_next != NULL)
        t->run_next->run_prev = t;
    tg_acct.running = t;
    pthread_mutex_unlock(&tg_acct.lock);
    /* Its exit takes it off the running list (without the key, it stays:
     * the live bytes stay exact, their sum walks it). */
    if (tg_acct_exit_key_ok)
        (void)pthread_setspecific(tg_acct_exit_key, t);
    {
        int64_t mean = atomic_load_explicit(&tg_acct.sample, TG_RELAXED);
        if (mean > 0)
            tg_acct_sampler_init(&t->sampler, tg_acct.seed, t->ix, mean);
    }
    tg_tls.acct = t;
    tg_tls.acct_gen = gen;
    return t;
}

/* --- hooks ------------------------------------------------------------------ */

/* Keep C's counters at the peak before its first change since the peak (see
 * acct_state.h).  tg_acct.spin held. */
static inline void
tg_site_touch_locked(struct tg_acct_site_ctr *c)
{
    if (c->stamp != tg_acct.peak_seq) {
        c->pk[0] = TG_LOAD(c->alloc_bytes);
        c->pk[1] = TG_LOAD(c->alloc_count);
        c->pk[2] = TG_LOAD(c->free_bytes);
        c->pk[3] = TG_LOAD(c->free_count);
        c->stamp = tg_acct.peak_seq;
    }
}

/* A new process peak of LIVE bytes (tg_acct.spin held): out of line, so that
 * the clock read does not weigh on the common path.  Returns the threshold
 * snapshots now due (acct_when.h). */
static int __attribute__((noinline))
tg_acct_new_peak_locked(int64_t live)
{
    atomic_store_explicit(&tg_acct.peak, live, TG_RELAXED);
    tg_acct.peak_seq++;
    tg_acct.peak_ns = tg_clock_now_ns();
    return tg_acct_when_peak_locked(live);
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
    int64_t live = 0, own = 0, wb = 0, wc = 0;
    int64_t mean = atomic_load_explicit(&tg_acct.sample, TG_RELAXED);
    int when = 0;  /* threshold snapshots due (acct_when.h), written after the lock */
    int light = tg_acct.stack_site != NULL;  /* sampled mode (see tracer_freed) */

    if (size > TG_ACCT_SIZE_MASK)  /* >= 16 TiB: counted at the mask (documented) */
        size = TG_ACCT_SIZE_MASK;
    if (t != NULL) {
        sid = t->cur_site;
        if (mean > 0)
            tg_acct_sampler_sync(&t->sampler, TG_LOAD(t->requested));
        TG_OWN_ADD(t->requested, (int64_t)size);
        t->sampler.light_room -= (int64_t)size;  /* see its comment */
        TG_OWN_ADD(t->hist_alloc[tg_acct_bin(size)], 1);
        own = TG_LOAD(t->requested) - TG_LOAD(t->freed);
        if (own > TG_LOAD(t->peak)) {
            atomic_store_explicit(&t->peak, own, TG_RELAXED);
            if (__builtin_expect(tg_acct_when_thread_due(t, own), 0))
                when = 1 << TG_WHEN_THREAD;
        }
        if (mean > 0 && !tg_acct_sampler_hit(&t->sampler, size, mean))
            sid = TG_SITE_NONE;
        else if (__builtin_expect(tg_acct.stack_site != NULL, 0))
            sid = tg_acct.stack_site(t);  /* sampled mode: its stack, now */
    } else if (mean > 0) {
        sid = TG_SITE_NONE;  /* no state, no sampler: the process figures only */
    }
    if (light) {
        /* Sampled mode: the thread's counters were all; a sampled block also
         * gives its site and the process's live bytes a look (see tracer_freed). */
        if (sid == TG_SITE_NONE)
            goto out;
        live = tg_acct_live_now();
    }
    if (sid != TG_SITE_NONE) {
        tg_acct_weight(size, mean, &wb, &wc);
        c = tg_sites_ctr(&tg_acct.sites, sid);
    }
    tg_acct_spin_lock();
    if (c != NULL) {
        /* The site first, then the peak: the allocation that makes a peak is
         * part of it. */
        tg_site_touch_locked(c);
        TG_OWN_ADD(c->alloc_bytes, wb);
        TG_OWN_ADD(c->alloc_count, wc);
    }
    if (!light)
        live = TG_LOAD(tg_acct.live) + (int64_t)size;
    atomic_store_explicit(&tg_acct.live, live, TG_RELAXED);
    if (live > TG_LOAD(tg_acct.peak))
        when |= tg_acct_new_peak_locked(live);
    if (TG_LOAD(tg_acct.nwin) && live > TG_LOAD(tg_acct.win_peak))
        atomic_store_explicit(&tg_acct.win_peak, live, TG_RELAXED);
    tg_acct_spin_unlock();
out:
    if (t != NULL && __builtin_expect(t->when_pending != 0, 0))
        when |= t->when_pending;  /* acct_when.h: due at an allocation without the GIL */
    if (__builtin_expect(when != 0, 0))
        tg_acct_when_fire(t, own, when);
    if (light && sid != TG_SITE_NONE)
        tg_acct_sched_sampled();  /* snapshot_every(seconds=True): no call sees it */
    return (uint64_t)size | ((uint64_t)sid << TG_ACCT_SIZE_BITS);
}

/* Counts a block of thread A1 - 1 freed by thread F (tg_acct.spin held): out
 * of line, off the common path of a free in the allocating thread. */
static void __attribute__((noinline))
tg_acct_pair_add_locked(uint32_t a1, uint32_t f, int64_t bytes, int64_t count)
{
    struct tg_acct_pair *p = tg_acct.pairs;
    uint64_t h = ((uint64_t)a1 << 32 | f) * 0x9E3779B97F4A7C15ull;
    size_t i, n;

    if (p != NULL) {
        for (i = (size_t)(h >> 52) & (TG_ACCT_PAIRS - 1), n = 0; n < TG_ACCT_PAIRS;
             i = (i + 1) & (TG_ACCT_PAIRS - 1), n++) {
            if (p[i].a1 == 0) {
                p[i].a1 = a1;
                p[i].f = f;
            }
            if (p[i].a1 == a1 && p[i].f == f) {
                p[i].bytes += bytes;
                p[i].count += count;
                return;
            }
        }
    }
    tg_acct.pairs_lost_bytes += bytes;
    tg_acct.pairs_lost_count += count;
}

void
tg_acct_pairs_copy(struct tg_acct_pair *out, int64_t *lost_bytes, int64_t *lost_count)
{
    tg_acct_spin_lock();
    if (tg_acct.pairs != NULL)
        memcpy(out, tg_acct.pairs, TG_ACCT_PAIRS * sizeof(*out));
    else
        memset(out, 0, TG_ACCT_PAIRS * sizeof(*out));
    *lost_bytes = tg_acct.pairs_lost_bytes;
    *lost_count = tg_acct.pairs_lost_count;
    tg_acct_spin_unlock();
}

size_t
tg_acct_free(uint64_t word, int count_thread)
{
    size_t size = TG_ACCT_ENTRY_SIZE(word);
    uint32_t sid = (uint32_t)(word >> TG_ACCT_SIZE_BITS);
    struct tg_acct_site_ctr *c = NULL;
    struct tg_acct_thread *t = NULL;  /* the freeing thread, when it counts */
    int64_t wb = 0, wc = 0;

    if (count_thread) {
        t = tg_acct_self();
        if (t != NULL) {
            TG_OWN_ADD(t->freed, (int64_t)size);
            TG_OWN_ADD(t->hist_free[tg_acct_bin(size)], 1);
        }
    }
    if (tg_acct.stack_site != NULL) {
        /* Sampled mode (see tracer_freed): the lock for a sampled block's site only. */
        if (!count_thread)
            atomic_fetch_add_explicit(&tg_acct.tracer_freed, (int64_t)size, TG_RELAXED);
        if (sid == TG_SITE_NONE)
            return size;
    }
    if (sid != TG_SITE_NONE) {
        tg_acct_weight(size, atomic_load_explicit(&tg_acct.sample, TG_RELAXED), &wb, &wc);
        c = tg_sites_ctr(&tg_acct.sites, sid);
    }
    tg_acct_spin_lock();
    if (c != NULL) {
        tg_site_touch_locked(c);
        TG_OWN_ADD(c->free_bytes, wb);
        TG_OWN_ADD(c->free_count, wc);
        /* a block of another thread (tix1 0: of no thread) */
        if (t != NULL && c->tix1 != t->ix + 1 && c->tix1 != 0)
            tg_acct_pair_add_locked(c->tix1, t->ix, wb, wc);
    }
    if (tg_acct.stack_site == NULL)
        atomic_store_explicit(&tg_acct.live, TG_LOAD(tg_acct.live) - (int64_t)size, TG_RELAXED);
    tg_acct_spin_unlock();
    return size;
}

void
tg_acct_peak_settle(void)
{
    int64_t live;

    if (tg_acct.stack_site == NULL)
        return;
    live = tg_acct_live_now();
    tg_acct_spin_lock();
    atomic_store_explicit(&tg_acct.live, live, TG_RELAXED);
    if (live > TG_LOAD(tg_acct.peak))
        (void)tg_acct_new_peak_locked(live);
    tg_acct_spin_unlock();
}

int64_t
tg_acct_live_now(void)
{
    struct tg_acct_thread *t;
    int64_t live;

    if (tg_acct.stack_site == NULL)
        return TG_LOAD(tg_acct.live);
    live = -TG_LOAD(tg_acct.tracer_freed);
    /* Under the lock: a thread's exit moves its figure from the list to
     * ended_live at one moment. */
    pthread_mutex_lock(&tg_acct.lock);
    live += tg_acct.ended_live;
    for (t = tg_acct.running; t != NULL; t = t->run_next)
        live += TG_LOAD(t->requested) - TG_LOAD(t->freed);
    pthread_mutex_unlock(&tg_acct.lock);
    return live;
}

int
tg_acct_thread_own(unsigned long ident, int64_t *own)
{
    struct tg_acct_thread *t;
    int rc = -1;

    pthread_mutex_lock(&tg_acct.lock);
    for (t = tg_acct.running; t != NULL; t = t->run_next)
        if (t->ident == ident) {
            *own = TG_LOAD(t->requested) - TG_LOAD(t->freed);
            rc = 0;
            break;
        }
    pthread_mutex_unlock(&tg_acct.lock);
    return rc;
}

/* --- the profile function's calls (GIL) -------------------------------------- */

uint32_t
tg_acct_root(struct tg_acct_thread *t)
{
    if (t->root == 0)
        t->root = tg_sites_root_add(&tg_acct.sites, t->ix);
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
    fid = tg_sites_func_intern(&tg_acct.sites, file, file_len, line, func, func_len, esc);
    /* Below a full table everything stays in the overflow node: a recursion
     * past the capacity costs no more nodes. */
    node = fid && parent != TG_SITE_FULL ? tg_sites_node_intern(&tg_acct.sites, parent, fid)
                                         : TG_SITE_FULL;
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

/* --- figures ------------------------------------------------------------------- */

void
tg_acct_thread_figs(struct tg_acct_thread *t, struct tg_acct_figs *f)
{
    int i;

    /* Each call counts in one bin of its histogram (no counter of their own:
     * one update less in every hook). */
    f->alloc_calls = f->free_calls = 0;
    for (i = 0; i < TG_ACCT_BINS; i++) {
        f->alloc_calls += TG_LOAD(t->hist_alloc[i]);
        f->free_calls += TG_LOAD(t->hist_free[i]);
    }
    f->requested = TG_LOAD(t->requested);
    f->freed = TG_LOAD(t->freed);
    f->live = f->requested - f->freed;
}

void
tg_acct_process_figs(struct tg_acct_figs *f)
{
    struct tg_acct_thread *t;
    memset(f, 0, sizeof(*f));
    pthread_mutex_lock(&tg_acct.lock);
    for (t = tg_acct.threads; t != NULL; t = t->next) {
        struct tg_acct_figs g;
        tg_acct_thread_figs(t, &g);
        f->alloc_calls += g.alloc_calls;
        f->free_calls += g.free_calls;
        f->requested += g.requested;
        f->freed += g.freed;
    }
    pthread_mutex_unlock(&tg_acct.lock);
    /* Exact live bytes: frees made by the tracer count here but in no thread. */
    f->live = tg_acct_live_now();
}
