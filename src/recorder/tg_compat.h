/*
 * tg_compat.h - CPython version differences the recorder needs, in one place.
 *
 * The recorder supports CPython 3.8 to 3.13.  Everything that is spelled
 * differently between those versions (code extra slots, frame accessors, the
 * per-thread profile installer, exception save/restore) is wrapped here so the
 * engine reads the same on every version.
 */
#ifndef TG_COMPAT_H
#define TG_COMPAT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

/* The recorder's tables are protected by the GIL (recorder.h): a build
 * without one (free-threaded CPython, 3.13t) would race.  setup.py refuses it
 * with a message first; this stops any other way of building. */
#ifdef Py_GIL_DISABLED
#  error "threadgraph's recorder needs the GIL: free-threaded CPython (Py_GIL_DISABLED) is not supported; use the regular build of the same Python"
#endif

/* The interpreter running the calling thread. */
#if PY_VERSION_HEX >= 0x03090000
#  define tg_interp_current() PyInterpreterState_Get()
#else
#  define tg_interp_current() (PyThreadState_Get()->interp)
#endif

#if PY_VERSION_HEX >= 0x030C0000
#  define TG_HAVE_SETPROFILE_ALL 1
#  define tg_code_request_extra_index PyUnstable_Eval_RequestCodeExtraIndex
#  define tg_code_get_extra PyUnstable_Code_GetExtra
#  define tg_code_set_extra PyUnstable_Code_SetExtra
#else
#  define TG_HAVE_SETPROFILE_ALL 0
#  define tg_code_request_extra_index _PyEval_RequestCodeExtraIndex
#  define tg_code_get_extra _PyCode_GetExtra
#  define tg_code_set_extra _PyCode_SetExtra
#endif

/* The extra slot INDEX of CODE (a code object), or NULL when unset: what
 * tg_code_get_extra gives, read in place.  The interpreter keeps the slots in
 * code->co_extra as { Py_ssize_t ce_size; void *ce_extras[]; } (its
 * _PyCodeObjectExtra, the same layout on 3.8-3.13); the call it saves was a
 * tenth of a recorded Python event's instructions. */
static inline void *
tg_code_extra_fast(PyCodeObject *code, Py_ssize_t index)
{
    struct tg_code_extras {
        Py_ssize_t ce_size;
        void *ce_extras[1];
    } *e = (struct tg_code_extras *)code->co_extra;
    if (e == NULL || (size_t)index >= (size_t)e->ce_size)  /* index < 0 too */
        return NULL;
    return e->ce_extras[index];
}

/* Borrowed code object of a frame, read in place: what PyFrame_GetCode returns
 * without its call and the reference it takes (about 10 instructions per
 * profile event).  3.8-3.10 expose struct _frame and its f_code.  From 3.11 a
 * frame object is { PyObject_HEAD; PyFrameObject *f_back; struct
 * _PyInterpreterFrame *f_frame; ... } and the code is a fixed slot of the
 * interpreter frame (internal/pycore_frame.h): the fifth pointer on 3.11
 * (f_func, f_globals, f_builtins, f_locals, f_code), the first on 3.12 (f_code)
 * and 3.13 (f_executable, always a code object for a frame that has a frame
 * object, which is what PyFrame_GetCode asserts).  Newer versions call the
 * function. */
static inline PyCodeObject *
tg_frame_code(PyFrameObject *frame)
{
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000
    struct tg_frame_head {
        PyObject_HEAD
        PyFrameObject *f_back;
        PyObject **f_frame;
    };
#  if PY_VERSION_HEX < 0x030C0000
    return (PyCodeObject *)((struct tg_frame_head *)frame)->f_frame[4];
#  else
    return (PyCodeObject *)((struct tg_frame_head *)frame)->f_frame[0];
#  endif
#elif PY_VERSION_HEX >= 0x030E0000
    PyCodeObject *code = PyFrame_GetCode(frame);
    Py_DECREF(code);
    return code;
#else
    return frame->f_code;
#endif
}

/* The line FRAME's object holds when the interpreter set it for the profile
 * function's call (3.11: the f_lineno tg_frame_line reads), or 0 when it did
 * not (then only tg_frame_line knows).  Never calls: before 3.11 always 0. */
static inline int
tg_frame_line_set(PyFrameObject *frame)
{
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    struct tg_frame_head311 {
        PyObject_HEAD
        PyFrameObject *f_back;
        void *f_frame;
        PyObject *f_trace;
        int f_lineno;
    };
    return ((struct tg_frame_head311 *)frame)->f_lineno;
#else
    (void)frame;
    return 0;
#endif
}

/* PyFrame_GetLineNumber(FRAME), without the call where the frame says it: on
 * 3.11 the interpreter sets the frame object's f_lineno around a profile
 * function's call (call_trace), and PyFrame_GetLineNumber returns it when it
 * is not 0 (struct _frame of internal/pycore_frame.h: the head above, then
 * f_trace, then int f_lineno).  Other versions call the function. */
