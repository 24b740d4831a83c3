/*
 * live_agg.c - threadgraph live's figures from an aggregate run
 * (--aggregate), which writes no capture: its aggregate.tga, rewritten by the
 * recorder every second, read whole at each reading (its size does not grow
 * with the run's length).  See live_agg.h.
 */
#include <stdlib.h>
#include <string.h>

#include "aggfile.h"
#include "live_agg.h"
#include "runinfo.h"
#include "tg_fnv.h"

/* A thread's stream number for the view: its entry's name, hashed (FNV-1a),
 * so that it stays the same across readings whatever the order (entries of
 * ended threads leave the file, folded ones appear).  Never 0 (no thread). */
static uint32_t agg_stream(const char *base)
{
	uint64_t w = tg_fnv1a(TG_FNV_BASIS, base, strlen(base));
	uint32_t h = (uint32_t)(w ^ w >> 32);

	return h ? h : 1;
}

/* The texts of the file's function IX. */
static void agg_func_name(const void *ctx, size_t ix, struct tg_live_name *out)
{
	const struct tg_agg_rfunc *f = &((const struct tg_aggfile *)ctx)->f[ix];

	out->file = f->file;
	out->file_len = strlen(f->file);
	out->func = f->func;
	out->func_len = strlen(f->func);
}

/* The functions of A by the net bytes of their calls (all threads, or the
 * thread of stream FOCUS), the TG_LIVE_FUNCS largest kept in LV. */
static int agg_funcs(struct tg_live *lv, const struct tg_aggfile *a, uint32_t focus,
		     struct tg_diag *d)
{
	struct tg_live_func *all = a->nf ? calloc(a->nf, sizeof(*all)) : NULL;
	size_t n = 0;

	if (a->nf && !all)
		return tg_error(d, "out of memory");
	for (size_t i = 0; i < a->nt; i++) {
		const struct tg_agg_rthread *t = &a->t[i];
		if (focus && agg_stream(t->base) != focus)
			continue;
		for (size_t k = 1; k < t->n_nodes; k++) {
			const struct tg_agg_rnode *nd = &t->nodes[k];
			struct tg_live_func *f = &all[nd->func - 1];
			if (__builtin_add_overflow(f->net, nd->total, &f->net)) {
				free(all);
				return tg_error(d, "'%s': memory beyond 2^63 bytes (damaged file?)",
						a->path);
			}
			f->calls += nd->count;
			if (!f->line && !a->f[nd->func - 1].is_c)
				f->line = nd->line;
		}
	}
	for (size_t i = 0; i < a->nf; i++) {
		if (!all[i].calls)
			continue;
		all[n] = all[i];
		all[n].file = (const char *)(uintptr_t)i;  /* the function's index, until copied */
		n++;
	}
	return tg_live_keep_funcs(lv, all, n, agg_func_name, a, d);
}

int tg_live_agg_read(struct tg_live *lv, const char *dir, struct tg_diag *d)
{
	struct tg_aggfile a;
	struct tg_run_threads ri;
	struct tg_live_thread *threads = NULL;
	int ret = -1;

	tg_run_threads_init(&ri);
	if (tg_aggfile_load(&a, dir, d) < 0)
		goto out;
	if (tg_run_threads_read(&ri, dir, d) < 0)
		goto out;
	if (a.nt && !(threads = calloc(a.nt, sizeof(*threads)))) {
		tg_error(d, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < a.nt; i++) {
		const struct tg_agg_rthread *t = &a.t[i];
		struct tg_live_thread *lt = &threads[i];

		if (!(lt->name = strdup(t->base))) {
			tg_error(d, "out of memory");
			goto out;
		}
		lt->stream = agg_stream(t->base);
		lt->ended = ri.ended;
		if (t->nb)
			lt->now = t->b[t->nb - 1].max;
		for (size_t k = 0; k < t->nb; k++)
			if (t->b[k].max > lt->peak)
				lt->peak = t->b[k].max;
		for (size_t k = 1; k < t->n_nodes; k++) {
			if (t->nodes[k].max > lt->largest)
				lt->largest = t->nodes[k].max;
			lt->returns += (unsigned long)t->nodes[k].count;
		}
		for (size_t j = 0; j < lv->n_threads; j++)
			if (lv->threads[j].stream == lt->stream)
				lt->change = lt->now - lv->threads[j].now;
	}
	if (agg_funcs(lv, &a, lv->focus, d) < 0)
		goto out;
	for (size_t j = 0; j < lv->n_threads; j++)
		free(lv->threads[j].name);
	free(lv->threads);
	lv->threads = threads;
	lv->n_threads = a.nt;
	threads = NULL;
	lv->has_process = 0;
	lv->memory_mode = !strcmp(a.memory, "process") ? 1 : !strcmp(a.memory, "rss") ? 2 : 0;
	lv->curves = 0;
	lv->ended = ri.ended;
	lv->timed = 1;
	lv->pid = (uint32_t)ri.pid;
	lv->start_us = a.start_us;
	lv->last_us = a.end_us;
	lv->readings++;
	ret = 0;
out:
	if (threads) {
		for (size_t j = 0; j < a.nt; j++)
			free(threads[j].name);
		free(threads);
	}
	tg_aggfile_release(&a);
	tg_run_threads_release(&ri);
	return ret;
}
