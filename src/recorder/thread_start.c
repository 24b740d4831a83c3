/*
 * thread_start.c - an event source: threads started after enable() (not the
 * thread state, which is thread.c).
 *
 * _thread.start_new_thread (and threading's reference to it; on 3.13 also
 * start_joinable_thread) is replaced while recording by a C wrapper that hands
 * the new thread a "boot" callable instead of its function.  The boot object
 * runs first in the new thread: it creates the thread's state under the right
 * name, installs the profile function, calls the real function and, when it
 * returns, removes the profile function and flushes, closes and frees the
 * thread's files.  disable() puts the originals back.
 */
#include "recorder.h"
#include "thread_start.h"
#include "tls.h"
#include "lifecycle.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#if PY_VERSION_HEX >= 0x03090000
#  define TG_TPFLAGS_HAVE_VECTORCALL Py_TPFLAGS_HAVE_VECTORCALL
#  define tg_vectorcall PyObject_Vectorcall
#else
#  define TG_TPFLAGS_HAVE_VECTORCALL _Py_TPFLAGS_HAVE_VECTORCALL
#  define tg_vectorcall _PyObject_Vectorcall
#endif

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;  /* tg_boot_vectorcall */
    PyObject *rec;     /* the recorder object (strong) */
    uint64_t gen;      /* run the thread was started in */
    PyObject *func;    /* the real thread function */
    char *name;        /* threading.Thread name, or NULL (looked up in the thread) */
    size_t name_len;
} tg_boot;

static void
tg_boot_dealloc(tg_boot *b)
{
    Py_XDECREF(b->rec);
    Py_XDECREF(b->func);
    free(b->name);
    Py_TYPE(b)->tp_free((PyObject *)b);
}

/* The new thread's first call.  Called through vectorcall, not tp_call: a
 * tp_call counts one level of recursion, and a thread started while profiling
 * would then hit RecursionError one frame earlier than without the profiler. */
static PyObject *
tg_boot_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                   PyObject *kwnames)
{
    tg_boot *b = (tg_boot *)callable;
    struct tg_recorder_object *self = (struct tg_recorder_object *)b->rec;
    PyObject *res;

    if (self->r.active && self->r.gen == b->gen) {
        tg_thread_attach(self, b->name, b->name_len);
        /* Attaching calls Python (a stream_factory): the run may have ended
         * meanwhile, and disable() has already cleared every thread's profile
         * function. */
        if (self->r.backend == TG_BACKEND_SETPROFILE && !self->r.sampled && self->r.active
                && self->r.gen == b->gen)
            PyEval_SetProfile(tg_profile, (PyObject *)self);
    }
    res = tg_vectorcall(b->func, args, nargsf, kwnames);
    if (self->r.active && tg_tls.gen == self->r.gen && tg_tls.thread != NULL) {
        struct tg_thread *t = tg_tls.thread;
        /* a sweep (lifecycle.c tg_profile_reclaim) leaves its thread state alone */
        (t->glet_root != NULL ? t->glet_root : t)->ending = 1;
    }
    if (PyThreadState_Get()->c_profilefunc == tg_profile) {
        tg_saved_exc saved;
        tg_exc_save(&saved);
        PyEval_SetProfile(NULL, NULL);
        PyErr_Clear();
        tg_exc_restore(&saved);
    }
    if (self->r.active)
        tg_thread_detach(self);
    return res;
}

static PyTypeObject tg_boot_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "threadgraph._recorder._ThreadBoot",
    .tp_basicsize = sizeof(tg_boot),
    .tp_dealloc = (destructor)tg_boot_dealloc,
    .tp_vectorcall_offset = offsetof(tg_boot, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | TG_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Starts a thread under the active recorder (internal).",
};

int
tg_threads_module_init(void)
{
    return PyType_Ready(&tg_boot_type);
}

/* The name of the threading.Thread whose bound method FUNC is, or NULL.  Reads
 * the _name attribute directly: no Python code runs in the starting thread. */
