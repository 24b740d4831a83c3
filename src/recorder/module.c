/*
 * module.c - the Python binding: module threadgraph._recorder and its type
 * Recorder.  Argument parsing and conversion only; the engine is recorder.c
 * and lifecycle.c.  threadgraph/profiler.py wraps Recorder as ProcessProfile.
 */
#include <limits.h>

#include "recorder.h"
#include "greenlet.h"
#include "lifecycle.h"
#include "thread_start.h"
#include "thread_py.h"
#include "tls.h"
#include "accounting.h"
#include "ptrtable.h"
#include "ptrpage.h"
#include "hook_count.h"
#include "names.h"
#include "native.h"
#include "sampled.h"
#include "options.h"
#include "sigkick.h"
#include "gcwatch.h"

#include <stdlib.h>
#include <string.h>

static PyObject *
tg_rec_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    struct tg_recorder_object *self;
    (void)args;
    (void)kwargs;
    self = (struct tg_recorder_object *)type->tp_alloc(type, 0);
    if (self != NULL)
        tg_recorder_init(&self->r);
    return (PyObject *)self;
}

static void
tg_rec_dealloc(struct tg_recorder_object *self)
{
    tg_recorder_dealloc(&self->r);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Escaped UTF-8 copy of STR as the records would show it (malloc'ed). */
static char *
tg_escaped_copy(PyObject *str, size_t *len)
{
    PyObject *b = PyUnicode_AsEncodedString(str, "utf-8", "backslashreplace");
    char *res;
    size_t n;
    if (b == NULL)
        return NULL;
    n = tg_escaped_len(PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
    res = malloc(n + 1);
    if (res == NULL) {
        Py_DECREF(b);
        PyErr_NoMemory();
        return NULL;
    }
    tg_escape(res, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
    res[n] = '\0';
    *len = n;
    Py_DECREF(b);
    return res;
}

/* Convert the sleep triggers (C functions, method descriptors, Python functions
 * or code objects) into R's tables.  Returns 0 or -1 with TypeError. */
static int
tg_set_triggers(struct tg_recorder *r, PyObject *seq)
{
    PyObject *fast = PySequence_Fast(seq, "triggers must be a sequence");
    Py_ssize_t i, n;

    if (fast == NULL)
        return -1;
    n = PySequence_Fast_GET_SIZE(fast);
    r->trig_defs = calloc((size_t)n + 1, sizeof(*r->trig_defs));
    r->trig_codes = calloc((size_t)n + 1, sizeof(*r->trig_codes));
    if (r->trig_defs == NULL || r->trig_codes == NULL) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    for (i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(fast, i);
        if (PyCFunction_Check(o)) {
            r->trig_defs[r->n_trig_defs++] = ((PyCFunctionObject *)o)->m_ml;
        } else if (Py_TYPE(o) == &PyMethodDescr_Type) {
            r->trig_defs[r->n_trig_defs++] = ((PyMethodDescrObject *)o)->d_method;
        } else if (PyFunction_Check(o) || PyCode_Check(o)) {
            PyObject *code = PyFunction_Check(o) ? PyFunction_GET_CODE(o) : o;
            Py_INCREF(code);
            r->trig_codes[r->n_trig_codes++] = code;
        } else {
            PyErr_Format(PyExc_TypeError,
                         "a sleep trigger must be a builtin function, a method "
                         "descriptor or a Python function, not %.100s",
                         Py_TYPE(o)->tp_name);
            Py_DECREF(fast);
            return -1;
        }
    }
    Py_DECREF(fast);
    return 0;
}

PyDoc_STRVAR(tg_rec_enable_doc,
"enable(outdir, *, profile='both', memory='thread', filter=None, track_memory=True,\n"
"       track_stack=False, track_sleeps=True, timestamps=True,\n"
"       sample_every=" TG_STR(TG_DEFAULT_SAMPLE_EVERY) ",\n"
"       stream_factory=None, exclude_file=None, triggers=(), accounting=False,\n"
"       compress=False, backend='auto', native=False, format='binary', sample_bytes=0,\n"
"       mode='full', max_size=0, aggregate=False, time_resolution='us')\n"
"Start recording into the existing directory OUTDIR.");

static PyObject *
tg_rec_enable(struct tg_recorder_object *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"outdir", "profile", "memory", "filter", "track_memory",
                             "track_stack", "track_sleeps", "timestamps", "sample_every",
                             "stream_factory", "exclude_file", "triggers", "accounting",
                             "compress", "backend", "native", "format", "sample_bytes",
                             "mode", "max_size", "aggregate", "time_resolution", NULL};
    struct tg_recorder *r = &self->r;
    PyObject *outdir_bytes = NULL;  /* os.fsencode(outdir): released on every exit */
    PyObject *res = NULL;
    const char *outdir, *profile = tg_choice_default(&tg_opt_profile);
    const char *memory = tg_choice_default(&tg_opt_memory);
    const char *backend = tg_choice_default(&tg_opt_backend);
    const char *format = tg_choice_default(&tg_opt_format);
    const char *mode = tg_choice_default(&tg_opt_mode);
    const char *time_resolution = tg_choice_default(&tg_opt_time_resolution);
    const struct tg_choice *choice;
    PyObject *filter = Py_None, *factory = Py_None, *exclude = Py_None, *triggers = NULL;
    int track_memory = TG_DEFAULT_TRACK_MEMORY, track_stack = TG_DEFAULT_TRACK_STACK;
    int track_sleeps = TG_DEFAULT_TRACK_SLEEPS, timestamps = TG_DEFAULT_TIMESTAMPS;
    long sample_every = TG_DEFAULT_SAMPLE_EVERY;
    int accounting = TG_DEFAULT_ACCOUNTING, compress = TG_DEFAULT_COMPRESS;
    int native = TG_DEFAULT_NATIVE;
    long long sample_bytes = 0, max_size = 0;
    int aggregate = 0;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&|$ssOpppplOOOppspsLsLps:enable", kwlist,
                                     PyUnicode_FSConverter, &outdir_bytes, &profile,
                                     &memory, &filter, &track_memory,
                                     &track_stack, &track_sleeps, &timestamps,
                                     &sample_every, &factory, &exclude, &triggers,
                                     &accounting, &compress, &backend, &native, &format,
                                     &sample_bytes, &mode, &max_size, &aggregate,
                                     &time_resolution))
        return NULL;
    outdir = PyBytes_AS_STRING(outdir_bytes);
    if (r->active) {
        PyErr_SetString(PyExc_RuntimeError, "this profiler is already enabled");
        goto release_outdir;
    }
    if (tg_active != NULL) {
        tg_recorder_enable(self);  /* raises the one-profiler-at-a-time error */
        goto release_outdir;
    }
    tg_recorder_clear_config(r);
    if ((choice = tg_choice_find(&tg_opt_profile, profile)) == NULL) {
        tg_choice_error(&tg_opt_profile, profile);
        goto release_outdir;
    }
    r->record_python = (choice->value & TG_PROFILE_PYTHON) != 0;
    r->record_c = (choice->value & TG_PROFILE_C) != 0;
    if ((choice = tg_choice_find(&tg_opt_memory, memory)) == NULL) {
        tg_choice_error(&tg_opt_memory, memory);
        goto release_outdir;
    }
    r->memory_mode = (enum tg_memory_mode)choice->value;
    if ((choice = tg_choice_find(&tg_opt_backend, backend)) == NULL) {
        tg_choice_error(&tg_opt_backend, backend);
        goto release_outdir;
    }
    r->backend_auto = choice->value == TG_BACKEND_AUTO;
    if (r->backend_auto)
        r->backend = TG_HAVE_MONITORING ? TG_BACKEND_MONITORING : TG_BACKEND_SETPROFILE;
    else if (choice->value == TG_BACKEND_MONITORING && !TG_HAVE_MONITORING) {
        PyErr_SetString(PyExc_ValueError,
                        "backend 'monitoring' needs CPython 3.12 or 3.13 (sys.monitoring)");
        goto release_outdir;
    } else
        r->backend = (enum tg_backend)choice->value;
    if ((choice = tg_choice_find(&tg_opt_format, format)) == NULL) {
        tg_choice_error(&tg_opt_format, format);
        goto release_outdir;
    }
    r->fmt_text = (choice->value & TG_FORMAT_TEXT) != 0;
    r->fmt_binary = (choice->value & TG_FORMAT_BINARY) != 0;
    if (r->fmt_binary && factory != Py_None) {
        PyErr_SetString(PyExc_ValueError,
                        "stream_factory gives text streams: it needs format='text'");
        goto release_outdir;
    }
    if ((choice = tg_choice_find(&tg_opt_mode, mode)) == NULL) {
        tg_choice_error(&tg_opt_mode, mode);
        goto release_outdir;
    }
    r->sampled = choice->value == TG_MODE_SAMPLED;
    if ((choice = tg_choice_find(&tg_opt_time_resolution, time_resolution)) == NULL) {
        tg_choice_error(&tg_opt_time_resolution, time_resolution);
        goto release_outdir;
    }
    r->time_beat = choice->value == TG_TIME_MS;
    if (r->sampled && (!accounting || sample_bytes <= 0 || r->fmt_binary
                       || factory != Py_None || track_stack)) {
        PyErr_SetString(PyExc_ValueError,
                        "mode 'sampled' needs accounting with sample_bytes > 0 and "
                        "format='text', without stream_factory or stacks");
        goto release_outdir;
    }
    r->cap_compress = compress;
    if (max_size != 0 && (max_size < (long long)TG_CAP_MAX_SIZE_MIN || r->fmt_text)) {
        PyErr_Format(PyExc_ValueError, r->fmt_text
                     ? "max_size bounds the binary capture: it needs format='binary'"
                     : "max_size must be 0 (no limit) or at least %u bytes",
                     (unsigned)TG_CAP_MAX_SIZE_MIN);
        goto release_outdir;
    }
    r->cap_max_size = (unsigned long long)max_size;
    if (aggregate && (r->fmt_text || r->sampled || max_size != 0 || !track_memory)) {
        PyErr_SetString(PyExc_ValueError,
                        "aggregate=True writes aggregate.tga instead of the capture: it needs "
                        "format='binary' (the default), mode='full', track_memory=True "
                        "and no max_size");
        goto release_outdir;
    }
    r->aggregate = aggregate;
    if (aggregate)
        r->fmt_binary = 0;  /* no record per call: aggregate.tga alone */
    r->track_memory = track_memory;
    r->track_stack = track_stack;
    r->track_sleeps = track_sleeps;
    r->timestamps = timestamps;
    r->sample_every = sample_every > 0 ? sample_every : 0;
    r->outdir = strdup(outdir);
    if (r->outdir == NULL)
        goto nomem;
    if (filter != Py_None) {
        if (!PyUnicode_Check(filter)) {
            PyErr_SetString(PyExc_TypeError, "filter must be a str or None");
            goto fail;
        }
        if (PyUnicode_GET_LENGTH(filter) > 0
                && (r->filter = tg_escaped_copy(filter, &r->filter_len)) == NULL)
            goto fail;
    }
    if (exclude != Py_None) {
        if (!PyUnicode_Check(exclude)) {
            PyErr_SetString(PyExc_TypeError, "exclude_file must be a str or None");
            goto fail;
        }
        if ((r->exclude_file = tg_escaped_copy(exclude, &r->exclude_len)) == NULL)
            goto fail;
    }
    if (factory != Py_None) {
        if (!PyCallable_Check(factory)) {
            PyErr_SetString(PyExc_TypeError, "stream_factory must be callable");
            goto fail;
        }
        Py_INCREF(factory);
        r->stream_factory = factory;
    }
    if (triggers != NULL && tg_set_triggers(r, triggers) < 0)
        goto fail;
    if (r->sampled && tg_sampled_start() < 0)
        goto fail;
    if (accounting && tg_acct_start(outdir, compress, sample_bytes,
                                    r->sampled ? tg_sampled_site : NULL, &r->table) < 0) {
        tg_sampled_stop();
        goto fail;
    }
    if (tg_recorder_enable(self) < 0) {
        tg_acct_stop();
        tg_sampled_stop();
        goto fail;
    }
    if (native && tg_native_install() < 0) {  /* native=True: native.c */
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        tg_recorder_disable(self);
        tg_acct_stop();
        tg_sampled_stop();
        PyErr_Restore(t, v, tb);
        goto fail;
    }
    Py_INCREF(Py_None);
    res = Py_None;
    goto release_outdir;
nomem:
    PyErr_NoMemory();
fail:
    tg_recorder_clear_config(r);
release_outdir:
    Py_DECREF(outdir_bytes);
    return res;
}

static PyObject *
tg_rec_disable(struct tg_recorder_object *self, PyObject *unused)
{
    PyObject *errors;
    (void)unused;
    int acct = atomic_load(&tg_acct_on);
    if (tg_recorder_disable(self) < 0)
        return NULL;
    if (acct) {
        /* After the hooks are gone: the figures and the final snapshot are still. */
        tg_acct_stop();
        tg_sampled_stop();
        if (tg_acct_finish(&self->r.table) < 0) {
            PyObject *t, *v, *tb, *msg;
            PyErr_Fetch(&t, &v, &tb);
            msg = v ? PyObject_Str(v) : NULL;
            if (msg != NULL && self->r.errors != NULL)
                PyList_Append(self->r.errors, msg);
            Py_XDECREF(msg);
            Py_XDECREF(t);
            Py_XDECREF(v);
            Py_XDECREF(tb);
            PyErr_Clear();
        }
    }
    errors = self->r.errors ? self->r.errors : PyList_New(0);
    if (self->r.errors)
        Py_INCREF(errors);
    Py_CLEAR(self->r.errors);
    self->r.errors = PyList_New(0);
    if (self->r.errors == NULL)
        PyErr_Clear();
    return errors;
}

/* An aggregate run's ended threads folded by family (thread.h): [(base, n)]. */
static PyObject *
tg_rec_folded_threads(struct tg_recorder_object *self, PyObject *unused)
{
    struct tg_thread_table *tt = &self->r.table;
    PyObject *list = PyList_New(0);
    size_t i;
    (void)unused;

    if (list == NULL)
        return NULL;
    pthread_mutex_lock(&tt->lock);
    for (i = 0; i < tt->n_families; i++) {
        PyObject *item = Py_BuildValue("(sK)", tt->families[i].base,
                                       (unsigned long long)tt->families[i].threads);
        if (item == NULL || PyList_Append(list, item) < 0) {
            Py_XDECREF(item);
            Py_CLEAR(list);
            break;
        }
        Py_DECREF(item);
    }
    pthread_mutex_unlock(&tt->lock);
    return list;
}

/*
 * thread_index() -> index or None: the calling thread's index in the run (as
 * position() gives it, in an aggregate run too, which has no records to place
 * it in), noted (thread.h tg_thread_log.noted) so that an aggregate run that
 * folds the thread keeps its family for families().  None when the thread is
 * not recorded in this run.
 */
static PyObject *
tg_rec_thread_index(struct tg_recorder_object *self, PyObject *unused)
{
    struct tg_recorder *r = &self->r;
    struct tg_thread *t = tg_tls.thread;
    (void)unused;

    if (t == NULL || !r->active || tg_tls.gen != r->gen)
        Py_RETURN_NONE;
    t->noted = 1;  /* in the log at its end (thread_py.c tg_thread_detach) */
    return PyLong_FromSize_t(t->log_idx);
}

/* families(indexes) -> [name or None]: for each thread index, the name of the
 * family entry an aggregate run folded it into (runinfo.json's
 * threads_folded), if it was noted (thread_index(), a gc run) and folded. */
static PyObject *
tg_rec_families(struct tg_recorder_object *self, PyObject *seqs)
{
    struct tg_thread_table *tt = &self->r.table;
    PyObject *fast = PySequence_Fast(seqs, "families() takes a sequence of indexes");
    PyObject *list = NULL;
    Py_ssize_t i, n;
    uint64_t *v = NULL;

    if (fast == NULL)
        return NULL;
    n = PySequence_Fast_GET_SIZE(fast);
    v = malloc((size_t)(n > 0 ? n : 1) * sizeof(*v));
    if (v == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (i = 0; i < n; i++) {
        v[i] = (uint64_t)PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(fast, i));
        if (PyErr_Occurred())
            goto done;
    }
    list = PyList_New(n);
    if (list == NULL)
        goto done;
    /* names copied under the lock, Python objects made after it */
    {
        char **names = calloc((size_t)(n > 0 ? n : 1), sizeof(*names));
        int oom = names == NULL;
        if (names != NULL) {
            pthread_mutex_lock(&tt->lock);
            for (i = 0; i < n; i++) {
                const char *f = tg_thread_table_family_of_unlocked(tt, v[i]);
                if (f != NULL && (names[i] = strdup(f)) == NULL)
                    oom = 1;
            }
            pthread_mutex_unlock(&tt->lock);
        }
        for (i = 0; i < n && !oom; i++) {
            PyObject *o = Py_None;
            if (names[i] != NULL)
                o = PyUnicode_DecodeUTF8(names[i], (Py_ssize_t)strlen(names[i]),
                                         "surrogateescape");
            else
                Py_INCREF(o);
            if (o == NULL)
                break;
            PyList_SET_ITEM(list, i, o);
        }
        if (names != NULL)
            for (Py_ssize_t k = 0; k < n; k++)
                free(names[k]);
        free(names);
        if (oom)
            PyErr_NoMemory();
        if (i < n)
            Py_CLEAR(list);
    }
done:
    free(v);
    Py_DECREF(fast);
    return list;
}

static PyObject *
tg_rec_threads(struct tg_recorder_object *self, PyObject *unused)
{
    struct tg_recorder *r = &self->r;
    PyObject *list = PyList_New(0);
    char *name;
    size_t i;
    (void)unused;

    if (list == NULL)
        return NULL;
    /* a name as the capture's THREAD definition has it: cut to TG_TEXT_MAX, so
     * that a thread named with megabytes of text does not fill runinfo.json */
    name = malloc(TG_TEXT_MAX);
    if (name == NULL) {
        Py_DECREF(list);
        return PyErr_NoMemory();
    }
    pthread_mutex_lock(&r->table.lock);
    for (i = 0; i < r->table.n_log; i++) {
        struct tg_thread_log *e = &r->table.log[i];
        char mem[TG_BASENAME_CAP + 8], stack[TG_BASENAME_CAP + 8];
        PyObject *d;
        size_t name_len;
        if (e->attaching || e->folded)
            continue;  /* the run ended while it opened its streams: no records;
                        * or an aggregate run folded it (folded_threads) */
        snprintf(mem, sizeof(mem), "%s.mem", e->base);
        snprintf(stack, sizeof(stack), "%s.stack", e->base);
        name_len = tg_text_cap(e->name, e->name_len, name);
        d = Py_BuildValue("{s:K,s:N,s:k,s:k,s:s,s:z,s:z}", "index",
                          (unsigned long long)e->seq,
                          "name", PyUnicode_DecodeUTF8(name, (Py_ssize_t)name_len,
                                                       "surrogateescape"),
                          "native_id", e->native_id, "ident", e->ident,
                          "base", e->base,
                          "mem", (e->has_mem && !e->custom) ? mem : NULL,
                          "stack", (e->has_stack && !e->custom) ? stack : NULL);
        if (d == NULL || PyList_Append(list, d) < 0) {
            Py_XDECREF(d);
            Py_CLEAR(list);
            break;
        }
        Py_DECREF(d);
    }
    pthread_mutex_unlock(&r->table.lock);
    free(name);
    return list;
}

static PyObject *
tg_rec_stats(struct tg_recorder_object *self, PyObject *unused)
{
    struct tg_recorder *r = &self->r;
    uint64_t records, stack_records, dropped, unwound, displaced;
    size_t threads;
    PyObject *tool, *outdir;
    (void)unused;

    tg_thread_table_totals(&r->table, &records, &stack_records, &dropped, &threads);
    tg_thread_table_losses(&r->table, &unwound, &displaced);
    displaced += r->mon_yielded;  /* the program took our sys.monitoring tool id */
    dropped += atomic_load_explicit(&r->samples_dropped, memory_order_relaxed);
    if (r->mon_tool_run >= 0) {
        tool = PyLong_FromLong(r->mon_tool_run);
    } else {
        Py_INCREF(Py_None);
        tool = Py_None;
    }
    if (tool == NULL)
        return NULL;
    /* the directory's name as os.fsdecode() gives it: it need not be UTF-8 */
    if (r->outdir != NULL) {
        outdir = PyUnicode_DecodeFSDefault(r->outdir);
    } else {
        Py_INCREF(Py_None);
        outdir = Py_None;
    }
    if (outdir == NULL) {
        Py_DECREF(tool);
        return NULL;
    }
    return Py_BuildValue("{s:n,s:K,s:K,s:K,s:K,s:K,s:K,s:N,s:s,s:z,s:K,s:N,s:O}",
                         "threads", (Py_ssize_t)threads,
                         "records", (unsigned long long)records,
                         "stack_records", (unsigned long long)stack_records,
                         "dropped", (unsigned long long)dropped,
                         "unwound", (unsigned long long)unwound,
                         "displaced", (unsigned long long)displaced,
                         "process_samples",
                         (unsigned long long)atomic_load_explicit(&r->samples_taken,
                                                                  memory_order_relaxed),
                         "output_dir", outdir,
                         "clock", tg_clock_source_name(),
                         "capture", !r->fmt_binary ? NULL : r->cap_max_size
                         ? TG_CAP_SEG_PREFIX "*" TG_CAP_SEG_SUFFIX : TG_CAP_FILENAME,
                         /* a head longer than max_size allows (0: the limit held) */
                         "capture_over_limit", (unsigned long long)tg_cap_over_limit(&r->cap),
                         "monitoring_tool", tool,
                         "monitoring_ids_taken", r->mon_taken ? Py_True : Py_False);
}

/* --- allocation accounting (accounting.c) --- */

static PyObject *
tg_rec_snapshot(struct tg_recorder_object *self, PyObject *args)
{
    const char *label = "snapshot";
    (void)self;
    if (!PyArg_ParseTuple(args, "|s:snapshot", &label))
        return NULL;
    if (!atomic_load(&tg_acct_on)) {
        PyErr_SetString(PyExc_RuntimeError, "allocation accounting is not on");
        return NULL;
    }
    return tg_acct_snapshot(label);
}

static PyObject *
tg_rec_snapshot_peak(struct tg_recorder_object *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (!atomic_load(&tg_acct_on)) {
        PyErr_SetString(PyExc_RuntimeError, "allocation accounting is not on");
        return NULL;
    }
    return tg_acct_snapshot_peak();
}

static PyObject *
tg_rec_snapshot_when(struct tg_recorder_object *self, PyObject *conds)
{
    (void)self;
    if (!atomic_load(&tg_acct_on)) {
        PyErr_SetString(PyExc_RuntimeError, "allocation accounting is not on");
        return NULL;
    }
    if (tg_acct_when_set(conds) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
tg_rec_snapshot_every(struct tg_recorder_object *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"start_after", "stop_after", "every", "code", NULL};
    long start = 0, stop = -1, every = 1;
    PyObject *code = Py_None;
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|lllO:snapshot_every", kwlist,
                                     &start, &stop, &every, &code))
        return NULL;
    if (!atomic_load(&tg_acct_on)) {
        PyErr_SetString(PyExc_RuntimeError, "allocation accounting is not on");
        return NULL;
    }
    if (code != Py_None && !PyCode_Check(code)) {
        PyErr_SetString(PyExc_TypeError, "code must be a code object or None");
        return NULL;
    }
    if (tg_acct_schedule(start, stop, every, code == Py_None ? NULL : code) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
tg_rec_window_open(struct tg_recorder_object *self, PyObject *args)
{
    const char *name;
    long id;
    (void)self;
    if (!PyArg_ParseTuple(args, "s:window_open", &name))
        return NULL;
    id = tg_acct_window_open(name);
    return id < 0 ? NULL : PyLong_FromLong(id);
}

static PyObject *
tg_rec_window_close(struct tg_recorder_object *self, PyObject *args)
{
    long id;
    (void)self;
    if (!PyArg_ParseTuple(args, "l:window_close", &id))
        return NULL;
    return tg_acct_window_close(id);
}

static PyObject *
tg_rec_accounting(struct tg_recorder_object *self, PyObject *unused)
{
    (void)unused;
    if (!tg_acct_was_on())
        Py_RETURN_NONE;
    return tg_acct_figures(&self->r.table);
}

static PyObject *
tg_rec_before_fork(struct tg_recorder_object *self, PyObject *unused)
{
    (void)unused;
    /* No flusher during fork() (on 3.12+ a running extra thread makes os.fork()
     * warn about forking a multi-threaded process), but for one in the middle
     * of a write: it is paused, not waited for (lifecycle.h). */
    if (self->r.active)
        tg_flusher_fork_prepare(&self->r);
    Py_RETURN_NONE;
}

static PyObject *
tg_rec_after_fork_parent(struct tg_recorder_object *self, PyObject *unused)
{
    (void)unused;
    if (self->r.active && tg_flusher_fork_parent(&self->r) < 0)
        PyErr_Clear();  /* flushing then happens when buffers fill and at disable */
    Py_RETURN_NONE;
}

/* fork_child(outdir=None): OUTDIR as enable()'s, os.fsencode()d (a name that
 * is not UTF-8 comes as surrogate escapes). */
static PyObject *
tg_rec_fork_child(struct tg_recorder_object *self, PyObject *args)
{
    PyObject *outdir = Py_None, *outdir_bytes = NULL, *res = NULL;
    if (!PyArg_ParseTuple(args, "|O:fork_child", &outdir))
        return NULL;
    if (outdir != Py_None && !PyUnicode_FSConverter(outdir, &outdir_bytes))
        return NULL;
    if (!self->r.active)
        goto done;
    tg_acct_fork_child();  /* the parent's figures are not the child's */
    if (outdir_bytes == NULL)
        tg_fork_child_stop(self);
    else if (tg_fork_child_continue(self, PyBytes_AS_STRING(outdir_bytes)) < 0)
        goto release_outdir;
done:
    Py_INCREF(Py_None);
    res = Py_None;
release_outdir:
    Py_XDECREF(outdir_bytes);
    return res;
}

static PyObject *
tg_rec_can_compress(struct tg_recorder_object *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(tg_cap_can_compress());
}

static PyObject *
tg_rec_get_active(struct tg_recorder_object *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->r.active);
}

static PyObject *
tg_rec_get_outdir(struct tg_recorder_object *self, void *closure)
{
    (void)closure;
    if (self->r.outdir == NULL)
        Py_RETURN_NONE;
    return PyUnicode_DecodeFSDefault(self->r.outdir);
}

/* quiet(flag) -> previous: while set, the calling thread's events and
 * allocations are not recorded (TG_BUSY_TRACER, as while the tracer runs Python
 * code itself): threadgraph run's own work in the program's main thread.  Set
 * before enable(), the enabling thread is left out of the run (no files, no
 * entry) until it records, which it does not while quiet. */
static PyObject *
tg_rec_quiet(struct tg_recorder_object *self, PyObject *arg)
{
    int on = PyObject_IsTrue(arg), was = (tg_tls.busy & TG_BUSY_TRACER) != 0;

    if (on < 0)
        return NULL;
    if (on)
        tg_tls.busy |= TG_BUSY_TRACER;
    else
        tg_tls.busy &= ~TG_BUSY_TRACER;
    /* A sampled run has no profile function to attach a thread that was quiet
     * at enable() (threadgraph run's main thread) at its first call: attach it
     * now, or its bytes would go to "native-<tid>", without a curve.  As
     * the adopting profile function (sampled_adopt.c), a failure raises
     * nothing: the thread's bytes then go to "native-<tid>". */
    if (!on && was && self->r.active && self->r.sampled && tg_tls.gen != self->r.gen)
        (void)tg_thread_attach(self, NULL, 0);
    return PyBool_FromLong(was);
}

/*
 * position(innermost) -> (index, calls, depth) or None: where the calling
 * thread's records stand, for the marks that threadgraph/_marks.py and
 * _stitch.py keep (docs/formats.md "marks.txt"): INDEX its threads() entry,
 * CALLS the CALL records (.stack lines) written so far, DEPTH its open recorded
 * calls.  The open calls at that moment are the first DEPTH of those open right
 * after CALL number CALLS, which a reader rebuilds exactly.  With INNERMOST
 * true, None unless the Python function calling us is the innermost open
 * recorded call (its CALL is then number CALLS): a task wrapper that was not
 * recorded (a filter) gives no position rather than a wrong one.  None also
 * when the thread is not recorded or no CALL is kept (no stacks).  A Recorder
 * method: never recorded itself.
 */
static PyObject *
tg_rec_position(struct tg_recorder_object *self, PyObject *arg)
{
    struct tg_recorder *r = &self->r;
    struct tg_thread *t = tg_tls.thread;
    int innermost = PyObject_IsTrue(arg);
    uint64_t calls;

    if (innermost < 0)
        return NULL;
    if (t == NULL || !r->active || tg_tls.gen != r->gen || !(r->fmt_binary || r->text_stack))
        Py_RETURN_NONE;
    calls = r->fmt_binary ? t->cap_calls : atomic_load_explicit(&t->n_stack_records,
                                                                memory_order_relaxed);
    if (innermost) {
        uintptr_t key;
        if (t->depth == 0)
            Py_RETURN_NONE;
#if TG_HAVE_MONITORING
        if (r->backend == TG_BACKEND_MONITORING)
            key = tg_current_frame_key();
        else
#endif
            key = (uintptr_t)PyEval_GetFrame();
        if (t->frames[t->depth - 1].key != key
                || (r->fmt_binary && t->frames[t->depth - 1].cap_line == TG_CAP_NOT_WRITTEN))
            Py_RETURN_NONE;
    }
    return Py_BuildValue("(nKn)", (Py_ssize_t)t->log_idx, (unsigned long long)calls,
                         (Py_ssize_t)t->depth);
}

static PyMethodDef tg_recorder_methods[] = {
    {"position", (PyCFunction)tg_rec_position, METH_O,
     "position(innermost) -> (index, calls, depth) or None: the calling thread's place "
     "in its records (marks.txt)."},
    {"quiet", (PyCFunction)tg_rec_quiet, METH_O,
     "quiet(flag) -> previous flag: record nothing of the calling thread while set."},
    {"enable", (PyCFunction)(void (*)(void))tg_rec_enable, METH_VARARGS | METH_KEYWORDS,
     tg_rec_enable_doc},
    {"disable", (PyCFunction)tg_rec_disable, METH_NOARGS,
     "Stop recording; returns a list of messages for streams that failed."},
    {"threads", (PyCFunction)tg_rec_threads, METH_NOARGS,
     "Threads seen in this run: list of dicts (name, native_id, ident, base, mem, stack)."},
    {"thread_index", (PyCFunction)tg_rec_thread_index, METH_NOARGS,
     "thread_index() -> index or None: the calling thread's index in the run, noted for "
     "families()"},
    {"families", (PyCFunction)tg_rec_families, METH_O,
     "families(indexes) -> [name or None]: the family entry an aggregate run folded each "
     "noted thread into"},
    {"folded_threads", (PyCFunction)tg_rec_folded_threads, METH_NOARGS,
     "Ended threads folded by family (aggregate): list of (base, threads)."},
    {"stats", (PyCFunction)tg_rec_stats, METH_NOARGS,
     "dict: threads, records, stack_records, dropped, unwound, displaced, output_dir, "
     "clock, capture, monitoring_tool, monitoring_ids_taken."},
    {"snapshot", (PyCFunction)tg_rec_snapshot, METH_VARARGS,
     "snapshot(label='snapshot'): write snapshot-<N>-<label> now; returns its path."},
    {"snapshot_peak", (PyCFunction)tg_rec_snapshot_peak, METH_NOARGS,
     "snapshot_peak(): write snapshot-<N>-peak (the sites at the process peak so far); "
     "returns its path."},
    {"snapshot_when", (PyCFunction)tg_rec_snapshot_when, METH_O,
     "snapshot_when(conditions): threshold snapshots (acct_when.h), replacing the "
     "previous conditions."},
    {"snapshot_every", (PyCFunction)(void (*)(void))tg_rec_snapshot_every,
     METH_VARARGS | METH_KEYWORDS,
     "snapshot_every(start_after=0, stop_after=-1, every=1, code=None): periodic "
     "snapshots counted in calls of CODE, or in seconds when CODE is None."},
    {"window_open", (PyCFunction)tg_rec_window_open, METH_VARARGS,
     "window_open(name) -> id: start an accounting window."},
    {"window_close", (PyCFunction)tg_rec_window_close, METH_VARARGS,
     "window_close(id) -> dict: the window's figures."},
    {"accounting", (PyCFunction)tg_rec_accounting, METH_NOARGS,
     "Accounting figures of the current or last run (dict), or None."},
    {"before_fork", (PyCFunction)tg_rec_before_fork, METH_NOARGS, "os.register_at_fork hook"},
    {"after_fork_parent", (PyCFunction)tg_rec_after_fork_parent, METH_NOARGS,
     "os.register_at_fork hook"},
    {"can_compress", (PyCFunction)tg_rec_can_compress, METH_NOARGS,
     "Whether compress=True compresses the binary capture (built with zstd)."},
    {"fork_child", (PyCFunction)tg_rec_fork_child, METH_VARARGS,
     "fork_child(outdir=None): in a forked child, keep recording into OUTDIR or stop."},
    {NULL, NULL, 0, NULL}
};

static PyObject *
tg_rec_get_backend(struct tg_recorder_object *self, void *closure)
{
    (void)closure;
    return PyUnicode_FromString(self->r.backend == TG_BACKEND_MONITORING ? "monitoring"
                                                                       : "setprofile");
}

static PyGetSetDef tg_rec_getset[] = {
    {"active", (getter)tg_rec_get_active, NULL, "whether this recorder is recording", NULL},
    {"backend", (getter)tg_rec_get_backend, NULL,
     "event source of the last enable(): 'setprofile' or 'monitoring'", NULL},
    {"outdir", (getter)tg_rec_get_outdir, NULL, "output directory of the last enable()", NULL},
    {NULL, NULL, NULL, NULL, NULL}
};

static PyTypeObject tg_recorder_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "threadgraph._recorder.Recorder",
    .tp_basicsize = sizeof(struct tg_recorder_object),
    .tp_dealloc = (destructor)tg_rec_dealloc,
    .tp_call = tg_recorder_call,  /* what sys.getprofile() returns (lifecycle.h) */
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The C recording engine behind threadgraph.ProcessProfile.",
    .tp_methods = tg_recorder_methods,
    .tp_getset = tg_rec_getset,
    .tp_new = tg_rec_new,
};

