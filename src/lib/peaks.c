/*
 * peaks.c - candidate collection and peak selection.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "peaks.h"

void tg_peaks_init(struct tg_peaks *p)
{
	memset(p, 0, sizeof(*p));
}

void tg_peaks_release(struct tg_peaks *p)
{
	free(p->v);
	free(p->arena);
	tg_peaks_init(p);
}

static int peaks_prune(struct tg_peaks *p, struct tg_diag *d);

int tg_peaks_add(struct tg_peaks *p, const struct tg_peak *c, const char *time_text,
		 size_t time_len, const char *rest, size_t rest_len, struct tg_diag *d)
{
	size_t need = time_len + rest_len;

	if (p->bound && p->n >= TG_PEAKS_BOUND_ROOM(p->bound) && peaks_prune(p, d) < 0)
		return -1;

	if (p->n == p->alloc) {
		size_t na = p->alloc ? 2 * p->alloc : 256;
		struct tg_peak *nv = realloc(p->v, na * sizeof(*nv));
		if (!nv)
			return tg_error(d, "out of memory (%zu peak candidates)", p->n);
		p->v = nv;
		p->alloc = na;
	}
	if (p->arena_len + need > p->arena_alloc) {
		size_t na = p->arena_alloc ? 2 * p->arena_alloc : 65536;
		char *nb;
		while (na < p->arena_len + need)
			na *= 2;
		nb = realloc(p->arena, na);
		if (!nb)
			return tg_error(d, "out of memory (%zu peak candidates)", p->n);
		p->arena = nb;
		p->arena_alloc = na;
	}
	p->v[p->n] = *c;
	p->v[p->n].text_off = p->arena_len;
	p->v[p->n].time_len = (unsigned)time_len;
	p->v[p->n].rest_len = (unsigned)rest_len;
	memcpy(p->arena + p->arena_len, time_text, time_len);
	memcpy(p->arena + p->arena_len + time_len, rest, rest_len);
	p->arena_len += need;
	p->n++;
	return 0;
}

/* Time order; ties by thread file, then line, so the result is deterministic. */
static int peaks_cmp_time(const void *a, const void *b)
{
	const struct tg_peak *x = a, *y = b;

	if (x->x != y->x)
		return x->x < y->x ? -1 : 1;
	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	return x->lineno < y->lineno ? -1 : x->lineno > y->lineno;
}

