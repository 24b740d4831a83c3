/*
 * cmd_hist.c - threadgraph hist: power-of-two histograms of allocation sizes.
 */
#include "acct_out.h"
#include "cli.h"

#include <string.h>

static const char hist_usage[] =
	"threadgraph hist [-o DIR] [--terminal TERM] [--size WxH] [--keep] [--script-only] "
	"[--no-graph] [--thread NAME] [--strict] RUN_DIR";

int cmd_hist(int argc, char **argv)
{
	struct tg_common_args c = { 0 };
	struct tg_graph_args g = { 0 };
	struct tg_plot_opts po;
	struct tg_summary s;
	struct tg_diag d;
	const struct tg_sum_entity *e;
	const char *thread = NULL;
	int nargs, ret, no_graph = 0;
	const struct tg_option opts[] = {
		TG_GRAPH_OPTIONS(&g, "the graph"),
		{ "no-graph", 0, TG_OPT_BOOL, &no_graph, NULL, NULL,
		  "print the table only, write no graph" },
		{ "thread", 0, TG_OPT_STRING, &thread, NULL, "NAME",
		  "draw the histogram of thread NAME (its file base name, as in the table) "
		  "instead of the process's" },
		{ "strict", 0, TG_OPT_BOOL, &c.strict, NULL, NULL,
		  "treat a malformed line as an error instead of skipping it" },
		TG_OPT_END_ROW,
	};

	ret = tg_parse_options(argc, argv, opts, hist_usage,
			       "Prints the sizes requested and freed, in power-of-two bins, for the "
			       "process and\neach thread, and draws the process histogram, or one thread's "
			       "with --thread\n(hist.svg; data hist.dat).", &nargs);
	if (ret)
		return ret == 1 ? TG_EXIT_OK : TG_EXIT_USAGE;
	tg_resolve_run_bases(argv, nargs > 0);  /* RUN_DIR: a base of runs reads its latest */
	if (nargs != 1)
		return usage_error(hist_usage, "expected one run directory");
	if ((ret = tg_cli_graph_opts(&g, &po, "svg", 1280, 720, hist_usage)))
		return ret;
	tg_cli_diag_init(&d, &c);
	if (tg_summary_read(&s, argv[0], &d) < 0)
		return error("%s", d.msg);
	e = &s.process;
	if (thread != NULL) {
		e = NULL;
		for (size_t i = 0; i < s.n_threads; i++)
			if (strcmp(s.threads[i].name, thread) == 0)
				e = &s.threads[i];
		if (e == NULL) {
			tg_summary_release(&s);
			return error("%s: no thread named '%s' in the summary (see the table "
				     "printed without --thread)", argv[0], thread);
		}
	}
	tg_hist_print(stdout, &s);
	ret = TG_EXIT_OK;
	if (!no_graph && tg_hist_plot(e, &po, &d) < 0)
		ret = error("%s", d.msg);
	else if (!no_graph)
		tg_cli_plot_note(&po, "hist");
	tg_summary_release(&s);
	tg_cli_diag_summary(&d);
	return ret;
}
