/*
 * cmd_export.c - threadgraph export: a binary capture back to the text dumps.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "export.h"

static const char export_usage[] = "threadgraph export [options] RUN_DIR|CAPTURE";

int cmd_export(int argc, char **argv)
{
	struct tg_capture *cap = NULL;
	struct tg_export_stats st;
	struct tg_diag d = { 0 };
	const char *outdir = NULL;
	char *dir = NULL;
	int nargs, ret, quiet = 0;
	unsigned long max_mib = ULONG_MAX;  /* unset: tg_export_default_max */
	const struct tg_option opts[] = {
		{ "max-output", 0, TG_OPT_COUNT, &max_mib, NULL, "MIB",
		  "write at most MIB mebibytes of text (default: 1024 plus 100 times the "
		  "capture's size, 0: no limit): a .stack line is indented by its depth" },
		{ "output", 'o', TG_OPT_STRING, &outdir, NULL, "DIR",
		  "write the files into DIR, created if missing (default: the capture's directory)" },
		{ "quiet", 'q', TG_OPT_BOOL, &quiet, NULL, NULL,
		  "do not print what was written" },
		TG_OPT_END_ROW,
	};

	ret = tg_parse_options(argc, argv, opts, export_usage,
			       "Writes the text dumps of a binary capture (RUN_DIR/capture.tg), "
			       "byte for byte what\nthe recorder writes in text mode: THREAD.mem, "
			       "THREAD.stack, process.mem.\nNever overwrites a file.", &nargs);
	if (ret)
		return ret == 1 ? TG_EXIT_OK : TG_EXIT_USAGE;
	tg_resolve_run_bases(argv, nargs > 0);  /* RUN_DIR: a base of runs reads its latest */
	if (nargs != 1)
		return usage_error(export_usage, "expected one run directory or capture file");
	ret = tg_dumpset_open_capture(argv[0], &cap, &d);
	if (ret < 0)
		return error("%s", d.msg);
	if (ret == 0)
		return error("'%s' is not a capture (a run directory holding %s, or that file)",
			     argv[0], TG_CAP_FILENAME);
	tg_cli_capture_warnings(cap);
	if (!outdir) {
		const char *slash = strrchr(cap->path, '/');
		size_t n = slash ? (size_t)(slash - cap->path) : 0;
		if (!(dir = malloc(n + 2))) {
			ret = error("out of memory");
			goto out;
		}
		if (n)
			memcpy(dir, cap->path, n);
		else
			dir[n++] = '.';
		dir[n] = '\0';
		outdir = dir;
	}
	if (tg_export_run(cap, outdir, max_mib == ULONG_MAX ? tg_export_default_max(cap)
			  : (uint64_t)max_mib << 20, &st, &d) < 0) {
		ret = error("%s", d.msg);
		goto out;
	}
	if (st.dropped)
		warning("the recorder lost %llu record%s: the files lack them",
			(unsigned long long)st.dropped, st.dropped == 1 ? "" : "s");
	if (!quiet) {
		fprintf(stderr, "wrote %lu file%s (%llu lines) into ", st.files,
			st.files == 1 ? "" : "s", (unsigned long long)st.records);
		tg_cli_put(stderr, outdir);
		fputc('\n', stderr);
	}
	ret = TG_EXIT_OK;
out:
	free(dir);
	tg_dumpset_free_capture(cap);
	return ret;
}
