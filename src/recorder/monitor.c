/*
 * monitor.c - the sys.monitoring backend (PEP 669, CPython 3.12 and 3.13).
 *
 * Instead of a profile function installed on each thread, the recorder asks
 * sys.monitoring for the same events, process-wide: PY_START, PY_RESUME and
 * PY_THROW are calls; PY_RETURN, PY_YIELD and PY_UNWIND are returns; CALL,
 * C_RETURN and C_RAISE of a builtin are C calls and returns (as the setprofile
 * events of those versions, which CPython itself derives from these).  The
 * interpreter then creates no frame object per event, which is most of what an
 * empty profile function costs on 3.12+, and threads started by C code are
 * seen too.
 *
 * The callbacks (struct tg_mon_cb, monitor.h) hold the recorder object; their
 * functions, one per kind of event and configuration, are recorder.c's
 * tg_mon_entries, where the event path is inlined into them.  Everything here
 * runs with the GIL: install at enable(), uninstall at disable() or in a forked
 * child, and in between a move to another tool id when the program asks for
 * ours (the use_tool_id wrapper below).
 */
#include "recorder.h"
#include "monitor.h"

#include <string.h>

#if TG_HAVE_MONITORING

/* --- the offset int ------------------------------------------------------ */

/* Obj-domain allocator in place while the probe runs (GIL: the obj domain is
 * only used with the GIL, which the probe holds throughout). */
static PyMemAllocatorEx tg_probe_orig;
static size_t tg_probe_size;

static void *
tg_probe_malloc(void *ctx, size_t size)
{
    (void)ctx;
    tg_probe_size = size;
    return tg_probe_orig.malloc(tg_probe_orig.ctx, size);
}

int64_t
tg_offset_int_size(void)
{
    PyMemAllocatorEx probe;
    PyObject *o;

    PyMem_GetAllocator(PYMEM_DOMAIN_OBJ, &tg_probe_orig);
    probe = tg_probe_orig;
    probe.malloc = tg_probe_malloc;
    tg_probe_size = 0;
    PyMem_SetAllocator(PYMEM_DOMAIN_OBJ, &probe);
    /* What the interpreter calls per event (call_instrumentation_vector):
     * 3.12 PyLong_FromSsize_t (an exact-size int), 3.13 PyLong_FromLong (a
     * whole PyLongObject); tests/python/test_backends.py checks the result. */
#if PY_VERSION_HEX >= 0x030D0000
    o = PyLong_FromLong(1000);
#else
    o = PyLong_FromSsize_t(1000);
#endif
    PyMem_SetAllocator(PYMEM_DOMAIN_OBJ, &tg_probe_orig);
    if (o == NULL) {
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(o);
    return (int64_t)tg_probe_size;
}

/* --- callbacks ------------------------------------------------------------- */

/* The tool ids to try, in order: only the two that sys.monitoring names for
 * no kind of tool (0 DEBUGGER_ID, 1 COVERAGE_ID, 2 PROFILER_ID and 5
 * OPTIMIZER_ID are left to the tools they are named for: cProfile takes
 * PROFILER_ID on 3.12+ and fails if it is taken). */
static const int tg_mon_tools[] = {3, 4};

/* --- the calling thread's state -------------------------------------------- */

/*
 * Every event needs the running frame, which only the thread state gives:
 * PyThreadState_Get is a call into libpython and a __tls_get_addr there
 * (~20 instructions per event on 3.12, a fifth of the no-op callback's cost).
 * The thread state is cached in a thread-local of our own instead, and used
 * when two things hold:
 * - it is alive: tg_mon_ts.epoch equals tg_mon_ts_epoch.  A thread state
 *   cannot end without PyThreadState_Clear, which releases its dict; each
 *   cached state's dict holds a sentinel whose deallocation advances the
 *   epoch, so that no thread reads a cached state after any cached state was
 *   cleared (a thread ending, a C thread's PyGILState_Release, finalization,
 *   the threads a fork leaves behind);
 * - it is the one running the event: its current frame runs the event's code
 *   object (every event is fired in the running frame, with its code), which
 *   an OS thread that has switched to another of its thread states (C code
 *   may keep several, PyThreadState_Swap) does not pass, but for a frame of
 *   the same code suspended there.
 * Otherwise the state is read again (PyThreadState_Get) and cached.
 */

/* Advanced by a sentinel's deallocation; starts at 1, so that a thread's
 * zeroed cache is stale.  GIL. */
uint64_t tg_mon_ts_epoch = 1;

/* This thread's state and the epoch it was read in.  Thread-local. */
_Thread_local struct tg_mon_ts tg_mon_ts __attribute__((tls_model("initial-exec")));

static void
tg_mon_sentinel_dealloc(PyObject *self)
{
    tg_mon_ts_epoch++;
    PyObject_Free(self);
}

/* Ready once, with the GIL, at the first install (tg_mon_ready). */
static PyTypeObject tg_mon_sentinel_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "threadgraph._recorder.thread_state_sentinel",
    .tp_basicsize = sizeof(PyObject),
    .tp_dealloc = tg_mon_sentinel_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ends threadgraph's cache of a thread state with it (internal)",
};