static inline int
tg_frame_line(PyFrameObject *frame)
{
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    struct tg_frame_head311 {
        PyObject_HEAD
        PyFrameObject *f_back;
        void *f_frame;
        PyObject *f_trace;
        int f_lineno;
    };
    int line = ((struct tg_frame_head311 *)frame)->f_lineno;
    if (__builtin_expect(line != 0, 1))
        return line;
#endif
    return PyFrame_GetLineNumber(frame);
}

/* Save and restore the exception in flight around the tracer's own Python calls,
 * so that a hook never changes or clears the profiled program's exception. */
#if PY_VERSION_HEX >= 0x030C0000
typedef struct { PyObject *exc; } tg_saved_exc;
static inline void tg_exc_save(tg_saved_exc *s) { s->exc = PyErr_GetRaisedException(); }
static inline void tg_exc_restore(tg_saved_exc *s) { PyErr_SetRaisedException(s->exc); }
#else
typedef struct { PyObject *type, *value, *tb; } tg_saved_exc;
static inline void tg_exc_save(tg_saved_exc *s) { PyErr_Fetch(&s->type, &s->value, &s->tb); }
static inline void tg_exc_restore(tg_saved_exc *s) { PyErr_Restore(s->type, s->value, s->tb); }
#endif

/* Give TS, the calling thread's state, which has no profile function, the
 * profile function FUNC with ARG (a reference is taken), as PyEval_SetProfile
 * would but without its "sys.setprofile" audit event: called from inside an
 * allocation (lifecycle.c tg_profile_watch), where no Python code may run.
 * While a trace function runs (ts->tracing) the interpreter recomputes the
 * tracing flag itself when it returns.  3.8-3.11 (3.12+ profile functions are
 * sys.monitoring's internals).  Returns 0, or -1 when TS has a profile
 * function after all. */
#if PY_VERSION_HEX < 0x030C0000
static inline int
tg_profile_take_quietly(PyThreadState *ts, Py_tracefunc func, PyObject *arg)
{
    if (ts->c_profilefunc != NULL || ts->c_profileobj != NULL)
        return -1;
    Py_INCREF(arg);
    ts->c_profileobj = arg;
    ts->c_profilefunc = func;
    if (ts->tracing == 0) {
#  if PY_VERSION_HEX >= 0x030B0000
        ts->cframe->use_tracing = 255;  /* _PyThreadState_UpdateTracingState */
#  elif PY_VERSION_HEX >= 0x030A0000
        ts->cframe->use_tracing = 1;
#  else
        ts->use_tracing = 1;
#  endif
    }
    return 0;
}
#endif

/* Install (func != NULL) or remove the profile function on another thread state.
 * Only for versions without PyEval_SetProfileAllThreads; the GIL must be held. */
#if !TG_HAVE_SETPROFILE_ALL
static inline void
tg_set_profile_on(PyThreadState *ts, Py_tracefunc func, PyObject *arg)
{
#if PY_VERSION_HEX >= 0x03090000
    if (_PyEval_SetProfile(ts, func, arg) < 0)
        PyErr_Clear();
#else
    /* 3.8 has no per-thread-state setter: the body of PyEval_SetProfile. */
    PyObject *old = ts->c_profileobj;
    Py_XINCREF(arg);
    ts->c_profilefunc = NULL;
    ts->c_profileobj = NULL;
    ts->use_tracing = ts->c_tracefunc != NULL;
    Py_XDECREF(old);
    ts->c_profilefunc = func;
    ts->c_profileobj = arg;
    ts->use_tracing = (func != NULL) || (ts->c_tracefunc != NULL);
#endif
}
#endif

/*
 * sys.monitoring (PEP 669) as a second event source, 3.12 and 3.13: events
 * reach C callbacks without materialising frame objects, for every thread.
 * Its callbacks get no frame: the running interpreter frame's address is the
 * frame's identity (opaque, compared only), read from the thread state.
 * Later versions use the setprofile backend until checked (the offset int the
 * interpreter allocates per event must be measured exactly: see recorder.c).
 */
#if PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030E0000
#  define TG_HAVE_MONITORING 1
#else
#  define TG_HAVE_MONITORING 0
#endif

#if TG_HAVE_MONITORING
/* Largest cached small int: ints up to it are not allocated. */
#  define TG_SMALL_INT_MAX 256
/* The key of the frame thread state TS is running (TS is the caller's). */
static inline uintptr_t
tg_tstate_frame_key(PyThreadState *ts)
{
#  if PY_VERSION_HEX >= 0x030D0000
    return (uintptr_t)ts->current_frame;
#  else
    return (uintptr_t)ts->cframe->current_frame;
#  endif
}

static inline uintptr_t
tg_current_frame_key(void)
{
    return tg_tstate_frame_key(PyThreadState_GET());
}
#endif

