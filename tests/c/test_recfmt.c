/*
 * test_recfmt.c - the recorder's text formatting (src/recorder/recfmt.h)
 * against snprintf: integers at every digit-count boundary and at random,
 * timestamps through the per-second cache, indents of every depth, escaped
 * fields.  Plain C: links names.c (the escaping) only.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recfmt.h"
#include "tg_test.h"

/* xorshift64*: the same sequence on every run. */
static uint64_t rng_state = 0x9E3779B97F4A7C15u;
static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1Du;
}

static void check_u64(uint64_t v)
{
	char got[TG_INT_MAX + 1], want[32];
	char *e = tg_fmt_u64(got, v);
	*e = '\0';
	snprintf(want, sizeof(want), "%" PRIu64, v);
	CHECK_STR(got, want);
}

static void check_i64(int64_t v)
{
	char got[TG_INT_MAX + 1], want[32];
	char *e = tg_fmt_i64(got, v);
	*e = '\0';
	snprintf(want, sizeof(want), "%" PRId64, v);
	CHECK_STR(got, want);
	CHECK((size_t)(e - got) <= TG_INT_MAX);
}

static void test_integers(void)
{
	uint64_t p = 1;
	for (int d = 0; d < 20; d++, p *= 10) {  /* every digit-count boundary */
		check_u64(p - 1);
		check_u64(p);
		check_u64(p + 1);
		check_i64(-(int64_t)(p - 1));
		check_i64(-(int64_t)p);
	}
	check_u64(UINT64_MAX);
	check_i64(INT64_MAX);
	check_i64(INT64_MIN);
	check_i64(0);
	for (int i = 0; i < 20000; i++) {
		uint64_t v = rng() >> (rng() % 64);  /* all magnitudes */
		check_u64(v);
		check_i64((int64_t)v);
		check_i64(-(int64_t)(v >> 1));
	}
}

static void check_time(int64_t ns, struct tg_time_cache *cache)
{
	char got[TG_TIME_MAX + 8], want[64];
	char *e = tg_fmt_time_ns(got, ns, cache);
	*e = '\0';
	snprintf(want, sizeof(want), "%" PRId64 ".%06" PRId64 "%c", ns / 1000000000,
		 ns % 1000000000 / 1000, TG_TIME_SEP);
	CHECK_STR(got, want);
	CHECK((size_t)(e - got) <= TG_TIME_MAX);
}

static void test_times(void)
{
	struct tg_time_cache cache;
	int64_t ns = INT64_C(1764000000) * 1000000000;  /* a 2025 date */

	memset(&cache, 0, sizeof(cache));
	check_time(0, &cache);
	check_time(999999999, &cache);            /* same second, cache reused */
	check_time(1000000000, &cache);           /* next second */
	check_time(ns, &cache);
	for (int i = 0; i < 20000; i++) {
		ns += (int64_t)(rng() % 3000000);  /* mostly within a second */
		if (i % 1000 == 0)
			ns += (int64_t)(rng() % 100) * 1000000000;  /* and jumps */
		check_time(ns, &cache);
		CHECK_INT(cache.sec, ns / 1000000000);
	}
	check_time(INT64_MAX, &cache);            /* the widest time fits TG_TIME_MAX */
}

static void test_indent(void)
{
	for (size_t depth = 0; depth <= 3 * TG_INDENT_BLOCK; depth++) {
		char buf[3 * TG_INDENT_BLOCK + TG_INDENT_BLOCK + 2];
		size_t i, ok = 1;
		memset(buf, 'x', sizeof(buf));
		tg_put_indent(buf, depth);
		for (i = 0; i < depth; i++)
			ok &= buf[i] == TG_INDENT_CHAR;
		CHECK(ok);
		/* a shallow indent may write up to the block (the caller reserved it),
		 * never beyond */
		CHECK(buf[depth > TG_INDENT_BLOCK ? depth : TG_INDENT_BLOCK] == 'x');
	}
}

static void test_put(void)
{
	static const char field[] = "a:b\nc\\d\x01" "\xff" "e";
	char got[4 * sizeof(field)], want[4 * sizeof(field)];
	size_t n = sizeof(field) - 1;
	char *e;

	e = tg_put(got, field, n, 0);
	CHECK_INT(e - got, n);
	CHECK(!memcmp(got, field, n));
	e = tg_put(got, field, n, 1);
	CHECK_INT(e - got, tg_escaped_len(field, n));
	CHECK(tg_escape(want, field, n) - want == e - got);
	CHECK(!memcmp(got, want, (size_t)(e - got)));
	CHECK(memchr(got, '\n', (size_t)(e - got)) == NULL);  /* one record, one line */
}

int main(void)
{
	test_integers();
	test_times();
	test_indent();
	test_put();
	TG_TEST_DONE();
}
