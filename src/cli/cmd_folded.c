/*
 * cmd_folded.c - threadgraph folded: a run's calls as folded stacks.
 */
#include <string.h>

#include "cli.h"
#include "fold.h"
#include "fold_cli.h"

static const char folded_usage[] = "threadgraph folded [options] RUN_DIR";

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
	tg_resolve_run_bases(argv, nargs > 0);  /* RUN_DIR: a base of runs reads its latest */
	if (nargs != 1)
		return usage_error(folded_usage, "expected one run directory");
	if ((ret = tg_cli_fold_load(&a, argv[0], folded_usage, &f, &d)))
		return ret;
	ret = tg_fold_write(&f, stdout) ? error("unable to write to standard output") : 0;
	tg_fold_release(&f);
	return ret;
}
