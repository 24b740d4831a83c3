/*
 * cmd_summary.c - threadgraph summary: the allocation-accounting figures of a run.
 */
#include <stdlib.h>
#include <string.h>

#include "acct_out.h"
#include "aggfile.h"
#include "cli.h"
#include "fmt.h"
#include "linereader.h"

static const char summary_usage[] = "threadgraph summary [--json] [--strict] RUN_DIR";

/* Copies FILE (plain or gzip) to stdout, terminal-unsafe text as JSON \u
 * escapes (tg_fputs_json_safe). */
static int summary_cat(const char *path, struct tg_diag *d)
{
	struct tg_lr lr;
	const char *line;
	size_t len;
	int r;

	if (tg_lr_open(&lr, path, 0, d) < 0)
		return -1;
	while ((r = tg_lr_next(&lr, &line, &len, d)) == 1) {
		tg_fputs_json_safe(stdout, line, len);
		putchar('\n');
	}
	tg_lr_release(&lr);
	return r < 0 ? -1 : 0;
}

int cmd_summary(int argc, char **argv)
{
	struct tg_common_args c = { 0 };
	struct tg_summary s;
	struct tg_diag d;
	int nargs, ret, json = 0;
	char *path;
	const struct tg_option opts[] = {
		{ "json", 0, TG_OPT_BOOL, &json, NULL, NULL,
		  "print summary.json (keys such as total_requested_bytes, peak_bytes, live_bytes)" },
		{ "strict", 0, TG_OPT_BOOL, &c.strict, NULL, NULL,
		  "treat a malformed line as an error instead of skipping it" },
		TG_OPT_END_ROW,
	};

	ret = tg_parse_options(argc, argv, opts, summary_usage,
			       "Prints the allocation summary of a run made with accounting on:\n"
			       "bytes requested and freed, allocation and free calls, bytes live "
			       "at the end\nand peak bytes in use, for the process, each thread "
			       "and each window.\nRUN_DIR is the run directory (or its summary.txt[.gz]).",
			       &nargs);
	if (ret)
		return ret == 1 ? TG_EXIT_OK : TG_EXIT_USAGE;
	tg_resolve_run_bases(argv, nargs > 0);  /* RUN_DIR: a base of runs reads its latest */
	if (nargs != 1)
		return usage_error(summary_usage, "expected one run directory");
	tg_cli_diag_init(&d, &c);
	if (json) {
		if (!(path = tg_acct_file(argv[0], "summary.json", &d)))
			return error("%s", d.msg);
		ret = summary_cat(path, &d) < 0 ? error("%s", d.msg) : TG_EXIT_OK;
		free(path);
		return ret;
	}
	if (tg_aggfile_is_run(argv[0])) {
		/* an aggregate run: its call paths and curves, then accounting if on */
		struct tg_aggfile a;
		if (tg_aggfile_load(&a, argv[0], &d) < 0) {
			tg_aggfile_release(&a);
			return error("%s", d.msg);
		}
		tg_aggfile_summary(stdout, &a, 5);
		tg_aggfile_release(&a);
		if (tg_summary_read(&s, argv[0], &d) < 0)
			return TG_EXIT_OK;
		fputs("\n", stdout);
	} else if (tg_summary_read(&s, argv[0], &d) < 0)
		return error("%s", d.msg);
	tg_summary_print(stdout, &s);
	tg_summary_release(&s);
	tg_cli_diag_summary(&d);
	return TG_EXIT_OK;
}
