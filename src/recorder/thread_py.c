/*
 * thread_py.c - the thread state's binding side: what needs Python or the
 * recorder around struct tg_thread (thread.c holds the plain-C state and table).
 *
 * A thread's name comes from `threading` (or "Dummy-N"), its files may come from
 * stream_factory, stopped streams are reported as Python strings in r->errors,
 * and the calling thread's state is reached through the thread-local tg_tls.
 * Attach and detach run in the thread itself; retire runs in disable().
 */
#include "thread_py.h"
#include "recorder.h"
#include "tls.h"
#include "sinks.h"
#include "tg_format.h"
#include "names.h"
#include "acct_state.h"
#include "greenlet.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Name of the calling thread as threading knows it (malloc'ed UTF-8), without
 * creating a _DummyThread (threading.current_thread() would); "Dummy-N" when
 * threading does not know it.  GIL held, exception state saved by the caller. */
static char *
tg_thread_name_lookup(struct tg_recorder *r, unsigned long ident, size_t *len)
{
    PyObject *modname = PyUnicode_FromString("threading");
    PyObject *threading = NULL, *active = NULL, *key = NULL, *name = NULL, *b = NULL;
    PyObject *th;
    char *res = NULL;

    if (modname == NULL)
        goto fallback;
    threading = PyImport_GetModule(modname);
    if (threading == NULL)
        goto fallback;
    active = PyObject_GetAttrString(threading, "_active");
    if (active == NULL || !PyDict_Check(active))
        goto fallback;
    key = PyLong_FromUnsignedLong(ident);
    if (key == NULL)
        goto fallback;
    th = PyDict_GetItem(active, key);  /* borrowed */
    if (th == NULL)
        goto fallback;
    name = PyObject_GetAttrString(th, "_name");
    if (name == NULL || !PyUnicode_Check(name))
        goto fallback;
    b = PyUnicode_AsEncodedString(name, "utf-8", "backslashreplace");
    if (b != NULL) {
        *len = (size_t)PyBytes_GET_SIZE(b);
        res = malloc(*len + 1);
        if (res != NULL)
            memcpy(res, PyBytes_AS_STRING(b), *len + 1);
    }
fallback:
    PyErr_Clear();
    if (res == NULL) {
        char buf[48];
        snprintf(buf, sizeof(buf), "Dummy-%lu", ++r->dummy_counter);
        res = strdup(buf);
        *len = strlen(buf);
    }
    Py_XDECREF(modname);
    Py_XDECREF(threading);
    Py_XDECREF(active);
    Py_XDECREF(key);
    Py_XDECREF(name);
    Py_XDECREF(b);
    return res;
}

void
tg_note_path_error(struct tg_recorder *r, const char *path, const char *leaf, int err)
{
    PyObject *p, *msg = NULL;

    if (r->errors == NULL)
        return;
    /* Not PyUnicode_FromFormat's %s: it decodes UTF-8 with "replace", and a
     * path that is not UTF-8 would be shown as another (U+FFFD for its bytes). */
    p = PyUnicode_DecodeFSDefault(path != NULL ? path : "?");
    if (p != NULL)
        msg = PyUnicode_FromFormat("%U%s%s: %s (errno %d)", p, leaf != NULL ? "/" : "",
                                   leaf != NULL ? leaf : "", strerror(err), err);
    /* Every thread's capture stream reports the capture's error: once is enough. */
    if (msg != NULL && PySequence_Contains(r->errors, msg) == 0)
        PyList_Append(r->errors, msg);
    Py_XDECREF(msg);
    Py_XDECREF(p);
    PyErr_Clear();
}

/* Append "PATH: reason" for a stopped writer to r->errors.  GIL held. */
void
tg_note_writer_error(struct tg_recorder *r, struct tg_writer *w)
{
    int err = atomic_load(&w->err);
    if (err)
        tg_note_path_error(r, w->path, NULL, err);
}

/* tg_thread_close_writers's NOTE. */
static void
tg_thread_note(void *r, struct tg_writer *w)
{
    tg_note_writer_error(r, w);
}

/* Open W as STREAM ("mem" or "stack") for a thread with base name BASE: the
 * stream_factory's file, or <outdir>/<base>.<stream>.  Failures leave W stopped
 * (reported at disable) and return -1. */
