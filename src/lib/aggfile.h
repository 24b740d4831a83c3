/*
 * aggfile.h - reading an aggregate run's aggregate.tga (docs/formats.md
 * "Aggregate"): per thread, a tree of call paths with their count, total and
 * largest delta and time, and a memory curve in buckets of equal width.
 *
 * The parser takes the file's bytes and checks everything it keeps: every
 * node's parent comes before it (so the tree has no cycle), every function it
 * names is defined, buckets are in increasing order with times that fit, and
 * the file ends with its "end" line (the recorder renames a complete file into
 * place: a file without it was not written by the recorder).  Sizes are
 * bounded by the file's: nothing is allocated that a line did not ask for.
 */
#ifndef TG_AGGFILE_H
#define TG_AGGFILE_H

#include <stddef.h>
#include <stdint.h>

#include "diag.h"

#define TG_AGG_FILE "aggregate.tga"
/* Largest file read (the recorder's is bounded by call paths x threads). */
#define TG_AGG_FILE_MAX ((size_t)1 << 31)

struct tg_agg_rnode {
	uint32_t parent;        /* index of the parent node (0: the thread) */
	uint32_t func;          /* index + 1 in tg_aggfile.f */
	uint32_t line;          /* first line (Python), calling line (C) */
	uint64_t count;         /* calls on this path */
	int64_t total;          /* sum of their deltas */
	int64_t max;            /* largest delta */
	int64_t time_us;        /* sum of their durations */
};

struct tg_agg_rbucket {
	int64_t t_us;           /* start of the bucket (Unix time, us) */
	int64_t min, max;       /* the thread's memory in it */
};

struct tg_agg_rthread {
	char *base;             /* file base name */
	unsigned long native_id;
	uint64_t dropped;       /* calls not counted (the recorder's tables full) */
	uint64_t folded;        /* ended threads folded into this entry (0: a thread) */
	struct tg_agg_rnode *nodes; /* nodes[0]: the thread itself (no function) */
	size_t n_nodes, nodes_alloc;
	int64_t width_us;       /* bucket width (0: no curve) */
	struct tg_agg_rbucket *b;
	size_t nb, b_alloc;
};

struct tg_agg_rfunc {
	int is_c;
	char *file, *func;      /* escaped, as in the text dumps */
};

struct tg_aggfile {
	char *path;             /* the file read (owned) */
	int version;            /* 1 or 2 (2: folded entries) */
	int64_t start_us, end_us; /* the run's start, the state's time */
	char memory[16];        /* "thread", "process" or "rss" */
	struct tg_agg_rthread *t;
	size_t nt, t_alloc;
	struct tg_agg_rfunc *f;
	size_t nf, f_alloc;
};

/* Parses LEN bytes of BUF (named PATH in messages) into A.  0, or -1 with
 * d->msg set; A needs tg_aggfile_release either way. */
int tg_aggfile_parse(struct tg_aggfile *a, const char *path, const char *buf, size_t len,
		     struct tg_diag *d);
/* Reads and parses PATH (a file, or a run directory holding aggregate.tga). */
int tg_aggfile_load(struct tg_aggfile *a, const char *path, struct tg_diag *d);
void tg_aggfile_release(struct tg_aggfile *a);

#include <stdio.h>
/* Writes A's summary to OUT: the run's span, then per thread its calls, call
 * paths and memory range, and its TOP call paths by total delta.  0 or EOF. */
int tg_aggfile_summary(FILE *out, const struct tg_aggfile *a, size_t top);
/* Whether PATH is an aggregate run (a directory holding aggregate.tga, or the
 * file itself). */
int tg_aggfile_is_run(const char *path);

#endif
