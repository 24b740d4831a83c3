/*
 * sitetab.c - call site -> summed delta hash table for memh.
 */
#include <stdlib.h>
#include <string.h>

#include "graphs.h"
#include "tg_fnv.h"

void tg_sitetab_init(struct tg_sitetab *t)
{
	memset(t, 0, sizeof(*t));
}

void tg_sitetab_release(struct tg_sitetab *t)
{
	free(t->v);
	free(t->arena);
	tg_sitetab_init(t);
}

static size_t site_hash(const char *s, size_t len)
{
	return (size_t)tg_fnv1a(TG_FNV_BASIS, s, len);
}

static int site_grow(struct tg_sitetab *t, struct tg_diag *d)
{
	size_t ncap = t->cap ? t->cap * 2 : 1024;
	struct tg_site_sum *nv = calloc(ncap, sizeof(*nv));

	if (!nv)
		return tg_error(d, "out of memory (%zu call sites)", t->n);
	for (size_t i = 0; i < t->cap; i++) {
		size_t j;
		if (!t->v[i].used)
			continue;
		j = site_hash(t->arena + t->v[i].off, t->v[i].len) & (ncap - 1);
		while (nv[j].used)
			j = (j + 1) & (ncap - 1);
		nv[j] = t->v[i];
	}
	free(t->v);
	t->v = nv;
	t->cap = ncap;
	return 0;
}

int tg_sitetab_add(struct tg_sitetab *t, const char *site, size_t len, long long delta,
		   struct tg_diag *d)
{
	size_t j;

	if ((t->n + 1) * 2 > t->cap && site_grow(t, d) < 0)
		return -1;
	j = site_hash(site, len) & (t->cap - 1);
	while (t->v[j].used) {
		if (t->v[j].len == len && !memcmp(t->arena + t->v[j].off, site, len)) {
			if (__builtin_add_overflow(t->v[j].sum, delta, &t->v[j].sum))
				return tg_error(d, "the deltas of call site '%.*s' sum beyond 2^63 "
						"bytes (damaged dumps?)", (int)(len > 200 ? 200 : len),
						site);
			return 0;
		}
		j = (j + 1) & (t->cap - 1);
	}
	if (t->arena_len + len > t->arena_alloc) {
		size_t na = t->arena_alloc ? t->arena_alloc * 2 : 65536;
		char *nb;
		while (na < t->arena_len + len)
			na *= 2;
		nb = realloc(t->arena, na);
		if (!nb)
			return tg_error(d, "out of memory (%zu call sites)", t->n);
		t->arena = nb;
		t->arena_alloc = na;
	}
	memcpy(t->arena + t->arena_len, site, len);
	t->v[j].off = t->arena_len;
	t->v[j].len = len;
	t->v[j].sum = delta;
	t->v[j].used = 1;
	t->arena_len += len;
	t->n++;
	return 0;
}

/* Ascending sum; ties by the site's first appearance (arena offset). */
static int site_cmp(const void *a, const void *b)
{
	const struct tg_site_sum *x = *(const struct tg_site_sum *const *)a;
	const struct tg_site_sum *y = *(const struct tg_site_sum *const *)b;

	if (x->sum != y->sum)
		return x->sum < y->sum ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

long tg_sitetab_extremes(const struct tg_sitetab *t, size_t side,
			   const struct tg_site_sum **out)
{
	const struct tg_site_sum **all;
	size_t n = 0, neg = 0, pos, k = 0;

	if (!t->n)
		return 0;
	all = malloc(t->n * sizeof(*all));
	if (!all)
		return -1;
	for (size_t i = 0; i < t->cap; i++)
		if (t->v[i].used && t->v[i].sum)
			all[n++] = &t->v[i];
	qsort(all, n, sizeof(*all), site_cmp);
	while (neg < n && all[neg]->sum < 0)
		neg++;
	for (size_t i = 0; i < neg && i < side; i++)
		out[k++] = all[i];
	pos = n - neg;
	for (size_t i = n - (pos < side ? pos : side); i < n; i++)
		out[k++] = all[i];
	free(all);
	return (long)k;
}
