/*
 * live.c - the figures of threadgraph live, from a capture being written
 * (live.h).
 */
#include <stdlib.h>
#include <string.h>

#include "capture_read.h"
#include "live.h"
#include "tg_fnv.h"

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

static void live_state_clear(struct tg_live_state *st);

void tg_live_release(struct tg_live *lv)
{
	live_free_threads(lv->threads, lv->n_threads);
	free(lv->funcs);
	free(lv->names);
	if (lv->state) {
		live_state_clear(lv->state);
		free(lv->state);
	}
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

/* --- the decoding state kept between readings ----------------------------- */

/* A function's sums in one thread: code index + 1 (0: an empty slot). */
struct live_sum {
	uint32_t key;
	int64_t net;
	unsigned long calls;
};

/* One stream as far as the readings decoded it. */
struct live_stream {
	uint32_t stream;
	struct tg_capcur_mark mark;  /* where its cursor stopped, its open calls */
	int64_t now, peak, largest;
	unsigned long returns;
	int64_t *open;               /* live_thread's sums by depth, [0, top] */
	size_t n_open, top;
	struct live_sum *sums;       /* its functions' sums, open addressing by
				      * code index (for a focus on it) */
	size_t n_sums, sums_cap;     /* slots used, slots (0 or a power of two) */
};

struct tg_live_state {
	int started;                 /* a reading decoded something into it */
	unsigned char header[28];    /* the capture's header bytes 8-35 (version,
				      * flags, start, mode, clock, pid): the run */
	uint32_t seg_last;           /* the newest file read (0: capture.tg)... */
	size_t size_last;            /* ...and its size then: a file that shrank
				      * was replaced */
	struct live_stream *streams; /* in the capture's thread order */
	size_t n_streams;
	int64_t *net;                /* all threads' sums by code index */
	unsigned long *calls;
	uint64_t *fp;                /* each code's fingerprint: the indices mean
				      * the same functions in the next opening */
	size_t n_codes;
	struct tg_capcur_mark process; /* the process samples */
	int process_read;            /* process holds a place of this run */
	int samples_seen;            /* one was decoded */
	int64_t process_bytes, last_us;
};

static void live_stream_release(struct live_stream *s)
{
	tg_capcur_mark_release(&s->mark);
	free(s->open);
	free(s->sums);
	memset(s, 0, sizeof(*s));
}

/* Empties ST: the next reading decodes the capture from its start. */
static void live_state_clear(struct tg_live_state *st)
{
	for (size_t i = 0; i < st->n_streams; i++)
		live_stream_release(&st->streams[i]);
	free(st->streams);
	free(st->net);
	free(st->calls);
	free(st->fp);
	tg_capcur_mark_release(&st->process);
	memset(st, 0, sizeof(*st));
	tg_capcur_mark_init(&st->process);
}

/* Adds a return of code IX (delta V) to S's sums; 0, or -1 out of memory or
 * past int64 (1 in *over). */
static int live_sum_add(struct live_stream *s, size_t ix, int64_t v, int *over)
{
	size_t i;

	if (2 * (s->n_sums + 1) > s->sums_cap) {
		size_t nc = s->sums_cap ? 2 * s->sums_cap : 64;
		struct live_sum *nv = calloc(nc, sizeof(*nv));

		if (!nv)
			return -1;
		for (size_t j = 0; j < s->sums_cap; j++) {
			if (!s->sums[j].key)
				continue;
			for (i = s->sums[j].key * 2654435761u & (nc - 1); nv[i].key; i = (i + 1) & (nc - 1))
				;
			nv[i] = s->sums[j];
		}
		free(s->sums);
		s->sums = nv;
		s->sums_cap = nc;
	}
	for (i = (uint32_t)(ix + 1) * 2654435761u & (s->sums_cap - 1);
	     s->sums[i].key && s->sums[i].key != ix + 1; i = (i + 1) & (s->sums_cap - 1))
		;
	if (!s->sums[i].key) {
		s->sums[i].key = (uint32_t)(ix + 1);
		s->n_sums++;
	}
	if (__builtin_add_overflow(s->sums[i].net, v, &s->sums[i].net)) {
		*over = 1;
		return -1;
	}
	s->sums[i].calls++;
	return 0;
}

/* Decodes what thread T's stream gained since S's mark (C started there) into
 * S, adding its returns' deltas to NET (by code index).  A thread's memory now
 * counts every returned call that no returned call encloses: OPEN[k] sums the
 * deltas of the calls at depth k that returned inside the calls open at depths
 * below k (a worker's loop that never returns shows its iterations); a call's
 * return replaces its callees' sums by its own delta, which includes them.
 * Returns 0 or -1 with d->msg. */
static int live_thread(struct tg_capcur *c, const struct tg_capture *cap,
		       struct live_stream *s, int64_t *net, unsigned long *calls,
		       int64_t *last_us, struct tg_diag *d)
{
	struct tg_cap_rec_data r;
	int64_t *open = s->open;   /* by depth, [0, top]: nonzero only there */
	size_t n_open = s->n_open, top = s->top;
	int ret, over = 0;

	r.number = c->returns;
	while ((ret = tg_capcur_next_of(c, &r, TG_CAP_WANT_RETURN | TG_CAP_WANT_LEVEL,
					d)) == 1) {
		size_t ix = (size_t)(r.code - cap->codes);
		size_t k = c->depth;  /* open calls around this one: 0 for an outermost call */
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
			if (c->n_starts == k) {
				int64_t below = 0;

				for (size_t j = 0; j < k; j++) {
					if (__builtin_sub_overflow(c->starts[j], below, &open[j]))
						goto overflow;
					below = c->starts[j];
				}
				for (size_t j = k + 1; j <= top; j++)
					open[j] = 0;
				if (__builtin_sub_overflow(r.value, below, &open[k]))
					goto overflow;
				top = k;
			} else {
				if (__builtin_sub_overflow(r.value, s->now, &miss) ||
				    __builtin_add_overflow(open[k], miss, &open[k]))
					goto overflow;
				if (k > top)
					top = k;
			}
			s->now = r.value;
			if (s->now > s->peak)
				s->peak = s->now;
			continue;
		}
		s->returns++;
		if (r.value > s->largest)
			s->largest = r.value;
		for (size_t j = k + 1; j <= top; j++) {  /* its callees: in r.value */
			if (__builtin_sub_overflow(s->now, open[j], &s->now))
				goto overflow;
			open[j] = 0;
		}
		top = k;
		/* sums beyond int64 are an error, never a wrapped figure */
		if (__builtin_add_overflow(open[k], r.value, &open[k]) ||
		    __builtin_add_overflow(s->now, r.value, &s->now))
			goto overflow;
		if (s->now > s->peak)
			s->peak = s->now;
		if (__builtin_add_overflow(net[ix], r.value, &net[ix]))
			goto overflow;
		calls[ix]++;
		if (live_sum_add(s, ix, r.value, &over) < 0) {
			if (over)
				goto overflow;
			ret = tg_error(d, "out of memory");
			break;
		}
		if (r.t_us > *last_us)
			*last_us = r.t_us;
	}
	goto out;
overflow:
	ret = tg_error(d, "'%s': memory beyond 2^63 bytes at record %lu (damaged capture?)",
		       cap->path, r.number);
out:
	s->open = open;
	s->n_open = n_open;
	s->top = top;
	return ret < 0 ? -1 : 0;
}

