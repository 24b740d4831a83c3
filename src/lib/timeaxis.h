/*
 * timeaxis.h - the x axis of the time graphs (memg, nesting, interleave).
 *
 * Data files keep each event's TIME text as the dump has it (seconds since the
 * epoch); the script turns it into the axis value with a function tx(t), so a
 * kept script can be switched between axes by hand.  Two axes:
 *
 *   elapsed (default)  time since the run's first event (or since its start, when
 *                      the caller knows it precedes the events read: a capture
 *                      whose older segments were dropped), in a unit that suits
 *                      the span shown: ms below 1 s, s below 10 min, min below
 *                      10 h, else h; gnuplot picks 1-2-5 tick steps in that unit.
 *   clock              local wall-clock time (the offset from UTC at the first
 *                      event), HH:MM:SS, with milliseconds for spans under 10 s
 *                      and the date for spans over a day.
 *
 * Dumps without timestamps (--no_time) plot against the event index instead.
 */
#ifndef TG_TIMEAXIS_H
#define TG_TIMEAXIS_H

#include <stdio.h>

enum tg_time_mode {
	TG_TIME_ELAPSED,   /* seconds (ms, min, h) since the run's start */
	TG_TIME_CLOCK,     /* local clock time */
	TG_TIME_NONE,      /* no timestamps: event index */
};

struct tg_timeaxis {
	enum tg_time_mode mode;
	int seen;          /* t0 and t1 hold at least one event */
	double t0, t1;     /* first and last event time of the run, range or not */
	int has_origin;    /* origin is set: the elapsed axis counts from it */
	double origin;     /* the run's start, when earlier than its first event */
};

/* Starts an axis with no event seen. */
void tg_timeaxis_init(struct tg_timeaxis *a, enum tg_time_mode mode);

/* The run started at time t (seconds), before the events read: the elapsed
 * axis counts from t instead of the first event (no effect on the others). */
void tg_timeaxis_origin(struct tg_timeaxis *a, double t);

/* Widens the run's span to include an event at time t (seconds). */
void tg_timeaxis_see(struct tg_timeaxis *a, double t);

/* The range asked for (--time_from/--time_to, seconds since the epoch). */
struct tg_timerange {
	int has_from, has_to;
	double from, to;
};

/*
 * Writes the script's x axis: the function tx(t) (plots use `using (tx($1)):...`),
 * the label (none_label when mode is TG_TIME_NONE), the tick format and, when r
 * asks for one, the range.  Returns 0 or EOF.
 */
int tg_timeaxis_write(FILE *f, const struct tg_timeaxis *a, const struct tg_timerange *r,
		      const char *none_label);

#endif
