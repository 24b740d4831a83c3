/* Unit tests of the dump line parsers (records.c). */
#include "records.h"
#include "tg_test.h"

#define S(lit) lit, sizeof(lit) - 1

static void test_mem_plain(void)
{
	struct tg_memrec r;

	CHECK(!tg_memrec_parse(&r, S("1394031433.4#main.py:39:doStuff=>167936"), 1));
	CHECK_MEM(r.time.text.s, r.time.text.len, "1394031433.4");
	CHECK(r.time.v > 1394031433.39 && r.time.v < 1394031433.41);
	CHECK_MEM(r.rest.s, r.rest.len, "main.py:39:doStuff=>167936");
	CHECK_MEM(r.site.s, r.site.len, "main.py:39:doStuff");
	CHECK_MEM(r.file.s, r.file.len, "main.py");
	CHECK_MEM(r.func.s, r.func.len, "doStuff");
	CHECK_INT(r.line, 39);
	CHECK_INT(r.delta, 167936);
}

static void test_mem_weird_names(void)
{
	struct tg_memrec r;

	/* FILE with ':', '#' and "=>"; TIME ends at the first '#' */
	CHECK(!tg_memrec_parse(&r, S("5.25#C:\\a#b=>c:d.py:7:f=>-4096"), 1));
	CHECK_MEM(r.time.text.s, r.time.text.len, "5.25");
	CHECK_MEM(r.file.s, r.file.len, "C:\\a#b=>c:d.py");
	CHECK_MEM(r.func.s, r.func.len, "f");
	CHECK_INT(r.line, 7);
	CHECK_INT(r.delta, -4096);
	/* None module of a C function, no decimals in the time */
	CHECK(!tg_memrec_parse(&r, S("1394031413#None:0:sleep=>0"), 1));
	CHECK_MEM(r.file.s, r.file.len, "None");
	CHECK(r.time.v == 1394031413.0);
	/* six and nine decimals */
	CHECK(!tg_memrec_parse(&r, S("1394031413.123456#a:1:b=>1"), 1));
	CHECK(r.time.v > 1394031413.123456 - 5e-7 && r.time.v < 1394031413.123456 + 5e-7);
	CHECK(!tg_memrec_parse(&r, S("1394031413.123456789#a:1:b=>1"), 1));
	/* function names may be empty or odd */
	CHECK(!tg_memrec_parse(&r, S("1.0#a.py:3:<lambda>=>12"), 1));
	CHECK_MEM(r.func.s, r.func.len, "<lambda>");
}

/* The SWAR fast paths and their fallbacks give the general parser's results. */
static void test_mem_digit_paths(void)
{
	struct tg_memrec r;
	static const char *const deltas[] = {
		"0", "7", "-7", "+7", "1234567", "-1234567", "12345678", "-12345678",
		"009007199254740992", "-99999999", "00000001",
	};
	static const long long values[] = {
		0, 7, -7, 7, 1234567, -1234567, 12345678, -12345678,
		9007199254740992LL, -99999999, 1,
	};
	static const char *const lines[] = { "1", "1234567", "12345678", "123456789" };
	static const unsigned long lvalues[] = { 1, 1234567, 12345678, 123456789 };
	char buf[256];

	for (size_t i = 0; i < sizeof(deltas) / sizeof(deltas[0]); i++)
		for (size_t j = 0; j < sizeof(lines) / sizeof(lines[0]); j++) {
			int n = snprintf(buf, sizeof(buf), "1763766000.000054#/usr/lib/x.py:%s:fn=>%s",
					 lines[j], deltas[i]);
			CHECK(!tg_memrec_parse(&r, buf, (size_t)n, 1));
			CHECK_INT(r.delta, values[i]);
			CHECK_INT(r.line, lvalues[j]);
			CHECK_MEM(r.func.s, r.func.len, "fn");
			CHECK_MEM(r.file.s, r.file.len, "/usr/lib/x.py");
			/* short lines take the scalar paths */
			n = snprintf(buf, sizeof(buf), "a:%s:f=>%s", lines[j], deltas[i]);
			CHECK(!tg_memrec_parse(&r, buf, (size_t)n, 0));
			CHECK_INT(r.delta, values[i]);
			CHECK_INT(r.line, lvalues[j]);
		}
	/* too many digits, bytes >= 0x80 next to digits, a sign without digits */
	CHECK_STR(tg_memrec_parse(&r, S("1.5#/usr/lib/x.py:1:f=>1234567890123456789"), 1),
		  "bad memory delta");
	/* beyond TG_DELTA_MAX (2^53), by the fast path and the general one */
	CHECK_STR(tg_memrec_parse(&r, S("1.5#/usr/lib/x.py:1:f=>9007199254740993"), 1),
		  "memory delta out of range");
	CHECK_STR(tg_memrec_parse(&r, S("1.5#a:1:f=>-999999999999999999"), 1),
		  "memory delta out of range");
	CHECK(!tg_memrec_parse(&r, S("1.5#a:1:f=>-9007199254740992"), 1));
	CHECK_STR(tg_procrec_parse(&(struct tg_procrec){ 0 }, S("1.0#9007199254740993"), 1),
		  "memory size out of range");
	CHECK_STR(tg_memrec_parse(&r, S("1.5#/usr/lib/x.py:1234567890:f=>1"), 1),
		  "bad line number");
	CHECK_STR(tg_memrec_parse(&r, S("1.5#/usr/lib/x\xff.py:1:f=>\xb9\xb0"), 1),
		  "bad memory delta");
	CHECK_STR(tg_memrec_parse(&r, S("1.5#/usr/lib/x.py:1:f=>-"), 1), "bad memory delta");
	CHECK_STR(tg_memrec_parse(&r, S("1.5#/usr/lib/x.py:1\xb1:f=>5"), 1), "bad line number");
	CHECK(!tg_memrec_parse(&r, S("1.5#/usr/lib/x.py:1:\xb1\xb2=>5"), 1));
	CHECK_MEM(r.func.s, r.func.len, "\xb1\xb2");
	CHECK(!tg_memrec_parse(&r, S("1.5#/usr/lib/x.py:1:a_very_long_function_name_here=>5"), 1));
	CHECK_MEM(r.func.s, r.func.len, "a_very_long_function_name_here");
}

