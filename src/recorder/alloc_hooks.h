/*
 * alloc_hooks.h - PyMem_SetAllocator wrappers that count each thread's bytes.
 *
 * Wrappers for the raw, mem and obj domains call the previous allocator and add
 * the requested size to the calling thread's `allocated` counter; a free adds the
 * exact size the block was allocated with (from the pointer table) to `freed`.
 * The counters are thread-local variables rather than fields of struct tg_thread:
 * the hooks then never dereference recorder state, so a thread that is not (or no
 * longer) profiled, or a raw allocation racing with disable(), is always safe.
 */
#ifndef TG_ALLOC_HOOKS_H
#define TG_ALLOC_HOOKS_H

#include "tg_compat.h"
#include "clock.h"
#include <stdatomic.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

/* Bits of tg_tls.busy. */
#define TG_BUSY_TRACER 1  /* the profile function is doing its own work */
#define TG_BUSY_HOOK 2    /* inside a hook: nested calls (pymalloc -> raw) pass through */
#define TG_BUSY_WATCH 4   /* this thread's profile function was changed (sys.setprofile
                           * audit event, lifecycle.c): the next allocation with the
                           * GIL calls tg_hooks_watch to see by whom */

struct tg_thread;
struct tg_acct_thread;

/* Everything the recorder keeps per OS thread.  Thread-local: only its own thread
 * reads or writes it. */
struct tg_tls {
    struct tg_thread *thread;  /* this thread's recorder state, valid iff gen matches */
    uint64_t gen;              /* run generation `thread` belongs to */
    int64_t allocated;         /* bytes allocated by this thread while hooked */
    int64_t freed;             /* bytes freed (exact sizes) by this thread while hooked */
    int busy;                  /* TG_BUSY_* bits */
    struct tg_clock_cache clock;  /* the profile function's clock reads (clock.h) */
    struct tg_acct_thread *acct;  /* this thread's accounting state (acct_state.c),
                                   * valid iff acct_gen == tg_acct.gen */
    uint64_t acct_gen;
};

/* initial-exec: a direct %fs access instead of a __tls_get_addr call per hook;
 * the struct is small enough for glibc's static TLS reserve for dlopen. */
extern _Thread_local struct tg_tls tg_tls __attribute__((tls_model("initial-exec")));

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
/* Remove them (restore the previous allocators if ours are still installed; if
 * another tool wrapped ours since, ours stay but stop tracking).  Then clears the
 * pointer table. */
void tg_hooks_uninstall(void);

#pragma GCC visibility pop

#endif /* TG_ALLOC_HOOKS_H */