static PyObject *
tg_mod_safe_basename(PyObject *mod, PyObject *arg)
{
    PyObject *b;
    char out[TG_BASENAME_CAP];
    (void)mod;
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "expected str");
        return NULL;
    }
    b = PyUnicode_AsEncodedString(arg, "utf-8", "backslashreplace");
    if (b == NULL)
        return NULL;
    tg_safe_basename(PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b), out);
    Py_DECREF(b);
    return PyUnicode_DecodeUTF8(out, (Py_ssize_t)strlen(out), "surrogateescape");
}

static PyObject *
tg_mod_active(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    if (tg_active == NULL)
        Py_RETURN_NONE;
    Py_INCREF(tg_active);
    return (PyObject *)tg_active;
}

static PyObject *
tg_mod_tracked_blocks(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return PyLong_FromSize_t(tg_ptrtable_count());
}

/* The GIL domains' table (ptrtable.h, ptrpage.h): where its entries are and
 * what its page map covers and holds.  GIL held, as every user of the map. */
static PyObject *
tg_mod_gil_table(PyObject *mod, PyObject *unused)
{
    struct tg_ptrtable_stats st;
    const struct tg_ptrpage *m = &tg_ptrpage_gil;
    int bits = 0;

    (void)mod;
    (void)unused;
    tg_ptrtable_stats(&tg_ptrtable_gil, &st);
    if (m->glimit != 0)
        bits = 63 - __builtin_clzll((unsigned long long)m->glimit) + 4;
    return Py_BuildValue("{s:n,s:n,s:n,s:i,s:i,s:n,s:n,s:n,s:n}",
                         "paged", (Py_ssize_t)st.paged,
                         "hashed", (Py_ssize_t)(st.compact + st.wide),
                         "bytes", (Py_ssize_t)st.bytes,
                         "map_bits", bits, "map_refused", m->unmapped,
                         "map_forgets", (Py_ssize_t)m->forgets,
                         "map_forgot", (Py_ssize_t)m->forgot,
                         "map_prefaults", (Py_ssize_t)m->prefaults,
                         "map_prefaulted", (Py_ssize_t)m->prefaulted);
}

