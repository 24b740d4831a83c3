/*
 * recsrc.c - records of a text dump or of a capture's stream (recsrc.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggfile.h"
#include "recsrc.h"
#include "tg_format.h"

int tg_src_open(struct tg_src *s, const struct tg_dumpfile *df, int has_time, size_t bufsize,
		struct tg_diag *d)
{
	memset(s, 0, sizeof(*s));
	s->df = df;
	s->has_time = has_time;
	s->sec = -1;
	if (df->agg_thread) {
		s->is_cap = s->is_agg = 1;  /* records made, as a capture's are */
		s->lr.fd = -1;
		return 0;
	}
	if (!df->cap)
		return tg_lr_open(&s->lr, df->path, bufsize, d);
	s->is_cap = 1;
	s->lr.fd = -1;
	tg_capcur_init(&s->cur, df->cap, df->cap_thread);
	s->has_time = has_time && (df->cap->flags & TG_CAP_F_TIME);
	return 0;
}

void tg_src_release(struct tg_src *s)
{
	if (s->is_agg)
		;
	else if (s->is_cap)
		tg_capcur_release(&s->cur);
	else
		tg_lr_release(&s->lr);
	free(s->text);
	s->text = NULL;
}

/* Largest |DELTA| or BYTES the text reader takes: larger values of a capture
 * are malformed records, as their exported lines would be, with the text
 * reader's reason: out of range, or beyond its 18 digits. */
#define SRC_INT_MAX TG_DELTA_MAX
#define SRC_DIGITS_MAX 999999999999999999LL

static const char *src_range_why(int64_t v, const char *out_of_range, const char *bad)
{
	return v > SRC_DIGITS_MAX || v < -SRC_DIGITS_MAX ? bad : out_of_range;
}

