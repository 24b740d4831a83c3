/*
 * live.c - the figures of threadgraph live, from a capture being written
 * (live.h).
 */
#include <stdlib.h>
#include <string.h>

#include "capture_read.h"
#include "live.h"

void tg_live_init(struct tg_live *lv)
{
	memset(lv, 0, sizeof(*lv));
}

static void live_free_threads(struct tg_live_thread *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(t[i].name);
	free(t);
}

void tg_live_release(struct tg_live *lv)
{
	live_free_threads(lv->threads, lv->n_threads);
	free(lv->funcs);
	free(lv->names);
	tg_live_init(lv);
}

/* The previous reading's thread of STREAM, or NULL. */
static const struct tg_live_thread *live_prev(const struct tg_live *lv, uint32_t stream)
{
	for (size_t i = 0; i < lv->n_threads; i++)
		if (lv->threads[i].stream == stream)
			return &lv->threads[i];
	return NULL;
}

/* Decodes thread T's stream into *OUT, adding its returns' deltas to NET (by
 * code index).  A thread's memory now counts every returned call that no
 * returned call encloses: OPEN[k] sums the deltas of the calls at depth k that
 * returned inside the calls open at depths below k (a worker's loop that never
 * returns shows its iterations); a call's return replaces its callees' sums by
 * its own delta, which includes them.  Returns 0 or -1 with d->msg. */
static int live_thread(const struct tg_capture *cap, const struct tg_cap_thread *t,
		       struct tg_live_thread *out, uint32_t focus, int64_t *net,
		       unsigned long *calls, int64_t *last_us, struct tg_diag *d)
{
	struct tg_capcur c;
	struct tg_cap_rec_data r;
	int64_t *open = NULL;   /* by depth, [0, top]: nonzero only there */
	size_t n_open = 0, top = 0;
	int ret;

	tg_capcur_init(&c, cap, t);
	if (t->has_state) {  /* a capture of limited size: its memory before the kept
			      * segments, by depth so that an open call's return
			      * replaces what its callees kept there too */
		out->now = out->peak = t->state.mem;
		if (t->state.n_lvl) {
			if (!(open = malloc(t->state.n_lvl * sizeof(*open)))) {
				tg_capcur_release(&c);
				return tg_error(d, "out of memory");
			}
			memcpy(open, t->state.lvl, t->state.n_lvl * sizeof(*open));
			n_open = t->state.n_lvl;
			top = n_open - 1;
		}
	}
	while ((ret = tg_capcur_next_of(&c, &r, TG_CAP_WANT_RETURN | TG_CAP_WANT_LEVEL,
					d)) == 1) {
		size_t ix = (size_t)(r.code - cap->codes);
		size_t k = c.depth;  /* open calls around this one: 0 for an outermost call */
		int64_t miss = 0;

		if (k >= n_open) {
			size_t n = n_open ? n_open : 16;
			int64_t *grown;

			while (n <= k)
				n *= 2;
			if (!(grown = realloc(open, n * sizeof(*open)))) {
				ret = tg_error(d, "out of memory");
				break;
			}
			memset(grown + n_open, 0, (n - n_open) * sizeof(*grown));
			open = grown;
			n_open = n;
		}
		if (r.type == TG_CAP_REC_LEVEL) {
			/* the thread's memory here, and when each open call was
			 * made (docs/formats.md): the sums by depth are made
			 * exact again, what the returns missed (the open calls'
			 * own frees and allocations) put right.  Without the
			 * starts, the miss goes to the innermost open call's sum. */
			if (c.n_starts == k) {
				int64_t below = 0;

				for (size_t j = 0; j < k; j++) {
					if (__builtin_sub_overflow(c.starts[j], below, &open[j]))
						goto overflow;
					below = c.starts[j];
				}
				for (size_t j = k + 1; j <= top; j++)
					open[j] = 0;
				if (__builtin_sub_overflow(r.value, below, &open[k]))
					goto overflow;
				top = k;
			} else {
				if (__builtin_sub_overflow(r.value, out->now, &miss) ||
				    __builtin_add_overflow(open[k], miss, &open[k]))
					goto overflow;
				if (k > top)
					top = k;
			}
			out->now = r.value;
			if (out->now > out->peak)
				out->peak = out->now;
			continue;
		}
		out->returns++;
		if (r.value > out->largest)
			out->largest = r.value;
		for (size_t j = k + 1; j <= top; j++) {  /* its callees: in r.value */
			if (__builtin_sub_overflow(out->now, open[j], &out->now))
				goto overflow;
			open[j] = 0;
		}
		top = k;
		/* sums beyond int64 are an error, never a wrapped figure */
		if (__builtin_add_overflow(open[k], r.value, &open[k]) ||
		    __builtin_add_overflow(out->now, r.value, &out->now))
			goto overflow;
		if (out->now > out->peak)
			out->peak = out->now;
		if (ix < cap->n_codes && (!focus || focus == t->stream)) {
			if (__builtin_add_overflow(net[ix], r.value, &net[ix]))
				goto overflow;
			calls[ix]++;
		}
		if (r.t_us > *last_us)
			*last_us = r.t_us;
	}
	goto release;
overflow:
	ret = tg_error(d, "'%s': memory beyond 2^63 bytes at record %lu (damaged capture?)",
		       cap->path, r.number);
release:
	free(open);
	tg_capcur_release(&c);
	return ret < 0 ? -1 : 0;
}