static PyObject *
tg_mod_thread_counters(PyObject *mod, PyObject *unused)
{
    int64_t allocated, freed;

    (void)mod;
    (void)unused;
    tg_hook_thread_counters(&allocated, &freed);
    return Py_BuildValue("(LL)", (long long)allocated, (long long)freed);
}

static PyObject *
tg_mod_gil_hooks(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return PyUnicode_FromString(tg_hooks_gil_copies());
}

static PyObject *
tg_mod_native_slots(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return PyLong_FromLong(tg_native_patched_slots());
}

/* snapshot_condition(cond) -> (kind, limit): a threshold snapshot's condition
 * checked as snapshot_when() checks it (acct_when.h), for the Python layer. */
static PyObject *
tg_mod_snapshot_condition(PyObject *mod, PyObject *arg)
{
    static const char *const kinds[TG_WHEN_KINDS] = {"thread", "live", "rss"};
    enum tg_when_kind kind;
    int64_t limit;
    const char *c;

    (void)mod;
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "a snapshot condition must be a str");
        return NULL;
    }
    if ((c = PyUnicode_AsUTF8(arg)) == NULL || tg_acct_when_parse(c, &kind, &limit) < 0)
        return NULL;
    return Py_BuildValue("(sL)", kinds[kind], (long long)limit);
}

