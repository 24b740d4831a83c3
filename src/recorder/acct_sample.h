/*
 * acct_sample.h - the randomised byte sampling of allocation accounting
 * (ProcessProfile(sample_bytes=N), docs/accounting.md "Sampling").
 *
 * As tcmalloc, jemalloc and heapprofd: sample points fall on the stream of bytes
 * a thread allocates as a Poisson process of rate 1/N (exponential gaps of mean
 * N bytes, drawn per thread), and an allocation is sampled when a point falls
 * inside it.  Each thread keeps a countdown of the bytes to its next point; an
 * allocation of SIZE bytes subtracts SIZE, and is sampled when that reaches 0,
 * after which a fresh gap is drawn.  Since the gap is memoryless, an allocation
 * of SIZE bytes is sampled with probability
 *
 *     p(SIZE) = 1 - exp(-SIZE / N)
 *
 * whatever came before, so giving a sampled allocation the weight 1/p (SIZE/p
 * bytes, 1/p blocks) makes every sum of weights an unbiased estimate of the true
 * sum (Horvitz-Thompson).  SIZE/p is about N for SIZE << N and SIZE for SIZE >> N
 * (the "max(SIZE, N)" of the literature, without its bias in between).
 *
 * Pure C, no Python: tests/c/test_acct_sample.c links acct_sample.c alone.
 */
#ifndef TG_ACCT_SAMPLE_H
#define TG_ACCT_SAMPLE_H

#include <stdint.h>

#pragma GCC visibility push(hidden)

/* Block counts in the site counters are fixed-point with this many fraction
 * bits, so that sampled weights (1/p, not an integer) add up without rounding
 * bias; exact accounting adds TG_ACCT_CNT_ONE per block. */
#define TG_ACCT_CNT_SHIFT 16
#define TG_ACCT_CNT_ONE (INT64_C(1) << TG_ACCT_CNT_SHIFT)

/* A thread's sampling state.  Only its owner thread touches it. */
struct tg_acct_sampler {
    int64_t left;    /* bytes until the next sample point (> 0 between calls)
                      * as of SYNCED */
    int64_t synced;  /* the thread's requested bytes where LEFT was last brought
                      * up to date: sampled mode's light path (hook_count.h)
                      * adds to requested alone, so the bytes left are
                      * left - (requested - synced) (tg_acct_sampler_sync) */
    uint64_t rng;    /* xorshift64* state, never 0 */
    int64_t light_room;  /* sampled mode's light path (hook_count.h
                        * tg_acct_alloc_light_cur): its light limit less the
                        * thread's requested bytes.  While the requested bytes
                        * stay at most that limit (this not below 0), no
                        * allocation reaches a sample point nor passes the
                        * thread's peak.  Every allocation counted takes its
                        * size from it (tg_acct_alloc too), so that it follows
                        * the requested bytes.  0 (a new state's) until the
                        * light path first sets it */
};

/* Seed S for the thread numbered IX from the run's SEED (splitmix64 of both,
 * so that threads draw independent streams) and draw its first gap for a mean
 * of MEAN (> 0) bytes, counted from requested bytes 0 (a new state's). */
void tg_acct_sampler_init(struct tg_acct_sampler *s, uint64_t seed, uint64_t ix, int64_t mean);

/* A gap of mean MEAN bytes: ceil of an exponential variate, at least 1. */
int64_t tg_acct_sampler_gap(struct tg_acct_sampler *s, int64_t mean);

/* S's countdown brought up to REQ, the thread's requested bytes now (see
 * synced). */
static inline void
tg_acct_sampler_sync(struct tg_acct_sampler *s, int64_t req)
{
    s->left -= req - s->synced;
    s->synced = req;
}

/* Whether the allocation of SIZE bytes that the thread makes now is sampled
 * (and, if so, the countdown restarts from a fresh gap); S synced to the
 * requested bytes before it, and after it on return.  A 0-byte allocation
 * is never sampled (p(0) = 0: it adds nothing to any byte sum). */
static inline int
tg_acct_sampler_hit(struct tg_acct_sampler *s, uint64_t size, int64_t mean)
{
    s->left -= (int64_t)size;
    s->synced += (int64_t)size;
    if (s->left > 0)
        return 0;
    s->left = tg_acct_sampler_gap(s, mean);
    return 1;
}

/* The weight of a sampled block of SIZE bytes (> 0) under mean MEAN: *BYTES =
 * round(SIZE / p), *COUNT = round(TG_ACCT_CNT_ONE / p).  A pure function of SIZE
 * and MEAN, so that the free of a block takes away exactly what its allocation
 * added. */
void tg_acct_sample_weight(uint64_t size, int64_t mean, int64_t *bytes, int64_t *count);

#pragma GCC visibility pop

#endif /* TG_ACCT_SAMPLE_H */
