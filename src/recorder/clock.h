/*
 * clock.h - the recorder's wall clock: CLOCK_REALTIME in nanoseconds, read from
 * the CPU's time-stamp counter where that is safe, else from clock_gettime.
 *
 * clock_gettime(CLOCK_REALTIME) was the largest single cost of the profile
 * function (one call per written line, ~20 ns: the vDSO orders rdtsc with a fence
 * and reads the kernel's parameters under a seqlock).  On x86-64 with an invariant
 * TSC we convert rdtsc ourselves:
 *
 *     ns = base_ns + ((tsc - base_tsc) * mult) >> 32
 *
 * with (base_tsc, base_ns) an anchor taken against CLOCK_REALTIME and mult the
 * TSC rate, both renewed by the background flusher every tick
 * (tg_clock_tick), so the clock follows wall-clock steps and NTP slew within one
 * tick.  Everywhere else, or with THREADGRAPH_CLOCK=gettime, it is clock_gettime.
 *
 * Pure C, no Python: tests/c/test_clock.c links clock.c alone.
 */
#ifndef TG_CLOCK_H
#define TG_CLOCK_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#if defined(__x86_64__) && defined(__SIZEOF_INT128__)
#  include <x86intrin.h>
#  define TG_CLOCK_HAVE_TSC 1
#else
#  define TG_CLOCK_HAVE_TSC 0
#endif

#pragma GCC visibility push(hidden)

enum tg_clock_source {
    TG_CLOCK_GETTIME = 0,  /* clock_gettime(CLOCK_REALTIME) on every read */
    TG_CLOCK_TSC = 1       /* rdtsc converted with the published parameters */
};

/* Fixed-point position of mult: a constant shift compiles to one shld of the
 * 128-bit product (a variable one cost a shrd and a shr by %cl per read), and
 * 2^32 keeps ~30 significant bits in mult for any TSC from 1 to 10 GHz. */
#define TG_CLOCK_SHIFT 32

/* A TSC-to-CLOCK_REALTIME conversion (a snapshot of the published one). */
struct tg_clock_conv {
    uint64_t base_tsc;  /* TSC reading at the anchor */
    int64_t base_ns;    /* CLOCK_REALTIME at the anchor, ns since the epoch */
    uint64_t mult;      /* ns per TSC tick, times 2^TG_CLOCK_SHIFT */
};

/*
 * The parameters the readers use.  One writer at a time (tg_clock_enable with the
 * GIL before the flusher starts, then only the flusher's tg_clock_tick); readers
 * are profile functions on any thread.  Every field is under the seqlock SEQ: odd
 * while the writer rewrites them; a reader retries when SEQ was odd or changed.
 * The fields are atomics so that the race the seqlock detects is not a data
 * race in C11 terms: release stores and acquire loads order them against SEQ
 * without fences (on x86-64 they compile to plain loads and stores).
 */
struct tg_clock_shared {
    _Atomic uint32_t seq;       /* seqlock sequence: odd while being written */
    _Atomic uint64_t base_tsc;  /* under seq */
    _Atomic int64_t base_ns;    /* under seq */
    _Atomic uint64_t mult;      /* under seq */
};

extern struct tg_clock_shared tg_clock_pub;
/* enum tg_clock_source in use; written by tg_clock_enable (GIL, flusher
 * stopped), read by every reader (relaxed atomic). */
extern _Atomic int tg_clock_src;

/* Readers give up on the TSC after this many torn reads in a row (the writer
 * died mid-update: a fork() while the flusher published) and use clock_gettime. */
#define TG_CLOCK_READ_TRIES 64

/* Nanoseconds at TSC reading TSC under conversion C.  The product is 128-bit, so
 * no delta overflows (2^64 ticks is ~190 years at 3 GHz).  A reading just before
 * the anchor (another core's rdtsc executed early) gives the anchor itself; the
 * caller's clamp keeps that monotonic. */
