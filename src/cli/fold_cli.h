/*
 * fold_cli.h - the options folded, flamegraph and report share, and loading a
 * run's frame tree with the CLI's warnings (cmd_folded.c).
 */
#ifndef TG_FOLD_CLI_H
#define TG_FOLD_CLI_H

#include "cli.h"
#include "fold.h"

struct tg_fold_args {
	const char *metric;      /* --metric */
	int has_metric;          /* --metric given (else alloc, or delta without accounting) */
	const char *thread;      /* --thread */
	int merge;               /* --merge-threads */
	unsigned long max_depth; /* --max-depth (delta, time) */
	int no_stitch;           /* --no-stitch (delta, time) */
	struct tg_common_args c;
};

#define TG_FOLD_OPTIONS(a) \
	{ "metric", 0, TG_OPT_STRING, &(a)->metric, &(a)->has_metric, "M", \
	  "alloc (bytes allocated, default; delta when the run has no accounting), live (live at the end), peak (live at the " \
	  "process's peak), delta (recorded per-call deltas, own code's growth) or time " \
	  "(own time, us)" }, \
	{ "thread", 0, TG_OPT_STRING, &(a)->thread, NULL, "NAME", \
	  "only the thread NAME (its file base name), without a thread frame" }, \
	{ "merge-threads", 0, TG_OPT_BOOL, &(a)->merge, NULL, NULL, \
	  "sum the same stacks over all threads, without thread frames" }, \
	{ "max-depth", 0, TG_OPT_COUNT, &(a)->max_depth, NULL, "N", \
	  "delta, time: calls nested deeper than N are part of their ancestor's own " \
	  "value (default 10000, 0: no limit)" }, \
	{ "no-stitch", 0, TG_OPT_BOOL, &(a)->no_stitch, NULL, NULL, \
	  "delta, time: leave pool and asyncio tasks under the thread that ran them " \
	  "(default: under the call that submitted them, with a [POOL] frame)" }, \
	TG_COMMON_OPTIONS(&(a)->c)

/*
 * Loads PATH's frame tree for the options in A into F (released on failure),
 * printing warnings (unpaired calls, sampled estimates) and errors.  Without
 * --metric, a run with no accounting snapshot (a plain `threadgraph run`) gives
 * its recorded deltas (--metric delta), with a note saying so.  Returns 0, or
 * the exit code after printing the error.
 */
int tg_cli_fold_load(struct tg_fold_args *a, const char *path, const char *usage,
		     struct tg_fold *f, struct tg_diag *d);

struct tg_aout;
/*
 * Opens PATH (a file name, with or without a directory) for writing through
 * the atomic output: it appears whole on commit or not at all; a symbolic
 * link, a device or a pipe is written directly (tg_aout_open_path).  0 or -1.
 */
int tg_cli_open_output(const char *path, struct tg_aout *a, struct tg_diag *d);

#endif
