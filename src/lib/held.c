/*
 * held.c - each thread's held memory over time, its sum, the largest peak's
 * shares, and the memg --held graph (held.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aggfile.h"
#include "capture_read.h"
#include "fmt.h"
#include "gptitle.h"
#include "held.h"
#include "marks_plot.h"
#include "markup.h"
#include "numparse.h"
#include "ptfile.h"
#include "recsrc.h"
#include "runinfo.h"
#include "thin.h"
#include "tg_capture.h"

/* The held memory of the calls open in a thread, by depth: what the thread held
 * when each was called (as known then).  A depth never set reads as dflt: the
 * thread's level where its records begin, for the calls open there that the
 * dumps carry no memory of (their count may be of any size, so they get no
 * slot of their own). */
struct held_bases {
	int64_t *v;
	size_t cap;
	int64_t dflt;
};

static int held_base_set(struct held_bases *b, size_t depth, int64_t v, struct tg_diag *d)
{
	if (depth >= b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		int64_t *nv;

		while (cap <= depth) {
			if (cap > SIZE_MAX / 2 / sizeof(*nv))
				return tg_error(d, "out of memory");
			cap *= 2;
		}
		if (!(nv = realloc(b->v, cap * sizeof(*nv))))
			return tg_error(d, "out of memory");
		for (size_t k = b->cap; k < cap; k++)
			nv[k] = b->dflt;
		b->v = nv;
		b->cap = cap;
	}
	b->v[depth] = v;
	return 0;
}

static int64_t held_base_get(const struct held_bases *b, size_t depth)
{
	return depth < b->cap ? b->v[depth] : b->dflt;
}

/*
 * Follows one step: emits it when the level changed (or is the first one).
 * A thread whose records begin inside a capture's kept segments (a size limit)
 * starts at `from`, the kept range's start, at what it held then: its level
 * where its records begin (pend) plus the steps of its records older than
 * `from` (a chunk of the kept segments can hold them), which are not drawn.
 * Every thread known there starts at the same moment, so their sum does not
 * climb while each one's first return comes.
 */
struct held_emit {
	tg_held_step_fn step;
	void *ctx;
	int started;
	int64_t last;
	int has_from;               /* the curve starts at from */
	double from_x;
	int64_t from_us;            /* from, Unix microseconds */
	int64_t pend;               /* the level at from, until it is emitted */
};

/* xs NULL: the step's time is us (a capture's, or from), its text not made */
static int held_emit_call(struct held_emit *e, double x, const char *xs, size_t xlen,
			  int64_t us, int64_t v, struct tg_diag *d)
{
	e->started = 1;
	e->last = v;
	if (e->step(e->ctx, x, xs, xlen, us, v))
		return d->msg[0] ? -1 : tg_error(d, "out of memory");
	return 0;
}

static int held_emit(struct held_emit *e, double x, const char *xs, size_t xlen, int64_t us,
		     int64_t v, struct tg_diag *d)
{
	if (e->has_from && !e->started) {
		if (x <= e->from_x) {  /* before the kept range: part of its first level */
			e->pend = v;
			return 0;
		}
		if (held_emit_call(e, e->from_x, NULL, 0, e->from_us, e->pend, d) < 0)
			return -1;
	}
	if (e->started && v == e->last)
		return 0;
	return held_emit_call(e, x, xs, xlen, us, v, d);
}

/* The end of a thread's records: a curve starting at `from` that no later step
 * began yet starts now (a thread with no record after it still holds memory). */
static int held_emit_finish(struct held_emit *e, struct tg_diag *d)
{
	if (e->has_from && !e->started)
		return held_emit_call(e, e->from_x, NULL, 0, e->from_us, e->pend, d);
	return 0;
}

/* Starts e's curve at from_us (Unix microseconds) at level v. */
static void held_emit_from(struct held_emit *e, int64_t from_us, int64_t v)
{
	e->has_from = 1;
	e->from_us = from_us;
	e->from_x = tg_cap_time_value(from_us);
	e->pend = v;
}

/* The error of a held level beyond int64: only dumps made up or damaged reach
 * it, each DELTA being at most TG_DELTA_MAX.  Returns -1. */
static int held_overflow(struct tg_diag *d, const char *path, unsigned long number)
{
	return tg_error(d, "'%s': held memory beyond 2^63 bytes at line %lu (damaged dumps?)",
			path, number);
}

/* A capture's thread: its CALLs give the nesting. */
static int held_read_capture(const struct tg_dumpfile *df, struct held_emit *e,
			     struct tg_diag *d)
{
	const struct tg_cap_thread *t = df->cap_thread;
	struct held_bases b = { 0 };
	struct tg_capcur c;
	struct tg_cap_rec_data r;
	int64_t v = t->has_state ? t->state.mem : 0, below = 0;
	int got, ret = -1;

