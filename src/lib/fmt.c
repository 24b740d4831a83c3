/*
 * fmt.c - fast decimal formatting, Python float repr, safe text output.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "tg_format.h"

long long tg_bytes_to_milli_kb(long long bytes)
{
	long long a = bytes < 0 ? -bytes : bytes;
	long long m = (a / 1024) * 1000 + ((a % 1024) * 1000 + 512) / 1024;

	return bytes < 0 ? -m : m;
}

size_t tg_fmt_milli(char *buf, long long m)
{
	char tmp[TG_FMT_MILLI_MAX];
	unsigned long long a = m < 0 ? 0ULL - (unsigned long long)m : (unsigned long long)m;
	unsigned long long ip = a / 1000;
	unsigned frac = (unsigned)(a % 1000);
	size_t n = 0, t = 0;

	if (m < 0)
		buf[n++] = '-';
	if (ip < 10) { /* most deltas are below 10 KB: no digit loops */
		buf[n++] = (char)('0' + ip);
	} else {
		do {
			tmp[t++] = (char)('0' + ip % 10);
			ip /= 10;
		} while (ip);
		while (t)
			buf[n++] = tmp[--t];
	}
	if (frac) {
		buf[n++] = '.';
		buf[n++] = (char)('0' + frac / 100);
		frac %= 100;
		if (frac) {
			buf[n++] = (char)('0' + frac / 10);
			if (frac % 10)
				buf[n++] = (char)('0' + frac % 10);
		}
	}
	buf[n] = '\0';
	return n;
}

size_t tg_fmt_pyfloat(char *buf, double v)
{
	char digits[40], *e;
	int prec, exp10, nd, i;
	size_t n = 0;

	if (isnan(v))
		return (size_t)sprintf(buf, "nan");
	if (isinf(v))
		return (size_t)sprintf(buf, v < 0 ? "-inf" : "inf");
	if (v == 0)
		return (size_t)sprintf(buf, signbit(v) ? "-0.0" : "0.0");
	/* shortest round-trip digits */
	for (prec = 1; prec <= 17; prec++) {
		snprintf(digits, sizeof(digits), "%.*e", prec - 1, v);
		if (strtod(digits, NULL) == v)
			break;
	}
	/* digits is [-]d[.ddd]e[+-]XX: split mantissa digits and exponent */
	e = strchr(digits, 'e');
	exp10 = atoi(e + 1);
	*e = '\0';
	{
		char m[24];
		int k = 0;
		const char *p = digits;
		if (*p == '-') {
			buf[n++] = '-';
			p++;
		}
		for (; *p; p++)
			if (*p != '.')
				m[k++] = *p;
		while (k > 1 && m[k - 1] == '0')
			k--;
		m[k] = '\0';
		nd = k;
		if (exp10 >= -5 + 1 && exp10 < 16) {
			if (exp10 < 0) {
				buf[n++] = '0';
				buf[n++] = '.';
				for (i = -1; i > exp10; i--)
					buf[n++] = '0';
				for (i = 0; i < nd; i++)
					buf[n++] = m[i];
			} else {
				for (i = 0; i <= exp10; i++)
					buf[n++] = i < nd ? m[i] : '0';
				buf[n++] = '.';
				if (nd > exp10 + 1)
					for (i = exp10 + 1; i < nd; i++)
						buf[n++] = m[i];
				else
					buf[n++] = '0';
			}
		} else {
			buf[n++] = m[0];
			if (nd > 1) {
				buf[n++] = '.';
				for (i = 1; i < nd; i++)
					buf[n++] = m[i];
			}
			n += (size_t)sprintf(buf + n, "e%c%02d", exp10 < 0 ? '-' : '+',
					     exp10 < 0 ? -exp10 : exp10);
		}
	}
	buf[n] = '\0';
	return n;
}

int tg_fputs_safe(FILE *f, const char *s, size_t len)
{
	size_t i, start = 0;

	for (i = 0; i < len; i++) {
		size_t n = tg_unsafe_seq((const unsigned char *)s + i, len - i);

		if (!n)
			continue;
		if (i > start && fwrite(s + start, 1, i - start, f) != i - start)
			return EOF;
		for (size_t k = 0; k < n; k++)
			if (fprintf(f, "\\x%02x", (unsigned char)s[i + k]) < 0)
				return EOF;
		start = i + n;
		i += n - 1;
	}
	if (len > start && fwrite(s + start, 1, len - start, f) != len - start)
		return EOF;
	return 0;
}

int tg_fputs_safe_pad(FILE *f, const char *s, int width)
{
	size_t len = strlen(s), shown = len;

	for (size_t i = 0; i < len; i++) {
		size_t n = tg_unsafe_seq((const unsigned char *)s + i, len - i);
		if (n) {
			shown += 3 * n;  /* each byte of it as \xHH: 4 for 1 */
			i += n - 1;
		}
	}
	if (tg_fputs_safe(f, s, len) == EOF)
		return EOF;
	for (; (int)shown < width; shown++)
		if (putc(' ', f) == EOF)
			return EOF;
	return 0;
}

int tg_fputs_json_safe(FILE *f, const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i, start = 0;

	for (i = 0; i < len; i++) {
		size_t n = tg_unsafe_seq(u + i, len - i);
		unsigned cp;

		if (!n || u[i] == '\t')
			continue;
		/* the code point: one byte, or a 2- or 3-byte UTF-8 sequence */
		cp = n == 1 ? u[i] : n == 2 ? ((u[i] & 0x1fu) << 6) | (u[i + 1] & 0x3fu) :
			((u[i] & 0x0fu) << 12) | ((u[i + 1] & 0x3fu) << 6) | (u[i + 2] & 0x3fu);
		if (i > start && fwrite(s + start, 1, i - start, f) != i - start)
			return EOF;
		if (fprintf(f, "\\u%04x", cp) < 0)
			return EOF;
		start = i + n;
		i += n - 1;
	}
	if (len > start && fwrite(s + start, 1, len - start, f) != len - start)
		return EOF;
	return 0;
}

size_t tg_fmt_duration(char *buf, double secs)
{
	static const struct { double below, scale; const char *unit; } units[] = {
		{ 1e-6, 1e9, "ns" }, { 1e-3, 1e6, "us" }, { 1, 1e3, "ms" }, { 600, 1, "s" },
	};
	double a = fabs(secs);
	int n;

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (a < units[i].below) {
			n = snprintf(buf, TG_FMT_DURATION_MAX, "%.3g %s", secs * units[i].scale,
				     units[i].unit);
			return n < 0 ? 0 : (size_t)n;
		}
	n = snprintf(buf, TG_FMT_DURATION_MAX, "%.3g min", secs / 60);
	return n < 0 ? 0 : (size_t)n;
}
