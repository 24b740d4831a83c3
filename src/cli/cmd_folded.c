/*
 * cmd_folded.c - threadgraph folded: a run's calls as folded stacks.
 */
#include <stdint.h>
#include <string.h>

#include "cli.h"
#include "fold.h"
#include "fold_cli.h"

static const char folded_usage[] =
	"threadgraph folded [--metric M] [--thread NAME | --merge-threads] [--max-depth N] "
	"[--no-stitch] [--max-output MB] [--no_time] [--strict] RUN_DIR";

/* Default of --max-output: more text than any flame graph tool takes in. */
#define TG_FOLDED_MAX_MIB 1024

int cmd_folded(int argc, char **argv)
{
	struct tg_fold_args a = { .metric = "alloc", .max_depth = TG_FOLD_MAX_DEPTH,
				   .c = { .no_time = tg_global_no_time } };
	struct tg_fold f;
	struct tg_diag d;
	unsigned long max_mib = TG_FOLDED_MAX_MIB;
	unsigned depth;
	uint64_t size;
	int nargs, ret;
	const struct tg_option opts[] = {
		TG_FOLD_OPTIONS(&a),
		{ "max-output", 0, TG_OPT_COUNT, &max_mib, NULL, "MB",
		  "write at most MB megabytes (2^20 bytes) of stacks (default 1024, 0: no limit): a line "
		  "repeats its whole stack, so deep calls make much text" },
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
	size = tg_fold_text_size(&f, &depth);
	if (max_mib && size > (uint64_t)max_mib << 20) {
		ret = error("the folded stacks of '%s' would be more than %lu MB of text "
			    "(%llu MB: stacks up to %u frames deep); give --max-output %llu to "
			    "write them, or --thread NAME to fold one thread", argv[0], max_mib,
			    (unsigned long long)(size >> 20), depth,
			    (unsigned long long)((size >> 20) + 1));
		tg_fold_release(&f);
		return ret;
	}
	/* A write error is main_finish_stdout's to report: a reader that went
	 * away (folded | head) is not one. */
	ret = tg_fold_write(&f, stdout) && !ferror(stdout) ? error("out of memory") : 0;
	tg_fold_release(&f);
	return ret;
}