	if (!(df->cap->flags & TG_CAP_F_TIME))
		return tg_error(d, "held memory needs timestamps: '%s' has none", df->path);
	tg_capcur_init(&c, df->cap, t);
	/* a thread carried into the segments kept starts where they do */
	if (t->has_state && df->cap->seg_first > 1)
		held_emit_from(e, df->cap->kept_from_us, v);
	/* what the thread held when each open call was made: the head's memory at
	 * that call's depth and the depths below it (all of it when not split) */
	for (size_t k = 0; k < c.depth; k++) {
		if (k < t->state.n_lvl)
			below += t->state.lvl[k];
		if (held_base_set(&b, k, t->state.n_lvl ? below : v, d) < 0)
			goto release;
	}
	while ((got = tg_capcur_next_of(&c, &r, TG_CAP_WANT_CALL | TG_CAP_WANT_RETURN
					 | TG_CAP_WANT_LEVEL, d)) > 0) {
		if (r.type == TG_CAP_REC_LEVEL) {
			/* the thread's memory here, and when each open call
			 * was made (docs/formats.md): what the returns missed,
			 * the open calls' own frees and allocations, is put
			 * right from here on */
			for (size_t k = 0; k < c.n_starts; k++)  /* the open calls' */
				if (held_base_set(&b, k, c.starts[k], d) < 0)
					goto release;
			if (r.value != v) {
				v = r.value;
				if (e->started && held_emit(e, tg_cap_time_value(r.t_us), NULL,
							    0, r.t_us, v, d) < 0)
					goto release;
			}
			continue;
		}
		if (r.type == TG_CAP_REC_CALL) {
			if (held_base_set(&b, r.depth, v, d) < 0)
				goto release;
			continue;
		}
		if (r.type != TG_CAP_REC_RETURN)
			continue;
		/* the curve starts at the first return (or at the kept range's
		 * start), as from the exported .mem */
		if (!e->started &&
		    held_emit(e, tg_cap_time_value(r.t_us), NULL, 0, r.t_us, v, d) < 0)
			goto release;
		/* c.depth: the call's own depth */
		if (__builtin_add_overflow(held_base_get(&b, c.depth), r.value, &v)) {
			held_overflow(d, df->path, r.number);
			goto release;
		}
		if (held_emit(e, tg_cap_time_value(r.t_us), NULL, 0, r.t_us, v, d) < 0)
			goto release;
	}
	if (got < 0 || held_emit_finish(e, d) < 0)
		goto release;
	ret = 0;
release:
	tg_capcur_release(&c);
	free(b.v);
	return ret;
}

/* The .stack file beside a text .mem (NAME.mem[.gz] -> NAME.stack[.gz]), or NULL. */
static char *held_stack_path(const char *mem)
{
	size_t len = strlen(mem);
	const char *gz = "";
	char *p;

	if (len > 3 && strcmp(mem + len - 3, ".gz") == 0) {
		gz = ".gz";
		len -= 3;
	}
	if (len < 4 || strncmp(mem + len - 4, ".mem", 4) != 0)
		return NULL;
	if (asprintf(&p, "%.*s.stack%s", (int)(len - 4), mem, gz) < 0)
		return NULL;
	return p;
}

#define HELD_SAMPLED_SITE "<thread memory>:0:sampled"

/*
 * Where a text .mem's held memory begins, from the runinfo.json beside it: an
 * export of a capture's kept segments gives, for a thread carried into them,
 * the calls open where its files begin (open_at_start), what it held there by
 * depth (held_at_start) and where the kept range begins (kept_from).  Sets the
 * bases of those calls, *open and *v, and starts e's curve at kept_from.
 * Returns 0 (also when the files begin with the thread: nothing set), 1 with
 * why set when the thread's memory there is not known (an export from before
 * held_at_start was written, or one that does not add up), or -1 (d->msg).
 */
