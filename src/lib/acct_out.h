/*
 * acct_out.h - the allocation-accounting reports: summary table, histogram
 * table and graph, top sites, snapshot diff.  Each writes to the FILE * it is
 * given; the histogram graph goes through the atomic output and gnuplot helpers.
 */
#ifndef TG_ACCT_OUT_H
#define TG_ACCT_OUT_H

#include <stdio.h>

#include "gnuplot.h"
#include "snapshot.h"

/* The process, per-thread and per-window figures as aligned tables. */
void tg_summary_print(FILE *f, const struct tg_summary *s);
/* Power-of-two bins (only non-empty rows): process, then each thread. */
void tg_hist_print(FILE *f, const struct tg_summary *s);
/* The histogram of E (the process, or a thread: its name goes in the title) as
 * hist.dat, hist.gp and hist.<terminal> in o->dir; 0 or -1 (d->msg set). */
int tg_hist_plot(const struct tg_sum_entity *e, const struct tg_plot_opts *o,
		 struct tg_diag *d);
/* The first TOP sites of S (already sorted); TOP 0 = all. */
void tg_top_print(FILE *f, const struct tg_snapshot *s, size_t top);
/* The first TOP deltas (TOP 0 = all) with the two snapshots' totals. */
void tg_diff_print(FILE *f, const struct tg_snapshot *base, const struct tg_snapshot *s,
		   const struct tg_snap_delta *v, size_t n, size_t top);
/* Writes bin B's range ("0", "1", "2-3", "1Ki-2Ki") into buf. */
void tg_hist_bin_name(char *buf, size_t n, int b);

#endif
