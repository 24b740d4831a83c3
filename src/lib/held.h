/*
 * held.h - each thread's held memory over time (memg --held, the report's first
 * graph): what a thread has allocated and not freed, as a step curve.
 *
 * A thread's held memory is the running sum the dumps already give (as `live`
 * counts it): at each return of an outermost call, the sum of the outermost
 * calls' DELTAs so far, exact.  A thread's outermost call is often its run(),
 * which returns only when the thread ends, so the curve also moves inside a call:
 * at the return of a call C, the held memory is what it was when C was called
 * (as known then) plus C's DELTA.  What the enclosing call did itself, between
 * its callees, shows at that call's return.  The curve is thus exact at every
 * outermost return and, inside a call, the sum of the callees that returned.
 *
 * The nesting comes from the binary capture's CALL records, or for text dumps
 * from the thread's .stack file beside its .mem (the returns pair with the calls
 * in post-order, as decorate-stack pairs them).  A sampled run's .mem lines are
 * readings of the thread's memory and are taken as they are.  Text dumps without
 * a .stack file have no nesting: such a thread is left out, with a reason.
 *
 * A capture whose older segments were dropped (a size limit): a thread carried
 * into the segments kept starts at their start, at what its head says it held
 * (by depth), its older records in them folded into that level; the export of
 * such a capture gives the same in its runinfo.json (kept_from, open_at_start,
 * held_at_start), so its text draws the same curve.
 *
 * The "process line" of held memory is the sum of all threads' curves; its
 * highest value is "the process's largest peak", and each thread's level at that
 * moment is its share of it (tg_held_peak).
 */
#ifndef TG_HELD_H
#define TG_HELD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "diag.h"
#include "dumpfile.h"
#include "gnuplot.h"
#include "memg.h"

/*
 * A step: from time x on, the thread holds v bytes.  The time's TIME text is
 * xs[0..xlen) (a text dump's own), or, xs NULL, tg_cap_fmt_time(us): a capture's
 * time, us Unix microseconds, whose text is not made (most steps of a long run
 * are never printed, and formatting each was a quarter of memg --held's time).
 */
typedef int (*tg_held_step_fn)(void *ctx, double x, const char *xs, size_t xlen, int64_t us,
			       int64_t v);

/* Size of the reason tg_held_read gives for leaving a file out. */
#define TG_HELD_WHY_MAX 256

/*
 * Reads thread file df (a .mem of a text run or of a capture) and calls step at
 * every change of its held memory, in time order.  Returns 0; 1 when the file
 * has no nesting to follow (text without its .stack) or a .stack that does not
 * pair with it (return records left over after its last call, a call deeper than
 * the calls open): the steps already given are then to be dropped, and why
 * (TG_HELD_WHY_MAX bytes) says so; or -1 with d->msg set (also when step returns
 * non-zero).  Needs timestamped dumps.
 */
int tg_held_read(const struct tg_dumpfile *df, tg_held_step_fn step, void *ctx,
		 char *why, struct tg_diag *d);

/* The largest peak of all threads' held memory and each thread's level then. */
struct tg_held_peak {
	int found;               /* some thread held memory */
	double x;                /* when (seconds since the epoch) */
	char xs[64];             /* its TIME text */
	int64_t total;           /* the sum of the threads' levels then */
	int64_t *level;          /* [n]: file i's level then (0 for non-thread files) */
	int64_t *peak;           /* [n]: file i's own highest level */
	int64_t *end;            /* [n]: file i's level at its end */
	unsigned char *has;      /* [n]: file i has a held curve */
	size_t n;
};

void tg_held_peak_release(struct tg_held_peak *p);

/*
 * Writes the share table of p (files[0..n) named by their threads), largest
 * first: "THREAD  HELD  SHARE" lines after a line naming the peak, for people
 * (memg-held.txt, the report).  Returns 0 or EOF.
 */
int tg_held_peak_write(FILE *f, const struct tg_held_peak *p, const struct tg_dumpfile *files);

/*
 * The memg --held graph: each thread's held memory as step lines (the
 * o->top_threads largest by peak in styles of their own, the rest summed as one
 * "others" line), the sum of all threads and the process's resident size
 * (process.mem) on the same time axis; graph memg-held.EXT, legend
 * memg-held.txt (the largest peak and each thread's share), script and data in
 * memg-held-plot/.  If peak is not NULL it receives the peak and shares (the
 * caller releases it).  Returns 0 or -1 (d->msg set; nothing left behind).
 */
int tg_held_run(const struct tg_memg_opts *o, const struct tg_plot_opts *po,
		const struct tg_dumpfile *files, size_t n, const struct tg_memg_report *r,
		struct tg_held_peak *peak, struct tg_diag *d);

#endif