/* Its key in a thread state's dict (an interned str, set at the first
 * install and kept). */
static PyObject *tg_mon_sentinel_key;

/* The calling thread's state, read and cached again: its dict gets a sentinel
 * if it has none.  When that fails the state is returned uncached (the next
 * event tries again).  GIL held; allocations are the recorder's own. */
__attribute__((noinline, cold)) PyThreadState *
tg_mon_ts_refresh(void)
{
    PyThreadState *ts = PyThreadState_Get();
    uint64_t epoch = tg_mon_ts_epoch;
    int busy = tg_tls.busy;
    tg_saved_exc saved;
    PyObject *dict, *sentinel;
    int has;

    tg_tls.busy |= TG_BUSY_TRACER;
    tg_exc_save(&saved);
    dict = PyThreadState_GetDict();  /* borrowed */
    if (dict == NULL)
        goto done;
    has = PyDict_Contains(dict, tg_mon_sentinel_key);
    if (has == 0) {
        sentinel = PyObject_New(PyObject, &tg_mon_sentinel_type);
        if (sentinel == NULL)
            goto done;
        has = PyDict_SetItem(dict, tg_mon_sentinel_key, sentinel) == 0;
        Py_DECREF(sentinel);
    }
    /* A sentinel freed meanwhile (none can be: no code ran) leaves it stale. */
    if (has == 1 && epoch == tg_mon_ts_epoch) {
        tg_mon_ts.ts = ts;
        tg_mon_ts.epoch = epoch;
    }
done:
    PyErr_Clear();
    tg_exc_restore(&saved);
    tg_tls.busy = busy;
    return ts;
}

/* The callbacks' functions are tg_mon_entries (recorder.c); a callback of
 * each kind in tg_mon_entries' order. */
#define TG_MON_N_FUNCS TG_MON_N_KINDS

static void
tg_mon_cb_dealloc(PyObject *self)
{
    Py_XDECREF((PyObject *)((struct tg_mon_cb *)self)->rec);
    PyObject_Free(self);
}

/* Ready once, with the GIL, at the first install (tg_mon_ready). */
static PyTypeObject tg_mon_cb_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "threadgraph._recorder.monitoring_callback",
    .tp_basicsize = sizeof(struct tg_mon_cb),
    .tp_dealloc = tg_mon_cb_dealloc,
    .tp_vectorcall_offset = offsetof(struct tg_mon_cb, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "threadgraph's sys.monitoring callback (internal)",
};

/* A new callback running FUNC (an entry of tg_mon_entries) for SELF, or NULL
 * with an exception. */
static PyObject *
tg_mon_cb_new(struct tg_recorder_object *self, vectorcallfunc func)
{
    struct tg_mon_cb *cb;

    cb = PyObject_New(struct tg_mon_cb, &tg_mon_cb_type);
    if (cb == NULL)
        return NULL;
    cb->vectorcall = func;
    Py_INCREF((PyObject *)self);
    cb->rec = self;
    return (PyObject *)cb;
}

/* The types and the key above, made ready at the first install: 0, or -1
 * with an exception.  GIL held. */
static int
tg_mon_ready(void)
{
    if (!(tg_mon_cb_type.tp_flags & Py_TPFLAGS_READY) && PyType_Ready(&tg_mon_cb_type) < 0)
        return -1;
    if (!(tg_mon_sentinel_type.tp_flags & Py_TPFLAGS_READY)
            && PyType_Ready(&tg_mon_sentinel_type) < 0)
        return -1;
    if (tg_mon_sentinel_key == NULL)
        tg_mon_sentinel_key = PyUnicode_InternFromString("threadgraph.monitor.tstate");
    return tg_mon_sentinel_key == NULL ? -1 : 0;
}

/* sys.monitoring.events attribute -> callback (its kind, TG_MON_*); C
 * marks the events needed only for C calls. */
