/*
 * speedscope.h - a run's allocations in speedscope's file format
 * (https://www.speedscope.app/file-format-schema.json; docs/formats.md "pprof
 * and speedscope"): the frames shared by all profiles, then one "sampled"
 * profile per thread, in bytes, each sample a stack (outermost frame first, as
 * speedscope wants) weighted by one of the xprof values.
 */
#ifndef TG_SPEEDSCOPE_H
#define TG_SPEEDSCOPE_H

#include <stdio.h>

#include "diag.h"
#include "xprof.h"

/*
 * Writes X to OUT as a speedscope file whose weights are the samples' value
 * WHICH (TG_XV_ALLOC_SPACE or TG_XV_INUSE_SPACE); samples whose weight is not
 * positive are left out, a thread with none keeps an empty profile.  NAME
 * names the file's group of profiles.  Returns 0, or -1 with d->msg set (out
 * of memory, a write error).
 */
int tg_speedscope_write(FILE *out, const struct tg_xprof *x, enum tg_xval which,
			const char *name, struct tg_diag *d);

#endif
