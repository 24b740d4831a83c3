/*
 * test_sigkick.c - the finishing signals' lost wake-up guard (sigkick.c), alone.
 *
 * A handler that only records the signal (as Python's C handler does) is
 * wrapped; the signal is delivered to another thread while the main thread is
 * blocked in sem_wait, so nothing interrupts that wait.  Two polls (the
 * flusher's) must send the signal again to the main thread: its sem_wait ends
 * with EINTR.  Once the handler has "started", polls send nothing.
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <time.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sigkick.h"
#include "tg_test.h"

/* What the chained handler saw; atomic: the handler runs in whichever thread
 * the signal reached (sig_atomic_t is atomic only within one thread). */
static atomic_int tripped;
static atomic_int trip_count;
static sem_t never;                       /* never posted: only EINTR ends a wait */

static void
python_like_handler(int signum)
{
    atomic_store(&tripped, signum);
    atomic_fetch_add(&trip_count, 1);
}

static void
install_python_like(int signum)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = python_like_handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_ONSTACK;             /* as PyOS_setsig: no SA_RESTART */
    sigaction(signum, &sa, NULL);
}

static void
nap_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* Another thread: the signal to itself, then the flusher's polls. */
static void *
elsewhere(void *arg)
{
    int signum = *(int *)arg;

    nap_ms(100);                          /* the main thread is in sem_wait */
    pthread_kill(pthread_self(), signum);
    tg_sigkick_poll();                    /* first sight: no kick yet */
    nap_ms(100);
    tg_sigkick_poll();                    /* still pending: kick */
    return NULL;
}

/* Start ELSEWHERE for SIGNUM and wait on NEVER (10 s at most: a failure ends,
 * not hangs); the wait's errno, EINTR when a send ended it. */
static int
wait_missed_by(int signum)
{
    pthread_t t;
    struct timespec deadline;
    int res, err;

    pthread_create(&t, NULL, elsewhere, &signum);
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    res = sem_timedwait(&never, &deadline);
    err = errno;
    pthread_join(t, NULL);
    return res == -1 ? err : 0;
}

static void
test_kick_ends_a_wait_the_signal_missed(void)
{
    int signum = SIGUSR1;

    install_python_like(signum);
    CHECK_INT(tg_sigkick_wrap(signum), 0);
    CHECK_INT(tg_sigkick_wrap(signum), 0);            /* wrapped once only */
    tripped = 0;
    trip_count = 0;
    CHECK_INT(wait_missed_by(signum), EINTR);         /* not ETIMEDOUT */
    CHECK_INT(tripped, signum);                       /* the chained handler ran */
    CHECK_INT(trip_count, 2);                         /* delivery + kick */
    /* The handler started: nothing more is sent. */
    tg_sigkick_started(signum);
    trip_count = 0;
    tg_sigkick_poll();
    tg_sigkick_poll();
    CHECK_INT(trip_count, 0);
}

static void
test_only_plain_handlers_are_wrapped(void)
{
    struct sigaction sa;

    signal(SIGUSR2, SIG_DFL);
    CHECK_INT(tg_sigkick_wrap(SIGUSR2), -1);
    signal(SIGUSR2, SIG_IGN);
    CHECK_INT(tg_sigkick_wrap(SIGUSR2), -1);
    CHECK_INT(tg_sigkick_wrap(0), -1);
    CHECK_INT(tg_sigkick_wrap(64), -1);
    sigaction(SIGUSR2, NULL, &sa);
    CHECK(sa.sa_handler == SIG_IGN);                  /* left alone */
    signal(SIGUSR2, SIG_DFL);
}

static void
test_a_handled_signal_is_not_sent_again(void)
{
    int signum = SIGUSR1;

    install_python_like(signum);
    CHECK_INT(tg_sigkick_wrap(signum), 0);
    trip_count = 0;
    raise(signum);                                    /* the main thread's own */
    CHECK_INT(trip_count, 1);
    tg_sigkick_poll();
    tg_sigkick_started(signum);                       /* its handler ran in time */
    tg_sigkick_poll();
    tg_sigkick_poll();
    CHECK_INT(trip_count, 1);
}