static int
tg_thread_open_stream(struct tg_recorder *r, struct tg_writer *w, const char *base,
                      const char *stream)
{
    char *path;
    size_t n;
    int ret;

    n = strlen(r->outdir) + strlen(base) + strlen(stream) + 3;
    path = malloc(n);
    if (path == NULL)
        return -1;
    snprintf(path, n, "%s/%s.%s", r->outdir, base, stream);
    if (r->stream_factory != NULL) {
        PyObject *f = PyObject_CallFunction(r->stream_factory, "s", stream);
        if (f == NULL) {
            PyObject *msg = PyUnicode_FromFormat("stream_factory(%s) failed for %s", stream, base);
            PyErr_Clear();
            if (msg != NULL) {
                PyList_Append(r->errors, msg);
                Py_DECREF(msg);
            }
            PyErr_Clear();
            ret = -1;
        } else {
            ret = tg_sink_open_pyfile(w, f, path);
            Py_DECREF(f);
        }
    } else {
        ret = tg_writer_open_path(w, path);
    }
    free(path);
    return ret < 0 ? -1 : 0;
}

/* Whether the run of generation GEN is still recording.  Attaching calls Python
 * (the thread's name from threading, a stream_factory): meanwhile another
 * thread may disable() the run, or disable and enable a new one. */
static int
tg_run_still(const struct tg_recorder *r, uint64_t gen)
{
    return r->gen == gen && r->ended_gen != gen;
}

/* tg_thread_open_files: the run ended while a stream_factory ran. */
#define TG_OPEN_RUN_ENDED (-2)

/* Open T's files under the base name of the run's log entry IDX.  GIL held.
 * Returns 0, -1 with the failure left in the writers (or r->errors), or
 * TG_OPEN_RUN_ENDED if the run of generation GEN ended meanwhile (its capture
 * is closed: nothing more is opened).
 *
 * A stream_factory is Python: while it runs the GIL may pass to a thread whose
 * first event attaches it and grows the log, moving its entries.  So the entry
 * is looked up by index after each open, never kept as a pointer; its strings
 * (base, name) are separate allocations that do not move. */
static int
tg_thread_open_files(struct tg_recorder *r, struct tg_thread *t, size_t idx, uint64_t gen)
{
    const char *base = r->table.log[idx].base;
    const struct tg_thread_log *log;
    int ret = 0;
    if (r->text_mem && tg_thread_open_stream(r, &t->mem, base, "mem") < 0)
        ret = -1;
    if (!tg_run_still(r, gen))
        return TG_OPEN_RUN_ENDED;  /* BASE may be freed: a new run cleared the log */
    if (r->text_stack && tg_thread_open_stream(r, &t->stack, base, "stack") < 0)
        ret = -1;
    if (!tg_run_still(r, gen))
        return TG_OPEN_RUN_ENDED;
    log = &r->table.log[idx];
    if (r->aggregate && t->agg == NULL
            && (t->agg = tg_agg_thread_new(&r->agg, log->base, log->native_id,
                                           log->seq)) == NULL)
        ret = -1;  /* its calls are not counted */
    if (r->fmt_binary) {
        int e;
        t->stream = TG_CAP_STREAM_FIRST + (uint32_t)log->seq;
        t->cap_us = r->cap.start_us;
        t->cap_level0 = tg_tls.allocated - tg_tls.freed;  /* on T's own thread */
        t->cap_level_on = r->level_marks && t->glet_root == NULL;
        /* Times never precede the capture's start_us (dt_us is unsigned). */
        if (t->clock.last_ns < r->cap.start_us * 1000)
            t->clock.last_ns = r->cap.start_us * 1000;
        if (tg_sink_open_chunks(&t->capw, &r->cap, TG_CAP_CHUNK_EVENTS, t->stream,
                                r->cap.path ? r->cap.path : TG_CAP_FILENAME) < 0)
            return -1;
        {
            /* the name cut to TG_TEXT_MAX (a definition is one chunk) */
            char *name = log->name_len > TG_TEXT_MAX ? malloc(TG_TEXT_MAX) : NULL;
            size_t name_len = log->name_len;
            if (name != NULL)
                name_len = tg_text_cap(log->name, log->name_len, name);
            e = log->name_len > TG_TEXT_MAX && name == NULL ? ENOMEM
                : tg_cap_thread(&r->cap, t->stream, log->native_id, log->ident, log->base,
                                strlen(log->base), name ? name : log->name, name_len);
            free(name);
        }
        if (e) {
            atomic_store(&t->capw.err, e);
            ret = -1;
        }
    }
    return ret;
}

