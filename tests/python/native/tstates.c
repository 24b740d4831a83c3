/*
 * tstates.c - a test extension for the sys.monitoring backend's cache of the
 * calling thread's state (src/recorder/monitor.c, tests/python/test_backends.py):
 * calls a Python callable N times from a pthread of its own, each call under a
 * thread state made for it, as C code that calls into Python from its own
 * threads does.  Built by the test at test time.
 *
 * Modes: 0, PyGILState_Ensure / PyGILState_Release around each call (a new
 * state each time, the previous one already freed); 1, PyThreadState_New for
 * each call while the previous state is still alive (freed after the call), so
 * that consecutive calls run under two different live states.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>

struct ts_job {
    PyObject *func;             /* borrowed: the caller holds it until joined */
    PyInterpreterState *interp;
    long n;
    int mode;
    int failed;                 /* a call raised (printed) */
};

/* Call JOB's function with I under the GIL and the current state. */
static void
ts_call(struct ts_job *job, long i)
{
    PyObject *r = PyObject_CallFunction(job->func, "l", i);
    if (r == NULL) {
        PyErr_Print();
        job->failed = 1;
        return;
    }
    Py_DECREF(r);
}

static void *
ts_run(void *arg)
{
    struct ts_job *job = arg;
    PyThreadState *prev = NULL;
    long i;

    for (i = 0; i < job->n; i++) {
        if (job->mode == 0) {
            PyGILState_STATE g = PyGILState_Ensure();
            ts_call(job, i);
            PyGILState_Release(g);
        } else {
            PyThreadState *ts = PyThreadState_New(job->interp);
            if (ts == NULL) {
                job->failed = 1;
                break;
            }
            PyEval_RestoreThread(ts);
            ts_call(job, i);
            if (prev != NULL) {
                PyThreadState_Clear(prev);
                PyThreadState_Delete(prev);
            }
            prev = ts;
            PyEval_SaveThread();
        }
    }
    if (prev != NULL) {
        PyEval_RestoreThread(prev);
        PyThreadState_Clear(prev);
        PyThreadState_DeleteCurrent();
    }
    return NULL;
}

/* calls(func, n, mode) -> None: see the file's comment. */
static PyObject *
ts_calls(PyObject *m, PyObject *args)
{
    struct ts_job job = {0};
    pthread_t th;
    int err;

    (void)m;
    if (!PyArg_ParseTuple(args, "Oli", &job.func, &job.n, &job.mode))
        return NULL;
    job.interp = PyInterpreterState_Get();
    Py_BEGIN_ALLOW_THREADS
    err = pthread_create(&th, NULL, ts_run, &job);
    if (err == 0)
        pthread_join(th, NULL);
    Py_END_ALLOW_THREADS
    if (err != 0)
        return PyErr_Format(PyExc_OSError, "pthread_create: %d", err);
    if (job.failed) {
        PyErr_SetString(PyExc_RuntimeError, "a call from the C thread failed");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef ts_methods[] = {
    {"calls", ts_calls, METH_VARARGS, "calls(func, n, mode): see tstates.c"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef ts_module = {
    PyModuleDef_HEAD_INIT, "tstates", "Calls from a C thread under new thread states.", -1,
    ts_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC
PyInit_tstates(void)
{
    return PyModule_Create(&ts_module);
}
