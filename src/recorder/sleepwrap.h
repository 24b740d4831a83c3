/*
 * sleepwrap.h - sleep triggers that C code calls without a call event.
 *
 * A `with lock:` statement enters the lock through its type's __enter__, called
 * by the interpreter from C: the profile function and sys.monitoring report no
 * call for it, so the trigger matching in recorder.c (by PyMethodDef, on C call
 * events) never sees it.  While recording, every C sleep trigger named
 * "__enter__" has its method table entry's function pointer swapped for a
 * wrapper that arms and settles the trigger around the real function; every
 * call path (`with`, an explicit call, a bound method) goes through it.
 * disable() puts the real function back.
 */
#ifndef TG_SLEEPWRAP_H
#define TG_SLEEPWRAP_H

#include "recorder.h"

#pragma GCC visibility push(hidden)

/* Wrap R's C triggers named "__enter__" (up to a fixed number; the rest keep
 * matching explicit calls only), if R corrects for sleeps at all (process and
 * rss modes).  GIL held. */
void tg_sleepwrap_install(struct tg_recorder *r);
/* Put every wrapped function back.  GIL held; a thread blocked inside a wrapper
 * returns through it safely (the wrapper re-checks the run before settling). */
void tg_sleepwrap_uninstall(void);

/* Arm the calling thread's sleep trigger for a call that produced no event;
 * returns 1 if armed (then call tg_trigger_settle_direct after the call), 0 if
 * not recording, not correcting, or a trigger is already pending (an explicit
 * call whose C call event armed it).  GIL held.  recorder.c. */
int tg_trigger_arm_direct(void);
/* Add the memory change since tg_trigger_arm_direct to the thread's correction,
 * if the same run is still recording.  GIL held.  recorder.c. */
void tg_trigger_settle_direct(void);

#pragma GCC visibility pop

#endif /* TG_SLEEPWRAP_H */