static int live_func_cmp(const void *a, const void *b)
{
	const struct tg_live_func *x = a, *y = b;

	if (x->net != y->net)
		return x->net < y->net ? 1 : -1;
	return x->calls < y->calls ? 1 : x->calls > y->calls ? -1 : 0;
}

int tg_live_keep_funcs(struct tg_live *lv, struct tg_live_func *all, size_t n,
		       void (*name)(const void *ctx, size_t ix, struct tg_live_name *out),
		       const void *ctx, struct tg_diag *d)
{
	size_t keep, len = 0;
	char *names = NULL, *p;
	struct tg_live_name nm;

	if (n)
		qsort(all, n, sizeof(*all), live_func_cmp);
	keep = n < TG_LIVE_FUNCS ? n : TG_LIVE_FUNCS;
	for (size_t i = 0; i < keep; i++) {
		name(ctx, (uintptr_t)all[i].file, &nm);
		len += nm.file_len + nm.func_len + 2;
	}
	if (keep && !(names = malloc(len))) {
		free(all);
		return tg_error(d, "out of memory");
	}
	p = names;
	for (size_t i = 0; i < keep; i++) {
		name(ctx, (uintptr_t)all[i].file, &nm);
		memcpy(p, nm.file, nm.file_len);
		p[nm.file_len] = '\0';
		all[i].file = p;
		p += nm.file_len + 1;
		memcpy(p, nm.func, nm.func_len);
		p[nm.func_len] = '\0';
		all[i].func = p;
		p += nm.func_len + 1;
	}
	free(lv->funcs);
	free(lv->names);
	lv->funcs = all;
	lv->n_funcs = keep;
	lv->names = names;
	return 0;
}

/* The texts of the capture's code IX. */
static void live_code_name(const void *ctx, size_t ix, struct tg_live_name *out)
{
	const struct tg_cap_code *code = &((const struct tg_capture *)ctx)->codes[ix];

	out->file = code->file;
	out->file_len = code->file_len;
	out->func = code->func;
	out->func_len = code->func_len;
}

/* Keeps the TG_LIVE_FUNCS functions of largest NET, their texts copied. */
static int live_funcs(struct tg_live *lv, const struct tg_capture *cap, const int64_t *net,
		      const unsigned long *calls, struct tg_diag *d)
{
	struct tg_live_func *all = NULL;
	size_t n = 0;

	if (cap->n_codes && !(all = malloc(cap->n_codes * sizeof(*all))))
		return tg_error(d, "out of memory");
	for (size_t i = 0; i < cap->n_codes; i++) {
		if (!calls[i])
			continue;
		all[n].func = NULL;
		all[n].net = net[i];
		all[n].calls = calls[i];
		all[n].line = cap->codes[i].first_line;
		all[n].file = (const char *)(uintptr_t)i;  /* the code index, until copied */
		n++;
	}
	return tg_live_keep_funcs(lv, all, n, live_code_name, cap, d);
}

int tg_live_read(struct tg_live *lv, const char *path, struct tg_diag *d)
{
	struct tg_capture cap;
	struct tg_live_thread *threads = NULL;
	int64_t *net = NULL, last_us;
	unsigned long *calls = NULL;
	int ret = -1;

	if (tg_capture_open(&cap, path, d) < 0)
		return -1;
	last_us = cap.start_us;
	if (cap.n_threads && !(threads = calloc(cap.n_threads, sizeof(*threads)))) {
		tg_error(d, "out of memory");
		goto close_cap;
	}
	if (cap.n_codes && (!(net = calloc(cap.n_codes, sizeof(*net)))
			    || !(calls = calloc(cap.n_codes, sizeof(*calls))))) {
		tg_error(d, "out of memory");
		goto free_threads;
	}
	for (size_t i = 0; i < cap.n_threads; i++) {
		const struct tg_cap_thread *t = &cap.threads[i];
		const struct tg_live_thread *prev = live_prev(lv, t->stream);

		threads[i].stream = t->stream;
		threads[i].ended = cap.has_end;
		if (!(threads[i].name = strdup(t->name))) {
			tg_error(d, "out of memory");
			goto free_threads;
		}
		if (live_thread(&cap, t, &threads[i], lv->focus, net, calls, &last_us, d) < 0)
			goto free_threads;
		threads[i].change = prev ? threads[i].now - prev->now : 0;
	}
	if (live_funcs(lv, &cap, net, calls, d) < 0)
		goto free_threads;
	lv->has_process = cap.process.n > 0;
	if (lv->has_process) {
		struct tg_capcur c;
		struct tg_cap_rec_data r;

		tg_capcur_init(&c, &cap, NULL);
		while (tg_capcur_next(&c, &r, d) == 1) {
			lv->process_bytes = r.value;
			if (r.t_us > last_us)
				last_us = r.t_us;
		}
		tg_capcur_release(&c);
	}
	live_free_threads(lv->threads, lv->n_threads);
	lv->threads = threads;
	lv->n_threads = cap.n_threads;
	threads = NULL;
	lv->memory_mode = cap.memory_mode;
	lv->ended = cap.has_end;
	lv->timed = (cap.flags & TG_CAP_F_TIME) != 0;
	lv->pid = cap.pid;
	lv->seg_first = cap.seg_first;
	lv->seg_last = cap.seg_last;
	lv->kept_from_us = cap.kept_from_us;
	lv->end_us = cap.end_us;
	lv->start_us = cap.start_us;
	lv->last_us = last_us;
	lv->readings++;
	ret = 0;
free_threads:
	if (threads)
		live_free_threads(threads, cap.n_threads);
	free(net);
	free(calls);
close_cap:
	tg_capture_close(&cap);
	return ret;
}
