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
			unsigned long *events, struct tg_diag *d)
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

	*events = 0;
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
		if (memg_out_of_range(o, x))
			continue;
		(*events)++;
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
			 FILE *out, unsigned long *events, struct tg_diag *d)
{
	struct tg_src src;
	struct tg_procrec r;
	const char *xs;
	size_t xlen;
	unsigned long index = 0;
	long long rebase = llround(o->rebase_kb * 1000.0), cap = memg_cap_milli(o);
	char ibuf[32];
	int ret = -1, got;
	struct memg_out *buf = malloc(sizeof(*buf));

	*events = 0;
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
		if (memg_out_of_range(o, x))
			continue;
		(*events)++;
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
		unsigned long events;

		if (files[i].kind != TG_DUMP_MEM) {
			/* process files hold no peaks: skipped quietly, as memh does */
			if (r && r->skip && files[i].kind == TG_DUMP_STACK)
				r->skip(r->ctx, &files[i], "a stack file");
			continue;
		}
		if (r && r->start)
			r->start(r->ctx, &files[i]);
		if (tg_memg_read_thread(o, &files[i], (unsigned)i, NULL, peaks, &events, d) < 0)
			return -1;
		if (!events && r && r->skip)
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

/* Writes the xrange line for --time_from/--time_to. */
static void memg_xrange(FILE *f, const struct tg_memg_opts *o)
{
	if (!o->has_from && !o->has_to)
		return;
	fputs("set xrange [", f);
	if (o->has_from)
		fprintf(f, o->has_time ? "'%.6f'" : "%.6f", o->from);
	else
		fputs("*", f);
	fputs(":", f);
	if (o->has_to)
		fprintf(f, o->has_time ? "'%.6f'" : "%.6f", o->to);
	else
		fputs("*", f);
	fputs("]\n", f);
}

int tg_memg_run(const struct tg_memg_opts *o, const struct tg_plot_opts *po,
		const struct tg_dumpfile *files, size_t n, const struct tg_memg_report *r,
		struct tg_diag *d)
{
	struct tg_peaks peaks;
	struct tg_aout dat, script, legend;
	unsigned long *events = calloc(n ? n : 1, sizeof(*events));
	size_t i, plotted = 0;
	int ret = -1, first = 1;
	char name[64];

	tg_peaks_init(&peaks);
	memset(&script, 0, sizeof(script));
	memset(&legend, 0, sizeof(legend));
	if (!events)
		return tg_error(d, "out of memory");
	for (i = 0; i < n; i++) {
		const struct tg_dumpfile *df = &files[i];
		int rc;

		if (df->kind == TG_DUMP_STACK ||
		    (df->kind == TG_DUMP_PROCESS && o->no_process)) {
			if (df->kind == TG_DUMP_STACK && r && r->skip)
				r->skip(r->ctx, df, "a stack file");
			continue;
		}
		if (r && r->start)
			r->start(r->ctx, df);
		snprintf(name, sizeof(name), "memg-%zu.dat", i);
		if (tg_aout_open(&dat, po->dir, name, d) < 0)
			goto out;
		if (df->kind == TG_DUMP_PROCESS)
			rc = tg_memg_read_process(o, df, dat.f, &events[i], d);
		else
			rc = tg_memg_read_thread(o, df, (unsigned)i, dat.f, &peaks, &events[i], d);
		if (rc < 0) {
			tg_aout_abort(&dat);
			goto out;
		}
		if (tg_aout_commit(&dat, d) < 0) {
			tg_aout_abort(&dat);
			goto out;
		}
		tg_aout_release(&dat);
		if (!events[i] && r && r->skip)
			r->skip(r->ctx, df, "no events");
		plotted += events[i] != 0;
	}
	if (!plotted) {
		tg_error(d, "no events to plot");
		goto out;
	}
	tg_peaks_select(&peaks, &o->peak);

	if (tg_aout_open(&legend, po->dir, "memg.txt", d) < 0)
		goto out;
	for (i = 0; i < peaks.n; i++)
		tg_peak_write_legend(legend.f, &peaks, &peaks.v[i],
				     files[peaks.v[i].thread].thread);
	if (peaks.n) {
		char m[TG_FMT_MILLI_MAX];
		if (tg_aout_open(&dat, po->dir, "memg-peaks.dat", d) < 0)
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

	if (tg_aout_open(&script, po->dir, "memg.gp", d) < 0)
		goto out_legend;
	tg_gp_preamble(script.f, po, "memg");
	fputs("set title 'Memory by thread (KB)'\n", script.f);
	fputs("set key outside right top\nset grid\n", script.f);
	fputs("set ylabel 'KB'\n", script.f);
	if (o->has_time)
		fputs("set xlabel 'Time'\nset xdata time\nset timefmt '%s'\n"
		      "set format x '%H:%M:%S'\n", script.f);
	else
		fputs("set xlabel 'Event'\n", script.f);
	memg_xrange(script.f, o);
	fputs("plot", script.f);
	for (i = 0; i < n; i++) {
		if (!events[i])
			continue;
		fprintf(script.f, "%s 'memg-%zu.dat' using 1:2 with lines title ",
			first ? "" : ", \\\n    ", i);
		if (files[i].kind == TG_DUMP_PROCESS)
			fputs("'Process'", script.f);
		else
			tg_gp_quote(script.f, files[i].thread, strlen(files[i].thread));
		first = 0;
	}
	if (peaks.n)
		fputs(", \\\n    'memg-peaks.dat' using 1:2:3 with labels point pt 7 ps 0.6 "
		      "offset char 0,0.8 notitle", script.f);
	fputs("\n", script.f);
	if (r && r->plotting && !po->script_only)
		r->plotting(r->ctx);
	ret = tg_plot_finish(po, "memg", &script, &legend, d);
	goto out;

out_legend:
	tg_aout_abort(&legend);
out:
	tg_peaks_release(&peaks);
	free(events);
	return ret;
}
