/*
 * acct_when.h - threshold snapshots of allocation accounting
 * (ProcessProfile.snapshot_when, `threadgraph run --snapshot-when`;
 * docs/accounting.md "Threshold snapshots"), as jemalloc's gdump: when a
 * condition is first met, a heap snapshot by call site of every thread is
 * written (acct_snapshot.h), and again each time the quantity reaches a new
 * high a step above the last one written.
 *
 * Conditions, KIND>SIZE (SIZE: bytes, or a number with K, M, G or T, powers of
 * 1024, optionally followed by B or iB):
 *   thread>SIZE  a thread's memory (its allocated minus freed bytes)
 *   live>SIZE    the process's live bytes (accounting's exact counter)
 *   rss>SIZE     the process's resident set size (/proc/self/statm)
 *
 * Checked by the allocator hooks where a high is already noticed: a thread's
 * new peak (thread), the process's new peak (live; rss is read there, at most
 * once per TG_WHEN_RSS_EVERY bytes of growth of that peak).  The snapshot is
 * written by the allocating thread right after its hook counted the block, if
 * it holds the GIL; otherwise the level is left where it was and the next new
 * high made with the GIL writes it.
 */
#ifndef TG_ACCT_WHEN_H
#define TG_ACCT_WHEN_H

#include "tg_compat.h"
#include <stdatomic.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

struct tg_acct_thread;

/* After a snapshot at level L, the next one is due above
 * L + max(L / TG_WHEN_STEP_DIV, TG_WHEN_STEP_MIN): a step relative to the level,
 * so a program that keeps growing writes a number of snapshots logarithmic in
 * its growth (a quarter up each time: 11 from the limit to 10 times it), not one
 * per fixed amount (1/16 of the limit gave 150 files for three threads growing
 * from 5 MiB to 60 MiB). */
#define TG_WHEN_STEP_DIV 4
#define TG_WHEN_STEP_MIN (INT64_C(1) << 20)
/* rss is read when the process's live bytes pass a new peak this far above the
 * last read. */
#define TG_WHEN_RSS_EVERY (INT64_C(1) << 20)

enum tg_when_kind { TG_WHEN_THREAD = 0, TG_WHEN_LIVE = 1, TG_WHEN_RSS = 2, TG_WHEN_KINDS = 3 };

/* The conditions of a run.  Limits 0: off.  Limits and texts are set with the
 * GIL while the hooks may read them (relaxed atomics; a hook racing with the
 * change sees the old or the new limit); the levels of live and rss are read
 * and advanced by the hooks under accounting's spin lock or with the GIL as
 * said at each. */
struct tg_acct_when {
    _Atomic int64_t limit[TG_WHEN_KINDS];
    char text[TG_WHEN_KINDS][48];      /* "KIND-over-SIZE" (SIZE as given), for the
                                        * snapshots' labels; GIL */
    _Atomic int64_t live_next;         /* live above this: due; GIL (read relaxed) */
    _Atomic int64_t rss_next;          /* rss above this: due; GIL */
    int64_t rss_read_at;               /* next live peak to read rss at; spin lock */
};

/* Parse COND ("thread>500M") into *KIND and *LIMIT: 0, or -1 with ValueError. */
int tg_acct_when_parse(const char *cond, enum tg_when_kind *kind, int64_t *limit);
/* Set the conditions CONDS (a sequence of str), replacing the previous ones
 * (an empty sequence: none) (GIL).  0, or -1 with an exception. */
int tg_acct_when_set(PyObject *conds);
/* Forget them (a new run, GIL). */
void tg_acct_when_clear(void);

/* (tg_acct_when_thread_due, the hooks' test of a thread's new peak, is in
 * acct_state.h, next to the thread state it reads.) */
/* Under the spin lock, at a new process peak LIVE: a mask of the kinds due. */
int tg_acct_when_peak_locked(int64_t live);
/* After the hook counted its block (spin lock released): write what MASK
 * (1 << kind) says is due, for thread T at OWN. */
void tg_acct_when_fire(struct tg_acct_thread *t, int64_t own, int mask)
    __attribute__((noinline, cold));

#pragma GCC visibility pop

#endif /* TG_ACCT_WHEN_H */
