/*
 * clock.c - choosing, calibrating and re-anchoring the recorder's wall clock
 * (the read side is inline in clock.h).
 *
 * The TSC rate comes from the kernel's own conversion where it offers one (the
 * time_mult/time_shift of a perf_event mmap page with cap_user_time), else from
 * two readings of clock_gettime 2 ms apart.  Every flusher tick then takes a fresh
 * (rdtsc, CLOCK_REALTIME) anchor and re-measures the rate over the tick, so the
 * clock follows NTP's frequency corrections and wall-clock steps.
 */
#include "clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if TG_CLOCK_HAVE_TSC
#  include <linux/perf_event.h>
#  include <sys/mman.h>
#  include <sys/syscall.h>
#  include <unistd.h>
#endif

struct tg_clock_shared tg_clock_pub;
_Atomic int tg_clock_src = TG_CLOCK_GETTIME;
/* Defined here so that clock.c alone links (tests/c/test_clock.c); only
 * clock_beat.c changes it. */
_Atomic uint64_t tg_clock_beat = 2;
_Atomic int tg_clock_beat_seen;

/* The interval that calibrates the rate when the kernel does not give it. */
#define TG_CLOCK_CALIBRATE_NS 2000000
/* A tick's measured rate is used only over at least this interval... */
#define TG_CLOCK_MIN_INTERVAL_NS 100000000
/* ...and within this many parts per million of the reference rate: NTP slews
 * at most 500 ppm, anything further is a wall-clock step, not a rate. */
#define TG_CLOCK_MAX_PPM 1000
/* Anchors tried, the one read in the shortest rdtsc bracket kept. */
#define TG_CLOCK_ANCHOR_TRIES 5

/* The read barrier of the perf page's seqlock, whose writer is the kernel.
 * ThreadSanitizer models no fence (-Wtsan) and sees no kernel write; its builds
 * are the x86-64 tests, where an acquire fence only stops the compiler, as a
 * signal fence does. */
#if defined(__SANITIZE_THREAD__)
#define TG_CLOCK_PAGE_FENCE() __atomic_signal_fence(__ATOMIC_ACQUIRE)
#else
#define TG_CLOCK_PAGE_FENCE() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#endif

void
tg_clock_publish(const struct tg_clock_conv *c)
{
    /* (s | 1) + 2 is odd whatever SEQ was: a fork() that interrupted a publish
     * leaves it odd, and the child's next publish still ends even. */
    uint32_t s = atomic_load_explicit(&tg_clock_pub.seq, memory_order_relaxed);
    uint32_t odd = (s | 1) + 2;

    /* Release stores of the fields: none is seen before the odd SEQ. */
    atomic_store_explicit(&tg_clock_pub.seq, odd, memory_order_relaxed);
    atomic_store_explicit(&tg_clock_pub.base_tsc, c->base_tsc, memory_order_release);
    atomic_store_explicit(&tg_clock_pub.base_ns, c->base_ns, memory_order_release);
    atomic_store_explicit(&tg_clock_pub.mult, c->mult, memory_order_release);
    atomic_store_explicit(&tg_clock_pub.seq, odd + 1, memory_order_release);
}

uint64_t
tg_clock_rate_mult(uint64_t dns, uint64_t dtsc)
{
#if TG_CLOCK_HAVE_TSC
    unsigned __int128 m;

    if (dtsc == 0)
        return 0;
    m = ((unsigned __int128)dns << TG_CLOCK_SHIFT) / dtsc;
    return m > UINT64_MAX ? 0 : (uint64_t)m;
#else
    (void)dns, (void)dtsc;
    return 0;
#endif
}

uint64_t
tg_clock_mult_from(uint64_t mult, uint32_t shift)
{
    if (shift == TG_CLOCK_SHIFT)
        return mult;
    if (shift > TG_CLOCK_SHIFT)
        return shift - TG_CLOCK_SHIFT >= 64 ? 0 : mult >> (shift - TG_CLOCK_SHIFT);
    if (mult >> (64 - (TG_CLOCK_SHIFT - shift)) != 0)
        return 0;  /* would not fit in 64 bits */
    return mult << (TG_CLOCK_SHIFT - shift);
}

#if TG_CLOCK_HAVE_TSC

/*
 * Writer-side state: touched by tg_clock_enable (GIL, flusher stopped) and then
 * only by the flusher's tg_clock_tick, one after the other, so no lock.
 */
static int tg_clock_cpu_ok = -1;         /* invariant TSC: -1 not checked yet */
static uint64_t tg_clock_ref_mult;       /* reference rate (kernel or measured); 0 none */
static struct tg_clock_conv tg_clock_cur; /* what is published now */

