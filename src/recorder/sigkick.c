/*
 * sigkick.c - the finishing signals' lost wake-up guard (sigkick.h).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "sigkick.h"

/* Handlers are installed for signals below 32 only (threadgraph/profiler.py's
 * _FINISH_SIGNALS: SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM, ...):
 * one bit each in a word that the wrapper sets and the main thread clears
 * (lock-free atomics: async-signal-safe). */
#define TG_SIGKICK_MAX 32

/* The handler each wrapped signal chains to.  Written by tg_sigkick_wrap (main
 * thread) before the wrapper is installed, read by the wrapper afterwards. */
static void (*tg_sigkick_next[TG_SIGKICK_MAX])(int);
/* Signals delivered whose Python handler has not started: set by the wrapper
 * (any thread), cleared by tg_sigkick_started (main thread); atomic. */
static unsigned int tg_sigkick_pending;
/* Pending at the flusher's previous poll, and the times each pending signal
 * was sent again: the flusher's own. */
static unsigned int tg_sigkick_seen;
static unsigned char tg_sigkick_sent[TG_SIGKICK_MAX];
/* Python's main thread: set from it (wrap) or in a fork child, read by the
 * flusher; atomic. */
static pthread_t tg_sigkick_main;
/* Signals wrapped by tg_sigkick_wrap_interrupt (their Python handler is not
 * threadgraph's, so nothing says it started): the flusher's sends interrupt
 * the main thread's wait without calling Python's handler again.  Set by the
 * main thread before the wrapper is installed; atomic. */
static unsigned int tg_sigkick_interrupt;
/* Such a send in flight, per signal: set by the flusher just before
 * pthread_kill, taken by the wrapper, which then returns at once; atomic. */
static unsigned int tg_sigkick_token;

/* Whether the calling thread is the main thread (async-signal-safe). */
static int
tg_sigkick_on_main(void)
{
    pthread_t main_thread;

    __atomic_load(&tg_sigkick_main, &main_thread, __ATOMIC_SEQ_CST);
    return pthread_equal(pthread_self(), main_thread);
}

static void
tg_sigkick_handler(int signum)
{
    int saved = errno;
    void (*next)(int) = NULL;

    if (signum > 0 && signum < TG_SIGKICK_MAX) {
        unsigned int bit = 1u << signum;

        /* The flusher's own send of an interrupt-only signal: its work (an
         * EINTR in the main thread's wait) is done by arriving.  Only the
         * main thread, where the sends go, takes the token: a delivery to
         * another thread is always the program's. */
        if ((__atomic_load_n(&tg_sigkick_interrupt, __ATOMIC_SEQ_CST) & bit)
                && tg_sigkick_on_main()
                && (__atomic_fetch_and(&tg_sigkick_token, ~bit, __ATOMIC_SEQ_CST) & bit)) {
            errno = saved;
            return;
        }
        next = tg_sigkick_next[signum];
        __atomic_fetch_or(&tg_sigkick_pending, bit, __ATOMIC_SEQ_CST);
    }
    errno = saved;
    if (next != NULL)
        next(signum);
}

static int
tg_sigkick_wrap_as(int signum, int interrupt)
{
    struct sigaction cur;
    pthread_t self = pthread_self();

    if (signum <= 0 || signum >= TG_SIGKICK_MAX)
        return -1;
    if (interrupt)
        __atomic_fetch_or(&tg_sigkick_interrupt, 1u << signum, __ATOMIC_SEQ_CST);
    else
        __atomic_fetch_and(&tg_sigkick_interrupt, ~(1u << signum), __ATOMIC_SEQ_CST);
    if (sigaction(signum, NULL, &cur) != 0)
        return -1;
    if (cur.sa_flags & SA_SIGINFO)
        return -1;
    if (cur.sa_handler == tg_sigkick_handler)
        return 0;
    if (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN)
        return -1;
    __atomic_store(&tg_sigkick_main, &self, __ATOMIC_SEQ_CST);
    tg_sigkick_next[signum] = cur.sa_handler;
    __atomic_fetch_and(&tg_sigkick_pending, ~(1u << signum), __ATOMIC_SEQ_CST);
    cur.sa_handler = tg_sigkick_handler;
    return sigaction(signum, &cur, NULL) == 0 ? 0 : -1;
}

int
tg_sigkick_wrap(int signum)
{
    return tg_sigkick_wrap_as(signum, 0);
}

int
tg_sigkick_wrap_interrupt(int signum)
{
    return tg_sigkick_wrap_as(signum, 1);
}

void
tg_sigkick_started(int signum)
{
    if (signum > 0 && signum < TG_SIGKICK_MAX)
        __atomic_fetch_and(&tg_sigkick_pending, ~(1u << signum), __ATOMIC_SEQ_CST);
}

void
tg_sigkick_poll(void)
{
    unsigned int pending = __atomic_load_n(&tg_sigkick_pending, __ATOMIC_SEQ_CST);
    unsigned int due = pending & tg_sigkick_seen;
    pthread_t main_thread;
    int signum;

    tg_sigkick_seen = pending;
    for (signum = 1; signum < TG_SIGKICK_MAX; signum++)
        if (!(pending & (1u << signum)))
            tg_sigkick_sent[signum] = 0;
    if (due == 0)
        return;
    __atomic_load(&tg_sigkick_main, &main_thread, __ATOMIC_SEQ_CST);
    for (signum = 1; due != 0 && signum < TG_SIGKICK_MAX; signum++) {
        if (!(due & (1u << signum)))
            continue;
        due &= ~(1u << signum);
        if (__atomic_load_n(&tg_sigkick_interrupt, __ATOMIC_SEQ_CST) & (1u << signum)) {
            /* Nothing says when Python's handler ran: a few interruptions,
             * each harmless (the wrapper only returns; Python retries its
             * waits after EINTR), then the delivery is done with. */
            if (tg_sigkick_sent[signum] < TG_SIGKICK_INTERRUPTS) {
                tg_sigkick_sent[signum]++;
                __atomic_fetch_or(&tg_sigkick_token, 1u << signum, __ATOMIC_SEQ_CST);
                pthread_kill(main_thread, signum);
            } else {
                __atomic_fetch_and(&tg_sigkick_pending, ~(1u << signum), __ATOMIC_SEQ_CST);
            }
            continue;
        }
        /* A main thread that still has not run the handler is in C code that
         * does not look at signals: more interruptions would only make its
         * calls fail with EINTR. */
        if (tg_sigkick_sent[signum] < TG_SIGKICK_SENDS) {
            tg_sigkick_sent[signum]++;
            pthread_kill(main_thread, signum);
        }
    }
}

int
tg_sigkick_default(int signum)
{
    struct sigaction cur;

    if (signum <= 0 || signum >= TG_SIGKICK_MAX || sigaction(signum, NULL, &cur) != 0)
        return -1;
    if ((cur.sa_flags & SA_SIGINFO) || cur.sa_handler != tg_sigkick_handler)
        return -1;
    cur.sa_handler = SIG_DFL;
    return sigaction(signum, &cur, NULL) == 0 ? 0 : -1;
}

void
tg_sigkick_after_fork_child(void)
{
    pthread_t self = pthread_self();

    __atomic_store(&tg_sigkick_main, &self, __ATOMIC_SEQ_CST);
    __atomic_store_n(&tg_sigkick_pending, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&tg_sigkick_token, 0, __ATOMIC_SEQ_CST);
    tg_sigkick_seen = 0;
    memset(tg_sigkick_sent, 0, sizeof tg_sigkick_sent);
}
