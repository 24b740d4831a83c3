/*
 * spguard.c - sys.setprofile's C_RETURN kept from the function it installs;
 * see spguard.h.
 */
#include "spguard.h"

#include <string.h>

/* sys.setprofile's method table entry, its real function, and whether it is
 * wrapped.  GIL.  The first two stay set after uninstall: a wrapper entered
 * through a stale pointer, or a guard, still finds them. */
static PyMethodDef *tg_sp_ml;
static PyCFunction tg_sp_orig;
static int tg_sp_wrapped;

/* The function a guard stands in front of, per thread (only its own thread
 * installs and reads it). */
static _Thread_local Py_tracefunc tg_sp_guarded;

/* Whether ARG, a C event's function, is sys.setprofile. */
static int
tg_sp_is_setprofile(PyObject *arg)
{
    return arg != NULL && PyCFunction_Check(arg) && ((PyCFunctionObject *)arg)->m_ml == tg_sp_ml;
}

/* The guard: installed as the thread's profile function between sys.setprofile
 * and the interpreter's report of its return, with the other tool's profile
 * object left in place.  Takes that report; passes on anything else (a call of
 * sys.setprofile the interpreter did not report). */
static int
tg_sp_guard(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    PyThreadState *ts = PyThreadState_Get();
    Py_tracefunc f = tg_sp_guarded;

    if (ts->c_profilefunc == tg_sp_guard)
        ts->c_profilefunc = f;
    if ((what == PyTrace_C_RETURN || what == PyTrace_C_EXCEPTION) && tg_sp_is_setprofile(arg))
        return 0;
    return f(obj, frame, what, arg);
}

/* Whether the interpreter reports the return of the builtin the thread of TS
 * is calling only because the recorder sees C calls: the recorder's profile
 * function is the thread's, or (3.12+) its sys.monitoring tool records and
 * the thread has no profile function; and no profile or trace function is
 * running (the interpreter reports nothing then). */
static int
tg_sp_ours(PyThreadState *ts)
{
    struct tg_recorder_object *a = tg_active;

    if (ts->tracing != 0)
        return 0;
    if (ts->c_profilefunc == tg_profile)
        return 1;
    return ts->c_profilefunc == NULL && a != NULL && a->r.active
           && a->r.backend == TG_BACKEND_MONITORING;
}

/* Whether the function sys.setprofile just installed on TS is the recording
 * recorder's object, given back by a program that saved sys.getprofile() and
 * restores it (memray.Tracker's exit, any save-and-restore of the profile
 * function): ours is then put back as it was, the C function in place of the
 * interpreter's Python trampoline (the object, held by the thread state, is
 * already ours), and the thread is recorded on, this call's return included,
 * as if its function had never changed.  The audit hook's watch then finds
 * ours and counts nothing.  3.12+ with backend="setprofile": the same fields,
 * read by sys.monitoring's legacy profile callbacks. */
static int
tg_sp_put_back(PyThreadState *ts)
{
    struct tg_recorder_object *a = tg_active;

    if (a == NULL || !a->r.active || a->r.backend != TG_BACKEND_SETPROFILE
            || ts->c_profileobj != (PyObject *)a || ts->c_profilefunc == tg_profile)
        return 0;
    ts->c_profilefunc = tg_profile;
    return 1;
}

/* sys.setprofile's function, wrapped: the real call, then the guard if it put
 * another tool's function in place where the interpreter reports this call's
 * return only because of the recorder (tg_sp_ours). */
static PyObject *
tg_sp_wrapper(PyObject *self, PyObject *arg)
{
    PyThreadState *ts = PyThreadState_Get();
    int ours = tg_sp_ours(ts);
    PyObject *res = tg_sp_orig(self, arg);

    if (res != NULL && tg_sp_put_back(ts))
        return res;
    if (ours && res != NULL && ts->c_profilefunc != NULL && ts->c_profilefunc != tg_profile
            && ts->c_profilefunc != tg_sp_guard) {
        tg_sp_guarded = ts->c_profilefunc;
        ts->c_profilefunc = tg_sp_guard;
    }
    return res;
}

void
tg_spguard_install(void)
{
    PyObject *fn = PySys_GetObject("setprofile");  /* borrowed */
    PyMethodDef *ml;

    if (tg_sp_wrapped || fn == NULL || !PyCFunction_Check(fn))
        return;
    ml = ((PyCFunctionObject *)fn)->m_ml;
    if (ml->ml_flags != METH_O || ml->ml_meth == tg_sp_wrapper || ml->ml_name == NULL
            || strcmp(ml->ml_name, "setprofile") != 0)
        return;
    tg_sp_orig = ml->ml_meth;
    tg_sp_ml = ml;
    ml->ml_meth = tg_sp_wrapper;
    tg_sp_wrapped = 1;
}

void
tg_spguard_uninstall(void)
{
    if (!tg_sp_wrapped)
        return;
    tg_sp_ml->ml_meth = tg_sp_orig;
    tg_sp_wrapped = 0;
}
