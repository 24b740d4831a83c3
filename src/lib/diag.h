/*
 * diag.h - how the analysis library reports errors and malformed input.
 *
 * The library never prints.  A failing function stores a one-line message in the
 * caller's struct tg_diag (lowercase, no final period) and returns a negative
 * code; a malformed dump line is handed to the caller's warn callback, counted,
 * and skipped -- or, in strict mode, turned into an error.
 */
#ifndef TG_DIAG_H
#define TG_DIAG_H

#include <stddef.h>

struct tg_diag {
	char msg[1024];          /* last error message, set by tg_error() */
	unsigned long malformed; /* malformed lines seen so far (all files) */
	int strict;              /* non-zero: a malformed line is an error */
	/* called for each malformed line (may be NULL); path and 1-based line */
	void (*warn)(void *ctx, const char *path, unsigned long lineno, const char *why);
	void *warn_ctx;          /* passed to warn and warn_kept */
	unsigned long doubtful;  /* lines read and kept that break a rule of their
				  * format (a time that goes back), all files */
	/* called for each such line (may be NULL); path, 1-based line, why */
	void (*warn_kept)(void *ctx, const char *path, unsigned long lineno, const char *why);
	int probe;               /* non-zero: the caller tests whether something is
				  * there and shows no message, so a failure needs
				  * no explaining (such as reading runinfo.json) */
};

/* Sets d->msg from the printf-style format; always returns -1. */
int tg_error(struct tg_diag *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Reports a malformed line: counts it and calls d->warn.  Returns 0 when the
 * caller should skip the line and go on, or -1 (with d->msg set) in strict mode.
 */
int tg_malformed(struct tg_diag *d, const char *path, unsigned long lineno, const char *why);

/*
 * Reports a line that is read and kept although it breaks a rule of its format
 * (a TIME earlier than the file's last one): counts it and calls d->warn_kept.
 * Returns 0 when the caller should keep the line and go on, or -1 (with d->msg
 * set) in strict mode.
 */
int tg_doubtful(struct tg_diag *d, const char *path, unsigned long lineno, const char *why);

#endif
