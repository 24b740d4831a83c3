/* Unit tests of the data files' numbers read back by hand (numparse.c): the
 * value must be strtod's to the bit, or memg's thinned slices and memg --held's
 * merge order would change. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numparse.h"
#include "tg_test.h"

/* tg_parse_double of s is strtod's value, and reads as far. */
static int same_as_strtod(const char *s)
{
	char *end;
	double want = strtod(s, &end), got;
	size_t used;

	got = tg_parse_double(s, strlen(s), &used);
	if (memcmp(&got, &want, sizeof(got)) != 0 || used != (size_t)(end - s)) {
		fprintf(stderr, "'%s': %.17g (%zu bytes) instead of %.17g (%zu)\n", s, got, used,
			want, (size_t)(end - s));
		return 0;
	}
	return 1;
}

int main(void)
{
	static const char *const cases[] = {
		"0", "-0", "1", "-1", "12.5", "-163.999", "0.001", "1732945123.123456",
		"1732945123.000001", "9007199254740991", "9007199254740993",
		"12345678901234567890", "0.1", "0.30000000000000004", "1e5", "-2.5E-3",
		"inf", "nan", "0x10", ".5", "5.", "-", ".", "", "abc", "+7", "1.2.3",
		"123 456", "1732945123.123456 99\n", "0.00000000000000000000001",
		"3.14159265358979323846",
	};
	char buf[64];
	size_t used;
	uint64_t r = 88172645463325252ull;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		CHECK(same_as_strtod(cases[i]));
	/* the TIME texts and thousandths of KB the commands write */
	for (int i = 0; i < 200000; i++) {
		long long s, us, m;

		r ^= r << 13;
		r ^= r >> 7;
		r ^= r << 17;
		s = (long long)(r % 4000000000ull);
		us = (long long)((r >> 32) % 1000000);
		m = (long long)(r % 2000000000001ull) - 1000000000000ll;
		snprintf(buf, sizeof(buf), "%lld.%06lld", s, us);
		if (!same_as_strtod(buf))
			CHECK(0);
		snprintf(buf, sizeof(buf), "%s%lld.%03lld", m < 0 ? "-" : "", llabs(m) / 1000,
			 llabs(m) % 1000);
		if (!same_as_strtod(buf))
			CHECK(0);
	}
	/* not NUL-terminated: only len bytes are read */
	CHECK(tg_parse_double("12345", 3, &used) == 123.0);
	CHECK_INT(used, 3);
	TG_TEST_DONE();
}
