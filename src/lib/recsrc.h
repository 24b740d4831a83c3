/*
 * recsrc.h - the records of one dump file, whether text or a binary capture.
 *
 * A source yields the records of a tg_dumpfile as records.h structs: from a text
 * dump by reading and parsing lines (malformed lines reported through the diag
 * and skipped), from a capture (df->cap) by decoding the thread's or process's
 * stream.  The structs are the same either way, with one difference kept cheap:
 * for a capture, a .mem record's site and rest texts (FILE:LINE:FUNCTION,
 * ...=>DELTA) are formatted only when tg_src_mem_text() asks for them; file,
 * func, line, delta and the time (value and text) are always filled.
 * s->lineno is the record's line in the text file -- for a capture, the line
 * it has in the exported file (its record number).
 */
#ifndef TG_RECSRC_H
#define TG_RECSRC_H

#include <stddef.h>
#include <stdint.h>

#include "capture_read.h"
#include "diag.h"
#include "dumpfile.h"
#include "linereader.h"
#include "records.h"

/* Longest formatted record: FILE and FUNCTION are each below 4 GiB, but a
 * record longer than the text reader's line limit is not a record either. */
#define TG_SRC_TEXT_MAX (TG_LR_MAX_LINE + 64)

struct tg_src {
	const struct tg_dumpfile *df;
	int has_time;            /* records carry TIME (text: TIME# prefixes expected) */
	unsigned long lineno;    /* line (record number) of the last record returned */
	int is_cap;              /* reading df->cap, or df->agg (is_agg) */
	int is_agg;              /* reading df->agg_thread's curve */
	size_t agg_i;            /* aggregate: next record (two per bucket) */
	int lazy_time;           /* capture: time text only from tg_src_mem_text() (the
				  * caller sets it when it needs the text of few records) */
	struct tg_lr lr;         /* text: the reader */
	struct tg_capcur cur;    /* capture: the stream's cursor */
	struct tg_cap_rec_data rec; /* capture: the last record decoded */
	int64_t sec;             /* capture: the second tbuf's prefix holds (-1: none) */
	size_t sec_len;          /* length of "SECONDS." in tbuf */
	char tbuf[TG_CAP_TIME_MAX]; /* capture: the last record's TIME text */
	struct tg_time_order order; /* text: its TIMEs' order (records.h) */
	char *text;              /* the last record's site and rest when formatted
				  * (a capture's; a text line's LINE of -1) */
	size_t text_alloc;
};

/*
 * Opens df for reading (bufsize: the text reader's buffer, 0 for the default).
 * has_time: dumps carry times (for a capture, records without them are given
 * empty time text).  Returns 0 or -1 (d->msg set; nothing to release).
 */
int tg_src_open(struct tg_src *s, const struct tg_dumpfile *df, int has_time, size_t bufsize,
		struct tg_diag *d);
void tg_src_release(struct tg_src *s);

/* The capture halves of the readers below. */
int tg_src_cap_next_mem(struct tg_src *s, struct tg_memrec *r, struct tg_diag *d);
int tg_src_cap_next_stack(struct tg_src *s, struct tg_stackrec *r, struct tg_diag *d);
int tg_src_cap_next_proc(struct tg_src *s, struct tg_procrec *r, struct tg_diag *d);
/* A text record whose LINE was written -1 (line_minus1; read as 0,
 * docs/formats.md "LINE"): its site (and a .mem record's rest) formatted anew
 * with LINE 0, as a capture's are, so that every command prints and groups it
 * as the capture and its export do.  0 or -1 (out of memory). */
int tg_src_mem_line_minus1(struct tg_src *s, struct tg_memrec *r, struct tg_diag *d);
int tg_src_stack_line_minus1(struct tg_src *s, struct tg_stackrec *r, struct tg_diag *d);