/* The code objects of thread TS's Python frames, innermost first, at most MAX
 * into CODES (borrowed: the frames hold them while TS does not run); returns
 * how many.  Sampled mode's stack walk (sampled.c), read in place as
 * tracemalloc reads it, without creating frame objects: 3.8-3.10 follow the
 * frame objects' f_back; 3.11 and 3.12 the interpreter frames from
 * tstate->cframe->current_frame, 3.13 from tstate->current_frame
 * (internal/pycore_frame.h: the code is the fifth pointer on 3.11, the first
 * on 3.12 and 3.13, the link the seventh on 3.11 and the second after; frames
 * the C stack owns (owner 3, the char after int stacktop and uint16_t
 * return_offset, 3.12+) are the interpreter's shims, as are 3.13's
 * CO_NO_MONITORING_EVENTS code objects, and a 3.13 frame whose f_executable is
 * not a code object is none of the program's).  Newer
 * versions go through PyEval_GetFrame and PyFrame_GetBack.
 * tg_stack_codes_check (recorder.c) compares it with the public API at import. */
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000
struct tg_iframe {
#  if PY_VERSION_HEX < 0x030C0000
    void *f_func, *f_globals, *f_builtins, *f_locals;
    PyObject *code;
    void *frame_obj;
    struct tg_iframe *previous;
#  else
    PyObject *code;
    struct tg_iframe *previous;
    void *f_funcobj, *f_globals, *f_builtins, *f_locals, *frame_obj, *instr;
    int stacktop;
    uint16_t return_offset;
    char owner;
#  endif
};
#endif

static inline int
tg_stack_codes(PyThreadState *ts, PyCodeObject **codes, int max)
{
    int n = 0;
#if PY_VERSION_HEX < 0x030B0000
    PyFrameObject *f;
    for (f = ts->frame; f != NULL && n < max; f = f->f_back)
        codes[n++] = f->f_code;
#elif PY_VERSION_HEX < 0x030E0000
    struct tg_iframe *f;
#  if PY_VERSION_HEX < 0x030D0000
    f = (struct tg_iframe *)ts->cframe->current_frame;
#  else
    f = (struct tg_iframe *)ts->current_frame;
#  endif
    for (; f != NULL && n < max; f = f->previous) {
#  if PY_VERSION_HEX >= 0x030C0000
        if (f->owner == 3 || f->code == NULL || !PyCode_Check(f->code))
            continue;
#    ifdef CO_NO_MONITORING_EVENTS
        /* 3.13's interpreter shims (_Py_InitCleanup after an __init__ call):
         * static, read-only code objects that are none of the program's. */
        if (((PyCodeObject *)f->code)->co_flags & CO_NO_MONITORING_EVENTS)
            continue;
#    endif
#  endif
        codes[n++] = (PyCodeObject *)f->code;
    }
#else
    PyFrameObject *f = PyEval_GetFrame();  /* borrowed */
    (void)ts;
    Py_XINCREF(f);
    while (f != NULL && n < max) {
        PyFrameObject *back = PyFrame_GetBack(f);
        PyCodeObject *c = PyFrame_GetCode(f);
        codes[n++] = c;
        Py_DECREF(c);  /* the running frame keeps it */
        Py_DECREF(f);
        f = back;
    }
    Py_XDECREF(f);
#endif
    return n;
}

/* The calling thread's state if it holds the GIL, else NULL: safe from any
 * thread, an allocator hook's included.  On 3.8-3.11 the current thread state is
 * the GIL holder's, whoever asks; it is ours only if it is this thread's own
 * (PyGILState_Check alone says yes for any thread when GIL-state checks are
 * off, as with sub-interpreters). */
static inline PyThreadState *
tg_tstate_if_gil(void)
{
    PyThreadState *ts;

    if (!PyGILState_Check())
        return NULL;
#if PY_VERSION_HEX >= 0x030D0000
    ts = PyThreadState_GetUnchecked();
#else
    ts = _PyThreadState_UncheckedGet();
#endif
    return ts != NULL && ts == PyGILState_GetThisThreadState() ? ts : NULL;
}

/* PyLong_AsLong(O) for a sys.monitoring instruction offset: from 3.12 an int
 * that fits a machine word is "compact" and its value is read in place (the
 * call and its overflow checks were ~2.5% of a profiled 3.12 run).  -1 with an
 * exception set on failure, as PyLong_AsLong. */
static inline long
tg_offset_long(PyObject *o)
{
#if PY_VERSION_HEX >= 0x030C0000
    if (PyLong_CheckExact(o) && PyUnstable_Long_IsCompact((PyLongObject *)o))
        return (long)PyUnstable_Long_CompactValue((PyLongObject *)o);
#endif
    return PyLong_AsLong(o);
}

static inline PyInterpreterState *
tg_tstate_interp(PyThreadState *ts)
{
#if PY_VERSION_HEX >= 0x03090000
    return PyThreadState_GetInterpreter(ts);
#else
    return ts->interp;
#endif
}

#endif /* TG_COMPAT_H */
