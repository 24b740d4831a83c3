/*
 * memg.c - read thread and process dumps into series and peaks; the memg graph.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fmt.h"
#include "gptitle.h"
#include "marks.h"
#include "marks_plot.h"
#include "memg.h"
#include "numparse.h"
#include "ptfile.h"
#include "recsrc.h"
#include "thin.h"

/* Where a point of a thread series is: its x (the time's value as the readers
 * compute it, or the event index) and its TIME text, or a capture's time in
 * microseconds (text made only for the points printed). */
struct memg_at {
	double x;
	int has_us;
	int64_t us;
	size_t len;
	char xs[64];        /* the text, cut at 64 bytes as the lines always were */
};

/* A thread series being written to the run's temporary series file (ptfile.h),
 * in binary: collapses runs of zero deltas. */
struct memg_series {
	struct tg_ptfile *pf; /* NULL when only peaks are wanted */
	struct tg_diag *d;
	int err;            /* a write failed (d set) */
	int in_zero;        /* the last event had a zero delta */
	int pending;        /* px holds the latest zero of the run, not yet written */
	struct memg_at px;  /* its place (its text cut at 48 bytes) */
	long long cap_milli; /* clip |y| to this (thousandths of KB); <0: no cap */
};

static long long memg_cap(long long m, long long cap)
{
	if (cap >= 0) {
		if (m > cap)
			return cap;
		if (m < -cap)
			return -cap;
	}
	return m;
}

/*
 * Points are formatted into a local buffer and handed to stdio in 64 KiB blocks:
 * a call to fwrite per point cost more than formatting it.
 */
struct memg_out {
	FILE *f;
	size_t n;
	char buf[1 << 16];
};

static void memg_out_flush(struct memg_out *o)
{
	if (o->n)
		fwrite(o->buf, 1, o->n, o->f);
	o->n = 0;
}

/* Writes "X Y\n"; x is the time text or the event index. */
static void memg_point(struct memg_out *o, const char *x, size_t xlen, long long milli)
{
	char *p;

	if (o->n + 128 > sizeof(o->buf))
		memg_out_flush(o);
	p = o->buf + o->n;
	if (xlen > 64)
		xlen = 64;
	if (xlen >= 8) {
		/* short: 8-byte moves, the last one overlapping, read only x[0..xlen)
		 * (cheaper than a memcpy call or a byte loop) */
		for (size_t i = 0; i + 8 < xlen; i += 8)
			memcpy(p + i, x + i, 8);
		memcpy(p + xlen - 8, x + xlen - 8, 8);
	} else {
		for (size_t i = 0; i < xlen; i++)
			p[i] = x[i];
	}
	p += xlen;
	*p++ = ' ';
	p += tg_fmt_milli(p, milli);
	*p++ = '\n';
	o->n = (size_t)(p - o->buf);
}

/* A point of s at AT, of value MILLI (thousandths of KB). */
static void memg_series_put(struct memg_series *s, const struct memg_at *at, long long milli)
{
	double x;

	if (s->err)
		return;
	if (at->has_us ? tg_ptfile_put_us(s->pf, at->us, milli, &x, s->d)
	    : tg_ptfile_put(s->pf, at->x, milli, at->xs, at->len, s->d))
		s->err = 1;
}

static void memg_series_add(struct memg_series *s, const struct memg_at *at, long long delta)
{
	if (!s->pf)
		return;
	if (delta == 0) {
		if (!s->in_zero) {
			memg_series_put(s, at, 0);
			s->in_zero = 1;
		} else {
			s->px = *at;
			if (s->px.len > 48)
				s->px.len = 48;
			s->pending = 1;
		}
		return;
	}
	if (s->pending)
		memg_series_put(s, &s->px, 0);
	s->pending = 0;
	s->in_zero = 0;
	memg_series_put(s, at, memg_cap(tg_bytes_to_milli_kb(delta), s->cap_milli));
}

/* Counts a plotted value (thousandths of KB) at x into st's extremes and last point. */
static void memg_stats_see(struct tg_memg_stats *st, double x, long long y)
{
	if (st->events == 1)
		st->x_first = x;
	st->x_last = x;
	st->y_last = y;
	if (y > st->hi[0]) {
		st->hi[1] = st->hi[0];
		st->hi[0] = y;
	} else if (y > st->hi[1]) {
		st->hi[1] = y;
	}
	if (y < st->lo[0]) {
		st->lo[1] = st->lo[0];
		st->lo[0] = y;
	} else if (y < st->lo[1]) {
		st->lo[1] = y;
	}
}

