/*
 * dumpset.h - the dump files a command's operands name.
 *
 * An operand is a text dump (as today), a run directory, or a binary capture
 * (a run directory holding capture.tg, or the capture file itself).  A capture
 * stands for the files `threadgraph export` would write from it, read natively:
 * each such tg_dumpfile has cap set, and its path is where export writes the
 * file (the capture's directory), so messages and the peak list name the same
 * files as on the exported text.  A run directory without a capture stands for
 * its text dumps.  Either way the files come in byte order of their names, as
 * `ls` lists them (C locale), so thread numbers match the text commands'.
 */
#ifndef TG_DUMPSET_H
#define TG_DUMPSET_H

#include <stddef.h>

#include "capture_read.h"
#include "diag.h"
#include "dumpfile.h"

/* Which files a run directory or a capture stands for. */
enum tg_dumpset_view {
	TG_VIEW_MEM,   /* the thread .mem files and process.mem */
	TG_VIEW_STACK, /* the thread .stack files */
};

struct tg_dumpset {
	struct tg_dumpfile *v;   /* the files, in order */
	size_t n, alloc;
	struct tg_capture *cap;  /* the capture the files come from (owned unless
				  * cap_borrowed), or NULL */
	int cap_borrowed;        /* cap is the caller's (tg_dumpset_init_capture) */
	struct tg_aggfile *agg;  /* the aggregate run the files come from (owned), or
				  * NULL: its threads' curves as .mem files */
	char **owned;            /* paths built for directory entries (owned) */
	size_t n_owned, owned_alloc;
};

/*
 * The names in directory DIR that end with SUFFIX (or SUFFIX ".gz" when GZ),
 * hidden names (a leading '.') left out, in byte order, as *NAMES (malloc'ed,
 * each name too; free with tg_dir_names_free) and *N.  Returns 0 (possibly
 * none), or -1 with d->msg set (an unreadable directory, out of memory).
 */
int tg_dir_names(const char *dir, const char *suffix, int gz, char ***names, size_t *n,
		 struct tg_diag *d);
void tg_dir_names_free(char **names, size_t n);

/*
 * Expands the n operands into s for view.  An aggregate run (aggfile.h: a
 * directory holding aggregate.tga, or the file) must be the only operand: its
 * MEM view is one .mem file per thread whose records are the thread's memory
 * curve, two per bucket (its lowest then its highest memory, at the bucket's
 * start: TG_CURVE_FILE:0:aggregate=>BYTES); its STACK view is empty.  A capture must be the only operand
 * (its time flag decides --no_time).  Returns 0, or -1 with d->msg set (an
 * unreadable directory, a broken capture, a capture beside other operands);
 * s needs tg_dumpset_release() after success; a failure releases what it had
 * loaded itself (a tg_dumpset_release() after it is harmless).
 */
int tg_dumpset_init(struct tg_dumpset *s, char **paths, size_t n, enum tg_dumpset_view view,
		    struct tg_diag *d);
void tg_dumpset_release(struct tg_dumpset *s);

/*
 * Fills s with the files of an open capture for view, as tg_dumpset_init does
 * for its path; cap stays the caller's and must outlive s.  Returns 0, or -1
 * with d->msg set; s needs tg_dumpset_release() either way.
 */
int tg_dumpset_init_capture(struct tg_dumpset *s, const struct tg_capture *cap,
			    enum tg_dumpset_view view, struct tg_diag *d);

/*
 * Opens the capture that path names (a run directory holding capture.tg or a
 * capture file) into a new *cap.  Returns 1 when path is a capture and it was
 * opened, 0 when path is not a capture (nothing set), -1 with d->msg set when
 * it is one but cannot be read.
 */
int tg_dumpset_open_capture(const char *path, struct tg_capture **cap, struct tg_diag *d);

/* Frees a capture from tg_dumpset_open_capture() (NULL allowed). */
void tg_dumpset_free_capture(struct tg_capture *cap);

#endif
