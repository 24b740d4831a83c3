/*
 * tmstop.c - tracemalloc.stop() puts the recorder's allocator hooks back; see
 * tmstop.h.
 */
#include "tmstop.h"
#include "alloc_hooks.h"

/* The wrapped entry and its real function.  GIL (install, uninstall and the
 * wrapper run with it). */
static PyMethodDef *tg_tmstop_ml;
static PyCFunction tg_tmstop_orig;
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

void
tg_tmstop_install(void)
{
    PyObject *mod, *fn;
    PyMethodDef *ml;

    if (tg_tmstop_ml != NULL)
        return;
    /* Imported by the program already, or tracing (then the program will
     * import it to stop it): wrapped.  Otherwise tracemalloc has never run,
     * and when the program starts it, it wraps our hooks, which its stop puts
     * back: nothing to wrap, and no module imported that the program did not
     * import (its objects would change what the program's calls allocate). */
    if (tg_tmstop_modname == NULL)
        tg_tmstop_modname = PyUnicode_InternFromString("_tracemalloc");
    mod = tg_tmstop_modname != NULL ? PyImport_GetModule(tg_tmstop_modname) : NULL;
    if (mod == NULL && !PyErr_Occurred() && tg_tmstop_tracing())
        mod = PyImport_ImportModule("_tracemalloc");
    if (mod == NULL) {
        PyErr_Clear();  /* a build without it: nothing to wrap */
        return;
    }
    fn = PyObject_GetAttrString(mod, "stop");
    Py_DECREF(mod);
    if (fn == NULL) {
        PyErr_Clear();
        return;
    }
    if (PyCFunction_Check(fn)) {
        ml = ((PyCFunctionObject *)fn)->m_ml;
        if (ml->ml_flags == METH_NOARGS && ml->ml_meth != tg_tmstop_wrapper) {
            tg_tmstop_ml = ml;
            tg_tmstop_orig = ml->ml_meth;
            ml->ml_meth = tg_tmstop_wrapper;
        }
    }
    Py_DECREF(fn);
}

void
tg_tmstop_uninstall(void)
{
    if (tg_tmstop_ml == NULL)
        return;
    tg_tmstop_ml->ml_meth = tg_tmstop_orig;
    tg_tmstop_ml = NULL;
    /* tg_tmstop_orig stays: a call already inside the wrapper returns through it. */
}