static void
test_fork_child_forgets_pending(void)
{
    int signum = SIGUSR1;
    pid_t pid;
    int status = 0;

    install_python_like(signum);
    CHECK_INT(tg_sigkick_wrap(signum), 0);
    raise(signum);                                    /* pending in the parent */
    pid = fork();
    if (pid == 0) {
        trip_count = 0;
        tg_sigkick_after_fork_child();
        tg_sigkick_poll();
        tg_sigkick_poll();
        _exit(trip_count == 0 ? 0 : 1);
    }
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    tg_sigkick_started(signum);
}

/* A main thread that never runs the handler (stuck in C code) is sent the
 * signal TG_SIGKICK_SENDS times, then left alone; a new delivery starts over. */
static void
test_sends_are_capped(void)
{
    int signum = SIGUSR1, i;

    install_python_like(signum);
    CHECK_INT(tg_sigkick_wrap(signum), 0);
    trip_count = 0;
    raise(signum);
    for (i = 0; i < TG_SIGKICK_SENDS + 5; i++)
        tg_sigkick_poll();                 /* this thread is the main thread */
    CHECK_INT(trip_count, 1 + TG_SIGKICK_SENDS);
    tg_sigkick_started(signum);
    tg_sigkick_poll();                     /* seen clear: the count restarts */
    trip_count = 0;
    raise(signum);
    tg_sigkick_poll();
    tg_sigkick_poll();
    CHECK_INT(trip_count, 2);
    tg_sigkick_started(signum);
}

/* The default action back at the C level, only over the wrapper. */
static void
test_default_only_over_the_wrapper(void)
{
    struct sigaction sa;

    install_python_like(SIGUSR2);
    CHECK_INT(tg_sigkick_default(SIGUSR2), -1);        /* not wrapped: left alone */
    sigaction(SIGUSR2, NULL, &sa);
    CHECK(sa.sa_handler == python_like_handler);
    CHECK_INT(tg_sigkick_wrap(SIGUSR2), 0);
    CHECK_INT(tg_sigkick_default(SIGUSR2), 0);
    sigaction(SIGUSR2, NULL, &sa);
    CHECK(sa.sa_handler == SIG_DFL);
    CHECK_INT(tg_sigkick_default(SIGUSR2), -1);
}

/* Interrupt-only (SIGINT's KeyboardInterrupt handler, which never says it
 * started): a delivery that missed the main thread's wait is followed by
 * TG_SIGKICK_INTERRUPTS sends that end the wait with EINTR but never call the
 * handler again; then nothing more. */
static void
test_interrupt_only_sends_call_no_handler(void)
{
    int signum = SIGURG, i;

    install_python_like(signum);
    CHECK_INT(tg_sigkick_wrap_interrupt(signum), 0);
    tripped = 0;
    trip_count = 0;
    CHECK_INT(wait_missed_by(signum), EINTR);         /* the send ended the wait */
    CHECK_INT(tripped, signum);
    CHECK_INT(trip_count, 1);                         /* the delivery alone */
    for (i = 0; i < 6; i++)
        tg_sigkick_poll();                            /* one more send, then done */
    CHECK_INT(trip_count, 1);
    /* A new delivery starts over; the program's own signals still chain. */
    raise(signum);
    raise(signum);
    CHECK_INT(trip_count, 3);
    for (i = 0; i < 6; i++)
        tg_sigkick_poll();
    CHECK_INT(trip_count, 3);
    /* Wrapped as a plain finishing signal again: its sends call the handler. */
    CHECK_INT(tg_sigkick_wrap(signum), 0);
    raise(signum);
    tg_sigkick_poll();
    tg_sigkick_poll();
    CHECK_INT(trip_count, 5);
    tg_sigkick_started(signum);
    CHECK_INT(tg_sigkick_default(signum), 0);
}

int
main(void)
{
    sem_init(&never, 0, 0);
    test_kick_ends_a_wait_the_signal_missed();
    test_only_plain_handlers_are_wrapped();
    test_a_handled_signal_is_not_sent_again();
    test_fork_child_forgets_pending();
    test_sends_are_capped();
    test_default_only_over_the_wrapper();
    test_interrupt_only_sends_call_no_handler();
    TG_TEST_DONE();
}
