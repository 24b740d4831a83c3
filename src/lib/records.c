/*
 * records.c - hand-written parsers for dump lines (no sscanf/strtod per line).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "records.h"
#include "tg_format.h"

static const double tg_pow10[] = {
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9,
	1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18,
};

int tg_time_parse(const char *s, size_t len, double *v)
{
	unsigned long long ip = 0, fp = 0;
	size_t i = 0, nd = 0, nf = 0;

	while (i < len && (unsigned)(s[i] - '0') < 10) {
		if (nd < 18)
			ip = ip * 10 + (unsigned)(s[i] - '0');
		else
			return -1; /* beyond any plausible timestamp */
		nd++;
		i++;
	}
	if (!nd)
		return -1;
	if (i < len) {
		if (s[i] != '.')
			return -1;
		i++;
		while (i < len && (unsigned)(s[i] - '0') < 10) {
			if (nf < 18) {
				fp = fp * 10 + (unsigned)(s[i] - '0');
				nf++;
			}
			i++;
		}
		if (i != len)
			return -1;
	}
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
	size_t i = 0;
	int neg = 0;

	if (len && (s[0] == '-' || s[0] == '+')) {
		neg = s[0] == '-';
		i = 1;
	}
	if (i == len || len - i > 18)
		return -1;
	for (; i < len; i++) {
		unsigned dgt = (unsigned)(s[i] - '0');
		if (dgt > 9)
			return -1;
		x = x * 10 + dgt;
	}
	*v = neg ? -(long long)x : (long long)x;
	return 0;
}

/* Splits "[TIME#]rest"; returns NULL or the reason the line is malformed. */
static const char *rec_time(struct tg_time *t, const char **s, size_t *len, int has_time)
{
	const char *hash;

	if (memchr(*s, '\0', *len))
		return "NUL byte in line";
	if (!has_time) {
		t->v = 0;
		t->text.s = *s;
		t->text.len = 0;
		return NULL;
	}
	hash = memchr(*s, TG_TIME_SEP, *len);
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
			    unsigned long *line, struct tg_str *func)
{
	const char *c2 = memrchr(s, TG_FIELD_SEP, len), *c1;
	unsigned long x = 0;
	const char *p;

	if (!c2)
		return "no FILE:LINE:FUNCTION";
	c1 = memrchr(s, TG_FIELD_SEP, (size_t)(c2 - s));
	if (!c1)
		return "no FILE:LINE:FUNCTION";
	if (c1 + 1 == c2 || c2 - c1 > 10)
		return "bad line number";
	for (p = c1 + 1; p < c2; p++) {
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

const char *tg_memrec_parse(struct tg_memrec *r, const char *s, size_t len, int has_time)
{
	const char *why, *gt;
	size_t n;

	if ((why = rec_time(&r->time, &s, &len, has_time)))
		return why;
	r->rest.s = s;
	r->rest.len = len;
	/* last "=>" */
	n = len;
	for (;;) {
		gt = n ? memrchr(s, '>', n) : NULL;
		if (!gt || gt == s)
			return "no '=>' before the memory delta";
		if (gt[-1] == '=')
			break;
		n = (size_t)(gt - s);
	}
	if (tg_int_parse(gt + 1, len - (size_t)(gt + 1 - s), &r->delta) < 0)
		return "bad memory delta";
	r->site.s = s;
	r->site.len = (size_t)(gt - 1 - s);
	return rec_site(s, r->site.len, &r->file, &r->line, &r->func);
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
	return rec_site(s, len, &r->file, &r->line, &r->func);
}

const char *tg_procrec_parse(struct tg_procrec *r, const char *s, size_t len, int has_time)
{
	const char *why;

	if ((why = rec_time(&r->time, &s, &len, has_time)))
		return why;
	if (tg_int_parse(s, len, &r->bytes) < 0)
		return "bad memory size";
	return NULL;
}
