/*
 * gcruns.h - the garbage collector's runs of a recorded run (gc.txt, one line
 * per collection: NATIVE_ID START STOP COLLECTED [FAMILY], docs/formats.md), and which
 * of them a call ran: a call whose delta includes what the collector freed
 * (or its own garbage, kept until then) is marked where its peak is shown.
 */
#ifndef TG_GCRUNS_H
#define TG_GCRUNS_H

#include <stddef.h>

#include "diag.h"

/* One collection. */
struct tg_gc_run {
	unsigned long long native_id; /* the thread that ran it */
	char *family;                 /* an aggregate run folded that thread into the
				       * entry of this name (the line's FAMILY;
				       * malloc'ed), else NULL */
	double start, stop;           /* seconds since the epoch (TIME) */
	long long collected;          /* objects found unreachable */
};

struct tg_gc_runs {
	struct tg_gc_run *v;
	size_t n, alloc;
};

/* Slack of the containment test, seconds: gc.txt and the capture's times are
 * both cut to microseconds, from one clock, so one microsecond apart at most;
 * the half more absorbs the rounding of the parsed doubles. */
#define TG_GC_SLACK 1.5e-6

void tg_gc_runs_init(struct tg_gc_runs *g);
void tg_gc_runs_release(struct tg_gc_runs *g);

/*
 * Adds the runs of DIR/gc.txt to g.  No such file (the collector never ran, or
 * DIR is no run directory) adds none.  A malformed line is reported through d
 * and skipped (an error in strict mode).  Returns 0 or -1 (d->msg set).
 */
int tg_gc_runs_read(struct tg_gc_runs *g, const char *dir, struct tg_diag *d);

/*
 * The runs of thread NATIVE_ID that began and ended within [start, end]
 * (seconds, TG_GC_SLACK either side): their number, and the objects they
 * collected in *collected (may be NULL).  A folded thread's runs are not
 * NATIVE_ID's (a later thread may have its id): tg_gc_runs_within_family.
 */
size_t tg_gc_runs_within(const struct tg_gc_runs *g, unsigned long long native_id,
			 double start, double end, long long *collected);
/* As tg_gc_runs_within, the runs of the threads folded into the entry FAMILY
 * (aggregate.tga's folded entry of that name). */
size_t tg_gc_runs_within_family(const struct tg_gc_runs *g, const char *family,
				double start, double end, long long *collected);

#endif