static int held_text_start(const char *mem_path, struct held_bases *b, size_t *open,
			   int64_t *v, struct held_emit *e, char *why, struct tg_diag *d)
{
	const char *slash = strrchr(mem_path, '/'), *base = slash ? slash + 1 : mem_path;
	size_t blen = strlen(base), slen = strlen(".mem");
	struct tg_run_threads info;
	const struct tg_run_thread *t;
	char *dir = NULL, *name = NULL;
	int64_t sum = 0;
	int ret = -1;

	tg_run_threads_init(&info);
	if (blen <= slen || strcmp(base + blen - slen, ".mem") != 0)
		return 0;  /* .mem.gz: a run's own dumps, never an export */
	if (!(dir = slash ? strndup(mem_path, slash > mem_path ? (size_t)(slash - mem_path) : 1)
			  : strdup(".")) || !(name = strndup(base, blen - slen))) {
		tg_error(d, "out of memory");
		goto out;
	}
	if (tg_run_threads_read(&info, dir, d) < 0)
		goto out;
	ret = 0;
	if (!(t = tg_run_threads_find(&info, name)) || t->open_at_start < 0)
		goto out;  /* its files begin with the thread */
	if (!t->has_held && !info.kept_from_us && t->open_at_start >= 0) {
		snprintf(why, TG_HELD_WHY_MAX, "its runinfo.json gives the calls open where its "
			 "files begin but not the memory it held there (an export from an older "
			 "threadgraph: export the capture again)");
		ret = 1;
		goto out;
	}
	if (!t->has_held) {
		if (t->open_at_start > 0) {
			snprintf(why, TG_HELD_WHY_MAX, "its runinfo.json gives %lld call%s open "
				 "where its files begin but not the memory it held there (damaged?)",
				 t->open_at_start, t->open_at_start == 1 ? "" : "s");
			ret = 1;
		}
		goto out;  /* a thread begun in the kept range: from 0, as a run's own */
	}
	if (!info.kept_from_us || !t->n_held ||
	    t->n_held > (unsigned long long)t->open_at_start + 1) {
		snprintf(why, TG_HELD_WHY_MAX, "its runinfo.json's held_at_start does not fit "
			 "its open_at_start and kept_from (damaged?)");
		ret = 1;
		goto out;
	}
	/* each open call's base: what the depths up to its own hold (the head's
	 * split, as held_read_capture takes it); the deeper ones, all of it */
	for (size_t k = 0; k < t->n_held; k++) {
		if (__builtin_add_overflow(sum, (int64_t)t->held[k], &sum)) {
			snprintf(why, TG_HELD_WHY_MAX, "its runinfo.json's held_at_start sums beyond "
				 "2^63 bytes (damaged?)");
			ret = 1;
			goto out;
		}
		if (k < (size_t)t->open_at_start && held_base_set(b, k, sum, d) < 0) {
			ret = -1;
			goto out;
		}
	}
	b->dflt = sum;
	*v = sum;
	*open = (size_t)t->open_at_start;
	held_emit_from(e, info.kept_from_us, sum);
out:
	tg_run_threads_release(&info);
	free(dir);
	free(name);
	return ret;
}

/*
 * A text thread: its .mem returns paired with the calls of its .stack.  The
 * returns come in post-order: the .stack's next call, at depth D, opens once
 * the calls at depth D and deeper have closed, so before each return the next
 * calls open while their depth is the number of calls open.
 */
static int held_read_text(const struct tg_dumpfile *df, struct held_emit *e, char *why,
			  struct tg_diag *d)
{
	struct tg_dumpfile sdf = { 0 };
	struct tg_src ms, ss;
	struct tg_memrec m;
	struct tg_stackrec sr;
	struct held_bases b = { 0 };
	char *spath = NULL;
	size_t open = 0;
	unsigned long extra = 0, deeper = 0;  /* returns, calls that do not pair */
	int64_t v = 0;
	int got, sgot = 0, sampled = -1, have_stack = 0, ret = -1;

	if (df->agg_thread) {
		/* An aggregate run's curve: each bucket's lowest and highest reading of
		 * the thread's memory, which is what it holds only when that memory is
		 * the thread's own (memory="thread"). */
		if (strcmp(df->agg->memory, "thread") != 0) {
			snprintf(why, TG_HELD_WHY_MAX, "an aggregate run's curves are the "
				 "process's memory (memory=\"process\" or \"rss\"), not what each "
				 "thread holds");
			return 1;
		}
		sampled = 1;
	}
	if (tg_src_open(&ms, df, 1, 0, d) < 0)
		return -1;
	while ((got = tg_src_next_mem(&ms, &m, d)) > 0) {
		if (sampled < 0) {
			sampled = m.site.len == strlen(HELD_SAMPLED_SITE) &&
				  memcmp(m.site.s, HELD_SAMPLED_SITE, m.site.len) == 0;
			if (!sampled) {
				spath = held_stack_path(df->path);
				if (!spath || access(spath, R_OK) != 0) {
					snprintf(why, TG_HELD_WHY_MAX, "no .stack file beside it: held "
						 "memory needs the calls' nesting (record with stacks, or "
						 "the binary capture)");
					ret = 1;
					goto release;
				}
				if ((ret = held_text_start(df->path, &b, &open, &v, e, why, d)) != 0)
					goto release;
				ret = -1;
				if (tg_dumpfile_init(&sdf, spath) < 0) {
					tg_error(d, "out of memory");
					goto release;
				}
				if (tg_src_open(&ss, &sdf, 1, 0, d) < 0)
					goto release;
				have_stack = 1;
				sgot = tg_src_next_stack(&ss, &sr, d);
				if (sgot < 0)
					goto release;
			}
			if (held_emit(e, m.time.v, m.time.text.s, m.time.text.len, 0, v, d) < 0)
				goto release;
		}
		if (sampled) {
			v = m.delta;  /* a reading of the thread's memory */
		} else {
			while (sgot > 0 && sr.depth >= open) {
				if (sr.depth > open) {  /* deeper than the calls open: the
							 * dumps do not pair */
					deeper++;
					open = sr.depth;
				}
				if (held_base_set(&b, open, v, d) < 0)
					goto release;
				open++;
				if ((sgot = tg_src_next_stack(&ss, &sr, d)) < 0)
					goto release;
			}
			if (!open) {  /* a return after the .stack's last call closed */
				extra++;
				continue;
			}
			open--;
			if (__builtin_add_overflow(held_base_get(&b, open), m.delta, &v)) {
				held_overflow(d, df->path, ms.lineno);
				goto release;
			}
		}
		if (held_emit(e, m.time.v, m.time.text.s, m.time.text.len, 0, v, d) < 0)
			goto release;
	}
	if (got < 0)
		goto release;
	/* No record at all: a thread carried into the kept segments of a capture
	 * that returned from nothing there still holds what it held where they
	 * begin, as held_read_capture draws it (its .stack is not needed). */
	if (sampled < 0) {
		if ((ret = held_text_start(df->path, &b, &open, &v, e, why, d)) != 0)
			goto release;
		ret = -1;
	}
	if (held_emit_finish(e, d) < 0)
		goto release;
	ret = 0;
	/* A curve from dumps that do not pair would be wrong from the first
	 * mismatch on, without a sign of it: the thread is left out instead. */
	if (extra || deeper) {
		snprintf(why, TG_HELD_WHY_MAX, "its .stack does not pair with it (%s): ",
			 df->run_dropped ? "the recorder dropped records of the run" :
			 "damaged dumps?");
		if (extra)
			snprintf(why + strlen(why), TG_HELD_WHY_MAX - strlen(why),
				 "%lu return record%s left over after the last call%s", extra,
				 extra == 1 ? "" : "s", deeper ? ", " : "");
		if (deeper)
			snprintf(why + strlen(why), TG_HELD_WHY_MAX - strlen(why),
				 "%lu call%s nested deeper than the calls open", deeper,
				 deeper == 1 ? "" : "s");
		ret = 1;
	}
release:
	if (have_stack)
		tg_src_release(&ss);
	if (sdf.thread)
		tg_dumpfile_release(&sdf);
	tg_src_release(&ms);
	free(spath);
	free(b.v);
	return ret;
}

