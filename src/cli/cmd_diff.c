/*
 * cmd_diff.c - threadgraph diff: per-site growth between two heap snapshots.
 */
#include <stdlib.h>

#include "acct_out.h"
#include "cli.h"

static const char diff_usage[] = "threadgraph diff [options] --base A B";

int cmd_diff(int argc, char **argv)
{
	struct tg_common_args c = { 0 };
	struct tg_snapshot a, b;
	struct tg_snap_delta *v = NULL;
	struct tg_diag d;
	const char *base = NULL;
	unsigned long top = 20;
	size_t n = 0;
	int nargs, ret;
	const struct tg_option opts[] = {
		{ "base", 0, TG_OPT_STRING, &base, NULL, "A",
		  "the earlier snapshot, or a run directory (its final snapshot)" },
		{ "top", 0, TG_OPT_COUNT, &top, NULL, "N", "print the N biggest growths (default 20, 0: all)" },
		{ "strict", 0, TG_OPT_BOOL, &c.strict, NULL, NULL,
		  "treat a malformed line as an error instead of skipping it" },
		TG_OPT_END_ROW,
	};

	ret = tg_parse_options(argc, argv, opts, diff_usage,
			       "Shows how live bytes grew per call site from the base snapshot A to "
			       "B, largest\ngrowth first (pprof --base, igprof -b).  A and B are "
			       "snapshot files (plain or\n.gz) or run directories (their final "
			       "snapshots).", &nargs);
	if (ret)
		return ret == 1 ? TG_EXIT_OK : TG_EXIT_USAGE;
	if (!base)
		return usage_error(diff_usage, "--base is required");
	if (nargs != 1)
		return usage_error(diff_usage, "expected one snapshot besides --base");
	tg_cli_diag_init(&d, &c);
	if (tg_snapshot_read(&a, base, &d) < 0)
		return error("%s", d.msg);
	if (tg_snapshot_read(&b, argv[0], &d) < 0) {
		ret = error("%s", d.msg);
		goto release_a;
	}
	if (tg_snapshot_diff(&a, &b, &v, &n, &d) < 0) {
		ret = error("%s", d.msg);
		goto release_b;
	}
	tg_diff_print(stdout, &a, &b, v, n, top);
	free(v);
	tg_cli_diag_summary(&d);
	ret = TG_EXIT_OK;
release_b:
	tg_snapshot_release(&b);
release_a:
	tg_snapshot_release(&a);
	return ret;
}