static inline int64_t
tg_clock_conv_ns(const struct tg_clock_conv *c, uint64_t tsc)
{
#if TG_CLOCK_HAVE_TSC
    uint64_t d = tsc - c->base_tsc;
    if ((int64_t)d < 0)
        return c->base_ns;
    return c->base_ns + (int64_t)(((unsigned __int128)d * c->mult) >> TG_CLOCK_SHIFT);
#else
    (void)tsc;
    return c->base_ns;
#endif
}

/* CLOCK_REALTIME in ns since the epoch, from clock_gettime. */
static inline int64_t
tg_clock_gettime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#if TG_CLOCK_HAVE_TSC
/* A consistent copy of the published conversion into *C and the seq it was
 * read under into *SEQ: 1, or 0 when the writer kept it busy (seqlock, up to
 * TG_CLOCK_READ_TRIES attempts). */
static inline int
tg_clock_conv_read(struct tg_clock_conv *c, uint32_t *seq)
{
    int tries;
    for (tries = 0; tries < TG_CLOCK_READ_TRIES; tries++) {
        /* Acquire loads of the fields keep the second load of SEQ after them
         * (no separate fence: ThreadSanitizer models none, and on x86-64 both
         * are plain loads). */
        uint32_t s0 = atomic_load_explicit(&tg_clock_pub.seq, memory_order_acquire);
        c->base_tsc = atomic_load_explicit(&tg_clock_pub.base_tsc, memory_order_acquire);
        c->base_ns = atomic_load_explicit(&tg_clock_pub.base_ns, memory_order_acquire);
        c->mult = atomic_load_explicit(&tg_clock_pub.mult, memory_order_acquire);
        if (!(s0 & 1) && atomic_load_explicit(&tg_clock_pub.seq, memory_order_relaxed) == s0) {
            *seq = s0;
            return 1;
        }
    }
    return 0;
}
#endif

/* CLOCK_REALTIME in ns since the epoch, from the chosen source.  Any thread; no
 * lock, no system call. */
static inline int64_t
tg_clock_now_ns(void)
{
#if TG_CLOCK_HAVE_TSC
    struct tg_clock_conv c;
    uint32_t seq;
    if (atomic_load_explicit(&tg_clock_src, memory_order_relaxed) == TG_CLOCK_TSC
        && tg_clock_conv_read(&c, &seq))
        /* A plain rdtsc, not the vDSO's fenced one: the timestamp is printed
         * to the microsecond, a few cycles of reordering with the neighbouring
         * instructions do not show. */
        return tg_clock_conv_ns(&c, __rdtsc());
#endif
    return tg_clock_gettime_ns();
}

/*
 * A reader's private copy of the published conversion, for readers that read
 * the clock on every event (the profile function, once per thread): while
 * tg_clock_pub.seq still equals SEQ, CONV is exactly what the seqlock would
 * give, so a read is one load and compare instead of the seqlock's four loads,
 * fence and retry test (about 15 instructions per read).  Owned by one thread;
 * zero-initialised it is empty (the published seq is never 0 once
 * tg_clock_enable ran, and tg_clock_enable changes it on every call, so a
 * cache never outlives a change of source).
 */
struct tg_clock_cache {
    /* A reading kept for the rest of a beat (clock_beat.h): BEAT_US is
     * tg_clock_beat | 1 as loaded before LAST_US was read (the same for
     * the ns reading), which the beat equals again only while it runs and
     * has not moved on; 0, never a beat, makes the next read exact. */
    uint64_t beat_us;
    int64_t last_us;
    uint64_t beat_ns;
    int64_t last_ns;
    uint32_t seq;               /* tg_clock_pub.seq CONV was read under (even) */
    struct tg_clock_conv conv;
#if TG_CLOCK_HAVE_TSC
    /* The same conversion to microseconds (tg_clock_now_us_cached):
     * us = (base_us_fx + d * mult_us) >> TG_CLOCK_US_SHIFT, d the ticks since
     * conv.base_tsc; base_us_fx holds conv.base_ns / 1000 with its fraction. */
    unsigned __int128 base_us_fx;
    uint64_t mult_us;           /* us per tick, times 2^TG_CLOCK_US_SHIFT */
#endif
};