static const struct {
    const char *event;
    int def;
    int c;
} tg_mon_events[] = {
    {"PY_START", TG_MON_PY_CALL, 0}, {"PY_RESUME", TG_MON_PY_CALL, 0},
    {"PY_THROW", TG_MON_PY_CALL, 0}, {"PY_RETURN", TG_MON_PY_RETURN, 0},
    {"PY_YIELD", TG_MON_PY_RETURN, 0}, {"PY_UNWIND", TG_MON_PY_RETURN, 0},
    {"CALL", TG_MON_C_CALL, 1}, {"C_RETURN", TG_MON_C_RETURN, 1},
    {"C_RAISE", TG_MON_C_RETURN, 1},
};
#define TG_MON_N_EVENTS (sizeof(tg_mon_events) / sizeof(tg_mon_events[0]))

static PyObject *
tg_mon_module(void)
{
    PyObject *mon = PySys_GetObject("monitoring");  /* borrowed */
    if (mon == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_RuntimeError, "sys.monitoring is not available");
    Py_XINCREF(mon);
    return mon;
}

/* Claim a free tool id other than SKIP; returns it, -2 when all are taken, -1
 * on error. */
static int
tg_mon_claim(PyObject *mon, int skip)
{
    size_t i;
    for (i = 0; i < sizeof(tg_mon_tools) / sizeof(tg_mon_tools[0]); i++) {
        PyObject *res;
        if (tg_mon_tools[i] == skip)
            continue;
        res = PyObject_CallMethod(mon, "use_tool_id", "is", tg_mon_tools[i], "threadgraph");
        if (res != NULL) {
            Py_DECREF(res);
            return tg_mon_tools[i];
        }
        if (!PyErr_ExceptionMatches(PyExc_ValueError))
            return -1;
        PyErr_Clear();  /* in use by another tool */
    }
    return -2;
}

/* Register CALLBACK (or None) for every event of TOOL; events not needed are
 * skipped when NEED_C is 0.  Returns the event mask, or -1. */
static long
tg_mon_register(struct tg_recorder_object *self, PyObject *mon, int tool, int install,
                int need_c)
{
    PyObject *events = PyObject_GetAttrString(mon, "events");
    PyObject *cbs[TG_MON_N_FUNCS] = {NULL};
    long mask = 0;
    size_t i;

    if (events == NULL)
        return -1;
    for (i = 0; install && i < TG_MON_N_FUNCS; i++) {
        cbs[i] = tg_mon_cb_new(self, tg_mon_entries[self->r.default_path][i]);
        if (cbs[i] == NULL) {
            mask = -1;
            goto done;
        }
    }
    for (i = 0; i < TG_MON_N_EVENTS; i++) {
        PyObject *ev, *res;
        long bit;
        if (install && tg_mon_events[i].c && !need_c)
            continue;
        ev = PyObject_GetAttrString(events, tg_mon_events[i].event);
        if (ev == NULL) {
            mask = -1;
            goto done;
        }
        bit = PyLong_AsLong(ev);
        res = PyObject_CallMethod(mon, "register_callback", "iOO", tool, ev,
                                  install ? cbs[tg_mon_events[i].def] : Py_None);
        Py_DECREF(ev);
        if (res == NULL || bit < 0) {
            Py_XDECREF(res);
            mask = -1;
            goto done;
        }
        Py_DECREF(res);
        mask |= bit;
    }
done:
    for (i = 0; i < TG_MON_N_FUNCS; i++)
        Py_XDECREF(cbs[i]);
    Py_DECREF(events);
    return mask;
}

/* Stop TOOL's events, unregister its callbacks and free it.  Never fails;
 * an exception already set is kept.  GIL held. */
static void
tg_mon_release(struct tg_recorder_object *self, PyObject *mon, int tool)
{
    tg_saved_exc saved;
    PyObject *res;

    tg_exc_save(&saved);
    res = PyObject_CallMethod(mon, "set_events", "ii", tool, 0);
    Py_XDECREF(res);
    PyErr_Clear();
    tg_mon_register(self, mon, tool, 0, 1);
    PyErr_Clear();
    res = PyObject_CallMethod(mon, "free_tool_id", "i", tool);
    Py_XDECREF(res);
    PyErr_Clear();
    tg_exc_restore(&saved);
}

/* Deliver the recorder's events under TOOL, just claimed: 0 (r->mon_tool is
 * TOOL), or -1 with an exception and TOOL released.  GIL held. */
