/*
 * cmd_interleave.c - threadgraph interleave: which thread ran when.
 */
#include "cli.h"
#include "graphs.h"
#include "memg.h"

static const char interleave_usage[] = "threadgraph interleave [options] FILES...|RUN_DIR";

int cmd_interleave(int argc, char **argv)
{
	struct tg_common_args c = { .no_time = tg_global_no_time };
	struct tg_graph_args g = { 0 };
	struct tg_peak_args p = TG_PEAK_ARGS_DEFAULT;
	struct tg_memg_opts mo = { 0 };
	struct tg_graph_opts o = { 0 };
	struct tg_plot_opts po;
	int nargs, ret;
	const struct tg_option opts[] = {
		{ "time_from", 0, TG_OPT_STRING, &p.time_from, NULL, "TIME",
		  "start at TIME: dd/mm/yyyy HH:MM, dd/mm/yy HH:MM, dd/mm/yyyy, dd/mm/yy, HH:MM" },
		{ "time_to", 0, TG_OPT_STRING, &p.time_to, NULL, "TIME",
		  "end at TIME (same formats, local time)" },
		TG_COMMON_OPTIONS(&c),
		TG_GRAPH_OPTIONS(&g, "the graph and its legend (interleave.txt)"),
		TG_TIME_AXIS_OPTION(&g),
		TG_OPT_END_ROW,
	};

	ret = tg_parse_options(argc, argv, opts, interleave_usage,
			       "Merges the .mem events of all threads in time order, folds runs of "
			       "one thread,\nand plots thread index against time (interleave.png); "
			       "legend interleave.txt.", &nargs);
	if (ret)
		return ret == 1 ? TG_EXIT_OK : TG_EXIT_USAGE;
	tg_resolve_run_bases(argv, nargs);  /* a base of runs: its latest */
	if ((ret = tg_cli_refuse_aggregate(argv, nargs, "interleave",
					   "orders each call's return in time: it needs",
					   NULL)))
		return ret;
	if (!nargs)
		return usage_error(interleave_usage, "no dump files given");
	mo.has_time = o.has_time = !c.no_time;
	if (c.no_time)
		return error("interleave needs timestamps: dumps written without them "
			     "(--no_time) cannot be ordered");
	if ((ret = tg_cli_time_axis(&g, &o.clock, interleave_usage)) ||
	    (ret = tg_cli_peak_opts(&p, &mo, interleave_usage)) ||
	    (ret = tg_cli_graph_opts(&g, &po, "png", 1920, 1080, interleave_usage)))
		return ret;
	o.has_from = mo.has_from;
	o.from = mo.from;
	o.has_to = mo.has_to;
	o.to = mo.to;
	return tg_cli_run_graph(tg_interleave_run, "interleave", &o, &po, &c, argv, nargs,
				TG_VIEW_MEM);
}
