/*
 * fold_stitch.h - pool work stitched to its submitter in the frame tree
 * (fold.h): a task's calls, recorded on the thread that ran it, go under the
 * calls of the thread that submitted it, with a marker frame "[LABEL]" (the
 * pool's thread name prefix, the asyncio task's name) in place of the
 * recorder's run_task wrapper.  The links are marks.txt's task and run
 * records (marks.h, docs/formats.md).
 *
 * Two passes: tg_stitch_scan reads each thread's .stack records once and
 * turns each note's position into the calls open at that moment (a task's
 * submitting path, relative to the run it was itself submitted from, if any)
 * and checks each run (its call must be the innermost open one, at the number
 * noted); then the pairing (fold_load.c) asks tg_stitch_runs for a thread's
 * run calls and tg_stitch_marker for the frame each goes under, resolving the
 * submitters' paths (across threads, tasks submitted by tasks) on demand.
 */
#ifndef TG_FOLD_STITCH_H
#define TG_FOLD_STITCH_H

#include <stddef.h>
#include <stdint.h>

#include "diag.h"
#include "dumpfile.h"
#include "fold.h"

struct tg_stitch;

/* A run call of one thread: its CALL number and its task. */
struct tg_stitch_run {
	uint64_t call;
	uint64_t task;
};

/*
 * Reads DIR's marks.txt: *out is NULL (nothing to stitch: no file, or no task
 * records) or a new state to free with tg_stitch_free.  0 or -1 (d->msg).
 */
int tg_stitch_open(struct tg_stitch **out, const char *dir, struct tg_diag *d);

/* The first pass over thread THREAD's .stack records (STACK).  0 or -1. */
int tg_stitch_scan(struct tg_stitch *s, const char *thread, const struct tg_dumpfile *stack,
		   int has_time, struct tg_diag *d);

/* THREAD's checked run calls, by increasing call number, in *n (NULL, 0: none). */
const struct tg_stitch_run *tg_stitch_runs(const struct tg_stitch *s, const char *thread,
					   size_t *n);

/*
 * The marker frame of TASK in F: "[LABEL]" under the submitter's calls (under
 * its thread's frame, or the root with merge_threads, as O says), made if
 * missing; its index in *node, or TG_FOLD_NONE when the task's submission is
 * unknown or circular (the run then stays where it ran).  0 or -1 (out of
 * memory).
 */
int tg_stitch_marker(struct tg_stitch *s, struct tg_fold *f, const struct tg_fold_opts *o,
		     uint64_t task, size_t *node, struct tg_diag *d);

void tg_stitch_free(struct tg_stitch *s);

#endif