/* tg_thread_attach, or with GLET tg_thread_attach_greenlet. */
static struct tg_thread *
tg_thread_attach_as(struct tg_recorder_object *self, const char *name, size_t name_len,
                    int glet)
{
    struct tg_recorder *r = &self->r;
    struct tg_thread *t;
    tg_saved_exc saved;
    int busy = tg_tls.busy;
    uint64_t gen = r->gen;
    char *owned_name;
    long idx;

    tg_tls.busy |= TG_BUSY_TRACER;
    tg_exc_save(&saved);
    t = tg_thread_new(&r->table, r->gen, PyThread_get_thread_ident(),
                      PyThread_get_thread_native_id());
    if (t == NULL)
        goto done;
    if (name != NULL) {
        owned_name = malloc(name_len + 1);
        if (owned_name != NULL) {
            memcpy(owned_name, name, name_len);
            owned_name[name_len] = '\0';
        }
    } else {
        owned_name = tg_thread_name_lookup(r, t->ident, &name_len);
    }
    if (owned_name == NULL)
        goto fail;
    if (!tg_run_still(r, gen)) {  /* disabled during the name lookup */
        free(owned_name);
        goto fail;
    }
    idx = tg_thread_table_log_add(&r->table, owned_name, name_len, t->ident, t->native_id,
                                  r->text_mem, r->text_stack, r->stream_factory != NULL);
    if (idx < 0) {
        free(owned_name);
        goto fail;
    }
    if (glet)  /* before it is listed: no lookup by thread ever finds it */
        tg_thread_table_log_greenlet(&r->table, (size_t)idx);
    /* A run that ended during a stream_factory call is not joined: the thread
     * and its streams are dropped, and its events go unrecorded. */
    if (tg_thread_open_files(r, t, (size_t)idx, gen) == TG_OPEN_RUN_ENDED)
        goto fail;  /* its entry stays "attaching": runinfo.json leaves it out */
    t->log_idx = (size_t)r->table.log[idx].seq;
    tg_thread_table_log_joined(&r->table, (size_t)idx);
    tg_thread_table_add(&r->table, t);
    /* its counters, not reset by a run (another thread cannot write them):
     * where its curve starts */
    if (r->track_memory && r->memory_mode == TG_MEM_THREAD)
        t->curve_base = tg_tls.allocated - tg_tls.freed;
    tg_tls.thread = t;
    tg_tls.gen = r->gen;
    if (!glet)
        tg_glet_thread_attached(self, t);
    /* Sampled mode: the thread's root ("no python frame") now, with the GIL,
     * which interning needs.  A sample taken without the GIL (a native or
     * raw-domain block of a C section that released it: numpy.zeros, a ctypes
     * call, lzma) goes to the thread's root (sampled.c), or, while the thread
     * has none, to the thread-less <no python frame>: a thread whose first
     * samples are all such lost them to no thread. */
    if (r->sampled && atomic_load_explicit(&tg_acct_on, memory_order_relaxed)) {
        struct tg_acct_thread *at = tg_acct_self();
        if (at != NULL)
            (void)tg_acct_root(at);
    }
    goto done;
fail:
    tg_thread_free(t);
    t = NULL;
done:
    tg_exc_restore(&saved);
    tg_tls.busy = busy;
    return t;
}

struct tg_thread *
tg_thread_attach(struct tg_recorder_object *self, const char *name, size_t name_len)
{
    return tg_thread_attach_as(self, name, name_len, 0);
}

struct tg_thread *
tg_thread_attach_greenlet(struct tg_recorder_object *self, const char *name, size_t name_len)
{
    return tg_thread_attach_as(self, name, name_len, 1);
}

/* Flush and release T's owner-only (Python) streams, noting a stopped one:
 * only their producer writes them, with the GIL (writer.h).  GIL held. */
static void
tg_thread_close_owned(struct tg_recorder *r, struct tg_thread *t)
{
    struct tg_writer *ws[3] = { &t->mem, &t->stack, &t->capw };
    int i;

    for (i = 0; i < 3; i++) {
        if (ws[i]->pyfile == NULL)
            continue;
        tg_writer_flush(ws[i]);
        tg_note_writer_error(r, ws[i]);
        tg_writer_release(ws[i]);
    }
}

/* Write and close T's other files, then queue its capture stream's end (the
 * END counters) after its last chunk.  No GIL needed, none held (the
 * flusher, or disable() with the GIL released): T's thread appends nothing
 * any more, its owner-only streams are closed, no flusher pass uses T.  A
 * slow or blocked sink stalls only the caller.  Out of memory for the end:
 * the thread is left out of the trailer. */
static void
tg_thread_finish_nogil(struct tg_recorder *r, struct tg_thread *t)
{
    tg_writer_close_nogil(&t->mem);
    tg_writer_close_nogil(&t->stack);
    tg_writer_close_nogil(&t->capw);
    if (t->stream != 0)
        (void)tg_cap_deposit(&r->cap, t->stream, t->cap_calls, t->cap_returns, t->cap_dropped);
}

