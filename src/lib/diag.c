/*
 * diag.c - error messages and malformed-line accounting for the library.
 */
#include <stdarg.h>
#include <stdio.h>

#include "diag.h"

int tg_error(struct tg_diag *d, const char *fmt, ...)
{
	va_list ap;

	if (!d)
		return -1;
	va_start(ap, fmt);
	vsnprintf(d->msg, sizeof(d->msg), fmt, ap);
	va_end(ap);
	return -1;
}

int tg_malformed(struct tg_diag *d, const char *path, unsigned long lineno, const char *why)
{
	d->malformed++;
	if (d->strict)
		return tg_error(d, "%s:%lu: %s", path, lineno, why);
	if (d->warn)
		d->warn(d->warn_ctx, path, lineno, why);
	return 0;
}

int tg_doubtful(struct tg_diag *d, const char *path, unsigned long lineno, const char *why)
{
	d->doubtful++;
	if (d->strict)
		return tg_error(d, "%s:%lu: %s", path, lineno, why);
	if (d->warn_kept)
		d->warn_kept(d->warn_ctx, path, lineno, why);
	return 0;
}
