/*
 * lifecycle.c - enable/disable, installing the profile function on every
 * thread, the background flusher, and fork.
 *
 * Everything here runs with the GIL, except the flusher thread (which never
 * touches Python) and the pthread_atfork handlers (which only take locks, drop
 * buffers and close descriptors).
 */
#include "recorder.h"
#include "lifecycle.h"
#include "thread_start.h"
#include "monitor.h"
#include "alloc_hooks.h"
#include "tmstop.h"
#include "names.h"
#include "ptrtable.h"
#include "sleepwrap.h"
#include "spguard.h"
#include "native.h"
#include "sinks.h"
#include "sampled.h"
#include "sigkick.h"
#include "tg_format.h"
#include "options.h"
#include "clock_beat.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Source of run generations; GIL. */
static uint64_t tg_gen_counter;

/* Defaults of a new Recorder: the original's settings, nothing open. */
void
tg_recorder_init(struct tg_recorder *r)
{
    memset(r, 0, sizeof(*r));
    r->statm_fd = -1;
    r->sample_every = TG_DEFAULT_SAMPLE_EVERY;  /* enable()'s defaults (options.h) */
    r->record_python = r->record_c = 1;
    r->track_memory = TG_DEFAULT_TRACK_MEMORY;
    r->track_stack = TG_DEFAULT_TRACK_STACK;
    r->track_sleeps = TG_DEFAULT_TRACK_SLEEPS;
    r->timestamps = TG_DEFAULT_TIMESTAMPS;
    r->mon_tool = -1;
    r->mon_tool_run = -1;
    tg_thread_table_init(&r->table, tg_flusher_kick, r);
    r->table.full_kick = tg_flusher_kick_full;
    tg_writer_init(&r->process_w);
    tg_writer_init(&r->process_cap);
    /* process_w and process_cap: no kick, their producer is the flusher itself
     * (a full buffer is written by it at once). */
    tg_cap_init(&r->cap);
    r->fmt_binary = 1;
    pthread_mutex_init(&r->flusher_lock, NULL);
    pthread_cond_init(&r->flusher_cond, NULL);
    pthread_mutex_init(&r->agg.lock, NULL);
}

/* tg_cap_idtab_clear callback: the C function table's module reference. GIL. */
static void
tg_cfunc_unref(uintptr_t ml, uintptr_t module)
{
    (void)ml;
    Py_XDECREF((PyObject *)module);
}

/* Release the configuration that enable() reads. */
void
tg_recorder_clear_config(struct tg_recorder *r)
{
    size_t i;
    free(r->filter);
    r->filter = NULL;
    r->filter_len = 0;
    free(r->exclude_file);
    r->exclude_file = NULL;
    r->exclude_len = 0;
    free(r->outdir);
    r->outdir = NULL;
    Py_CLEAR(r->stream_factory);
    Py_CLEAR(r->mon_missing);
    free(r->trig_defs);
    r->trig_defs = NULL;
    r->n_trig_defs = 0;
    for (i = 0; i < r->n_trig_codes; i++)
        Py_DECREF(r->trig_codes[i]);
    free(r->trig_codes);
    r->trig_codes = NULL;
    r->n_trig_codes = 0;
}

void
tg_recorder_dealloc(struct tg_recorder *r)
{
    /* Never active here: the active recorder is referenced by tg_active. */
    tg_recorder_clear_config(r);
    Py_CLEAR(r->errors);
    Py_CLEAR(r->wrapped);
    tg_writer_release(&r->process_w);
    tg_writer_release(&r->process_cap);
    tg_cap_close(&r->cap);
    tg_cap_idtab_clear(&r->cfunc_ids, tg_cfunc_unref);
    tg_cap_idtab_clear(&r->agg_cfunc_ids, tg_cfunc_unref);
    tg_agg_close(&r->agg);
    tg_thread_table_destroy(&r->table);
    tg_writer_destroy(&r->process_w);
    tg_writer_destroy(&r->process_cap);
    tg_cap_destroy(&r->cap);
    pthread_mutex_destroy(&r->flusher_lock);
    pthread_cond_destroy(&r->flusher_cond);
}

/* --- profile function on every thread ------------------------------------ */

void
tg_profile_all_threads(struct tg_recorder_object *self, int install)
{
    if (!install)
        tg_monitor_uninstall(self);  /* nothing if the backend is setprofile */
    if (self->r.backend != TG_BACKEND_SETPROFILE)
        return;  /* sys.monitoring: installed by enable(); the program's own profile
                  * functions were never replaced, and stay (threadgraph attach) */
#if TG_HAVE_SETPROFILE_ALL
    if (install)
        PyEval_SetProfileAllThreads(tg_profile, (PyObject *)self);
    else
        PyEval_SetProfileAllThreads(NULL, NULL);
#else
    PyThreadState *ts = PyInterpreterState_ThreadHead(tg_tstate_interp(PyThreadState_Get()));
    for (; ts != NULL; ts = PyThreadState_Next(ts)) {
        if (install)
            tg_set_profile_on(ts, tg_profile, (PyObject *)self);
        else if (ts->c_profilefunc == tg_profile)
            tg_set_profile_on(ts, NULL, NULL);
    }
#endif
}

int
tg_profile_others_count(void)
{
    int n = 0;
    PyThreadState *ts = PyInterpreterState_ThreadHead(tg_tstate_interp(PyThreadState_Get()));

    for (; ts != NULL; ts = PyThreadState_Next(ts))
        if (ts->c_profilefunc != NULL && ts->c_profilefunc != tg_profile)
            n++;
    return n;
}

/* --- another tool's profile function ------------------------------------------- */

/*
 * A program may install its own profile function on a thread (cProfile,
 * profile, yappi, sys.setprofile, threading.setprofile): there is one per
 * thread, so it displaces ours.  The program then runs exactly as without
 * threadgraph (its function is the only one called), and ours comes back as
 * soon as the thread has none again:
 *
 * - every change of a thread's profile function raises the "sys.setprofile"
 *   audit event first, on that thread; our audit hook (tg_audit) marks the
 *   thread TG_BUSY_WATCH;
 * - the next allocation of the thread with the GIL (alloc_hooks.c) calls
 *   tg_profile_watch, after the change: another tool's function is counted
 *   once (the thread's `displaced`) and watched until it is gone; no function
 *   at all means the tool let go, and ours is put back without Python code
 *   (tg_profile_take_quietly), since an allocation is no place to run any.
 *
 * What happened meanwhile is not recorded: the takeovers are counted
 * (stats()/runinfo.json "displaced", the disable() warning), and the calls
 * that returned while the other tool held the thread are closed as unwound
 * by the next return of an enclosing call (recorder.c tg_unwind_to).  3.12+
 * record through sys.monitoring with a tool id of their own (monitor.c), which
 * no other tool displaces; with backend="setprofile" there, a takeover is
 * counted but ours does not come back (tg_profile_watch).
 */

/* Our audit hook is added once per process (audit hooks cannot be removed);
 * GIL. */
