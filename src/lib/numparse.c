/*
 * numparse.c - numbers of the data files read back by hand (numparse.h).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "numparse.h"

static const double numparse_pow10[] = {
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

/* strtod of s[0..len) copied out: the rare number the hand path leaves. */
static double numparse_slow(const char *s, size_t len, size_t *used)
{
	char buf[128], *end;
	double v;

	if (len >= sizeof(buf))
		len = sizeof(buf) - 1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	v = strtod(buf, &end);
	*used = (size_t)(end - buf);
	return v;
}

double tg_parse_double(const char *s, size_t len, size_t *used)
{
	size_t i = 0, digits = 0, frac = 0;
	uint64_t m = 0;
	int neg = 0, dot = 0;
	double v;

	if (!len) {
		*used = 0;
		return 0;
	}
	if (i < len && (s[i] == '-' || s[i] == '+'))
		neg = s[i++] == '-';
	for (; i < len; i++) {
		char c = s[i];

		if (c >= '0' && c <= '9') {
			if (digits || c != '0')
				digits++;
			if (digits > 19)  /* m would not fit */
				return numparse_slow(s, len, used);
			m = m * 10 + (uint64_t)(c - '0');
			frac += dot;
		} else if (c == '.' && !dot) {
			dot = 1;
		} else {
			break;
		}
	}
	/* an exponent, "inf", "nan", hex, a lone sign or dot: strtod's own */
	if (i < len && (s[i] == 'e' || s[i] == 'E' || s[i] == 'x' || s[i] == 'X' ||
			s[i] == 'i' || s[i] == 'I' || s[i] == 'n' || s[i] == 'N' ||
			s[i] == 'p' || s[i] == 'P'))
		return numparse_slow(s, len, used);
	if (i == (size_t)(neg || s[0] == '+') + (size_t)dot || frac > 22 ||
	    m >= (uint64_t)1 << 53)
		return numparse_slow(s, len, used);
	/* m < 2^53 is exact, 10^frac too: one rounding, as strtod's */
	v = frac ? (double)m / numparse_pow10[frac] : (double)m;
	*used = i;
	return neg ? -v : v;
}