static char *
tg_thread_name_of(PyObject *func, size_t *len)
{
    PyObject *owner, *name, *b;
    char *res = NULL;

    if (!PyMethod_Check(func))
        return NULL;
    owner = PyMethod_GET_SELF(func);
    name = PyObject_GetAttrString(owner, "_name");
    if (name != NULL && PyUnicode_Check(name)
            && PyObject_HasAttrString(owner, "_bootstrap_inner")) {
        b = PyUnicode_AsEncodedString(name, "utf-8", "backslashreplace");
        if (b != NULL) {
            *len = (size_t)PyBytes_GET_SIZE(b);
            res = malloc(*len + 1);
            if (res != NULL)
                memcpy(res, PyBytes_AS_STRING(b), *len + 1);
            Py_DECREF(b);
        }
    }
    Py_XDECREF(name);
    PyErr_Clear();
    return res;
}

/* Wrapper of start_new_thread / start_joinable_thread; SELF is the original. */
static PyObject *
tg_wrap_start(PyObject *orig, PyObject *args, PyObject *kwargs)
{
    struct tg_recorder_object *rec = tg_active;
    PyObject *newargs = NULL, *res = NULL;
    tg_boot *boot;
    Py_ssize_t i, n = PyTuple_GET_SIZE(args);
    int busy = tg_tls.busy;

    if (rec == NULL || n < 1)
        return PyObject_Call(orig, args, kwargs);
    /* The boot object is the profiler's, not the program's, allocation. */
    tg_tls.busy |= TG_BUSY_TRACER;
    boot = PyObject_New(tg_boot, &tg_boot_type);
    if (boot == NULL)
        goto restore;
    boot->vectorcall = tg_boot_vectorcall;
    Py_INCREF(rec);
    boot->rec = (PyObject *)rec;
    boot->gen = rec->r.gen;
    boot->func = PyTuple_GET_ITEM(args, 0);
    Py_INCREF(boot->func);
    boot->name_len = 0;
    boot->name = tg_thread_name_of(boot->func, &boot->name_len);
    newargs = PyTuple_New(n);
    if (newargs == NULL) {
        Py_DECREF(boot);
        goto restore;
    }
    PyTuple_SET_ITEM(newargs, 0, (PyObject *)boot);
    for (i = 1; i < n; i++) {
        PyObject *o = PyTuple_GET_ITEM(args, i);
        Py_INCREF(o);
        PyTuple_SET_ITEM(newargs, i, o);
    }
restore:
    tg_tls.busy = busy;
    if (newargs == NULL)
        return NULL;
    res = PyObject_Call(orig, newargs, kwargs);
    Py_DECREF(newargs);
    return res;
}

#if !TG_HAVE_SETPROFILE_ALL  /* 3.12+ watch no threading.setprofile */
/* Wrapper of threading.setprofile; SELF is the original.  A tool that writes
 * every thread's profile function itself calls it as it starts and stops
 * (yappi): the sweep counts what it holds and puts ours back where it let go
 * (lifecycle.c tg_profile_reclaim).  3.8-3.11, setprofile backend. */
static PyObject *
tg_wrap_tsetprofile(PyObject *orig, PyObject *args, PyObject *kwargs)
{
    struct tg_recorder_object *rec = tg_active;
    PyObject *res = PyObject_Call(orig, args, kwargs);

    if (res != NULL && rec != NULL)
        tg_profile_reclaim(rec, 1);
    return res;
}

static PyMethodDef tg_tsetprofile_def = {
    "setprofile", (PyCFunction)(void (*)(void))tg_wrap_tsetprofile,
    METH_VARARGS | METH_KEYWORDS, "threading.setprofile, watched by threadgraph"};
#endif

static PyMethodDef tg_wrap_defs[] = {
    {"start_new_thread", (PyCFunction)(void (*)(void))tg_wrap_start,
     METH_VARARGS | METH_KEYWORDS, "start_new_thread, profiled by threadgraph"},
    {"start_joinable_thread", (PyCFunction)(void (*)(void))tg_wrap_start,
     METH_VARARGS | METH_KEYWORDS, "start_joinable_thread, profiled by threadgraph"},
};

