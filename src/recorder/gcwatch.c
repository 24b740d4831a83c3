/*
 * gcwatch.c - the collector's runs per thread (gcwatch.h).
 */
#include "gcwatch.h"
#include "alloc_hooks.h"
#include "clock.h"
#include "recorder.h"
#include "tls.h"

#include <stdlib.h>

struct tg_gc_run {
    unsigned long native_id;
    int64_t seq;           /* the thread's log seq (the recorder's index), -1: none */
    int64_t start_ns;
    int64_t stop_ns;
    Py_ssize_t collected;
};

/* The kept runs: raw malloc (never PyMem, so invisible to the hooks); all
 * fields protected by the GIL (the callback and gc_runs run with it). */
static struct tg_gc_run *runs;
static size_t nruns;
static size_t dropped;

/* This thread's collection in progress: its start time, 0 when none. */
static _Thread_local int64_t gc_started;

PyObject *
tg_gc_callback(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    (void)mod;
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "gc_callback(phase, info)");
        return NULL;
    }
    int64_t now = tg_clock_now_ns();
    /* This thread's next record reads the clock again (time_resolution="ms"
     * would give it the beat's earlier reading): a collection lies within
     * the times of the calls around it. */
    tg_clock_cache_forget(&tg_tls.clock);
    if (PyUnicode_CompareWithASCIIString(args[0], "start") == 0) {
        gc_started = now;
        Py_RETURN_NONE;
    }
    if (PyUnicode_CompareWithASCIIString(args[0], "stop") != 0 || gc_started == 0)
        Py_RETURN_NONE;
    /* The tracer's own work: the lookup below makes a key string. */
    int busy = tg_tls.busy;
    tg_tls.busy |= TG_BUSY_TRACER;
    Py_ssize_t collected = -1;
    if (PyDict_Check(args[1])) {
        PyObject *v = PyDict_GetItemString(args[1], "collected");  /* borrowed */
        if (v != NULL && PyLong_Check(v))
            collected = PyLong_AsSsize_t(v);
        if (collected < 0) {
            PyErr_Clear();
            collected = -1;
        }
    }
    if (runs == NULL)
        runs = malloc(TG_GC_RUNS_MAX * sizeof *runs);
    if (runs != NULL && nruns < TG_GC_RUNS_MAX) {
        struct tg_thread *t = tg_tls.thread;
        runs[nruns].native_id = PyThread_get_thread_native_id();
        runs[nruns].seq = -1;
        if (t != NULL && tg_active != NULL && tg_active->r.active
                && tg_tls.gen == tg_active->r.gen) {
            /* an aggregate run that folds this thread keeps its family; noted
             * in the log at its end (the collection may have started where
             * the table's lock is held) */
            runs[nruns].seq = (int64_t)t->log_idx;
            t->noted = 1;
        }
        runs[nruns].start_ns = gc_started;
        runs[nruns].stop_ns = now;
        runs[nruns].collected = collected;
        nruns++;
    } else {
        dropped++;
    }
    gc_started = 0;
    tg_tls.busy = busy;
    Py_RETURN_NONE;
}

PyObject *
tg_gc_runs(PyObject *mod, PyObject *unused)
{
    PyObject *list = NULL, *result = NULL;

    (void)mod;
    (void)unused;
    list = PyList_New(0);
    if (list == NULL)
        goto cleanup;
    for (size_t i = 0; i < nruns; i++) {
        PyObject *t = Py_BuildValue("(kLLnL)", runs[i].native_id, (long long)runs[i].start_ns,
                                    (long long)runs[i].stop_ns, runs[i].collected,
                                    (long long)runs[i].seq);
        if (t == NULL || PyList_Append(list, t) < 0) {
            Py_XDECREF(t);
            goto cleanup;
        }
        Py_DECREF(t);
    }
    result = Py_BuildValue("(On)", list, (Py_ssize_t)dropped);
    if (result != NULL) {
        nruns = 0;
        dropped = 0;
    }
cleanup:
    Py_XDECREF(list);
    return result;
}
