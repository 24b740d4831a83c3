/*
 * sampled_adopt.c - sampled mode's threads that existed before enable() (see
 * sampled.h, tg_sampled_adopt_install).
 *
 * Sampled mode installs no profile function: a thread is attached (its name,
 * its memory curve's file) by the wrapper threading starts new threads
 * through.  A thread running before enable() (threadgraph attach, or a
 * ProcessProfile enabled once workers run) would never be: its bytes went to
 * "native-<tid>", with no curve.  On 3.8-3.11 each such thread gets a one-shot
 * profile function instead, which attaches it at its first event (a profile
 * event is a safe point to run Python code: the name's lookup) and removes
 * itself (3.12+: see tg_adopt_set).
 */
#include "sampled.h"
#include "recorder.h"
#include "thread_py.h"
#include "tls.h"

/* Sets thread state TS's profile function (GIL held); 0, or -1 where it is
 * not done.  3.12 and later: not done.  There a profile function is carried by
 * sys.monitoring events enabled for the whole interpreter while any thread has
 * one, so every thread's calls would pay for it until the last adopted thread
 * ran again, which an idle pool worker may not do for hours (3.8-3.11: only
 * the thread that has one pays, for its one event). */
static int
tg_adopt_set(PyThreadState *ts, Py_tracefunc func, PyObject *arg)
{
#if PY_VERSION_HEX >= 0x030C0000
    (void)ts;
    (void)func;
    (void)arg;
    return -1;
#else
    tg_set_profile_on(ts, func, arg);  /* tg_compat.h; an error is cleared */
    return 0;
#endif
}

/* The one-shot profile function: removes itself, then attaches the calling
 * thread to the run OBJ if it is still the one that installed it. */
static int
tg_sampled_adopt(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    struct tg_recorder_object *self = (struct tg_recorder_object *)obj;
    uint64_t gen = self->r.gen;

    (void)frame;
    (void)what;
    (void)arg;
    Py_INCREF(obj);  /* removing the function drops its reference */
    PyEval_SetProfile(NULL, NULL);
    if (self->r.active && self->r.sampled && self->r.gen == gen && tg_tls.gen != gen
            && !(tg_tls.busy & TG_BUSY_TRACER))
        tg_thread_attach(self, NULL, 0);
    Py_DECREF(obj);
    return 0;
}

int
tg_sampled_adopt_install(struct tg_recorder_object *self)
{
    PyThreadState *me = PyThreadState_Get();
    PyThreadState *ts = PyInterpreterState_ThreadHead(tg_tstate_interp(me));
    int n = 0;

    for (; ts != NULL; ts = PyThreadState_Next(ts))
        if (ts != me && ts->c_profilefunc == NULL
                && tg_adopt_set(ts, tg_sampled_adopt, (PyObject *)self) == 0)
            n++;
    return n;
}

void
tg_sampled_adopt_remove(void)
{
    PyThreadState *ts = PyInterpreterState_ThreadHead(tg_tstate_interp(PyThreadState_Get()));

    for (; ts != NULL; ts = PyThreadState_Next(ts))
        if (ts->c_profilefunc == tg_sampled_adopt)
            tg_adopt_set(ts, NULL, NULL);
}