int tg_held_read(const struct tg_dumpfile *df, tg_held_step_fn step, void *ctx,
		 char *why, struct tg_diag *d)
{
	struct held_emit e = { step, ctx, 0, 0 };

	why[0] = '\0';
	if (df->cap)
		return held_read_capture(df, &e, d);
	return held_read_text(df, &e, why, d);
}

/* --- the peak and its shares ---------------------------------------------- */

void tg_held_peak_release(struct tg_held_peak *p)
{
	free(p->level);
	free(p->peak);
	free(p->end);
	free(p->has);
	memset(p, 0, sizeof(*p));
}

static int held_peak_init(struct tg_held_peak *p, size_t n, struct tg_diag *d)
{
	memset(p, 0, sizeof(*p));
	p->n = n;
	p->level = calloc(n ? n : 1, sizeof(*p->level));
	p->peak = calloc(n ? n : 1, sizeof(*p->peak));
	p->end = calloc(n ? n : 1, sizeof(*p->end));
	p->has = calloc(n ? n : 1, 1);
	if (!p->level || !p->peak || !p->end || !p->has) {
		tg_held_peak_release(p);
		return tg_error(d, "out of memory");
	}
	return 0;
}

/* Order of the share table: largest level first, then by file order. */
static const struct tg_held_peak *held_sort_peak;
static int held_share_cmp(const void *a, const void *b)
{
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	int64_t x = held_sort_peak->level[i], y = held_sort_peak->level[j];

	if (x != y)
		return x < y ? 1 : -1;
	return i < j ? -1 : i > j;
}

int tg_held_peak_write(FILE *f, const struct tg_held_peak *p, const struct tg_dumpfile *files)
{
	size_t *ix, k = 0;
	char size[32];

	if (!p->found)
		return fputs("no thread held memory: no peak\n", f) == EOF ? EOF : 0;
	tg_fmt_bytes_short(size, p->total);  /* the unit every size printed has */
	fprintf(f, "largest peak of all threads' held memory: %s (%lld bytes) at %s\n", size,
		(long long)p->total, p->xs);
	fputs("thread\theld_bytes\tshare\n", f);
	if (!(ix = malloc((p->n ? p->n : 1) * sizeof(*ix))))
		return EOF;
	for (size_t i = 0; i < p->n; i++)
		if (p->has[i])
			ix[k++] = i;
	held_sort_peak = p;  /* qsort has no context argument; set just before */
	qsort(ix, k, sizeof(*ix), held_share_cmp);
	for (size_t j = 0; j < k; j++) {
		size_t i = ix[j];
		fprintf(f, "%s\t%lld\t%.1f%%\n", files[i].thread, (long long)p->level[i],
			p->total ? 100.0 * (double)p->level[i] / (double)p->total : 0.0);
	}
	free(ix);
	return ferror(f) ? EOF : 0;
}

/* --- the graph ------------------------------------------------------------- */

/*
 * A thread's series is kept aside in binary (ptfile.h) while the threads are
 * read, then read back twice: for the sum of all threads and the peak, then for
 * its own data file, thinned as it is written.  Its x is what strtod gives for
 * its TIME text (numparse.h), as when the series was text read back: the
 * merge's order and the thinning's slices stay those of that text.
 */