/* A signal number argument: 0 and *SIGNUM set, or -1 with an exception. */
static int
tg_signum_arg(PyObject *arg, int *signum)
{
    long v = PyLong_AsLong(arg);

    if (v == -1 && PyErr_Occurred())
        return -1;
    *signum = v < 0 || v > INT_MAX ? 0 : (int)v;  /* out of range: no signal */
    return 0;
}

static PyObject *
tg_mod_finish_signal_watch(PyObject *mod, PyObject *arg)
{
    int signum;

    (void)mod;
    if (tg_signum_arg(arg, &signum) < 0)
        return NULL;
    return PyBool_FromLong(tg_sigkick_wrap(signum) == 0);
}

static PyObject *
tg_mod_finish_signal_interrupt(PyObject *mod, PyObject *arg)
{
    int signum;

    (void)mod;
    if (tg_signum_arg(arg, &signum) < 0)
        return NULL;
    return PyBool_FromLong(tg_sigkick_wrap_interrupt(signum) == 0);
}

static PyObject *
tg_mod_finish_signal_started(PyObject *mod, PyObject *arg)
{
    int signum;

    (void)mod;
    if (tg_signum_arg(arg, &signum) < 0)
        return NULL;
    tg_sigkick_started(signum);
    Py_RETURN_NONE;
}

