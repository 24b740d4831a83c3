/*
 * acct_schedule.h - periodic heap snapshots of allocation accounting
 * (ProcessProfile(snapshot_every=...), docs/accounting.md): the profile
 * function counts calls of a code object or time, and writes a snapshot
 * (acct_snapshot.h) at each step; in sampled mode the sampled allocations
 * look at the time.  State in struct tg_acct's sched (GIL).
 */
#ifndef TG_ACCT_SCHEDULE_H
#define TG_ACCT_SCHEDULE_H

#include "tg_compat.h"

#pragma GCC visibility push(hidden)

/* Periodic snapshots: at START, START+EVERY, ... up to STOP (< 0: no end)
 * counted in calls of CODE (a code object) or, if CODE is NULL, in milliseconds
 * since the call (the Python side takes seconds as floats).  GIL.  0, or -1
 * with a Python exception. */
int tg_acct_schedule(long start, long stop, long every, PyObject *code);

/* Profile function (GIL): a Python call of CODE; writes the periodic snapshot
 * when one is due.  Never raises: the first failure is kept in
 * tg_acct.sched_err for tg_acct_finish to report. */
void tg_acct_on_call(PyObject *code);

/* Sampled mode, which has no profile function: a sampled allocation (any
 * thread, in its allocator hook) gives the time schedule its look, when it
 * holds the GIL and is the program's own (not the profiler's).  A schedule
 * counted in calls writes nothing there. */
void tg_acct_sched_sampled(void);

#pragma GCC visibility pop

#endif /* TG_ACCT_SCHEDULE_H */
