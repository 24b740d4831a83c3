/*
 * sigkick.h - the finishing signals' lost wake-up guard.
 *
 * threadgraph finishes a run on SIGTERM/SIGINT/SIGHUP (and the other
 * terminating signals of profiler.py's _FINISH_SIGNALS) with a Python-level
 * handler (threadgraph/profiler.py), which Python runs in the main thread
 * between bytecodes.  A signal that lands while the main thread is between a
 * lock's "try" and its blocking wait (multiprocessing's SemLock.acquire:
 * sem_trywait, then sem_wait), or that the kernel hands to another thread,
 * trips Python's flag but interrupts no wait: the handler would never run and
 * the process, which the default action would have ended, waits forever.
 *
 * So the C handler Python installs is wrapped: the wrapper notes the signal
 * before calling Python's, and the flusher (which wakes every half second)
 * sends the same signal again to the main thread while the Python handler has
 * not started after a whole period, at most TG_SIGKICK_SENDS times.  The wait
 * ends with EINTR, Python checks its flags and runs the handler.  A second
 * delivery only re-trips a flag that is already set: the handler still runs
 * once.
 *
 * SIGINT keeps Python's own handler (KeyboardInterrupt), which threadgraph
 * leaves alone, so nothing says when it started: its wrapper is
 * interrupt-only (tg_sigkick_wrap_interrupt).  The flusher's sends, marked by
 * a token the wrapper takes, only end the main thread's wait with EINTR
 * (Python then runs the handler of the flag the first delivery set, or, if
 * it ran already, just waits again); TG_SIGKICK_INTERRUPTS of them, a period
 * apart, after a delivery that a whole period did not see handled.  (A
 * signal of the program's that arrives while a token waits is taken for the
 * send, and the send, if not merged with it, for the signal: one delivery
 * still trips Python's flag once; only the main thread, where the sends go,
 * takes a token.)
 */
#ifndef TG_SIGKICK_H
#define TG_SIGKICK_H

#pragma GCC visibility push(hidden)

/* Wrap the C handler installed for SIGNUM (Python's, just set from the main
 * thread by signal.signal()).  Main thread only.  Returns 0, or -1 if SIGNUM
 * is out of range or its action is not a plain handler (left alone). */
int tg_sigkick_wrap(int signum);

/* Times one delivery is sent again, at most (4 s of flusher periods). */
#define TG_SIGKICK_SENDS 8
/* Interrupt-only sends after one delivery of such a signal. */
#define TG_SIGKICK_INTERRUPTS 2

/* tg_sigkick_wrap for a signal whose Python handler is not threadgraph's
 * (SIGINT's default_int_handler): the flusher's sends interrupt the main
 * thread's wait and call no handler. */
int tg_sigkick_wrap_interrupt(int signum);

/* Put the default action back for SIGNUM at the C level if its handler is the
 * wrapper (any thread: for a disable() outside the main thread, where Python
 * cannot change handlers and no flusher is left to send anything).  Returns 0,
 * or -1 if the handler is not the wrapper (left alone). */
int tg_sigkick_default(int signum);

/* The Python handler for SIGNUM has started: no more kicks for it. */
void tg_sigkick_started(int signum);

/* Flusher, once per period: kick the main thread for every signal that was
 * already pending at the previous call. */
void tg_sigkick_poll(void);

/* In a fork child: the calling thread is the main thread now; nothing is
 * pending. */
void tg_sigkick_after_fork_child(void);

#pragma GCC visibility pop

#endif