static PyObject *
tg_mod_finish_signal_default(PyObject *mod, PyObject *arg)
{
    int signum;

    (void)mod;
    if (tg_signum_arg(arg, &signum) < 0)
        return NULL;
    return PyBool_FromLong(tg_sigkick_default(signum) == 0);
}

/*
 * handled_traceback(exc): on 3.8 to 3.10, when EXC is the exception being
 * handled, give it EXC's own traceback (__traceback__): a bare `raise` there
 * re-raises the handled exception with the traceback it was caught with,
 * whatever the handler made of __traceback__.  3.11 and later re-raise the
 * exception's own, and this does nothing.  threadgraph/_stitch.py's wrappers
 * take their own frame out of a task's traceback with it.  Returns None.
 */
static PyObject *
tg_mod_handled_traceback(PyObject *mod, PyObject *exc)
{
    (void)mod;
#if PY_VERSION_HEX < 0x030B0000
    PyObject *type, *value, *tb;

    PyErr_GetExcInfo(&type, &value, &tb);
    if (value == exc) {
        Py_XDECREF(tb);
        tb = PyException_GetTraceback(exc);
    }
    PyErr_SetExcInfo(type, value, tb);  /* steals the three */
#else
    (void)exc;
#endif
    Py_RETURN_NONE;
}

