/*
 * cli.h - what the subcommands share: messages, common options, callbacks that
 * print the library's reports, and the command table's entry points.
 *
 * Adding a command: write cmd_<name>.c (options and printing only), add its row
 * to the table in main.c, put the work in src/lib/, add a C unit test in tests/c/
 * and an end-to-end test in tests/cli/, and a section in docs/cli.md (checked
 * against --help by tests/cli/test_docs_options.py).
 */
#ifndef TG_CLI_H
#define TG_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "diag.h"
#include "dumpfile.h"
#include "dumpset.h"
#include "gnuplot.h"
#include "parse_options.h"

/* TG_VERSION, the version string, comes from threadgraph/_version.py (its one
 * definition): setup.py and the Makefile pass it with -DTG_VERSION='"X.Y.Z"'. */
#ifndef TG_VERSION
#error "TG_VERSION is not defined: build with setup.py or the Makefile"
#endif

/* Exit codes. */
#define TG_EXIT_OK 0
#define TG_EXIT_ERROR 1   /* runtime error: missing file, gnuplot failure... */
#define TG_EXIT_USAGE 2   /* bad command line */

/* Prints "error: MSG" on stderr; returns TG_EXIT_ERROR. */
int error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "warning: MSG" on stderr. */
void warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "error: MSG" and a hint to use --help; returns TG_EXIT_USAGE. */
int usage_error(const char *usage, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Refuses an aggregate run (aggregate.tga) among the NARGS operands for a
 * command that needs each call: "error: 'OP' is an aggregate run ...: CMD NEEDS
 * a full capture (record it without --aggregate)", then "; ALSO" when not NULL.
 * Returns TG_EXIT_ERROR when one is, 0 otherwise. */
int tg_cli_refuse_aggregate(char **argv, int nargs, const char *cmd, const char *needs,
			    const char *also);

/* Options every command takes. */
struct tg_common_args {
	int no_time;     /* dumps have no TIME# prefix (the original's global option) */
	int strict;      /* malformed lines are errors */
};

#define TG_COMMON_OPTIONS(c) \
	{ "no_time", 0, TG_OPT_BOOL, &(c)->no_time, NULL, NULL, \
	  "the dumps have no timestamps (also accepted before the command)" }, \
	{ "strict", 0, TG_OPT_BOOL, &(c)->strict, NULL, NULL, \
	  "treat a malformed line as an error instead of skipping it" }

/* Options every graph command takes. */
struct tg_graph_args {
	const char *outdir;   /* -o/--output */
	const char *terminal; /* --terminal */
	int size[2];          /* --size WxH */
	int script_only;      /* --script-only */
	int keep;             /* --keep */
	const char *time_axis; /* --time-axis (the time graphs) */
	char gnuplot[4096];   /* the gnuplot found (po->gnuplot points here) */
};

/* WRITES: what -o's DIR receives, a string literal ("the graph and its legend"). */
#define TG_GRAPH_OPTIONS(g, writes) \
	{ "output", 'o', TG_OPT_STRING, &(g)->outdir, NULL, "DIR", \
	  "write " writes " into DIR, created if missing (default: the current directory)" }, \
	{ "keep", 0, TG_OPT_BOOL, &(g)->keep, NULL, NULL, \
	  "keep the gnuplot script and data files (in DIR/NAME-plot/)" }, \
	{ "terminal", 0, TG_OPT_STRING, &(g)->terminal, NULL, "TERM", \
	  "gnuplot terminal and graph format: svg, png or pdf" }, \
	{ "size", 0, TG_OPT_SIZE, (g)->size, NULL, "WxH", \
	  "graph size in pixels (pdf: at 96 per inch)" }, \
	{ "script-only", 0, TG_OPT_BOOL, &(g)->script_only, NULL, NULL, \
	  "write the gnuplot script and data files (DIR/NAME-plot/), do not run gnuplot" }

/* The x axis option of the time graphs (memg, nesting, interleave). */
#define TG_TIME_AXIS_OPTION(g) \
	{ "time-axis", 0, TG_OPT_STRING, &(g)->time_axis, NULL, "AXIS", \
	  "x axis: elapsed (time since the run's start, the default) or clock (local time)" }

/*
 * Reads --time-axis into *clock (0 elapsed, 1 clock); 0 or TG_EXIT_USAGE after
 * printing the error.
 */
int tg_cli_time_axis(const struct tg_graph_args *g, int *clock, const char *usage);

/*
 * After a graph command succeeded without drawing because no gnuplot was found:
 * prints one line saying where the script is and how to render it.
 */
void tg_cli_plot_note(const struct tg_plot_opts *po, const char *name);

/* The peak and time-range options of memg and peaks.  Neither spacing option
 * given: the spacing scales with the run (tg_peak_opts.scaled); one given, the
 * other takes the original's default (TG_PEAK_DELTA_TIME, TG_PEAK_DELTA_VALUE). */
struct tg_peak_args {
	double peak, delta_time, delta_value;
	int has_delta_time, has_delta_value;
	const char *time_from, *time_to;
};

#define TG_PEAK_DELTA_TIME 60
#define TG_PEAK_DELTA_VALUE 500
#define TG_PEAK_ARGS_DEFAULT { 200, TG_PEAK_DELTA_TIME, TG_PEAK_DELTA_VALUE, 0, 0, NULL, NULL }

#define TG_PEAK_OPTIONS(p) \
	{ "peak", 0, TG_OPT_NUMBER, &(p)->peak, NULL, "N", \
	  "a return whose |delta| exceeds N KB is a peak (default 200)" }, \
	{ "peak_delta_time", 0, TG_OPT_NUMBER, &(p)->delta_time, &(p)->has_delta_time, "S", \
	  "keep a peak more than S seconds after the last kept one (default: " \
	  "the largest peaks, 1/40 of the run apart; 60 with --peak_delta_value)" }, \
	{ "peak_delta_value", 0, TG_OPT_NUMBER, &(p)->delta_value, &(p)->has_delta_value, "N", \
	  "... or more than N KB away from it in value (default 500 with --peak_delta_time)" }, \
	{ "time_from", 0, TG_OPT_STRING, &(p)->time_from, NULL, "TIME", \
	  "start at TIME: dd/mm/yyyy HH:MM, dd/mm/yy HH:MM, dd/mm/yyyy, dd/mm/yy, HH:MM" }, \
	{ "time_to", 0, TG_OPT_STRING, &(p)->time_to, NULL, "TIME", \
	  "end at TIME (same formats, local time)" }

struct tg_memg_opts;
/*
 * Fills the peak and range fields of o from p (and o->has_time); returns 0 or
 * TG_EXIT_USAGE after printing the error.
 */
int tg_cli_peak_opts(const struct tg_peak_args *p, struct tg_memg_opts *o, const char *usage);

/*
 * Progress for the graph commands, as the original printed it on stderr:
 * "Processing data for thread NAME", "Processing data for the process",
 * "Running gnuplot.", and a warning for each file not plotted.
 */
struct tg_memg_report;
extern const struct tg_memg_report tg_cli_report;

/* Global --no_time seen before the command name. */
extern int tg_global_no_time;

/*
 * Sets up d for a command: malformed lines are printed as warnings (the first
 * ones; the rest are counted), strict mode from c.
 */
void tg_cli_diag_init(struct tg_diag *d, const struct tg_common_args *c);
/* Prints the count of malformed lines skipped, if any. */
void tg_cli_diag_summary(const struct tg_diag *d);

/*
 * Checks the graph options and fills po (defaults: terminal def_term, size
 * def_w x def_h, output "."), creating the output directory (and its parents)
 * when missing, and finding gnuplot (tg_gnuplot_find; po->gnuplot points into
 * g, NULL when there is none).  Returns 0 or TG_EXIT_USAGE / TG_EXIT_ERROR.
 */
int tg_cli_graph_opts(struct tg_graph_args *g, struct tg_plot_opts *po,
		      const char *def_term, int def_w, int def_h, const char *usage);

/*
 * Expands the n operands (text dumps, run directories, a capture: dumpset.h)
 * into s for view and prints the capture's warnings (cut short, no end chunk,
 * records dropped).  Returns 0, or TG_EXIT_ERROR after printing the error; s
 * needs tg_dumpset_release() either way.
 */
int tg_cli_dumpset(struct tg_dumpset *s, char **paths, int n, enum tg_dumpset_view view);
/*
 * The records the recorder dropped in the text run of PATH (a run directory,
 * or a dump file in one: its runinfo.json, tg_run_dropped); when some were,
 * warns once that lines are missing and the .mem and .stack lines may not pair.
 * Returns their number (0: none, or not known).
 */
unsigned long long tg_cli_text_dropped(const char *path);
/* Warnings per kind of repeated message (a decorate-stack pairing, a file whose
 * times go back) before the rest are counted. */
#define TG_CLI_MAX_WARNINGS 20
/* Prints the warnings about a capture cut short or missing records. */
void tg_cli_capture_warnings(const struct tg_capture *cap);
/* The sentence saying which part of a run a capture of limited size covers
 * (segments FIRST-LAST kept; records from FROM_US to TO_US after its start,
 * TO_US < 0: still being written), into BUF of N bytes: the warning of every
 * command, and live's status line. */
void tg_cli_kept_text(char *buf, size_t n, uint32_t first, uint32_t last, int64_t from_us,
		      int64_t to_us);
/* Text dumps exported from a capture of limited size (their directory's
 * runinfo.json, as export writes it, gives the segments kept): 1, the
 * sentence tg_cli_kept_text makes of it into BUF of N bytes and, when ORIGIN
 * is not NULL, the run's start in *ORIGIN (seconds since the epoch); else 0. */
int tg_cli_text_kept(const struct tg_dumpset *s, char *buf, size_t n, double *origin);
/* tg_cli_text_kept of the dumps in directory DIR (its runinfo.json); RANGE,
 * when not NULL, receives where the segments kept begin and end in
 * microseconds after the run's start (the end -1: the run did not end). */
int tg_cli_dir_kept(const char *dir, char *buf, size_t n, double *origin, int64_t range[2]);
/* tg_cli_text_kept's *ORIGIN alone: 1 when the dumps are such an export. */
int tg_cli_text_origin(const struct tg_dumpset *s, double *origin);
/* A capture whose older segments were dropped (cap may be NULL): 1 and
 * tg_cli_kept_text's sentence for it into BUF of N bytes; 0 otherwise. */
int tg_cli_capture_kept(const struct tg_capture *cap, char *buf, size_t n);
/* A capture whose older segments were dropped (cap may be NULL): 1 and the
 * run's start in *ORIGIN (seconds since the epoch), where the graphs' elapsed
 * axis counts from (timeaxis.h), so that a kept range reads as the time into
 * the run the warning gives; else 0. */
int tg_cli_time_origin(const struct tg_capture *cap, double *origin);
/* Whether the files carry times: a capture's flag (unless --no_time), else !--no_time. */
int tg_cli_has_time(const struct tg_dumpset *s, const struct tg_common_args *c);

/* A graph command's library entry point (graphs.h). */
struct tg_graph_opts;
typedef int (*tg_graph_run_fn)(const struct tg_graph_opts *o, const struct tg_plot_opts *po,
			       const struct tg_dumpfile *files, size_t n,
			       const struct tg_memg_report *r, struct tg_diag *d);
/*
 * The shared tail of memh, nesting and interleave: expands the nargs operands
 * for view, sets o->has_time, runs RUN on them with the CLI's reporting, prints
 * the malformed-line count.  Returns the command's exit code.
 */
int tg_cli_run_graph(tg_graph_run_fn run, const char *name, struct tg_graph_opts *o,
		     const struct tg_plot_opts *po, const struct tg_common_args *c,
		     char **argv, int nargs, enum tg_dumpset_view view);

/* Prints dump text to f with control bytes as \xHH. */
void tg_cli_put(FILE *f, const char *s);

/* The note on stderr that PATH, a run (or, CAPTURE, a capture file given as
 * such), has no allocation accounting, and what is shown INSTEAD. */
void tg_cli_note_no_accounting(const char *path, int capture, const char *instead);

/* The subcommands. */
int cmd_memg(int argc, char **argv);
int cmd_peaks(int argc, char **argv);
int cmd_memh(int argc, char **argv);
int cmd_nesting(int argc, char **argv);
int cmd_interleave(int argc, char **argv);
int cmd_decorate_stack(int argc, char **argv);
int cmd_summary(int argc, char **argv);
int cmd_threads(int argc, char **argv);
int cmd_hist(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_folded(int argc, char **argv);
int cmd_flamegraph(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_live(int argc, char **argv);
int cmd_export(int argc, char **argv);

#endif
