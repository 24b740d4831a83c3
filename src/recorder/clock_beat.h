/*
 * clock_beat.h - the clock's beat: time_resolution="ms" (docs/api.md
 * "Timestamps").  A thread of its own advances tg_clock_beat (clock.h) once
 * a millisecond; a recording thread reads the TSC at its first event of each
 * beat and gives its later events of the same beat that reading, so an event
 * costs a load and a compare instead of an rdtsc (~9 ns of its ~30 over the
 * empty hook's floor on this project's machines: bench/RESULTS.md).
 *
 * Start, stop and the fork handler run with the GIL (or in the fork child's
 * only thread); the beat's thread touches nothing but tg_clock_beat.
 */
#ifndef TG_CLOCK_BEAT_H
#define TG_CLOCK_BEAT_H

#pragma GCC visibility push(hidden)

/* The beat's period, nanoseconds: a record's time is at most this (plus the
 * beat thread's scheduling delay) before its event. */
#define TG_CLOCK_BEAT_NS 1000000L

/* Start the beat (a no-op when it runs).  0, or a positive errno. */
int tg_clock_beat_start(void);

/* Stop the beat and wait for its thread (at most one period): from the next
 * event on every read is exact.  A no-op when it does not run. */
void tg_clock_beat_stop(void);

/* 1 while the beat runs. */
int tg_clock_beat_running(void);

/* In a fork child: the beat's thread does not exist there; every read is
 * exact until tg_clock_beat_start. */
void tg_clock_beat_after_fork_child(void);

#pragma GCC visibility pop

#endif /* TG_CLOCK_BEAT_H */
