/*
 * ptfile.h - a series of points kept aside in a temporary file, in binary:
 * memg --held writes each thread's steps once and reads them back twice (the
 * sum of the threads, then each thread's graph data), with no text in between.
 *
 * A record is a tag byte, then either the point's x (double), its value (int64)
 * and its TIME text (tag: the text's length), or, for a capture's time (tag
 * TG_PT_TAG_US), its Unix microseconds (int64) and its value: 17 bytes, the
 * text made only for the points printed.  In the machine's own byte order: the
 * file is unlinked as soon as it is made and lives only as long as the command.
 */
#ifndef TG_PTFILE_H
#define TG_PTFILE_H

#include <stddef.h>
#include <stdint.h>

#include "diag.h"

/* A time of microseconds that tg_ptfile_put_us keeps as such (below 2^53, so
 * exactly a double, whose value us / 1e6 rounded once is strtod's of its
 * "S.UUUUUU" text); others are kept as their text. */
#define TG_PT_US_EXACT(us) ((us) >= 0 && (us) < ((int64_t)1 << 53))

/* Longest TIME text kept with a point (a dump's TIME is far shorter). */
#define TG_PT_TEXT_MAX 127
#define TG_PT_TAG_US 255

struct tg_pt {
	double x;            /* its time's value: strtod's of its text */
	int64_t v;
	int has_us;          /* the time is us, its text not kept */
	int64_t us;          /* with has_us: the time, Unix microseconds */
	size_t len;          /* without: the text's length */
	char xs[TG_PT_TEXT_MAX + 1];  /* without: the text, NUL-terminated */
};

/* Writes p's TIME text into buf (TG_PT_TEXT_MAX + 1 bytes; not NUL-terminated);
 * returns its length. */
size_t tg_pt_text(const struct tg_pt *p, char *buf);

/* A point of a data file as the thinning (thin.h) keeps it until it is
 * written, its first tg_pt_line_of() bytes used: its time and a value, the
 * line made only for the points written (memg's and memg --held's files). */
struct tg_pt_line {
	int64_t v;
	int64_t us;            /* has_us: the time */
	unsigned char has_us;
	unsigned char len;     /* else its text, xs[0..len) */
	char xs[TG_PT_TEXT_MAX + 1];
};

/* Fills l with p's time and the value v; returns the bytes of l to keep. */
size_t tg_pt_line_of(struct tg_pt_line *l, const struct tg_pt *p, int64_t v);

/* Writes l's TIME text into buf (TG_PT_TEXT_MAX + 1 bytes; not NUL-terminated);
 * returns its length. */
size_t tg_pt_line_time(const struct tg_pt_line *l, char *buf);

struct tg_ptfile {
	int fd;              /* -1: not open */
	char *buf;           /* TG_PTFILE_BUF bytes: writes gathered, reads ahead */
	size_t n;            /* bytes in buf (writing: to write; reading: read) */
	size_t at;           /* reading: the next record's offset in buf */
	int reading;
	unsigned long long points;
};

/* An unopened file, for release. */
#define TG_PTFILE_INIT { .fd = -1 }

/* Makes an anonymous file in folder dir (name: a name free there, removed at
 * once).  0, or -1 with d set. */
int tg_ptfile_open(struct tg_ptfile *f, const char *dir, const char *name, struct tg_diag *d);

/* Appends a point (text xs[0..len), cut to TG_PT_TEXT_MAX).  0, or -1 with d set. */
int tg_ptfile_put(struct tg_ptfile *f, double x, int64_t v, const char *xs, size_t len,
		  struct tg_diag *d);

/* Appends a point at us, Unix microseconds (its text tg_cap_fmt_time's), and
 * sets *x to its time's value (strtod's of that text).  0, or -1 with d set. */
int tg_ptfile_put_us(struct tg_ptfile *f, int64_t us, int64_t v, double *x,
		     struct tg_diag *d);

/* Ends writing (or a reading) and reads from the first point on.  0 or -1. */
int tg_ptfile_rewind(struct tg_ptfile *f, struct tg_diag *d);

/* The next point: 1, 0 at the end, or -1 with d set. */
int tg_ptfile_get(struct tg_ptfile *f, struct tg_pt *p, struct tg_diag *d);

/* Closes f (the file goes with it). */
void tg_ptfile_release(struct tg_ptfile *f);

#endif