void
tg_thread_close_ended(struct tg_recorder *r)
{
    struct tg_thread *list = tg_thread_table_take_ended(&r->table), *t;

    for (t = list; t != NULL; t = t->next)
        tg_thread_finish_nogil(r, t);
    tg_thread_table_closed_add(&r->table, list);
}

/* Report the stopped streams of the states the flusher closed, and free
 * them.  GIL held; no I/O (their files are closed). */
static void
tg_thread_reap_closed(struct tg_recorder *r)
{
    struct tg_thread *t = tg_thread_table_take_closed(&r->table), *next;

    for (; t != NULL; t = next) {
        next = t->next;
        tg_thread_close_writers(t, tg_thread_note, r);
        tg_thread_free(t);
    }
}

void
tg_thread_end_state(struct tg_recorder_object *self, struct tg_thread *t)
{
    struct tg_recorder *r = &self->r;

    tg_thread_close_owned(r, t);
    if (t->noted)  /* a gc run or a mark names it: a fold keeps its family */
        tg_thread_table_log_note(&r->table, t->log_idx);
    if (t->agg != NULL) {  /* kept whole, or folded with its family's (aggregate.h) */
        char family[TG_AGG_FAMILY_CAP];
        uint64_t folded;
        unsigned long fid_ident, fid_native;
        /* a greenlet's family (greenlets fold with greenlets, by name) is
         * not the accounting's, which counts by thread */
        int acct = atomic_load_explicit(&tg_acct_on, memory_order_relaxed)
                   && t->glet_root == NULL;
        /* the thread folded (an older one) leaves the log too, unless the
         * accounting names it from there; out of memory, it stays listed
         * under its own name, which is harmless.  The accounting then
         * recycles its calling-context nodes (acct_recycle.h). */
        if (tg_agg_thread_end(&r->agg, t->agg, &folded, family)
                && tg_thread_table_log_fold(&r->table, folded, family, acct, &fid_ident,
                                            &fid_native) == 0 && acct)
            tg_acct_thread_folded(fid_ident, fid_native, family);
    }
    /* The rest of its files are the flusher's to write and close: a thread
     * ending (GIL held) never waits for a write, not even one of its own
     * stream that is stuck (docs/architecture.md "Locks and I/O"). */
    tg_thread_table_end(&r->table, t);
    tg_thread_reap_closed(r);
}

void
tg_thread_detach(struct tg_recorder_object *self)
{
    struct tg_recorder *r = &self->r;
    struct tg_thread *t = tg_tls.thread;
    int busy = tg_tls.busy;

    if (t == NULL || !r->active || tg_tls.gen != r->gen)
        return;  /* disable() already retired it */
    tg_tls.busy |= TG_BUSY_TRACER;
    /* Thread NULL with the run's generation: the thread ended; events it still
     * produces (sys.monitoring reaches every thread) are not recorded. */
    tg_tls.thread = NULL;
    tg_tls.gen = r->gen;
    if (t->glet_root != NULL)  /* it ended in a greenlet: a switch went unseen */
        t = t->glet_root;
    tg_sampled_curve_last(r, t);  /* its frees since its last sample */
    tg_glet_end_all(self, t);  /* its greenlets' states first: they list in it */
    tg_thread_end_state(self, t);
    tg_tls.busy = busy;
}

void
tg_thread_retire_all(struct tg_recorder *r, int release_gil)
{
    PyThreadState *ts = NULL;

    struct tg_thread *list = tg_thread_table_take_live(&r->table), *t, *next;

    for (t = list; t != NULL; t = t->next) {
        tg_sampled_curve_last(r, t);  /* the figure it ends the run at */
        tg_thread_close_owned(r, t);
        tg_thread_table_settle(&r->table, t);  /* final: nothing records any more */
    }
    /* The writes, as the flusher makes them, without the GIL: a slow or
     * blocked sink stalls this thread, not the program's others. */
    if (release_gil)
        ts = PyEval_SaveThread();
    /* The threads that ended before, then the live ones: these ran to the
     * end, and the segments kept carry them all, the ones whose last chunk a
     * later one's rotation drops too. */
    tg_thread_close_ended(r);
    tg_cap_keep_ended(&r->cap);
    for (t = list; t != NULL; t = t->next)
        tg_thread_finish_nogil(r, t);
    if (ts != NULL)
        PyEval_RestoreThread(ts);
    for (t = list; t != NULL; t = next) {
        next = t->next;
        tg_thread_close_writers(t, tg_thread_note, r);  /* reports; no I/O left */
        tg_thread_table_retire(&r->table, t);
    }
    tg_thread_reap_closed(r);
}
