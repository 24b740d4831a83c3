/*
 * cmd_memg.c - threadgraph memg: memory graph per thread with numbered peaks.
 */
#include <string.h>

#include "cli.h"
#include "held.h"
#include "memg.h"

static const char memg_usage[] = "threadgraph memg [options] FILES...|RUN_DIR";

int cmd_memg(int argc, char **argv)
{
	struct tg_common_args c = { .no_time = tg_global_no_time };
	struct tg_graph_args g = { 0 };
	struct tg_peak_args p = TG_PEAK_ARGS_DEFAULT;
	struct tg_memg_opts o = { .rebase_kb = 30000 };
	struct tg_plot_opts po;
	struct tg_memg_report r = tg_cli_report;
	struct tg_dumpset files;
	struct tg_diag d;
	int nargs, ret, top_given = 0, held = 0;
	const struct tg_option opts[] = {
		{ "held", 0, TG_OPT_BOOL, &held, NULL, NULL,
		  "draw each thread's held memory over time instead (step lines, the top "
		  "threads, the others summed, all threads, the process): memg-held.EXT, and "
		  "the largest peak's per-thread shares in memg-held.txt" },
		{ "cap", 0, TG_OPT_NUMBER, &o.cap_kb, &o.has_cap, "N",
		  "clip plotted values to +-N KB" },
		{ "no_process", 0, TG_OPT_BOOL, &o.no_process, NULL, NULL,
		  "ignore process files (process.mem)" },
		{ "process_rebase", 0, TG_OPT_NUMBER, &o.rebase_kb, &o.has_rebase, "N",
		  "draw the process memory as the original did: KB minus N, on the threads' "
		  "axis (default: absolute MB on a second axis)" },
		{ "top-threads", 0, TG_OPT_COUNT, &o.top_threads, &top_given, "N",
		  "draw the N threads that moved the most memory in colours of their own, the "
		  "rest in grey (default 20)" },
		TG_PEAK_OPTIONS(&p),
		TG_COMMON_OPTIONS(&c),
		TG_GRAPH_OPTIONS(&g, "the graph and its legend (memg.txt)"),
		TG_TIME_AXIS_OPTION(&g),
		TG_OPT_END_ROW,
	};

	ret = tg_parse_options(argc, argv, opts, memg_usage,
			       "Plots each thread's memory deltas (KB) and the process memory "
			       "against time,\nlabels the peaks, and writes the legend memg.txt "
			       "(N: THREAD>FILE:LINE:FUNCTION=>DELTA).", &nargs);
	if (ret)
		return ret == 1 ? TG_EXIT_OK : TG_EXIT_USAGE;
	tg_resolve_run_bases(argv, nargs);  /* a base of runs: its latest */
	if (!nargs)
		return usage_error(memg_usage, "no dump files given");
	if (top_given && !o.top_threads)
		return usage_error(memg_usage, "--top-threads expects a count of at least 1");
	if ((ret = tg_cli_time_axis(&g, &o.clock, memg_usage)) ||
	    (ret = tg_cli_graph_opts(&g, &po, "svg", 1920, 1080, memg_usage)))
		return ret;
	if ((ret = tg_cli_dumpset(&files, argv, nargs, TG_VIEW_MEM)))
		goto out;
	o.has_time = tg_cli_has_time(&files, &c);
	o.has_origin = tg_cli_time_origin(files.cap, &o.origin) ||
		       tg_cli_text_origin(&files, &o.origin);
	if ((ret = tg_cli_peak_opts(&p, &o, memg_usage)))
		goto out;
	tg_cli_diag_init(&d, &c);
	if (held)
		ret = tg_held_run(&o, &po, files.v, files.n, &r, NULL, &d) < 0 ?
			error("%s", d.msg) : 0;
	else
		ret = tg_memg_run(&o, &po, files.v, files.n, &r, &d) < 0 ? error("%s", d.msg) : 0;
	tg_cli_diag_summary(&d);
	if (ret == 0)
		tg_cli_plot_note(&po, held ? "memg-held" : "memg");
out:
	tg_dumpset_release(&files);
	return ret;
}
