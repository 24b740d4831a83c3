/*
 * cmd_decorate_stack.c - threadgraph decorate-stack: one call's subtree with the
 * time and memory of each call.
 */
#include <sys/stat.h>

#include "aggfile.h"
#include "cli.h"
#include "decorate.h"

static const char decorate_usage[] =
	"threadgraph decorate-stack [options] MEM STACK EVENT\n"
	"       threadgraph decorate-stack [options] RUN_DIR THREAD EVENT";

static void decorate_step(void *ctx, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "%s\n", msg);
}

/* The pairings warned of: the first TG_CLI_MAX_WARNINGS named, the rest counted
 * (a text run that dropped records mis-pairs every call after the drop). */
struct decorate_warned {
	char **paths;            /* MEM STACK (the command's operands) */
	unsigned long mismatched; /* calls paired with a return of another function */
};

static void decorate_mismatch(void *ctx, unsigned long stack_line, unsigned long mem_line)
{
	struct decorate_warned *w = ctx;

	if (w->mismatched++ >= TG_CLI_MAX_WARNINGS)
		return;
	fputs("warning: call at ", stderr);
	tg_cli_put(stderr, w->paths[1]);
	fprintf(stderr, ":%lu paired with a return of another function at ", stack_line);
	tg_cli_put(stderr, w->paths[0]);
	fprintf(stderr, ":%lu\n", mem_line);
}

/* Counts the pairings not named; says why they may be off when the run dropped
 * records (DROPPED, runinfo.json). */
static void decorate_mismatch_summary(const struct decorate_warned *w,
				      unsigned long long dropped)
{
	char more[64] = "";

	if (w->mismatched > TG_CLI_MAX_WARNINGS)
		snprintf(more, sizeof(more), ", %lu more than named above",
			 w->mismatched - TG_CLI_MAX_WARNINGS);
	if (w->mismatched)
		warning("%lu call%s of the subtree paired with a return of another function%s "
			"(%s)", w->mismatched, w->mismatched == 1 ? "" : "s", more,
			dropped ? "the recorder dropped records: see above" : "damaged dumps?");
}

int cmd_decorate_stack(int argc, char **argv)
{
	struct tg_common_args c = { .no_time = tg_global_no_time };
	struct tg_decorate_opts o = { NULL, " " };
	unsigned long max_lines = 0;
	struct tg_decorate_report r = { decorate_step, decorate_mismatch, NULL };
	struct tg_capture *cap = NULL;
	struct decorate_warned w = { NULL, 0 };
	unsigned long long dropped;
	struct tg_diag d;
	int nargs, ret;
	const struct tg_option opts[] = {
		{ "prefix", 0, TG_OPT_STRING, &o.prefix, NULL, "P",
		  "strip P from file names that start with it" },
		{ "indent", 0, TG_OPT_STRING, &o.indent, NULL, "S",
		  "indent each nesting level with S (default one space)" },
		{ "depth", 0, TG_OPT_COUNT, &o.depth, &o.has_depth, "N",
		  "print only the calls at most N levels below the event's (0: the call "
		  "alone; default: all)" },
		{ "max-lines", 0, TG_OPT_COUNT, &max_lines, NULL, "N",
		  "print at most N calls, then a line counting those left out (default 0: "
		  "all)" },
		TG_COMMON_OPTIONS(&c),
		TG_OPT_END_ROW,
	};

	ret = tg_parse_options(argc, argv, opts, decorate_usage,
			       "Prints the call subtree that ends with EVENT (a line number of MEM, "
			       "or the text of a\nMEM line or of a memg.txt line), each call as\n"
			       "FUNCTION@FILE:START-END, Time: SECONDS s, Memory: DELTA B\n"
			       "On a binary capture (RUN_DIR or its capture.tg), THREAD is the "
			       "thread's file base name\nand EVENT its record number (line EVENT of "
			       "the exported THREAD.mem) or a line's text.\n"
			       "--depth and --max-lines bound the output, and the memory used, of "
			       "a large subtree\n(a long-running thread's run()): a last line "
			       "counts the calls left out.", &nargs);
	if (ret)
		return ret == 1 ? TG_EXIT_OK : TG_EXIT_USAGE;
	o.max_lines = max_lines;
	tg_resolve_run_bases(argv, nargs > 0);  /* RUN_DIR: a base of runs reads its latest */
	if (nargs >= 1 && tg_aggfile_is_run(argv[0]))
		return error("'%s' is an aggregate run (aggregate.tga): it keeps each call path's "
			     "totals, not each call, and decorate-stack needs a full capture "
			     "(record it without --aggregate)", argv[0]);
	if (nargs != 3)
		return usage_error(decorate_usage, "expected MEM STACK EVENT or RUN_DIR THREAD EVENT, "
				   "got %d argument%s",
				   nargs, nargs == 1 ? "" : "s");
	if (c.no_time)
		return error("decorate-stack needs timestamps: dumps written without them "
			     "(--no_time) cannot be paired");
	w.paths = argv;
	r.ctx = &w;
	tg_cli_diag_init(&d, &c);
	ret = tg_dumpset_open_capture(argv[0], &cap, &d);
	if (ret < 0)
		return error("%s", d.msg);
	if (ret > 0) {
		tg_cli_capture_warnings(cap);
		ret = tg_decorate_capture_run(cap, argv[1], argv[2], &o, stdout, &r, &d) < 0 ?
			error("%s", d.msg) : 0;
		decorate_mismatch_summary(&w, 0);
		tg_dumpset_free_capture(cap);
		return ret;
	}
	{
		struct stat st;
		if (stat(argv[0], &st) == 0 && S_ISDIR(st.st_mode))
			return error("'%s' holds no capture.tg: for a text run, give its dumps "
				     "DIR/THREAD.mem DIR/THREAD.stack EVENT", argv[0]);
	}
	dropped = tg_cli_text_dropped(argv[0]);  /* said before the pairings it explains */
	ret = tg_decorate_run(argv[0], argv[1], argv[2], &o, stdout, &r, &d) < 0 ?
		error("%s", d.msg) : 0;
	decorate_mismatch_summary(&w, dropped);
	tg_cli_diag_summary(&d);
	return ret;
}
