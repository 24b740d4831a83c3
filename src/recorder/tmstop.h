/*
 * tmstop.h - tracemalloc.stop() puts the recorder's allocator hooks back.
 *
 * tracemalloc.stop() sets each allocator domain back to what it found at
 * tracemalloc.start(): started before enable() (-X tracemalloc,
 * PYTHONTRACEMALLOC, or the program's own start before an in-process
 * ProcessProfile), that is the allocator below the recorder's wrappers, which
 * drops them from the chain, and every thread's memory would go uncounted from
 * there on.  While recording, _tracemalloc.stop's method table entry is
 * swapped for a wrapper that calls the real function, then puts the recorder's
 * wrappers that fell out back on top (alloc_hooks.h tg_hooks_rehook), before
 * any other bytecode runs: no allocation is missed.  Every way of calling it
 * (tracemalloc.stop, a reference kept from before) goes through the entry.
 */
#ifndef TG_TMSTOP_H
#define TG_TMSTOP_H

#include <Python.h>

#pragma GCC visibility push(hidden)

/* Wrap _tracemalloc.stop if the program imported it or tracemalloc traces
 * (nothing else could drop the hooks; nothing either if the module or entry
 * is not as expected).  GIL held, before the hooks count. */
void tg_tmstop_install(void);
/* Put the real function back.  GIL held. */
void tg_tmstop_uninstall(void);

#pragma GCC visibility pop

#endif /* TG_TMSTOP_H */