static void memg_series_end(struct memg_series *s)
{
	if (s->pf && s->pending)
		memg_series_put(s, &s->px, 0);
	s->pending = 0;
}

/* Non-zero when an event at x is outside the --time_from/--time_to range. */
static int memg_out_of_range(const struct tg_memg_opts *o, double x)
{
	return (o->has_from && x < o->from) || (o->has_to && x > o->to);
}

static long long memg_cap_milli(const struct tg_memg_opts *o)
{
	return o->has_cap ? llround(fabs(o->cap_kb) * 1000.0) : -1;
}

/* x of an event: its time, or its index when dumps have no time. */
static double memg_x(const struct tg_memg_opts *o, const struct tg_time *t,
		     unsigned long index, char *ibuf, const char **xs, size_t *xlen)
{
	if (o->has_time) {
		*xs = t->text.s;
		*xlen = t->text.len;
		return t->v;
	}
	*xlen = (size_t)sprintf(ibuf, "%lu", index);
	*xs = ibuf;
	return (double)index;
}

/* A sampled run's readings of a thread's memory (docs/formats.md). */
#define MEMG_SAMPLED_SITE "<thread memory>:0:sampled"

int tg_memg_read_thread(const struct tg_memg_opts *o, const struct tg_dumpfile *df,
			unsigned thread, struct tg_ptfile *pf, struct tg_peaks *peaks,
			struct tg_memg_stats *st, struct tg_timeaxis *ta, struct tg_diag *d)
{
	struct memg_series s = { .pf = pf, .d = d, .cap_milli = memg_cap_milli(o) };
	struct tg_src src;
	struct tg_memrec r;
	struct memg_at at;
	const char *xs;
	size_t xlen;
	unsigned long index = 0;
	char ibuf[32];
	int ret = -1, got;

	memset(st, 0, sizeof(*st));
	if (tg_src_open(&src, df, o->has_time, 0, d) < 0)
		return -1;
	src.lazy_time = !pf; /* peaks only: the time text of candidates alone */
	while ((got = tg_src_next_mem(&src, &r, d)) > 0) {
		double x;

		x = memg_x(o, &r.time, index++, ibuf, &xs, &xlen);
		if (ta && o->has_time)
			tg_timeaxis_see(ta, x);
		if (memg_out_of_range(o, x))
			continue;
		if (!st->events++)
			st->curve = df->agg_thread || (r.site.len == strlen(MEMG_SAMPLED_SITE)
				&& !memcmp(r.site.s, MEMG_SAMPLED_SITE, r.site.len));
		st->moved_kb += fabs((double)r.delta) / 1024.0;
		memg_stats_see(st, x, memg_cap(tg_bytes_to_milli_kb(r.delta), s.cap_milli));
		if (pf) {
			at.x = x;
			/* a capture's time as microseconds: its text is the one
			 * tg_cap_fmt_time makes of them, as the reader's */
			at.has_us = src.is_cap && o->has_time && TG_PT_US_EXACT(src.rec.t_us);
			at.us = src.rec.t_us;
			at.len = at.has_us ? 0 : xlen > sizeof(at.xs) ? sizeof(at.xs) : xlen;
			memcpy(at.xs, xs, at.len);
			memg_series_add(&s, &at, r.delta);
			if (s.err)
				goto release;
		}
		if (peaks && tg_peak_is_candidate(&o->peak, r.delta)) {
			struct tg_peak c = {
				.x = x,
				.call_start = o->has_time ? r.call_start : TG_NO_TIME,
				.ret_no = index,
				.y = (double)memg_cap(tg_bytes_to_milli_kb(r.delta),
						      s.cap_milli) / 1000.0,
				.delta = r.delta,
				.thread = thread,
				.lineno = src.lineno,
			};
			if (tg_src_mem_text(&src, &r, d) < 0)
				goto release;
			c.wrapper = tg_memrec_is_wrapper(&r);
			if (tg_peaks_add(peaks, &c, r.time.text.s, r.time.text.len, r.rest.s,
					 r.rest.len, d) < 0)
				goto release;
		}
	}
	if (got < 0)
		goto release;
	memg_series_end(&s);
	ret = s.err ? -1 : 0;
release:
	tg_src_release(&src);
	return ret;
}

