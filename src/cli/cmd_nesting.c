/*
 * cmd_nesting.c - threadgraph nesting: stack depth of each call against time.
 */
#include "cli.h"
#include "graphs.h"

static const char nesting_usage[] = "threadgraph nesting [options] FILES...|RUN_DIR";

int cmd_nesting(int argc, char **argv)
{
	struct tg_common_args c = { .no_time = tg_global_no_time };
	struct tg_graph_args g = { 0 };
	struct tg_graph_opts o = { 0 };
	struct tg_plot_opts po;
	int nargs, ret;
	const struct tg_option opts[] = {
		TG_COMMON_OPTIONS(&c),
		TG_GRAPH_OPTIONS(&g, "the graph"),
		TG_TIME_AXIS_OPTION(&g),
		TG_OPT_END_ROW,
	};

	ret = tg_parse_options(argc, argv, opts, nesting_usage,
			       "Plots the depth of each call of the .stack files against its time, one "
			       "series per thread\n(nesting.png).", &nargs);
	if (ret)
		return ret == 1 ? TG_EXIT_OK : TG_EXIT_USAGE;
	tg_resolve_run_bases(argv, nargs);  /* a base of runs: its latest */
	if ((ret = tg_cli_refuse_aggregate(argv, nargs, "nesting",
					   "plots the depth of each call: it needs",
					   NULL)))
		return ret;
	if (!nargs)
		return usage_error(nesting_usage, "no dump files given");
	o.has_time = !c.no_time;
	if ((ret = tg_cli_time_axis(&g, &o.clock, nesting_usage)) ||
	    (ret = tg_cli_graph_opts(&g, &po, "png", 1920, 1080, nesting_usage)))
		return ret;
	return tg_cli_run_graph(tg_nesting_run, "nesting", &o, &po, &c, argv, nargs,
				TG_VIEW_STACK);
}
