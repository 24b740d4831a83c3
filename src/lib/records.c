/*
 * records.c - hand-written parsers for dump lines (no sscanf/strtod per line).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "records.h"
#include "tg_format.h"

static const double tg_pow10[] = {
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9,
	1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18,
};

int tg_time_parse(const char *s, size_t len, double *v)
{
	unsigned long long ip = 0, fp = 0;
	const char *p = s, *e = s + len, *dot;
	unsigned dgt;
	size_t nf;

	/* at most 18 digits before the point: no overflow, any real timestamp */
	if (!len || len > 64)
		return -1;
	while (p < e && (dgt = (unsigned)(*p - '0')) < 10) {
		ip = ip * 10 + dgt;
		p++;
	}
	if (p == s || p - s > 18)
		return -1;
	if (p == e) {
		*v = (double)ip;
		return 0;
	}
	if (*p != '.')
		return -1;
	dot = p++;
	while (p < e && (dgt = (unsigned)(*p - '0')) < 10) {
		if (p - dot <= 18)
			fp = fp * 10 + dgt;
		p++;
	}
	if (p != e)
		return -1;
	nf = (size_t)(p - dot - 1);
	if (nf > 18)
		nf = 18;
	*v = (double)ip + (nf ? (double)fp / tg_pow10[nf] : 0.0);
	return 0;
}

double tg_time_exact(const struct tg_str *text)
{
	char buf[64];
	size_t n = text->len < sizeof(buf) - 1 ? text->len : sizeof(buf) - 1;

	memcpy(buf, text->s, n);
	buf[n] = '\0';
	return strtod(buf, NULL);
}

int tg_int_parse(const char *s, size_t len, long long *v)
{
	unsigned long long x = 0;
	const char *p = s, *e = s + len;
	int neg = 0;

	if (len && (*p == '-' || *p == '+')) {
		neg = *p == '-';
		p++;
	}
	if (p == e || e - p > 18)
		return -1;
	for (; p < e; p++) {
		unsigned dgt = (unsigned)(*p - '0');
		if (dgt > 9)
			return -1;
		x = x * 10 + dgt;
	}
	*v = neg ? -(long long)x : (long long)x;
	return 0;
}

static const double tg_pow10_inv[] = {
	1e0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9,
	1e-10, 1e-11, 1e-12, 1e-13, 1e-14, 1e-15, 1e-16, 1e-17, 1e-18,
};

