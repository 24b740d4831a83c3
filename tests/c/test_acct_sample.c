/*
 * test_acct_sample.c - accounting's byte sampling (src/recorder/acct_sample.c):
 * the gaps are exponential with the asked mean, the weights make unbiased
 * estimates, a periodic allocation pattern does not alias with the sampling.
 *
 * Statistical checks use fixed seeds (the results are deterministic) and bounds
 * of several standard deviations computed from the theory, named below.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "acct_sample.h"
#include "tg_test.h"

/* Bounds, in standard deviations of the quantity checked. */
#define SIGMAS 5.0

/* Gaps: mean, spread and the share below the mean are the exponential's. */
static void test_gaps(void)
{
	const int64_t mean = 4096;
	const int n = 1000000;
	struct tg_acct_sampler s;
	double sum = 0, sum2 = 0;
	int below = 0, i, distinct = 0;
	int64_t prev = -1, lo = INT64_MAX;

	tg_acct_sampler_init(&s, 42, 0, mean);
	for (i = 0; i < n; i++) {
		int64_t g = tg_acct_sampler_gap(&s, mean);
		sum += (double)g;
		sum2 += (double)g * (double)g;
		below += g <= mean;
		distinct += g != prev;
		prev = g;
		if (g < lo)
			lo = g;
	}
	{
		double m = sum / n, sd = sqrt(sum2 / n - m * m);
		/* ceil() adds 1/2 on average; the mean's sd is mean / sqrt(n) */
		CHECK(fabs(m - (mean + 0.5)) < SIGMAS * mean / sqrt(n));
		/* an exponential's sd is its mean (sd of the estimate ~ mean / sqrt(n)) */
		CHECK(fabs(sd - mean) < SIGMAS * 1.2 * mean / sqrt(n));
		/* P(gap <= mean) = 1 - 1/e; binomial sd */
		CHECK(fabs((double)below / n - (1 - exp(-1))) < SIGMAS * sqrt(0.233 / n));
	}
	CHECK(lo >= 1);
	CHECK(distinct > n * 0.99);   /* random, not every N bytes */
}

/* Seeds and thread numbers give different streams; one seed repeats. */
static void test_streams(void)
{
	struct tg_acct_sampler a, b, c, d;
	int i, same_ab = 0, same_ac = 0, same_ad = 0;

	tg_acct_sampler_init(&a, 1, 0, 1000);
	tg_acct_sampler_init(&b, 1, 0, 1000);
	tg_acct_sampler_init(&c, 2, 0, 1000);
	tg_acct_sampler_init(&d, 1, 1, 1000);
	for (i = 0; i < 1000; i++) {
		int64_t ga = tg_acct_sampler_gap(&a, 1000);
		same_ab += ga == tg_acct_sampler_gap(&b, 1000);
		same_ac += ga == tg_acct_sampler_gap(&c, 1000);
		same_ad += ga == tg_acct_sampler_gap(&d, 1000);
	}
	CHECK_INT(same_ab, 1000);
	CHECK(same_ac < 10);
	CHECK(same_ad < 10);
}

/* Weights: about N for tiny blocks, the size itself for huge ones, never less
 * than the size, and one function of (size, mean). */
static void test_weights(void)
{
	int64_t b, c, b2, c2;
	uint64_t size;

	tg_acct_sample_weight(1, 1 << 20, &b, &c);
	CHECK(llabs(b - (1 << 20)) <= 1);
	CHECK(c > ((int64_t)1 << 20) * TG_ACCT_CNT_ONE - TG_ACCT_CNT_ONE);
	tg_acct_sample_weight(100 << 20, 1 << 20, &b, &c);
	CHECK_INT(b, 100 << 20);
	CHECK_INT(c, TG_ACCT_CNT_ONE);
	for (size = 1; size < (UINT64_C(1) << 36); size = size * 3 + 1) {
		tg_acct_sample_weight(size, 65536, &b, &c);
		tg_acct_sample_weight(size, 65536, &b2, &c2);
		CHECK(b >= (int64_t)size && c >= TG_ACCT_CNT_ONE);
		CHECK(b == b2 && c == c2);
	}
}

