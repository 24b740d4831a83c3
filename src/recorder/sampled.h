/*
 * sampled.h - the event source of mode="sampled" (docs/api.md "Sampled mode"):
 * no profile function and no sys.monitoring callbacks.  The allocator hooks
 * count every byte per thread as in any run; accounting's byte sampler
 * (acct_sample.h) picks one allocation per N bytes on average, and for that
 * one the thread's Python stack is read by walking its frames, as tracemalloc
 * does, and interned as a node of the thread's calling-context tree (the same
 * sites, snapshots and figures as a full run's accounting).
 */
#ifndef TG_SAMPLED_H
#define TG_SAMPLED_H

#include "tg_compat.h"
#include <stdint.h>

#pragma GCC visibility push(hidden)

struct tg_acct_thread;

/* Default mean bytes between two samples of a sampled run (ProcessProfile and
 * `threadgraph run` take it from the module's SAMPLED_DEFAULT_BYTES). */
#define TG_SAMPLED_DEFAULT_BYTES (512 * 1024)

/* Frames read per sample: a deeper stack keeps its innermost ones, rooted at
 * the thread's root. */
#define TG_SAMPLED_MAX_FRAMES 512

/* The site of the allocation thread T is making now, which the sampler chose
 * (accounting's stack_site callback, called from the allocator hooks on any
 * thread): with the GIL, the node of T's calling-context tree for its current
 * Python stack, interned on first sight, after which T's memory curve gets a
 * point (its .mem file); without it (a raw-domain or native allocation with the
 * GIL released), T's root node.  Never raises, never counts what it allocates. */
uint32_t tg_sampled_site(struct tg_acct_thread *t);

/* At enable (GIL, before accounting is on): the frames the calling thread is
 * running now are not part of its sites, as a full run does not record calls
 * running since before enable() (`threadgraph run`'s own frames above the
 * program's): remember them (strong references) until tg_sampled_stop.
 * Returns 0, or -1 with MemoryError. */
int tg_sampled_start(void);
/* At disable or when enable fails (GIL): forget them. */
void tg_sampled_stop(void);

/* At enable, once the run is active (GIL): every other thread with no profile
 * function gets a one-shot one that attaches it (its name, its memory curve)
 * at its first event and removes itself (sampled_adopt.c); a thread with
 * another tool's is left alone.  Returns how many got it. */
struct tg_recorder_object;
int tg_sampled_adopt_install(struct tg_recorder_object *self);
/* At disable (GIL): the one-shot functions of threads that never ran since. */
void tg_sampled_adopt_remove(void);

#pragma GCC visibility pop

#endif /* TG_SAMPLED_H */