static const char src_digits2[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

/* Fills t->text from sec and frac ("SECONDS." formatted once a second). */
static inline void src_time_text(struct tg_src *s, struct tg_time *t, int64_t sec,
				 unsigned frac)
{
	char *p;

	if (sec != s->sec) {
		s->sec_len = tg_cap_fmt_time(s->tbuf, sec * 1000000) - 6;
		s->sec = sec;
	}
	p = s->tbuf + s->sec_len;
	memcpy(p, src_digits2 + 2 * (frac / 10000), 2);
	memcpy(p + 2, src_digits2 + 2 * (frac / 100 % 100), 2);
	memcpy(p + 4, src_digits2 + 2 * (frac % 100), 2);
	t->text.s = s->tbuf;
	t->text.len = s->sec_len + 6;
}

/* Fills t from the last record's time; its text too unless s->lazy_time.  The
 * value is computed as the text parsers compute it from the same text. */
static inline void src_time(struct tg_src *s, struct tg_time *t)
{
	int64_t us = s->rec.t_us, sec = us / 1000000;
	unsigned frac = (unsigned)(us - sec * 1000000);

	t->text.s = s->tbuf;
	t->text.len = 0;
	if (!s->has_time) {
		t->v = 0;
		return;
	}
	t->v = (double)sec + (double)frac * 1e-6;
	if (!s->lazy_time)
		src_time_text(s, t, sec, frac);
}

/*
 * Reports the capture record s->lineno as malformed.  The file it names is the
 * capture itself, then the record as its exported line (a capture run has no
 * .mem file to look at): "run/capture.tg: MainThread.mem:9".  0 or -1, as
 * tg_malformed().
 */
static int src_cap_malformed(struct tg_src *s, struct tg_diag *d, const char *why)
{
	const char *base = strrchr(s->df->path, '/');
	char where[4096];

	snprintf(where, sizeof(where), "%s: %s", s->df->cap->path,
		 base ? base + 1 : s->df->path);
	return tg_malformed(d, where, s->lineno, why);
}

/* How far V lies from bucket B's readings (0 inside [min, max]). */
static uint64_t src_agg_gap(int64_t v, const struct tg_agg_rbucket *b)
{
	if (v < b->min)
		return (uint64_t)b->min - (uint64_t)v;
	if (v > b->max)
		return (uint64_t)v - (uint64_t)b->max;
	return 0;
}

/* Whether bucket K's highest reading goes first: the file gives each bucket's
 * lowest and highest, not their order, and the curve holds the level of a
 * bucket's second reading until the next bucket.  Between two buckets the
 * thread made no call or return (each is a reading), so its memory stayed near
 * where the next bucket starts: the reading nearer the next bucket's goes last
 * (a thread that freed what it held and then waited in one call shows the freed
 * level while it waits, not the highest).  Ties, and the last bucket: lowest
 * first. */
static int src_agg_high_first(const struct tg_agg_rthread *t, size_t k)
{
	const struct tg_agg_rbucket *b = &t->b[k];

	if (k + 1 >= t->nb || b->min == b->max)
		return 0;
	return src_agg_gap(b->min, &t->b[k + 1]) < src_agg_gap(b->max, &t->b[k + 1]);
}

/* The next record of an aggregate thread's curve: each bucket's lowest and
 * (when higher) its highest memory, in the order src_agg_high_first gives: at
 * the bucket's start, but a lowest after the highest at the bucket's end. */
static int src_agg_next_mem(struct tg_src *s, struct tg_memrec *r)
{
	const struct tg_agg_rthread *t = s->df->agg_thread;
	const struct tg_agg_rbucket *b;
	int second, high_first;

	for (;;) {
		if (s->agg_i / 2 >= t->nb)
			return 0;
		b = &t->b[s->agg_i / 2];
		if (s->agg_i % 2 == 0 || b->max != b->min)
			break;
		s->agg_i++;
	}
	second = s->agg_i % 2;
	high_first = src_agg_high_first(t, s->agg_i / 2);
	/* the lowest after the highest: at the bucket's end, so that the highest
	 * is the thread's level for the bucket's width (in a sum of threads too) */
	s->rec.t_us = b->t_us + (second && high_first ? t->width_us - 1 : 0);
	s->lineno = s->agg_i + 1;
	src_time(s, &r->time);
	r->file.s = TG_CURVE_FILE;
	r->file.len = sizeof(TG_CURVE_FILE) - 1;
	r->func.s = TG_AGG_CURVE_FUNC;
	r->func.len = sizeof(TG_AGG_CURVE_FUNC) - 1;
	r->line = 0;
	r->delta = second != high_first ? b->max : b->min;
	if (r->delta > SRC_INT_MAX)
		r->delta = SRC_INT_MAX;
	else if (r->delta < -SRC_INT_MAX)
		r->delta = -SRC_INT_MAX;
	r->site.s = r->rest.s = r->file.s;
	r->site.len = r->rest.len = 0;
	s->agg_i++;
	return 1;
}

int tg_src_cap_next_mem(struct tg_src *s, struct tg_memrec *r, struct tg_diag *d)
{
	int got;

	if (s->is_agg)
		return src_agg_next_mem(s, r);

	while ((got = tg_capcur_next_return(&s->cur, &s->rec, d)) > 0) {
		s->lineno = s->rec.number;
		if (s->rec.line < 0 || s->rec.line > 999999999) {
			/* the text reader would not take this line either */
			if (src_cap_malformed(s, d, "bad line number") < 0)
				return -1;
			continue;
		}
		if (s->rec.value > SRC_INT_MAX || s->rec.value < -SRC_INT_MAX) {
			if (src_cap_malformed(s, d, src_range_why(s->rec.value,
				"memory delta out of range", "bad memory delta")) < 0)
				return -1;
			continue;
		}
		src_time(s, &r->time);
		r->file.s = s->rec.code->file;
		r->file.len = s->rec.code->file_len;
		r->func.s = s->rec.code->func;
		r->func.len = s->rec.code->func_len;
		r->line = (unsigned long)s->rec.line;
		r->delta = s->rec.value;
		r->call_start = TG_NO_TIME;
		if (s->has_time && s->cur.timed && s->rec.call_t_us != TG_CAP_T_UNKNOWN) {
			int64_t us = s->rec.call_t_us, sec = us / 1000000;
			r->call_start = (double)sec + (double)(us - sec * 1000000) * 1e-6;
		}
		r->site.s = r->rest.s = r->file.s;
		r->site.len = r->rest.len = 0;
		return 1;
	}
	return got;
}

int tg_src_cap_next_stack(struct tg_src *s, struct tg_stackrec *r, struct tg_diag *d)
{
	int got;

	if (s->is_agg)
		return 0;  /* an aggregate run has no call records */

	while ((got = tg_capcur_next_call(&s->cur, &s->rec, d)) > 0) {
		s->lineno = s->rec.number;
		if (s->rec.line < 0 || s->rec.line > 999999999) {
			if (src_cap_malformed(s, d, "bad line number") < 0)
				return -1;
			continue;
		}
		src_time(s, &r->time);
		r->depth = s->rec.depth;
		r->file.s = s->rec.code->file;
		r->file.len = s->rec.code->file_len;
		r->func.s = s->rec.code->func;
		r->func.len = s->rec.code->func_len;
		r->line = (unsigned long)s->rec.line;
		r->site.s = r->file.s;
		r->site.len = 0;
		return 1;
	}
	return got;
}

int tg_src_cap_next_proc(struct tg_src *s, struct tg_procrec *r, struct tg_diag *d)
{
	int got;

	if (s->is_agg)
		return 0;

	while ((got = tg_capcur_next(&s->cur, &s->rec, d)) > 0) {
		s->lineno = s->rec.number;
		if (s->rec.value <= SRC_INT_MAX && s->rec.value >= -SRC_INT_MAX)
			break;
		if (src_cap_malformed(s, d, src_range_why(s->rec.value,
				"memory size out of range", "bad memory size")) < 0)
			return -1;
	}
	if (got <= 0)
		return got;
	src_time(s, &r->time);
	r->bytes = s->rec.value;
	return 1;
}

/* Writes v in decimal at p; returns the end. */
static char *src_put_i64(char *p, int64_t v)
{
	char tmp[24];
	uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
	size_t n = 0;

	if (v < 0)
		*p++ = '-';
	do {
		tmp[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	while (n)
		*p++ = tmp[--n];
	return p;
}

/* Formats FILE:LINE:FUNCTION into s->text, and with REST "=>DELTA" after it:
 * *SITE (and *REST: the whole) then point there, until the next record.  0,
 * or -1 (out of memory; d->msg set). */
static int src_site_text(struct tg_src *s, const struct tg_str *file, unsigned long line,
			 const struct tg_str *func, struct tg_str *site, struct tg_str *rest,
			 long long delta, struct tg_diag *d)
{
	size_t need = (size_t)file->len + func->len + 64;
	char *p;

	if (need > s->text_alloc) {
		char *nb = realloc(s->text, need);
		if (!nb)
			return tg_error(d, "out of memory");
		s->text = nb;
		s->text_alloc = need;
	}
	p = s->text;
	memcpy(p, file->s, file->len);
	p += file->len;
	*p++ = TG_FIELD_SEP;
	p = src_put_i64(p, (int64_t)line);
	*p++ = TG_FIELD_SEP;
	memcpy(p, func->s, func->len);
	p += func->len;
	site->s = s->text;
	site->len = (size_t)(p - s->text);
	if (rest) {
		memcpy(p, TG_DELTA_SEP, TG_DELTA_SEP_LEN);
		p = src_put_i64(p + TG_DELTA_SEP_LEN, delta);
		rest->s = s->text;
		rest->len = (size_t)(p - s->text);
	}
	return 0;
}

int tg_src_cap_mem_text(struct tg_src *s, struct tg_memrec *r, struct tg_diag *d)
{
	if (s->has_time && s->lazy_time)
		src_time_text(s, &r->time, s->rec.t_us / 1000000,
			      (unsigned)(s->rec.t_us % 1000000));
	return src_site_text(s, &r->file, r->line, &r->func, &r->site, &r->rest, r->delta, d);
}

int tg_src_mem_line_minus1(struct tg_src *s, struct tg_memrec *r, struct tg_diag *d)
{
	return src_site_text(s, &r->file, r->line, &r->func, &r->site, &r->rest, r->delta, d);
}

int tg_src_stack_line_minus1(struct tg_src *s, struct tg_stackrec *r, struct tg_diag *d)
{
	return src_site_text(s, &r->file, r->line, &r->func, &r->site, NULL, 0, d);
}

size_t tg_src_fmt_record(char *buf, size_t len, const struct tg_cap_rec_data *r, int timed)
{
	size_t need = 2 * TG_CAP_TIME_MAX + 64;
	char *p = buf;

	if (r->type != TG_CAP_REC_SAMPLE)
		need += (size_t)r->code->file_len + r->code->func_len + r->depth;
	if (need > len)
		return 0;
	if (r->type == TG_CAP_REC_CALL) {
		memset(p, TG_INDENT_CHAR, r->depth);
		p += r->depth;
	}
	if (timed) {
		p += tg_cap_fmt_time(p, r->t_us);
		*p++ = TG_TIME_SEP;
	}
	if (r->type == TG_CAP_REC_SAMPLE) {
		p = src_put_i64(p, r->value);
		*p++ = '\n';
		return (size_t)(p - buf);
	}
	memcpy(p, r->code->file, r->code->file_len);
	p += r->code->file_len;
	*p++ = TG_FIELD_SEP;
	p = src_put_i64(p, r->line);
	*p++ = TG_FIELD_SEP;
	memcpy(p, r->code->func, r->code->func_len);
	p += r->code->func_len;
	if (r->type == TG_CAP_REC_RETURN) {
		memcpy(p, TG_DELTA_SEP, TG_DELTA_SEP_LEN);
		p = src_put_i64(p + TG_DELTA_SEP_LEN, r->value);
	}
	*p++ = '\n';
	return (size_t)(p - buf);
}
