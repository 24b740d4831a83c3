/*
 * clock_beat.c - the clock's beat thread (clock_beat.h).
 *
 * tg_clock_beat's values: even while no beat runs (every read exact, and a
 * cache stores the value | 1, which the beat never takes: see start), odd
 * while it runs, the thread adding 2 each period.  Start adds 3 (even to odd,
 * past the value | 1 that exact reads stored), stop adds 1 (odd to even): the
 * value only grows, so no cache of an earlier beat or run ever matches again.
 */
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

static void *
tg_beat_main(void *arg)
{
    struct timespec period = {0, TG_CLOCK_BEAT_NS};

    (void)arg;
    while (!atomic_load_explicit(&tg_beat_stop_req, memory_order_relaxed)) {
        /* Relative: a late wake (a loaded machine) starts the next period
         * from there, with no burst of beats to catch up. */
        while (nanosleep(&period, NULL) != 0 && errno == EINTR)
            ;
        atomic_fetch_add_explicit(&tg_clock_beat, 2, memory_order_relaxed);
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
    /* Signals are for Python's main thread, never for the beat. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    e = pthread_create(&tg_beat_thread, NULL, tg_beat_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0)
        return e;
    tg_beat_on = 1;
    atomic_fetch_add(&tg_clock_beat, 3);
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
    atomic_fetch_add(&tg_clock_beat, 1);
}