int tg_memg_read_process(const struct tg_memg_opts *o, const struct tg_dumpfile *df,
			 FILE *out, struct tg_memg_stats *st, struct tg_timeaxis *ta,
			 struct tg_diag *d)
{
	struct tg_src src;
	struct tg_procrec r;
	const char *xs;
	size_t xlen;
	unsigned long index = 0;
	/* absolute KB unless the original's rebase was asked for: then clipped too */
	long long rebase = o->has_rebase ? llround(o->rebase_kb * 1000.0) : 0;
	long long cap = o->has_rebase ? memg_cap_milli(o) : -1;
	char ibuf[32];
	int ret = -1, got;
	struct memg_out *buf = malloc(sizeof(*buf));

	memset(st, 0, sizeof(*st));
	if (!buf)
		return tg_error(d, "out of memory");
	buf->f = out;
	buf->n = 0;
	if (tg_src_open(&src, df, o->has_time, 0, d) < 0) {
		free(buf);
		return -1;
	}
	while ((got = tg_src_next_proc(&src, &r, d)) > 0) {
		double x;

		x = memg_x(o, &r.time, index++, ibuf, &xs, &xlen);
		if (ta && o->has_time)
			tg_timeaxis_see(ta, x);
		if (memg_out_of_range(o, x))
			continue;
		st->events++;
		memg_stats_see(st, x, memg_cap(tg_bytes_to_milli_kb(r.bytes) - rebase, cap));
		memg_point(buf, xs, xlen, st->y_last);
	}
	if (got < 0)
		goto release;
	memg_out_flush(buf);
	ret = 0;
release:
	tg_src_release(&src);
	free(buf);
	return ret;
}

void tg_memg_extent_see(struct tg_memg_extent *e, const struct tg_memg_stats *st)
{
	if (!st->events)
		return;
	if (!e->seen || st->x_first < e->first)
		e->first = st->x_first;
	if (!e->seen || st->x_last > e->last)
		e->last = st->x_last;
	e->seen = 1;
}

double tg_memg_xspan(const struct tg_memg_opts *o, const struct tg_memg_extent *e,
		     double *lo, double *hi)
{
	*lo = e->seen ? e->first : 0;
	*hi = e->seen ? e->last : 0;
	if (o->has_time && o->has_origin && e->seen && o->origin < *lo)
		*lo = o->origin;
	if (o->has_from)
		*lo = o->from;
	if (o->has_to)
		*hi = o->to;
	return *hi > *lo ? *hi - *lo : 0;
}

int tg_peaks_collect(const struct tg_memg_opts *o, const struct tg_dumpfile *files,
		     size_t n, struct tg_peaks *peaks, const struct tg_memg_report *r,
		     struct tg_diag *d)
{
	struct tg_memg_extent ext = { 0 };
	double lo, hi;

	for (size_t i = 0; i < n; i++) {
		struct tg_memg_stats st;

		if (files[i].kind != TG_DUMP_MEM) {
			/* process files hold no peaks: skipped quietly, as memh does */
			if (r && r->skip && files[i].kind == TG_DUMP_STACK)
				r->skip(r->ctx, &files[i], "a stack file");
			continue;
		}
		if (r && r->start)
			r->start(r->ctx, &files[i]);
		if (tg_memg_read_thread(o, &files[i], (unsigned)i, NULL, peaks, &st, NULL, d) < 0)
			return -1;
		if (!st.events && r && r->skip)
			r->skip(r->ctx, &files[i], "no events");
		tg_memg_extent_see(&ext, &st);
	}
	tg_peaks_select(peaks, &o->peak, tg_memg_xspan(o, &ext, &lo, &hi));
	if (o->has_time && tg_peaks_call_starts(peaks, files, n, d) < 0)
		return -1;
	return 0;
}

int tg_peak_write_legend(FILE *f, const struct tg_peaks *p, const struct tg_peak *k,
			 const char *thread)
{
	fprintf(f, "%zu: %s>", k->id, thread);
	fwrite(tg_peak_rest(p, k), 1, k->rest_len, f);
	return putc('\n', f) == EOF ? EOF : 0;
}

/* Writes the plot command's series: threads (top ones styled, the rest grey;
 * titles[i]: file i's key title, gptitle.h), process, peaks, and the phases'
 * key entries. */
