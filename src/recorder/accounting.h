/*
 * accounting.h - allocation accounting: per-thread and process counters, size
 * histograms, live and total bytes by call site, heap snapshots, windows and
 * summary.json (docs/accounting.md).
 *
 * Switched on per run (enable(..., accounting=True)); when off, the allocator
 * hooks pay one predictable branch on tg_acct_on and nothing else.
 *
 * Who touches what:
 *  - the allocator hooks (any thread, with or without the GIL) call
 *    tg_acct_alloc / tg_acct_free: they write the calling thread's own counters
 *    (thread-local pointer), the process atomics and the site atomics;
 *  - the profile function (GIL) calls tg_acct_push / tg_acct_pop when the
 *    recorder opens and closes a recorded call, and tg_acct_on_call for the
 *    periodic-snapshot counter: sites are interned there, with the GIL;
 *  - snapshot/window/summary run with the GIL from module.c.
 */
#ifndef TG_ACCOUNTING_H
#define TG_ACCOUNTING_H

#include "tg_compat.h"
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

struct tg_recorder;

/* Power-of-two size bins: bin b holds sizes with bit length b (0 for size 0,
 * 1 for 1, 2 for 2..3, ..., 21 for 1 MiB..2 MiB-1). */
#define TG_ACCT_BINS 65

/* Whether accounting is on for this run; written with the GIL at enable and
 * disable, read by the hooks (relaxed: a hook racing with the switch either
 * counts or does not, both are safe). */
extern _Atomic int tg_acct_on __attribute__((visibility("hidden")));
/* (hidden: read with one RIP-relative load, not through the GOT, on the hot path) */

/* Packing of the site id next to the size in a pointer-table entry: the low
 * TG_ACCT_SIZE_BITS bits are the size, the rest the site id (0 when accounting
 * is off, so the word is then the plain size). */
#define TG_ACCT_SIZE_BITS 44
#define TG_ACCT_SIZE_MASK ((UINT64_C(1) << TG_ACCT_SIZE_BITS) - 1)
#define TG_ACCT_MAX_SITES (1u << (64 - TG_ACCT_SIZE_BITS))
#define TG_ACCT_ENTRY_SIZE(v) ((size_t)((uint64_t)(v) & TG_ACCT_SIZE_MASK))

/* Hooks (any thread, no GIL needed, never allocate through Python).
 * tg_acct_alloc counts an allocation of SIZE bytes by the calling thread at its
 * current site and returns the pointer-table word to store for the block.
 * tg_acct_free counts the release of a block whose table word is WORD and
 * returns its size; COUNT_THREAD is 0 when the tracer itself frees the block
 * (the site and process still lose it). */
uint64_t tg_acct_alloc(size_t size);
size_t tg_acct_free(uint64_t word, int count_thread);

/* Profile function (GIL): a recorded call was opened / closed. */
void tg_acct_push(const char *file, size_t file_len, long line, const char *func,
                  size_t func_len, int esc);
void tg_acct_pop(void);
/* Profile function (GIL): a Python call of CODE; drives periodic snapshots. */
void tg_acct_on_call(PyObject *code);

/* Largest sample_bytes accepted (weights stay far from overflow below it). */
#define TG_ACCT_SAMPLE_MAX (INT64_C(1) << 40)

/* Start accounting for a run writing into OUTDIR (GIL); R names the threads in
 * snapshots until tg_acct_finish.  SAMPLE_BYTES > 0 attributes allocations to
 * sites by sampling, one sample per SAMPLE_BYTES bytes on average (0: every
 * allocation).  Returns 0 or -1 with a Python exception. */
int tg_acct_start(const char *outdir, int compress, long long sample_bytes,
                  struct tg_recorder *r);
/* Stop counting (GIL); the counters stay readable until the next start. */
void tg_acct_stop(void);
/* After tg_acct_stop: the final and peak snapshots (GIL); the summary files are
 * written by the Python layer from tg_acct_figures.
 * R gives thread names.  Returns 0 or -1 with a Python exception. */
int tg_acct_finish(struct tg_recorder *r);
/* In a forked child (GIL): stop accounting and forget the inherited run, so
 * that the child writes no summary or snapshot into the parent's directory. */
void tg_acct_fork_child(void);
/* Whether the last run had accounting (for the Python layer). */
int tg_acct_was_on(void);

/* Write snapshot-<N>-<label>[.gz] now (GIL).  Returns a new str (the path) or
 * NULL with an exception. */
PyObject *tg_acct_snapshot(const char *label);
/* Write snapshot-<N>-peak[.gz] (GIL): every node's counters at the moment the
 * process's live bytes were highest (exact; estimates under sampling).  Also
 * written by tg_acct_finish.  Returns a new str (the path) or NULL with an
 * exception. */
PyObject *tg_acct_snapshot_peak(void);
/* Periodic snapshots: at START, START+EVERY, ... up to STOP counted in calls of
 * CODE (a code object) or, if CODE is NULL, in milliseconds since the call
 * (the Python side takes seconds as floats). */
int tg_acct_schedule(long start, long stop, long every, PyObject *code);

/* Windows (GIL): open one named NAME (returns an id >= 0 or -1 with an
 * exception); close it and get its figures as a dict. */
long tg_acct_window_open(const char *name);
PyObject *tg_acct_window_close(long id);

/* Figures now: {"process": {...}, "threads": [...]} (GIL). */
PyObject *tg_acct_figures(struct tg_recorder *r);

#pragma GCC visibility pop

#endif /* TG_ACCOUNTING_H */
