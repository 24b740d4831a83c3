/*
 * fold.h - a run's calls as a tree of frames with one value per frame: what
 * `threadgraph folded` prints as folded stacks and `threadgraph flamegraph`
 * draws (docs/flamegraph.md).
 *
 * A frame is one recorded call in its calling context, written
 * "FUNCTION (FILE:LINE)" (LINE: the function's first line, or the calling line
 * for C functions, as .stack and snapshot records give it).  Each frame has a
 * self value (what the metric charges to that call alone) and a total (self plus
 * its callees' totals).  The metrics:
 *
 *   alloc  bytes allocated over the run (snapshot TOTAL_BYTES, final snapshot)
 *   live   bytes still live at the end (LIVE_BYTES of the final snapshot)
 *   peak   bytes live at the process-wide peak (LIVE_BYTES of snapshot-N-peak)
 *   delta  from the .stack/.mem pairing: a call's own delta is its recorded
 *          DELTA minus its callees' DELTAs; self = max(own delta, 0)
 *   time   from the .stack/.mem times: own time = duration minus the callees'
 *          durations, in microseconds; self = max(own time, 0)
 *
 * The snapshot metrics are exact sums of the snapshot's counters; delta's total
 * is the sum of the positive own deltas (equal to the sum of the outermost calls'
 * DELTAs when no call's own code frees more than it allocates; the frees left out
 * are counted in neg); time's total is the sum of the outermost calls' durations.
 */
#ifndef TG_FOLD_H
#define TG_FOLD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "diag.h"
#include "dumpfile.h"

struct tg_capture;
struct tg_stitch;

enum tg_fold_metric { TG_FOLD_ALLOC, TG_FOLD_LIVE, TG_FOLD_PEAK, TG_FOLD_DELTA, TG_FOLD_TIME };

/* A metric's name, unit and one-line meaning (for help and titles). */
struct tg_fold_metric_info {
	const char *name;
	enum tg_fold_metric metric;
	const char *unit;        /* "B" or "us" */
	const char *what;        /* "bytes allocated over the run" */
	int from_snapshot;       /* alloc, live, peak; else the thread dumps */
};
extern const struct tg_fold_metric_info tg_fold_metrics[];
extern const size_t tg_fold_n_metrics;
/* The row of NAME, or NULL. */
const struct tg_fold_metric_info *tg_fold_metric_find(const char *name);
/* Writes the metrics' names ("alloc, live, ... or time") into buf of size n. */
void tg_fold_metric_names(char *buf, size_t n);

#define TG_FOLD_NONE ((size_t)-1)

enum tg_fold_kind { TG_FOLD_CALL, TG_FOLD_THREAD, TG_FOLD_ROOT };

struct tg_fold_node {
	size_t parent;           /* index of the parent frame; TG_FOLD_NONE for the root */
	size_t name;             /* offset of the frame text (NUL-terminated) in the arena */
	int64_t self;            /* the metric charged to this frame alone */
	int64_t total;           /* self + children's totals (tg_fold_finish) */
	uint64_t grew;           /* delta: calls whose own delta was positive (summed in self);
				  * of an aggregate run, all the calls of a path whose summed
				  * own delta was positive (it keeps no single call's) */
	size_t count;            /* frames in this subtree, itself included (tg_fold_finish) */
	size_t child, next;      /* first child, next sibling, by name (tg_fold_finish) */
	unsigned depth;          /* 0 for the root */
	enum tg_fold_kind kind;
};

struct tg_fold {
	struct tg_fold_node *v;  /* v[0] is the root ("all"); parents before children */
	size_t n, cap;
	char *arena;             /* frame texts */
	size_t arena_len, arena_cap;
	size_t *names;           /* open addressing: arena offset + 1 of each text, 0 empty */
	size_t names_cap, names_n;
	size_t *kids;            /* open addressing: node index + 1 by (parent, name) */
	size_t kids_cap;
	const struct tg_fold_metric_info *metric;
	int64_t sampled;         /* "# sampled: N" of the snapshot, 0 when exact */
	int64_t neg;             /* delta: sum of the negative own deltas, left out */
	unsigned long unpaired;  /* calls without a return record (still open at the end) */
	unsigned long mismatched; /* calls paired with a return of another function */
	unsigned long extra;     /* return records left over after the last call */
	unsigned long deep;      /* calls deeper than max_depth, charged to their ancestor */
	unsigned long threads;   /* threads read */
	unsigned long stitched;  /* task runs grafted under their submitter (fold_stitch.h) */
	unsigned long no_stack;  /* delta, time: threads with a .mem and no .stack, left
				  * out (the metrics pair the two) */
	char *no_stack_thread;   /* the first such thread (owned), or NULL */
	char *no_stack_mem;      /* its .mem's path (owned), or NULL */
	char *source;            /* the snapshot read, or the run directory (owned) */
};