static void memg_plot_lines(FILE *f, const struct tg_memg_opts *o,
			    const struct tg_dumpfile *files, size_t n,
			    const struct tg_memg_stats *st, const unsigned char *show,
			    char *const *titles, size_t others, int peaks,
			    const struct tg_marks *m)
{
	const char *sep = "plot ";
	size_t i, k = 0;

	/* the grouped threads first: drawn under the others */
	for (i = 0; i < n; i++) {
		if (!st[i].events || files[i].kind != TG_DUMP_MEM || show[i])
			continue;
		fprintf(f, "%s'memg-%zu.dat' using (tx($1)):2 with steps lt %d notitle", sep, i,
			TG_GP_LT_OTHER);
		sep = ", \\\n     ";
	}
	for (i = 0; i < n; i++) {
		if (!st[i].events || files[i].kind != TG_DUMP_MEM || !show[i])
			continue;
		fprintf(f, "%s'memg-%zu.dat' using (tx($1)):2 with steps lt %zu title ", sep, i,
			k++ % TG_GP_STYLES + 1);
		tg_gp_quote(f, titles[i], strlen(titles[i]));
		sep = ", \\\n     ";
	}
	if (others)
		fprintf(f, "%skeyentry with steps lt %d title '%zu other thread%s (grey)'", sep,
			TG_GP_LT_OTHER, others, others == 1 ? "" : "s");
	for (i = 0; i < n; i++) {
		if (!st[i].events || files[i].kind != TG_DUMP_PROCESS)
			continue;
		if (o->has_rebase)
			fprintf(f, "%s'memg-%zu.dat' using (tx($1)):2 with lines lt %d "
				"title 'Process (KB - %g)'", sep, i, TG_GP_LT_PROCESS, o->rebase_kb);
		else
			fprintf(f, "%s'memg-%zu.dat' using (tx($1)):($2/1024) axes x1y2 with lines "
				"lt %d title 'Process (MB, right axis)'", sep, i, TG_GP_LT_PROCESS);
		sep = ", \\\n     ";
	}
	/* the points at their values, the labels at their heights (column 4: raised
	 * where they would overlap) */
	if (peaks)
		fprintf(f, "%s'memg-peaks.dat' using (tx($1)):2 with points pt 7 ps 0.6 "
			"lc rgb '#000000' notitle, \\\n     'memg-peaks.dat' using (tx($1)):4:3 "
			"with labels tc rgb '#000000' offset char 0,0.8 notitle", sep);
	if (peaks)
		sep = ", \\\n     ";
	if (o->has_time)
		tg_marks_plot_keys(f, m, &sep);
	fputs("\n", f);
}

/*
 * Label heights so that no two peak labels overlap: each label, in time order,
 * is raised a line at a time above its point while it would cover one placed
 * before.  The graph's geometry is estimated (plot area about 70% of the width,
 * the key being outside, and 85% of the height; a digit 7 px wide, a line 16
 * px), which is enough to tell labels apart.  label_y[i] gets peak i's label
 * height in KB; x0..x1 is the graph's x extent (tg_memg_xspan), y0..y1 the
 * data's range.
 */
#define MEMG_CHAR_PX 7.0
#define MEMG_LINE_PX 16.0
static void memg_place_labels(const struct tg_peaks *p, const struct tg_plot_opts *po,
			      double x0, double x1, double y0, double y1, const double *y,
			      const int *len, double *label_y)
{
	double w = po->width * 0.70, h = po->height * 0.85;
	double xs = x1 > x0 ? w / (x1 - x0) : 0, ys = y1 > y0 ? h / (y1 - y0) : 0;

	for (size_t i = 0; i < p->n; i++) {
		double px = (p->v[i].x - x0) * xs, py = (y[i] - y0) * ys;
		double wi = len[i] * MEMG_CHAR_PX + 4;
		int moved = 1, tries = 0;

		while (moved && tries++ < 40) {
			moved = 0;
			for (size_t j = 0; j < i; j++) {
				double pxj = (p->v[j].x - x0) * xs, pyj = (label_y[j] - y0) * ys;
				double wj = len[j] * MEMG_CHAR_PX + 4;
				if (fabs(px - pxj) < (wi + wj) / 2 && fabs(py - pyj) < MEMG_LINE_PX) {
					py = pyj + MEMG_LINE_PX;
					moved = 1;
				}
			}
		}
		label_y[i] = ys > 0 ? y0 + py / ys : y[i];
	}
}

