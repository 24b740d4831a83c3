/*
 * cmd_peaks.c - threadgraph peaks: the peaks memg would label, as text or JSON.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "marks.h"
#include "memg.h"
#include "peaks_out.h"

static const char peaks_usage[] = "threadgraph peaks [options] FILES...|RUN_DIR";

/* Sort orders of the list. */
static const struct {
	const char *name;
	void (*sort)(struct tg_peaks *p);
} peaks_sorts[] = {
	{ "time", NULL },   /* selection order, which is time order */
	{ "size", tg_peaks_sort_size },
};

static void peaks_skip(void *ctx, const struct tg_dumpfile *df, const char *why)
{
	(void)ctx;
	fputs("warning: '", stderr);
	tg_cli_put(stderr, df->path);
	fprintf(stderr, "' skipped: %s\n", why);
}

int cmd_peaks(int argc, char **argv)
{
	struct tg_common_args c = { .no_time = tg_global_no_time };
	struct tg_peak_args p = TG_PEAK_ARGS_DEFAULT;
	struct tg_memg_opts o = { 0 };
	struct tg_memg_report r = { NULL, peaks_skip, NULL, NULL };
	struct tg_dumpset files;
	struct tg_peaks peaks;
	struct tg_diag d;
	const char *sort = "time", *phase = NULL;
	struct tg_marks marks;
	unsigned long top = 0;
	int nargs, ret, json = 0, has_top = 0, every = 0;
	size_t s;
	const struct tg_option opts[] = {
		TG_PEAK_OPTIONS(&p),
		{ "json", 0, TG_OPT_BOOL, &json, NULL, NULL, "print a JSON array of objects" },
		{ "top", 0, TG_OPT_COUNT, &top, &has_top, "N",
		  "keep only the N peaks of largest |delta|" },
		{ "every", 0, TG_OPT_BOOL, &every, NULL, NULL,
		  "every return whose |delta| exceeds --peak is a peak: no spacing "
		  "(--peak_delta_* unused), labels N in time order; with --top N the "
		  "memory held does not grow with the run" },
		{ "sort", 0, TG_OPT_STRING, &sort, NULL, "KEY",
		  "order: time (default) or size (largest |delta| first)" },
		{ "phase", 0, TG_OPT_STRING, &phase, NULL, "NAME",
		  "only the peaks in phase NAME (threadgraph.phase; marks.txt)" },
		TG_COMMON_OPTIONS(&c),
		TG_OPT_END_ROW,
	};

	ret = tg_parse_options(argc, argv, opts, peaks_usage,
			       "Prints the peaks of the thread .mem files, one per line:\n"
			       "N<TAB>TIME<TAB>THREAD<TAB>DELTA<TAB>MEMFILE<TAB>LINE<TAB>FILE:LINE:FUNCTION\n"
			       "(N is the label memg gives the peak; MEMFILE and LINE can be handed "
			       "to decorate-stack: `decorate-stack MEMFILE STACKFILE LINE`; of a "
			       "binary capture MEMFILE is the run directory: `decorate-stack "
			       "MEMFILE THREAD LINE`).", &nargs);
	if (ret)
		return ret == 1 ? TG_EXIT_OK : TG_EXIT_USAGE;
	tg_resolve_run_bases(argv, nargs);  /* a base of runs: its latest */
	if (!nargs)
		return usage_error(peaks_usage, "no dump files given");
	for (s = 0; s < sizeof(peaks_sorts) / sizeof(peaks_sorts[0]); s++)
		if (!strcmp(peaks_sorts[s].name, sort))
			break;
	if (s == sizeof(peaks_sorts) / sizeof(peaks_sorts[0]))
		return usage_error(peaks_usage, "unknown sort key '%s' (expected time or size)",
				   sort);
	tg_peaks_init(&peaks);
	tg_marks_init(&marks);
	tg_cli_diag_init(&d, &c);
	if ((ret = tg_cli_dumpset(&files, argv, nargs, TG_VIEW_MEM)))
		goto out;
	o.has_time = tg_cli_has_time(&files, &c);
	/* as memg's: the peaks' spacing goes by its graph's span (tg_memg_xspan) */
	o.has_origin = tg_cli_time_origin(files.cap, &o.origin) ||
		       tg_cli_text_origin(&files, &o.origin);
	if ((ret = tg_cli_peak_opts(&p, &o, peaks_usage)))
		goto out;
	o.peak.every = every;
	/* the top N of every candidate: the others dropped as they come (a phase
	 * filter comes after the collection, so it needs them all) */
	if (every && has_top && top && !phase)
		peaks.bound = top;
	if (tg_marks_read_near(&marks, files.v, files.n, &d) < 0) {
		ret = error("%s", d.msg);
		goto out;
	}
	if (phase && !o.has_time) {
		ret = error("--phase needs timestamps (the dumps have none: --no_time)");
		goto out;
	}
	if (phase && !tg_marks_has_phase(&marks, phase)) {
		ret = error("no phase '%s' in the run (its phases are noted in %s by "
			    "threadgraph.phase)", phase, TG_MARKS_FILENAME);
		goto out;
	}
	if (tg_peaks_collect(&o, files.v, files.n, &peaks, &r, &d) < 0) {
		ret = error("%s", d.msg);
		goto out;
	}
	if (phase)
		tg_marks_keep_peaks(&peaks, &marks, phase);
	if (has_top)
		tg_peaks_top(&peaks, top);
	if (every)  /* numbered among those listed, whether or not a bound cut them */
		for (size_t i = 0; i < peaks.n; i++)
			peaks.v[i].id = i;
	if (peaks_sorts[s].sort)
		peaks_sorts[s].sort(&peaks);
	if (!peaks.n)  /* an empty list alone reads as a failure, or as "no growth" */
		fprintf(stderr, "note: no peaks: no record's |DELTA| exceeds %g KB (--peak)%s; "
			"memory kept a little at a time, across many calls, shows in what each "
			"thread holds over time: threadgraph memg --held\n", o.peak.peak_kb,
			phase ? " in that phase" : "");
	if (json)
		tg_peaks_write_json_phases(stdout, &peaks, files.v, o.has_time,
					   marks.n_phases ? &marks : NULL);
	else
		tg_peaks_write_text(stdout, &peaks, files.v, o.has_time);
out:
	tg_cli_diag_summary(&d);
	tg_peaks_release(&peaks);
	tg_marks_release(&marks);
	tg_dumpset_release(&files);
	return ret;
}
