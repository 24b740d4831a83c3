/*
 * accounting.c - allocation accounting's run: start, stop, finish, the forked
 * child, and windows (see accounting.h, docs/accounting.md).  The engine's
 * parts, each with its header, arrows pointing down:
 *
 *   accounting.c    run lifecycle, windows         (this file; module.c calls it)
 *     acct_py.c       figures and windows as dicts (the binding's side)
 *     acct_schedule.c periodic snapshots
 *       acct_snapshot.c the snapshot writer (format: src/common/tg_snapshot.h)
 *         acct_state.c  struct tg_acct, the hooks' counting, push/pop
 *           acct_sites.c  interning of sites and their counters (pure C)
 *           acct_sample.c byte sampling (pure C)
 */
#include "accounting.h"
#include "acct_py.h"
#include "acct_schedule.h"
#include "acct_snapshot.h"
#include "acct_state.h"
#include "tls.h"
#include "thread.h"
#include "tg_snapshot.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* fork(): the child has one thread; a hook of another thread may have held the
 * spin lock at the fork, and the child's hooks must not wait for it.  (The child
 * does no accounting: what the holder left half-done does not matter.) */
static void
tg_acct_atfork_child(void)
{
    atomic_store_explicit(&tg_acct.spin, 0, TG_RELAXED);
}

/* Install tg_acct_atfork_child (once per process). */
static void
tg_acct_atfork_register(void)
{
    pthread_atfork(NULL, NULL, tg_acct_atfork_child);
}

/* --- windows (GIL) ----------------------------------------------------------- */

