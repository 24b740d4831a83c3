/*
 * cmd_top.c - threadgraph top: the biggest call sites of a heap snapshot.
 */
#include <string.h>

#include "acct_out.h"
#include "cli.h"

static const char top_usage[] =
	"threadgraph top [--top N] [--sort live|total] [--depth N] [--merge-threads] [--strict] "
	"SNAPSHOT";

/* Sort keys. */
static const struct {
	const char *name;
	enum tg_snap_key key;
} top_sorts[] = {
	{ "live", TG_SNAP_LIVE },
	{ "total", TG_SNAP_TOTAL },
};

int cmd_top(int argc, char **argv)
{
	struct tg_common_args c = { 0 };
	struct tg_snapshot s;
	struct tg_diag d;
	const char *sort = "live";
	unsigned long top = 20, depth = TG_SNAP_DEPTH_DEFAULT;
	int nargs, ret, merge = 0;
	size_t k;
	const struct tg_option opts[] = {
		{ "top", 0, TG_OPT_COUNT, &top, NULL, "N", "print the N biggest sites (default 20, 0: all)" },
		{ "sort", 0, TG_OPT_STRING, &sort, NULL, "KEY",
		  "live (bytes still in use, default) or total (bytes allocated: churn)" },
		{ "depth", 0, TG_OPT_COUNT, &depth, NULL, "N",
		  "show N frames of calling context, innermost first (default 5, 0: all); "
		  "sites that then print the same are summed" },
		{ "merge-threads", 0, TG_OPT_BOOL, &merge, NULL, NULL,
		  "sum the same context over all threads (default: one site per thread)" },
		{ "strict", 0, TG_OPT_BOOL, &c.strict, NULL, NULL,
		  "treat a malformed line as an error instead of skipping it" },
		TG_OPT_END_ROW,
	};

	ret = tg_parse_options(argc, argv, opts, top_usage,
			       "Lists the call sites of a heap snapshot, biggest first: each thread's "
			       "calling\ncontexts, innermost call first.  SNAPSHOT is a snapshot file "
			       "(plain or .gz) or a\nrun directory (its final snapshot).", &nargs);
	if (ret)
		return ret == 1 ? TG_EXIT_OK : TG_EXIT_USAGE;
	tg_resolve_run_bases(argv, nargs > 0);  /* RUN_DIR: a base of runs reads its latest */
	if (nargs != 1)
		return usage_error(top_usage, "expected one snapshot");
	for (k = 0; k < sizeof(top_sorts) / sizeof(top_sorts[0]); k++)
		if (!strcmp(sort, top_sorts[k].name))
			break;
	if (k == sizeof(top_sorts) / sizeof(top_sorts[0]))
		return usage_error(top_usage, "unknown sort key '%s' (expected live or total)", sort);
	tg_cli_diag_init(&d, &c);
	if (tg_snapshot_read(&s, argv[0], &d) < 0)
		return error("%s", d.msg);
	if (tg_snapshot_group(&s, (unsigned)(depth > 1000000 ? 1000000 : depth), merge, &d) < 0) {
		tg_snapshot_release(&s);
		return error("%s", d.msg);
	}
	tg_snapshot_sort(&s, top_sorts[k].key);
	tg_top_print(stdout, &s, top);
	tg_snapshot_release(&s);
	tg_cli_diag_summary(&d);
	return TG_EXIT_OK;
}