/*
 * Each returns 1 with the next record in *r (texts valid until the next call),
 * 0 at the end, or -1 with d->msg set (a read error, a malformed line in strict
 * mode, a corrupt capture).  Malformed text lines are reported and skipped; a
 * text line whose TIME goes back is kept, the first of each file reported
 * (tg_time_order_check).
 */
static inline int tg_src_next_mem(struct tg_src *s, struct tg_memrec *r, struct tg_diag *d)
{
	const char *line, *why;
	size_t len;
	int got;

	if (s->is_cap)
		return tg_src_cap_next_mem(s, r, d);
	while ((got = tg_lr_next(&s->lr, &line, &len, d)) > 0) {
		why = tg_lr_bad(&s->lr);
		if (!why)
			why = tg_memrec_parse(r, line, len, s->has_time);
		if (!why) {
			s->lineno = s->lr.lineno;
			if (r->line_minus1 && tg_src_mem_line_minus1(s, r, d) < 0)
				return -1;
			if (s->has_time &&
			    tg_time_order_check(&s->order, r->time.v, s->df->path, s->lineno, d) < 0)
				return -1;
			return 1;
		}
		if (tg_malformed(d, s->df->path, s->lr.lineno, why) < 0)
			return -1;
	}
	return got;
}

static inline int tg_src_next_stack(struct tg_src *s, struct tg_stackrec *r, struct tg_diag *d)
{
	const char *line, *why;
	size_t len;
	int got;

	if (s->is_cap)
		return tg_src_cap_next_stack(s, r, d);
	while ((got = tg_lr_next(&s->lr, &line, &len, d)) > 0) {
		why = tg_lr_bad(&s->lr);
		if (!why)
			why = tg_stackrec_parse(r, line, len, s->has_time);
		if (!why) {
			s->lineno = s->lr.lineno;
			if (r->line_minus1 && tg_src_stack_line_minus1(s, r, d) < 0)
				return -1;
			if (s->has_time &&
			    tg_time_order_check(&s->order, r->time.v, s->df->path, s->lineno, d) < 0)
				return -1;
			return 1;
		}
		if (tg_malformed(d, s->df->path, s->lr.lineno, why) < 0)
			return -1;
	}
	return got;
}

static inline int tg_src_next_proc(struct tg_src *s, struct tg_procrec *r, struct tg_diag *d)
{
	const char *line, *why;
	size_t len;
	int got;

	if (s->is_cap)
		return tg_src_cap_next_proc(s, r, d);
	while ((got = tg_lr_next(&s->lr, &line, &len, d)) > 0) {
		why = tg_lr_bad(&s->lr);
		if (!why)
			why = tg_procrec_parse(r, line, len, s->has_time);
		if (!why) {
			s->lineno = s->lr.lineno;
			if (s->has_time &&
			    tg_time_order_check(&s->order, r->time.v, s->df->path, s->lineno, d) < 0)
				return -1;
			return 1;
		}
		if (tg_malformed(d, s->df->path, s->lr.lineno, why) < 0)
			return -1;
	}
	return got;
}

/* Fills r->site and r->rest of the last .mem record (capture), and its time text
 * when s->lazy_time; 0 or -1. */
int tg_src_cap_mem_text(struct tg_src *s, struct tg_memrec *r, struct tg_diag *d);

static inline int tg_src_mem_text(struct tg_src *s, struct tg_memrec *r, struct tg_diag *d)
{
	return s->is_cap ? tg_src_cap_mem_text(s, r, d) : 0;
}

/*
 * Writes the text line of a capture record into buf (room for len bytes):
 * .mem  [TIME#]FILE:LINE:FUNCTION=>DELTA
 * .stack INDENT[TIME#]FILE:LINE:FUNCTION (indent = depth spaces)
 * process.mem [TIME#]BYTES
 * with TIME only when timed, and a final newline.  Returns the length, or 0
 * when it does not fit.
 */
size_t tg_src_fmt_record(char *buf, size_t len, const struct tg_cap_rec_data *r, int timed);

#endif