/* Starts S for thread T, new to the readings: its figures from a capture of
 * limited size's state (its memory before the kept segments, by depth so that
 * an open call's return replaces what its callees kept there too).  0 or -1. */
static int live_stream_start(struct live_stream *s, const struct tg_cap_thread *t,
			     struct tg_diag *d)
{
	memset(s, 0, sizeof(*s));
	tg_capcur_mark_init(&s->mark);
	s->stream = t->stream;
	if (!t->has_state)
		return 0;
	s->now = s->peak = t->state.mem;
	if (t->state.n_lvl) {
		if (!(s->open = malloc(t->state.n_lvl * sizeof(*s->open))))
			return tg_error(d, "out of memory");
		memcpy(s->open, t->state.lvl, t->state.n_lvl * sizeof(*s->open));
		s->n_open = t->state.n_lvl;
		s->top = s->n_open - 1;
	}
	return 0;
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

/* Keeps the TG_LIVE_FUNCS functions of largest net: of all threads, or of
 * FOCUS's (S: its stream, NULL when it is not in the capture). */
static int live_funcs(struct tg_live *lv, const struct tg_capture *cap,
		      const struct tg_live_state *st, const struct live_stream *s,
		      uint32_t focus, struct tg_diag *d)
{
	struct tg_live_func *all = NULL;
	size_t n = 0, max = focus ? (s ? s->n_sums : 0) : st->n_codes;

	if (max && !(all = malloc(max * sizeof(*all))))
		return tg_error(d, "out of memory");
	if (focus && s) {
		for (size_t i = 0; i < s->sums_cap; i++) {
			const struct live_sum *e = &s->sums[i];

			if (!e->key)
				continue;
			all[n].func = NULL;
			all[n].net = e->net;
			all[n].calls = e->calls;
			all[n].line = cap->codes[e->key - 1].first_line;
			all[n].file = (const char *)(uintptr_t)(e->key - 1);
			n++;
		}
	} else if (!focus) {
		for (size_t i = 0; i < st->n_codes; i++) {
			if (!st->calls[i])
				continue;
			all[n].func = NULL;
			all[n].net = st->net[i];
			all[n].calls = st->calls[i];
			all[n].line = cap->codes[i].first_line;
			all[n].file = (const char *)(uintptr_t)i;  /* the code index, until copied */
			n++;
		}
	}
	return tg_live_keep_funcs(lv, all, n, live_code_name, cap, d);
}

/* A code's fingerprint: its texts, kind and line. */
static uint64_t live_code_fp(const struct tg_cap_code *c)
{
	return tg_fnv1a_pair(TG_FNV_BASIS ^ c->first_line ^ (uint64_t)c->kind << 60,
			     c->file, c->file_len, c->func, c->func_len);
}

/* Whether ST, from the previous readings, goes on in CAP: the same run (its
 * header), a newest file that did not shrink, the same functions at the same
 * indices.  Grows ST's tables to CAP's codes.  1, 0 (read it from its start)
 * or -1 out of memory. */
static int live_same_run(struct tg_live_state *st, const struct tg_capture *cap,
			 struct tg_diag *d)
{
	const unsigned char *h = cap->segs[0].map + 8;
	size_t n = cap->n_codes;

