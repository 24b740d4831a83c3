/*
 * agg_out.c - an aggregate run's summary (aggfile.h tg_aggfile_summary).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggfile.h"
#include "fmt.h"

/* The nodes of T by total delta, largest first (ties by index). */
static const struct tg_agg_rthread *out_t;

static int out_cmp(const void *a, const void *b)
{
	const struct tg_agg_rnode *x = &out_t->nodes[*(const size_t *)a];
	const struct tg_agg_rnode *y = &out_t->nodes[*(const size_t *)b];
	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

int tg_aggfile_summary(FILE *out, const struct tg_aggfile *a, size_t top)
{
	uint64_t threads = 0, folded = 0;
	size_t entries = 0;

	for (size_t i = 0; i < a->nt; i++) {
		threads += a->t[i].folded ? a->t[i].folded : 1;
		folded += a->t[i].folded;
		entries += a->t[i].folded != 0;
	}
	fprintf(out, "aggregate run: %.3f s recorded, memory mode %s, %" PRIu64 " thread%s",
		(double)(a->end_us - a->start_us) / 1e6, a->memory, threads,
		threads == 1 ? "" : "s");
	if (folded)
		fprintf(out, " (%" PRIu64 " ended, folded into %zu entr%s by name)", folded,
			entries, entries == 1 ? "y" : "ies");
	fputs("\n", out);
	for (size_t i = 0; i < a->nt; i++) {
		const struct tg_agg_rthread *t = &a->t[i];
		uint64_t calls = 0;
		int64_t lo = 0, hi = 0;
		size_t *order, n = t->n_nodes ? t->n_nodes - 1 : 0;

		for (size_t j = 1; j < t->n_nodes; j++)
			calls += t->nodes[j].count;
		for (size_t j = 0; j < t->nb; j++) {
			if (!j || t->b[j].min < lo)
				lo = t->b[j].min;
			if (!j || t->b[j].max > hi)
				hi = t->b[j].max;
		}
		fputs("\n", out);
		tg_fputs_safe(out, t->base, strlen(t->base));
		fputs(": ", out);
		if (t->folded)
			fprintf(out, "%" PRIu64 " ended threads folded, ", t->folded);
		fprintf(out, "%" PRIu64 " calls on %zu call paths", calls, n);
		if (t->dropped)
			fprintf(out, " (%" PRIu64 " calls not counted: tables full)", t->dropped);
		if (t->nb)
			fprintf(out, "; memory %" PRId64 " to %" PRId64 " bytes (buckets of %.3f ms)",
				lo, hi, (double)t->width_us / 1e3);
		fputs("\n", out);
		if (!n || !top)
			continue;
		if (!(order = malloc(n * sizeof(*order))))
			continue;
		for (size_t j = 0; j < n; j++)
			order[j] = j + 1;
		out_t = t;
		qsort(order, n, sizeof(*order), out_cmp);
		fprintf(out, "  %14s %12s %14s  %s\n", "TOTAL", "CALLS", "LARGEST", "CALL (innermost)");
		for (size_t j = 0; j < n && j < top; j++) {
			const struct tg_agg_rnode *nd = &t->nodes[order[j]];
			const struct tg_agg_rfunc *f = &a->f[nd->func - 1];
			fprintf(out, "  %14" PRId64 " %12" PRIu64 " %14" PRId64 "  ", nd->total,
				nd->count, nd->max);
			tg_fputs_safe(out, f->file, strlen(f->file));
			fprintf(out, ":%u:", nd->line);
			tg_fputs_safe(out, f->func, strlen(f->func));
			fputs("\n", out);
		}
		free(order);
	}
	return ferror(out) ? EOF : 0;
}
