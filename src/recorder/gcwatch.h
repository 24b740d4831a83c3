/*
 * gcwatch.h - when the cyclic garbage collector ran, and in which thread.
 *
 * A collection frees (and its callbacks allocate) on the thread that triggered
 * it, so a call that ran the collector shows a "growth" that is not its own.
 * ProcessProfile.enable() appends _recorder.gc_callback to gc.callbacks and
 * disable() removes it and writes the runs it kept as gc.txt (docs/formats.md).
 * The callback is a C function: no Python frame, no call event.
 */
#ifndef TG_GCWATCH_H
#define TG_GCWATCH_H

#include <Python.h>

#pragma GCC visibility push(hidden)

/* The runs kept at most; later ones are counted in the dropped figure. */
#define TG_GC_RUNS_MAX 65536

/* gc.callbacks entry: gc_callback(phase, info).  GIL held (the collector's
 * caller).  Notes the time at "start"; at "stop" keeps (native thread id,
 * start, stop, info["collected"], the thread's index in the active run or -1)
 * and notes the thread (thread.h struct tg_thread's noted: an aggregate run
 * folding it keeps its family for gc.txt).  Returns None. */
PyObject *tg_gc_callback(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);

/* gc_runs() -> (list of (native_id, start_ns, stop_ns, collected, index),
 * dropped), and forget them.  GIL held. */
PyObject *tg_gc_runs(PyObject *mod, PyObject *unused);

#pragma GCC visibility pop

#endif
