/*
 * graphs.h - the memh, nesting and interleave graphs of the original.
 *
 *   memh       DELTA summed per FILE:LINE:FUNCTION over the thread .mem files; the
 *              30 most negative and 30 most positive sums as numbered boxes
 *              (memh.<ext>), legend memh.txt "N: FILE:LINE:FUNCTION".
 *   nesting    each .stack call's depth against its time, one series per thread
 *              (nesting.<ext>); a thread of many calls keeps the first and last
 *              call of each depth in each screen column (nesting_pts.h).
 *   interleave which thread ran when: the .mem events of all threads merged in time
 *              order, runs of one thread folded to their first and last event,
 *              plotted as thread index against time (interleave.<ext>); legend
 *              interleave.txt "INDEX: THREAD".
 *
 * All read their dumps streaming: memh holds one entry per distinct call site,
 * nesting a bounded point set per thread, interleave one line per thread file (a
 * k-way merge).
 */
#ifndef TG_GRAPHS_H
#define TG_GRAPHS_H

#include "diag.h"
#include "dumpfile.h"
#include "gnuplot.h"
#include "memg.h"

/* Functions shown on each side (most freeing, most allocating) by memh. */
#define TG_MEMH_SIDE 30

struct tg_graph_opts {
	int has_time;            /* dumps carry TIME# */
	int clock;               /* nesting, interleave: clock time on the x axis */
	int has_from, has_to;    /* interleave: time range in seconds */
	double from, to;
	int has_origin;          /* origin is set (timeaxis.h tg_timeaxis_origin) */
	double origin;           /* the run's start (seconds), before the records read */
};

/* Each returns 0 or -1 (d->msg set; no graph or legend left behind). */
int tg_memh_run(const struct tg_graph_opts *o, const struct tg_plot_opts *po,
		const struct tg_dumpfile *files, size_t n, const struct tg_memg_report *r,
		struct tg_diag *d);
int tg_nesting_run(const struct tg_graph_opts *o, const struct tg_plot_opts *po,
		   const struct tg_dumpfile *files, size_t n, const struct tg_memg_report *r,
		   struct tg_diag *d);
int tg_interleave_run(const struct tg_graph_opts *o, const struct tg_plot_opts *po,
		      const struct tg_dumpfile *files, size_t n,
		      const struct tg_memg_report *r, struct tg_diag *d);

/* A table of call sites and their summed deltas (memh's working set). */
struct tg_site_sum {
	size_t off, len;   /* FILE:LINE:FUNCTION in the table's arena */
	long long sum;     /* bytes */
	int used;
};

struct tg_sitetab {
	struct tg_site_sum *v;   /* open addressing, cap a power of two */
	size_t cap, n;
	char *arena;
	size_t arena_len, arena_alloc;
};

void tg_sitetab_init(struct tg_sitetab *t);
void tg_sitetab_release(struct tg_sitetab *t);
/* Adds delta to site's sum (inserting it); 0 or -1 (out of memory, or the sum
 * out of int64's range: an error, never a wrapped sum). */
int tg_sitetab_add(struct tg_sitetab *t, const char *site, size_t len, long long delta,
		   struct tg_diag *d);
/*
 * Picks at most `side` sites of negative sum (most negative first) and at most
 * `side` of positive sum (largest last), in ascending order of sum, into out
 * (room for 2*side); returns how many, or -1 when out of memory.
 */
long tg_sitetab_extremes(const struct tg_sitetab *t, size_t side,
			   const struct tg_site_sum **out);

#endif
