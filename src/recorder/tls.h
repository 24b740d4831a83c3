/*
 * tls.h - the recorder's per-OS-thread state: one thread-local struct.
 *
 * A leaf: it includes only clock.h (for the clock cache) and is read by every
 * layer above it (the allocator hooks, accounting, thread state, events,
 * lifecycle).  It lives apart from alloc_hooks.h so that accounting can reach
 * its thread's state without including the hooks, which call accounting.
 */
#ifndef TG_TLS_H
#define TG_TLS_H

#include "clock.h"
#include <stdint.h>

#pragma GCC visibility push(hidden)

/* Bits of tg_tls.busy. */
#define TG_BUSY_TRACER 1  /* the profile function is doing its own work */
#define TG_BUSY_HOOK 2    /* inside a hook: nested calls (pymalloc -> raw) pass through */
#define TG_BUSY_WATCH 4   /* this thread's profile function was changed (sys.setprofile
                           * audit event, lifecycle.c): the next allocation with the
                           * GIL calls tg_hooks_watch to see by whom */
#define TG_BUSY_PROBE 8   /* alloc_hooks.c tg_hooks_in_chain: the wrappers note that
                           * they were called, and pass the call through */

struct tg_thread;
struct tg_acct_thread;

/* Everything the recorder keeps per OS thread.  Thread-local: only its own thread
 * reads or writes it.  Never freed: the pointers in it are owned elsewhere
 * (thread.c, acct_state.c) and are valid only while their generation matches. */
struct tg_tls {
    struct tg_thread *thread;  /* this thread's recorder state, valid iff gen matches */
    uint64_t gen;              /* run generation `thread` belongs to */
    int64_t allocated;         /* bytes allocated by this thread while hooked */
    int64_t freed;             /* bytes freed (exact sizes) by this thread while hooked
                                * (both: all but sampled mode's fast paths, which count
                                * on the accounting state alone, hook_count.h) */
    /* The busy bits and, in the same 8 bytes (busy_gen), sampled mode's
     * copy of the thread's accounting generation: the GIL domains' hooks
     * test both with one compare (alloc_hooks.c tg_hook_gil_fast_on). */
    union {
        struct {
            int busy;          /* TG_BUSY_* bits */
            uint32_t fast_gen; /* alloc_hooks.c: (uint32_t)acct_gen | 2^31 once
                                * the hooks found this state current; 0 before */
        };
        uint64_t busy_gen;
    };
    struct tg_clock_cache clock;  /* the profile function's clock reads (clock.h) */
    struct tg_acct_thread *acct;  /* this thread's accounting state (acct_state.c),
                                   * valid iff acct_gen == tg_acct.gen */
    uint64_t acct_gen;
    void *hook_p;                 /* alloc_hooks.c: sampled mode's malloc in a GIL
                                   * domain hands the block to its slow path here
                                   * (tg_hook_malloc_gil_record): the block stays
                                   * in the register it is returned in */
    size_t hook_size;             /* alloc_hooks.c: sampled and plain mode's malloc
                                   * in a GIL domain keep the request's size here
                                   * across their call down, not in a saved
                                   * register (a nested call is busy: it takes the
                                   * general path, which does not use it) */
};

/* initial-exec: a direct %fs access instead of a __tls_get_addr call per hook;
 * the struct is small enough for glibc's static TLS reserve for dlopen. */
extern _Thread_local struct tg_tls tg_tls __attribute__((tls_model("initial-exec")));

#pragma GCC visibility pop

#endif /* TG_TLS_H */