/* Default of tg_fold_opts.max_depth (folded, flamegraph, report): ten times
 * CPython's default recursion limit. */
#define TG_FOLD_MAX_DEPTH 10000

struct tg_fold_opts {
	const char *path;        /* run directory (or, for snapshot metrics, a snapshot) */
	const struct tg_fold_metric_info *metric;
	const char *thread;      /* only this thread (file base name), no thread frame */
	int merge_threads;       /* sum all threads' stacks, no thread frame */
	int has_time;            /* the dumps carry TIME# (a capture: and its time flag) */
	const struct tg_capture *cap; /* delta, time: the capture path names, already
				       * open (the caller's); NULL: tg_fold_load opens it
				       * when path is one (dumpset.h) */
	int no_stitch;           /* delta, time: tasks stay under the thread that ran
				  * them (--no-stitch); stitching is also off with
				  * thread (fold_stitch.h) */
	struct tg_stitch *stitch; /* set by tg_fold_load: the run's task links, or NULL */
	unsigned long max_depth; /* delta, time: calls nested deeper have no frame (their
				  * values stay their ancestor's, which they are part of)
				  * and no open-call entry: memory does not grow with the
				  * depth of a chain (0: no limit) */
};

/* Empties F (needs no release before). */
void tg_fold_init(struct tg_fold *f);
/* Frees everything F holds; safe twice. */
void tg_fold_release(struct tg_fold *f);

/*
 * The child of PARENT named TEXT (LEN bytes), made if missing; its index in
 * *OUT.  Returns 0 or -1 (out of memory, d->msg set).
 */
int tg_fold_child(struct tg_fold *f, size_t parent, const char *text, size_t len,
		  enum tg_fold_kind kind, size_t *out, struct tg_diag *d);

/*
 * Reads what o->metric needs from o->path into F (tg_fold_init'ed) and
 * finishes it.  Without --thread and --merge-threads each thread is a frame
 * under the root.  Returns 0, or -1 with d->msg set (no such data in the run:
 * the message says how to record it); F must be released either way.
 */
int tg_fold_load(struct tg_fold *f, const struct tg_fold_opts *o, struct tg_diag *d);

/*
 * Pairs one thread's STACK and MEM dumps (text, or a capture's: recsrc.h) into F (o->metric delta or time),
 * under frame ROOT (0 or a thread frame); tg_fold_load does this for every
 * thread of a run.  OPEN_AT_START: of text dumps, the calls open where they
 * begin (runinfo.json "open_at_start" of an export of a capture's kept
 * segments), whose returns are skipped; -1: as the first .stack record's
 * depth says (a capture's come from its head).  Call tg_fold_finish after.
 * 0 or -1 (d->msg set).
 */
int tg_fold_load_pair(struct tg_fold *f, const struct tg_fold_opts *o,
		      const struct tg_dumpfile *stack, const struct tg_dumpfile *mem, size_t root,
		      long long open_at_start, struct tg_diag *d);

/* Computes totals and counts, links children sorted by name.  0 or -1. */
int tg_fold_finish(struct tg_fold *f, struct tg_diag *d);

/* *A += B, saturating at the int64 limits: hostile dumps may hold any numbers. */
static inline void tg_fold_add(int64_t *a, int64_t b)
{
	if (__builtin_add_overflow(*a, b, a))
		*a = b > 0 ? INT64_MAX : INT64_MIN;
}

/* The text of frame I. */
static inline const char *tg_fold_name(const struct tg_fold *f, size_t i)
{
	return f->arena + f->v[i].name;
}

/*
 * The bytes tg_fold_write() would write (at most: a value is counted at its
 * longest), and the deepest frame's depth in *max_depth: each line repeats its
 * whole path, so a deep chain makes text quadratic in the frames.  UINT64_MAX
 * when out of memory.
 */
uint64_t tg_fold_text_size(const struct tg_fold *f, unsigned *max_depth);

/*
 * Writes one line "FRAME;FRAME;... SELF" per frame with a positive self value,
 * outermost frame first, the root left out, in depth-first order by name.
 * Returns 0, or EOF: a write error (OUT's error flag set; writing stops there)
 * or no memory (the flag clear).
 */
int tg_fold_write(const struct tg_fold *f, FILE *out);

/*
 * Writes the frame text of a call FILE:LINE:FUNCTION ("FUNCTION (FILE:LINE)";
 * a call not of that form as is) into *buf (grown as needed, *cap its size),
 * with ';' as ',' and control bytes as '?' so that folded lines stay parseable.
 * Returns the length, or -1 when out of memory.
 */
long tg_fold_frame_text(char **buf, size_t *cap, const char *file, size_t flen,
			const char *line, size_t llen, const char *func, size_t fnlen);

#endif