/* tg_acct_window_open without the tracer mark (accounting.h). */
static long
tg_acct_window_open_impl(const char *name)
{
    struct tg_acct_window *w;
    int64_t live;

    if (!atomic_load(&tg_acct_on)) {
        PyErr_SetString(PyExc_RuntimeError, "allocation accounting is not on");
        return -1;
    }
    if (tg_acct.nwindows == TG_MAX_WINDOWS) {
        PyErr_SetString(PyExc_RuntimeError, "too many open windows");
        return -1;
    }
    w = &tg_acct.windows[tg_acct.nwindows];
    w->name = strdup(name);
    if (w->name == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    w->id = ++tg_acct.window_ids;
    w->thread = tg_acct_self();
    if (w->thread != NULL)
        tg_acct_thread_figs(w->thread, &w->thr0);
    else
        memset(&w->thr0, 0, sizeof(w->thr0));
    tg_acct_process_figs(&w->proc0);
    w->t0 = tg_acct_monotonic();
    /* The register now tracks the peak since this open; what it held (the peak
     * since the previous open) is kept for the windows still open.  Under the
     * hooks' lock: they update the register with a load and a store. */
    live = tg_acct_live_now();  /* sampled mode: a sum, taken before the lock */
    tg_acct_spin_lock();
    if (tg_acct.stack_site == NULL)
        live = TG_LOAD(tg_acct.live);
    w->saved_peak = TG_LOAD(tg_acct.win_peak);
    atomic_store_explicit(&tg_acct.win_peak, live, TG_RELAXED);
    tg_acct.nwindows++;
    atomic_store_explicit(&tg_acct.nwin, tg_acct.nwindows, TG_RELAXED);
    tg_acct_spin_unlock();
    return w->id;
}

/* tg_acct_window_close without the tracer mark (accounting.h). */
static PyObject *
tg_acct_window_close_impl(long id)
{
    struct tg_acct_window *w = NULL;
    struct tg_acct_figs p1, t1, pd, td;
    int64_t peak;
    int i, k;
    PyObject *d;

    for (i = 0; i < tg_acct.nwindows; i++)
        if (tg_acct.windows[i].id == id)
            w = &tg_acct.windows[i];
    if (w == NULL) {
        PyErr_SetString(PyExc_ValueError, "no such open window");
        return NULL;
    }
    k = (int)(w - tg_acct.windows);
    /* Peak over [open, now]: the register (since the latest open) and what each
     * later-opened window saved (the stretch before its own open). */
    tg_acct_spin_lock();
    peak = TG_LOAD(tg_acct.win_peak);
    for (i = k + 1; i < tg_acct.nwindows; i++)
        if (tg_acct.windows[i].saved_peak > peak)
            peak = tg_acct.windows[i].saved_peak;
    /* Removing window k: its stretch merges into the next one's (or the register). */
    if (k + 1 < tg_acct.nwindows) {
        if (w->saved_peak > tg_acct.windows[k + 1].saved_peak)
            tg_acct.windows[k + 1].saved_peak = w->saved_peak;
    } else if (w->saved_peak > TG_LOAD(tg_acct.win_peak)) {
        atomic_store_explicit(&tg_acct.win_peak, w->saved_peak, TG_RELAXED);
    }
    tg_acct_spin_unlock();
    tg_acct_process_figs(&p1);
    if (w->thread != NULL)
        tg_acct_thread_figs(w->thread, &t1);
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
    d = tg_acct_window_dict(w->name, tg_acct_monotonic() - w->t0, &pd, peak, w->proc0.live, &td);
    if (d != NULL && tg_acct.closed_windows != NULL && PyList_Append(tg_acct.closed_windows, d) < 0)
        Py_CLEAR(d);
    free(w->name);
    memmove(w, w + 1, (size_t)(tg_acct.nwindows - k - 1) * sizeof(*w));
    tg_acct.nwindows--;
    atomic_store(&tg_acct.nwin, tg_acct.nwindows);
    return d;
}

/* --- start / stop ------------------------------------------------------------ */

/* Free the last run's threads, sites, windows and schedule (GIL, at start:
 * no hook of that run may still be counting). */
static void
tg_acct_free_all(void)
{
    struct tg_acct_thread *t, *next;
    size_t i;

    pthread_mutex_lock(&tg_acct.lock);
    t = tg_acct.threads;
    tg_acct.threads = NULL;
    tg_acct.nthreads = 0;
    tg_acct.running = NULL;
    tg_acct.ended_live = 0;
    tg_acct.ended = NULL;
    tg_acct.lock_gen = TG_ACCT_NO_GEN;  /* exiting threads leave their states alone */
    pthread_mutex_unlock(&tg_acct.lock);
    tg_acct_fold_reset(&tg_acct.fold);
    for (; t != NULL; t = next) {
        next = t->next;
        free(t->stack);
        free(t);
    }
    tg_sites_reset(&tg_acct.sites);
    free(tg_acct.pairs);
    tg_acct.pairs = NULL;
    tg_acct.pairs_lost_bytes = tg_acct.pairs_lost_count = 0;
    for (i = 0; i < (size_t)tg_acct.nwindows; i++)
        free(tg_acct.windows[i].name);
    tg_acct.nwindows = 0;
    atomic_store(&tg_acct.nwin, 0);
    Py_CLEAR(tg_acct.closed_windows);
    Py_CLEAR(tg_acct.sched.code);
    memset(&tg_acct.sched, 0, sizeof(tg_acct.sched));
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
              uint32_t (*stack_site)(struct tg_acct_thread *t), struct tg_thread_table *threads)
{
    static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

    if (sample_bytes < 0 || sample_bytes > TG_ACCT_SAMPLE_MAX) {
        PyErr_Format(PyExc_ValueError, "sample_bytes must be between 0 and %lld",
                     (long long)TG_ACCT_SAMPLE_MAX);
        return -1;
    }
    pthread_once(&atfork_once, tg_acct_atfork_register);
    tg_acct_running_init();
    atomic_store(&tg_acct_light_gen, TG_ACCT_NO_GEN);  /* before the states go */
    /* States of the last run are freed only now: a raw-domain hook that was
     * still running when it ended may have been writing into them. */
    tg_acct_free_all();
    free(tg_acct.outdir);
    tg_acct.outdir = strdup(outdir);
    tg_acct.closed_windows = PyList_New(0);
    if (tg_acct.outdir == NULL || tg_acct.closed_windows == NULL
            || tg_sites_chunk_ensure(&tg_acct.sites, TG_SITE_NONE) < 0
            || tg_sites_chunk_ensure(&tg_acct.sites, TG_SITE_FULL) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    /* cross-thread frees: without the table they are counted as lost */
    tg_acct.pairs = calloc(TG_ACCT_PAIRS, sizeof(*tg_acct.pairs));
    tg_acct.compress = compress;
    tg_acct.thread_table = threads;
    clock_gettime(CLOCK_REALTIME, &tg_acct.t0);
    tg_acct.nsnap = 0;
    tg_acct.sched_err[0] = '\0';
    atomic_store(&tg_acct.live, 0);
    atomic_store(&tg_acct.tracer_freed, 0);
    atomic_store(&tg_acct.peak, 0);
    atomic_store(&tg_acct.win_peak, 0);
    tg_acct.peak_seq = 1;   /* site stamps start at 0: "unchanged since the peak" */
    tg_acct.peak_ns = 0;
    tg_acct.seed = tg_acct_pick_seed();
    atomic_store(&tg_acct.sample, (int64_t)sample_bytes);
    tg_acct.stack_site = sample_bytes > 0 ? stack_site : NULL;
    tg_acct_when_clear();  /* snapshot_when() applies to a run, after enable() */
    atomic_fetch_add(&tg_acct.gen, 1);
    pthread_mutex_lock(&tg_acct.lock);
    tg_acct.lock_gen = atomic_load(&tg_acct.gen);
    pthread_mutex_unlock(&tg_acct.lock);
    tg_acct.had_run = 1;
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
    if (tg_acct.stack_site != NULL)
        atomic_store(&tg_acct_light_gen, atomic_load(&tg_acct.gen));
    return 0;
}

void
tg_acct_stop(void)
{
    atomic_store(&tg_acct_light_gen, TG_ACCT_NO_GEN);
    atomic_store(&tg_acct_on, 0);
    tg_acct_peak_settle();
    tg_acct.sched.active = 0;
}

void
tg_acct_fork_child(void)
{
    tg_acct.thread_table = NULL;
    atomic_store(&tg_acct_light_gen, TG_ACCT_NO_GEN);
    atomic_store(&tg_acct_on, 0);
    tg_acct.sched.active = 0;
    tg_acct.had_run = 0;
}

int
tg_acct_was_on(void)
{
    return tg_acct.had_run;
}

int
tg_acct_finish(struct tg_thread_table *threads)
{
    PyObject *p;
    tg_acct.thread_table = threads;
    while (tg_acct.nwindows > 0) {  /* windows left open end with the run */
        p = tg_acct_window_close(tg_acct.windows[tg_acct.nwindows - 1].id);
        Py_XDECREF(p);
        PyErr_Clear();
    }
    p = tg_acct_snapshot(TG_SNAP_FINAL_LABEL);
    if (p != NULL) {
        Py_DECREF(p);
        p = tg_acct_snapshot_peak();
    }
    tg_acct.thread_table = NULL;  /* THREADS may go away after the run */
    if (p == NULL)
        return -1;
    Py_DECREF(p);
    if (tg_acct.sched_err[0] != '\0') {
        PyErr_SetString(PyExc_RuntimeError, tg_acct.sched_err);
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
