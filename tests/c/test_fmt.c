/* Unit tests of number formatting and safe text output (fmt.c). */
#include <stdlib.h>

#include "fmt.h"
#include "tg_test.h"

static const char *py(double v)
{
	static char buf[40];
	tg_fmt_pyfloat(buf, v);
	return buf;
}

static const char *milli(long long m)
{
	static char buf[TG_FMT_MILLI_MAX];
	tg_fmt_milli(buf, m);
	return buf;
}

static const char *dur(double v)
{
	static char buf[TG_FMT_DURATION_MAX];
	tg_fmt_duration(buf, v);
	return buf;
}

int main(void)
{
	/* durations for people (the report's subtrees), not 9.5367431640625e-07 s */
	CHECK_STR(dur(9.5367431640625e-07), "954 ns");
	CHECK_STR(dur(1.0013580322265625e-05), "10 us");
	CHECK_STR(dur(0.04894304275512695), "48.9 ms");
	CHECK_STR(dur(0.0), "0 ns");
	CHECK_STR(dur(1.25), "1.25 s");
	CHECK_STR(dur(750), "12.5 min");

	/* Python 3 repr(float) */
	CHECK_STR(py(0.0), "0.0");
	CHECK_STR(py(1.0), "1.0");
	CHECK_STR(py(22.03000020980835), "22.03000020980835");
	CHECK_STR(py(1394031433.4 - 1394031411.37), "22.03000020980835");
	CHECK_STR(py(0.1), "0.1");
	CHECK_STR(py(-2.5), "-2.5");
	CHECK_STR(py(123456789.0), "123456789.0");
	CHECK_STR(py(1e16), "1e+16");
	CHECK_STR(py(1234567890123456.0), "1234567890123456.0");
	CHECK_STR(py(0.0001), "0.0001");
	CHECK_STR(py(0.00001), "1e-05");
	CHECK_STR(py(1.5e-7), "1.5e-07");
	CHECK_STR(py(0.30000000000000004), "0.30000000000000004");
	CHECK_STR(py(100.0), "100.0");

	/* KB in thousandths */
	CHECK_INT(tg_bytes_to_milli_kb(1024), 1000);
	CHECK_INT(tg_bytes_to_milli_kb(-1024), -1000);
	CHECK_INT(tg_bytes_to_milli_kb(167936), 164000);
	CHECK_INT(tg_bytes_to_milli_kb(1), 1);
	CHECK_INT(tg_bytes_to_milli_kb(512), 500);
	CHECK_STR(milli(0), "0");
	CHECK_STR(milli(164000), "164");
	CHECK_STR(milli(-1500), "-1.5");
	CHECK_STR(milli(1), "0.001");
	CHECK_STR(milli(-25050), "-25.05");
	CHECK_STR(milli(-9223372036854775807LL), "-9223372036854775.807");

	{ /* terminal-safe output */
		char *buf = NULL;
		size_t n = 0;
		FILE *f = open_memstream(&buf, &n);
		tg_fputs_safe(f, "a\x1b[31mb\nc\x7f", 10);
		fclose(f);
		CHECK_STR(buf, "a\\x1b[31mb\\x0ac\\x7f");
		free(buf);
	}
	TG_TEST_DONE();
}