/*
 * The y range's limits that keep one outlier off the scale (thousandths of KB),
 * so that a single large release (or growth) does not squeeze every other call
 * into a fifth of the graph: the lowest value is left out when it is more than
 * TG_MEMG_OUTLIER times below every other value's magnitude (the next lowest and
 * the highest), the highest likewise.  *clip_lo / *clip_hi are 0 when nothing is
 * left out.  Not with --cap (the user's own clipping) or --process_rebase (the
 * process line shares the axis).
 */
#define TG_MEMG_OUTLIER 4
static void memg_yclip(const struct tg_memg_opts *o, const struct tg_dumpfile *files,
		       size_t n, const struct tg_memg_stats *st, long long *clip_lo,
		       long long *clip_hi)
{
	long long hi[2] = { 0, 0 }, lo[2] = { 0, 0 }, rest;

	*clip_lo = *clip_hi = 0;
	if (o->has_cap || o->has_rebase)
		return;
	for (size_t i = 0; i < n; i++) {
		if (!st[i].events || files[i].kind != TG_DUMP_MEM)
			continue;
		for (int k = 0; k < 2; k++) {
			long long h = st[i].hi[k], l = st[i].lo[k];
			if (h > hi[0]) {
				hi[1] = hi[0];
				hi[0] = h;
			} else if (h > hi[1]) {
				hi[1] = h;
			}
			if (l < lo[0]) {
				lo[1] = lo[0];
				lo[0] = l;
			} else if (l < lo[1]) {
				lo[1] = l;
			}
		}
	}
	rest = -lo[1] > hi[0] ? -lo[1] : hi[0];
	if (rest > 0 && -lo[0] > TG_MEMG_OUTLIER * rest)
		*clip_lo = -(rest + rest / 4);
	rest = hi[1] > -lo[0] ? hi[1] : -lo[0];
	if (rest > 0 && hi[0] > TG_MEMG_OUTLIER * rest)
		*clip_hi = rest + rest / 4;
}

/* The tg_thin_write_fn of the thread data files: "X Y\n" to the FILE * ctx. */
static void memg_line_write(void *ctx, const void *data, size_t size)
{
	const struct tg_pt_line *l = data;
	char buf[TG_PT_TEXT_MAX + 1 + TG_FMT_MILLI_MAX + 2];
	size_t len;

	(void)size;
	len = tg_pt_line_time(l, buf);
	buf[len++] = ' ';
	len += tg_fmt_milli(buf + len, l->v);
	buf[len++] = '\n';
	fwrite(buf, 1, len, ctx);
}

/*
 * Writes the next COUNT points of SERIES (one thread's, in the order read) to
 * OUT as "X Y" lines.  With COLUMNS, a series with more points than a graph
 * shows is thinned to the first, lowest, highest and last point of each of
 * COLUMNS slices of x0..x1, in their order (thin.h); the series together keep
 * about TG_MEMG_POINTS_BUDGET points: 510 threads made a 5 MB memg.svg and
 * report.  A point's x there is what strtod gives for its TIME text
 * (numparse.h; a capture's microseconds give it exactly), so that the slices
 * are those of the text series this replaced.  0, or -1 with d set.
 */
static int memg_write_series(struct tg_ptfile *series, unsigned long long count, FILE *out,
			     int has_time, double x0, double x1, size_t columns,
			     struct tg_diag *d)
{
	struct tg_thin t;
	struct tg_pt p;
	struct tg_pt_line l;
	int got = 1;

	tg_thin_init(&t, memg_line_write, out, x0, x1, columns);
	for (; count && (got = tg_ptfile_get(series, &p, d)) > 0; count--) {
		double x = p.x;

		if (columns && has_time && !p.has_us) {
			size_t used;

			x = tg_parse_double(p.xs, p.len, &used);
			if (!used)
				continue;  /* no number: what the text's thinning left out */
		}
		tg_thin_point(&t, x, (double)p.v, &l, tg_pt_line_of(&l, &p, p.v));
	}
	tg_thin_finish(&t);
	if (got < 0)
		return -1;
	if (count)
		return tg_error(d, "a temporary series ended early");
	return 0;
}

