/*
 * memg.h - the memory graph (memg) and the peak list (peaks) of thread dumps.
 *
 * Thread series are DELTA in KB per .mem event, with runs of zero deltas
 * collapsed to their first and last point; the process series is RSS in KB,
 * drawn in MB on a second y axis, or, with --process_rebase (the original's
 * option), minus the rebase on the threads' axis.  Points go straight to data
 * files as the dumps are read, and only peak candidates stay in memory, so files
 * of any size are streamed.  The top_threads threads that moved the most memory
 * get a style of their own and a key entry; the others are drawn in grey under
 * one key entry, and the key's title says so.
 */
#ifndef TG_MEMG_H
#define TG_MEMG_H

#include <stdio.h>

#include "diag.h"
#include "dumpfile.h"
#include "gnuplot.h"
#include "peaks.h"
#include "timeaxis.h"

/* Threads drawn each in a style of its own by default (--top-threads). */
#define TG_MEMG_TOP_THREADS 20

struct tg_memg_opts {
	int has_time;            /* dumps carry TIME# (no --no_time) */
	int clock;               /* x axis in clock time (--time-axis=clock) */
	int has_cap;             /* clip plotted values to +-cap_kb */
	double cap_kb;
	int no_process;          /* ignore process files */
	int has_rebase;          /* --process_rebase given: the original's process line */
	double rebase_kb;        /* subtracted from process values (with has_rebase) */
	unsigned long top_threads; /* threads with a style of their own (0: default) */
	struct tg_peak_opts peak;
	int has_from, has_to;    /* time range (seconds); events outside are skipped */
	double from, to;
	int has_origin;          /* origin is set (timeaxis.h tg_timeaxis_origin) */
	double origin;           /* the run's start (seconds), before the records read */
};

/* Progress and per-file reports for the caller to print (may be NULL). */
struct tg_memg_report {
	/* a file is about to be read (thread or process) */
	void (*start)(void *ctx, const struct tg_dumpfile *df);
	/* a file was skipped or gave nothing to plot: why ("no events") */
	void (*skip)(void *ctx, const struct tg_dumpfile *df, const char *why);
	/* gnuplot is about to run */
	void (*plotting)(void *ctx);
	void *ctx;
};

/* What reading one file found. */
struct tg_memg_stats {
	unsigned long events;    /* events in range */
	double x_first;          /* x of the first event in range (with events) */
	double moved_kb;         /* sum of |DELTA| in range (KB): a thread's activity */
	double x_last;           /* x of the last event in range (with events) */
	long long y_last;        /* its plotted value, thousandths of KB */
	/* the two largest plotted values and the two lowest (thousandths of KB; 0
	 * when there are fewer): an outlier among them is kept off the y range */
	long long hi[2], lo[2];
	int curve;               /* its records are readings of the thread's memory
				  * (a sampled run's curve, an aggregate run's
				  * buckets), not calls' deltas */
};

/*
 * Reads one thread .mem file.  Candidates go into peaks (thread is the file's
 * index, kept in each peak); series points are appended to pf (ptfile.h:
 * its x, its value in thousandths of KB, its TIME) unless it is NULL.  *st
 * counts what was in range; every event's time widens ta (may be NULL).
 * Returns 0 or -1 (d->msg set).
 */
struct tg_ptfile;
int tg_memg_read_thread(const struct tg_memg_opts *o, const struct tg_dumpfile *df,
			unsigned thread, struct tg_ptfile *pf, struct tg_peaks *peaks,
			struct tg_memg_stats *st, struct tg_timeaxis *ta, struct tg_diag *d);

/* Reads a process file, writing its series to out; as above. */
int tg_memg_read_process(const struct tg_memg_opts *o, const struct tg_dumpfile *df,
			 FILE *out, struct tg_memg_stats *st, struct tg_timeaxis *ta,
			 struct tg_diag *d);

/* The extent of the thread events in range, file by file (tg_memg_xspan). */
struct tg_memg_extent {
	int seen;                /* a thread file had events in range */
	double first, last;      /* x of the first and the last of them */
};

/* Widens e by the thread file whose reading gave *st (no events: no change). */
void tg_memg_extent_see(struct tg_memg_extent *e, const struct tg_memg_stats *st);

/*
 * The x extent of memg's graph (seconds, or event indexes without times), by
 * which peaks are spaced (peaks.h tg_peaks_select) and their labels placed:
 * from --time_from, else from the run's start when known and earlier than the
 * first thread event (the elapsed axis's zero), else from that event; to
 * --time_to, else to the last thread event (e: those in range).  The process
 * line is left out: `peaks` does not read it, and its numbers must be memg's
 * labels.  Sets *lo and *hi; returns hi - lo, or 0 when that is not positive.
 */
double tg_memg_xspan(const struct tg_memg_opts *o, const struct tg_memg_extent *e,
		     double *lo, double *hi);

/*
 * Collects and selects the peaks of the thread files among files[0..n) (stack
 * and process files skipped, reported through r).  Returns 0 or -1.
 */
int tg_peaks_collect(const struct tg_memg_opts *o, const struct tg_dumpfile *files,
		     size_t n, struct tg_peaks *peaks, const struct tg_memg_report *r,
		     struct tg_diag *d);

/*
 * The whole memg command: data files memg-N.dat (file N, thread or process),
 * memg-peaks.dat and the script memg.gp in the plot folder (gnuplot.h), the
 * legend memg.txt and the graph in po->dir.  Returns 0 or -1 (d->msg set; no
 * graph or legend left behind).
 */
int tg_memg_run(const struct tg_memg_opts *o, const struct tg_plot_opts *po,
		const struct tg_dumpfile *files, size_t n, const struct tg_memg_report *r,
		struct tg_diag *d);

/* The points the threads' series of a graph keep together, about (memg.c
 * memg_write_series; held.c): 510 threads made a 5 MB memg.svg. */
#define TG_MEMG_POINTS_BUDGET 60000

/* Writes the legend line "N: THREAD>REST" of a peak; returns 0 or EOF. */
int tg_peak_write_legend(FILE *f, const struct tg_peaks *p, const struct tg_peak *k,
			 const char *thread);

#endif
