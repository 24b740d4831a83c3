/*
 * report.h - one self-contained HTML page of a run (threadgraph report):
 * the memory graph with its numbered peaks, the peaks table linked to each
 * peak's decorated call subtree, flame graphs, and the accounting summary and
 * histograms when accounting was on.  Graphs come from gnuplot's svg terminal
 * and are inlined as data: URIs, flame graphs as inline SVG (flamesvg.h); the
 * page fetches nothing and works from file://.
 *
 * What a run lacks (no stacks, no accounting, no gnuplot) leaves its section
 * with a note saying what is needed; only a run with nothing to show, or a
 * write error, fails.
 */
#ifndef TG_REPORT_H
#define TG_REPORT_H

#include <stdio.h>

#include "diag.h"
#include "memg.h"

struct tg_capture;

struct tg_report_opts {
	const char *run_dir;         /* text dumps, or a binary capture (dumpset.h) read
				      * natively */
	const struct tg_capture *cap; /* run_dir's capture, already open (the caller's;
				       * must outlive the call), or NULL: opened here
				       * when run_dir names one */
	const char *scratch;         /* an empty directory for gnuplot's files (the caller's) */
	const char *gnuplot;         /* the gnuplot to run (tg_gnuplot_find), or NULL: the
				      * page says the graphs need gnuplot */
	struct tg_memg_opts memg;    /* has_time and the peak options, as memg */
	const char *metric;          /* the flame graph's metric; NULL: peak and alloc with
				      * accounting (those present), else delta */
	size_t max_lines;            /* lines shown of each peak's subtree (0: 300) */
	size_t max_peaks;            /* peaks given a subtree (0: 50) */
	int no_stitch;               /* flame graphs: tasks under the thread that ran them
				      * (fold_stitch.h) */
	const char *covers;          /* the part of the run the records cover, said on the
				      * page under its first line (a capture of limited
				      * size: the segments kept, the caller's words), or
				      * NULL: all of it */
};

/* What the caller may tell the user: a section left out or incomplete, and
 * progress (the report reads the whole run several times: minutes on a large
 * one). */
struct tg_report_cb {
	void (*note)(void *ctx, const char *msg);
	/* a stage begins ("memory graph", "peaks (12 subtrees)", ...); may be NULL */
	void (*step)(void *ctx, const char *what);
	void *ctx;
};

/*
 * Writes the page for o->run_dir to OUT.  Returns 0, or -1 with d->msg set
 * (not a run directory, out of memory, write error).
 */
int tg_report_write(const struct tg_report_opts *o, FILE *out, const struct tg_report_cb *cb,
		    struct tg_diag *d);

#endif