/* Writes memg.gp's settings and plot command. */
static void memg_script(FILE *f, const struct tg_memg_opts *o,
			const struct tg_dumpfile *files, size_t n,
			const struct tg_memg_stats *st, const unsigned char *show,
			char *const *titles, const struct tg_timeaxis *ta, int peaks,
			long long clip_lo,
			long long clip_hi, const struct tg_marks *mk)
{
	char m[TG_FMT_MILLI_MAX];
	struct tg_timerange range = { o->has_from, o->has_to, o->from, o->to };
	size_t i, threads = 0, shown = 0, curves = 0;
	int process = 0;

	for (i = 0; i < n; i++) {
		if (!st[i].events)
			continue;
		if (files[i].kind == TG_DUMP_PROCESS) {
			process = 1;
			continue;
		}
		threads++;
		curves += st[i].curve != 0;
		shown += show[i];
	}
	/* a sampled or aggregate run: every thread's values are readings of its
	 * memory, not deltas of calls */
	if (threads && curves == threads)
		fputs("set title 'Memory by thread: its memory at each reading of its curve, "
		      "KB'\n", f);
	else
		fputs("set title 'Memory by thread: what each call kept (+) or released (-), "
		      "KB'\n", f);
	fputs("set key outside right top\nset grid\n", f);
	if (shown < threads)
		fprintf(f, "set key title 'top %zu of %zu threads by memory moved'\n", shown,
			threads);
	fputs(threads && curves == threads ? "set ylabel 'Thread memory (KB)'\n"
	      : "set ylabel 'Delta per call (KB)'\n", f);
	if (clip_lo) {
		tg_fmt_milli(m, clip_lo);
		fprintf(f, "# one release is far below the rest: off the scale, its label at "
			"the bottom\nset yrange [%s:*]\n", m);
	} else if (clip_hi) {
		tg_fmt_milli(m, clip_hi);
		fprintf(f, "# one growth is far above the rest: off the scale, its label at "
			"the top\nset yrange [*:%s]\n", m);
	}
	if (process && !o->has_rebase)
		fputs("set ytics nomirror\nset y2tics\nset y2label 'Process memory (MB)'\n"
		      "set y2range [0:*]\n", f);
	tg_timeaxis_write(f, ta, &range, "Event");
	if (o->has_time)
		tg_marks_plot_objects(f, mk, ta, o->has_from ? o->from : -INFINITY,
				      o->has_to ? o->to : INFINITY);
	memg_plot_lines(f, o, files, n, st, show, titles, threads - shown, peaks, mk);
}

int tg_memg_run(const struct tg_memg_opts *o, const struct tg_plot_opts *po,
		const struct tg_dumpfile *files, size_t n, const struct tg_memg_report *r,
		struct tg_diag *d)
{
	struct tg_peaks peaks;
	struct tg_marks marks;
	struct tg_aout dat, script, legend;
	struct tg_plot_files pf = TG_PLOT_FILES_INIT;
	struct tg_timeaxis ta;
	struct tg_memg_stats *st = calloc(n ? n : 1, sizeof(*st));
	double *act = calloc(n ? n : 1, sizeof(*act));
	unsigned char *show = calloc(n ? n : 1, 1);
	size_t i, plotted = 0, top = o->top_threads ? (size_t)o->top_threads :
		TG_MEMG_TOP_THREADS;
	int ret = -1, have_end = 0;
	char name[64];
	double threads_end = 0, x0, x1;
	long long clip_lo = 0, clip_hi = 0;
	struct tg_memg_extent ext = { 0 };
	char **titles = NULL;
	/* the threads' series, in binary until the graph's span is known (each
	 * thread's points in turn: npts[i] of file i, -1 for a file not read as a
	 * thread's) */
	struct tg_ptfile series = TG_PTFILE_INIT;
	long long *npts = malloc((n ? n : 1) * sizeof(*npts));
	size_t columns = 0;
	double span0, span1;

