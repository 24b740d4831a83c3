/*
 * decorate.h - one call's subtree from a .stack dump, decorated with the time and
 * memory of the matching .mem events (the decorate-stack command).
 *
 * The event, the K-th valid .mem record, returns from the K-th call to close in
 * the .stack dump (calls and returns pair up), counting the calls open where the
 * dumps begin, which the .stack does not hold: as many as the runinfo.json beside
 * them says (open_at_start, an export of a capture's kept segments), else the
 * first .stack line's depth.  An event returning from one of those is an error.
 * If that call is not of the
 * event's FILE and FUNCTION (dumps whose pairing is broken), the call is the
 * original's choice: the last .stack line of that FILE and FUNCTION with time
 * <= the event's.  Its subtree is that line and the following deeper lines.  Its K calls, in post-order, pair with the K
 * .mem records that end with the event (returns come children first).  Only the
 * calls printed (all of the subtree, or those a bound in the options leaves) and
 * the nesting of the subtree are held in memory.
 */
#ifndef TG_DECORATE_H
#define TG_DECORATE_H

#include <stdio.h>

#include "diag.h"

struct tg_decorate_opts {
	const char *prefix;  /* stripped from file names that start with it (or NULL) */
	const char *indent;  /* one nesting level of output (default " ") */
	int human;           /* Time as a duration for people ("48.9 ms", the report),
				not the original's seconds as repr(float) */
	int has_depth;       /* print only calls at most `depth` levels below the event's */
	unsigned long depth; /* ... (0: the call alone); read only with has_depth */
	size_t max_lines;    /* print at most this many calls (0: all) */
};

struct tg_decorate_report {
	/* a step begins: one of the original's six progress messages */
	void (*step)(void *ctx, const char *msg);
	/* a call and the memory event paired with it name different functions */
	void (*mismatch)(void *ctx, unsigned long stack_line, unsigned long mem_line);
	void *ctx;
};

/*
 * Finds the event in mem_path: event is a 1-based line number (all digits) or
 * the text of a line -- the whole line, the line without "TIME#", or a memg.txt
 * legend line "N: THREAD>FILE:LINE:FUNCTION=>DELTA"; the first matching line
 * counts.  Stores its line number in *lineno.  Returns 0 or -1 (d->msg set).
 */
int tg_decorate_find_event(const char *mem_path, const char *event, unsigned long *lineno,
			   struct tg_diag *d);

/*
 * Finds the event (as tg_decorate_find_event) and writes its decorated subtree
 * to out, one line per call in pre-order:
 *   INDENT*depth FUNCTION@FILE:START-END, Time: SECONDS s, Memory: DELTA B
 * SECONDS is printed as Python's repr(float).  Needs timestamped dumps.  Reads
 * the runinfo.json of the directory holding both files, if any.  With a bound
 * (o->has_depth, o->max_lines), the calls deeper than o->depth below the event's,
 * then those past the first o->max_lines in pre-order, are left out and a last
 * line counts them:
 *   ... N more calls not shown (D deeper than --depth X, L past --max-lines Y)
 * Returns 0 or -1 (d->msg set).
 */
int tg_decorate_run(const char *mem_path, const char *stack_path, const char *event,
		    const struct tg_decorate_opts *o, FILE *out,
		    const struct tg_decorate_report *r, struct tg_diag *d);

struct tg_capture;
/*
 * The same for thread `thread` (its base name, as in runinfo.json and the
 * exported file names) of a binary capture: event is a record number (the k-th
 * return, line k of the exported .mem) or the text of an exported .mem line or
 * of a memg.txt line.  The output is what tg_decorate_run prints on the
 * exported files.  Returns 0 or -1 (d->msg set).
 */
int tg_decorate_capture_run(const struct tg_capture *cap, const char *thread, const char *event,
			    const struct tg_decorate_opts *o, FILE *out,
			    const struct tg_decorate_report *r, struct tg_diag *d);

#endif
