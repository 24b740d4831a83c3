/*
 * test_clock.c - the recorder's wall clock (src/recorder/clock.c), linked alone:
 * the conversion arithmetic over long runs, the rate measurement, both sources
 * against clock_gettime, and readers racing the re-anchoring writer.
 */
#include "clock.h"
#include "tg_test.h"

#include <pthread.h>
#include <stdlib.h>

/* How far a TSC reading may be from clock_gettime read next to it: the TSC's
 * rate error over one re-anchoring interval plus a preemption between the two. */
#define TOLERANCE_NS 2000000
/* Reads per check of the racing test. */
#define RACE_READS 2000000

static int64_t
abs64(int64_t v)
{
	return v < 0 ? -v : v;
}

static void
test_conversion(void)
{
#if TG_CLOCK_HAVE_TSC
	/* 3 GHz: mult = 2^32 / 3 at shift 32. */
	uint64_t mult = tg_clock_rate_mult(1000000000, 3000000000ULL);
	struct tg_clock_conv c = { 1000, 1700000000000000000LL, mult };
	/* Ten years of ticks at 3 GHz: the 64-bit product would overflow ~40000 x. */
	uint64_t d = 3000000000ULL * 86400 * 365 * 10;
	int64_t want = (int64_t)(d / 3);
	int64_t got = tg_clock_conv_ns(&c, c.base_tsc + d) - c.base_ns;

	CHECK_INT(mult, (1ULL << 32) / 3);
	CHECK_INT(tg_clock_conv_ns(&c, c.base_tsc), c.base_ns);
	CHECK_INT(tg_clock_conv_ns(&c, c.base_tsc + 3), c.base_ns + 0);  /* 0.999.. ns */
	CHECK_INT(tg_clock_conv_ns(&c, c.base_tsc + 3000), c.base_ns + 999);
	/* mult is 2^32/3 rounded down: at most 1 ns per 2^32 ns too slow. */
	CHECK(got <= want && want - got <= want / (1LL << 30) + 1);
	CHECK(got > 0);
	/* A reading before the anchor (another core's early rdtsc) is the anchor. */
	CHECK_INT(tg_clock_conv_ns(&c, c.base_tsc - 5), c.base_ns);

	/* The kernel's perf mult/shift (32-bit mult, shift ~30), brought to shift
	 * 32: same result as the kernel's split formula of perf_event_mmap_page,
	 * for a week of ticks. */
	{
		uint64_t km = 357913941U;  /* 2^30 / 3 */
		uint32_t ks = 30;
		struct tg_clock_conv k = { 0, 0, tg_clock_mult_from(km, ks) };
		uint64_t cyc = 3000000000ULL * 86400 * 7;
		uint64_t quot = cyc >> ks, rem = cyc & ((1ULL << ks) - 1);
		int64_t split = (int64_t)(quot * km + ((rem * km) >> ks));
		CHECK_INT(k.mult, km << 2);
		CHECK_INT(tg_clock_conv_ns(&k, cyc), split);
	}
#endif
}

static void
test_rate_mult(void)
{
#if TG_CLOCK_HAVE_TSC
	CHECK_INT(tg_clock_rate_mult(1, 0), 0);             /* no ticks */
	CHECK_INT(tg_clock_rate_mult(UINT64_MAX, 1), 0);    /* does not fit */
	CHECK_INT(tg_clock_rate_mult(500000000, 500000000), 1ULL << 32);
	CHECK_INT(tg_clock_mult_from(5, 32), 5);
	CHECK_INT(tg_clock_mult_from(5, 33), 2);
	CHECK_INT(tg_clock_mult_from(5, 0), 5ULL << 32);
	CHECK_INT(tg_clock_mult_from(1ULL << 40, 0), 0);   /* does not fit */
	CHECK_INT(tg_clock_mult_from(5, 200), 0);
#endif
}

/* Both sources: the clock reads what clock_gettime reads, and _mono never goes
 * back. */
static void
test_source(const char *env, const char *want_name)
{
	int64_t last = 0, prev = 0, worst = 0;
	int i, monotonic = 1;

	if (env != NULL)
		setenv("THREADGRAPH_CLOCK", env, 1);
	else
		unsetenv("THREADGRAPH_CLOCK");
	tg_clock_enable();
	if (want_name != NULL)
		CHECK_STR(tg_clock_source_name(), want_name);
	for (i = 0; i < 200000; i++) {
		int64_t before = tg_clock_gettime_ns();
		int64_t now = tg_clock_now_ns_mono(&last);
		int64_t after = tg_clock_gettime_ns();
		int64_t off = now < before ? before - now : now > after ? now - after : 0;
		if (off > worst)
			worst = off;
		if (now < prev)
			monotonic = 0;
		prev = now;
		if (i % 50000 == 0)
			tg_clock_tick();
	}
	if (worst > TOLERANCE_NS)
		fprintf(stderr, "source %s: %lld ns from clock_gettime\n",
				tg_clock_source_name(), (long long)worst);
	CHECK(worst <= TOLERANCE_NS);
	CHECK(monotonic);
}

static _Atomic int race_stop;

static void *
race_writer(void *arg)
{
	(void)arg;
	while (!atomic_load(&race_stop))
		tg_clock_tick();
	return NULL;
}

/* Readers against a writer re-anchoring as fast as it can: every read stays
 * next to clock_gettime (a torn read would be off by far more). */
