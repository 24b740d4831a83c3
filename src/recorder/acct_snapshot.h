/*
 * acct_snapshot.h - heap snapshots of allocation accounting: the file
 * snapshot-<N>-<label>[.gz] in the run directory, one line per
 * calling-context node that holds counts (and its ancestors), in the format of
 * src/common/tg_snapshot.h (docs/formats.md).  Reads accounting's state
 * (acct_state.h) and the recorder's thread log for thread names.
 */
#ifndef TG_ACCT_SNAPSHOT_H
#define TG_ACCT_SNAPSHOT_H

#include "tg_compat.h"

#pragma GCC visibility push(hidden)

/* Write snapshot-<N>-<label>[.gz] now (GIL).  Returns a new str (the path) or
 * NULL with an exception. */
PyObject *tg_acct_snapshot(const char *label);
/* Write snapshot-<N>-<label>[.gz] from a hook (GIL held); SAFE: LABEL is made
 * of parts already safe for a file name (a thread's base name), not escaped
 * again when it fits:
 * a failure is noted once in tg_acct.sched_err as "<what> snapshot <label>
 * failed: ..." for tg_acct_finish to report, and its exception cleared (the
 * hooks never raise). */
void tg_acct_snapshot_noted(const char *what, const char *label, int safe);
/* Write snapshot-<N>-peak[.gz] (GIL): every node's counters at the moment the
 * process's live bytes were highest (exact; estimates under sampling).  Also
 * written by tg_acct_finish.  Returns a new str (the path) or NULL with an
 * exception. */
PyObject *tg_acct_snapshot_peak(void);

#pragma GCC visibility pop

#endif /* TG_ACCT_SNAPSHOT_H */