/* Replace MODULE.ATTR (if it is ORIG) with WRAPPER and remember it. */
static int
tg_wrap_attr(struct tg_recorder *r, PyObject *module, const char *attr, PyObject *orig,
             PyObject *wrapper)
{
    PyObject *cur, *entry;
    int ret = 0;

    cur = PyObject_GetAttrString(module, attr);
    if (cur == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (cur == orig) {
        entry = Py_BuildValue("(OsOO)", module, attr, orig, wrapper);
        if (entry == NULL || PyList_Append(r->wrapped, entry) < 0
                || PyObject_SetAttrString(module, attr, wrapper) < 0)
            ret = -1;
        Py_XDECREF(entry);
    }
    Py_DECREF(cur);
    return ret;
}

int
tg_threads_wrap(struct tg_recorder_object *self)
{
    struct tg_recorder *r = &self->r;
    static const char *const thread_attrs[2] = {"start_new_thread", "start_joinable_thread"};
    static const char *const threading_attrs[2] = {"_start_new_thread", "_start_joinable_thread"};
    PyObject *thread_mod = NULL, *threading_mod = NULL, *modname = NULL;
    int i, ret = -1;

    Py_XSETREF(r->wrapped, PyList_New(0));
    if (r->wrapped == NULL)
        return -1;
    thread_mod = PyImport_ImportModule("_thread");
    if (thread_mod == NULL)
        goto cleanup;
    modname = PyUnicode_FromString("_thread");
    if (modname == NULL)
        goto cleanup;
    {
        PyObject *tname = PyUnicode_FromString("threading");
        if (tname == NULL)
            goto cleanup;
        threading_mod = PyImport_GetModule(tname);  /* only if already imported */
        Py_DECREF(tname);
        PyErr_Clear();
    }
    for (i = 0; i < 2; i++) {
        PyObject *orig = PyObject_GetAttrString(thread_mod, thread_attrs[i]);
        PyObject *wrapper;
        if (orig == NULL) {
            PyErr_Clear();
            continue;
        }
        wrapper = PyCFunction_NewEx(&tg_wrap_defs[i], orig, modname);
        if (wrapper == NULL
                || tg_wrap_attr(r, thread_mod, thread_attrs[i], orig, wrapper) < 0
                || (threading_mod != NULL
                    && tg_wrap_attr(r, threading_mod, threading_attrs[i], orig, wrapper) < 0)) {
            Py_XDECREF(wrapper);
            Py_DECREF(orig);
            goto cleanup;
        }
        Py_DECREF(wrapper);
        Py_DECREF(orig);
    }
#if !TG_HAVE_SETPROFILE_ALL
    if (threading_mod != NULL && r->backend == TG_BACKEND_SETPROFILE && !r->sampled) {
        PyObject *orig = PyObject_GetAttrString(threading_mod, "setprofile");
        PyObject *wrapper = NULL, *tname = PyUnicode_FromString("threading");
        /* best effort: unwrapped, such a tool's threads stay unrecorded after it */
        if (orig != NULL && tname != NULL && PyFunction_Check(orig)) {
            wrapper = PyCFunction_NewEx(&tg_tsetprofile_def, orig, tname);
            if (wrapper != NULL)
                (void)tg_wrap_attr(r, threading_mod, "setprofile", orig, wrapper);
        }
        PyErr_Clear();
        Py_XDECREF(wrapper);
        Py_XDECREF(orig);
        Py_XDECREF(tname);
    }
#endif
    ret = 0;
cleanup:
    Py_XDECREF(thread_mod);
    Py_XDECREF(threading_mod);
    Py_XDECREF(modname);
    if (ret < 0)
        tg_threads_unwrap(self);
    return ret;
}

void
tg_threads_unwrap(struct tg_recorder_object *self)
{
    struct tg_recorder *r = &self->r;
    tg_saved_exc saved;
    Py_ssize_t i;

    if (r->wrapped == NULL)
        return;
    tg_exc_save(&saved);
    for (i = PyList_GET_SIZE(r->wrapped) - 1; i >= 0; i--) {
        PyObject *e = PyList_GET_ITEM(r->wrapped, i);
        PyObject *module = PyTuple_GET_ITEM(e, 0);
        const char *attr = PyUnicode_AsUTF8(PyTuple_GET_ITEM(e, 1));
        PyObject *cur = attr ? PyObject_GetAttrString(module, attr) : NULL;
        if (cur == PyTuple_GET_ITEM(e, 3))
            PyObject_SetAttrString(module, attr, PyTuple_GET_ITEM(e, 2));
        Py_XDECREF(cur);
        PyErr_Clear();
    }
    Py_CLEAR(r->wrapped);
    tg_exc_restore(&saved);
}
