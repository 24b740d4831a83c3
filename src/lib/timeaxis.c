/*
 * timeaxis.c - elapsed or clock time on the x axis of a gnuplot script.
 */
#define _GNU_SOURCE
#include <math.h>
#include <time.h>

#include "timeaxis.h"

/* An elapsed-time unit: used while the span shown is below `below` seconds. */
struct ta_unit {
	double below;
	double per_second;  /* axis units per second */
	const char *name;
};

static const struct ta_unit ta_units[] = {
	{ 1, 1000, "ms" },
	{ 600, 1, "s" },
	{ 36000, 1.0 / 60, "min" },
	{ INFINITY, 1.0 / 3600, "h" },
};

void tg_timeaxis_init(struct tg_timeaxis *a, enum tg_time_mode mode)
{
	a->mode = mode;
	a->seen = 0;
	a->t0 = a->t1 = 0;
	a->has_origin = 0;
	a->origin = 0;
}

void tg_timeaxis_origin(struct tg_timeaxis *a, double t)
{
	a->has_origin = 1;
	a->origin = t;
}

void tg_timeaxis_see(struct tg_timeaxis *a, double t)
{
	if (!a->seen || t < a->t0)
		a->t0 = t;
	if (!a->seen || t > a->t1)
		a->t1 = t;
	a->seen = 1;
}

/* Writes the bound v (NAN: "*") of a range as the axis value. */
static void ta_bound(FILE *f, double v, int quoted)
{
	if (isnan(v))
		fputs("*", f);
	else
		fprintf(f, quoted ? "'%.6f'" : "%.6f", v);
}

static void ta_range(FILE *f, const struct tg_timerange *r, double shift, double scale,
		     int quoted)
{
	if (!r || (!r->has_from && !r->has_to))
		return;
	fputs("set xrange [", f);
	ta_bound(f, r->has_from ? (r->from + shift) * scale : NAN, quoted);
	fputs(":", f);
	ta_bound(f, r->has_to ? (r->to + shift) * scale : NAN, quoted);
	fputs("]\n", f);
}

/* The smallest 1, 2 or 5 times a power of ten that is at least x (> 0). */
static double ta_nice_step(double x)
{
	double p = pow(10, floor(log10(x)));

	if (x <= p)
		return p;
	if (x <= 2 * p)
		return 2 * p;
	if (x <= 5 * p)
		return 5 * p;
	return 10 * p;
}

/* Seconds to add to UTC for local time at t. */
static long ta_local_offset(double t)
{
	time_t s = (time_t)t;
	struct tm tm;

	if (!localtime_r(&s, &tm))
		return 0;
	return tm.tm_gmtoff;
}

int tg_timeaxis_write(FILE *f, const struct tg_timeaxis *a, const struct tg_timerange *r,
		      const char *none_label)
{
	double from = a->t0, to = a->t1, span;
	const struct ta_unit *u = ta_units;
	/* the elapsed axis's zero: the first event, or the run's start before it */
	double t0 = a->has_origin && a->origin < a->t0 ? a->origin : a->t0;

	if (a->mode == TG_TIME_NONE) {
		fprintf(f, "tx(t) = t\nset xlabel '%s'\n", none_label);
		ta_range(f, r, 0, 1, 0);
		return ferror(f) ? EOF : 0;
	}
	if (r && r->has_from)
		from = r->from;
	if (r && r->has_to)
		to = r->to;
	span = to > from ? to - from : 0;
	if (a->mode == TG_TIME_CLOCK) {
		long tz = ta_local_offset(a->t0);
		const char *fmt = span < 10 ? "%H:%M:%.3S" : span > 86400 ? "%d/%m %H:%M" :
			"%H:%M:%S";

		/* gnuplot's time functions are UTC: shift to local time */
		fprintf(f, "tz = %ld\ntx(t) = t + tz\n", tz);
		fprintf(f, "set xlabel 'Local time'\nset xdata time\nset timefmt '%%s'\n"
			"set format x '%s'\n", fmt);
		/* clock labels are wide: about 8 ticks, at a 1-2-5 step */
		if (span > 0)
			fprintf(f, "set xtics %g\n", ta_nice_step(span / 8));
		ta_range(f, r, (double)tz, 1, 1);
		return ferror(f) ? EOF : 0;
	}
	if (t0 < a->t0 && to > t0)  /* the values shown run up to to - t0 */
		span = to - t0;
	while (span >= u->below)
		u++;
	fprintf(f, "t0 = %.6f\ntx(t) = (t - t0) * %.17g\n", t0, u->per_second);
	fprintf(f, "set xlabel 'Time since start (%s)'\nset format x '%%g'\n", u->name);
	ta_range(f, r, -t0, u->per_second, 0);
	return ferror(f) ? EOF : 0;
}
