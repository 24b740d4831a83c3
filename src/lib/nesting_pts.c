/*
 * nesting_pts.c - the bounded point set of a nesting series (nesting_pts.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nesting_pts.h"
#include "atomic_out.h"

/* Slices are kept within +-2^62, so that hi - lo + 1 fits an uint64_t (a
 * hostile dump's time of 1e300 is a slice, not an overflow). */
#define NPTS_SLICE_MAX ((int64_t)1 << 62)

void tg_npts_init(struct tg_npts *p, double width, size_t slices, size_t max_n)
{
	memset(p, 0, sizeof(*p));
	p->width = width > 0 ? width : 1;
	p->slices = slices;
	p->max_n = max_n;
}

void tg_npts_release(struct tg_npts *p)
{
	free(p->v);
	p->v = NULL;
	p->cap = p->n = 0;
}

static size_t npts_hash(int64_t slice, unsigned depth)
{
	uint64_t h = (uint64_t)slice * 0x9E3779B97F4A7C15ull ^
		     (uint64_t)depth * 0xC2B2AE3D27D4EB4Full;

	return (size_t)(h ^ h >> 29);
}

/* The slot of (slice, depth) in v (cap a power of two, not full): its entry, or
 * the free slot where it goes. */
static struct tg_npts_ent *npts_slot(struct tg_npts_ent *v, size_t cap, int64_t slice,
				     unsigned depth)
{
	size_t i = npts_hash(slice, depth) & (cap - 1);

	while (v[i].used && (v[i].slice != slice || v[i].depth != depth))
		i = (i + 1) & (cap - 1);
	return &v[i];
}

/* floor(slice / 2), negative slices included. */
static int64_t npts_half(int64_t slice)
{
	return slice >= 0 ? slice / 2 : -((-slice + 1) / 2);
}

/* Puts e into v, merging it with its (slice, depth) there. */
static void npts_put(struct tg_npts *p, struct tg_npts_ent *v, size_t cap,
		     const struct tg_npts_ent *e)
{
	struct tg_npts_ent *s = npts_slot(v, cap, e->slice, e->depth);

	if (!s->used) {
		*s = *e;
		p->n++;
		return;
	}
	if (e->first < s->first)
		s->first = e->first;
	if (e->last > s->last)
		s->last = e->last;
}

/* Moves the entries into a table of newcap slots, each slice halved when
 * `coarser`; 0 or -1 (out of memory, the set as it was). */
static int npts_rehash(struct tg_npts *p, size_t newcap, int coarser)
{
	struct tg_npts_ent *v = calloc(newcap, sizeof(*v)), *old = p->v;
	size_t oldcap = p->cap;

	if (!v)
		return -1;
	p->n = 0;
	for (size_t i = 0; i < oldcap; i++) {
		struct tg_npts_ent e = old[i];
		if (!e.used)
			continue;
		if (coarser)
			e.slice = npts_half(e.slice);
		npts_put(p, v, newcap, &e);
	}
	free(old);
	p->v = v;
	p->cap = newcap;
	return 0;
}

/* Doubles the width while the set spans too many slices, or holds too many
 * entries over more than one; 0 or -1 (out of memory). */
static int npts_bound(struct tg_npts *p)
{
	for (;;) {
		uint64_t span = (uint64_t)p->hi - (uint64_t)p->lo + 1;  /* no overflow */
		int wide = p->slices && span > p->slices;
		int big = p->max_n && p->n > p->max_n && span > 1;
		int64_t lo = npts_half(p->lo), hi = npts_half(p->hi);

		/* slices -1 and 0 stay apart: a set of negative and positive x (a
		 * hostile dump's) ends there */
		if ((!wide && !big) || (lo == p->lo && hi == p->hi))
			return 0;
		if (npts_rehash(p, p->cap, 1) < 0)
			return -1;
		p->width *= 2;
		p->lo = lo;
		p->hi = hi;
	}
}

int tg_npts_add_slice(struct tg_npts *p, int64_t slice, double x, unsigned depth,
		      struct tg_diag *d)
{
	struct tg_npts_ent e = { slice, depth, 1, x, x };
	struct tg_npts_ent *s;