	if (st->started) {
		if (memcmp(st->header, h, sizeof(st->header)) || cap->seg_last < st->seg_last ||
		    (cap->seg_last == st->seg_last && cap->size < st->size_last) ||
		    n < st->n_codes)
			return 0;
		for (size_t i = 0; i < st->n_codes; i++)
			if (st->fp[i] != live_code_fp(&cap->codes[i]))
				return 0;
	}
	if (n > st->n_codes) {
		int64_t *net = realloc(st->net, n * sizeof(*net));
		unsigned long *calls;
		uint64_t *fp;

		if (net)
			st->net = net;
		calls = net ? realloc(st->calls, n * sizeof(*calls)) : NULL;
		if (calls)
			st->calls = calls;
		fp = calls ? realloc(st->fp, n * sizeof(*fp)) : NULL;
		if (!fp)
			return tg_error(d, "out of memory");
		st->fp = fp;
		for (size_t i = st->n_codes; i < n; i++) {
			st->net[i] = 0;
			st->calls[i] = 0;
			st->fp[i] = live_code_fp(&cap->codes[i]);
		}
		st->n_codes = n;
	}
	memcpy(st->header, h, sizeof(st->header));
	st->seg_last = cap->seg_last;
	st->size_last = cap->size;
	if (!st->started)
		st->last_us = cap->start_us;
	st->started = 1;
	return 1;
}

/* Decodes into ST what CAP gained since ST's marks: every thread's stream
 * from where it stopped (a thread new to the readings from its start), then
 * the process samples.  1, 0 when a stream cannot go on (the caller empties ST
 * and reads again), or -1 with d->msg. */
static int live_decode(struct tg_live_state *st, const struct tg_capture *cap,
		       struct tg_diag *d)
{
	struct live_stream *streams = NULL;
	struct tg_capcur c;
	size_t n = 0;
	int rc;