/* Every length of fraction (SWAR and loop paths) reads back as strtod does. */
static void test_time_fraction_paths(void)
{
	static const char *const fracs[] = {
		"", ".", ".4", ".45", ".456789", ".4567890", ".45678901", ".456789012345678901",
		".0000001", ".9999999",
	};
	static const char *const ints[] = { "1394031433", "7", "123456789012" };
	struct tg_memrec r;
	char buf[128];

	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
		for (size_t j = 0; j < sizeof(fracs) / sizeof(fracs[0]); j++) {
			int n = snprintf(buf, sizeof(buf), "%s%s#m.py:1:f=>2", ints[i], fracs[j]);
			double want;
			CHECK(!tg_memrec_parse(&r, buf, (size_t)n, 1));
			CHECK_INT(r.time.text.len, strlen(ints[i]) + strlen(fracs[j]));
			want = tg_time_exact(&r.time.text);
			CHECK(r.time.v - want <= 5e-7 && want - r.time.v <= 5e-7);
			CHECK_MEM(r.rest.s, r.rest.len, "m.py:1:f=>2");
		}
	CHECK_STR(tg_memrec_parse(&r, S("1394031433.45678x#m.py:1:f=>2"), 1), "bad time");
	CHECK_STR(tg_memrec_parse(&r, S("1394031433.4567#"), 1), "no '=>' before the memory delta");
}

static void test_mem_no_time(void)
{
	struct tg_memrec r;

	CHECK(!tg_memrec_parse(&r, S("x#y.py:3:f=>5"), 0));
	CHECK_MEM(r.file.s, r.file.len, "x#y.py");
	CHECK_INT(r.time.text.len, 0);
	CHECK_MEM(r.rest.s, r.rest.len, "x#y.py:3:f=>5");
	/* a timestamped line read as no-time: the file keeps the time, still valid */
	CHECK(!tg_memrec_parse(&r, S("1.5#a:1:f=>2"), 0));
	CHECK_MEM(r.file.s, r.file.len, "1.5#a");
}

static void test_mem_malformed(void)
{
	struct tg_memrec r;

	CHECK_STR(tg_memrec_parse(&r, S(""), 1), "no '#' after the time");
	CHECK_STR(tg_memrec_parse(&r, S("abc#a:1:f=>2"), 1), "bad time");
	CHECK_STR(tg_memrec_parse(&r, S("1.2.3#a:1:f=>2"), 1), "bad time");
	CHECK_STR(tg_memrec_parse(&r, S("1.5#a:1:f"), 1), "no '=>' before the memory delta");
	CHECK_STR(tg_memrec_parse(&r, S("1.5#a:1:f=>"), 1), "bad memory delta");
	CHECK_STR(tg_memrec_parse(&r, S("1.5#a:1:f=>12x"), 1), "bad memory delta");
	CHECK_STR(tg_memrec_parse(&r, S("1.5#a:1:f=>1.5"), 1), "bad memory delta");
	CHECK_STR(tg_memrec_parse(&r, S("1.5#a1f=>2"), 1), "no FILE:LINE:FUNCTION");
	CHECK_STR(tg_memrec_parse(&r, S("1.5#a:x:f=>2"), 1), "bad line number");
	CHECK_STR(tg_memrec_parse(&r, S("1.5#a::f=>2"), 1), "bad line number");
	/* truncated in the middle of a record */
	CHECK(tg_memrec_parse(&r, S("1394031433.4#main.py:3"), 1) != NULL);
}

