/*
 * spguard.h - the C_RETURN of the sys.setprofile call that installs another
 * tool's profile function, kept from that function.
 *
 * The interpreter reports a builtin's return to whatever profile function is
 * installed when the builtin returns, provided one was installed when it was
 * called.  So `sys.setprofile(f)` made while the recorder's function is
 * installed hands f a C_RETURN of sys.setprofile before any call, an event f
 * never gets when it is installed with nothing active: the pure-Python
 * `profile` module asserts on it ("Bad return").  On 3.12+ the same holds when
 * the recorder's sys.monitoring tool sees the call.  While recording, the
 * method table entry of sys.setprofile has its function swapped for a wrapper
 * (as sleepwrap.c does for `__enter__`): when the real call put another
 * function in place where only the recorder made the interpreter report the
 * call, the wrapper puts a
 * guard in front of it, which takes the thread's next profile event (that
 * C_RETURN, or its C_EXCEPTION), restores the other function, and passes on
 * anything else.  The profile object (what sys.getprofile() returns) is never
 * touched.  disable() puts the real function back.
 */
#ifndef TG_SPGUARD_H
#define TG_SPGUARD_H

#include "recorder.h"

#pragma GCC visibility push(hidden)

/* Wrap sys.setprofile.  GIL held; nothing happens if sys.setprofile is not the
 * builtin taking one argument. */
void tg_spguard_install(void);
/* Put the real function back.  GIL held; a guard still in front of another
 * tool's function on some thread stays there until that thread's next event. */
void tg_spguard_uninstall(void);

#pragma GCC visibility pop

#endif /* TG_SPGUARD_H */
