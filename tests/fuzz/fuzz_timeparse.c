/*
 * fuzz_timeparse.c - the --time_from/--time_to parser (tg_timespec_parse).
 *
 * Properties: no sanitizer report; an accepted text is one of the documented
 * shapes (5, 8, 10, 14 or 16 characters) and gives a time within a day of the
 * date it names (years 0000-9999).
 */
#include "fuzz_util.h"  /* first: it defines _GNU_SOURCE */
#include <time.h>

#include "timeparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fz_strdup(data, size);
	double t;
	size_t len;

	if (tg_timespec_parse(s, (time_t)1394031433, &t) == 0) {
		len = strlen(s);
		FZ_ASSERT(len == 5 || len == 8 || len == 10 || len == 14 || len == 16);
		FZ_ASSERT(t > -62200000000.0 && t < 253403000000.0);
		if (len == 5)
			FZ_ASSERT(t > 1394031433.0 - 2 * 86400 && t < 1394031433.0 + 2 * 86400);
	}
	free(s);
	return 0;
}