/* Fixed-point position of tg_clock_cache.mult_us: mult (ns per tick at 2^32)
 * times 2^10 / 1000 keeps all of mult's ~30 significant bits. */
#define TG_CLOCK_US_SHIFT (TG_CLOCK_SHIFT + 10)

/* The slow path of tg_clock_now_ns_cached: refill CC (TSC source) and read. */
int64_t tg_clock_now_ns_slow(struct tg_clock_cache *cc);

/* The clock's beat (clock_beat.c, which says what its values mean): even
 * while none runs; relaxed atomic, written by the beat's thread and by its
 * start and stop (GIL), read by every cached read. */
extern _Atomic uint64_t tg_clock_beat;
/* 1 once a read took a reading rather than reuse one, since the beat's thread
 * last looked (clock_beat.c: a period without one parks the beat).  Relaxed
 * atomic; readers store it only when it is 0, so a busy run's threads do not
 * write its line at every reading. */
extern _Atomic int tg_clock_beat_seen;

/* Note a reading taken (tg_clock_beat_seen). */
static inline void
tg_clock_beat_note(void)
{
    if (!atomic_load_explicit(&tg_clock_beat_seen, memory_order_relaxed))
        atomic_store_explicit(&tg_clock_beat_seen, 1, memory_order_relaxed);
}

/* Forget CC's kept readings: the caller's next read is exact (after a time
 * the thread took elsewhere, so that its next record is not before it). */
static inline void
tg_clock_cache_forget(struct tg_clock_cache *cc)
{
    cc->beat_us = 0;
    cc->beat_ns = 0;
}

/* tg_clock_now_us_cached's fast path alone: 1 with the time in *US while CC
 * holds (TSC source), else 0 without a read, for a caller that must not call
 * (the profile function's fast path, recorder.c). */
static inline int
tg_clock_us_if_cached(struct tg_clock_cache *cc, int64_t *us)
{
#if TG_CLOCK_HAVE_TSC
    if (__builtin_expect(atomic_load_explicit(&tg_clock_pub.seq, memory_order_acquire)
                         == cc->seq, 1)) {
        /* Signed: a reading a little before the anchor (another core's rdtsc
         * ran early) gives a time a little before it rather than the anchor
         * itself (tg_clock_conv_ns's clamp), two instructions fewer; the
         * caller's own clamp keeps its times from going back (the capture's
         * tg_cap_dt_us).  base_us_fx (< 2^93) and mult_us (< 2^45) fit. */
        int64_t d = (int64_t)(__rdtsc() - cc->conv.base_tsc);
        *us = (int64_t)(((__int128)cc->base_us_fx + (__int128)d * (int64_t)cc->mult_us)
                        >> TG_CLOCK_US_SHIFT);
        return 1;
    }
#else
    (void)cc;
    (void)us;
#endif
    return 0;
}

/* CLOCK_REALTIME in microseconds since the epoch through the caller's cache
 * CC: tg_clock_now_ns_cached(CC) / 1000 without the division (for a TSC
 * reading, the same within a microsecond: mult_us is mult rounded down). */
static inline int64_t
tg_clock_now_us_cached(struct tg_clock_cache *cc)
{
    int64_t us;
    if (tg_clock_us_if_cached(cc, &us))
        return us;
    return tg_clock_now_ns_slow(cc) / 1000;
}

/* tg_clock_now_ns through the caller's cache CC (same result). */
static inline int64_t
tg_clock_now_ns_cached(struct tg_clock_cache *cc)
{
#if TG_CLOCK_HAVE_TSC
    if (__builtin_expect(atomic_load_explicit(&tg_clock_pub.seq, memory_order_acquire)
                         == cc->seq, 1))
        return tg_clock_conv_ns(&cc->conv, __rdtsc());
#endif
    return tg_clock_now_ns_slow(cc);
}

