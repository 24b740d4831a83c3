/* Unit tests of the --time_from/--time_to formats (timeparse.c). */
#include <stdlib.h>
#include <time.h>

#include "timeparse.h"
#include "tg_test.h"

int main(void)
{
	double t;
	time_t now;
	struct tm tm;

	setenv("TZ", "UTC", 1);
	tzset();
	CHECK_INT(tg_timespec_parse("05/03/2014 15:37", 0, &t), 0);
	CHECK(t == 1394033820.0);
	CHECK_INT(tg_timespec_parse("05/03/14 15:37", 0, &t), 0);
	CHECK(t == 1394033820.0);
	CHECK_INT(tg_timespec_parse("05/03/2014", 0, &t), 0);
	CHECK(t == 1393977600.0);
	CHECK_INT(tg_timespec_parse("05/03/14", 0, &t), 0);
	CHECK(t == 1393977600.0);
	CHECK_INT(tg_timespec_parse("01/01/70", 0, &t), 0);
	CHECK(t == 0.0);
	now = 1394031433; /* 05/03/2014 14:57:13 UTC */
	CHECK_INT(tg_timespec_parse("09:30", now, &t), 0);
	CHECK(t == 1393977600.0 + 9 * 3600 + 30 * 60);
	CHECK(tg_timespec_parse("31/02/2014", 0, &t) < 0);
	CHECK(tg_timespec_parse("29/02/2013", 0, &t) < 0);
	CHECK_INT(tg_timespec_parse("29/02/2012", 0, &t), 0);
	CHECK(tg_timespec_parse("24:00", now, &t) < 0);
	CHECK(tg_timespec_parse("5/3/2014", now, &t) < 0);
	CHECK(tg_timespec_parse("05/03/2014 15:37:00", now, &t) < 0);
	CHECK(tg_timespec_parse("2014-03-05", now, &t) < 0);
	CHECK(tg_timespec_parse("", now, &t) < 0);
	/* local time: the same text is another instant in another zone */
	setenv("TZ", "UTC-2", 1);
	tzset();
	CHECK_INT(tg_timespec_parse("05/03/2014 15:37", 0, &t), 0);
	CHECK(t == 1394033820.0 - 7200);
	(void)tm;
	TG_TEST_DONE();
}