static int tg_audit_added;

/* Audit hook: marks the calling thread when its profile function is about to
 * change, unless the change is our own.  GIL held; never fails. */
static int
tg_audit(const char *event, PyObject *args, void *data)
{
    struct tg_recorder_object *a = tg_active;

    (void)args;
    (void)data;
    if (a != NULL && a->r.active && a->r.backend == TG_BACKEND_SETPROFILE && !a->r.sampled
            && !(tg_tls.busy & TG_BUSY_TRACER) && strcmp(event, "sys.setprofile") == 0) {
        PyThreadState *ts = PyThreadState_Get();
        struct tg_thread *t = tg_tls.gen == a->r.gen ? tg_tls.thread : NULL;

        tg_tls.busy |= TG_BUSY_WATCH;
        /* Ours holds the thread and the innermost recorded call is a C call
         * made by the running frame: it is the call changing the profile
         * function (sys.setprofile, cProfile's enable, ...), whose return the
         * new function gets.  Remembered, to be closed as unwound when ours
         * is back (tg_unwind_handoff). */
        if (t != NULL && ts->c_profilefunc == tg_profile && t->depth > 0
                && (t->frames[t->depth - 1].key & 1)
                && (t->frames[t->depth - 1].key & ~(uintptr_t)1)
                   == (uintptr_t)PyEval_GetFrame()) {
            t->handoff_depth = t->depth;
            t->handoff_key = t->frames[t->depth - 1].key;
        }
    }
    return 0;
}

/* tg_hooks_watch: see above.  GIL held, inside an allocation: no Python code. */
static void
tg_profile_watch(void)
{
    struct tg_recorder_object *a = tg_active;
#if PY_VERSION_HEX >= 0x030D0000
    PyThreadState *ts = PyThreadState_GetUnchecked();
#else
    PyThreadState *ts = _PyThreadState_UncheckedGet();
#endif
    struct tg_thread *t;

    if (a == NULL || !a->r.active || a->r.backend != TG_BACKEND_SETPROFILE || a->r.sampled
            || ts == NULL) {
        tg_tls.busy &= ~TG_BUSY_WATCH;
        return;
    }
    t = tg_tls.gen == a->r.gen ? tg_tls.thread : NULL;
    if (ts->c_profilefunc == tg_profile) {
        tg_tls.busy &= ~TG_BUSY_WATCH;
    } else if (ts->c_profilefunc != NULL) {
        /* Another tool's: keep watching until it lets go (its removal raises
         * the event again, but an allocation between the event and the change
         * would still see the tool). */
        if (t != NULL && !t->held_by_other) {
            t->held_by_other = 1;
            atomic_store_explicit(&t->displaced,
                                  atomic_load_explicit(&t->displaced, memory_order_relaxed) + 1,
                                  memory_order_relaxed);
        }
        return;
    } else {
#if !TG_HAVE_SETPROFILE_ALL
        tg_tls.busy |= TG_BUSY_TRACER;
        if (tg_profile_take_quietly(ts, tg_profile, (PyObject *)a) == 0 && t != NULL)
            tg_unwind_handoff(&a->r, t);
#endif
        /* 3.12+: profile functions are sys.monitoring's internals, which only
         * PyEval_SetProfile (and its audit event: Python code) reaches; the
         * thread stays unrecorded, its takeover counted. */
        tg_tls.busy &= ~(TG_BUSY_TRACER | TG_BUSY_WATCH);
    }
    if (t != NULL)
        t->held_by_other = 0;
}

PyObject *
tg_recorder_call(PyObject *self, PyObject *args, PyObject *kw)
{
    struct tg_recorder_object *a = tg_active;
    PyThreadState *ts = PyThreadState_Get();

    (void)args;
    (void)kw;
    if (ts->c_profileobj != self || ts->c_profilefunc == tg_profile)
        Py_RETURN_NONE;  /* called by hand, or by a tool that chains: nothing */
    if ((PyObject *)a == self && a->r.active && a->r.backend == TG_BACKEND_SETPROFILE
            && !a->r.sampled) {
        struct tg_thread *t = tg_tls.gen == a->r.gen ? tg_tls.thread : NULL;
        ts->c_profilefunc = tg_profile;  /* as spguard.c's put back; this event is lost */
        if (t != NULL)
            tg_unwind_handoff(&a->r, t);
    }
    else
        PyEval_SetProfile(NULL, NULL);  /* after disable(): none, as before enable() */
    Py_RETURN_NONE;
}

/* Start watching for other tools' profile functions (setprofile backend). */
static void
tg_watch_start(void)
{
    if (tg_audit_added)
        return;
    tg_hooks_watch = tg_profile_watch;
    if (PySys_AddAuditHook(tg_audit, NULL) < 0)
        PyErr_Clear();  /* refused by another hook: takeovers go unnoticed */
    else
        tg_audit_added = 1;
}

/* --- another tool's profile function on threads it did not tell ---------------- */

/*
 * yappi installs its profile function on every thread state by writing the
 * fields (no audit event, so no watch above), and removes it the same way:
 * a thread that made no call while yappi held it would never get ours back.
 * yappi.stop() (and any tool doing likewise) then calls threading.setprofile,
 * which thread_start.c wraps while recording: the wrapper sweeps every thread
 * state here, counting each recorded thread another tool holds or held once,
 * and giving ours back to those left without one.
 */

#if !TG_HAVE_SETPROFILE_ALL
/* A thread state's view for the sweep: its ident and what it has. */
struct tg_reclaim_ts {
    unsigned long ident;
    int state;  /* 0: ours; 1: another tool's; 2: none, ours to put back;
                 * 3: none, its thread ending (left alone) */
};

struct tg_reclaim {
    struct tg_reclaim_ts *ts;
    size_t n;
};

/* tg_thread_table_each_locked callback (the table's lock held: memory work
 * only): count T's takeover once, and mark an ending thread's state to be
 * left alone.  GIL held. */
static void
tg_reclaim_count(struct tg_thread *t, void *ctx)
{
    struct tg_reclaim *rc = ctx;
    size_t i;

    if (t->glet_root != NULL)
        return;  /* a greenlet's state: its thread's own counts */
    for (i = 0; i < rc->n && rc->ts[i].ident != t->ident; i++)
        ;
    if (i == rc->n || rc->ts[i].state == 0)
        return;
    if (t->ending) {
        /* our thread wrapper removed ours as the thread's function returned */
        if (rc->ts[i].state == 2)
            rc->ts[i].state = 3;
        return;
    }
    if (!t->held_by_other)
        atomic_store_explicit(&t->displaced,
                              atomic_load_explicit(&t->displaced, memory_order_relaxed) + 1,
                              memory_order_relaxed);
    /* still held: counted until it lets go; put back: the next takeover counts */
    t->held_by_other = rc->ts[i].state == 1;
}
#endif

