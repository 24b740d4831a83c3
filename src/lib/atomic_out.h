/*
 * atomic_out.h - output files that appear whole or not at all.
 *
 * A file is written to DIR/.NAME.tmp.PID and renamed to DIR/NAME on commit; on
 * abort (or any failure) the temporary file is removed, so a failed run never
 * leaves a half-written graph, legend or data file behind.
 */
#ifndef TG_ATOMIC_OUT_H
#define TG_ATOMIC_OUT_H

#include <stdio.h>

#include "diag.h"

struct tg_aout {
	char *final;  /* DIR/NAME (owned) */
	char *tmp;    /* DIR/.NAME.tmp.PID (owned) */
	FILE *f;      /* open on tmp until commit/abort; NULL after */
};

/* Builds DIR/NAME and its temporary name without opening anything; 0 or -1. */
int tg_aout_names(struct tg_aout *a, const char *dir, const char *name, struct tg_diag *d);
/* tg_aout_names() and opens the temporary file for writing; 0 or -1. */
int tg_aout_open(struct tg_aout *a, const char *dir, const char *name, struct tg_diag *d);
/* Flushes, closes and renames into place; on failure removes tmp.  0 or -1. */
int tg_aout_commit(struct tg_aout *a, struct tg_diag *d);
/* Closes (if open) and removes the temporary file; frees names.  Safe twice. */
void tg_aout_abort(struct tg_aout *a);
/* Frees the names (after commit). */
void tg_aout_release(struct tg_aout *a);

#endif
