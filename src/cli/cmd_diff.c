/*
 * cmd_diff.c - threadgraph diff: per-site growth between two heap snapshots.
 */
#include <stdlib.h>

#include "acct_out.h"
#include "cli.h"

static const char diff_usage[] =
	"threadgraph diff --base A [--top N] [--depth N] [--merge-threads | --per-thread] "
	"[--strict] B";

int cmd_diff(int argc, char **argv)
{
	struct tg_common_args c = { 0 };
	struct tg_snapshot a, b;
	struct tg_snap_delta *v = NULL;
	struct tg_diag d;
	const char *base = NULL;
	unsigned long top = 20, depth = TG_SNAP_DEPTH_DEFAULT;
	size_t n = 0;
	int nargs, ret, merge = 0, per_thread = 0;
	unsigned dep;
	const struct tg_option opts[] = {
		{ "base", 0, TG_OPT_STRING, &base, NULL, "A",
		  "the earlier snapshot, or a run directory (its final snapshot)" },
		{ "top", 0, TG_OPT_COUNT, &top, NULL, "N", "print the N biggest growths (default 20, 0: all)" },
		{ "depth", 0, TG_OPT_COUNT, &depth, NULL, "N",
		  "show N frames of calling context, innermost first (default 5, 0: all); "
		  "sites that then print the same are summed" },
		{ "merge-threads", 0, TG_OPT_BOOL, &merge, NULL, NULL,
		  "sum the same context over all threads (the default for snapshots of two runs)" },
		{ "per-thread", 0, TG_OPT_BOOL, &per_thread, NULL, NULL,
		  "one site per thread (the default for two snapshots of one run)" },
		{ "strict", 0, TG_OPT_BOOL, &c.strict, NULL, NULL,
		  "treat a malformed line as an error instead of skipping it" },
		TG_OPT_END_ROW,
	};

	ret = tg_parse_options(argc, argv, opts, diff_usage,
			       "Shows how live bytes grew per call site from the base snapshot A to "
			       "B, largest\ngrowth first (pprof --base, igprof -b).  A and B are "
			       "snapshot files (plain or\n.gz) or run directories (their final "
			       "snapshots).  Threads are compared by name within\none run and merged "
			       "across runs unless told otherwise.", &nargs);
	if (ret)
		return ret == 1 ? TG_EXIT_OK : TG_EXIT_USAGE;
	tg_resolve_run_bases(argv, nargs);  /* a base of runs: its latest */
	if (base)
		tg_resolve_run_bases((char **)&base, 1);
	if (!base)
		return usage_error(diff_usage, "--base is required");
	if (nargs != 1)
		return usage_error(diff_usage, "expected one snapshot besides --base");
	if (merge && per_thread)
		return usage_error(diff_usage, "--merge-threads and --per-thread exclude each other");
	dep = (unsigned)(depth > 1000000 ? 1000000 : depth);
	tg_cli_diag_init(&d, &c);
	if (tg_snapshot_read(&a, base, &d) < 0)
		return error("%s", d.msg);
	if (tg_snapshot_read(&b, argv[0], &d) < 0) {
		ret = error("%s", d.msg);
		goto release_a;
	}
	/* Thread names of two runs need not match (Thread-3 in one is Thread-5 in
	 * the other): across runs, contexts are compared over all threads. */
	if (!merge && !per_thread)
		merge = !tg_snapshot_same_run(&a, &b);
	if (tg_snapshot_group(&a, dep, merge, &d) < 0 || tg_snapshot_group(&b, dep, merge, &d) < 0
	    || tg_snapshot_diff(&a, &b, &v, &n, &d) < 0) {
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