void
tg_profile_reclaim(struct tg_recorder_object *self, int take)
{
#if TG_HAVE_SETPROFILE_ALL
    (void)self;
    (void)take;
#else
    struct tg_recorder *r = &self->r;
    struct tg_reclaim rc = { NULL, 0 };
    PyThreadState *head, *ts;
    size_t cap = 0;
    int busy = tg_tls.busy;

    if (!r->active || r->backend != TG_BACKEND_SETPROFILE || r->sampled)
        return;
    head = PyInterpreterState_ThreadHead(tg_tstate_interp(PyThreadState_Get()));
    for (ts = head; ts != NULL; ts = PyThreadState_Next(ts))
        cap++;
    /* our own allocation, and our own install: neither is the program's */
    tg_tls.busy |= TG_BUSY_TRACER;
    rc.ts = malloc(cap * sizeof(*rc.ts) + 1);
    if (rc.ts == NULL)
        goto done;
    for (ts = head; ts != NULL && rc.n < cap; ts = PyThreadState_Next(ts)) {
        struct tg_reclaim_ts *e = &rc.ts[rc.n++];
        e->ident = ts->thread_id;
        e->state = ts->c_profilefunc == tg_profile ? 0 : ts->c_profilefunc != NULL ? 1 : 2;
    }
    if (take) {
        size_t tries = 0;
        tg_thread_table_each_locked(&r->table, tg_reclaim_count, &rc);
        /* Put ours back after the count.  The install raises the audit event,
         * whose hooks are Python code that may end threads: walk the list
         * anew after each one (a thread state given ours is passed over). */
        while (tries++ < rc.n && r->active) {
            for (ts = PyInterpreterState_ThreadHead(tg_tstate_interp(PyThreadState_Get()));
                 ts != NULL; ts = PyThreadState_Next(ts)) {
                size_t i;
                if (ts->c_profilefunc != NULL)
                    continue;  /* (a tool writing the fields may leave the object) */
                for (i = 0; i < rc.n && rc.ts[i].ident != ts->thread_id; i++)
                    ;
                if (i < rc.n && rc.ts[i].state == 2)
                    break;
            }
            if (ts == NULL)
                break;
            tg_set_profile_on(ts, tg_profile, (PyObject *)self);
            if (ts->c_profilefunc != tg_profile)
                break;  /* refused (an audit hook raised): leave the rest */
        }
    } else {
        tg_thread_table_each_locked(&r->table, tg_reclaim_count, &rc);
    }
done:
    free(rc.ts);
    tg_tls.busy = busy;
#endif
}

/* --- the event path's countdown ------------------------------------------------ */

/* The event path's countdown (process.mem requests, LEVEL marks) at a run's
 * start: it ends at the nearer of the next request (every sample_every
 * events) and the next mark (every TG_LEVEL_EVENTS); with neither it starts
 * at 0 and wraps (tg_sample_request). */
static void
tg_countdowns_start(struct tg_recorder *r)
{
    r->sample_left = r->sample_every > 0 ? (unsigned long)r->sample_every : ULONG_MAX;
    r->level_left = TG_LEVEL_EVENTS;
    r->countdown_set = r->sample_countdown
        = r->level_marks && r->level_left < r->sample_left ? r->level_left
          : r->sample_every > 0 ? r->sample_left : 0;
}

/* --- /proc/self/statm --------------------------------------------------------- */

/* Open the RSS source, remembering its identity.  Failure leaves -1 (RSS reads 0). */
static void
tg_statm_open(struct tg_recorder *r)
{
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0) {
        r->statm_dev = st.st_dev;
        r->statm_ino = st.st_ino;
    } else if (fd >= 0) {
        close(fd);
        fd = -1;
    }
    atomic_store(&r->statm_fd, fd);
}

/* Close it, unless the program closed it and reused the number. */
static void
tg_statm_close(struct tg_recorder *r)
{
    int fd = atomic_exchange(&r->statm_fd, -1);
    if (tg_fd_is_ours(fd, r->statm_dev, r->statm_ino))
        close(fd);
}

/* --- flusher --------------------------------------------------------------- */

/* tg_thread_table_each callback: write out T's descriptor-backed buffers. */
static void
tg_flush_thread_all(struct tg_thread *t, void *ctx)
{
    (void)ctx;
    /* Python streams are skipped inside: their thread flushes them. */
    tg_writer_flush_nogil(&t->mem);
    tg_writer_flush_nogil(&t->stack);
    tg_writer_flush_nogil(&t->capw);
}

/* Send T's next capture record to its slow path, which writes a LEVEL mark
 * before it when T's stream takes them (recorder.c tg_cap_reserve_slow).  Any
 * thread: lowering lim is allowed to any side (writer.h). */
static void
tg_divert_thread_cap(struct tg_thread *t, void *ctx)
{
    (void)ctx;
    tg_writer_divert(&t->capw);
}

/* The same for the buffers T's writers handed off (see writer.h). */
static void
tg_flush_thread_full(struct tg_thread *t, void *ctx)
{
    (void)ctx;
    tg_writer_flush_full_nogil(&t->mem);
    tg_writer_flush_full_nogil(&t->stack);
    tg_writer_flush_full_nogil(&t->capw);
}

/* Write out every descriptor-backed buffer of R, and the files of the threads
 * that ended.  The flusher, no GIL.  The table's lock is not held across the
 * writes (tg_thread_table_each): out of memory for its list, this pass writes
 * nothing and the next one tries again. */
static void
tg_flush_all_fd(struct tg_recorder *r)
{
    tg_thread_table_each(&r->table, tg_flush_thread_all, NULL);
    tg_thread_close_ended(r);
    tg_writer_flush_nogil(&r->process_w);
    tg_writer_flush_nogil(&r->process_cap);
    {
        /* A program that closed our /proc/self/statm descriptor: stop reading it
         * (pread never changes a file the number may now name). */
        int fd = atomic_load_explicit(&r->statm_fd, memory_order_relaxed);
        if (fd >= 0 && !tg_fd_is_ours(fd, r->statm_dev, r->statm_ino))
            atomic_compare_exchange_strong(&r->statm_fd, &fd, -1);
    }
}

#define TG_FLUSH_PERIOD_NS 500000000L
/* LEVEL marks (tg_divert_thread_cap) at most this often, at wakes the flusher
 * has anyway (process.mem's polls, handoffs), else every flush period. */
#define TG_LEVEL_PERIOD_NS 100000000L
/* aggregate.tga is rewritten every this many flusher periods (1 s): a killed
 * run loses at most the last second (docs/api.md "Aggregate mode"). */
#define TG_AGG_PERIOD_TICKS 2

/* Write the buffers writers handed off (see writer.h), and the files of the
 * threads that ended (thread_py.h).  The flusher, no GIL. */
static void
tg_flush_full_fd(struct tg_recorder *r)
{
    tg_thread_table_each(&r->table, tg_flush_thread_full, NULL);
    tg_thread_close_ended(r);
    tg_writer_flush_full_nogil(&r->process_w);
    tg_writer_flush_full_nogil(&r->process_cap);
}

