/*
 * cmd_flamegraph.c - threadgraph flamegraph: a run's interactive flame graph
 * as one self-contained SVG file.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "atomic_out.h"
#include "cli.h"
#include "flamesvg.h"
#include "fold_cli.h"

static const char flamegraph_usage[] =
	"threadgraph flamegraph [-o FILE] [--metric M] [--thread NAME | --merge-threads] "
	"[--max-depth N] [--no-stitch] [--title TEXT] [--width PX] [--min-width PX] [--no_time] "
	"[--strict] RUN_DIR";

int cmd_flamegraph(int argc, char **argv)
{
	struct tg_fold_args a = { .metric = "alloc", .max_depth = TG_FOLD_MAX_DEPTH,
				   .c = { .no_time = tg_global_no_time } };
	struct tg_flamesvg_opts so = { .id = "tgflame", .standalone = 1 };
	struct tg_flamesvg_stats st;
	const char *output = "flame.svg", *title = NULL;
	unsigned long width = 1200;
	double min_px = 0.1;
	struct tg_aout out = { 0 };
	struct tg_fold f;
	struct tg_diag d;
	char *deftitle = NULL;
	int nargs, ret;
	const struct tg_option opts[] = {
		{ "output", 'o', TG_OPT_STRING, &output, NULL, "FILE",
		  "write the flame graph to FILE (default flame.svg)" },
		TG_FOLD_OPTIONS(&a),
		{ "title", 0, TG_OPT_STRING, &title, NULL, "TEXT",
		  "the graph's title (default: the metric and the run)" },
		{ "width", 0, TG_OPT_COUNT, &width, NULL, "PX", "width in pixels (default 1200)" },
		{ "min-width", 0, TG_OPT_NUMBER, &min_px, NULL, "PX",
		  "hide frames narrower than PX pixels (default 0.1); the graph says how many" },
		TG_OPT_END_ROW,
	};

	ret = tg_parse_options(argc, argv, opts, flamegraph_usage,
			       "Draws a run's flame graph as one self-contained SVG file: hover "
			       "shows a frame's\nvalue and share, a click zooms on it, the search "
			       "box highlights frames.\nOpens in any browser; nothing is fetched.",
			       &nargs);
	if (ret)
		return ret == 1 ? TG_EXIT_OK : TG_EXIT_USAGE;
	tg_resolve_run_bases(argv, nargs > 0);  /* RUN_DIR: a base of runs reads its latest */
	if (nargs != 1)
		return usage_error(flamegraph_usage, "expected one run directory");
	if (width < 200 || width > 100000)
		return usage_error(flamegraph_usage, "--width must be between 200 and 100000");
	if (!(min_px > 0) || min_px > 100)
		return usage_error(flamegraph_usage, "--min-width must be above 0 and at most 100");
	if ((ret = tg_cli_fold_load(&a, argv[0], flamegraph_usage, &f, &d)))
		return ret;
	if (!title) {
		char part[160] = "", kept[256];
		struct tg_capture *cap = NULL;
		int64_t range[2] = { 0, -1 };
		double origin;
		int limited = 0;
		/* the recorded calls of a capture of limited size, or of its text
		 * export: the part of the run kept */
		if (!f.metric->from_snapshot) {
			int r = tg_dumpset_open_capture(argv[0], &cap, &d);
			if (r > 0 && cap->seg_first > 1) {
				limited = 1;
				range[0] = cap->kept_from_us - cap->start_us;
				range[1] = cap->has_end ? cap->end_us - cap->start_us : -1;
			} else if (r == 0) {
				limited = tg_cli_dir_kept(argv[0], kept, sizeof(kept), &origin, range);
			}
		}
		tg_dumpset_free_capture(cap);
		if (limited && range[1] >= 0)
			snprintf(part, sizeof(part), " (%.3f-%.3f s of the run kept)",
				 (double)range[0] / 1e6, (double)range[1] / 1e6);
		else if (limited)
			snprintf(part, sizeof(part), " (from %.3f s of the run kept)",
				 (double)range[0] / 1e6);
		if (asprintf(&deftitle, "%s: %s%s%s \xe2\x80\x94 %s%s", f.metric->name, f.metric->what,
			     a.thread ? ", thread " : "", a.thread ? a.thread : "", f.source,
			     part) < 0) {
			deftitle = NULL;
			ret = error("out of memory");
			goto out;
		}
		title = deftitle;
	}
	so.title = title;
	so.width = (int)width;
	so.min_px = min_px;
	if (tg_cli_open_output(output, &out, &d) < 0 ||
	    tg_flamesvg_write(out.f, &f, &so, &st, &d) < 0 || tg_aout_commit(&out, &d) < 0) {
		if (out.f && ferror(out.f))  /* a write that failed: the file and errno */
			tg_aout_commit(&out, &d);
		tg_aout_abort(&out);
		ret = error("%s", d.msg);
		goto out;
	}
	tg_aout_release(&out);
	fprintf(stderr, "%s: %zu frames drawn", output, st.drawn);
	if (st.hidden)
		fprintf(stderr, ", %zu narrower than %g px hidden", st.hidden, min_px);
	fputc('\n', stderr);
out:
	free(deftitle);
	tg_fold_release(&f);
	return ret;
}
