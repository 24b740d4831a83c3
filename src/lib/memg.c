/*
 * memg.c - read thread and process dumps into series and peaks; the memg graph.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "memg.h"
#include "recsrc.h"

/* A thread series being written: collapses runs of zero deltas. */
struct memg_series {
	struct memg_out *out; /* data file, or NULL when only peaks are wanted */
	int in_zero;        /* the last event had a zero delta */
	int pending;        /* px holds the latest zero of the run, not yet written */
	char px[48];        /* its x text */
	size_t pxlen;
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

static void memg_series_add(struct memg_series *s, const char *x, size_t xlen,
			    long long delta)
{
	if (!s->out)
		return;
	if (delta == 0) {
		if (!s->in_zero) {
			memg_point(s->out, x, xlen, 0);
			s->in_zero = 1;
		} else {
			if (xlen > sizeof(s->px))
				xlen = sizeof(s->px);
			memcpy(s->px, x, xlen);
			s->pxlen = xlen;
			s->pending = 1;
		}
		return;
	}
	if (s->pending)
		memg_point(s->out, s->px, s->pxlen, 0);
	s->pending = 0;
	s->in_zero = 0;
	memg_point(s->out, x, xlen,
		   memg_cap(tg_bytes_to_milli_kb(delta), s->cap_milli));
}

static void memg_series_end(struct memg_series *s)
{
	if (s->out && s->pending)
		memg_point(s->out, s->px, s->pxlen, 0);
	s->pending = 0;
	if (s->out)
		memg_out_flush(s->out);
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

int tg_memg_read_thread(const struct tg_memg_opts *o, const struct tg_dumpfile *df,
			unsigned thread, FILE *out, struct tg_peaks *peaks,
			struct tg_memg_stats *st, struct tg_timeaxis *ta, struct tg_diag *d)
{
	struct memg_out *buf = out ? malloc(sizeof(*buf)) : NULL;
	struct memg_series s = { .out = buf, .cap_milli = memg_cap_milli(o) };
	struct tg_src src;
	struct tg_memrec r;
	const char *xs;
	size_t xlen;
	unsigned long index = 0;
	char ibuf[32];
	int ret = -1, got;

	st->events = 0;
	st->moved_kb = 0;
	if (out && !buf)
		return tg_error(d, "out of memory");
	if (buf) {
		buf->f = out;
		buf->n = 0;
	}
	if (tg_src_open(&src, df, o->has_time, 0, d) < 0) {
		free(buf);
		return -1;
	}
	src.lazy_time = !out; /* peaks only: the time text of candidates alone */
	while ((got = tg_src_next_mem(&src, &r, d)) > 0) {
		double x;

		x = memg_x(o, &r.time, index++, ibuf, &xs, &xlen);
		if (ta && o->has_time)
			tg_timeaxis_see(ta, x);
		if (memg_out_of_range(o, x))
			continue;
		st->events++;
		st->moved_kb += fabs((double)r.delta) / 1024.0;
		memg_series_add(&s, xs, xlen, r.delta);
		if (peaks && tg_peak_is_candidate(&o->peak, r.delta)) {
			struct tg_peak c = {
				.x = x,
				.y = (double)memg_cap(tg_bytes_to_milli_kb(r.delta),
						      s.cap_milli) / 1000.0,
				.delta = r.delta,
				.thread = thread,
				.lineno = src.lineno,
			};
			if (tg_src_mem_text(&src, &r, d) < 0 ||
			    tg_peaks_add(peaks, &c, r.time.text.s, r.time.text.len, r.rest.s,
					 r.rest.len, d) < 0)
				goto release;
		}
	}
	if (got < 0)
		goto release;
	memg_series_end(&s);
	ret = 0;
release:
	tg_src_release(&src);
	free(buf);
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

	st->events = 0;
	st->moved_kb = 0;
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
		memg_point(buf, xs, xlen, memg_cap(tg_bytes_to_milli_kb(r.bytes) - rebase, cap));
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

int tg_peaks_collect(const struct tg_memg_opts *o, const struct tg_dumpfile *files,
		     size_t n, struct tg_peaks *peaks, const struct tg_memg_report *r,
		     struct tg_diag *d)
{
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
	}
	tg_peaks_select(peaks, &o->peak);
	return 0;
}

int tg_peak_write_legend(FILE *f, const struct tg_peaks *p, const struct tg_peak *k,
			 const char *thread)
{
	fprintf(f, "%zu: %s>", k->id, thread);
	fwrite(tg_peak_rest(p, k), 1, k->rest_len, f);
	return putc('\n', f) == EOF ? EOF : 0;
}

/* Writes the plot command's series: threads (top ones styled, the rest grey), process, peaks. */
static void memg_plot_lines(FILE *f, const struct tg_memg_opts *o,
			    const struct tg_dumpfile *files, size_t n,
			    const struct tg_memg_stats *st, const unsigned char *show,
			    size_t others, int peaks)
{
	const char *sep = "plot ";
	size_t i, k = 0;

	/* the grouped threads first: drawn under the others */
	for (i = 0; i < n; i++) {
		if (!st[i].events || files[i].kind != TG_DUMP_MEM || show[i])
			continue;
		fprintf(f, "%s'memg-%zu.dat' using (tx($1)):2 with lines lt %d notitle", sep, i,
			TG_GP_LT_OTHER);
		sep = ", \\\n     ";
	}
	for (i = 0; i < n; i++) {
		if (!st[i].events || files[i].kind != TG_DUMP_MEM || !show[i])
			continue;
		fprintf(f, "%s'memg-%zu.dat' using (tx($1)):2 with lines lt %zu title ", sep, i,
			k++ % TG_GP_STYLES + 1);
		tg_gp_quote(f, files[i].thread, strlen(files[i].thread));
		sep = ", \\\n     ";
	}
	if (others)
		fprintf(f, "%skeyentry with lines lt %d title '%zu other thread%s (grey)'", sep,
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
	if (peaks)
		fprintf(f, "%s'memg-peaks.dat' using (tx($1)):2:3 with labels point pt 7 ps 0.6 "
			"lc rgb '#000000' offset char 0,0.8 notitle", sep);
	fputs("\n", f);
}

/* Writes memg.gp's settings and plot command. */
static void memg_script(FILE *f, const struct tg_memg_opts *o,
			const struct tg_dumpfile *files, size_t n,
			const struct tg_memg_stats *st, const unsigned char *show,
			const struct tg_timeaxis *ta, int peaks)
{
	struct tg_timerange range = { o->has_from, o->has_to, o->from, o->to };
	size_t i, threads = 0, shown = 0;
	int process = 0;

	for (i = 0; i < n; i++) {
		if (!st[i].events)
			continue;
		if (files[i].kind == TG_DUMP_PROCESS) {
			process = 1;
			continue;
		}
		threads++;
		shown += show[i];
	}
	fputs("set title 'Memory by thread: what each call kept (+) or released (-), KB'\n",
	      f);
	fputs("set key outside right top\nset grid\n", f);
	if (shown < threads)
		fprintf(f, "set key title 'top %zu of %zu threads by memory moved'\n", shown,
			threads);
	fputs("set ylabel 'Delta per call (KB)'\n", f);
	if (process && !o->has_rebase)
		fputs("set ytics nomirror\nset y2tics\nset y2label 'Process memory (MB)'\n"
		      "set y2range [0:*]\n", f);
	tg_timeaxis_write(f, ta, &range, "Event");
	memg_plot_lines(f, o, files, n, st, show, threads - shown, peaks);
}

int tg_memg_run(const struct tg_memg_opts *o, const struct tg_plot_opts *po,
		const struct tg_dumpfile *files, size_t n, const struct tg_memg_report *r,
		struct tg_diag *d)
{
	struct tg_peaks peaks;
	struct tg_aout dat, script, legend;
	struct tg_plot_files pf = TG_PLOT_FILES_INIT;
	struct tg_timeaxis ta;
	struct tg_memg_stats *st = calloc(n ? n : 1, sizeof(*st));
	double *act = calloc(n ? n : 1, sizeof(*act));
	unsigned char *show = calloc(n ? n : 1, 1);
	size_t i, plotted = 0, top = o->top_threads ? (size_t)o->top_threads :
		TG_MEMG_TOP_THREADS;
	int ret = -1;
	char name[64];

	tg_peaks_init(&peaks);
	tg_timeaxis_init(&ta, !o->has_time ? TG_TIME_NONE :
			 o->clock ? TG_TIME_CLOCK : TG_TIME_ELAPSED);
	memset(&script, 0, sizeof(script));
	memset(&legend, 0, sizeof(legend));
	if (!st || !act || !show) {
		tg_error(d, "out of memory");
		goto out;
	}
	if (tg_plot_files_open(&pf, po, "memg", d) < 0)
		goto out;
	for (i = 0; i < n; i++) {
		const struct tg_dumpfile *df = &files[i];
		int rc;

		act[i] = -1;
		if (df->kind == TG_DUMP_STACK ||
		    (df->kind == TG_DUMP_PROCESS && o->no_process)) {
			if (df->kind == TG_DUMP_STACK && r && r->skip)
				r->skip(r->ctx, df, "a stack file");
			continue;
		}
		if (r && r->start)
			r->start(r->ctx, df);
		snprintf(name, sizeof(name), "memg-%zu.dat", i);
		if (tg_aout_open(&dat, pf.dir, name, d) < 0)
			goto out;
		if (df->kind == TG_DUMP_PROCESS)
			rc = tg_memg_read_process(o, df, dat.f, &st[i], &ta, d);
		else
			rc = tg_memg_read_thread(o, df, (unsigned)i, dat.f, &peaks, &st[i], &ta, d);
		if (rc < 0) {
			tg_aout_abort(&dat);
			goto out;
		}
		if (tg_aout_commit(&dat, d) < 0) {
			tg_aout_abort(&dat);
			goto out;
		}
		tg_aout_release(&dat);
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
	tg_peaks_select(&peaks, &o->peak);

	if (tg_aout_open(&legend, po->dir, "memg.txt", d) < 0)
		goto out;
	for (i = 0; i < peaks.n; i++)
		tg_peak_write_legend(legend.f, &peaks, &peaks.v[i],
				     files[peaks.v[i].thread].thread);
	if (peaks.n) {
		char m[TG_FMT_MILLI_MAX];
		if (tg_aout_open(&dat, pf.dir, "memg-peaks.dat", d) < 0)
			goto out_legend;
		for (i = 0; i < peaks.n; i++) {
			const struct tg_peak *k = &peaks.v[i];
			tg_fmt_milli(m, llround(k->y * 1000.0));
			if (o->has_time)
				fwrite(tg_peak_time(&peaks, k), 1, k->time_len, dat.f);
			else
				fprintf(dat.f, "%.0f", k->x);
			fprintf(dat.f, " %s %zu\n", m, k->id);
		}
		if (tg_aout_commit(&dat, d) < 0) {
			tg_aout_abort(&dat);
			goto out_legend;
		}
		tg_aout_release(&dat);
	}

	if (tg_aout_open(&script, pf.dir, "memg.gp", d) < 0)
		goto out_legend;
	tg_gp_preamble(script.f, po, "memg");
	memg_script(script.f, o, files, n, st, show, &ta, peaks.n != 0);
	if (r && r->plotting && tg_plot_draws(po))
		r->plotting(r->ctx);
	ret = tg_plot_finish(po, &pf, "memg", &script, &legend, d);
	goto out;

out_legend:
	tg_aout_abort(&legend);
out:
	tg_plot_files_release(&pf);
	tg_peaks_release(&peaks);
	free(st);
	free(act);
	free(show);
	return ret;
}
