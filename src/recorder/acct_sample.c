/*
 * acct_sample.c - gaps and weights of accounting's byte sampling (see
 * acct_sample.h for the scheme and why the weights are unbiased).
 */
#include "acct_sample.h"

#include <math.h>

static uint64_t
tg_splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

void
tg_acct_sampler_init(struct tg_acct_sampler *s, uint64_t seed, uint64_t ix, int64_t mean)
{
    s->rng = tg_splitmix64(tg_splitmix64(seed) ^ (ix * 0xD1B54A32D192ED03ull));
    if (s->rng == 0)
        s->rng = 1;
    s->left = tg_acct_sampler_gap(s, mean);
    s->synced = 0;
}

int64_t
tg_acct_sampler_gap(struct tg_acct_sampler *s, int64_t mean)
{
    uint64_t x = s->rng;
    double u, g;

    /* xorshift64* (Vigna): 64-bit state, good enough for gap lengths. */
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    s->rng = x;
    x *= 0x2545F4914F6CDD1Dull;
    /* u uniform in (0, 1]: 53 random bits, never 0 (log(0) would be -inf). */
    u = (double)((x >> 11) + 1) * (1.0 / 9007199254740992.0);
    g = ceil(-log(u) * (double)mean);
    if (!(g >= 1.0))
        return 1;
    if (g > 9.0e18)
        return INT64_C(9000000000000000000);
    return (int64_t)g;
}

void
tg_acct_sample_weight(uint64_t size, int64_t mean, int64_t *bytes, int64_t *count)
{
    double p = -expm1(-(double)size / (double)mean);

    if (!(p > 0.0)) {  /* size 0, which is never sampled; stay finite */
        *bytes = 0;
        *count = TG_ACCT_CNT_ONE;
        return;
    }
    *bytes = llround((double)size / p);
    *count = llround((double)TG_ACCT_CNT_ONE / p);
}