/* Non-zero when the 8 bytes of v (read from memory) are all ASCII digits. */
static inline int rec_le64_is_digits(uint64_t v)
{
	return ((v & 0xF0F0F0F0F0F0F0F0ULL) |
		(((v + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL) >> 4)) ==
	       0x3333333333333333ULL;
}

/* The value of 8 ASCII digits read into v (first digit in the low byte). */
static inline uint64_t rec_le64_digits(uint64_t v)
{
	v -= 0x3030303030303030ULL;
	v = (v * 10) + (v >> 8);
	return (((v & 0x000000FF000000FFULL) * (100 + (1000000ULL << 32))) +
		(((v >> 16) & 0x000000FF000000FFULL) * (1 + (10000ULL << 32)))) >> 32;
}

/*
 * How many of the last bytes of v (the 8 bytes read before some point) are ASCII
 * digits, counting back from that point: 0 to 8.  Exact for any byte values.
 */
static inline int rec_le64_trailing_digits(uint64_t v)
{
	uint64_t x = (v & 0xF0F0F0F0F0F0F0F0ULL) ^ 0x3030303030303030ULL;
	uint64_t y = ((v & 0x0F0F0F0F0F0F0F0FULL) + 0x0606060606060606ULL) &
		     0xF0F0F0F0F0F0F0F0ULL;
	uint64_t z = x | y; /* a byte is zero iff it is a digit */
	uint64_t m = (((z & 0x7F7F7F7F7F7F7F7FULL) + 0x7F7F7F7F7F7F7F7FULL) | z) &
		     0x8080808080808080ULL;

	return m ? __builtin_clzll(m) / 8 : 8;
}

/* How many of the first bytes of v (8 bytes read from some point) are digits. */
static inline int rec_le64_leading_digits(uint64_t v)
{
	uint64_t x = (v & 0xF0F0F0F0F0F0F0F0ULL) ^ 0x3030303030303030ULL;
	uint64_t y = ((v & 0x0F0F0F0F0F0F0F0FULL) + 0x0606060606060606ULL) &
		     0xF0F0F0F0F0F0F0F0ULL;
	uint64_t z = x | y;
	uint64_t m = (((z & 0x7F7F7F7F7F7F7F7FULL) + 0x7F7F7F7F7F7F7F7FULL) | z) &
		     0x8080808080808080ULL;

	return m ? __builtin_ctzll(m) / 8 : 8;
}

/* The value of the last nd (1..7) digits of v, as rec_le64_trailing_digits counted. */
static inline uint64_t rec_le64_last_digits(uint64_t v, int nd)
{
	uint64_t keep = ~0ULL << (8 * (8 - nd));

	return rec_le64_digits((v & keep) | (0x3030303030303030ULL & ~keep));
}

/*
 * The common case of "[TIME#]": digits, '.', digits, '#', parsed in one pass.
 * Returns 1 and advances *s past the '#', or 0 (nothing changed) so that the
 * general code decides (and names the error).
 */
static int rec_time_fast(struct tg_time *t, const char **s, size_t *len)
{
	const char *p = *s, *e = *s + *len, *dot;
	unsigned long long ip = 0, fp = 0;
	unsigned dgt;
	size_t nf;

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	if (e - p >= 8) {
		/* eight digits at once (SWAR, little-endian byte order) */
		uint64_t v;
		memcpy(&v, p, 8);
		if (rec_le64_is_digits(v)) {
			ip = rec_le64_digits(v);
			p += 8;
		}
	}
#endif
	while (p < e && (dgt = (unsigned)(*p - '0')) < 10) {
		ip = ip * 10 + dgt;
		p++;
	}
	if (p == *s || p - *s > 18 || p == e)
		return 0;
	if (*p == '.') {
		dot = p++;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		if (e - p >= 8) {
			/* the fraction's digits (usually 6) without a loop */
			uint64_t v;
			int n;
			memcpy(&v, p, 8);
			n = rec_le64_leading_digits(v);
			if (n > 0 && n < 8) {
				fp = rec_le64_digits((v << (8 * (8 - n))) |
						     (0x3030303030303030ULL >> (8 * n)));
				p += n;
				goto frac_done;
			}
		}
#endif
		while (p < e && (dgt = (unsigned)(*p - '0')) < 10) {
			fp = fp * 10 + dgt;
			p++;
		}
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
frac_done:
#endif
		nf = (size_t)(p - dot - 1);
		if (nf > 18 || p == e)
			return 0;
	} else {
		nf = 0;
	}
	if (*p != TG_TIME_SEP)
		return 0;
	t->v = (double)ip + (double)fp * tg_pow10_inv[nf];
	t->text.s = *s;
	t->text.len = (size_t)(p - *s);
	*len -= t->text.len + 1;
	*s = p + 1;
	return 1;
}

/* Splits "[TIME#]rest"; returns NULL or the reason the line is malformed. */
static const char *rec_time(struct tg_time *t, const char **s, size_t *len, int has_time)
{
	const char *hash, *p, *e;

	if (!has_time) {
		t->v = 0;
		t->text.s = *s;
		t->text.len = 0;
		return NULL;
	}
	if (rec_time_fast(t, s, len))
		return NULL;
	/* the time is short: a plain loop beats memchr's setup */
	for (p = *s, e = *s + *len, hash = NULL; p < e; p++)
		if (*p == TG_TIME_SEP) {
			hash = p;
			break;
		}
	if (!hash)
		return "no '#' after the time";
	t->text.s = *s;
	t->text.len = (size_t)(hash - *s);
	if (tg_time_parse(*s, t->text.len, &t->v) < 0)
		return "bad time";
	*len -= t->text.len + 1;
	*s = hash + 1;
	return NULL;
}

/* Splits FILE:LINE:FUNCTION on its last two ':'; NULL or the reason. */
static const char *rec_site(const char *s, size_t len, struct tg_str *file,
			    unsigned long *line, struct tg_str *func, int *minus1)
{
	const char *c2, *c1;
	unsigned long x = 0;
	const char *p;

	/* FUNCTION and LINE are short: scan back by hand (memrchr costs more) */
	for (c2 = s + len; c2 > s && c2[-1] != TG_FIELD_SEP; c2--)
		;
	if (c2 == s)
		return "no FILE:LINE:FUNCTION";
	c2--;
	for (c1 = c2; c1 > s && c1[-1] != TG_FIELD_SEP; c1--)
		;
	if (c1 == s)
		return "no FILE:LINE:FUNCTION";
	c1--;
	if (c1 + 1 == c2 || c2 - c1 > 10)
		return "bad line number";
	p = c1 + 1;
	if (c2 - c1 == 3 && c1[1] == '-' && c1[2] == '1') {
		p = c2;  /* "no line" as threadgraph 0.1.0 wrote it: the line 0 of today */
		*minus1 = 1;
	}
	for (; p < c2; p++) {
		unsigned dgt = (unsigned)(*p - '0');
		if (dgt > 9)
			return "bad line number";
		x = x * 10 + dgt;
	}
	*line = x;
	file->s = s;
	file->len = (size_t)(c1 - s);
	func->s = c2 + 1;
	func->len = len - (size_t)(c2 + 1 - s);
	return NULL;
}

/*
 * The common case of "FILE:LINE:FUNCTION=>DELTA" in one backward pass: DELTA's
 * digits, "=>", FUNCTION up to its ':', LINE's digits up to their ':'.  Returns 1
 * with r filled, or 0 so that the general code decides (and names the error).
 */
static int mem_tail_fast(struct tg_memrec *r, const char *s, size_t len)
{
	const char *p = s + len, *gt, *c2;
	unsigned long long x = 0, mul = 1;
	unsigned long line = 0, lmul = 1;
	int nd = 0;

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	/* DELTA's digits without a loop (SWAR); 8 digits or more take the loop */
	if (len >= 16) {
		uint64_t v;
		memcpy(&v, p - 8, 8);
		nd = rec_le64_trailing_digits(v);
		if (nd && nd < 8) {
			x = rec_le64_last_digits(v, nd);
			p -= nd;
		} else {
			nd = 0;
		}
	}
	if (!nd)
#endif
	while (p > s && (unsigned)(p[-1] - '0') < 10 && nd < 18) {
		x += (unsigned long long)(p[-1] - '0') * mul;
		mul *= 10;
		nd++;
		p--;
	}
	if (!nd || p - s < 2)
		return 0;
	{ /* branch-free: signs are random, a branch would mispredict */
		int neg = p[-1] == '-', sign = neg | (p[-1] == '+');
		x = neg ? 0 - x : x;
		p -= sign;
	}
	if (p - s < 2 || p[-1] != '>' || p[-2] != '=')
		return 0;
	gt = p - 1;
	r->delta = (long long)x;
	r->site.s = s;
	r->site.len = (size_t)(gt - 1 - s);
	p = gt - 1;
#ifdef __SSE2__
	/* FUNCTION is usually shorter than 16 bytes: find its ':' in one compare */
	if (p - s >= 16) {
		__m128i w = _mm_loadu_si128((const __m128i *)(const void *)(p - 16));
		unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(w, _mm_set1_epi8(TG_FIELD_SEP)));
		if (m)
			p = p - 16 + (31 - __builtin_clz(m)) + 1;
		else
			p -= 16;
	}
#endif
	for (; p > s && p[-1] != TG_FIELD_SEP; p--)
		;
	if (p == s)
		return 0;
	c2 = p - 1;
	nd = 0;
	p = c2;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	if (c2 - s >= 9) {
		uint64_t v;
		memcpy(&v, c2 - 8, 8);
		nd = rec_le64_trailing_digits(v);
		if (nd && nd < 8) {
			line = (unsigned long)rec_le64_last_digits(v, nd);
			p = c2 - nd;
		} else {
			nd = 0;
		}
	}
	if (!nd)
#endif
	for (p = c2; p > s && (unsigned)(p[-1] - '0') < 10 && nd < 9; p--, nd++) {
		line += (unsigned long)(p[-1] - '0') * lmul;
		lmul *= 10;
	}
	if (!nd || p == s || p[-1] != TG_FIELD_SEP)
		return 0;
	r->line = line;
	r->file.s = s;
	r->file.len = (size_t)(p - 1 - s);
	r->func.s = c2 + 1;
	r->func.len = (size_t)(gt - 1 - (c2 + 1));
	return 1;
}