/* 1 if /proc/cpuinfo's first "flags" line has WORD as a whole word. */
static int
tg_clock_has_flag(const char *flags, const char *word)
{
    size_t n = strlen(word);
    const char *p = flags;

    while ((p = strstr(p, word)) != NULL) {
        if ((p == flags || p[-1] == ' ' || p[-1] == '\t')
            && (p[n] == ' ' || p[n] == '\n' || p[n] == '\0'))
            return 1;
        p += n;
    }
    return 0;
}

/* The TSC runs at a constant rate and through sleep states. */
static int
tg_clock_cpu_invariant_tsc(void)
{
    FILE *f = fopen("/proc/cpuinfo", "re");
    char *line = NULL;
    size_t cap = 0;
    int ok = 0;

    if (f == NULL)
        return 0;
    while (getline(&line, &cap, f) > 0) {
        if (strncmp(line, "flags", 5) == 0) {
            ok = tg_clock_has_flag(line, "constant_tsc")
                 && tg_clock_has_flag(line, "nonstop_tsc");
            break;
        }
    }
    free(line);
    fclose(f);
    return ok;
}

/* The kernel's TSC-to-ns rate from a perf_event mmap page.  Returns 0 and sets
 * *MULT (at TG_CLOCK_SHIFT), or -1 (perf events not allowed, no cap_user_time:
 * e.g. a guest whose sched_clock is not the TSC). */
static int
tg_clock_kernel_rate(uint64_t *mult)
{
    struct perf_event_attr attr;
    volatile struct perf_event_mmap_page *pc;
    long page = sysconf(_SC_PAGESIZE);
    uint32_t seq, m = 0;
    uint16_t sh = 0;
    int fd, cap = 0, ret = -1;

    memset(&attr, 0, sizeof(attr));
    attr.type = PERF_TYPE_SOFTWARE;
    attr.size = sizeof(attr);
    attr.config = PERF_COUNT_SW_DUMMY;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0)
        return -1;
    pc = mmap(NULL, (size_t)page, PROT_READ, MAP_SHARED, fd, 0);
    if (pc == MAP_FAILED)
        goto close_fd;
    do {  /* the page's own seqlock */
        seq = pc->lock;
        TG_CLOCK_PAGE_FENCE();
        cap = pc->cap_user_time;
        m = pc->time_mult;
        sh = pc->time_shift;
        TG_CLOCK_PAGE_FENCE();
    } while (pc->lock != seq);
    if (cap && m != 0) {
        *mult = tg_clock_mult_from(m, sh);
        ret = *mult != 0 ? 0 : -1;
    }
    munmap((void *)pc, (size_t)page);
close_fd:
    close(fd);
    return ret;
}

/* A simultaneous (TSC, CLOCK_REALTIME) pair: the clock_gettime that ran in the
 * shortest rdtsc bracket, the TSC at the bracket's middle. */
static void
tg_clock_anchor(uint64_t *tsc, int64_t *ns)
{
    uint64_t best = UINT64_MAX;
    int i;

    for (i = 0; i < TG_CLOCK_ANCHOR_TRIES; i++) {
        uint64_t t0 = __rdtsc();
        int64_t n = tg_clock_gettime_ns();
        uint64_t t1 = __rdtsc();
        if (t1 - t0 < best) {
            best = t1 - t0;
            *tsc = t0 + (t1 - t0) / 2;
            *ns = n;
        }
    }
}

/* The reference rate: the kernel's, else one measured over TG_CLOCK_CALIBRATE_NS.  Once per
 * process.  Returns 0, or -1 if neither gave a rate. */
static int
tg_clock_reference(void)
{
    uint64_t t0, t1;
    int64_t n0, n1;

    if (tg_clock_ref_mult != 0)
        return 0;
    if (tg_clock_kernel_rate(&tg_clock_ref_mult) == 0)
        return 0;
    /* Two anchors TG_CLOCK_CALIBRATE_NS apart, a sleep between them: the
     * anchors' brackets alone set the rate's precision, and a sleep costs the
     * program none of the CPU time a spin took (2 ms at every first enable()
     * where the kernel gives no rate, as on virtual machines without
     * cap_user_time). */
    tg_clock_anchor(&t0, &n0);
    for (;;) {
        struct timespec d;

        tg_clock_anchor(&t1, &n1);
        if (n1 - n0 >= TG_CLOCK_CALIBRATE_NS || n1 < n0)
            break;
        d.tv_sec = 0;
        d.tv_nsec = (long)(TG_CLOCK_CALIBRATE_NS - (n1 - n0));
        (void)nanosleep(&d, NULL);  /* a signal: the loop sleeps the rest */
    }
    if (n1 <= n0)
        return -1;  /* the wall clock stepped back meanwhile */
    tg_clock_ref_mult = tg_clock_rate_mult((uint64_t)(n1 - n0), t1 - t0);
    return tg_clock_ref_mult != 0 ? 0 : -1;
}