static int peaks_cmp_size(const void *a, const void *b)
{
	const struct tg_peak *x = a, *y = b;
	long long ax = llabs(x->delta), ay = llabs(y->delta);

	if (ax != ay)
		return ax > ay ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* The scaled selection's order: by size, a wrapper's return (threading's,
 * exec's, IPython's around a cell: tg_memrec_is_wrapper) after every other
 * candidate, so that the call which allocated is labelled rather
 * than the wrapper which returns the same bytes a moment later; a wrapper is
 * still kept where no such call is near it. */
static int peaks_cmp_scaled(const void *a, const void *b)
{
	const struct tg_peak *x = a, *y = b;

	if (x->wrapper != y->wrapper)
		return x->wrapper ? 1 : -1;
	return peaks_cmp_size(a, b);
}

/* tg_peaks_top's order before the ids are given: peaks_cmp_scaled with time
 * order (peaks_cmp_time) for the ids, which select gives in that order. */
static int peaks_cmp_top(const void *a, const void *b)
{
	const struct tg_peak *x = a, *y = b;
	long long ax = llabs(x->delta), ay = llabs(y->delta);

	if (x->wrapper != y->wrapper)
		return x->wrapper ? 1 : -1;
	if (ax != ay)
		return ax > ay ? -1 : 1;
	return peaks_cmp_time(a, b);
}

/* Keeps the p->bound candidates first by peaks_cmp_top (a total order, so
 * the bound first of all candidates are the bound first of those kept at each
 * cut and those that came after it), their texts moved into an arena of
 * their own. */
static int peaks_prune(struct tg_peaks *p, struct tg_diag *d)
{
	size_t len = 0;
	char *arena;

	qsort(p->v, p->n, sizeof(*p->v), peaks_cmp_top);
	if (p->n > p->bound)
		p->n = p->bound;
	for (size_t i = 0; i < p->n; i++)
		len += p->v[i].time_len + p->v[i].rest_len;
	if (!(arena = malloc(len ? len : 1)))
		return tg_error(d, "out of memory (%zu peak candidates)", p->n);
	len = 0;
	for (size_t i = 0; i < p->n; i++) {
		size_t k = p->v[i].time_len + p->v[i].rest_len;
		memcpy(arena + len, p->arena + p->v[i].text_off, k);
		p->v[i].text_off = len;
		len += k;
	}
	free(p->arena);
	p->arena = arena;
	p->arena_len = len;
	p->arena_alloc = len ? len : 1;
	return 0;
}

static int peaks_cmp_id(const void *a, const void *b)
{
	const struct tg_peak *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* Scaled spacing: largest first (the wrappers last), none within span /
 * TG_PEAKS_SCALED_SHARE of another kept one; then back in time order.  The
 * span is the graph's, not the candidates': candidates all in one burst of a
 * few ms were otherwise all kept, their labels piled in one column. */
static void peaks_select_scaled(struct tg_peaks *p, double span)
{
	double gap = span > 0 ? span / TG_PEAKS_SCALED_SHARE : 0;
	size_t i, j, kept = 0;

	/* peaks_cmp_size breaks ties by id: time order */
	qsort(p->v, p->n, sizeof(*p->v), peaks_cmp_time);
	for (i = 0; i < p->n; i++)
		p->v[i].id = i;
	qsort(p->v, p->n, sizeof(*p->v), peaks_cmp_scaled);
	for (i = 0; i < p->n; i++) {
		for (j = 0; j < kept; j++)
			if (fabs(p->v[i].x - p->v[j].x) <= gap)
				break;
		if (j < kept)
			continue;
		p->v[kept++] = p->v[i];
	}
	p->n = kept;
	qsort(p->v, p->n, sizeof(*p->v), peaks_cmp_time);
	for (i = 0; i < p->n; i++)
		p->v[i].id = i;
}

void tg_peaks_select(struct tg_peaks *p, const struct tg_peak_opts *o, double span)
{
	size_t i, kept = 0;

	if (!p->n)
		return; /* p->v may be NULL: qsort must not see it */
	if (o->every) {
		qsort(p->v, p->n, sizeof(*p->v), peaks_cmp_time);
		for (i = 0; i < p->n; i++)
			p->v[i].id = i;
		return;
	}
	if (o->scaled) {
		peaks_select_scaled(p, span);
		return;
	}
	qsort(p->v, p->n, sizeof(*p->v), peaks_cmp_time);
	for (i = 0; i < p->n; i++) {
		const struct tg_peak *last = kept ? &p->v[kept - 1] : NULL;
		double dv;

		if (last) {
			dv = fabs((double)(p->v[i].delta - last->delta) / 1024.0);
			if (!(fabs(p->v[i].x - last->x) > o->delta_time || dv > o->delta_value_kb))
				continue;
		}
		p->v[kept] = p->v[i];
		p->v[kept].id = kept;
		kept++;
	}
	p->n = kept;
}

void tg_peaks_sort_size(struct tg_peaks *p)
{
	if (p->n)
		qsort(p->v, p->n, sizeof(*p->v), peaks_cmp_scaled);  /* wrappers last */
}

void tg_peaks_top(struct tg_peaks *p, size_t n)
{
	if (n >= p->n)
		return;
	tg_peaks_sort_size(p);
	p->n = n;
	if (n)
		qsort(p->v, p->n, sizeof(*p->v), peaks_cmp_id);
}
