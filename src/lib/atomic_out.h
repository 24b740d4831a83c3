/*
 * atomic_out.h - output files that appear whole or not at all.
 *
 * A file is written to DIR/.NAME.tmp.PID and renamed to DIR/NAME on commit; on
 * abort (or any failure) the temporary file is removed, so a failed run never
 * leaves a half-written graph, legend or data file behind.
 *
 * A name the user gave that is a symbolic link, a device or a pipe
 * (/dev/stdout, /dev/null, a FIFO) is written through directly instead
 * (tg_aout_open_path): renaming over it would replace the link or the device
 * node itself, not write where it leads.
 */
#ifndef TG_ATOMIC_OUT_H
#define TG_ATOMIC_OUT_H

#include <stdio.h>

#include "diag.h"

struct tg_aout {
	char *final;  /* DIR/NAME (owned); NAME alone when DIR is "." */
	char *tmp;    /* DIR/.NAME.tmp.PID (owned); NULL when written directly */
	const char *shown_dir; /* the folder messages name instead of DIR (not
				  owned: tg_aout_open_in); NULL: DIR itself */
	FILE *f;      /* open on tmp until commit/abort; NULL after */
};

/* Builds DIR/NAME and its temporary name without opening anything; 0 or -1. */
int tg_aout_names(struct tg_aout *a, const char *dir, const char *name, struct tg_diag *d);
/*
 * tg_aout_names() and opens the temporary file for writing; 0 or -1.  Every
 * message names DIR/NAME, the file asked for, never the temporary file (its
 * name differs on every run).
 */
int tg_aout_open(struct tg_aout *a, const char *dir, const char *name, struct tg_diag *d);
/*
 * tg_aout_open() for a file made in a private folder DIR whose messages name
 * SHOWN/NAME instead (SHOWN, where the folder is put in place, must outlive a).
 */
int tg_aout_open_in(struct tg_aout *a, const char *dir, const char *shown,
		    const char *name, struct tg_diag *d);
/*
 * Opens PATH, a file named by the user: a symbolic link, a device or a pipe
 * that exists is opened and written directly (commit closes it, abort leaves
 * what was written); anything else as tg_aout_open(dirname, basename).  A
 * directory is an error.  0 or -1.
 */
int tg_aout_open_path(struct tg_aout *a, const char *path, struct tg_diag *d);
/* Flushes, closes and renames into place; on failure removes tmp.  0 or -1. */
int tg_aout_commit(struct tg_aout *a, struct tg_diag *d);
/* Closes (if open) and removes the temporary file; frees names.  Safe twice. */
void tg_aout_abort(struct tg_aout *a);
/* Frees the names (after commit). */
void tg_aout_release(struct tg_aout *a);

#endif
