/*
 * natext.c - a test extension for native=True (tests/python/test_native.py):
 * allocates and releases exactly the sizes it is asked for, with the C
 * library's allocator and anonymous mappings, from the calling thread or from a
 * pthread of its own.  Built by the test at test time; no Python allocator is
 * used for the blocks.
 */
#define _GNU_SOURCE
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static PyObject *
nx_ptr(void *p)
{
    if (p == NULL || p == MAP_FAILED)
        return PyErr_NoMemory();
    return PyLong_FromVoidPtr(p);
}

static PyObject *
nx_malloc(PyObject *m, PyObject *args)
{
    Py_ssize_t n;
    (void)m;
    if (!PyArg_ParseTuple(args, "n", &n))
        return NULL;
    return nx_ptr(malloc((size_t)n));
}

static PyObject *
nx_calloc(PyObject *m, PyObject *args)
{
    Py_ssize_t n, k;
    (void)m;
    if (!PyArg_ParseTuple(args, "nn", &n, &k))
        return NULL;
    return nx_ptr(calloc((size_t)n, (size_t)k));
}

static PyObject *
nx_realloc(PyObject *m, PyObject *args)
{
    PyObject *o;
    Py_ssize_t n;
    (void)m;
    if (!PyArg_ParseTuple(args, "On", &o, &n))
        return NULL;
    return nx_ptr(realloc(PyLong_AsVoidPtr(o), (size_t)n));
}

static PyObject *
nx_free(PyObject *m, PyObject *o)
{
    (void)m;
    free(PyLong_AsVoidPtr(o));
    Py_RETURN_NONE;
}

static PyObject *
nx_memalign(PyObject *m, PyObject *args)
{
    Py_ssize_t n;
    void *p = NULL;
    (void)m;
    if (!PyArg_ParseTuple(args, "n", &n))
        return NULL;
    if (posix_memalign(&p, 64, (size_t)n) != 0)
        return PyErr_NoMemory();
    return nx_ptr(p);
}

static PyObject *
nx_aligned(PyObject *m, PyObject *args)
{
    Py_ssize_t n;
    (void)m;
    if (!PyArg_ParseTuple(args, "n", &n))
        return NULL;
    return nx_ptr(aligned_alloc(4096, (size_t)n));
}

static PyObject *
nx_mmap(PyObject *m, PyObject *args)
{
    Py_ssize_t n;
    (void)m;
    if (!PyArg_ParseTuple(args, "n", &n))
        return NULL;
    return nx_ptr(mmap(NULL, (size_t)n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0));
}