	tg_peaks_init(&peaks);
	tg_marks_init(&marks);
	tg_timeaxis_init(&ta, !o->has_time ? TG_TIME_NONE :
			 o->clock ? TG_TIME_CLOCK : TG_TIME_ELAPSED);
	if (o->has_origin)
		tg_timeaxis_origin(&ta, o->origin);
	memset(&script, 0, sizeof(script));
	memset(&legend, 0, sizeof(legend));
	if (!st || !act || !show || !npts) {
		tg_error(d, "out of memory");
		goto out;
	}
	if (tg_marks_read_near(&marks, files, n, d) < 0)
		goto out;
	if (tg_plot_files_open(&pf, po, "memg", d) < 0 ||
	    tg_ptfile_open(&series, pf.dir, "memg-series", d) < 0)
		goto out;
	/* the threads first: the process line is drawn on to where they end */
	for (int pass = 0; pass < 2; pass++)
	for (i = 0; i < n; i++) {
		const struct tg_dumpfile *df = &files[i];
		int rc;

		if ((df->kind == TG_DUMP_PROCESS) != pass)
			continue;
		act[i] = -1;
		npts[i] = -1;
		if (df->kind == TG_DUMP_STACK ||
		    (df->kind == TG_DUMP_PROCESS && o->no_process)) {
			if (df->kind == TG_DUMP_STACK && r && r->skip)
				r->skip(r->ctx, df, "a stack file");
			continue;
		}
		if (r && r->start)
			r->start(r->ctx, df);
		if (df->kind == TG_DUMP_PROCESS) {
			snprintf(name, sizeof(name), "memg-%zu.dat", i);
			if (tg_plot_files_out(&pf, &dat, name, d) < 0)
				goto out;
			rc = tg_memg_read_process(o, df, dat.f, &st[i], &ta, d);
			/* its last sample holds until the threads' last event: samples
			 * are requested every N profile events, not every N ms, so the
			 * last request can come long before the end.  The recorder writes
			 * a last reading at disable(), after every event, so this adds
			 * nothing to a run that ended through it; it draws on a run that
			 * did not (killed, or recorded before threadgraph wrote that
			 * reading), whose last sample may be far from the end. */
			if (rc == 0 && o->has_time && st[i].events && threads_end > st[i].x_last) {
				char m[TG_FMT_MILLI_MAX];
				tg_fmt_milli(m, st[i].y_last);
				fprintf(dat.f, "%.6f %s\n", threads_end, m);
			}
			if (rc < 0 || tg_aout_commit(&dat, d) < 0) {
				tg_aout_abort(&dat);
				goto out;
			}
			tg_aout_release(&dat);
		} else {
			unsigned long long before = series.points;

			rc = tg_memg_read_thread(o, df, (unsigned)i, &series, &peaks, &st[i], &ta, d);
			if (rc < 0)
				goto out;
			npts[i] = (long long)(series.points - before);
			if (st[i].events && (!have_end || st[i].x_last > threads_end)) {
				threads_end = st[i].x_last;
				have_end = 1;
			}
		}
		if (!st[i].events && r && r->skip)
			r->skip(r->ctx, df, "no events");
		if (st[i].events && df->kind == TG_DUMP_MEM)
			act[i] = st[i].moved_kb;
		plotted += st[i].events != 0;
	}
	if (!plotted) {
		tg_error(d, "no events to plot");
		goto out;
	}
	tg_gp_pick_top(act, n, top, show);
	for (i = 0; i < n; i++)
		if (files[i].kind == TG_DUMP_MEM)
			tg_memg_extent_see(&ext, &st[i]);
	/* the span `peaks` takes too (tg_peaks_collect): its numbers are our labels */
	tg_peaks_select(&peaks, &o->peak, tg_memg_xspan(o, &ext, &x0, &x1));
	/* the span the columns divide: the time axis's, or without times the
	 * event indexes' (from 0: each thread's own count) */
	span0 = ta.t0;
	span1 = ta.t1;
	if (!o->has_time) {
		span0 = 0;
		span1 = ext.seen ? ext.last : 0;
	}
	if ((o->has_time ? ta.seen : ext.seen) && span1 > span0) {
		size_t curves = 0;
		for (i = 0; i < n; i++)
			curves += st[i].events && files[i].kind == TG_DUMP_MEM;
		columns = TG_MEMG_POINTS_BUDGET / 4 / (curves ? curves : 1);
		if (columns > (size_t)po->width)
			columns = (size_t)po->width;
		if (columns < 16)
			columns = 16;
	}
	/* the threads' data files, from the series read back in their order:
	 * thinned when they have more points than the graph shows */
	if (tg_ptfile_rewind(&series, d) < 0)
		goto out;
	for (i = 0; i < n; i++) {
		int thin = columns && st[i].events && files[i].kind == TG_DUMP_MEM &&
			st[i].events > 4 * columns;

		if (npts[i] < 0)
			continue;
		snprintf(name, sizeof(name), "memg-%zu.dat", i);
		if (tg_plot_files_out(&pf, &dat, name, d) < 0)
			goto out;
		if (memg_write_series(&series, (unsigned long long)npts[i], dat.f, o->has_time,
				      span0, span1, thin ? columns : 0, d) < 0 ||
		    tg_aout_commit(&dat, d) < 0) {
			tg_aout_abort(&dat);
			goto out;
		}
		tg_aout_release(&dat);
	}
	memg_yclip(o, files, n, st, &clip_lo, &clip_hi);