	if (p->v) {
		s = npts_slot(p->v, p->cap, slice, depth);
		if (s->used) {  /* the common case: a (slice, depth) already seen */
			if (x < s->first)
				s->first = x;
			if (x > s->last)
				s->last = x;
			return 0;
		}
	}
	if ((p->n + 1) * 2 > p->cap && npts_rehash(p, p->cap ? p->cap * 2 : 64, 0) < 0)
		return tg_error(d, "out of memory");
	npts_put(p, p->v, p->cap, &e);
	if (p->n == 1 || slice < p->lo)
		p->lo = slice;
	if (p->n == 1 || slice > p->hi)
		p->hi = slice;
	if (npts_bound(p) < 0)
		return tg_error(d, "out of memory");
	return 0;
}

int tg_npts_add(struct tg_npts *p, double x, unsigned depth, struct tg_diag *d)
{
	double q = floor(x / p->width);
	int64_t slice;

	if (!(q > (double)-NPTS_SLICE_MAX))  /* NaN too */
		slice = -NPTS_SLICE_MAX;
	else if (q > (double)NPTS_SLICE_MAX)
		slice = NPTS_SLICE_MAX;
	else
		slice = (int64_t)q;
	return tg_npts_add_slice(p, slice, x, depth, d);
}

/* A point to write. */
struct npts_pt {
	double x;
	unsigned depth;
};

static int npts_pt_cmp(const void *a, const void *b)
{
	const struct npts_pt *x = a, *y = b;

	if (x->x != y->x)
		return x->x < y->x ? -1 : 1;
	return x->depth < y->depth ? -1 : x->depth > y->depth;
}

long tg_npts_write(const struct tg_npts *p, FILE *f, int decimals, int both,
		   struct tg_diag *d)
{
	struct npts_pt *v = malloc((p->n ? p->n : 1) * 2 * sizeof(*v));
	size_t k = 0;

	if (!v)
		return tg_error(d, "out of memory");
	for (size_t i = 0; i < p->cap; i++) {
		const struct tg_npts_ent *e = &p->v[i];
		if (!e->used)
			continue;
		v[k++] = (struct npts_pt){ e->first, e->depth };
		if (both && e->last != e->first)
			v[k++] = (struct npts_pt){ e->last, e->depth };
	}
	qsort(v, k, sizeof(*v), npts_pt_cmp);
	for (size_t i = 0; i < k; i++)
		fprintf(f, "%.*f %u\n", decimals, v[i].x, v[i].depth);
	free(v);
	return (long)k;
}

int tg_npts_thin_file(const char *dir, const char *name, double x0, double x1,
		      size_t columns, int decimals, struct tg_diag *d)
{
	char *line = NULL;
	size_t cap = 0;
	struct tg_npts p;
	struct tg_aout out = { 0 };
	FILE *in = NULL;
	int ret = -1;

	tg_npts_init(&p, 1, 0, 0);
	/* written beside it and renamed over it (atomic_out.h) */
	if (tg_aout_open(&out, dir, name, d) < 0)
		goto done;
	if (!(in = fopen(out.final, "r"))) {
		tg_error(d, "unable to thin '%s': %s", out.final, strerror(errno));
		goto done;
	}
	while (getline(&line, &cap, in) >= 0) {
		double x, c = 0;
		unsigned depth;

		if (sscanf(line, "%lf %u", &x, &depth) != 2)
			continue;
		if (x1 > x0)
			c = floor((x - x0) / (x1 - x0) * (double)columns);
		if (!(c > 0))  /* NaN too */
			c = 0;
		if (c > (double)columns - 1)  /* x1 itself: the last column */
			c = (double)columns - 1;
		if (tg_npts_add_slice(&p, (int64_t)c, x, depth, d) < 0)
			goto done;
	}
	if (ferror(in)) {
		tg_error(d, "unable to thin '%s': %s", out.final, strerror(errno));
		goto done;
	}
	if (tg_npts_write(&p, out.f, decimals, 1, d) < 0 || tg_aout_commit(&out, d) < 0)
		goto done;
	ret = 0;
done:
	if (in)
		fclose(in);
	if (ret < 0)
		tg_aout_abort(&out);
	else
		tg_aout_release(&out);
	tg_npts_release(&p);
	free(line);
	return ret;
}
