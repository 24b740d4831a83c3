/*
 * acct_py.h - allocation accounting's figures as Python objects, for the
 * binding (module.c) and for summary.json: the only part of the engine that
 * builds dicts.  Reads accounting's state (acct_state.h) and the recorder's
 * thread log for thread names.
 */
#ifndef TG_ACCT_PY_H
#define TG_ACCT_PY_H

#include "tg_compat.h"
#include <stdint.h>

#pragma GCC visibility push(hidden)

struct tg_thread_table;
struct tg_acct_figs;

/* Figures now (GIL): {"process": {...}, "threads": [...], "windows": [...],
 * "snapshots": N, "sample_bytes": N}; TAB (the recorder's thread table,
 * thread.h) names the threads.  New dict or NULL
 * with an exception. */
PyObject *tg_acct_figures(struct tg_thread_table *tab);

/* A closed window's dict (GIL): NAME, SECONDS open, the process's figures PD
 * over the window with its PEAK and the live bytes LIVE0 at open, and the
 * opening thread's figures TD.  New dict or NULL with an exception. */
PyObject *tg_acct_window_dict(const char *name, double seconds, const struct tg_acct_figs *pd,
                              int64_t peak, int64_t live0, const struct tg_acct_figs *td);

#pragma GCC visibility pop

#endif /* TG_ACCT_PY_H */
