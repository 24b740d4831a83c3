/*
 * cmd_folded.c - threadgraph folded: a run's calls as folded stacks, and the
 * options and notes it shares with flamegraph.
 */
#include <string.h>

#include "cli.h"
#include "fold.h"
#include "fold_cli.h"

static const char folded_usage[] = "threadgraph folded [options] RUN_DIR";

int tg_cli_fold_load(struct tg_fold_args *a, const char *path, const char *usage,
		     struct tg_fold *f, struct tg_diag *d)
{
	struct tg_fold_opts o = { 0 };

	o.metric = tg_fold_metric_find(a->metric);
	if (!o.metric)
		return usage_error(usage, "unknown metric '%s' (expected alloc, live, peak, "
				   "delta or time)", a->metric);
	if (a->thread && a->merge)
		return usage_error(usage, "--thread and --merge-threads exclude each other");
	o.path = path;
	o.thread = a->thread;
	o.merge_threads = a->merge;
	o.has_time = !a->c.no_time;
	tg_cli_diag_init(d, &a->c);
	tg_fold_init(f);
	if (tg_fold_load(f, &o, d) < 0) {
		tg_fold_release(f);
		return error("%s", d->msg);
	}
	if (f->unpaired)
		warning("%lu call%s had no return record (still running when the run ended): "
			"counted 0 for themselves", f->unpaired, f->unpaired == 1 ? "" : "s");
	if (f->mismatched)
		warning("%lu call%s paired with a return of another function (damaged dumps?)",
			f->mismatched, f->mismatched == 1 ? "" : "s");
	if (f->extra)
		warning("%lu return record%s left over after the last call", f->extra,
			f->extra == 1 ? "" : "s");
	if (f->sampled)
		warning("sampled run (one sample per %lld bytes on average): the values are "
			"estimates", (long long)f->sampled);
	tg_cli_diag_summary(d);
	return 0;
}

int cmd_folded(int argc, char **argv)
{
	struct tg_fold_args a = { .metric = "alloc", .c = { .no_time = tg_global_no_time } };
	struct tg_fold f;
	struct tg_diag d;
	int nargs, ret;
	const struct tg_option opts[] = {
		TG_FOLD_OPTIONS(&a),
		TG_OPT_END_ROW,
	};

	ret = tg_parse_options(argc, argv, opts, folded_usage,
			       "Prints a run's calls as folded stacks (FRAME;FRAME;... VALUE, "
			       "outermost frame\nfirst, each frame FUNCTION (FILE:LINE)) for "
			       "flamegraph.pl, inferno or speedscope.\nBy default each thread is "
			       "the root frame of its stacks.", &nargs);
	if (ret)
		return ret == 1 ? TG_EXIT_OK : TG_EXIT_USAGE;
	if (nargs != 1)
		return usage_error(folded_usage, "expected one run directory");
	if ((ret = tg_cli_fold_load(&a, argv[0], folded_usage, &f, &d)))
		return ret;
	ret = tg_fold_write(&f, stdout) ? error("unable to write to standard output") : 0;
	tg_fold_release(&f);
	return ret;
}
