/*
 * cmd_threads.c - threadgraph threads: each thread's figures and the
 * cross-thread frees of a run (threads.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "snapshot.h"
#include "threads.h"

static const char threads_usage[] =
	"threadgraph threads [--json] [--no_time] [--strict] RUN_DIR";

/* The N of "# sampled: N" of RUN_DIR's final snapshot (its LIVE AT END and
 * cross-thread frees are then estimates, as the sites'), or 0: exact, or no
 * snapshot that reads (the summary's figures are said as they are). */
static int64_t threads_sampled(const char *run_dir)
{
	struct tg_snapshot s;
	struct tg_diag quiet = { 0 };
	int64_t n;

	if (tg_snapshot_read(&s, run_dir, &quiet) < 0)
		return 0;
	n = s.sampled;
	tg_snapshot_release(&s);
	return n;
}

int cmd_threads(int argc, char **argv)
{
	struct tg_common_args c = { .no_time = tg_global_no_time };
	struct tg_memg_report r = tg_cli_report;
	struct tg_threads t;
	struct tg_dumpset files;
	struct tg_diag d;
	int64_t sampled;
	int nargs, ret, json = 0, have_files = 0;
	const struct tg_option opts[] = {
		{ "json", 0, TG_OPT_BOOL, &json, NULL, NULL,
		  "print {\"threads\": [{\"name\", \"allocated\", \"freed\", \"peak\", "
		  "\"live_at_end\"}], \"freed_by\": [{\"allocated_in\", \"freed_in\", \"bytes\", "
		  "\"blocks\"}]}" },
		TG_COMMON_OPTIONS(&c),
		TG_OPT_END_ROW,
	};

	ret = tg_parse_options(argc, argv, opts, threads_usage,
			       "Prints each thread's bytes allocated, freed, its peak and what it "
			       "allocated that is\nstill live at the end, then the bytes and blocks "
			       "allocated in one thread and freed\nin another (who made the memory "
			       "another thread freed).  The figures and the\npairs come from the "
			       "run's accounting summary (a run with accounting on);\nwithout "
			       "it, the peak and the end of each thread's held memory are shown\n"
			       "and the pairs are not known.", &nargs);
	if (ret)
		return ret == 1 ? TG_EXIT_OK : TG_EXIT_USAGE;
	tg_resolve_run_bases(argv, nargs > 0);  /* a base of runs: its latest */
	if (nargs != 1)
		return usage_error(threads_usage, "expected one run directory");
	tg_cli_diag_init(&d, &c);
	{
		/* a path that is not there: say so, not that the run lacks accounting */
		struct stat st;
		if (stat(argv[0], &st) < 0)
			return error("unable to open '%s': %s", argv[0], strerror(errno));
	}
	if ((ret = tg_threads_load_summary(&t, argv[0], &d)) < 0)
		return error("%s", d.msg);
	if (ret == 0 && (sampled = threads_sampled(argv[0])))
		warning("sampled run (one sample per %" PRId64 " bytes on average): LIVE AT END "
			"and the cross-thread frees are estimates, as the call sites are; "
			"ALLOCATED, FREED and PEAK are exact", sampled);
	if (ret == 1) {
		warning("%s; showing each thread's held memory: allocated, freed and the "
			"cross-thread frees need a run with accounting on", d.msg);
		tg_cli_diag_init(&d, &c);
		if ((ret = tg_cli_dumpset(&files, argv, 1, TG_VIEW_MEM)))
			return ret;
		have_files = 1;
		r.start = NULL;  /* no progress lines: the table is the output */
		if (tg_threads_load_dumps(&t, files.v, files.n, &r, &d) < 0) {
			ret = error("%s", d.msg);
			goto out;
		}
	}
	if (json)
		tg_threads_write_json(stdout, &t);
	else
		tg_threads_write_text(stdout, &t);
	tg_threads_release(&t);
	tg_cli_diag_summary(&d);
	ret = TG_EXIT_OK;
out:
	if (have_files)
		tg_dumpset_release(&files);
	return ret;
}
