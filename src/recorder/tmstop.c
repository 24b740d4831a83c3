/*
 * tmstop.c - tracemalloc.start() and stop() keep the recorder's allocator
 * hooks on top of tracemalloc's; see tmstop.h.
 */
#include "tmstop.h"
#include "alloc_hooks.h"

/* The wrapped entries and their real functions.  GIL (install, uninstall and
 * the wrappers run with it). */
static PyMethodDef *tg_tmstop_ml;
static PyCFunction tg_tmstop_orig;
static PyMethodDef *tg_tmstart_ml;
static _PyCFunctionFast tg_tmstart_orig;
/* "_tracemalloc", made at the first install and kept (GIL). */
static PyObject *tg_tmstop_modname;

static PyObject *
tg_tmstop_wrapper(PyObject *self, PyObject *arg)
{
    PyObject *res = tg_tmstop_orig(self, arg);

    /* tracemalloc's stop cannot fail once started; put ours back either way. */
    (void)tg_hooks_rehook();
    return res;
}

static PyObject *
tg_tmstart_wrapper(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    /* Ours out (where all three are on top), tracemalloc's on the allocators
     * below, ours on top again: whether start succeeded, did nothing (already
     * tracing) or failed, rehook puts back on top whatever fell out. */
    (void)tg_hooks_lift();
    PyObject *res = tg_tmstart_orig(self, args, nargs);
    (void)tg_hooks_rehook();
    return res;
}

/* Whether tracemalloc traces now, asked without importing it (-X tracemalloc
 * and PYTHONTRACEMALLOC start it with no module imported): its public C API
 * refuses a trace with -2 only when it does not.  The trace, of a domain of
 * our own, is removed at once. */
static int
tg_tmstop_tracing(void)
{
    static const char tg_tmstop_key = 0;
    const unsigned int domain = 0x74670000u;  /* "tg": no other tool's */

    if (PyTraceMalloc_Track(domain, (uintptr_t)&tg_tmstop_key, 1) == -2)
        return 0;
    (void)PyTraceMalloc_Untrack(domain, (uintptr_t)&tg_tmstop_key);
    return 1;
}

/* The entry NAME of module MOD when it is a builtin of FLAGS: swapped for
 * WRAPPER, its real function in *ORIG, the entry in *ML.  Nothing otherwise. */
static void
tg_tm_wrap(PyObject *mod, const char *name, int flags, PyCFunction wrapper,
           PyMethodDef **ml, PyCFunction *orig)
{
    PyObject *fn = PyObject_GetAttrString(mod, name);

    if (fn == NULL) {
        PyErr_Clear();
        return;
    }
    if (PyCFunction_Check(fn)) {
        PyMethodDef *m = ((PyCFunctionObject *)fn)->m_ml;
        if (m->ml_flags == flags && m->ml_meth != wrapper) {
            *ml = m;
            *orig = m->ml_meth;
            m->ml_meth = wrapper;
        }
    }
    Py_DECREF(fn);
}

void
tg_tmstop_install(void)
{
    PyObject *mod;
    PyCFunction start_orig = NULL;

    if (tg_tmstop_ml != NULL || tg_tmstart_ml != NULL)
        return;
    /* Imported with the package (profiler.py), so that a start after
     * enable() finds the wrapper (tmstop.h), as a program's own import is
     * (made here, in the middle of enable(), it changed what later calls of
     * the program allocated: 56 bytes of one call in 300, a list taken from
     * or left out of CPython's free list).  Without it (the recorder module
     * used on its own), it is imported only when tracemalloc traces. */
    if (tg_tmstop_modname == NULL)
        tg_tmstop_modname = PyUnicode_InternFromString("_tracemalloc");
    mod = tg_tmstop_modname != NULL ? PyImport_GetModule(tg_tmstop_modname) : NULL;
    if (mod == NULL && !PyErr_Occurred() && tg_tmstop_tracing())
        mod = PyImport_ImportModule("_tracemalloc");
    if (mod == NULL) {
        PyErr_Clear();  /* a build without it: nothing to wrap */
        return;
    }
    tg_tm_wrap(mod, "stop", METH_NOARGS, tg_tmstop_wrapper, &tg_tmstop_ml, &tg_tmstop_orig);
    tg_tm_wrap(mod, "start", METH_FASTCALL, (PyCFunction)(void (*)(void))tg_tmstart_wrapper,
               &tg_tmstart_ml, &start_orig);
    if (tg_tmstart_ml != NULL)
        tg_tmstart_orig = (_PyCFunctionFast)(void (*)(void))start_orig;
    Py_DECREF(mod);
}

void
tg_tmstop_uninstall(void)
{
    /* The real functions stay in tg_tmstop_orig and tg_tmstart_orig: a call
     * already inside a wrapper returns through them. */
    if (tg_tmstop_ml != NULL) {
        tg_tmstop_ml->ml_meth = tg_tmstop_orig;
        tg_tmstop_ml = NULL;
    }
    if (tg_tmstart_ml != NULL) {
        tg_tmstart_ml->ml_meth = (PyCFunction)(void (*)(void))tg_tmstart_orig;
        tg_tmstart_ml = NULL;
    }
}
