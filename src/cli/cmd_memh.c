/*
 * cmd_memh.c - threadgraph memh: the functions that allocate and free the most.
 */
#include "cli.h"
#include "graphs.h"

static const char memh_usage[] = "threadgraph memh [options] FILES...|RUN_DIR";

int cmd_memh(int argc, char **argv)
{
	struct tg_common_args c = { .no_time = tg_global_no_time };
	struct tg_graph_args g = { 0 };
	struct tg_graph_opts o = { 0 };
	struct tg_plot_opts po;
	int nargs, ret;
	const struct tg_option opts[] = {
		TG_COMMON_OPTIONS(&c),
		TG_GRAPH_OPTIONS(&g, "the graph and its legend (memh.txt)"),
		TG_OPT_END_ROW,
	};

	ret = tg_parse_options(argc, argv, opts, memh_usage,
			       "Sums DELTA per FILE:LINE:FUNCTION over the thread .mem files and "
			       "plots the 30 most\nfreeing and 30 most allocating as numbered boxes "
			       "(memh.svg); legend memh.txt.", &nargs);
	if (ret)
		return ret == 1 ? TG_EXIT_OK : TG_EXIT_USAGE;
	tg_resolve_run_bases(argv, nargs);  /* a base of runs: its latest */
	if ((ret = tg_cli_refuse_aggregate(argv, nargs, "memh",
					   "sums each call's delta by call site: it needs",
					   "'threadgraph folded --metric delta' gives each call path's own delta")))
		return ret;
	if (!nargs)
		return usage_error(memh_usage, "no dump files given");
	o.has_time = !c.no_time;
	if ((ret = tg_cli_graph_opts(&g, &po, "svg", 1920, 1080, memh_usage)))
		return ret;
	return tg_cli_run_graph(tg_memh_run, "memh", &o, &po, &c, argv, nargs, TG_VIEW_MEM);
}