/* The readers above with the clock's beat (time_resolution="ms",
 * clock_beat.c), for the runs that have it (recorder.c picks them by
 * r->time_beat; the others pay nothing for it): while tg_clock_beat equals
 * the beat CC's kept reading was taken under, that reading; else a reading
 * as above, kept with the beat loaded *before* it (so a kept reading is never
 * older than its beat) and noted (tg_clock_beat_seen).  BEAT | 1 is kept,
 * which an even (stopped or parked) beat never equals. */
static inline int
tg_clock_us_if_cached_beat(struct tg_clock_cache *cc, int64_t *us)
{
    uint64_t beat = atomic_load_explicit(&tg_clock_beat, memory_order_relaxed);

    if (beat == cc->beat_us) {
        *us = cc->last_us;
        return 1;
    }
    if (!tg_clock_us_if_cached(cc, us))
        return 0;
    cc->beat_us = beat | 1;
    cc->last_us = *us;
    tg_clock_beat_note();
    return 1;
}

static inline int64_t
tg_clock_now_us_beat(struct tg_clock_cache *cc)
{
    uint64_t beat;
    int64_t us;

    if (tg_clock_us_if_cached_beat(cc, &us))
        return us;
    beat = atomic_load_explicit(&tg_clock_beat, memory_order_relaxed);
    us = tg_clock_now_ns_slow(cc) / 1000;
    cc->beat_us = beat | 1;
    cc->last_us = us;
    tg_clock_beat_note();
    return us;
}

static inline int64_t
tg_clock_now_ns_beat(struct tg_clock_cache *cc)
{
    uint64_t beat = atomic_load_explicit(&tg_clock_beat, memory_order_relaxed);
    int64_t ns;

    if (beat == cc->beat_ns)
        return cc->last_ns;
    ns = tg_clock_now_ns_cached(cc);
    cc->beat_ns = beat | 1;
    cc->last_ns = ns;
    tg_clock_beat_note();
    return ns;
}

/* tg_clock_now_ns, but never less than *LAST, which it updates: one caller's
 * timestamps never go backwards (a re-anchor a little behind the extrapolation,
 * or a wall-clock step back, holds the time still until the clock catches up).
 * LAST belongs to the caller (one per thread or per locked stream). */
static inline int64_t
tg_clock_now_ns_mono(int64_t *last)
{
    int64_t ns = tg_clock_now_ns();
    if (ns < *last)
        return *last;
    *last = ns;
    return ns;
}

/* Choose the source for a run (THREADGRAPH_CLOCK, the CPU's TSC flags, the
 * calibration) and anchor it.  Call with the GIL, the flusher stopped.  Never
 * fails: anything missing means TG_CLOCK_GETTIME.  Returns the source. */
int tg_clock_enable(void);

/* Re-anchor to CLOCK_REALTIME and re-measure the rate.  The flusher only, every
 * tick while a run records (no-op with TG_CLOCK_GETTIME). */
void tg_clock_tick(void);

/* "tsc" or "gettime": the source now in use (runinfo.json "clock"). */
const char *tg_clock_source_name(void);

/* --- internals, exposed for tests/c/test_clock.c --- */

/* Mult from a measured interval: DNS nanoseconds over DTSC ticks.  Returns 0 if
 * DTSC is 0 or the result does not fit. */
uint64_t tg_clock_rate_mult(uint64_t dns, uint64_t dtsc);

/* The kernel's MULT and SHIFT (perf_event_mmap_page) as a mult at
 * TG_CLOCK_SHIFT, or 0 if it does not fit. */
uint64_t tg_clock_mult_from(uint64_t mult, uint32_t shift);

/* Publish C to the readers (the seqlock write side). */
void tg_clock_publish(const struct tg_clock_conv *c);

#pragma GCC visibility pop

#endif
