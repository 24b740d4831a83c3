/*
 * alloc_hooks.h - PyMem_SetAllocator wrappers that count each thread's bytes.
 *
 * Wrappers for the raw, mem and obj domains call the previous allocator and add
 * the requested size to the calling thread's `allocated` counter; a free adds the
 * exact size the block was allocated with (from the pointer table) to `freed`.
 * The counters are thread-local variables rather than fields of struct tg_thread:
 * the hooks then never dereference recorder state, so a thread that is not (or no
 * longer) profiled, or a raw allocation racing with disable(), is always safe.
 * The per-thread state they count into is tg_tls (tls.h).
 */
#ifndef TG_ALLOC_HOOKS_H
#define TG_ALLOC_HOOKS_H

#include "tg_compat.h"
#include "tls.h"
#include <stdatomic.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

/* Process-wide traced bytes (allocated - freed, all threads); relaxed atomics,
 * maintained only while tg_hooks_count_total is set (memory="process"). */
extern _Atomic int64_t tg_process_total;
extern int tg_hooks_count_total;  /* written at enable/disable with the GIL */

/* Called by the mem and obj domains' malloc, with the GIL, after the block is
 * counted, when the calling thread has TG_BUSY_WATCH set (and not
 * TG_BUSY_TRACER); it clears the bit when done watching.  Set once at module
 * init (lifecycle.c): the hooks reach the layer above only through it. */
extern void (*tg_hooks_watch)(void);

/* Install the wrappers on the three domains.  Returns 0. */
int tg_hooks_install(int count_total);
/* Put back on top of their domain's allocator the wrappers that another tool
 * took out of the chain (tracemalloc.stop() restores the allocators it found
 * at its start, ours missing if that was before enable); returns how many.  0
 * when not recording.  GIL held. */
int tg_hooks_rehook(void);
/* Take the wrappers out of the chain, each domain's allocator set back to the
 * one it wraps, when all three are on top (else nothing): 1 if taken out.
 * Only for tracemalloc.start() (tmstop.h), which tg_hooks_rehook follows at
 * once.  0 when not recording.  GIL held. */
int tg_hooks_lift(void);

/* Which copy of the GIL domains' malloc and free tg_hooks_install puts in:
 * "bmi2" (compiled for processors with BMI2, and this one has it) or
 * "baseline" (THREADGRAPH_NO_BMI2 set, another processor, another build). */
const char *tg_hooks_gil_copies(void);
/* Remove them (restore the previous allocators if ours are still installed; if
 * another tool wrapped ours since, ours stay but stop tracking).  Then clears the
 * pointer table. */
void tg_hooks_uninstall(void);

#pragma GCC visibility pop

#endif /* TG_ALLOC_HOOKS_H */