/* Simulated allocations of a few sizes in a fixed rotation whose period is
 * exactly the mean (what a sampler with a fixed interval would alias with):
 * the estimated bytes and blocks of each size are within SIGMAS of the truth,
 * the sd from the Horvitz-Thompson variance sum size^2 (1 - p) / p. */
static void test_unbiased(void)
{
	enum { NSIZES = 4 };
	const int64_t mean = 8192;
	/* 16 + 176 + 4000 + 4000 = 8192 */
	const uint64_t sizes[NSIZES] = { 16, 176, 4000, 4000 };
	const int rounds = 200000;
	double est_b[NSIZES] = { 0 }, est_c[NSIZES] = { 0 };
	struct tg_acct_sampler s;
	int r, k;

	tg_acct_sampler_init(&s, 7, 3, mean);
	for (r = 0; r < rounds; r++)
		for (k = 0; k < NSIZES; k++)
			if (tg_acct_sampler_hit(&s, sizes[k], mean)) {
				int64_t b, c;
				tg_acct_sample_weight(sizes[k], mean, &b, &c);
				est_b[k] += (double)b;
				est_c[k] += (double)c / TG_ACCT_CNT_ONE;
			}
	for (k = 0; k < NSIZES; k++) {
		double sz = (double)sizes[k], p = -expm1(-sz / mean);
		double truth_b = sz * rounds, truth_c = rounds;
		double sd_b = sqrt(rounds * sz * sz * (1 - p) / p);
		double sd_c = sqrt(rounds * (1 - p) / p);
		CHECK(fabs(est_b[k] - truth_b) < SIGMAS * sd_b);
		CHECK(fabs(est_c[k] - truth_c) < SIGMAS * sd_c);
		/* and the bound is useful for a site holding 1 % of the bytes or more */
		if (sz / (double)mean >= 0.01)
			CHECK(SIGMAS * sd_b < 0.1 * truth_b);
	}
	/* the two 4000-byte sites share the samples instead of one taking all */
	CHECK(fabs(est_b[2] - est_b[3]) < SIGMAS * sqrt(2.0) *
	      sqrt(rounds * 4000.0 * 4000.0 * exp(-4000.0 / mean) / -expm1(-4000.0 / mean)));
}

/* A 0-byte allocation is never sampled. */
static void test_zero(void)
{
	struct tg_acct_sampler s;
	int i, hits = 0;

	tg_acct_sampler_init(&s, 5, 0, 1);
	for (i = 0; i < 100000; i++)
		hits += tg_acct_sampler_hit(&s, 0, 1);
	CHECK_INT(hits, 0);
}

/* Sampled mode's light path (hook_count.h) adds to the thread's requested
 * bytes alone while no sample point is reached (its light limit), and the
 * general path brings the countdown up to them (tg_acct_sampler_sync) before
 * it draws: the same allocations are sampled as when every one draws, and the
 * countdowns agree at the end. */
static void test_sync(void)
{
	const int64_t mean = 4096;
	struct tg_acct_sampler a, b;
	uint64_t rng = 99;
	int64_t req = 0;
	int i, hits = 0, light = 0, same = 1;

	tg_acct_sampler_init(&a, 11, 2, mean);
	tg_acct_sampler_init(&b, 11, 2, mean);
	for (i = 0; i < 1000000; i++) {
		uint64_t size;
		int ha;

		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		size = (rng >> 33) % 700;
		ha = tg_acct_sampler_hit(&a, size, mean);
		/* light: two in three of the allocations that reach no point */
		if (b.left - (req - b.synced) > (int64_t)size && (rng >> 20) % 3 != 0) {
			same &= !ha;
			light++;
		} else {
			tg_acct_sampler_sync(&b, req);
			same &= tg_acct_sampler_hit(&b, size, mean) == ha;
			hits += ha;
		}
		req += (int64_t)size;
	}
	tg_acct_sampler_sync(&b, req);
	CHECK(same);
	CHECK(b.left == a.left);
	CHECK(hits > 10000 && light > 100000);
}

int main(void)
{
	test_gaps();
	test_streams();
	test_weights();
	test_unbiased();
	test_zero();
	test_sync();
	TG_TEST_DONE();
}
