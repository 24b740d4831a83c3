/*
 * noophook.c - the floor: a C profile function that does nothing, in every thread.
 *
 * Any profiler built on the profile hook (cProfile, threadgraph, the original
 * ThreadGraph) pays at least what this module costs: the interpreter building the
 * call/return events and calling a C function for each.  The benchmark harness
 * measures it so that a profiler's overhead can be read against that floor.
 *
 * enable() installs noophook_trace in every existing thread (PyEval_SetProfileAllThreads
 * on 3.12+, _PyEval_SetProfile on each thread state before that) and registers
 * noophook_install_current with threading.setprofile: threading calls it as a Python
 * profile function on the first event of each new thread, and it replaces itself
 * with the C function, so from the second event on new threads pay the floor only.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <stdlib.h>

/* Counts events only when asked (count=True), so the default is a pure no-op. */
static int noophook_count_events; /* protected by the GIL */
static unsigned long long noophook_events; /* protected by the GIL */
/* Test knob (bench/RESULTS.md, issue 22): NOOPHOOK_SPIN=N in the environment at
 * enable() makes every event run an empty loop of N iterations (3 instructions
 * each), to give the floor a profiler's per-event cost without its other work;
 * the sys.monitoring callback (event) too, from the value read at import.
 * Written at import and by enable() with the GIL, read by the hooks. */
static unsigned long noophook_spin;

static void
noophook_read_spin(void)
{
    const char *spin = getenv("NOOPHOOK_SPIN");
    noophook_spin = spin ? strtoul(spin, NULL, 10) : 0;
}

static void
noophook_do_spin(void)
{
    unsigned long i;
    for (i = 0; i < noophook_spin; i++)
        __asm__ volatile("");
}

static int
noophook_trace_spinning(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    (void)obj; (void)frame; (void)what; (void)arg;
    noophook_do_spin();
    return 0;
}

static int
noophook_trace(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    (void)obj; (void)frame; (void)what; (void)arg;
    return 0;
}

static int
noophook_trace_counting(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    (void)obj; (void)frame; (void)what; (void)arg;
    noophook_events++;
    return 0;
}

static Py_tracefunc
noophook_func(void)
{
    if (noophook_count_events)
        return noophook_trace_counting;
    return noophook_spin ? noophook_trace_spinning : noophook_trace;
}

/* Called by threading's per-thread hook on a new thread's first event. */
static PyObject *
noophook_install_current(PyObject *self, PyObject *args)
{
    (void)self; (void)args;
    PyEval_SetProfile(noophook_func(), NULL);
    Py_RETURN_NONE;
}

static PyMethodDef noophook_install_def = {
    "install_current", noophook_install_current, METH_VARARGS,
    "install the no-op C profile function in the calling thread"};

static int
noophook_set_all(Py_tracefunc func)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyEval_SetProfileAllThreads(func, NULL);
    return 0;
#else
    PyInterpreterState *interp = PyThreadState_GetInterpreter(PyThreadState_Get());
    PyThreadState *ts;
    for (ts = PyInterpreterState_ThreadHead(interp); ts; ts = PyThreadState_Next(ts)) {
        if (_PyEval_SetProfile(ts, func, NULL) < 0)
            return -1;
    }
    return 0;
#endif
}

static PyObject *
noophook_threading_setprofile(PyObject *hook)
{
    PyObject *threading = PyImport_ImportModule("threading");
    PyObject *res;
    if (threading == NULL)
        return NULL;
    res = PyObject_CallMethod(threading, "setprofile", "O", hook);
    Py_DECREF(threading);
    return res;
}

static PyObject *
noophook_enable(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"count", NULL};
    int count = 0;
    PyObject *hook, *res;
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|p", kwlist, &count))
        return NULL;
    noophook_count_events = count;
    noophook_read_spin();
    noophook_events = 0;
    hook = PyCFunction_New(&noophook_install_def, NULL);
    if (hook == NULL)
        return NULL;
    res = noophook_threading_setprofile(hook);
    Py_DECREF(hook);
    if (res == NULL)
        return NULL;
    Py_DECREF(res);
    if (noophook_set_all(noophook_func()) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
noophook_disable(PyObject *self, PyObject *unused)
{
    PyObject *res;
    (void)self; (void)unused;
    res = noophook_threading_setprofile(Py_None);
    if (res == NULL)
        return NULL;
    Py_DECREF(res);
    if (noophook_set_all(NULL) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(noophook_events);
}

/* The sys.monitoring floor (3.12+): a C callback that returns None, which
 * runner.py's noop-monitoring registers for the events threadgraph's
 * monitoring backend uses (src/recorder/monitor.c). */
static PyObject *
noophook_event(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self; (void)args; (void)nargs;
    noophook_do_spin();  /* NOOPHOOK_SPIN, read at import */
    Py_RETURN_NONE;
}

static PyMethodDef noophook_methods[] = {
    {"event", (PyCFunction)(void (*)(void))noophook_event, METH_FASTCALL,
     "event(*args) -> None: an empty sys.monitoring callback"},
    {"enable", (PyCFunction)(void (*)(void))noophook_enable, METH_VARARGS | METH_KEYWORDS,
     "enable(count=False): install the no-op profile function in every thread"},
    {"disable", noophook_disable, METH_NOARGS,
     "disable() -> events counted (0 unless count=True); remove it everywhere"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef noophook_module = {
    PyModuleDef_HEAD_INIT, "noophook",
    "A no-op C profile function in every thread: the floor of profile-hook profilers.",
    -1, noophook_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC
PyInit_noophook(void)
{
    noophook_read_spin();
    return PyModule_Create(&noophook_module);
}
