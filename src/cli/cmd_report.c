/*
 * cmd_report.c - threadgraph report: one self-contained HTML page of a run.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomic_out.h"
#include "cli.h"
#include "fold_cli.h"
#include "gnuplot.h"
#include "report.h"

static const char report_usage[] =
	"threadgraph report [-o FILE] [-q] [--metric M] [--max-lines N] [--no-stitch] [--process] "
	"[--process_rebase N] [--peak N] [--peak_delta_time S] [--peak_delta_value N] "
	"[--time_from TIME] [--time_to TIME] [--no_time] [--strict] RUN_DIR";

static void report_note(void *ctx, const char *msg)
{
	(void)ctx;
	warning("%s", msg);
}

/* A stage of the report begins: one line on stderr (the stages take minutes on a
 * large run), as memg's "Processing data for thread NAME". */
static void report_step(void *ctx, const char *what)
{
	(void)ctx;
	fputs("report: ", stderr);
	tg_cli_put(stderr, what);
	fputs("...\n", stderr);
}

/* Removes DIR's files and DIR (the scratch directory this command made); DEPTH
 * levels of subfolders (the graphs' NAME-plot folders when no gnuplot ran). */
static void report_rm_scratch(const char *dir, int depth)
{
	DIR *dh = opendir(dir);
	struct dirent *e;

	if (dh) {
		while ((e = readdir(dh))) {
			char *p;
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			if (asprintf(&p, "%s/%s", dir, e->d_name) >= 0) {
				if (unlink(p) < 0 && depth > 0)
					report_rm_scratch(p, depth - 1);
				free(p);
			}
		}
		closedir(dh);
	}
	rmdir(dir);
}

int cmd_report(int argc, char **argv)
{
	struct tg_common_args c = { .no_time = tg_global_no_time };
	struct tg_peak_args p = TG_PEAK_ARGS_DEFAULT;
	struct tg_report_opts o = { .memg = { .rebase_kb = 30000, .no_process = 1 } };
	int process = 0, quiet = 0;
	struct tg_report_cb cb = { report_note, report_step, NULL };
	const char *output = "report.html", *tmpdir = getenv("TMPDIR");
	unsigned long max_lines = 300;
	struct tg_aout out = { 0 };
	struct tg_diag d;
	char *scratch = NULL;
	char gnuplot[4096];
	char kept[256];
	struct tg_capture *cap = NULL;
	int nargs, ret;
	const struct tg_option opts[] = {
		{ "output", 'o', TG_OPT_STRING, &output, NULL, "FILE",
		  "write the page to FILE (default report.html)" },
		{ "metric", 0, TG_OPT_STRING, &o.metric, NULL, "M",
		  "the flame graph's metric: alloc, live, peak, delta or time (default: peak "
		  "and alloc with accounting, else delta)" },
		{ "max-lines", 0, TG_OPT_COUNT, &max_lines, NULL, "N",
		  "show at most N lines of each peak's call subtree (default 300)" },
		{ "process", 0, TG_OPT_BOOL, &process, NULL, NULL,
		  "also plot the process memory (process.mem) in the memory graph" },
		{ "process_rebase", 0, TG_OPT_NUMBER, &o.memg.rebase_kb, &o.memg.has_rebase, "N",
		  "with --process: draw the process memory as memg --process_rebase does, KB "
		  "minus N on the threads' axis (default: absolute MB on a second axis)" },
		{ "no-stitch", 0, TG_OPT_BOOL, &o.no_stitch, NULL, NULL,
		  "flame graphs of delta or time: leave pool and asyncio tasks under the thread "
		  "that ran them (default: under the call that submitted them)" },
		{ "quiet", 'q', TG_OPT_BOOL, &quiet, NULL, NULL,
		  "print no progress lines (\"report: STAGE...\"; warnings still)" },
		TG_PEAK_OPTIONS(&p),
		TG_COMMON_OPTIONS(&c),
		TG_OPT_END_ROW,
	};

	ret = tg_parse_options(argc, argv, opts, report_usage,
			       "Writes one self-contained HTML page of a run: the memory graph "
			       "and its peaks, each\npeak's call subtree, flame graphs, and the "
			       "accounting summary and histograms.\nThe graphs need gnuplot; "
			       "without it the page says so and shows the rest.", &nargs);
	if (ret)
		return ret == 1 ? TG_EXIT_OK : TG_EXIT_USAGE;
	tg_resolve_run_bases(argv, nargs > 0);  /* RUN_DIR: a base of runs reads its latest */
	if (nargs != 1)
		return usage_error(report_usage, "expected one run directory");
	if (o.metric && !tg_fold_metric_find(o.metric)) {
		char names[128];
		tg_fold_metric_names(names, sizeof(names));
		return usage_error(report_usage, "unknown metric '%s' (expected %s)", o.metric,
				   names);
	}
	o.memg.has_time = !c.no_time;
	o.memg.no_process = !process;  /* RSS in MB flattens the threads' KB deltas */
	if ((ret = tg_cli_peak_opts(&p, &o.memg, report_usage)))
		return ret;
	if (quiet)
		cb.step = NULL;
	o.run_dir = argv[0];
	o.max_lines = max_lines ? max_lines : (size_t)-1;
	tg_cli_diag_init(&d, &c);
	/* a binary capture is read natively; its warnings are printed once here */
	if (tg_dumpset_open_capture(argv[0], &cap, &d) < 0)
		return error("%s", d.msg);
	if (cap)
		tg_cli_capture_warnings(cap);
	o.cap = cap;
	o.memg.has_origin = tg_cli_time_origin(cap, &o.memg.origin);
	if (tg_cli_capture_kept(cap, kept, sizeof(kept))) {
		o.covers = kept;
	} else if (!cap && tg_cli_dir_kept(argv[0], kept, sizeof(kept), &o.memg.origin, NULL)) {
		/* the text export of such a capture: as the capture */
		warning("%s (the dumps are its export)", kept);
		o.covers = kept;
		o.memg.has_origin = 1;
	}
	if (asprintf(&scratch, "%s/threadgraph-report-XXXXXX",
		     tmpdir && *tmpdir ? tmpdir : "/tmp") < 0) {
		tg_dumpset_free_capture(cap);
		return error("out of memory");
	}
	if (!mkdtemp(scratch)) {
		ret = error("unable to make a temporary directory '%s'", scratch);
		free(scratch);
		tg_dumpset_free_capture(cap);
		return ret;
	}
	o.scratch = scratch;
	if (tg_gnuplot_find(gnuplot, sizeof(gnuplot)) == 0)
		o.gnuplot = gnuplot;
	if (tg_cli_open_output(output, &out, &d) < 0 ||
	    tg_report_write(&o, out.f, &cb, &d) < 0 || tg_aout_commit(&out, &d) < 0) {
		if (out.f && ferror(out.f))  /* a write that failed: the file and errno */
			tg_aout_commit(&out, &d);
		tg_aout_abort(&out);
		ret = error("%s", d.msg);
	} else {
		tg_aout_release(&out);
		fprintf(stderr, "wrote %s\n", output);
		ret = TG_EXIT_OK;
	}
	report_rm_scratch(scratch, 1);
	free(scratch);
	tg_dumpset_free_capture(cap);
	tg_cli_diag_summary(&d);
	return ret;
}
