/*
 * timeparse.c - parse the original's date/time options into epoch seconds.
 */
#include <string.h>

#include "timeparse.h"

/* Reads exactly n digits at *p into *v; advances *p.  0 or -1. */
static int tp_digits(const char **p, int n, int *v)
{
	int x = 0;

	for (int i = 0; i < n; i++) {
		if ((*p)[i] < '0' || (*p)[i] > '9')
			return -1;
		x = x * 10 + ((*p)[i] - '0');
	}
	*p += n;
	*v = x;
	return 0;
}

/* "HH:MM" at *p; 0 or -1. */
static int tp_hhmm(const char **p, struct tm *tm)
{
	int h, m;

	if (tp_digits(p, 2, &h) < 0 || **p != ':')
		return -1;
	(*p)++;
	if (tp_digits(p, 2, &m) < 0 || h > 23 || m > 59)
		return -1;
	tm->tm_hour = h;
	tm->tm_min = m;
	return 0;
}

int tg_timespec_parse(const char *s, time_t now, double *out)
{
	struct tm tm;
	const char *p = s;
	int d, mo, y, days[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	time_t t;

	memset(&tm, 0, sizeof(tm));
	if (strlen(s) == 5 && s[2] == ':') {
		localtime_r(&now, &tm);
		tm.tm_sec = 0;
		if (tp_hhmm(&p, &tm) < 0)
			return -1;
		goto done;
	}
	if (tp_digits(&p, 2, &d) < 0 || *p++ != '/' || tp_digits(&p, 2, &mo) < 0 ||
	    *p++ != '/')
		return -1;
	if (tp_digits(&p, 4, &y) < 0) {
		if (tp_digits(&p, 2, &y) < 0)
			return -1;
		y += y < 69 ? 2000 : 1900;
	}
	if (mo < 1 || mo > 12 || d < 1 || d > days[mo - 1])
		return -1;
	if (mo == 2 && d == 29 && !((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
		return -1;
	tm.tm_mday = d;
	tm.tm_mon = mo - 1;
	tm.tm_year = y - 1900;
	if (*p == ' ') {
		p++;
		if (tp_hhmm(&p, &tm) < 0)
			return -1;
	}
	if (*p)
		return -1;
done:
	if (*p)
		return -1;
	tm.tm_isdst = -1;
	t = mktime(&tm);
	if (t == (time_t)-1)
		return -1;
	*out = (double)t;
	return 0;
}
