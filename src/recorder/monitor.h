/*
 * monitor.h - the sys.monitoring event source (monitor.c, CPython 3.12+).
 *
 * The callbacks' entry points are in recorder.c (tg_mon_entries), where the
 * event path is inlined into them; what they need of monitor.c (the callback
 * object, the thread-state cache, the C-call pre-check) is inline here.
 */
#ifndef TG_MONITOR_H
#define TG_MONITOR_H

#include "recorder.h"
#include "tls.h"

#pragma GCC visibility push(hidden)

#if TG_HAVE_MONITORING
/* Bytes the allocator is asked for by PyLong_FromSsize_t(1000), as the hooks
 * will see it (0 if none).  GIL held, hooks not installed yet. */
int64_t tg_offset_int_size(void);

/*
 * A callback: an object of monitor.c's own type called through vectorcall
 * (PEP 590), so that the interpreter calls the entry point directly, with no
 * builtin-function layer (cfunction_vectorcall_FASTCALL: a recursion check and
 * a thread-state read per event, ~25 instructions on 3.12).  One object per
 * kind of event, holding the recorder (strong).  Only sys.monitoring holds
 * them.
 */
struct tg_mon_cb {
    PyObject_HEAD
    vectorcallfunc vectorcall;       /* an entry of tg_mon_entries; set at creation */
    struct tg_recorder_object *rec;  /* strong; set at creation */
};

/* The kinds of callback, the second index of tg_mon_entries. */
enum {
    TG_MON_PY_CALL,    /* PY_START, PY_RESUME, PY_THROW: (code, offset) */
    TG_MON_PY_RETURN,  /* PY_RETURN, PY_YIELD, PY_UNWIND: (code, offset, value) */
    TG_MON_C_CALL,     /* CALL: (code, offset, callable, arg0) */
    TG_MON_C_RETURN,   /* C_RETURN, C_RAISE: (code, offset, callable, arg0) */
    TG_MON_N_KINDS
};

/* The callbacks' vectorcall functions (recorder.c), by r->default_path
 * (fixed at enable before the callbacks are made): the general ones, the
 * copies for the default configuration, and those copies with the clock's
 * beat (TG_PATH_*, recorder.h). */
extern const vectorcallfunc tg_mon_entries[3][TG_MON_N_KINDS];

/* The calling thread's state, cached (monitor.c explains when the cache is
 * used).  tg_mon_ts_epoch: advanced when any cached state is cleared; GIL. */
extern uint64_t tg_mon_ts_epoch;
struct tg_mon_ts {
    PyThreadState *ts;
    uint64_t epoch;  /* tg_mon_ts_epoch when TS was read */
};
extern _Thread_local struct tg_mon_ts tg_mon_ts __attribute__((tls_model("initial-exec")));

/* Read the calling thread's state again and cache it; returns it.  GIL held. */
PyThreadState *tg_mon_ts_refresh(void);

/* The key of the frame running CODE, the code object of the calling
 * thread's event (tg_tstate_frame_key of its state).  GIL held. */
static inline uintptr_t
tg_mon_frame(PyObject *code)
{
    if (__builtin_expect(tg_mon_ts.epoch == tg_mon_ts_epoch, 1)) {
        uintptr_t f = tg_tstate_frame_key(tg_mon_ts.ts);
        if (__builtin_expect(f != 0 && ((struct tg_iframe *)f)->code == code, 1))
            return f;
    }
    return tg_tstate_frame_key(tg_mon_ts_refresh());
}

/* tg_mon_frame when the cached thread state holds, else 0 without reading
 * it again (the event path's fast entries, recorder.c, which call nothing). */
static inline uintptr_t
tg_mon_frame_cached(PyObject *code)
{
    uintptr_t f;
    if (__builtin_expect(tg_mon_ts.epoch != tg_mon_ts_epoch, 0))
        return 0;
    f = tg_tstate_frame_key(tg_mon_ts.ts);
    return __builtin_expect(f != 0 && ((struct tg_iframe *)f)->code == code, 1) ? f : 0;
}

#endif
/* Start or stop delivering sys.monitoring events to the recorder (monitor.c);
 * install returns 0, or -1 with an exception (nothing installed), -2 (with a
 * RuntimeError) when both tool ids threadgraph may use are taken. */
int tg_monitor_install(struct tg_recorder_object *self);  /* 3.8-3.11: -1, ValueError */
void tg_monitor_uninstall(struct tg_recorder_object *self);

#pragma GCC visibility pop

#endif /* TG_MONITOR_H */