static int
tg_mon_start(struct tg_recorder_object *self, PyObject *mon, int tool)
{
    struct tg_recorder *r = &self->r;
    PyObject *res;
    /* C events also drive C sleep triggers, recorded or not. */
    long mask = tg_mon_register(self, mon, tool, 1, r->record_c || r->n_trig_defs > 0);

    if (mask >= 0) {
        res = PyObject_CallMethod(mon, "set_events", "il", tool, mask);
        if (res != NULL) {
            Py_DECREF(res);
            r->mon_tool = r->mon_tool_run = tool;
            return 0;
        }
    }
    tg_mon_release(self, mon, tool);
    return -1;
}

/* --- the program asking for our tool id -------------------------------------- */

/*
 * sys.monitoring.use_tool_id and free_tool_id, wrapped while the backend is
 * installed (their method table entries' functions swapped, as spguard.c does
 * for sys.setprofile), so that a program taking tool id 3 or 4 for a tool of
 * its own runs as without threadgraph:
 * - asked for the id the recorder holds, the recorder moves to the other id it
 *   may use before the real call; with that one taken too it steps aside (no
 *   events at all, r->mon_aside), counted in stats() "displaced";
 * - once the program frees 3 or 4, a recorder stepped aside claims it again.
 * Calls that returned while it stood aside are closed as unwound by the next
 * return of a call that encloses them (recorder.c, tg_unwind_to).  GIL.
 */
static PyMethodDef *tg_mon_use_ml, *tg_mon_free_ml;
static PyCFunction tg_mon_use_orig, tg_mon_free_orig;

/* The recorder whose backend is installed (or stepped aside), else NULL. */
static struct tg_recorder_object *
tg_mon_recording(void)
{
    struct tg_recorder_object *a = tg_active;
    return a != NULL && a->r.active && a->r.backend == TG_BACKEND_MONITORING ? a : NULL;
}

/* ARG as a tool id, or -1 (the real function then says what is wrong). */
static long
tg_mon_tool_arg(PyObject *arg)
{
    long id;
    if (!PyLong_Check(arg))
        return -1;
    id = PyLong_AsLong(arg);
    if (id == -1 && PyErr_Occurred())
        PyErr_Clear();
    return id;
}

static PyObject *
tg_mon_use_wrapper(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    struct tg_recorder_object *a = tg_mon_recording();
    int busy = tg_tls.busy;
    PyObject *mon;
    int tool, old;

    if (a == NULL || nargs < 1 || a->r.mon_tool < 0 || tg_mon_tool_arg(args[0]) != a->r.mon_tool)
        return ((_PyCFunctionFast)(void (*)(void))tg_mon_use_orig)(module, args, nargs);
    tg_tls.busy |= TG_BUSY_TRACER;  /* the recorder's own allocations */
    old = a->r.mon_tool;
    mon = tg_mon_module();
    tool = mon == NULL ? -1 : tg_mon_claim(mon, old);
    if (tool >= 0 && tg_mon_start(a, mon, tool) < 0)
        tool = -1;
    if (mon != NULL) {
        /* The new id's events are on: the old one's stop (no Python code runs
         * between the two, so no event is seen twice or missed). */
        tg_mon_release(a, mon, old);
        Py_DECREF(mon);
    }
    PyErr_Clear();
    if (tool < 0) {
        a->r.mon_tool = -1;
        a->r.mon_aside = 1;
        a->r.mon_yielded++;
    }
    tg_tls.busy = busy;
    return ((_PyCFunctionFast)(void (*)(void))tg_mon_use_orig)(module, args, nargs);
}

static PyObject *
tg_mon_free_wrapper(PyObject *module, PyObject *arg)
{
    PyObject *res = tg_mon_free_orig(module, arg), *mon;
    struct tg_recorder_object *a = tg_mon_recording();
    int busy = tg_tls.busy;
    long id;
    size_t i;

    if (res == NULL || a == NULL || !a->r.mon_aside)
        return res;
    id = tg_mon_tool_arg(arg);
    for (i = 0; i < sizeof(tg_mon_tools) / sizeof(tg_mon_tools[0]); i++)
        if (tg_mon_tools[i] == id)
            break;
    if (i == sizeof(tg_mon_tools) / sizeof(tg_mon_tools[0]))
        return res;
    tg_tls.busy |= TG_BUSY_TRACER;
    mon = tg_mon_module();
    if (mon != NULL) {
        int tool = tg_mon_claim(mon, -1);
        if (tool >= 0 && tg_mon_start(a, mon, tool) == 0)
            a->r.mon_aside = 0;
        Py_DECREF(mon);
    }
    PyErr_Clear();  /* still aside: the next free tries again */
    tg_tls.busy = busy;
    return res;
}

