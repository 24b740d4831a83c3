/*
 * sleepwrap.c - sleep triggers entered from C (`with lock:`); see sleepwrap.h.
 *
 * A wrapper cannot learn which method table entry it was called through, so
 * there is a fixed set of slots, each with its own wrapper functions (one per
 * calling convention) and the original function it forwards to.
 */
#include "sleepwrap.h"

#include <string.h>

#define TG_SW_SLOTS 8

/* One wrapped method table entry.  GIL (install, uninstall and the wrappers all
 * run with it; the original pointer is read before the call releases it). */
struct tg_sw_slot {
    PyMethodDef *ml;     /* the entry, or NULL when the slot is free */
    PyCFunction orig;    /* its real ml_meth */
};

static struct tg_sw_slot tg_sw_slots[TG_SW_SLOTS];

/* The forwarding bodies, one per calling convention; SLOT is a constant. */
#define TG_SW_DEFINE(slot)                                                          \
    static PyObject *                                                               \
    tg_sw_varkw_##slot(PyObject *self, PyObject *args, PyObject *kw)                \
    {                                                                               \
        PyCFunctionWithKeywords f =                                                 \
            (PyCFunctionWithKeywords)(void (*)(void))tg_sw_slots[slot].orig;        \
        int armed = tg_trigger_arm_direct();                                        \
        PyObject *res = f(self, args, kw);                                          \
        if (armed)                                                                  \
            tg_trigger_settle_direct();                                             \
        return res;                                                                 \
    }                                                                               \
    static PyObject *                                                               \
    tg_sw_plain_##slot(PyObject *self, PyObject *arg)                               \
    {                                                                               \
        PyCFunction f = tg_sw_slots[slot].orig;                                     \
        int armed = tg_trigger_arm_direct();                                        \
        PyObject *res = f(self, arg);                                               \
        if (armed)                                                                  \
            tg_trigger_settle_direct();                                             \
        return res;                                                                 \
    }                                                                               \
    static PyObject *                                                               \
    tg_sw_fastkw_##slot(PyObject *self, PyObject *const *args, Py_ssize_t n,        \
                        PyObject *kwnames)                                          \
    {                                                                               \
        _PyCFunctionFastWithKeywords f =                                            \
            (_PyCFunctionFastWithKeywords)(void (*)(void))tg_sw_slots[slot].orig;   \
        int armed = tg_trigger_arm_direct();                                        \
        PyObject *res = f(self, args, n, kwnames);                                  \
        if (armed)                                                                  \
            tg_trigger_settle_direct();                                             \
        return res;                                                                 \
    }                                                                               \
    static PyObject *                                                               \
    tg_sw_fast_##slot(PyObject *self, PyObject *const *args, Py_ssize_t n)          \
    {                                                                               \
        _PyCFunctionFast f = (_PyCFunctionFast)(void (*)(void))tg_sw_slots[slot].orig; \
        int armed = tg_trigger_arm_direct();                                        \
        PyObject *res = f(self, args, n);                                           \
        if (armed)                                                                  \
            tg_trigger_settle_direct();                                             \
        return res;                                                                 \
    }

TG_SW_DEFINE(0)
TG_SW_DEFINE(1)
TG_SW_DEFINE(2)
TG_SW_DEFINE(3)
TG_SW_DEFINE(4)
TG_SW_DEFINE(5)
TG_SW_DEFINE(6)
TG_SW_DEFINE(7)

#define TG_SW_ROW(slot)                                                             \
    {(PyCFunction)(void (*)(void))tg_sw_varkw_##slot, tg_sw_plain_##slot,            \
     (PyCFunction)(void (*)(void))tg_sw_fastkw_##slot,                               \
     (PyCFunction)(void (*)(void))tg_sw_fast_##slot}

/* Wrappers by slot: VARARGS|KEYWORDS, VARARGS/NOARGS/O, FASTCALL|KEYWORDS,
 * FASTCALL. */
static const PyCFunction tg_sw_wrappers[TG_SW_SLOTS][4] = {
    TG_SW_ROW(0), TG_SW_ROW(1), TG_SW_ROW(2), TG_SW_ROW(3),
    TG_SW_ROW(4), TG_SW_ROW(5), TG_SW_ROW(6), TG_SW_ROW(7),
};

/* The wrapper kind for ML's calling convention, or -1 if not handled (e.g.
 * METH_METHOD, which passes the defining class). */
static int
tg_sw_kind(const PyMethodDef *ml)
{
    int flags = ml->ml_flags & ~(METH_CLASS | METH_STATIC | METH_COEXIST);

    if (flags == (METH_VARARGS | METH_KEYWORDS))
        return 0;
    if (flags == METH_VARARGS || flags == METH_NOARGS || flags == METH_O)
        return 1;
    if (flags == (METH_FASTCALL | METH_KEYWORDS))
        return 2;
    if (flags == METH_FASTCALL)
        return 3;
    return -1;
}

/* Whether FN is one of our wrappers (an entry already wrapped, e.g. shared by
 * two triggers). */
static int
tg_sw_is_wrapper(PyCFunction fn)
{
    size_t i, k;
    for (i = 0; i < TG_SW_SLOTS; i++)
        for (k = 0; k < 4; k++)
            if (tg_sw_wrappers[i][k] == fn)
                return 1;
    return 0;
}

void
tg_sleepwrap_install(struct tg_recorder *r)
{
    size_t i, slot = 0;

    if (!r->track_sleeps || r->memory_mode == TG_MEM_THREAD)
        return;  /* no correction in this run: nothing to wrap */
    for (i = 0; i < r->n_trig_defs; i++) {
        PyMethodDef *ml = r->trig_defs[i];
        int kind = tg_sw_kind(ml);
        if (ml->ml_name == NULL || strcmp(ml->ml_name, "__enter__") != 0 || kind < 0
            || tg_sw_is_wrapper(ml->ml_meth))
            continue;
        while (slot < TG_SW_SLOTS && tg_sw_slots[slot].ml != NULL)
            slot++;
        if (slot == TG_SW_SLOTS)
            return;  /* more than we have slots for: explicit calls still count */
        tg_sw_slots[slot].ml = ml;
        tg_sw_slots[slot].orig = ml->ml_meth;
        ml->ml_meth = tg_sw_wrappers[slot][kind];
    }
}

void
tg_sleepwrap_uninstall(void)
{
    size_t i;
    for (i = 0; i < TG_SW_SLOTS; i++) {
        if (tg_sw_slots[i].ml == NULL)
            continue;
        tg_sw_slots[i].ml->ml_meth = tg_sw_slots[i].orig;
        tg_sw_slots[i].ml = NULL;
        /* orig stays: a thread blocked in the wrapper read it before blocking,
         * and a wrapper entered through a stale bound method still finds it. */
    }
}