struct held_series {
	struct tg_ptfile pf;
	struct tg_diag *d;
	int64_t peak, low, last;
	double x_last;          /* the last step's time, as the dumps give it */
	double x_first;         /* the first step's x (its text's value) */
	unsigned long points;
};

static int held_series_step(void *ctx, double x, const char *xs, size_t xlen, int64_t us,
			    int64_t v)
{
	struct held_series *s = ctx;
	size_t used;
	double xv;

	if (!xs) {
		if (tg_ptfile_put_us(&s->pf, us, v, &xv, s->d) < 0)
			return -1;
	} else {
		xv = tg_parse_double(xs, xlen, &used);
		if (tg_ptfile_put(&s->pf, xv, v, xs, xlen, s->d) < 0)
			return -1;
	}
	if (!s->points)
		s->x_first = xv;
	if (!s->points || v > s->peak)
		s->peak = v;
	if (!s->points || v < s->low)
		s->low = v;
	s->last = v;
	s->x_last = x;
	s->points++;
	return 0;
}

/* The tg_thin_write_fn of the data files: "TIME BYTES\n" to the FILE * ctx. */
static void held_line_write(void *ctx, const void *data, size_t size)
{
	const struct tg_pt_line *l = data;
	char buf[TG_PT_TEXT_MAX + 32], tmp[24];
	uint64_t u = l->v < 0 ? -(uint64_t)l->v : (uint64_t)l->v;
	size_t n = 0, len;

	(void)size;
	len = tg_pt_line_time(l, buf);
	buf[len++] = ' ';
	do {
		tmp[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (l->v < 0)
		buf[len++] = '-';
	while (n)
		buf[len++] = tmp[--n];
	buf[len++] = '\n';
	fwrite(buf, 1, len, ctx);
}

/* One point of a data file, through t: at the time of p, level v. */
static void held_put(struct tg_thin *t, const struct tg_pt *p, int64_t v)
{
	struct tg_pt_line l;
	size_t n = tg_pt_line_of(&l, p, v);

	tg_thin_point(t, p->x, (double)v, &l, n);
}

/* The last point of a data file: its level carried on to the graph's end. */
static void held_put_end(struct tg_thin *t, const char *end, int64_t v)
{
	struct tg_pt p;
	size_t used;

	p.has_us = 0;
	p.us = 0;
	p.len = strlen(end);
	memcpy(p.xs, end, p.len + 1);
	p.x = tg_parse_double(end, p.len, &used);
	held_put(t, &p, v);
}

/* One input of the merge: a thread's series. */
struct held_in {
	struct tg_ptfile *pf;
	size_t file;          /* index in files[] */
	struct tg_pt pt;      /* the next point, when ok */
	int ok;
};

static int held_in_next(struct held_in *in, struct tg_diag *d)
{
	int got = tg_ptfile_get(in->pf, &in->pt, d);

	in->ok = got > 0;
	return got < 0 ? -1 : 0;
}

/* Heap of inputs by (x, file). */
static int held_in_less(const struct held_in *a, const struct held_in *b)
{
	return a->pt.x < b->pt.x || (a->pt.x == b->pt.x && a->file < b->file);
}

static void held_heap_down(struct held_in **h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		struct held_in *t;

		if (l < n && held_in_less(h[l], h[m]))
			m = l;
		if (r < n && held_in_less(h[r], h[m]))
			m = r;
		if (m == i)
			return;
		t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

/* How the data files are thinned: columns 0 keeps every point. */
struct held_thin {
	double x0, x1;
	size_t columns;
	const char *end;      /* the graph's end (TIME text): each file's last point */
};

/*
 * Merges the thread series in time: writes the sum of all threads
 * (held-all.dat) and of the threads not shown (held-others.dat, when any),
 * thinned, and finds the largest value of the sum.  Changes at one time are
 * applied together.
 */
static int held_merge(struct tg_plot_files *pf, struct held_series *hs, size_t n,
		      const unsigned char *series, const unsigned char *show,
		      const struct held_thin *th, struct tg_held_peak *p, int *has_others,
		      struct tg_diag *d)
{
	struct held_in *in = calloc(n ? n : 1, sizeof(*in));
	struct held_in **h = calloc(n ? n : 1, sizeof(*h));
	int64_t *level = calloc(n ? n : 1, sizeof(*level));
	struct tg_aout all = { 0 }, oth = { 0 };
	struct tg_thin all_t, oth_t;
	size_t nh = 0;
	int64_t sum = 0, others = 0;
	int ret = -1, any = 0;

	*has_others = 0;
	if (!in || !h || !level) {
		tg_error(d, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (!series[i])
			continue;
		*has_others |= !show[i];
		in[i].pf = &hs[i].pf;
		in[i].file = i;
		if (tg_ptfile_rewind(in[i].pf, d) < 0 || held_in_next(&in[i], d) < 0)
			goto out;
		if (in[i].ok)
			h[nh++] = &in[i];
	}
	for (size_t i = nh / 2; i-- > 0;)
		held_heap_down(h, nh, i);
	if (tg_plot_files_out(pf, &all, "held-all.dat", d) < 0)
		goto out;
	if (*has_others && tg_plot_files_out(pf, &oth, "held-others.dat", d) < 0)
		goto out;
	tg_thin_init(&all_t, held_line_write, all.f, th->x0, th->x1, th->columns);
	if (*has_others)
		tg_thin_init(&oth_t, held_line_write, oth.f, th->x0, th->x1, th->columns);
	while (nh) {
		struct tg_pt at = h[0]->pt;  /* the time of every change at it */
		char xs[TG_PT_TEXT_MAX + 1];

		while (nh && h[0]->pt.x == at.x) {
			struct held_in *t = h[0];
			size_t i = t->file;
			int64_t step;

			/* each level is in int64, their sum may not be: an error, as in
			 * held_overflow, rather than a wrapped curve */
			if (__builtin_sub_overflow(t->pt.v, level[i], &step) ||
			    __builtin_add_overflow(sum, step, &sum) ||
			    (!show[i] && __builtin_add_overflow(others, step, &others))) {
				xs[tg_pt_text(&at, xs)] = '\0';
				tg_error(d, "the threads' held memory sums beyond 2^63 bytes at %s "
					 "(damaged dumps?)", xs);
				goto out;
			}
			level[i] = t->pt.v;
			if (held_in_next(t, d) < 0)
				goto out;
			if (!t->ok)
				h[0] = h[--nh];
			held_heap_down(h, nh, 0);
		}
		held_put(&all_t, &at, sum);
		if (*has_others)
			held_put(&oth_t, &at, others);
		if (!any || sum > p->total) {
			size_t len = tg_pt_text(&at, xs);

			any = 1;
			p->total = sum;
			p->x = at.x;
			/* as a text read back with "%63s" took it */
			if (len >= sizeof(p->xs))
				len = sizeof(p->xs) - 1;
			memcpy(p->xs, xs, len);
			p->xs[len] = '\0';
		}
	}
	p->found = any;
	held_put_end(&all_t, th->end, sum);
	tg_thin_finish(&all_t);
	if (*has_others) {
		held_put_end(&oth_t, th->end, others);
		tg_thin_finish(&oth_t);
	}
	if (tg_aout_commit(&all, d) < 0 || (*has_others && tg_aout_commit(&oth, d) < 0))
		goto out;
	ret = 0;
out:
	if (all.f)
		tg_aout_abort(&all);
	else
		tg_aout_release(&all);
	if (oth.f)
		tg_aout_abort(&oth);
	else
		tg_aout_release(&oth);
	free(in);
	free(h);
	free(level);
	return ret;
}

/*
 * Writes thread i's data file NAME from its series s, thinned by th when it has
 * more points than the graph shows (thin), its last level carried on to th->end
 * so that its last step reaches the graph's end (end NULL: the steps alone), and
 * sets *level to its level at the peak (its last point at or before p->x).
 */
static int held_write_series(struct tg_plot_files *pf, const char *name,
			     struct held_series *s, const struct tg_held_peak *p,
			     const struct held_thin *th, int thin, const char *end,
			     int64_t *level, struct tg_diag *d)
{
	struct tg_aout out = { 0 };
	struct tg_thin t;
	struct tg_pt pt;
	int64_t last = 0;
	int got;

	*level = 0;
	if (tg_ptfile_rewind(&s->pf, d) < 0 || tg_plot_files_out(pf, &out, name, d) < 0)
		return -1;
	tg_thin_init(&t, held_line_write, out.f, th->x0, th->x1, thin ? th->columns : 0);
	while ((got = tg_ptfile_get(&s->pf, &pt, d)) > 0) {
		if (p && p->found && pt.x <= p->x)
			*level = pt.v;
		last = pt.v;
		held_put(&t, &pt, pt.v);
	}
	if (got == 0 && end)
		held_put_end(&t, end, last);
	tg_thin_finish(&t);
	if (got < 0 || tg_aout_commit(&out, d) < 0) {
		tg_aout_abort(&out);
		return -1;
	}
	tg_aout_release(&out);
	return 0;
}

/* titles[i]: the key title of file i's series (gptitle.h) */
static void held_script(FILE *f, const struct tg_memg_opts *o, size_t n,
			const unsigned char *series, const unsigned char *show,
			char *const *titles, size_t shown, size_t nseries, int has_others,
			int process,
			const struct tg_timeaxis *ta, const struct tg_held_peak *p,
			const struct tg_marks *m)
{
	struct tg_timerange range = { o->has_from, o->has_to, o->from, o->to };
	const char *sep = "plot ";
	size_t k = 0;

	fputs("set title 'Memory held by each thread: allocated by it and not freed by it, "
	      "MB'\n", f);
	fputs("set key outside right top\nset grid\nset ylabel 'Held (MB)'\n", f);
	if (shown < nseries)
		fprintf(f, "set key title 'top %zu of %zu threads by peak'\n", shown, nseries);
	if (process)
		fputs("set ytics nomirror\nset y2tics\nset y2label 'Process resident size (MB)'\n"
		      "set y2range [0:*]\n", f);
	tg_timeaxis_write(f, ta, &range, "Event");
	tg_marks_plot_objects(f, m, ta, o->has_from ? o->from : -INFINITY,
			      o->has_to ? o->to : INFINITY);
	if (has_others) {
		fprintf(f, "%s'held-others.dat' using (tx($1)):($2/1048576) with steps lt %d "
			"lw 2 title '%zu other thread%s (sum)'", sep, TG_GP_LT_OTHER,
			nseries - shown, nseries - shown == 1 ? "" : "s");
		sep = ", \\\n     ";
	}
	for (size_t i = 0; i < n; i++) {
		if (!series[i] || !show[i])
			continue;
		fprintf(f, "%s'held-%zu.dat' using (tx($1)):($2/1048576) with steps lt %zu lw 2 "
			"title ", sep, i, k++ % TG_GP_STYLES + 1);
		tg_gp_quote(f, titles[i], strlen(titles[i]));
		sep = ", \\\n     ";
	}
	fprintf(f, "%s'held-all.dat' using (tx($1)):($2/1048576) with steps lt %d lw 1 dt 2 "
		"title 'all threads (sum)'", sep, TG_GP_LT_PROCESS);
	if (process)
		fprintf(f, ", \\\n     'held-process.dat' using (tx($1)):($2/1024) axes x1y2 "
			"with lines lt %d lw 1 dt 3 title 'Process RSS (MB, right axis)'",
			TG_GP_LT_PROCESS);
	if (p->found)
		fputs(", \\\n     'held-peak.dat' using (tx($1)):($2/1048576) with points pt 7 "
		      "ps 1 lc rgb '#000000' notitle, \\\n     'held-peak.dat' using "
		      "(tx($1)):($2/1048576):3 with labels tc rgb '#000000' offset char 0,1 "
		      "notitle", f);
	sep = ", \\\n     ";
	tg_marks_plot_keys(f, m, &sep);
	fputs("\n", f);
}

int tg_held_run(const struct tg_memg_opts *o, const struct tg_plot_opts *po,
		const struct tg_dumpfile *files, size_t n, const struct tg_memg_report *r,
		struct tg_held_peak *peak_out, struct tg_diag *d)
{
	struct tg_plot_files pf = TG_PLOT_FILES_INIT;
	struct tg_aout dat = { 0 }, script = { 0 }, legend = { 0 };
	struct tg_held_peak p;
	struct tg_marks marks;
	struct tg_timeaxis ta;
	struct held_series *hs = calloc(n ? n : 1, sizeof(*hs));
	unsigned char *series = calloc(n ? n : 1, 1), *show = calloc(n ? n : 1, 1);
	double *act = calloc(n ? n : 1, sizeof(*act));
	size_t top = o->top_threads ? (size_t)o->top_threads : TG_MEMG_TOP_THREADS;
	size_t nseries = 0, shown = 0;
	char **titles = NULL;
	int ret = -1, has_others = 0, process = 0, have_end = 0;
	double t_end = 0;
	char name[64], end[64] = "";
	struct held_thin th = { 0, 0, 0, NULL };

	memset(&p, 0, sizeof(p));
	tg_marks_init(&marks);
	tg_timeaxis_init(&ta, o->clock ? TG_TIME_CLOCK : TG_TIME_ELAPSED);
	if (o->has_origin)
		tg_timeaxis_origin(&ta, o->origin);
	if (!hs || !series || !show || !act) {
		tg_error(d, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		hs[i].pf.fd = -1;  /* not open (tg_ptfile_release) */
	if (!o->has_time) {
		tg_error(d, "held memory needs timestamped dumps (not --no_time)");
		goto out;
	}
	if (held_peak_init(&p, n, d) < 0 || tg_plot_files_open(&pf, po, "memg-held", d) < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		char why[TG_HELD_WHY_MAX];
		int rc;

		act[i] = -1;
		if (files[i].kind != TG_DUMP_MEM) {
			if (files[i].kind == TG_DUMP_STACK && r && r->skip)
				r->skip(r->ctx, &files[i], "a stack file");
			continue;
		}
		if (r && r->start)
			r->start(r->ctx, &files[i]);
		snprintf(name, sizeof(name), ".held-%zu.bin", i);
		hs[i].d = d;
		if (tg_ptfile_open(&hs[i].pf, pf.dir, name, d) < 0)
			goto out;
		rc = tg_held_read(&files[i], held_series_step, &hs[i], why, d);
		if (rc < 0)
			goto out;
		if (rc == 1 || !hs[i].points) {
			int64_t ignore;

			/* its data file holds the steps given before it was left out */
			snprintf(name, sizeof(name), "held-%zu.dat", i);
			if (held_write_series(&pf, name, &hs[i], NULL, &th, 0, NULL, &ignore,
					      d) < 0)
				goto out;
			tg_ptfile_release(&hs[i].pf);
			if (r && r->skip)
				r->skip(r->ctx, &files[i], rc == 1 ? why : "no events");
			continue;
		}
		series[i] = 1;
		nseries++;
		p.has[i] = 1;
		p.peak[i] = hs[i].peak;
		p.end[i] = hs[i].last;
		act[i] = fmax(fabs((double)hs[i].peak), fabs((double)hs[i].low));
		if (!have_end || hs[i].x_last > t_end) {
			t_end = hs[i].x_last;
			snprintf(end, sizeof(end), "%.6f", t_end);
			have_end = 1;
		}
	}
	if (!nseries) {
		tg_error(d, "no thread with held memory to plot");
		goto out;
	}
	tg_gp_pick_top(act, n, top, show);
	for (size_t i = 0; i < n; i++) {
		show[i] = series[i] && show[i];  /* act is 0, not < 0, for the others */
		shown += show[i];
	}
	for (size_t i = 0; i < n && !o->no_process; i++) {
		struct tg_memg_stats st;

		if (files[i].kind != TG_DUMP_PROCESS)
			continue;
		if (r && r->start)
			r->start(r->ctx, &files[i]);
		if (tg_plot_files_out(&pf, &dat, "held-process.dat", d) < 0)
			goto out;
		{
			struct tg_memg_opts po2 = *o;
			po2.has_rebase = 0;
			if (tg_memg_read_process(&po2, &files[i], dat.f, &st, &ta, d) < 0) {
				tg_aout_abort(&dat);
				goto out;
			}
		}
		/* its last sample holds until the threads' end, as in memg
		 * (memg.c: a run that did not end through disable()) */
		if (st.events && t_end > st.x_last) {
			char m[TG_FMT_MILLI_MAX];
			tg_fmt_milli(m, st.y_last);
			fprintf(dat.f, "%s %s\n", end, m);
		}
		if (tg_aout_commit(&dat, d) < 0) {
			tg_aout_abort(&dat);
			goto out;
		}
		tg_aout_release(&dat);
		process = st.events != 0;
		break;
	}
	/* the time axis: every thread's first and last step */
	for (size_t i = 0; i < n; i++) {
		if (!series[i])
			continue;
		tg_timeaxis_see(&ta, hs[i].x_first);
		tg_timeaxis_see(&ta, t_end);
	}
	th.end = end;
	if (ta.seen && ta.t1 > ta.t0) {  /* as memg: a bounded graph */
		th.x0 = ta.t0;
		th.x1 = ta.t1;
		th.columns = TG_MEMG_POINTS_BUDGET / 4 / (nseries + 2);
		if (th.columns > (size_t)po->width)
			th.columns = (size_t)po->width;
		if (th.columns < 16)
			th.columns = 16;
	}
	if (held_merge(&pf, hs, n, series, show, &th, &p, &has_others, d) < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		if (!series[i])
			continue;
		snprintf(name, sizeof(name), "held-%zu.dat", i);
		if (held_write_series(&pf, name, &hs[i], &p, &th,
				      hs[i].points > 4 * th.columns, end, &p.level[i], d) < 0)
			goto out;
		tg_ptfile_release(&hs[i].pf);
	}
	if (p.found) {
		char size[32];

		if (tg_plot_files_out(&pf, &dat, "held-peak.dat", d) < 0)
			goto out;
		tg_fmt_bytes_short(size, p.total);
		fprintf(dat.f, "%s %lld \"largest peak: %s\"\n", p.xs, (long long)p.total, size);
		if (tg_aout_commit(&dat, d) < 0) {
			tg_aout_abort(&dat);
			goto out;
		}
		tg_aout_release(&dat);
	}
	if (tg_aout_open(&legend, po->dir, "memg-held.txt", d) < 0)
		goto out;
	tg_held_peak_write(legend.f, &p, files);
	if (tg_plot_files_out(&pf, &script, "memg-held.gp", d) < 0) {
		tg_aout_abort(&legend);
		goto out;
	}
	tg_gp_preamble(script.f, po, "memg-held");
	if (tg_marks_read_near(&marks, files, n, d) < 0) {
		tg_aout_abort(&script);
		tg_aout_abort(&legend);
		goto out;
	}
	if (!(titles = tg_gp_thread_titles(files, n, show))) {
		tg_error(d, "out of memory");
		tg_aout_abort(&script);
		tg_aout_abort(&legend);
		goto out;
	}
	held_script(script.f, o, n, series, show, titles, shown, nseries, has_others,
		    process, &ta, &p, &marks);
	if (r && r->plotting && tg_plot_draws(po))
		r->plotting(r->ctx);
	ret = tg_plot_finish(po, &pf, "memg-held", &script, &legend, d);
	if (ret == 0 && peak_out) {
		*peak_out = p;
		memset(&p, 0, sizeof(p));
	}
out:
	tg_plot_files_release(&pf);
	tg_held_peak_release(&p);
	tg_marks_release(&marks);
	free(titles);
	for (size_t i = 0; hs && i < n; i++)
		tg_ptfile_release(&hs[i].pf);
	free(hs);
	free(series);
	free(show);
	free(act);
	return ret;
}