static void
test_race(void)
{
	pthread_t w;
	int64_t last = 0, worst = 0;
	int i;

	unsetenv("THREADGRAPH_CLOCK");
	tg_clock_enable();
	if (pthread_create(&w, NULL, race_writer, NULL) != 0) {
		CHECK(!"pthread_create");
		return;
	}
	for (i = 0; i < RACE_READS; i++) {
		int64_t before = tg_clock_gettime_ns();
		int64_t now = tg_clock_now_ns_mono(&last);
		/* _mono may hold a value read before BEFORE: compare the raw clock. */
		int64_t raw = tg_clock_now_ns();
		int64_t after = tg_clock_gettime_ns();
		int64_t off = raw < before ? before - raw : raw > after ? raw - after : 0;
		(void)now;
		if (off > worst)
			worst = off;
	}
	atomic_store(&race_stop, 1);
	pthread_join(w, NULL);
	CHECK(worst <= TOLERANCE_NS);
	CHECK(abs64(tg_clock_now_ns() - tg_clock_gettime_ns()) <= TOLERANCE_NS);
}

/* A fork() in the middle of a publish leaves SEQ odd in the child: readers fall
 * back to clock_gettime, and the next publish makes it even again. */
static void
test_torn_seq(void)
{
	struct tg_clock_conv c = { 0, 0, 0 };
	uint32_t s;

	unsetenv("THREADGRAPH_CLOCK");
	tg_clock_enable();
	s = atomic_load(&tg_clock_pub.seq);
	atomic_store(&tg_clock_pub.seq, s | 1);
	CHECK(abs64(tg_clock_now_ns() - tg_clock_gettime_ns()) <= TOLERANCE_NS);
	tg_clock_publish(&c);
	CHECK_INT(atomic_load(&tg_clock_pub.seq) & 1, 0);
	if (atomic_load(&tg_clock_src) == TG_CLOCK_TSC)
		CHECK_INT(tg_clock_now_ns(), 0);  /* mult 0: the anchor, published */
	tg_clock_enable();
}

/* The cached reader (tg_clock_now_ns_cached) reads what the seqlock reader
 * reads: next to clock_gettime, refilled after every publish (a re-anchor, a
 * torn seq) and never using a TSC conversion once the source is gettime. */
static void
test_cached(void)
{
	struct tg_clock_cache cc;
	struct tg_clock_conv c = { 0, 0, 0 };
	int64_t worst = 0;
	uint32_t s;
	int i;

	memset(&cc, 0, sizeof(cc));
	unsetenv("THREADGRAPH_CLOCK");
	tg_clock_enable();
	CHECK(atomic_load(&tg_clock_pub.seq) != 0);  /* an empty cache never matches */
	for (i = 0; i < 200000; i++) {
		int64_t before = tg_clock_gettime_ns();
		int64_t now = tg_clock_now_ns_cached(&cc);
		int64_t after = tg_clock_gettime_ns();
		int64_t off = now < before ? before - now : now > after ? now - after : 0;
		if (off > worst)
			worst = off;
		if (i % 50000 == 0)
			tg_clock_tick();
	}
	CHECK(worst <= TOLERANCE_NS);
	/* Microseconds: between the ns readings around it (within a rounding). */
	for (i = 0; i < 200000; i++) {
		int64_t before = tg_clock_now_ns_cached(&cc);
		int64_t us = tg_clock_now_us_cached(&cc);
		int64_t after = tg_clock_now_ns_cached(&cc);
		if (us < before / 1000 - 1 || us > after / 1000 + 1) {
			CHECK(!"tg_clock_now_us_cached outside the ns readings around it");
			break;
		}
	}
	if (atomic_load(&tg_clock_src) == TG_CLOCK_TSC) {
		CHECK_INT(cc.seq, atomic_load(&tg_clock_pub.seq));
		/* A torn seq: not the cache's, so the reader falls back and agrees. */
		s = atomic_load(&tg_clock_pub.seq);
		atomic_store(&tg_clock_pub.seq, s | 1);
		CHECK(abs64(tg_clock_now_ns_cached(&cc) - tg_clock_gettime_ns()) <= TOLERANCE_NS);
		tg_clock_publish(&c);  /* mult 0: every reader gets the anchor, 0 */
		CHECK_INT(tg_clock_now_ns_cached(&cc), 0);
		CHECK_INT(cc.seq, atomic_load(&tg_clock_pub.seq));
	}
	/* Switching to gettime invalidates every cache, even a filled one. */
	setenv("THREADGRAPH_CLOCK", "gettime", 1);
	tg_clock_enable();
	CHECK(cc.seq != atomic_load(&tg_clock_pub.seq));
	CHECK(abs64(tg_clock_now_ns_cached(&cc) - tg_clock_gettime_ns()) <= TOLERANCE_NS);
	CHECK(cc.seq != atomic_load(&tg_clock_pub.seq));
	unsetenv("THREADGRAPH_CLOCK");
	tg_clock_enable();
}

int
main(void)
{
	test_conversion();
	test_rate_mult();
	test_source("gettime", "gettime");
	/* The default is "tsc" where the CPU allows it; either way it must agree. */
	test_source(NULL, NULL);
	printf("default source here: %s\n", tg_clock_source_name());
	test_race();
	test_torn_seq();
	test_cached();
	TG_TEST_DONE();
}
