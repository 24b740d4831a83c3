/*
 * acct_schedule.c - periodic heap snapshots (see acct_schedule.h).
 */
#include "acct_schedule.h"
#include "acct_snapshot.h"
#include "acct_state.h"
#include "tls.h"

#include <stdio.h>

int
tg_acct_schedule(long start, long stop, long every, PyObject *code)
{
    if (every <= 0 || start < 0 || (stop >= 0 && stop < start)) {
        PyErr_SetString(PyExc_ValueError,
                        "need every > 0, start_after >= 0 and stop_after >= start_after");
        return -1;
    }
    Py_CLEAR(tg_acct.sched.code);
    Py_XINCREF(code);
    tg_acct.sched.code = code;
    tg_acct.sched.start = start;
    tg_acct.sched.stop = stop;
    tg_acct.sched.every = every;
    tg_acct.sched.next = start;
    tg_acct.sched.calls = 0;
    tg_acct.sched.t0 = tg_acct_monotonic();
    tg_acct.sched.active = 1;
    return 0;
}

/* Write the periodic snapshot labelled by the count reached; failures are
 * swallowed (the hook never raises) and noted as a skipped number. */
static void
tg_acct_sched_fire(long count)
{
    char label[64];
    tg_saved_exc saved;

    if (tg_acct.sched.code != NULL) {
        snprintf(label, sizeof(label), "call-%ld", count);
    } else {
        /* milliseconds as seconds, no trailing zeros: t-2s, t-0.25s */
        int n = snprintf(label, sizeof(label), "t-%ld.%03ld", count / 1000, count % 1000);
        while (n > 0 && label[n - 1] == '0')
            n--;
        if (n > 0 && label[n - 1] == '.')
            n--;
        snprintf(label + n, sizeof(label) - (size_t)n, "s");
    }
    tg_exc_save(&saved);
    tg_acct_snapshot_noted("periodic", label, 0);
    tg_exc_restore(&saved);
    tg_acct.sched.next += tg_acct.sched.every;
    if (tg_acct.sched.stop >= 0 && tg_acct.sched.next > tg_acct.sched.stop)
        tg_acct.sched.active = 0;
}

void
tg_acct_on_call(PyObject *code)
{
    if (!tg_acct.sched.active)
        return;
    if (tg_acct.sched.code != NULL) {
        if (code != tg_acct.sched.code)
            return;
        tg_acct.sched.calls++;
        if (tg_acct.sched.calls >= tg_acct.sched.next)
            tg_acct_sched_fire(tg_acct.sched.calls);
    } else {
        double el_ms = (tg_acct_monotonic() - tg_acct.sched.t0) * 1000.0;
        if (el_ms >= (double)tg_acct.sched.next)
            tg_acct_sched_fire(tg_acct.sched.next);
    }
}


void
tg_acct_sched_sampled(void)
{
    int busy = tg_tls.busy;

    /* The GIL first: it guards the schedule. */
    if ((busy & TG_BUSY_TRACER) || tg_tstate_if_gil() == NULL)
        return;
    if (!tg_acct.sched.active || tg_acct.sched.code != NULL)
        return;
    tg_tls.busy = busy | TG_BUSY_TRACER;  /* the snapshot's own blocks uncounted */
    tg_acct_on_call(NULL);
    tg_tls.busy = busy;
}