/* Swap the function of MON's method NAME, whose flags must be FLAGS, for
 * WRAPPER; returns its entry (*ORIG the real function), or NULL if it is not
 * the function expected.  GIL held. */
static PyMethodDef *
tg_mon_wrap(PyObject *mon, const char *name, int flags, PyCFunction wrapper, PyCFunction *orig)
{
    PyObject *fn = PyObject_GetAttrString(mon, name);
    PyMethodDef *ml = NULL;

    if (fn == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (PyCFunction_Check(fn)) {
        ml = ((PyCFunctionObject *)fn)->m_ml;
        if (ml->ml_flags != flags || ml->ml_meth == wrapper || ml->ml_name == NULL
                || strcmp(ml->ml_name, name) != 0) {
            ml = NULL;
        } else {
            *orig = ml->ml_meth;
            ml->ml_meth = wrapper;
        }
    }
    Py_DECREF(fn);
    return ml;
}

static void
tg_mon_wrap_all(PyObject *mon)
{
    if (tg_mon_use_ml == NULL)
        tg_mon_use_ml = tg_mon_wrap(mon, "use_tool_id", METH_FASTCALL,
                                    (PyCFunction)(void (*)(void))tg_mon_use_wrapper,
                                    &tg_mon_use_orig);
    if (tg_mon_free_ml == NULL)
        tg_mon_free_ml = tg_mon_wrap(mon, "free_tool_id", METH_O, tg_mon_free_wrapper,
                                     &tg_mon_free_orig);
}

static void
tg_mon_unwrap_all(void)
{
    if (tg_mon_use_ml != NULL)
        tg_mon_use_ml->ml_meth = tg_mon_use_orig;
    if (tg_mon_free_ml != NULL)
        tg_mon_free_ml->ml_meth = tg_mon_free_orig;
    tg_mon_use_ml = tg_mon_free_ml = NULL;
}

/* --- install ------------------------------------------------------------------ */

int
tg_monitor_install(struct tg_recorder_object *self)
{
    struct tg_recorder *r = &self->r;
    PyObject *mon = tg_mon_module();
    int tool;

    if (mon == NULL)
        return -1;
    if (tg_mon_ready() < 0) {
        Py_DECREF(mon);
        return -1;
    }
    tool = tg_mon_claim(mon, -1);
    if (tool < 0) {
        if (tool == -2)
            PyErr_SetString(PyExc_RuntimeError,
                            "sys.monitoring: tool ids 3 and 4, the ones threadgraph may "
                            "use, are both taken by other tools");
        Py_DECREF(mon);
        return tool;
    }
    Py_XSETREF(r->mon_missing, PyObject_GetAttrString(mon, "MISSING"));
    if (r->mon_missing == NULL)
        PyErr_Clear();  /* a method descriptor then never counts as a C call */
    if (tg_mon_start(self, mon, tool) < 0) {
        Py_CLEAR(r->mon_missing);
        Py_DECREF(mon);
        return -1;
    }
    tg_mon_wrap_all(mon);
    Py_DECREF(mon);
    return 0;
}

void
tg_monitor_uninstall(struct tg_recorder_object *self)
{
    struct tg_recorder *r = &self->r;
    PyObject *mon;
    tg_saved_exc saved;

    tg_mon_unwrap_all();
    r->mon_aside = 0;
    if (r->mon_tool < 0) {  /* none installed, or stood aside */
        Py_CLEAR(r->mon_missing);
        return;
    }
    tg_exc_save(&saved);
    mon = tg_mon_module();
    if (mon != NULL) {
        tg_mon_release(self, mon, r->mon_tool);
        Py_DECREF(mon);
    }
    PyErr_Clear();
    r->mon_tool = -1;
    Py_CLEAR(r->mon_missing);
    tg_exc_restore(&saved);
}

#else /* !TG_HAVE_MONITORING */

int
tg_monitor_install(struct tg_recorder_object *self)
{
    (void)self;
    PyErr_SetString(PyExc_ValueError,
                    "backend 'monitoring' needs CPython 3.12 or 3.13 (sys.monitoring)");
    return -1;
}

void
tg_monitor_uninstall(struct tg_recorder_object *self)
{
    (void)self;
}

#endif
