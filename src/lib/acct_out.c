/*
 * acct_out.c - printing the allocation-accounting reports (see acct_out.h).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "acct_out.h"
#include "fmt.h"

void tg_summary_print(FILE *f, const struct tg_summary *s)
{
	fprintf(f, "%-12s %-24s", "", "");
	for (int k = 0; k < TG_SUM_NFIG; k++)
		fprintf(f, " %22s", tg_sum_figures[k]);
	fputc('\n', f);
	fprintf(f, "%-12s %-24s", "process", "");
	for (int k = 0; k < TG_SUM_NFIG; k++)
		fprintf(f, " %22" PRId64, s->process.fig[k]);
	fputc('\n', f);
	for (size_t i = 0; i < s->n_threads; i++) {
		fprintf(f, "%-12s ", "thread");
		tg_fputs_safe_pad(f, s->threads[i].name, 24);
		for (int k = 0; k < TG_SUM_NFIG; k++)
			fprintf(f, " %22" PRId64, s->threads[i].fig[k]);
		fputc('\n', f);
	}
	for (size_t i = 0; i < s->n_windows; i++) {
		fprintf(f, "%-12s ", "window");
		tg_fputs_safe_pad(f, s->windows[i].name, 24);
		for (int k = 0; k < TG_SUM_NFIG; k++)
			fprintf(f, " %22" PRId64, s->windows[i].fig[k]);
		fputc('\n', f);
	}
}

void tg_hist_bin_name(char *buf, size_t n, int b)
{
	static const char *const unit[] = { "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei" };
	uint64_t lo, hi;

	if (b <= 1) {
		snprintf(buf, n, "%d", b);
		return;
	}
	lo = UINT64_C(1) << (b - 1);
	hi = b < 64 ? (UINT64_C(1) << b) : 0;
	if (b - 1 < 10)
		snprintf(buf, n, "%" PRIu64 "-%" PRIu64, lo, hi - 1);
	else
		snprintf(buf, n, "%" PRIu64 "%s-%" PRIu64 "%s", lo >> ((b - 1) / 10 * 10),
			 unit[(b - 1) / 10], b < 64 ? (hi >> ((b - 1) / 10 * 10)) : 0,
			 unit[(b - 1) / 10]);
}

/* The table of e, under the heading "thread NAME" (or "process": name NULL). */
static void hist_table(FILE *f, const char *name, const struct tg_sum_entity *e)
{
	if (name) {
		fputs("\nthread ", f);
		tg_fputs_safe(f, name, strlen(name));
	} else {
		fputs("process", f);
	}
	fprintf(f, "\n%4s %-14s %14s %14s\n", "BIN", "SIZE", "ALLOCATIONS", "FREES");
	for (int b = 0; b < TG_SUM_BINS; b++) {
		char name[48];
		if (!e->hist_alloc[b] && !e->hist_free[b])
			continue;
		tg_hist_bin_name(name, sizeof(name), b);
		fprintf(f, "%4d %-14s %14" PRId64 " %14" PRId64 "\n", b, name, e->hist_alloc[b],
			e->hist_free[b]);
	}
}

void tg_hist_print(FILE *f, const struct tg_summary *s)
{
	hist_table(f, NULL, &s->process);
	for (size_t i = 0; i < s->n_threads; i++)
		hist_table(f, s->threads[i].name, &s->threads[i]);
}

static int hist_plot_in(const struct tg_sum_entity *e, const struct tg_plot_opts *o,
			struct tg_plot_files *pf, struct tg_diag *d);

int tg_hist_plot(const struct tg_sum_entity *e, const struct tg_plot_opts *o, struct tg_diag *d)
{
	struct tg_plot_files pf = TG_PLOT_FILES_INIT;
	int ret;

	if (tg_plot_files_open(&pf, o, "hist", d) < 0)
		return -1;
	ret = hist_plot_in(e, o, &pf, d);
	tg_plot_files_release(&pf);
	return ret;
}

/* tg_hist_plot's work, with the plot folder open. */
static int hist_plot_in(const struct tg_sum_entity *e, const struct tg_plot_opts *o,
			struct tg_plot_files *pf, struct tg_diag *d)
{
	struct tg_aout dat = { 0 }, script = { 0 };
	int lo = TG_SUM_BINS, hi = -1;

