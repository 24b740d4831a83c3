/*
 * greenlet.h - a stack per greenlet: greenlet's switch hook (greenlet.settrace)
 * makes each greenlet that runs in a profiled thread a state of its own (its
 * stack, its counters, its files), so that its calls pair with their returns
 * across switches.  docs/architecture.md "Greenlets" gives the design.
 */
#ifndef TG_GREENLET_H
#define TG_GREENLET_H

#include "recorder.h"

#pragma GCC visibility push(hidden)

/* Greenlets in one thread that get a state of their own at once; the others
 * run on their thread's state, as without the switch hook. */
#define TG_GLET_MAX 256

/* The switch hook, greenlet.settrace's function: created at module init
 * (tg_glet_init), never freed. */
int tg_glet_init(PyObject *module);

/* T, the calling thread's own state, was just attached: if greenlet is
 * imported, its switch hook for this thread becomes the recorder's.  GIL
 * held, exception state saved by the caller. */
void tg_glet_thread_attached(struct tg_recorder_object *self, struct tg_thread *t);

/* The recorder saw a return of an enclosing call (recorder.c tg_unwind_to),
 * the sign of a switch it did not see: if greenlet is imported and this
 * thread's switch hook is not the recorder's, make it so.  GIL held. */
void tg_glet_unwound(struct tg_thread *t);

/* End the states of ROOT's greenlets (ROOT: a thread's own state, its thread
 * ending).  GIL held, TG_BUSY_TRACER set. */
void tg_glet_end_all(struct tg_recorder_object *self, struct tg_thread *root);

/* _recorder.greenlet_watch(): greenlet was just imported in the calling
 * thread (threadgraph/_greenlet.py): install the switch hook there. */
PyObject *tg_mod_greenlet_watch(PyObject *mod, PyObject *noargs);

#pragma GCC visibility pop

#endif /* TG_GREENLET_H */