	if (tg_aout_open(&legend, po->dir, "memg.txt", d) < 0)
		goto out;
	for (i = 0; i < peaks.n; i++)
		tg_peak_write_legend(legend.f, &peaks, &peaks.v[i],
				     files[peaks.v[i].thread].thread);
	if (peaks.n) {
		char m[TG_FMT_MILLI_MAX], ml[TG_FMT_MILLI_MAX], text[96];
		double *py = malloc(peaks.n * sizeof(*py)), *ly = malloc(peaks.n * sizeof(*ly));
		int *len = malloc(peaks.n * sizeof(*len));
		double y0 = 0, y1 = 0;

		if (!py || !ly || !len) {
			free(py);
			free(ly);
			free(len);
			tg_error(d, "out of memory");
			goto out_legend;
		}
		for (i = 0; i < n; i++) {
			if (!st[i].events || (files[i].kind == TG_DUMP_PROCESS && !o->has_rebase))
				continue;
			y0 = fmin(y0, st[i].lo[0] / 1000.0);
			y1 = fmax(y1, st[i].hi[0] / 1000.0);
		}
		if (clip_lo)
			y0 = clip_lo / 1000.0;
		if (clip_hi)
			y1 = clip_hi / 1000.0;
		for (i = 0; i < peaks.n; i++) {
			const struct tg_peak *k = &peaks.v[i];
			long long y = llround(k->y * 1000.0);
			/* off the scale: at the edge, its value in the label */
			int off = (clip_lo && y < clip_lo) || (clip_hi && y > clip_hi);

			py[i] = (off ? (clip_lo ? clip_lo : clip_hi) / 100 * 97 : y) / 1000.0;
			if (off)
				len[i] = snprintf(text, sizeof(text), "%zu (%.0f KB, off scale)",
						  k->id, k->y);
			else
				len[i] = snprintf(text, sizeof(text), "%zu", k->id);
		}
		memg_place_labels(&peaks, po, x0, x1, y0, y1, py, len, ly);
		if (tg_plot_files_out(&pf, &dat, "memg-peaks.dat", d) < 0) {
			free(py);
			free(ly);
			free(len);
			goto out_legend;
		}
		for (i = 0; i < peaks.n; i++) {
			const struct tg_peak *k = &peaks.v[i];
			long long y = llround(k->y * 1000.0);
			int off = (clip_lo && y < clip_lo) || (clip_hi && y > clip_hi);

			tg_fmt_milli(m, llround(py[i] * 1000.0));
			tg_fmt_milli(ml, llround(ly[i] * 1000.0));
			if (o->has_time)
				fwrite(tg_peak_time(&peaks, k), 1, k->time_len, dat.f);
			else
				fprintf(dat.f, "%.0f", k->x);
			if (off)
				fprintf(dat.f, " %s \"%zu (%.0f KB, off scale)\" %s\n", m, k->id,
					k->y, ml);
			else
				fprintf(dat.f, " %s %zu %s\n", m, k->id, ml);
		}
		free(py);
		free(ly);
		free(len);
		if (tg_aout_commit(&dat, d) < 0) {
			tg_aout_abort(&dat);
			goto out_legend;
		}
		tg_aout_release(&dat);
	}

	if (!(titles = tg_gp_thread_titles(files, n, show))) {
		tg_error(d, "out of memory");
		goto out_legend;
	}
	if (tg_plot_files_out(&pf, &script, "memg.gp", d) < 0)
		goto out_legend;
	tg_gp_preamble(script.f, po, "memg");
	memg_script(script.f, o, files, n, st, show, titles, &ta, peaks.n != 0, clip_lo,
		    clip_hi, &marks);
	if (r && r->plotting && tg_plot_draws(po))
		r->plotting(r->ctx);
	ret = tg_plot_finish(po, &pf, "memg", &script, &legend, d);
	goto out;

out_legend:
	tg_aout_abort(&legend);
out:
	tg_ptfile_release(&series);
	free(npts);
	tg_plot_files_release(&pf);
	tg_peaks_release(&peaks);
	tg_marks_release(&marks);
	free(titles);
	free(st);
	free(act);
	free(show);
	return ret;
}
