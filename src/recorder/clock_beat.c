/*
 * clock_beat.c - the clock's beat thread (clock_beat.h).
 *
 * tg_clock_beat's values: even while no beat runs (every read exact, and a
 * cache stores the value | 1, which the beat never takes: see below), odd
 * while it runs, the thread adding 2 each period.  Going from even to odd
 * adds 3 (past the value | 1 that exact reads stored), from odd to even 1:
 * the value only grows, so no cache of an earlier beat or run ever matches
 * again.
 *
 * Parked: a period in which no thread took a reading (tg_clock_beat_seen, set
 * by every read that did not reuse one) means no timed record was written in
 * it.  After TG_CLOCK_BEAT_IDLE such periods in a row the thread makes the
 * beat even (every record reads the clock, as with "us") and looks every
 * TG_CLOCK_BEAT_PARKED_NS for a reading taken meanwhile, on which it beats
 * again.  So an idle program is woken about 100 times a second, not 1000; a
 * busy one parks only when the machine keeps all its threads off the CPU for
 * that long (one empty period alone, a recording thread descheduled for a
 * millisecond on a loaded machine, parked it often, and its records then
 * read the clock until the next look).
 */
#define _GNU_SOURCE  /* pthread_setname_np */
#include "clock_beat.h"
#include "clock.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

static pthread_t tg_beat_thread;     /* GIL: start/stop/fork child */
static int tg_beat_on;               /* GIL: the thread exists */
static _Atomic int tg_beat_stop_req; /* set by stop, read by the thread */

/* How often a parked beat looks for readings; empty periods before it parks. */
#define TG_CLOCK_BEAT_PARKED_NS 10000000L
#define TG_CLOCK_BEAT_IDLE 20

static void *
tg_beat_main(void *arg)
{
    struct timespec period = {0, TG_CLOCK_BEAT_NS};
    struct timespec parked_period = {0, TG_CLOCK_BEAT_PARKED_NS};
    int parked = 0, idle = 0;

    (void)arg;
    while (!atomic_load_explicit(&tg_beat_stop_req, memory_order_relaxed)) {
        int seen;

        /* Relative: a late wake (a loaded machine) starts the next period
         * from there, with no burst of beats to catch up. */
        while (nanosleep(parked ? &parked_period : &period, NULL) != 0 && errno == EINTR)
            ;
        seen = atomic_exchange_explicit(&tg_clock_beat_seen, 0, memory_order_relaxed);
        if (!parked && (seen || ++idle < TG_CLOCK_BEAT_IDLE)) {
            /* an empty period advances the beat too: a reading kept from
             * before it must not serve the records after it */
            if (seen)
                idle = 0;
            atomic_fetch_add_explicit(&tg_clock_beat, 2, memory_order_relaxed);
        } else if (!parked) {
            atomic_fetch_add_explicit(&tg_clock_beat, 1, memory_order_relaxed);  /* even */
            parked = 1;
            idle = 0;
        } else if (seen) {
            atomic_fetch_add_explicit(&tg_clock_beat, 3, memory_order_relaxed);  /* odd */
            parked = 0;
        }
    }
    return NULL;
}

int
tg_clock_beat_start(void)
{
    sigset_t all, old;
    int e;

    if (tg_beat_on)
        return 0;
    atomic_store(&tg_beat_stop_req, 0);
    atomic_store(&tg_clock_beat_seen, 0);
    /* Odd before the thread exists: the thread then only ever sees its own
     * values (a start after its first period would race its park). */
    atomic_fetch_add(&tg_clock_beat, 3);
    /* Signals are for Python's main thread, never for the beat. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    e = pthread_create(&tg_beat_thread, NULL, tg_beat_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0) {
        atomic_fetch_add(&tg_clock_beat, 1);  /* even again: every read exact */
        return e;
    }
#ifdef __linux__
    /* by its creator, so that it has its name once enable() returns (top -H) */
    pthread_setname_np(tg_beat_thread, "tg-clock-beat");
#endif
    tg_beat_on = 1;
    return 0;
}

void
tg_clock_beat_stop(void)
{
    if (!tg_beat_on)
        return;
    atomic_store(&tg_beat_stop_req, 1);
    pthread_join(tg_beat_thread, NULL);
    tg_beat_on = 0;
    if (atomic_load(&tg_clock_beat) & 1)  /* beating, not parked */
        atomic_fetch_add(&tg_clock_beat, 1);
}

int
tg_clock_beat_running(void)
{
    return tg_beat_on;
}

void
tg_clock_beat_after_fork_child(void)
{
    if (!tg_beat_on)
        return;
    tg_beat_on = 0;
    if (atomic_load(&tg_clock_beat) & 1)
        atomic_fetch_add(&tg_clock_beat, 1);
}
