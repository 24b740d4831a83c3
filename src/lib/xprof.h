/*
 * xprof.h - a run's allocations as stack samples, the model the pprof and
 * speedscope exports write (pprof.h, speedscope.h; docs/formats.md "pprof and
 * speedscope").
 *
 * A sample is one calling context of one thread with four values, pprof's heap
 * profile sample types in their order: allocated objects and bytes, in-use
 * objects and bytes.  Its stack is a list of frames, the leaf first; a frame is
 * a function (name and file) and a line.  Strings, functions and frames are
 * interned: the exports write each once and refer to it by index.
 *
 * From an accounting snapshot (tg_xprof_from_snapshot) each calling-context
 * node with a non-zero counter is a sample: TOTAL_COUNT, TOTAL_BYTES,
 * LIVE_COUNT, LIVE_BYTES.  Without accounting (tg_xprof_from_fold, the delta
 * metric's frame tree) each frame with a positive self value is one: both byte
 * values are the sum of the positive own deltas of its calls (what their own
 * code left allocated when they returned), both object values the number of
 * those calls; nothing in the dumps tells what was freed later.
 */
#ifndef TG_XPROF_H
#define TG_XPROF_H

#include <stddef.h>
#include <stdint.h>

#include "diag.h"
#include "fold.h"
#include "snapshot.h"

enum tg_xval {
	TG_XV_ALLOC_OBJECTS,
	TG_XV_ALLOC_SPACE,
	TG_XV_INUSE_OBJECTS,
	TG_XV_INUSE_SPACE,
	TG_XV_N
};

/* The sample types' names and units, in enum tg_xval order. */
extern const char *const tg_xval_names[TG_XV_N];
extern const char *const tg_xval_units[TG_XV_N];

/* Where the values come from (comments in the outputs, docs). */
enum tg_xprof_from { TG_XPROF_ACCOUNTING, TG_XPROF_DELTA };

/* At most this many frames over all samples' stacks: a profile holds each
 * sample's whole stack, so a deep recursion that allocates at every level
 * makes it quadratic in the depth (2^24 frames: 128 MiB of stack ids). */
#define TG_XPROF_MAX_STACK_FRAMES ((size_t)1 << 24)

struct tg_xfunc {
	size_t name, file;       /* string ids */
};

struct tg_xframe {
	size_t func;             /* index in funcs[] */
	int64_t line;            /* 0 when unknown */
};

struct tg_xsample {
	size_t thread;           /* string id of the thread's name */
	size_t stack, depth;     /* stack_ids[stack .. stack + depth): frames, leaf first */
	int64_t v[TG_XV_N];
};

struct tg_xprof {
	char **strs;             /* strs[0] is "" (owned, as all the strings) */
	size_t n_strs, strs_cap;
	size_t *str_tab;         /* open addressing: string id + 1, 0 empty */
	size_t str_tab_cap;
	struct tg_xfunc *funcs;
	size_t n_funcs, funcs_cap;
	size_t *func_tab, func_tab_cap;
	struct tg_xframe *frames;
	size_t n_frames, frames_cap;
	size_t *frame_tab, frame_tab_cap;
	size_t *stack_ids;
	size_t n_stack_ids, stack_ids_cap;
	struct tg_xsample *samples;
	size_t n_samples, samples_cap;
	size_t *threads;         /* string ids of the threads that have samples, first seen
				  * first; "<no thread>" (a snapshot's allocations outside any
				  * thread's calls) last, when it has samples */
	size_t n_threads, threads_cap;
	size_t no_thread_samples; /* samples of "<no thread>": not a thread, counted apart */
	enum tg_xprof_from from;
	int64_t sampled;         /* "# sampled: N" of the snapshot: the values are estimates */
	char *source;            /* the snapshot or run read (owned) */
};

/* Empties X (needs no release before). */
void tg_xprof_init(struct tg_xprof *x);
/* Frees everything X holds; safe twice. */
void tg_xprof_release(struct tg_xprof *x);

/*
 * Fills X (tg_xprof_init'ed) from the snapshot S: one sample per node with a
 * non-zero counter, its thread that of its outermost node ("<no thread>" when
 * none: then last in x->threads, so that a viewer opens on a real thread, and
 * its samples counted in x->no_thread_samples).  Returns 0, or -1 with d->msg set (out of memory, stacks beyond
 * TG_XPROF_MAX_STACK_FRAMES); X must be released either way.
 */
int tg_xprof_from_snapshot(struct tg_xprof *x, const struct tg_snapshot *s, struct tg_diag *d);

/*
 * Fills X from F, a finished delta frame tree with a thread frame under the
 * root for each thread (tg_fold_load without thread or merge options): one
 * sample per call frame with a positive self value.  0 or -1 as above.
 */
int tg_xprof_from_fold(struct tg_xprof *x, const struct tg_fold *f, struct tg_diag *d);

/* The text of string ID. */
static inline const char *tg_xprof_str(const struct tg_xprof *x, size_t id)
{
	return x->strs[id];
}

#endif