	for (int b = 0; b < TG_SUM_BINS; b++) {
		if (e->hist_alloc[b] || e->hist_free[b]) {
			if (b < lo)
				lo = b;
			hi = b;
		}
	}
	if (hi < 0)
		return tg_error(d, "%s has no allocations to plot",
				e->name ? "this thread" : "the summary");
	if (tg_plot_files_out(pf, &dat, "hist.dat", d) < 0)
		return -1;
	for (int b = lo; b <= hi; b++) {
		char name[48];
		tg_hist_bin_name(name, sizeof(name), b);
		/* Counts of 0 would break the log scale: gnuplot skips "NaN" points. */
		fprintf(dat.f, "%d %s ", b, name);
		if (e->hist_alloc[b])
			fprintf(dat.f, "%" PRId64, e->hist_alloc[b]);
		else
			fputs("NaN", dat.f);
		if (e->hist_free[b])
			fprintf(dat.f, " %" PRId64 "\n", e->hist_free[b]);
		else
			fputs(" NaN\n", dat.f);
	}
	if (tg_aout_commit(&dat, d) < 0) {
		tg_aout_abort(&dat);
		return -1;
	}
	tg_aout_release(&dat);
	if (tg_plot_files_out(pf, &script, "hist.gp", d) < 0)
		return -1;
	tg_gp_preamble(script.f, o, "hist");
	/* A thread's name comes from the run: only ever inside a quoted string. */
	fputs("set title ", script.f);
	if (e->name) {
		const char *pre = "Allocation sizes, thread ";
		size_t n = strlen(pre) + strlen(e->name) + 32;
		char *t = malloc(n);
		if (t == NULL) {
			tg_aout_abort(&script);
			return tg_error(d, "out of memory");
		}
		snprintf(t, n, "%s%s (power-of-two bins)", pre, e->name);
		tg_gp_quote(script.f, t, strlen(t));
		free(t);
	} else {
		fputs("'Allocation sizes, whole process (power-of-two bins)'", script.f);
	}
	fprintf(script.f,
		"\nset xlabel 'requested size (bytes)'\nset ylabel 'calls'\n"
		/* from 0.5: a bin of one allocation (one 80 MiB array) is a box, not a
		 * line on the axis, as it was with the log scale starting at 1 */
		"set logscale y\nset yrange [0.5:*]\nset grid ytics\nset style data histograms\n"
		"set style histogram clustered gap 1\nset style fill solid 0.6 border -1\n"
		"set xtics rotate by -45\n"
		"plot 'hist.dat' using 3:xtic(2) title 'allocations', \\\n"
		"     '' using 4 title 'frees'\n");
	return tg_plot_finish(o, pf, "hist", &script, NULL, d);
}

/* Width of the THREAD column for the first N sites. */
static int thread_width(const struct tg_snap_site *v, size_t n)
{
	size_t w = 6;
	for (size_t i = 0; i < n; i++)
		if (strlen(v[i].thread) > w)
			w = strlen(v[i].thread);
	return w > 40 ? 40 : (int)w;
}

/* The THREAD and SITE columns of a top or diff row, escaped, and the newline. */
static void acct_thread_site(FILE *f, int tw, const char *thread, const char *site)
{
	tg_fputs_safe_pad(f, thread, tw);
	fputs("  ", f);
	tg_fputs_safe(f, site, strlen(site));
	fputc('\n', f);
}

void tg_top_print(FILE *f, const struct tg_snapshot *s, size_t top)
{
	size_t n = top && top < s->n ? top : s->n;
	int tw = thread_width(s->sites, n);
	fputs("# ", f);
	tg_fputs_safe(f, s->path, strlen(s->path));
	if (s->label) {
		fputs(" label ", f);
		tg_fputs_safe(f, s->label, strlen(s->label));
	}
	fprintf(f, ": %zu sites, live %" PRId64 " bytes, allocated %" PRId64 " bytes\n",
		s->n, s->live_bytes, s->total_bytes);
	fprintf(f, "%14s %10s %16s %12s  %-*s  %s\n", "LIVE_BYTES", "LIVE_COUNT", "TOTAL_BYTES",
		"TOTAL_COUNT", tw, "THREAD", "SITE");
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "%14" PRId64 " %10" PRId64 " %16" PRId64 " %12" PRId64 "  ",
			s->sites[i].live_bytes, s->sites[i].live_count, s->sites[i].total_bytes,
			s->sites[i].total_count);
		acct_thread_site(f, tw, s->sites[i].thread, s->sites[i].site);
	}
}

void tg_diff_print(FILE *f, const struct tg_snapshot *base, const struct tg_snapshot *s,
		   const struct tg_snap_delta *v, size_t n, size_t top)
{
	size_t m = top && top < n ? top : n;
	size_t w = 6;
	int tw;
	for (size_t i = 0; i < m; i++)
		if (strlen(v[i].thread) > w)
			w = strlen(v[i].thread);
	tw = w > 40 ? 40 : (int)w;
	fputs("# base ", f);
	tg_fputs_safe(f, base->path, strlen(base->path));
	fprintf(f, ": live %" PRId64 " bytes\n# new  ", base->live_bytes);
	tg_fputs_safe(f, s->path, strlen(s->path));
	fprintf(f, ": live %" PRId64 " bytes\n# growth: %+" PRId64 " bytes live, %+" PRId64
		" bytes allocated\n", s->live_bytes,
		s->live_bytes - base->live_bytes, s->total_bytes - base->total_bytes);
	fprintf(f, "%14s %10s %14s %14s %16s  %-*s  %s\n", "LIVE_GROWTH", "COUNT", "BASE_LIVE",
		"LIVE", "TOTAL_GROWTH", tw, "THREAD", "SITE");
	for (size_t i = 0; i < m; i++) {
		fprintf(f, "%+14" PRId64 " %+10" PRId64 " %14" PRId64 " %14" PRId64 " %+16" PRId64
			"  ", v[i].live_bytes, v[i].live_count, v[i].base_live, v[i].live,
			v[i].total_bytes);
		acct_thread_site(f, tw, v[i].thread, v[i].site);
	}
}