/* The test gates' binding: close or open a gate (SET); closing it with WAIT
 * returns once a writer is blocked there (WAIT_BLOCKED, the GIL released
 * while it waits), so the caller knows that write is stuck, its lock held. */
static PyObject *
tg_mod_test_gate(PyObject *args, const char *format, void (*set)(int),
                 void (*wait_blocked)(void))
{
    int closed, wait = 1;

    if (!PyArg_ParseTuple(args, format, &closed, &wait))
        return NULL;
    set(closed);
    if (closed && wait) {
        Py_BEGIN_ALLOW_THREADS
        wait_blocked();
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

/* _test_capture_gate(closed, wait=True): the capture's test gate
 * (capture_write.h), held with the capture's lock. */
static PyObject *
tg_mod_test_capture_gate(PyObject *mod, PyObject *args)
{
    (void)mod;
    return tg_mod_test_gate(args, "p|p:_test_capture_gate", tg_cap_gate_set,
                            tg_cap_gate_wait_blocked);
}

/* _test_text_gate(closed, wait=True): the descriptor writers' test gate
 * (writer.h: the text files), held with the writer's io_lock. */
static PyObject *
tg_mod_test_text_gate(PyObject *mod, PyObject *args)
{
    (void)mod;
    return tg_mod_test_gate(args, "p|p:_test_text_gate", tg_writer_gate_set,
                            tg_writer_gate_wait_blocked);
}

/* _test_wait_ended(): returns once the flusher has written and closed the
 * files of every thread that ended so far in the active run (thread.h, the
 * ended list), the GIL released meanwhile; at once without an active run.
 * A test's sync point: a thread's end no longer closes its files itself. */
static PyObject *
tg_mod_test_wait_ended(PyObject *mod, PyObject *unused)
{
    struct tg_recorder_object *a = tg_active;

    (void)mod;
    (void)unused;
    if (a == NULL || !a->r.active || !a->r.flusher_running)
        Py_RETURN_NONE;
    Py_INCREF(a);
    tg_flusher_kick(&a->r);
    Py_BEGIN_ALLOW_THREADS
    tg_thread_table_wait_ended(&a->r.table);
    Py_END_ALLOW_THREADS
    Py_DECREF(a);
    Py_RETURN_NONE;
}

static PyObject *
tg_mod_test_acct_nodes(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return Py_BuildValue("(nKK)", (Py_ssize_t)tg_acct_nodes_in_use(),
                         (unsigned long long)tg_acct.fold.threads,
                         (unsigned long long)tg_acct.fold.nodes);
}

static PyObject *
tg_mod_profiled_threads(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return PyLong_FromLong(tg_profile_others_count());
}

static PyObject *
tg_mod_clock_forget(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    tg_clock_cache_forget(&tg_tls.clock);
    Py_RETURN_NONE;
}

static PyMethodDef tg_module_methods[] = {
    {"clock_forget", tg_mod_clock_forget, METH_NOARGS,
     "The calling thread's next record reads the clock (after a time taken outside "
     "the recorder, such as a mark's: time_resolution='ms' keeps a beat's reading)."},
    {"safe_basename", tg_mod_safe_basename, METH_O,
     "File base name for a thread name (without the ~N suffix)."},
    {"active", tg_mod_active, METH_NOARGS, "The recording Recorder, or None."},
    {"gc_callback", (PyCFunction)(void (*)(void))tg_gc_callback, METH_FASTCALL,
     "gc.callbacks entry while recording: notes the collector's runs (gcwatch.h)."},
    {"gc_runs", tg_gc_runs, METH_NOARGS,
     "gc_runs() -> ([(native_id, start_ns, stop_ns, collected, index)], dropped), and forget "
     "them (index: the thread's in the run, -1 if none)."},
    {"profiled_threads", tg_mod_profiled_threads, METH_NOARGS,
     "Threads with a profile function that is not threadgraph's (threadgraph attach)."},
    {"tracked_blocks", tg_mod_tracked_blocks, METH_NOARGS,
     "Number of live blocks in the pointer table."},
    {"gil_table", tg_mod_gil_table, METH_NOARGS,
     "gil_table() -> dict: the Python allocators' pointer table: entries in the page\n"
     "map (paged) and the hash (hashed), its bytes in memory, and the page map's\n"
     "range (map_bits: addresses below 2**map_bits; 0 none), whether its\n"
     "reservation was refused, the arenas given back whose shadow went with\n"
     "them (map_forgets) and its bytes (map_forgot), and the new arenas whose\n"
     "shadow was populated at once (map_prefaults) and its bytes (map_prefaulted)."},
    {"thread_counters", tg_mod_thread_counters, METH_NOARGS,
     "(allocated, freed) bytes of the calling thread while hooked (in sampled\n"
     "mode, once its accounting state exists, that state's requested and freed)."},
    {"gil_hooks", tg_mod_gil_hooks, METH_NOARGS,
     "gil_hooks() -> 'bmi2' or 'baseline': the copy of the Python allocators'\n"
     "malloc and free hooks that enable() installs (THREADGRAPH_NO_BMI2: baseline)."},
    {"snapshot_condition", tg_mod_snapshot_condition, METH_O,
     "snapshot_condition(cond) -> (kind, limit), or ValueError (acct_when.h)."},
    {"native_slots", tg_mod_native_slots, METH_NOARGS,
     "Relocation slots that point at the native=True hooks now."},
    {"finish_signal_watch", tg_mod_finish_signal_watch, METH_O,
     "Guard the finishing signal's Python handler against a lost wake-up "
     "(sigkick.h); True if its C handler was wrapped."},
    {"finish_signal_interrupt", tg_mod_finish_signal_interrupt, METH_O,
     "Guard a signal whose Python handler is Python's own (SIGINT's "
     "KeyboardInterrupt) against a lost wake-up: interrupt-only sends "
     "(sigkick.h); True if its C handler was wrapped."},
    {"finish_signal_started", tg_mod_finish_signal_started, METH_O,
     "The finishing signal's Python handler has started."},
    {"handled_traceback", tg_mod_handled_traceback, METH_O,
     "handled_traceback(exc): 3.8 to 3.10, the exception being handled, if EXC, "
     "gets EXC's __traceback__, which a bare raise then re-raises (3.11+: nothing "
     "to do)."},
    {"finish_signal_default", tg_mod_finish_signal_default, METH_O,
     "Default action for a finishing signal at the C level, from any thread; "
     "True if its handler was threadgraph's."},
    {"greenlet_watch", tg_mod_greenlet_watch, METH_NOARGS,
     "greenlet was just imported in the calling thread: a stack per greenlet from now "
     "(greenlet.h); True if the recorder's switch hook is this thread's."},
    {"_test_wait_ended", tg_mod_test_wait_ended, METH_NOARGS,
     "Tests only: returns once the files of every thread that ended so far in the "
     "active run are written and closed (the flusher closes them after the thread's "
     "end)."},
    {"_test_acct_nodes", tg_mod_test_acct_nodes, METH_NOARGS,
     "Tests only: (calling-context nodes in use, ended threads whose nodes an "
     "aggregate run recycled, nodes recycled) of the accounting (acct_recycle.h)."},
    {"_test_capture_gate", tg_mod_test_capture_gate, METH_VARARGS,
     "Tests only: _test_capture_gate(True) makes every capture write block before "
     "its write(2), holding the capture's lock, and returns once one is blocked "
     "(_test_capture_gate(True, False): at once); _test_capture_gate(False) lets "
     "them go."},
    {"_test_text_gate", tg_mod_test_text_gate, METH_VARARGS,
     "Tests only: as _test_capture_gate, for the writes of the text files "
     "(.mem, .stack, process.mem): each waits before its write(2), holding its "
     "writer's io_lock."},
    {NULL, NULL, 0, NULL}
};

/*
 * One process, one recorder: the tables, hooks and threads of recorder.h are
 * process-wide and protected by the GIL, so the module runs in the main
 * interpreter only.  A subinterpreter is refused at import (3.12+: by CPython,
 * from the Py_mod_multiple_interpreters slot; before, by tg_module_exec), and
 * the module declares that it needs the GIL (Py_mod_gil, 3.13+).
 */
/* Add the int VALUE to module M as NAME (PyModule_AddIntConstant takes a long,
 * narrower than long long on some platforms).  Returns 0 or -1. */
static int
tg_module_add_llong(PyObject *m, const char *name, long long value)
{
    PyObject *v = PyLong_FromLongLong(value);

    if (v == NULL)
        return -1;
    if (PyModule_AddObject(m, name, v) < 0) {
        Py_DECREF(v);
        return -1;
    }
    return 0;
}

static int
tg_module_exec(PyObject *m)
{
    static int once;  /* process-wide set-up done; GIL */

    if (tg_interp_current() != PyInterpreterState_Main()) {
        PyErr_SetString(PyExc_ImportError,
                        "threadgraph._recorder runs in the main interpreter only "
                        "(its state is process-wide): not in a subinterpreter");
        return -1;
    }
    if (!once) {
        tg_recorder_ignore_methods(tg_recorder_methods,
                                   sizeof(tg_recorder_methods) / sizeof(tg_recorder_methods[0]) - 1);
        if (tg_recorder_module_init() < 0 || tg_threads_module_init() < 0)
            return -1;
        if (PyType_Ready(&tg_recorder_type) < 0)
            return -1;
        once = 1;
    }
    Py_INCREF(&tg_recorder_type);
    if (PyModule_AddObject(m, "Recorder", (PyObject *)&tg_recorder_type) < 0) {
        Py_DECREF(&tg_recorder_type);
        return -1;
    }
    /* The version (threadgraph/_version.py, passed by setup.py), the range of
     * max_size (capture_write.h; enable() parses it as a long long), of
     * sample_bytes (accounting.h) and of sample_every (a long), and enable()'s
     * option choices (options.h), for threadgraph/_options.py, which checks
     * values before a run directory is made. */
    if (PyModule_AddStringConstant(m, "VERSION", TG_VERSION) < 0
            || PyModule_AddIntConstant(m, "MAX_SIZE_MIN", (long)TG_CAP_MAX_SIZE_MIN) < 0
            || tg_module_add_llong(m, "MAX_SIZE_MAX", LLONG_MAX) < 0
            || tg_module_add_llong(m, "SAMPLE_BYTES_MAX", TG_ACCT_SAMPLE_MAX) < 0
            || tg_module_add_llong(m, "SAMPLE_EVERY_MAX", LONG_MAX) < 0
            || PyModule_AddIntConstant(m, "SAMPLED_DEFAULT_BYTES", TG_SAMPLED_DEFAULT_BYTES) < 0
            || tg_options_export(m) < 0
            || tg_glet_init(m) < 0)
        return -1;
    return 0;
}

static PyModuleDef_Slot tg_module_slots[] = {
    {Py_mod_exec, (void *)tg_module_exec},
#if PY_VERSION_HEX >= 0x030C0000
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED},
#endif
#if PY_VERSION_HEX >= 0x030D0000
    {Py_mod_gil, Py_MOD_GIL_USED},
#endif
    {0, NULL}
};

static struct PyModuleDef tg_module = {
    PyModuleDef_HEAD_INIT, "threadgraph._recorder",
    "threadgraph's recording engine (C).  Use threadgraph.ProcessProfile.",
    0, tg_module_methods, tg_module_slots, NULL, NULL, NULL
};

PyMODINIT_FUNC
PyInit__recorder(void)
{
    return PyModuleDef_Init(&tg_module);
}
