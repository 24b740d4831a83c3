/* Unit tests of the time axis of the graphs (timeaxis.c). */
#include <stdlib.h>

#include "tg_test.h"
#include "timeaxis.h"

/* The axis lines written for events at t0 and t1 (and range r). */
static char *axis(enum tg_time_mode mode, double t0, double t1, const struct tg_timerange *r)
{
	struct tg_timeaxis a;
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	tg_timeaxis_init(&a, mode);
	tg_timeaxis_see(&a, t1);
	tg_timeaxis_see(&a, t0);
	tg_timeaxis_see(&a, (t0 + t1) / 2);
	tg_timeaxis_write(f, &a, r, "Event");
	fclose(f);
	return buf;
}

int main(void)
{
	struct tg_timerange r = { 1, 0, 1000.5, 0 };
	char *s;

	setenv("TZ", "UTC", 1);
	s = axis(TG_TIME_ELAPSED, 1000, 1000.25, NULL);
	CHECK_STR(s, "t0 = 1000.000000\ntx(t) = (t - t0) * 1000\n"
		  "set xlabel 'Time since start (ms)'\nset format x '%g'\n");
	free(s);
	s = axis(TG_TIME_ELAPSED, 1000, 1599, NULL);
	CHECK(strstr(s, "* 1\nset xlabel 'Time since start (s)'") != NULL);
	free(s);
	s = axis(TG_TIME_ELAPSED, 1000, 1600, NULL);
	CHECK(strstr(s, "(min)") != NULL);
	free(s);
	s = axis(TG_TIME_ELAPSED, 1000, 1000 + 36000, NULL);
	CHECK(strstr(s, "(h)") != NULL);
	free(s);
	/* the unit follows the span shown: from 1000.5 to the end, 0.5 s: ms */
	s = axis(TG_TIME_ELAPSED, 1000, 1001, &r);
	CHECK(strstr(s, "(ms)") != NULL);
	CHECK(strstr(s, "set xrange [500.000000:*]\n") != NULL);
	free(s);
	s = axis(TG_TIME_CLOCK, 1000, 1001, &r);
	CHECK_STR(s, "tz = 0\ntx(t) = t + tz\nset xlabel 'Local time'\nset xdata time\n"
		  "set timefmt '%s'\nset format x '%H:%M:%.3S'\nset xtics 0.1\n"
		  "set xrange ['1000.500000':*]\n");
	free(s);
	/* a run that started before the events read (a capture's dropped
	 * segments): counted from its start, the unit by the values shown */
	{
		struct tg_timeaxis a;
		size_t n = 0;
		FILE *f;

		s = NULL;
		f = open_memstream(&s, &n);
		tg_timeaxis_init(&a, TG_TIME_ELAPSED);
		tg_timeaxis_origin(&a, 900);
		tg_timeaxis_see(&a, 1000);
		tg_timeaxis_see(&a, 1000.5);
		tg_timeaxis_write(f, &a, NULL, "Event");
		fclose(f);
		CHECK_STR(s, "t0 = 900.000000\ntx(t) = (t - t0) * 1\n"
			  "set xlabel 'Time since start (s)'\nset format x '%g'\n");
		free(s);
		/* an origin after the first event is not the start */
		s = NULL;
		f = open_memstream(&s, &n);
		tg_timeaxis_init(&a, TG_TIME_ELAPSED);
		tg_timeaxis_origin(&a, 1000.25);
		tg_timeaxis_see(&a, 1000);
		tg_timeaxis_see(&a, 1000.5);
		tg_timeaxis_write(f, &a, NULL, "Event");
		fclose(f);
		CHECK(strstr(s, "t0 = 1000.000000\n") != NULL && strstr(s, "(ms)") != NULL);
		free(s);
	}
	s = axis(TG_TIME_NONE, 0, 10, NULL);
	CHECK_STR(s, "tx(t) = t\nset xlabel 'Event'\n");
	free(s);
	TG_TEST_DONE();
}
