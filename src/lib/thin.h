/*
 * thin.h - a series' points thinned while they are written: of each of
 * `columns` slices of the span x0..x1 (what a screen column shows), the first,
 * lowest, highest and last point, in their order.  memg and memg --held bound
 * their graphs so (memg.h TG_MEMG_POINTS_BUDGET).  A point is the caller's
 * bytes (a data line, or what it formats one from), handed to its write
 * function when kept: only the points kept are ever formatted.  They stream
 * through four fixed slots, nothing is allocated.
 */
#ifndef TG_THIN_H
#define TG_THIN_H

#include <stddef.h>

/* Largest point a slot holds (memg's lines are cut at 159 bytes, as before). */
#define TG_THIN_DATA_MAX 176

/* Writes a kept point (data[0..len) as given to tg_thin_point). */
typedef void (*tg_thin_write_fn)(void *ctx, const void *data, size_t len);

struct tg_thin_pt {
	double y;
	size_t order;      /* its place in the series */
	size_t len;
	char data[TG_THIN_DATA_MAX];
};

struct tg_thin {
	tg_thin_write_fn write;
	void *ctx;
	double x0, x1;
	size_t columns;    /* 0: every point is written */
	long col;          /* the slice of keep (-1: none yet) */
	size_t order;      /* points seen */
	struct tg_thin_pt keep[4];  /* first, lowest, highest, last of the slice */
};

/* Starts a series whose kept points go to write(ctx, ...); columns 0 keeps
 * every point (written at once). */
void tg_thin_init(struct tg_thin *t, tg_thin_write_fn write, void *ctx, double x0, double x1,
		  size_t columns);

/* The next point, in x order: at x, of value y, data[0..len) (len at most
 * TG_THIN_DATA_MAX: cut there). */
void tg_thin_point(struct tg_thin *t, double x, double y, const void *data, size_t len);

/* Writes the last slice's points. */
void tg_thin_finish(struct tg_thin *t);

/* A tg_thin_write_fn writing the bytes to the FILE * ctx (write errors: its ferror). */
void tg_thin_fwrite(void *ctx, const void *data, size_t len);

#endif
