/*
 * accounting.h - allocation accounting: per-thread and process counters, size
 * histograms, live and total bytes by call site, heap snapshots, windows and
 * summary.json (docs/accounting.md).  The header the rest of the recorder
 * includes: the run's lifecycle and windows (accounting.c) and, through the
 * engine's own headers, the hooks (acct_state.h), snapshots (acct_snapshot.h),
 * periodic snapshots (acct_schedule.h) and figures as dicts (acct_py.h).
 *
 * Switched on per run (enable(..., accounting=True)); when off, the allocator
 * hooks pay one predictable branch on tg_acct_on and nothing else.
 *
 * Who touches what:
 *  - the allocator hooks (any thread, with or without the GIL) call
 *    tg_acct_alloc / tg_acct_free: they write the calling thread's own counters
 *    (thread-local pointer), and the process and site counters under the
 *    hooks' spin lock;
 *  - the profile function (GIL) calls tg_acct_push / tg_acct_pop when the
 *    recorder opens and closes a recorded call, and tg_acct_on_call for the
 *    periodic-snapshot counter: sites are interned there, with the GIL;
 *  - snapshot/window/summary run with the GIL from module.c.
 */
#ifndef TG_ACCOUNTING_H
#define TG_ACCOUNTING_H

#include "tg_compat.h"
#include "acct_py.h"
#include "acct_schedule.h"
#include "acct_snapshot.h"
#include "acct_state.h"

#pragma GCC visibility push(hidden)

struct tg_thread_table;

/* Largest sample_bytes accepted (weights stay far from overflow below it). */
#define TG_ACCT_SAMPLE_MAX (INT64_C(1) << 40)

/* Start accounting for a run writing into OUTDIR (GIL); THREADS (the recorder's
 * thread table, thread.h) names the threads in snapshots until tg_acct_finish.  SAMPLE_BYTES > 0 attributes allocations to
 * sites by sampling, one sample per SAMPLE_BYTES bytes on average (0: every
 * allocation).  STACK_SITE, when not NULL, gives a sampled allocation its
 * site (sampled mode, sampled.h) instead of the profile function's context.
 * Returns 0 or -1 with a Python exception. */
int tg_acct_start(const char *outdir, int compress, long long sample_bytes,
                  uint32_t (*stack_site)(struct tg_acct_thread *t),
                  struct tg_thread_table *threads);
/* Stop counting (GIL); the counters stay readable until the next start. */
void tg_acct_stop(void);
/* After tg_acct_stop: the final and peak snapshots (GIL); the summary files are
 * written by the Python layer from tg_acct_figures.
 * THREADS gives thread names.  Returns 0 or -1 with a Python exception. */
int tg_acct_finish(struct tg_thread_table *threads);
/* In a forked child (GIL): stop accounting and forget the inherited run, so
 * that the child writes no summary or snapshot into the parent's directory. */
void tg_acct_fork_child(void);
/* Whether the last run had accounting (for the Python layer). */
int tg_acct_was_on(void);

/* Windows (GIL): open one named NAME (returns an id >= 0 or -1 with an
 * exception); close it and get its figures as a dict (acct_py.h). */
long tg_acct_window_open(const char *name);
PyObject *tg_acct_window_close(long id);

#pragma GCC visibility pop

#endif /* TG_ACCOUNTING_H */