	if ((rc = live_same_run(st, cap, d)) <= 0)
		return rc;
	if (cap->n_threads && !(streams = calloc(cap->n_threads, sizeof(*streams))))
		return tg_error(d, "out of memory");
	/* the streams of threads still in the capture move to its order; those of
	 * threads gone with their dropped segments are let go below */
	for (size_t i = 0; i < st->n_streams; i++) {
		uint32_t ix = tg_cap_idmap_get(&cap->stream_ids, st->streams[i].stream);

		if (ix && !streams[ix - 1].stream) {
			streams[ix - 1] = st->streams[i];
			memset(&st->streams[i], 0, sizeof(st->streams[i]));
		}
	}
	for (size_t i = 0; i < st->n_streams; i++)
		live_stream_release(&st->streams[i]);
	free(st->streams);
	st->streams = streams;
	st->n_streams = cap->n_threads;
	for (n = 0; n < cap->n_threads; n++) {
		const struct tg_cap_thread *t = &cap->threads[n];
		struct live_stream *s = &streams[n];

		if (!s->stream) {
			if (live_stream_start(s, t, d) < 0)
				goto fail;
			tg_capcur_init(&c, cap, t);
		} else if ((rc = tg_capcur_resume(&c, cap, t, &s->mark, d)) <= 0) {
			tg_capcur_release(&c);
			if (rc == 0)
				return 0;
			goto fail;
		}
		rc = live_thread(&c, cap, s, st->net, st->calls, &st->last_us, d);
		if (rc == 0)
			rc = tg_capcur_mark_take(&c, &s->mark, d);
		tg_capcur_release(&c);
		if (rc < 0)
			goto fail;
	}
	if (cap->process.n || st->process_read) {
		struct tg_cap_rec_data r;

		if (st->process_read) {
			rc = tg_capcur_resume(&c, cap, NULL, &st->process, d);
		} else {
			tg_capcur_init(&c, cap, NULL);
			rc = 1;
		}
		if (rc > 0) {
			while ((rc = tg_capcur_next(&c, &r, d)) == 1) {
				st->process_bytes = r.value;
				st->samples_seen = 1;
				if (r.t_us > st->last_us)
					st->last_us = r.t_us;
			}
			if (rc == 0)
				rc = tg_capcur_mark_take(&c, &st->process, d) < 0 ? -1 : 1;
			st->process_read = rc > 0;
		}
		tg_capcur_release(&c);
		if (rc <= 0)
			return rc;
	}
	return 1;
fail:
	return -1;
}

int tg_live_read(struct tg_live *lv, const char *path, struct tg_diag *d)
{
	struct tg_capture cap;
	struct tg_live_state *st = lv->state;
	struct tg_live_thread *threads = NULL;
	const struct live_stream *focused = NULL;
	int ret = -1, rc;

	if (tg_capture_open(&cap, path, d) < 0)
		return -1;
	if (!st) {
		if (!(st = calloc(1, sizeof(*st)))) {
			tg_error(d, "out of memory");
			goto close_cap;
		}
		live_state_clear(st);
		lv->state = st;
	}
	/* what cannot go on from the previous readings (another run, a file
	 * replaced or cut, records dropped unread) is read from its start */
	if ((rc = live_decode(st, &cap, d)) == 0) {
		live_state_clear(st);
		lv->restarts++;
		rc = live_decode(st, &cap, d);
		if (rc == 0)
			rc = tg_error(d, "'%s': the capture changed while it was read", path);
	}
	if (rc < 0)
		goto fail;
	if (cap.n_threads && !(threads = calloc(cap.n_threads, sizeof(*threads)))) {
		tg_error(d, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < cap.n_threads; i++) {
		const struct live_stream *s = &st->streams[i];
		const struct tg_live_thread *prev = live_prev(lv, s->stream);

		threads[i].stream = s->stream;
		threads[i].ended = cap.has_end;
		threads[i].now = s->now;
		threads[i].peak = s->peak;
		threads[i].largest = s->largest;
		threads[i].returns = s->returns;
		threads[i].change = prev ? s->now - prev->now : 0;
		if (!(threads[i].name = strdup(cap.threads[i].name))) {
			tg_error(d, "out of memory");
			goto fail;
		}
		if (lv->focus == s->stream)
			focused = s;
	}
	if (live_funcs(lv, &cap, st, focused, lv->focus, d) < 0)
		goto fail;
	lv->has_process = cap.process.n > 0 || st->samples_seen;
	lv->process_bytes = st->process_bytes;
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
	lv->last_us = st->last_us;
	lv->readings++;
	ret = 0;
	goto close_cap;
fail:
	/* the state may be part-way through this reading: the next one starts
	 * afresh, and LV keeps the previous figures */
	live_state_clear(st);
	if (threads)
		live_free_threads(threads, cap.n_threads);
close_cap:
	tg_capture_close(&cap);
	return ret;
}
