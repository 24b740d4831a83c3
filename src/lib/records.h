/*
 * records.h - parsing one line of a .mem, .stack or process.mem dump.
 *
 * The formats are defined in src/common/tg_format.h and docs/formats.md.  The
 * parsers never copy: every text field points into the caller's line.  Splitting
 * follows the format's rules so that odd names survive: TIME is everything before
 * the first '#', DELTA follows the last "=>", and LINE and FUNCTION follow the last
 * two ':' of the call site, so FILE may contain ':', '#' and "=>".
 */
#ifndef TG_RECORDS_H
#define TG_RECORDS_H

#include <stddef.h>

#include "diag.h"

/* A piece of a line: not NUL-terminated. */
struct tg_str {
	const char *s;
	size_t len;
};

/* A timestamp: its value and its text as written in the dump. */
struct tg_time {
	double v;         /* seconds since the epoch (0 without timestamps) */
	struct tg_str text; /* the TIME text, empty without timestamps */
};

/* One .mem line: [TIME#]FILE:LINE:FUNCTION=>DELTA */
struct tg_memrec {
	struct tg_time time;
	struct tg_str rest;  /* everything after "TIME#": FILE:LINE:FUNCTION=>DELTA */
	struct tg_str site;  /* FILE:LINE:FUNCTION */
	struct tg_str file;
	struct tg_str func;
	unsigned long line;  /* LINE */
	long long delta;     /* DELTA, bytes */
	int line_minus1;     /* text: LINE was written -1 (threadgraph 0.1.0's "no
			      * line"; line is 0): site and rest still say -1,
			      * tg_src_next_mem rewrites them */
	double call_start;   /* when the call began, as time.v; TG_NO_TIME when the
			      * records do not say (a text .mem line holds only
			      * its return, a capture without times) */
};

/* A call start that is not known (times are never negative). */
#define TG_NO_TIME (-1.0)

/* One .stack line: INDENT[TIME#]FILE:LINE:FUNCTION */
struct tg_stackrec {
	unsigned depth;      /* number of leading spaces */
	struct tg_time time;
	struct tg_str site;  /* FILE:LINE:FUNCTION */
	struct tg_str file;
	struct tg_str func;
	unsigned long line;  /* LINE: the function's first line */
	int line_minus1;     /* as tg_memrec's (tg_src_next_stack rewrites site) */
};

/* One process.mem line: [TIME#]BYTES */
struct tg_procrec {
	struct tg_time time;
	long long bytes;     /* resident set size */
};

/*
 * Each parser fills *r from the len bytes at s (no line terminator).  has_time is
 * zero for dumps written without timestamps (--no_time).  Returns NULL on success
 * or a short reason ("bad memory delta") when the line is malformed; *r is then
 * unspecified.
 */
const char *tg_memrec_parse(struct tg_memrec *r, const char *s, size_t len, int has_time);
const char *tg_stackrec_parse(struct tg_stackrec *r, const char *s, size_t len, int has_time);
const char *tg_procrec_parse(struct tg_procrec *r, const char *s, size_t len, int has_time);

/*
 * Whether a .mem record (its file and func set) returns a frame that wraps the
 * code that did the allocating and returns its delta once more, so that it
 * outweighs that code by a few bytes: the frames threading wraps every
 * thread's target in (Thread.run, _bootstrap_inner and _bootstrap of
 * threading.py), the builtin exec() around the code object it runs (a
 * script's or a notebook cell's <module>), and IPython's shell around a cell
 * (run_cell, _run_cell, run_cell_async, run_ast_nodes, run_code of
 * IPython/core/interactiveshell.py, _pseudo_sync_runner of
 * IPython/core/async_helpers.py, and the C method send() of a coroutine
 * around its frame).
 */
int tg_memrec_is_wrapper(const struct tg_memrec *m);

/*
 * Parses TIME text: digits, optionally '.' and more digits.  Returns 0 and the
 * value in *v, or -1 if the text is not a time.  Fast and within one unit in the
 * last place; tg_time_exact() gives the correctly rounded value (strtod).
 */
int tg_time_parse(const char *s, size_t len, double *v);
double tg_time_exact(const struct tg_str *text);

/*
 * The order of one file's TIMEs (docs/formats.md "TIME": within one file TIME
 * never decreases).  A line whose TIME goes back is kept, not skipped (skipping
 * a .mem line would shift the pairing of returns with calls; the original
 * ThreadGraph's time.time() could step back), but told: the first of each file,
 * through tg_doubtful.  Zero-initialised for each file read.
 */
struct tg_time_order {
	double last;  /* the latest TIME read so far */
	int told;     /* a TIME earlier than last was told */
};

/* Tells that line LINENO of PATH has a TIME, t, earlier than o->last.  0, or -1
 * in strict mode (d->msg set). */
int tg_time_order_back(struct tg_time_order *o, double t, const char *path,
		       unsigned long lineno, struct tg_diag *d);

/* Checks line LINENO's TIME t against the file's latest: 0, or -1 in strict
 * mode when it goes back. */
static inline int tg_time_order_check(struct tg_time_order *o, double t, const char *path,
				      unsigned long lineno, struct tg_diag *d)
{
	if (t >= o->last) {
		o->last = t;
		return 0;
	}
	return o->told ? 0 : tg_time_order_back(o, t, path, lineno, d);
}

/* Parses an optionally signed decimal integer filling all len bytes; 0 or -1. */
int tg_int_parse(const char *s, size_t len, long long *v);

#endif
