/*
 * fold_cli.c - what folded, flamegraph and report share (fold_cli.h): loading
 * a run's frame tree with the CLI's warnings, opening an output file by path.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "atomic_out.h"
#include "fold_cli.h"
#include "runinfo.h"

/* Whether PATH is a capture file itself (not a run directory): it holds the
 * recorded calls, never an accounting snapshot. */
static int fold_cli_is_capture_file(const char *path, struct tg_diag *d)
{
	struct tg_capture *cap = NULL;
	struct stat st;
	int rc;

	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return 0;
	rc = tg_dumpset_open_capture(path, &cap, d);
	tg_dumpset_free_capture(cap);
	return rc > 0;
}

int tg_cli_fold_load(struct tg_fold_args *a, const char *path, const char *usage,
		     struct tg_fold *f, struct tg_diag *d)
{
	struct tg_fold_opts o = { 0 };
	struct tg_capture *cap = NULL;
	int rc, sampled = 0, ended = -1;
	unsigned long long dropped = 0;

	o.metric = tg_fold_metric_find(a->metric);
	if (!o.metric) {
		char names[128];
		tg_fold_metric_names(names, sizeof(names));
		return usage_error(usage, "unknown metric '%s' (expected %s)", a->metric, names);
	}
	if (a->thread && a->merge)
		return usage_error(usage, "--thread and --merge-threads exclude each other");
	o.path = path;
	o.thread = a->thread;
	o.merge_threads = a->merge;
	o.max_depth = a->max_depth;
	o.no_stitch = a->no_stitch;
	o.has_time = !a->c.no_time;
	tg_cli_diag_init(d, &a->c);
	tg_fold_init(f);
	if (!a->has_metric && o.metric->from_snapshot && fold_cli_is_capture_file(path, d)) {
		/* the default metric needs accounting, which a capture does not hold */
		tg_cli_note_no_accounting(path, 1, "showing --metric delta, each call's "
					  "recorded memory delta");
		a->metric = "delta";
		a->has_metric = 1;
		return tg_cli_fold_load(a, path, usage, f, d);
	}
	if (!o.metric->from_snapshot) {
		/* a capture's delta and time: read natively, its warnings printed once */
		if ((rc = tg_dumpset_open_capture(path, &cap, d)) < 0) {
			tg_fold_release(f);
			return error("%s", d->msg);
		}
		if (rc > 0)
			tg_cli_capture_warnings(cap);
		o.cap = cap;
	}
	/* delta and time pair each call with its return: a text run's drops, up front */
	if (!o.metric->from_snapshot && !cap)
		dropped = tg_cli_text_dropped(path);
	rc = tg_fold_load(f, &o, d);
	if (rc < 0 && !a->has_metric && o.metric->from_snapshot && strstr(d->msg, "no snapshot in")
	    && (ended = tg_run_end_state(path, &sampled), !sampled)) {
		/* the default metric needs accounting: the recorded calls are the best there
		 * is (a sampled run has none: its message stands) */
		if (ended == 0 && !strstr(d->msg, "without accounting")
		    && !strstr(d->msg, "does no accounting")) {
			fputs("note: no snapshot in '", stderr);
			tg_cli_put(stderr, path);
			fputs("' yet: " TG_RUN_UNENDED ": showing --metric delta, each call's "
			      "recorded memory delta\n", stderr);
		} else {
			tg_cli_note_no_accounting(path, 0, "showing --metric delta, each call's "
						  "recorded memory delta");
		}
		tg_dumpset_free_capture(cap);
		a->metric = "delta";
		a->has_metric = 1;
		return tg_cli_fold_load(a, path, usage, f, d);
	}
	tg_dumpset_free_capture(cap);
	if (rc < 0) {
		tg_fold_release(f);
		if (o.metric->from_snapshot && (strstr(d->msg, "accounting on?")
						|| strstr(d->msg, "does no accounting")
						|| strstr(d->msg, "without accounting")))
			return error("%s; --metric delta or --metric time need no accounting "
				     "(the recorded calls)", d->msg);
		return error("%s", d->msg);
	}
	if (f->no_stack == 1)
		warning("thread '%s' left out: no .stack file beside '%s' (the %s metric pairs "
			"each thread's .stack and .mem)", f->no_stack_thread, f->no_stack_mem,
			o.metric->name);
	else if (f->no_stack)
		warning("%lu threads left out: no .stack file beside their .mem ('%s' and %lu "
			"other%s; the %s metric pairs each thread's .stack and .mem)",
			f->no_stack, f->no_stack_mem, f->no_stack - 1,
			f->no_stack == 2 ? "" : "s", o.metric->name);
	if (f->unpaired)
		warning("%lu call%s had no return record (still running when the run ended): "
			"counted 0 for themselves", f->unpaired, f->unpaired == 1 ? "" : "s");
	if (f->deep)
		warning("%lu call%s nested deeper than %lu: part of their ancestor's own value "
			"(--max-depth N to go further, 0: no limit)", f->deep,
			f->deep == 1 ? "" : "s", a->max_depth);
	if (f->mismatched)
		warning("%lu call%s paired with a return of another function (%s)",
			f->mismatched, f->mismatched == 1 ? "" : "s",
			dropped ? "the recorder dropped records: see above" : "damaged dumps?");
	if (f->extra)
		warning("%lu return record%s left over after the last call%s", f->extra,
			f->extra == 1 ? "" : "s",
			dropped ? " (the recorder dropped records: see above)" : "");
	{
		/* tg_fold_add saturates: say so rather than show a cap as a value */
		size_t capped = 0;

		for (size_t i = 0; i < f->n; i++)
			capped += f->v[i].self == INT64_MAX || f->v[i].self == INT64_MIN;
		if (capped)
			warning("%zu frame%s summed beyond 2^63: shown capped at %lld (damaged "
				"dumps?)", capped, capped == 1 ? "" : "s", (long long)INT64_MAX);
	}
	if (f->sampled)
		warning("sampled run (one sample per %lld bytes on average): the values are "
			"estimates", (long long)f->sampled);
	tg_cli_diag_summary(d);
	return 0;
}

int tg_cli_open_output(const char *path, struct tg_aout *a, struct tg_diag *d)
{
	return tg_aout_open_path(a, path, d);
}
