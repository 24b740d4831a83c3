/*
 * peaks.h - peak selection, as the original memg did it (minus its unit bug).
 *
 * A .mem event is a candidate when |DELTA| > peak KB.  All candidates of all
 * threads are sorted by time; the first is kept, and each later one is kept when
 * it is more than delta_time seconds, or more than delta_value KB, away from the
 * last kept peak.  Only candidates are held in memory, with the text of their
 * line kept for the legend.
 *
 * With `scaled` (no --peak_delta_time or --peak_delta_value given) the spacing
 * scales with the graph instead: the candidates are taken largest |delta|
 * first, each kept when no kept peak lies within a TG_PEAKS_SCALED_SHARE-th of
 * the graph's time span (memg.h tg_memg_xspan) of it, so at most about that
 * many labels stand across the graph's width however the candidates cluster;
 * the original's 60 s, meant for long runs, kept one peak of a run shorter than
 * a second, and not its largest.  (The candidates' own span, used before, let
 * a burst of returns within a few ms keep every one, labels piled up.)
 */
#ifndef TG_PEAKS_H
#define TG_PEAKS_H

#include <stddef.h>

#include "diag.h"
#include "dumpfile.h"
#include "records.h"

struct tg_peak_opts {
	double peak_kb;        /* |delta| must exceed this (KB) */
	double delta_time;     /* seconds (index units without timestamps) */
	double delta_value_kb; /* KB */
	int scaled;            /* spacing from the run, largest first (see above):
				  delta_time and delta_value_kb unused */
	int every;             /* every candidate is a peak (`peaks --every`): no
				  spacing, none merged with an equal neighbour;
				  scaled and the deltas unused */
};

/* With scaled spacing, kept peaks are more than this fraction of the graph's
 * span apart. */
#define TG_PEAKS_SCALED_SHARE 40

struct tg_peak {
	double x;              /* time in seconds, or event index without timestamps */
	double call_start;     /* when the peak's call began (seconds, as x), or
				  TG_NO_TIME: not known (no times; a text dump
				  without its .stack, see tg_peaks_call_starts) */
	unsigned long ret_no;  /* its return's number among the file's records
				  (1-based): it closes the ret_no-th call to close */
	double y;              /* plotted value, KB (after --cap) */
	long long delta;       /* DELTA, bytes */
	unsigned thread;       /* index of the thread's file in the caller's list */
	unsigned long lineno;  /* line of the event in its .mem file (1-based) */
	size_t text_off;       /* offset of TIME text then rest text in the arena */
	unsigned time_len;     /* length of the TIME text (0 without timestamps) */
	unsigned rest_len;     /* length of FILE:LINE:FUNCTION=>DELTA */
	size_t id;             /* number in the legend after selection (0-based) */
	int wrapper;           /* a wrapper's return (threading's, exec's...:
				  (tg_memrec_is_wrapper): the scaled
				  selection takes it after the other candidates */
};

struct tg_peaks {
	struct tg_peak *v;     /* candidates, then (after select) kept peaks */
	size_t n, alloc;
	char *arena;           /* line texts */
	size_t arena_len, arena_alloc;
	size_t bound;          /* set by the caller before the candidates come,
				  for a selection that keeps every candidate and
				  then the `bound` first by tg_peaks_top's order
				  (`peaks --every --top N`): candidates that cannot
				  be among them are dropped as they come, so that
				  at most TG_PEAKS_BOUND_ROOM(bound) are held
				  whatever the run's length; 0: all are held */
};

/* Candidates held at most under a bound B: where they are cut back to B. */
#define TG_PEAKS_BOUND_ROOM(b) ((b) < 16384 ? 65536 : 4 * (b))

void tg_peaks_init(struct tg_peaks *p);
void tg_peaks_release(struct tg_peaks *p);

/* Non-zero when an event of this delta is a peak candidate. */
static inline int tg_peak_is_candidate(const struct tg_peak_opts *o, long long delta)
{
	double kb = (double)(delta < 0 ? -delta : delta) / 1024.0;
	return kb > o->peak_kb;
}

/*
 * Adds a candidate; copies the TIME text and the rest of the line (FILE:LINE:
 * FUNCTION=>DELTA) into the arena.  Returns 0 or -1 (out of memory, d->msg set).
 */
int tg_peaks_add(struct tg_peaks *p, const struct tg_peak *c, const char *time_text,
		 size_t time_len, const char *rest, size_t rest_len, struct tg_diag *d);

/* Keeps the peaks among the candidates (as described above), in time order
 * (then thread, then line), numbered from 0.  span: the x extent of the graph
 * the peaks label (seconds, or event indexes without times; memg.h
 * tg_memg_xspan), which the scaled spacing divides; unused otherwise. */
void tg_peaks_select(struct tg_peaks *p, const struct tg_peak_opts *o, double span);

/*
 * Fills the call_start of the peaks of text dumps (files[0..n)) from the .stack
 * file beside each .mem, when it exists: the ret_no-th return closes the
 * ret_no-th call to close (a record at depth D closes the open calls at depth D
 * or deeper), as decorate-stack pairs them; a call that does not name the
 * return's FILE and FUNCTION (a pairing broken by lost records) leaves
 * call_start unknown.  Peaks of a capture have theirs already.  Returns 0 or -1
 * (d->msg set); a missing or unreadable .stack file is no error.
 */
int tg_peaks_call_starts(struct tg_peaks *p, const struct tg_dumpfile *files, size_t n,
			 struct tg_diag *d);

/* Keeps the n kept peaks of largest |delta| (ties: earlier first), in time order. */
void tg_peaks_top(struct tg_peaks *p, size_t n);

/* Sorts kept peaks by |delta| descending (ties: time order). */
void tg_peaks_sort_size(struct tg_peaks *p);

/* Pointers to a peak's texts in the arena (not NUL-terminated). */
static inline const char *tg_peak_time(const struct tg_peaks *p, const struct tg_peak *k)
{
	return p->arena + k->text_off;
}
static inline const char *tg_peak_rest(const struct tg_peaks *p, const struct tg_peak *k)
{
	return p->arena + k->text_off + k->time_len;
}

#endif