void
tg_flusher_kick(void *recorder)
{
    struct tg_recorder *r = recorder;  /* GIL held by the caller */

    if (!r->flusher_running)
        return;  /* the next flush of that writer writes it */
    pthread_mutex_lock(&r->flusher_lock);
    r->flusher_kicked = 1;
    pthread_cond_signal(&r->flusher_cond);
    pthread_mutex_unlock(&r->flusher_lock);
}

/* While writers keep handing off buffers, the flusher looks at the queue every
 * TG_QUEUE_POLL_NS instead of being woken for each buffer: a kick is a futex
 * wake from the program's thread (a system call with the GIL held) and a
 * context switch on a core the program may be using, one per 64 KiB of
 * records (680 a run of call-heavy code).  At 10 ms the queue holds a few
 * buffers (4 MiB of records a second fill 6); past TG_KICK_QUEUED of them
 * (a burst) every handoff kicks as before, far below the queue's bound
 * (TG_WRITER_QUEUED_MAX), so polling drops nothing that kicking would not.
 * A look that finds the queue empty stops the polling: the next handoff
 * kicks.  bench/RESULTS.md, 2026-11-27 03:10-04:01 UTC. */
#define TG_QUEUE_POLL_NS 10000000L
#define TG_KICK_QUEUED 64

void
tg_flusher_kick_full(void *recorder)
{
    struct tg_recorder *r = recorder;  /* GIL held by the caller */

    /* The handoff counted its buffer in tg_writer_queued() before this: with
     * the flusher's store of 0 then its look at the queue (tg_flusher_main),
     * either it sees the buffer or this sees 0 and kicks. */
    atomic_thread_fence(memory_order_seq_cst);
    if (r->flusher_running && atomic_load(&r->flusher_polling)
            && tg_writer_queued() < TG_KICK_QUEUED)
        return;
    tg_flusher_kick(r);
}

/* How often the flusher looks for a process.mem request: every
 * TG_SAMPLE_POLL_MIN_NS while requests keep coming, the interval doubling up
 * to TG_SAMPLE_POLL_MAX_NS while none comes (an idle program is not woken a
 * hundred times a second); also whenever a writer's kick wakes it anyway.
 * 10 ms, as memray's RSS samples (memory_interval_ms): each wake is a futex
 * wait and wake, a context switch on a core the program may be using and a
 * pread; at 1 ms the flusher's wakes were about half its CPU time and most of
 * the process's voluntary context switches (bench/RESULTS.md, 2026-11-27).
 * docs/api.md "process.mem". */
#define TG_SAMPLE_POLL_MIN_NS 10000000L
#define TG_SAMPLE_POLL_MAX_NS 64000000L