static void test_stack(void)
{
	struct tg_stackrec r;

	CHECK(!tg_stackrec_parse(&r, S("   1394031412.5#/x/random.py:173:randrange"), 1));
	CHECK_INT(r.depth, 3);
	CHECK_MEM(r.time.text.s, r.time.text.len, "1394031412.5");
	CHECK_MEM(r.file.s, r.file.len, "/x/random.py");
	CHECK_MEM(r.func.s, r.func.len, "randrange");
	CHECK_INT(r.line, 173);
	CHECK(!tg_stackrec_parse(&r, S("main.py:27:doStuff"), 0));
	CHECK_INT(r.depth, 0);
	CHECK_STR(tg_stackrec_parse(&r, S(" 1.5#main.py:doStuff"), 1), "no FILE:LINE:FUNCTION");
}

static void test_proc(void)
{
	struct tg_procrec r;

	CHECK(!tg_procrec_parse(&r, S("1394031409.9#31457280"), 1));
	CHECK_INT(r.bytes, 31457280);
	CHECK(!tg_procrec_parse(&r, S("31457280"), 0));
	CHECK_INT(r.bytes, 31457280);
	CHECK_STR(tg_procrec_parse(&r, S("1.0#"), 1), "bad memory size");
	CHECK_STR(tg_procrec_parse(&r, S("1.0#12MB"), 1), "bad memory size");
}

static void test_numbers(void)
{
	double v;
	long long x;
	struct tg_str t = { "1394031433.4", 12 };

	CHECK(!tg_time_parse(S("0"), &v) && v == 0);
	CHECK(!tg_time_parse(S("12."), &v) && v == 12);
	CHECK(tg_time_parse(S(".5"), &v) < 0);
	CHECK(tg_time_parse(S("-1"), &v) < 0);
	CHECK(tg_time_parse(S("1e9"), &v) < 0);
	CHECK(tg_time_exact(&t) == 1394031433.4);
	CHECK(!tg_int_parse(S("-0"), &x) && x == 0);
	CHECK(!tg_int_parse(S("+7"), &x) && x == 7);
	CHECK(tg_int_parse(S("-"), &x) < 0);
	CHECK(tg_int_parse(S("1234567890123456789"), &x) < 0);
}

/* The frames that wrap the allocating code (tg_memrec_is_wrapper). */
static int wraps(const char *line)
{
	struct tg_memrec r;

	CHECK(!tg_memrec_parse(&r, line, strlen(line), 1));
	return tg_memrec_is_wrapper(&r);
}

static void test_wrappers(void)
{
	CHECK(wraps("1.5#/usr/lib/python3.11/threading.py:1028:_bootstrap_inner=>10"));
	CHECK(wraps("1.5#threading.py:988:_bootstrap=>10"));
	CHECK(wraps("1.5#/usr/lib/python3.11/threading.py:975:run=>10"));
	CHECK(!wraps("1.5#/usr/lib/python3.11/threading.py:945:start=>10"));
	CHECK(!wraps("1.5#/srv/mythreading.py:975:run=>10"));  /* another file */
	CHECK(wraps("1.5#builtins:3823:exec=>10"));
	CHECK(!wraps("1.5#builtins:12:eval=>10"));
	CHECK(!wraps("1.5#mybuiltins:12:exec=>10"));
	CHECK(wraps("1.5#/v/site-packages/IPython/core/interactiveshell.py:3255:run_cell=>1"));
	CHECK(wraps("1.5#/v/IPython/core/interactiveshell.py:3784:run_ast_nodes=>1"));
	CHECK(wraps("1.5#/v/IPython/core/interactiveshell.py:3823:run_code=>1"));
	CHECK(wraps("1.5#/v/IPython/core/async_helpers.py:78:_pseudo_sync_runner=>1"));
	CHECK(!wraps("1.5#/v/IPython/core/interactiveshell.py:10:transform_cell=>1"));
	CHECK(!wraps("1.5#<ipython-input-1-bb7dd2aa79a5>:1:<module>=>3145785"));
	CHECK(wraps("1.5#coroutine:140:send=>1"));
	CHECK(!wraps("1.5#generator:140:send=>1"));
}

int main(void)
{
	test_wrappers();
	test_mem_plain();
	test_mem_weird_names();
	test_mem_no_time();
	test_mem_digit_paths();
	test_time_fraction_paths();
	test_mem_malformed();
	test_stack();
	test_proc();
	test_numbers();
	TG_TEST_DONE();
}
