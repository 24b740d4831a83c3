/*
 * nesting_pts.h - the bounded point set of a nesting series.
 *
 * nesting draws each call as a point (x: its time or index, y: its depth), so a
 * thread of 16 M calls made 16 M gnuplot points (8 GB of gnuplot memory for a
 * 928 MB capture) for a graph of 1920 columns.  The points that draw the same
 * image are fewer: in each screen column, each depth once (twice: its first
 * and its last call).  A point set keeps,
 * for each (slice of x, depth) seen, the first and the last x of the calls there;
 * with slices no wider than a screen column, a slice spans at most two columns
 * and its first and last x fall in both, so every (column, depth) the calls
 * reach keeps a point.  The graph's x span is known only once every thread is
 * read, so the set starts from slices of the finest x step (1 us, one call) and
 * doubles their width whenever they span more than `slices` of them: the set's
 * size is bounded by slices x depths, whatever the number of calls.
 */
#ifndef TG_NESTING_PTS_H
#define TG_NESTING_PTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "diag.h"

/* One (slice, depth) seen: the x extent of its calls. */
struct tg_npts_ent {
	int64_t slice;       /* floor(x / width) */
	unsigned depth;
	int used;            /* a slot of the table in use */
	double first, last;  /* the lowest and the highest x of its calls */
};

struct tg_npts {
	struct tg_npts_ent *v;   /* open addressing, cap a power of two */
	size_t cap, n;
	double width;            /* a slice's width in x units */
	size_t slices;           /* the most slices spanned before the width doubles
				  * (0: never; the caller gives each slice) */
	size_t max_n;            /* entries beyond which the width doubles too */
	int64_t lo, hi;          /* the lowest and highest slice in the set */
};

/*
 * Starts an empty set of slices `width` wide; it doubles the width while its
 * slices span more than `slices` (0: never) or while it holds more than max_n
 * entries and spans more than one slice (a memory bound: slices coarser than a
 * column, when every column holds hundreds of depths).
 */
void tg_npts_init(struct tg_npts *p, double width, size_t slices, size_t max_n);
void tg_npts_release(struct tg_npts *p);

/* Counts a call at x of depth `depth` in slice floor(x / width); 0, or -1 (out of
 * memory, d set; the set as it was). */
int tg_npts_add(struct tg_npts *p, double x, unsigned depth, struct tg_diag *d);

/* As tg_npts_add, in the slice the caller gives (sets made with slices 0). */
int tg_npts_add_slice(struct tg_npts *p, int64_t slice, double x, unsigned depth,
		      struct tg_diag *d);

/*
 * Writes the set as "X DEPTH" lines in the order of their x (X with `decimals`
 * decimals): each entry's first x, and its last when `both` and different.
 * Returns the number of lines, or -1 (out of memory, d set; nothing written).
 */
long tg_npts_write(const struct tg_npts *p, FILE *f, int decimals, int both,
		   struct tg_diag *d);

/*
 * Thins the series file DIR/NAME ("X DEPTH" lines) to the first and the last
 * point of each (column, depth), columns being `columns` equal slices of x0..x1
 * (the graph's x span): two points, not one, so that the pixels a column's calls
 * ink at either edge stay inked.  Returns 0, or -1 with d set (the file left
 * whole).
 */
int tg_npts_thin_file(const char *dir, const char *name, double x0, double x1,
		      size_t columns, int decimals, struct tg_diag *d);

#endif