static PyObject *
nx_munmap(PyObject *m, PyObject *args)
{
    PyObject *o;
    Py_ssize_t n;
    (void)m;
    if (!PyArg_ParseTuple(args, "On", &o, &n))
        return NULL;
    if (munmap(PyLong_AsVoidPtr(o), (size_t)n) != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

static PyObject *
nx_mremap(PyObject *m, PyObject *args)
{
    PyObject *o;
    Py_ssize_t a, b;
    (void)m;
    if (!PyArg_ParseTuple(args, "Onn", &o, &a, &b))
        return NULL;
    return nx_ptr(mremap(PyLong_AsVoidPtr(o), (size_t)a, (size_t)b, MREMAP_MAYMOVE));
}

/* next_sym(name) -> address or 0: dlsym(RTLD_NEXT, name) as this object asks it,
 * to check that the dlsym hook keeps the caller (the search starts after us). */
static PyObject *
nx_next_sym(PyObject *m, PyObject *args)
{
    const char *name;
    (void)m;
    if (!PyArg_ParseTuple(args, "s", &name))
        return NULL;
    return PyLong_FromVoidPtr(dlsym(RTLD_NEXT, name));
}

/* default_sym(name) -> address or 0: dlsym(RTLD_DEFAULT, name). */
static PyObject *
nx_default_sym(PyObject *m, PyObject *args)
{
    const char *name;
    (void)m;
    if (!PyArg_ParseTuple(args, "s", &name))
        return NULL;
    return PyLong_FromVoidPtr(dlsym(RTLD_DEFAULT, name));
}

struct nx_job {
    size_t size;
    int keep;
    long tid;
    void *block;
};

static void *
nx_thread_main(void *arg)
{
    struct nx_job *j = arg;
    j->tid = (long)syscall(SYS_gettid);
    j->block = malloc(j->size);
    if (j->block != NULL)
        memset(j->block, 1, j->size);
    if (!j->keep) {
        free(j->block);
        j->block = NULL;
    }
    return NULL;
}

/* pthread_alloc(size, keep) -> (tid, block or 0): a pthread of our own mallocs
 * SIZE bytes and frees them unless KEEP; joined before returning. */
static PyObject *
nx_pthread_alloc(PyObject *m, PyObject *args)
{
    struct nx_job j;
    pthread_t t;
    Py_ssize_t n;
    int keep, e;
    (void)m;
    if (!PyArg_ParseTuple(args, "np", &n, &keep))
        return NULL;
    memset(&j, 0, sizeof(j));
    j.size = (size_t)n;
    j.keep = keep;
    Py_BEGIN_ALLOW_THREADS
    e = pthread_create(&t, NULL, nx_thread_main, &j);
    if (e == 0)
        pthread_join(t, NULL);
    Py_END_ALLOW_THREADS
    if (e != 0) {
        errno = e;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return Py_BuildValue("(lN)", j.tid, PyLong_FromVoidPtr(j.block));
}

/* Allocators reached through words the loader fills in, which sit in this
 * object's RELA table after its RELATIVE relocations: memalign through a GOT
 * entry (GLOB_DAT: the volatile pointer makes the compiler load it from there)
 * and valloc through an initialised data word (an absolute relocation).  The
 * patcher must find both.  (Functions natext calls nowhere else, so that its
 * other calls keep their PLT JUMP_SLOTs.) */
static void *(*const nx_valloc_word)(size_t) = valloc;

static PyObject *
nx_ptr_memalign(PyObject *m, PyObject *args)
{
    void *(*volatile fn)(size_t, size_t) = memalign;
    Py_ssize_t n;
    (void)m;
    if (!PyArg_ParseTuple(args, "n", &n))
        return NULL;
    return nx_ptr(fn(64, (size_t)n));
}

static PyObject *
nx_ptr_valloc(PyObject *m, PyObject *args)
{
    Py_ssize_t n;
    (void)m;
    if (!PyArg_ParseTuple(args, "n", &n))
        return NULL;
    return nx_ptr(nx_valloc_word((size_t)n));
}

static PyMethodDef nx_methods[] = {
    {"malloc", nx_malloc, METH_VARARGS, NULL},
    {"calloc", nx_calloc, METH_VARARGS, NULL},
    {"realloc", nx_realloc, METH_VARARGS, NULL},
    {"free", nx_free, METH_O, NULL},
    {"ptr_memalign", nx_ptr_memalign, METH_VARARGS, NULL},
    {"ptr_valloc", nx_ptr_valloc, METH_VARARGS, NULL},
    {"posix_memalign", nx_memalign, METH_VARARGS, NULL},
    {"aligned_alloc", nx_aligned, METH_VARARGS, NULL},
    {"mmap", nx_mmap, METH_VARARGS, NULL},
    {"munmap", nx_munmap, METH_VARARGS, NULL},
    {"mremap", nx_mremap, METH_VARARGS, NULL},
    {"pthread_alloc", nx_pthread_alloc, METH_VARARGS, NULL},
    {"next_sym", nx_next_sym, METH_VARARGS, NULL},
    {"default_sym", nx_default_sym, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef nx_module = {
    PyModuleDef_HEAD_INIT, "natext", NULL, -1, nx_methods, NULL, NULL, NULL, NULL
};

PyMODINIT_FUNC
PyInit_natext(void)
{
    return PyModule_Create(&nx_module);
}