/* The wrappers of tg_memrec_is_wrapper: a file (the end of its path, after a
 * '/' or the whole of it: "builtins" is a C function's module) and its
 * functions, NULL-terminated. */
static const struct {
	const char *file;
	const char *funcs[6];
} rec_wrappers[] = {
	{ "threading.py", { "run", "_bootstrap_inner", "_bootstrap", NULL } },
	{ "builtins", { "exec", NULL } },
	{ "IPython/core/interactiveshell.py",
	  { "run_cell", "_run_cell", "run_cell_async", "run_ast_nodes", "run_code", NULL } },
	{ "IPython/core/async_helpers.py", { "_pseudo_sync_runner", NULL } },
	{ "coroutine", { "send", NULL } },  /* a coroutine's frame, resumed */
};

int tg_memrec_is_wrapper(const struct tg_memrec *m)
{
	for (size_t w = 0; w < sizeof(rec_wrappers) / sizeof(rec_wrappers[0]); w++) {
		const char *file = rec_wrappers[w].file;
		size_t fl = strlen(file);

		if (m->file.len < fl || memcmp(m->file.s + m->file.len - fl, file, fl) ||
		    (m->file.len > fl && m->file.s[m->file.len - fl - 1] != '/'))
			continue;
		for (const char *const *f = rec_wrappers[w].funcs; *f; f++)
			if (m->func.len == strlen(*f) && !memcmp(m->func.s, *f, m->func.len))
				return 1;
	}
	return 0;
}