/* A before B. */
static int
tg_ts_before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* T plus NS (< 1 s). */
static struct timespec
tg_ts_add(struct timespec t, long ns)
{
    t.tv_nsec += ns;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* Every thread's next capture record through its slow path, which writes a
 * LEVEL mark after it (tg_divert_thread_cap); the time of the next, from NOW.
 * The flusher, with level_marks. */
static struct timespec
tg_divert_all_caps(struct tg_recorder *r, struct timespec now)
{
    tg_thread_table_each(&r->table, tg_divert_thread_cap, NULL);
    return tg_ts_add(now, TG_LEVEL_PERIOD_NS);
}

/* The flusher lets go of flusher_lock to work (write, sample): busy while it
 * works.  flusher_lock held. */
static void
tg_flusher_leave(struct tg_recorder *r)
{
    r->flusher_busy = 1;
    pthread_mutex_unlock(&r->flusher_lock);
}

/* Back from work: takes flusher_lock, and waits there while paused for a fork
 * (tg_flusher_fork_prepare). */
static void
tg_flusher_back(struct tg_recorder *r)
{
    pthread_mutex_lock(&r->flusher_lock);
    r->flusher_busy = 0;
    while (r->flusher_paused && !r->flusher_stop)
        pthread_cond_wait(&r->flusher_cond, &r->flusher_lock);
}

/* Every TG_FLUSH_PERIOD_NS: re-anchor the clock and write everything pending;
 * in between, when kicked: write the handed-off buffers only; with process
 * sampling on, at each poll: take the pending process.mem requests (one
 * reading, written once for every request made since the last poll). */
static void *
tg_flusher_main(void *arg)
{
    struct tg_recorder *r = arg;
    struct timespec next, now, poll_at, qpoll_at;
    long poll_ns = TG_SAMPLE_POLL_MIN_NS;
    int polling = 0;  /* r->flusher_polling, which only this thread changes */
    int sampling = r->sample_every > 0;  /* configuration: read-only while we run */
    int agg_ticks = 0;
    struct timespec level_at;

    tg_tls.busy |= TG_BUSY_TRACER;  /* native=True: what the flusher allocates is ours */
    clock_gettime(CLOCK_REALTIME, &next);
    now = next;
    poll_at = tg_ts_add(now, poll_ns);
    qpoll_at = now;
    level_at = tg_ts_add(now, TG_LEVEL_PERIOD_NS);
    pthread_mutex_lock(&r->flusher_lock);
    while (!r->flusher_stop) {
        int tick, woke;
        next = tg_ts_add(next, TG_FLUSH_PERIOD_NS);
        for (;;) {
            struct timespec until = next;
            if (sampling && tg_ts_before(&poll_at, &until))
                until = poll_at;
            if (polling && tg_ts_before(&qpoll_at, &until))
                until = qpoll_at;
            while (!r->flusher_stop && !r->flusher_kicked
                   && pthread_cond_timedwait(&r->flusher_cond, &r->flusher_lock, &until) == 0)
                ;
            if (r->flusher_stop)
                goto out;
            clock_gettime(CLOCK_REALTIME, &now);
            /* Kicked or either poll due: both polls are done at every wake,
             * so that they stay in step (one wake per 10 ms, not two). */
            woke = r->flusher_kicked || (sampling && !tg_ts_before(&now, &poll_at))
                   || (polling && !tg_ts_before(&now, &qpoll_at));
            if (sampling && woke) {
                /* A poll, or awake anyway: the pending requests are taken at
                 * no extra wake. */
                uint64_t n = tg_process_sample_wanted(r);
                if (n > 0) {
                    tg_flusher_leave(r);
                    tg_process_sample(r, n);
                    tg_flusher_back(r);
                    poll_ns = TG_SAMPLE_POLL_MIN_NS;
                    poll_at = tg_ts_add(now, poll_ns);
                } else if (!tg_ts_before(&now, &poll_at)) {
                    if (poll_ns < TG_SAMPLE_POLL_MAX_NS)
                        poll_ns *= 2;
                    poll_at = tg_ts_add(now, poll_ns);
                }
            }
            tick = !tg_ts_before(&now, &next);
            if (tick)
                break;
            if (r->level_marks && woke && !tg_ts_before(&now, &level_at)) {
                /* awake anyway (a poll or a kick): LEVEL marks every
                 * TG_LEVEL_PERIOD_NS, not only every flush period */
                tg_flusher_leave(r);
                level_at = tg_divert_all_caps(r, now);
                tg_flusher_back(r);
            }
            if (woke) {
                /* Kicked, or a poll (TG_QUEUE_POLL_NS): buffers
                 * found keep the polling on; none, it stops, then a last look
                 * catches a handoff that saw it on (tg_flusher_kick_full). */
                int kicked = r->flusher_kicked;
                int queued = tg_writer_queued() > 0;
                r->flusher_kicked = 0;
                if (queued) {
                    polling = 1;
                    qpoll_at = tg_ts_add(now, TG_QUEUE_POLL_NS);
                    atomic_store(&r->flusher_polling, 1);
                }
                if (queued || kicked) {
                    tg_flusher_leave(r);
                    tg_flush_full_fd(r);
                    tg_flusher_back(r);
                }
                if (!queued && polling) {
                    polling = 0;
                    atomic_store(&r->flusher_polling, 0);
                    atomic_thread_fence(memory_order_seq_cst);
                    if (tg_writer_queued() > 0)
                        r->flusher_kicked = 1;
                }
            }
        }
        r->flusher_kicked = 0;
        tg_flusher_leave(r);
        tg_clock_tick();  /* re-anchor the timestamps to CLOCK_REALTIME */
        tg_flush_all_fd(r);
        if (r->level_marks)
            level_at = tg_divert_all_caps(r, now);
        if (r->aggregate && ++agg_ticks >= TG_AGG_PERIOD_TICKS) {
            agg_ticks = 0;
            tg_agg_write(&r->agg, r->outdir, tg_clock_gettime_ns() / 1000);
        }
        tg_sigkick_poll();  /* a finishing signal whose handler waits (sigkick.h) */
        tg_flusher_back(r);
        if (now.tv_sec > next.tv_sec + 1)
            next = now;  /* the process was stopped: do not run ticks to catch up */
    }
out:
    atomic_store(&r->flusher_polling, 0);
    pthread_mutex_unlock(&r->flusher_lock);
    return NULL;
}

int
tg_flusher_start(struct tg_recorder *r)
{
    sigset_t all, old;
    int e;

    if (r->flusher_running)
        return 0;
    r->flusher_stop = 0;
    r->flusher_paused = 0;
    atomic_store(&r->flusher_polling, 0);
    /* Signals are for Python's main thread, never for the flusher. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    e = pthread_create(&r->flusher, NULL, tg_flusher_main, r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0)
        return -e;
    r->flusher_running = 1;
    return 0;
}

/* What tg_flusher_order tells the flusher: stop; stop if it is idle, else
 * pause after the work in hand (a fork: its write may be stuck); go on after
 * a pause. */
enum tg_flusher_order { TG_FLUSHER_STOP, TG_FLUSHER_STOP_IDLE, TG_FLUSHER_RESUME };

/* Give the flusher ORDER and wake it; a stopped one is joined with the GIL
 * released (its write in progress may take as long as the sink wants), the
 * one stop-and-join of disable() and fork.  Returns 1 if it was stopped.  GIL
 * held, the flusher running. */

static int
tg_flusher_order(struct tg_recorder *r, enum tg_flusher_order order)
{
    int stop;

    pthread_mutex_lock(&r->flusher_lock);
    stop = order == TG_FLUSHER_STOP || (order == TG_FLUSHER_STOP_IDLE && !r->flusher_busy);
    if (stop)
        r->flusher_stop = 1;  /* an idle flusher sees it before any work */
    else
        r->flusher_paused = order == TG_FLUSHER_STOP_IDLE;
    pthread_cond_signal(&r->flusher_cond);
    pthread_mutex_unlock(&r->flusher_lock);
    if (stop) {
        Py_BEGIN_ALLOW_THREADS
        pthread_join(r->flusher, NULL);
        Py_END_ALLOW_THREADS
        r->flusher_running = 0;
    }
    return stop;
}

void
tg_flusher_stop(struct tg_recorder *r)
{
    if (r->flusher_running)
        (void)tg_flusher_order(r, TG_FLUSHER_STOP);
}

void
tg_flusher_fork_prepare(struct tg_recorder *r)
{
    /* A busy flusher's write may be stuck: it is paused, not waited for. */
    if (r->flusher_running)
        (void)tg_flusher_order(r, TG_FLUSHER_STOP_IDLE);
}

int
tg_flusher_fork_parent(struct tg_recorder *r)
{
    if (!r->flusher_running)
        return tg_flusher_start(r);
    (void)tg_flusher_order(r, TG_FLUSHER_RESUME);
    return 0;
}

/* --- enable / disable ------------------------------------------------------ */

/* time_resolution="ms": the clock's beat, while R writes timed records
 * (clock_beat.h).  0, or -1 with OSError. */
static int
tg_beat_start_for(struct tg_recorder *r)
{
    int e;

    if (!r->time_beat || r->sampled || !(r->time_calls || r->time_returns))
        return 0;
    e = tg_clock_beat_start();
    if (e != 0) {
        errno = e;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    return 0;
}

/* Open <outdir>/process.mem if sampling is on.  Returns 0, or -1 with OSError. */
static int
tg_open_process_file(struct tg_recorder *r)
{
    char *path;
    size_t n = strlen(r->outdir) + sizeof(TG_PROCESS_BASENAME) + sizeof(TG_MEM_SUFFIX) + 2;
    int ret;

    if (r->sample_every <= 0 || !r->fmt_text)
        return 0;
    path = malloc(n);
    if (path == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    snprintf(path, n, "%s/%s%s", r->outdir, TG_PROCESS_BASENAME, TG_MEM_SUFFIX);
    ret = tg_writer_open_path(&r->process_w, path);
    if (ret < 0) {
        errno = -ret;
        PyErr_SetFromErrnoWithFilename(PyExc_OSError, path);
        tg_writer_release(&r->process_w);
    }
    free(path);
    return ret < 0 ? -1 : 0;
}

/* Create <outdir>/capture.tg (format binary or both) with its header, or its
 * first segment <outdir>/capture-000001.tg (max_size), and the
 * process sample stream.  Returns 0, or -1 with OSError. */
static int
tg_open_capture(struct tg_recorder *r)
{
    char *path;
    size_t n = strlen(r->outdir) + sizeof(TG_CAP_FILENAME) + 2;
    uint32_t flags;
    int64_t start_us;
    int ret;

    if (!r->fmt_binary)
        return 0;
    path = malloc(n);
    if (path == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    snprintf(path, n, "%s/%s", r->outdir, TG_CAP_FILENAME);
    flags = (r->timestamps ? TG_CAP_F_TIME : 0) | (r->track_memory ? TG_CAP_F_MEMORY : 0)
            | (r->track_stack ? TG_CAP_F_STACK : 0)
            | (r->sample_every > 0 ? TG_CAP_F_PROCESS : 0);
    start_us = tg_clock_now_ns() / 1000;  /* after tg_clock_enable: the records' clock */
    if (r->cap_max_size)
        ret = tg_cap_open_segments(&r->cap, r->outdir, r->cap_max_size, flags, start_us,
                                   (uint32_t)r->memory_mode,
                                   (uint32_t)atomic_load(&tg_clock_src),
                                   (uint32_t)getpid(), r->cap_compress);
    else
        ret = tg_cap_open(&r->cap, path, flags, start_us, (uint32_t)r->memory_mode,
                          (uint32_t)atomic_load(&tg_clock_src), (uint32_t)getpid(),
                          r->cap_compress);
    if (ret < 0) {
        errno = -ret;
        PyErr_SetFromErrnoWithFilename(PyExc_OSError, path);
        free(path);
        return -1;
    }
    r->process_cap_us = start_us;
    r->process_cap_bytes = 0;
    if (r->process_clock.last_ns < start_us * 1000)
        r->process_clock.last_ns = start_us * 1000;
    if (r->sample_every > 0
            && tg_sink_open_chunks(&r->process_cap, &r->cap, TG_CAP_CHUNK_PROCESS,
                                     TG_CAP_STREAM_PROCESS, path) < 0) {
        PyErr_NoMemory();
        tg_cap_close(&r->cap);
        free(path);
        return -1;
    }
    free(path);
    return 0;
}

/* aggregate=True: start the run's trees and write a first (empty)
 * <outdir>/aggregate.tga, so that a directory we cannot write fails here.
 * Returns 0, or -1 with OSError. */
static int
tg_open_aggregate(struct tg_recorder *r)
{
    static const char *const memory[] = {"thread", "process", "rss"};
    const char *width = getenv("THREADGRAPH_AGG_BUCKET_US");
    int64_t now_us;
    int e;

    if (!r->aggregate)
        return 0;
    now_us = tg_clock_now_ns() / 1000;  /* after tg_clock_enable: the events' clock */
    /* THREADGRAPH_AGG_BUCKET_US: the curves' first bucket width (docs/api.md) */
    tg_agg_open(&r->agg, now_us, memory[r->memory_mode],
                width != NULL ? strtoll(width, NULL, 10) : TG_AGG_BUCKET_US);
    e = tg_agg_write(&r->agg, r->outdir, now_us);
    if (e != 0) {
        errno = e;
        PyErr_SetFromErrnoWithFilename(PyExc_OSError, r->outdir);
        tg_agg_close(&r->agg);
        return -1;
    }
    return 0;
}

/* The aggregate's last write (every thread retired), then its state freed.
 * GIL held, flusher stopped. */
static void
tg_close_aggregate(struct tg_recorder *r, int write)
{
    if (!r->aggregate)
        return;
    if (write) {
        int64_t now_us = tg_clock_gettime_ns() / 1000;
        int e;
        /* Its trees are still (every thread retired): written without the GIL. */
        Py_BEGIN_ALLOW_THREADS
        e = tg_agg_write(&r->agg, r->outdir, now_us);
        Py_END_ALLOW_THREADS
        if (e)
            tg_note_path_error(r, r->outdir, TG_AGG_FILENAME, e);
    }
    tg_agg_close(&r->agg);
    tg_cap_idtab_clear(&r->agg_cfunc_ids, tg_cfunc_unref);
}

/* Close the capture: the process samples, the trailer (after every thread's
 * last chunk), the C function table.  GIL held, flusher stopped. */
static void
tg_close_capture(struct tg_recorder *r)
{
    int e;
    if (!r->fmt_binary)
        return;
    Py_BEGIN_ALLOW_THREADS
    tg_writer_close_nogil(&r->process_cap);
    Py_END_ALLOW_THREADS
    tg_note_writer_error(r, &r->process_cap);
    tg_writer_release(&r->process_cap);
    if (r->cap.path != NULL) {  /* opened */
        char *path = r->cap.path ? strdup(r->cap.path) : NULL;
        int64_t end_us = tg_clock_gettime_ns() / 1000;
        /* The capture is thread-safe (its locks): a thread that starts, ends
         * or defines a code meanwhile queues, or finds it closed. */
        Py_BEGIN_ALLOW_THREADS
        e = tg_cap_finish(&r->cap, end_us);
        Py_END_ALLOW_THREADS
        if (e)
            tg_note_path_error(r, path, NULL, e);
        free(path);
    }
    tg_cap_close(&r->cap);
    tg_cap_idtab_clear(&r->cfunc_ids, tg_cfunc_unref);
}

int
tg_recorder_enable(struct tg_recorder_object *self)
{
    struct tg_recorder *r = &self->r;
    struct tg_thread *t;
    PyObject *errors;

    if (tg_active != NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "another ProcessProfile is already enabled in this process; "
                        "only one can record at a time: disable() it first");
        return -1;
    }
    if (r->outdir == NULL) {
        PyErr_SetString(PyExc_ValueError, "no output directory configured");
        return -1;
    }
    errors = PyList_New(0);
    if (errors == NULL)
        return -1;
    Py_XSETREF(r->errors, errors);
    tg_thread_table_free_retired(&r->table);
    tg_thread_table_clear_log(&r->table);
    r->samples_dropped = 0;
    r->samples_taken = 0;
    atomic_store(&r->sample_requests, 0);
    r->sample_requests_taken = 0;
    r->dummy_counter = 0;
    r->text_mem = r->fmt_text && r->track_memory;
    r->text_stack = r->fmt_text && r->track_stack;
    r->cap_counts_stack = !r->fmt_text && r->track_stack;
    r->cap_counts_mem = !r->fmt_text && r->track_memory;
    r->time_calls = r->aggregate || (r->timestamps && (r->fmt_binary || r->track_stack));
    r->time_returns = r->aggregate
                      || (r->timestamps && (r->fmt_binary || r->track_memory));
    tg_event_path_choose(r);
    /* THREADGRAPH_NO_LEVEL_MARKS: a capture whose held memory reads as its
     * text export's (tests compare the two readers; docs/formats.md) */
    r->level_marks = r->fmt_binary && r->track_memory && r->memory_mode == TG_MEM_THREAD
                     && !r->sampled && !r->aggregate
                     && getenv("THREADGRAPH_NO_LEVEL_MARKS") == NULL;
    tg_countdowns_start(r);
    r->gen = ++tg_gen_counter;
    r->page_size = sysconf(_SC_PAGESIZE);
    tg_statm_open(r);
    /* Events flow from here on but are ignored until r->active is set. */
    r->mon_taken = 0;
    r->mon_tool_run = -1;
    r->mon_aside = 0;
    r->mon_yielded = 0;
    if (r->sampled) {
        r->backend = TG_BACKEND_SETPROFILE;  /* reported as such; none is installed */
    } else if (r->backend == TG_BACKEND_MONITORING) {
        int e = tg_monitor_install(self);
        if (e < 0 && !r->backend_auto)
            goto fail;
        if (e < 0) {
            /* Profile functions instead, said aloud (stats()
             * "monitoring_ids_taken"): the other tools keep their ids. */
            PyErr_Clear();
            r->backend = TG_BACKEND_SETPROFILE;
            r->mon_taken = e == -2;
            if (e == -2 && PyErr_WarnEx(PyExc_RuntimeWarning,
                                        "threadgraph: sys.monitoring tool ids 3 and 4 are both "
                                        "taken by other tools: recording with a profile "
                                        "function (backend 'setprofile') instead", 1) < 0)
                goto fail;
        }
    }
    if (r->backend == TG_BACKEND_SETPROFILE && !r->sampled)
        tg_watch_start();
    if (!r->sampled)
        tg_spguard_install();
    tg_clock_enable();  /* before the capture's start time, and the flusher */
    if (tg_open_capture(r) < 0)
        goto fail;
    if (tg_open_aggregate(r) < 0)
        goto fail;
    if (tg_open_process_file(r) < 0)
        goto fail;

    /* The enabling thread's files open now so that a bad directory fails here;
     * unless it is quiet (Recorder.quiet(True) before enable(): threadgraph
     * attach's control thread), which is then left out of the run, as it never
     * records anything. */
    if ((r->track_memory || r->track_stack) && !(tg_tls.busy & TG_BUSY_TRACER)) {
        t = tg_thread_attach(self, NULL, 0);
        if (t == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        if (atomic_load(&t->mem.err) || atomic_load(&t->stack.err)
                || atomic_load(&t->capw.err)) {
            struct tg_writer *w = atomic_load(&t->mem.err) ? &t->mem
                                  : atomic_load(&t->stack.err) ? &t->stack : &t->capw;
            errno = atomic_load(&w->err);
            PyErr_SetFromErrnoWithFilename(PyExc_OSError, w->path);
            goto fail_thread;
        }
        if (PyList_GET_SIZE(r->errors) > 0) {  /* stream_factory failed */
            PyErr_SetObject(PyExc_RuntimeError, PyList_GET_ITEM(r->errors, 0));
            goto fail_thread;
        }
        /* The rest of the Python enable() that called us is plumbing. */
#if TG_HAVE_MONITORING
        if (r->backend == TG_BACKEND_MONITORING)
            t->suppress_key = tg_current_frame_key();
        else
#endif
            t->suppress_key = (uintptr_t)PyEval_GetFrame();
    }
    if (tg_threads_wrap(self) < 0)
        goto fail_thread;
    if (tg_flusher_start(r) < 0) {
        PyErr_SetString(PyExc_OSError, "cannot start the flusher thread");
        goto fail_unwrap;
    }
    if (tg_beat_start_for(r) < 0)
        goto fail_flusher;
#if TG_HAVE_MONITORING
    r->offset_int_size = tg_offset_int_size();
#endif
    /* tracemalloc.start() and stop() keep the hooks on top (tmstop.h); before
     * they count: _tracemalloc's import makes objects that are none of the
     * program's calls. */
    tg_tmstop_install();
    tg_hooks_install(r->memory_mode == TG_MEM_PROCESS);
    tg_sleepwrap_install(r);  /* `with lock:` as a sleep trigger */
    r->active = 1;
    r->mon_gen = r->gen;
    Py_INCREF(self);
    tg_active = self;
    if (!r->sampled)  /* sampled mode: the allocator hooks are its only source */
        tg_profile_all_threads(self, 1);
    else  /* but threads running before enable are named (sampled_adopt.c) */
        tg_sampled_adopt_install(self);
    return 0;

fail_flusher:
    tg_flusher_stop(r);
fail_unwrap:
    tg_threads_unwrap(self);
fail_thread:
    tg_thread_retire_all(r, 0);
    tg_tls.thread = NULL;
fail:
    tg_monitor_uninstall(self);
    tg_spguard_uninstall();
    tg_writer_release(&r->process_w);
    tg_writer_release(&r->process_cap);
    tg_cap_close(&r->cap);
    tg_cap_idtab_clear(&r->cfunc_ids, tg_cfunc_unref);
    tg_close_aggregate(r, 0);
    tg_statm_close(r);
    r->gen = ++tg_gen_counter;
    return -1;
}

int
tg_recorder_disable(struct tg_recorder_object *self)
{
    struct tg_recorder *r = &self->r;

    if (!r->active)
        return 0;
    tg_profile_reclaim(self, 0);  /* threads another tool still holds: counted */
    r->active = 0;
    r->mon_gen = 0;
    r->default_path = 0;  /* the fast path tests it alone (recorder.h) */
    r->ended_gen = r->gen;
    if (!r->sampled)  /* none installed: another tool's profile function stays */
        tg_profile_all_threads(self, 0);
    else
        tg_sampled_adopt_remove();
    tg_spguard_uninstall();
    tg_threads_unwrap(self);
    tg_sleepwrap_uninstall();
    tg_native_uninstall();  /* native=True (native.c); before the table is cleared */
    tg_tmstop_uninstall();
    tg_hooks_uninstall();
    tg_flusher_stop(r);  /* waits for its write in progress, GIL released */
    Py_BEGIN_ALLOW_THREADS
    tg_clock_beat_stop();  /* at most one period; nothing records any more */
    Py_END_ALLOW_THREADS
    if (r->sample_every > 0) {
        /* The last requests, which the flusher had not taken, and one line
         * more: a reading at the run's end.  Requests come every N events, so
         * the last one can be long before the end (a thread busy in C code makes
         * no events); without this final line a reader drawing the last
         * sample on to the end (memg) would draw an early reading as the RSS
         * of the rest of the run. */
        tg_process_sample(r, tg_process_sample_wanted(r) + 1);
    }
    /* What is buffered, written as the flusher writes it, without the GIL: a
     * slow or blocked sink stalls this thread, not the program's others
     * (docs/architecture.md "Locks and I/O").  Nothing appends any more. */
    tg_thread_retire_all(r, 1);
    Py_BEGIN_ALLOW_THREADS
    tg_writer_close_nogil(&r->process_w);
    Py_END_ALLOW_THREADS
    tg_note_writer_error(r, &r->process_w);
    tg_writer_release(&r->process_w);
    tg_close_capture(r);
    tg_close_aggregate(r, 1);
    tg_statm_close(r);
    if (tg_active == self) {
        tg_active = NULL;
        Py_DECREF(self);
    }
    return 0;
}

/* --- fork ------------------------------------------------------------------ */

/* pthread_atfork handlers.  fork() holds the locks that are never held across
 * I/O (the thread table's, the capture's defs_lock, the pointer tables'), so
 * the child inherits those tables whole; never a writer's lock or the
 * capture's `lock`, which a write holds across write(2): a fork must not wait
 * for a slow or blocked sink.  The child drops what it inherited; a writer or
 * the capture whose lock was held at the fork (by the flusher's write) is left
 * to that write, leaked, never touched (tg_writer_drop_in_child,
 * tg_cap_drop_in_child).  docs/architecture.md "Locks and I/O". */
static void
tg_atfork_prepare(void)
{
    struct tg_recorder_object *a = tg_active;
    if (a != NULL) {
        pthread_mutex_lock(&a->r.table.lock);
        tg_cap_prepare_fork(&a->r.cap);
    }
    tg_ptrtable_lock_all();
}

static void
tg_atfork_parent(void)
{
    struct tg_recorder_object *a = tg_active;
    tg_ptrtable_unlock_all();
    if (a != NULL) {
        tg_cap_after_fork_parent(&a->r.cap);
        pthread_mutex_unlock(&a->r.table.lock);
    }
}

static void
tg_atfork_child(void)
{
    struct tg_recorder_object *a = tg_active;
    tg_ptrtable_unlock_all();
    tg_sigkick_after_fork_child();
    tg_clock_beat_after_fork_child();  /* exact reads until a restart */
    tg_writer_pool_after_fork_child();  /* before any writer is dropped */
    if (a != NULL) {
        struct tg_thread *lists[3] = { a->r.table.live, a->r.table.ended,
                                        a->r.table.closed };
        struct tg_thread *t;
        int i;
        /* The parent writes these buffers itself: never a second time here.
         * The ended states too (the parent's flusher writes and closes
         * them); one it had taken is on no list: left alone. */
        for (i = 0; i < 3; i++) {
            for (t = lists[i]; t != NULL; t = t->next) {
                tg_writer_drop_in_child(&t->mem);
                tg_writer_drop_in_child(&t->stack);
                tg_writer_drop_in_child(&t->capw);
            }
        }
        tg_writer_drop_in_child(&a->r.process_w);
        tg_writer_drop_in_child(&a->r.process_cap);
        tg_cap_drop_in_child(&a->r.cap);  /* releases defs_lock */
        pthread_mutex_unlock(&a->r.table.lock);
        /* The flusher does not exist in the child; its lock may have been held. */
        a->r.flusher_running = 0;
        a->r.flusher_kicked = 0;
        a->r.flusher_busy = 0;
        a->r.flusher_paused = 0;
        atomic_store(&a->r.flusher_polling, 0);
        pthread_mutex_init(&a->r.flusher_lock, NULL);
        pthread_cond_init(&a->r.flusher_cond, NULL);
        a->r.fork_child_pending = 1;
    }
}

int
tg_recorder_module_init(void)
{
    if (tg_recorder_module_init_code_index() < 0) {
        PyErr_SetString(PyExc_RuntimeError, "no free code object extra slot");
        return -1;
    }
    if (tg_frame_code_check() < 0)
        return -1;
    if (pthread_atfork(tg_atfork_prepare, tg_atfork_parent, tg_atfork_child) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "pthread_atfork failed");
        return -1;
    }
    return 0;
}

/* The states of threads that do not exist in the child, and the inherited
 * (dropped) writers, are freed; the calling thread's state is returned unlisted
 * or NULL. */
static struct tg_thread *
tg_fork_child_reap(struct tg_recorder *r)
{
    return tg_thread_table_reap_child(&r->table, tg_tls.gen == r->gen ? tg_tls.thread : NULL);
}

void
tg_fork_child_stop(struct tg_recorder_object *self)
{
    struct tg_recorder *r = &self->r;
    struct tg_thread *me;

    if (!r->active)
        return;
    r->fork_child_pending = 0;
    r->active = 0;
    r->mon_gen = 0;
    r->default_path = 0;  /* the fast path tests it alone (recorder.h) */
    r->ended_gen = r->gen;
    if (!r->sampled)
        tg_profile_all_threads(self, 0);
    tg_spguard_uninstall();
    tg_threads_unwrap(self);
    tg_sleepwrap_uninstall();
    tg_native_uninstall();  /* native=True (native.c) */
    tg_tmstop_uninstall();
    tg_hooks_uninstall();
    me = tg_fork_child_reap(r);
    if (me != NULL)
        tg_thread_free(me);
    tg_tls.thread = NULL;
    tg_writer_release(&r->process_w);
    tg_writer_release(&r->process_cap);
    tg_cap_close(&r->cap);  /* the parent's file: never written here */
    tg_cap_idtab_clear(&r->cfunc_ids, tg_cfunc_unref);
    if (r->aggregate) {  /* the parent's trees: never written here */
        tg_agg_drop_in_child(&r->agg);
        tg_cap_idtab_clear(&r->agg_cfunc_ids, tg_cfunc_unref);
    }
    tg_statm_close(r);
    if (tg_active == self) {
        tg_active = NULL;
        Py_DECREF(self);
    }
}

int
tg_fork_child_continue(struct tg_recorder_object *self, const char *outdir)
{
    struct tg_recorder *r = &self->r;
    struct tg_thread *me;
    char *dup = strdup(outdir);
    char *name = NULL;
    size_t name_len = 0;
    uintptr_t suppress = 0;

    if (dup == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    r->fork_child_pending = 0;
    free(r->outdir);
    r->outdir = dup;
    me = tg_fork_child_reap(r);
    if (me != NULL) {
        /* Keep the thread's name; its open calls belong to the parent's files:
         * their returns are ignored here, so the child's files pair up. */
        const struct tg_thread_log *e = tg_thread_table_log_find(&r->table, me->ident);
        if (e != NULL) {
            name_len = e->name_len;
            name = malloc(name_len + 1);
            if (name != NULL)
                memcpy(name, e->name, name_len + 1);
        }
        suppress = me->suppress_key;
        tg_thread_free(me);
    }
    tg_tls.thread = NULL;
    tg_thread_table_clear_log(&r->table);
    r->samples_dropped = 0;
    r->samples_taken = 0;
    atomic_store(&r->sample_requests, 0);
    r->sample_requests_taken = 0;
    tg_countdowns_start(r);
    tg_writer_release(&r->process_w);
    tg_writer_release(&r->process_cap);
    tg_cap_close(&r->cap);  /* the parent's: dropped at fork, never written here */
    tg_cap_idtab_clear(&r->cfunc_ids, tg_cfunc_unref);
    if (r->aggregate) {  /* the parent's trees: the child starts its own */
        tg_agg_drop_in_child(&r->agg);
        tg_cap_idtab_clear(&r->agg_cfunc_ids, tg_cfunc_unref);
    }
    tg_statm_close(r);
    tg_statm_open(r);
    if (tg_open_capture(r) < 0 || tg_open_aggregate(r) < 0 || tg_open_process_file(r) < 0) {
        free(name);
        tg_fork_child_stop(self);
        return -1;
    }
    if (r->track_memory || r->track_stack) {
        me = tg_thread_attach(self, name, name_len);
        if (me != NULL)
            me->suppress_key = suppress;  /* still inside the fork hook */
    }
    free(name);
    if (tg_flusher_start(r) < 0) {
        tg_fork_child_stop(self);
        PyErr_SetString(PyExc_OSError, "cannot start the flusher thread");
        return -1;
    }
    if (tg_beat_start_for(r) < 0) {
        tg_flusher_stop(r);
        tg_fork_child_stop(self);
        return -1;
    }
    return 0;
}