/* MULT is within TG_CLOCK_MAX_PPM of the reference rate. */
static int
tg_clock_rate_plausible(uint64_t mult)
{
    uint64_t ref = tg_clock_ref_mult;
    uint64_t diff = mult > ref ? mult - ref : ref - mult;
    return (unsigned __int128)diff * 1000000 <= (unsigned __int128)ref * TG_CLOCK_MAX_PPM;
}

int64_t
tg_clock_now_ns_slow(struct tg_clock_cache *cc)
{
    struct tg_clock_conv c;
    uint32_t seq;

    if (atomic_load_explicit(&tg_clock_src, memory_order_relaxed) == TG_CLOCK_TSC
        && tg_clock_conv_read(&c, &seq)) {
        cc->conv = c;
        /* base_ns >= 0: a time since the epoch (the anchor's). */
        cc->base_us_fx = ((unsigned __int128)(uint64_t)c.base_ns << TG_CLOCK_US_SHIFT) / 1000;
        cc->mult_us = (uint64_t)(((unsigned __int128)c.mult << 10) / 1000);
        cc->seq = seq;
        return tg_clock_conv_ns(&c, __rdtsc());
    }
    return tg_clock_gettime_ns();
}

/* Change the published seq without new parameters (even to even): every
 * reader's cache (tg_clock_cache) is stale from here on. */
static void
tg_clock_invalidate_caches(void)
{
    uint32_t s = atomic_load_explicit(&tg_clock_pub.seq, memory_order_relaxed);
    atomic_store_explicit(&tg_clock_pub.seq, (s | 1) + 1, memory_order_release);
}

int
tg_clock_enable(void)
{
    const char *env = getenv("THREADGRAPH_CLOCK");
    int src = TG_CLOCK_GETTIME;

    if (tg_clock_cpu_ok < 0)
        tg_clock_cpu_ok = tg_clock_cpu_invariant_tsc();
    if ((env == NULL || strcmp(env, "gettime") != 0) && tg_clock_cpu_ok
        && tg_clock_reference() == 0) {
        tg_clock_anchor(&tg_clock_cur.base_tsc, &tg_clock_cur.base_ns);
        tg_clock_cur.mult = tg_clock_ref_mult;
        tg_clock_publish(&tg_clock_cur);
        src = TG_CLOCK_TSC;
    }
    atomic_store_explicit(&tg_clock_src, src, memory_order_relaxed);
    if (src != TG_CLOCK_TSC)
        tg_clock_invalidate_caches();  /* a cache from a TSC run must not be used */
    return src;
}

void
tg_clock_tick(void)
{
    struct tg_clock_conv c;

    if (atomic_load_explicit(&tg_clock_src, memory_order_relaxed) != TG_CLOCK_TSC)
        return;
    tg_clock_anchor(&c.base_tsc, &c.base_ns);
    c.mult = tg_clock_cur.mult;
    if (c.base_ns - tg_clock_cur.base_ns >= TG_CLOCK_MIN_INTERVAL_NS) {
        uint64_t m = tg_clock_rate_mult((uint64_t)(c.base_ns - tg_clock_cur.base_ns),
                                        c.base_tsc - tg_clock_cur.base_tsc);
        c.mult = tg_clock_rate_plausible(m) ? m : tg_clock_ref_mult;
    } else if (c.base_ns < tg_clock_cur.base_ns) {
        c.mult = tg_clock_ref_mult;  /* stepped back: no rate to learn */
    }
    tg_clock_cur = c;
    tg_clock_publish(&c);
}

#else  /* !TG_CLOCK_HAVE_TSC */

int64_t
tg_clock_now_ns_slow(struct tg_clock_cache *cc)
{
    (void)cc;
    return tg_clock_gettime_ns();
}

int
tg_clock_enable(void)
{
    return TG_CLOCK_GETTIME;
}

void
tg_clock_tick(void)
{
}

#endif

const char *
tg_clock_source_name(void)
{
    return atomic_load_explicit(&tg_clock_src, memory_order_relaxed) == TG_CLOCK_TSC
           ? "tsc" : "gettime";
}
