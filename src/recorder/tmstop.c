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

static PyObject *
tg_tmstop_wrapper(PyObject *self, PyObject *arg)
{
    PyObject *res = tg_tmstop_orig(self, arg);

    /* tracemalloc's stop cannot fail once started; put ours back either way. */
    (void)tg_hooks_rehook();
    return res;
}

void
tg_tmstop_install(void)
{
    PyObject *mod, *fn;
    PyMethodDef *ml;

    if (tg_tmstop_ml != NULL)
        return;
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
