/*
 * tmstop.h - tracemalloc.start() and stop() keep the recorder's allocator
 * hooks on top of tracemalloc's.
 *
 * tracemalloc.stop() sets each allocator domain back to what it found at
 * tracemalloc.start(): started before enable() (-X tracemalloc,
 * PYTHONTRACEMALLOC, or the program's own start before an in-process
 * ProcessProfile), that is the allocator below the recorder's wrappers, which
 * drops them from the chain, and every thread's memory would go uncounted from
 * there on.  tracemalloc.start() after enable() would wrap the recorder's
 * wrappers, and then allocate its own records (a 16-byte trace a traced block,
 * 3.9+) through the raw domain's allocator it found, the recorder's: they
 * would count as the program thread's memory.
 *
 * While recording, _tracemalloc's method table entries of both are swapped
 * for wrappers.  stop's calls the real function, then puts the recorder's
 * wrappers that fell out back on top (alloc_hooks.h tg_hooks_rehook).
 * start's takes the recorder's wrappers out of the chain (tg_hooks_lift),
 * calls the real function, which then wraps the allocators below them, and
 * puts them back on top of tracemalloc's: the order a start before enable()
 * gives, where tracemalloc's records go below the hooks, uncounted.  Both
 * before any other bytecode runs: no allocation of the calling thread is
 * missed (another thread's raw-domain call made without the GIL in the
 * instant of the swap, as with tracemalloc's own start, passes uncounted).
 * Every way of calling them (tracemalloc.start, a reference kept from before)
 * goes through the entries.  So that a start after enable() is caught,
 * the package imports _tracemalloc (a built-in module: some 28 small
 * blocks) with itself (threadgraph/profiler.py).
 */
#ifndef TG_TMSTOP_H
#define TG_TMSTOP_H

#include <Python.h>

#pragma GCC visibility push(hidden)

/* Wrap _tracemalloc.start and stop if the module is imported, or tracemalloc
 * traces (then imported; nothing if the module or an entry is not as
 * expected).  GIL held, before the hooks count. */
void tg_tmstop_install(void);
/* Put the real functions back.  GIL held. */
void tg_tmstop_uninstall(void);

#pragma GCC visibility pop

#endif /* TG_TMSTOP_H */