/* NULL when |delta| <= TG_DELTA_MAX; one compare, as it runs per line. */
static inline const char *rec_delta_range(long long delta)
{
	if (__builtin_expect((unsigned long long)delta + (unsigned long long)TG_DELTA_MAX >
			     2 * (unsigned long long)TG_DELTA_MAX, 0))
		return "memory delta out of range";
	return NULL;
}

const char *tg_memrec_parse(struct tg_memrec *r, const char *s, size_t len, int has_time)
{
	const char *why, *gt;

	if ((why = rec_time(&r->time, &s, &len, has_time)))
		return why;
	r->call_start = TG_NO_TIME;
	r->line_minus1 = 0;
	r->rest.s = s;
	r->rest.len = len;
	if (mem_tail_fast(r, s, len))
		return rec_delta_range(r->delta);
	/* last "=>": DELTA is short, scan back by hand */
	if (len < 2)
		return "no '=>' before the memory delta";
	for (gt = s + len - 1; gt > s && !(gt[0] == '>' && gt[-1] == '='); gt--)
		;
	if (gt <= s)
		return "no '=>' before the memory delta";
	if (tg_int_parse(gt + 1, len - (size_t)(gt + 1 - s), &r->delta) < 0)
		return "bad memory delta";
	if ((why = rec_delta_range(r->delta)))
		return why;
	r->site.s = s;
	r->site.len = (size_t)(gt - 1 - s);
	return rec_site(s, r->site.len, &r->file, &r->line, &r->func, &r->line_minus1);
}

const char *tg_stackrec_parse(struct tg_stackrec *r, const char *s, size_t len, int has_time)
{
	const char *why;
	size_t d = 0;

	while (d < len && s[d] == TG_INDENT_CHAR)
		d++;
	r->depth = (unsigned)d;
	s += d;
	len -= d;
	if ((why = rec_time(&r->time, &s, &len, has_time)))
		return why;
	r->site.s = s;
	r->site.len = len;
	r->line_minus1 = 0;
	return rec_site(s, len, &r->file, &r->line, &r->func, &r->line_minus1);
}

const char *tg_procrec_parse(struct tg_procrec *r, const char *s, size_t len, int has_time)
{
	const char *why;

	if ((why = rec_time(&r->time, &s, &len, has_time)))
		return why;
	if (tg_int_parse(s, len, &r->bytes) < 0)
		return "bad memory size";
	if (r->bytes > TG_DELTA_MAX || r->bytes < -TG_DELTA_MAX)
		return "memory size out of range";
	return NULL;
}

int tg_time_order_back(struct tg_time_order *o, double t, const char *path,
		       unsigned long lineno, struct tg_diag *d)
{
	char why[200];

	o->told = 1;
	snprintf(why, sizeof(why), "time goes back %.6f s (a dump's times never decrease)%s",
		 o->last - t, d->strict ? "" : ": the line is kept, but a time axis or "
		 "duration across it is not the run's");
	return tg_doubtful(d, path, lineno, why);
}
