/*
 * snapshot.h - heap snapshots (snapshot-<N>-<label>[.gz]) and the accounting
 * summary (summary.txt[.gz]) written by the recorder's allocation accounting;
 * formats in docs/formats.md ("Allocation accounting") and docs/accounting.md.
 *
 * Snapshot, version 2: '#' header lines ("# key: value", "# thread: IX BASE"),
 * then one line per calling-context node, parents first:
 *   ID PARENT THREAD LIVE_BYTES LIVE_COUNT TOTAL_BYTES TOTAL_COUNT CALL
 * (PARENT and THREAD may be "-").  Version 1 (read too): one line per site,
 *   LIVE_BYTES LIVE_COUNT TOTAL_BYTES TOTAL_COUNT SITE
 * read as a node without parent or thread whose CALL is the whole SITE.
 * CALL and SITE are the rest of the line (they may contain spaces).
 *
 * Summary: tab-separated lines
 *   process KEY VALUE | thread KEY VALUE NAME | window KEY VALUE NAME
 *   hist alloc|free BIN COUNT process|"thread NAME"
 */
#ifndef TG_SNAPSHOT_H
#define TG_SNAPSHOT_H

#include "tg_snapshot.h"  /* the formats' spellings, shared with the writers */

#include <stddef.h>
#include <stdint.h>

#include "diag.h"

/* A calling-context node as read (version 1: a whole site). */
struct tg_snap_node {
	int64_t live_bytes, live_count, total_bytes, total_count;
	uint64_t id;             /* as in the file; strictly increasing */
	size_t parent;           /* index of the parent node, or TG_SNAP_NONE */
	size_t thread;           /* index in threads[], or TG_SNAP_NONE */
	char *call;              /* owned, NUL-terminated */
};
#define TG_SNAP_NONE ((size_t)-1)

/* A site as printed: a thread and a calling context cut to some depth; the
 * nodes that print the same are summed into one. */
struct tg_snap_site {
	int64_t live_bytes, live_count, total_bytes, total_count;
	const char *thread;      /* points into the snapshot, or "-" / "*" */
	char *site;              /* owned: innermost call first, "<-" separated */
};

struct tg_snapshot {
	char *path;              /* the file read (owned) */
	char *label;             /* "# label:" or NULL (owned) */
	int version;             /* 1 or 2 */
	char *run;               /* "PID RUN_START" (version 2) or NULL (owned) */
	int64_t live_bytes;      /* sums over the nodes */
	int64_t total_bytes;
	struct tg_snap_node *nodes;
	size_t n_nodes, nodes_cap;
	char **threads;          /* base names by index (owned) */
	uint64_t *thread_ix;     /* their IX in the file */
	size_t n_threads;
	struct tg_snap_site *sites;  /* made by tg_snapshot_group */
	size_t n, cap;
	int merged;              /* whether the sites merge the threads */
	int64_t sampled;         /* "# sampled: N": counters are estimates from one
				  * sample per N bytes on average; 0 when exact */
};

enum tg_snap_key { TG_SNAP_LIVE, TG_SNAP_TOTAL };

/* Frames of context a site shows unless told otherwise. */
#define TG_SNAP_DEPTH_DEFAULT 5

/*
 * Reads PATH (plain or gzip) into S, which needs no init.  PATH may also be a
 * run directory: its final snapshot (snapshot-N-final[.gz], the highest N) or,
 * without one, its highest-numbered snapshot is read.  The sites are then
 * grouped per thread at TG_SNAP_DEPTH_DEFAULT frames.  Returns 0, or -1 with
 * d->msg set and S released.  Malformed lines (bad numbers, an unknown parent or
 * thread, ids out of order) go through tg_malformed() and are left out.
 */
int tg_snapshot_read(struct tg_snapshot *s, const char *path, struct tg_diag *d);
/*
 * Rebuilds S's sites from its nodes: each node's thread (or "*" with
 * MERGE_THREADS; "-" when unknown) and its context of at most DEPTH calls
 * (0: all), innermost first; sites that print the same are summed.  The sites
 * are left in no particular order.  Returns 0 or -1 (out of memory, d->msg set).
 */
int tg_snapshot_group(struct tg_snapshot *s, unsigned depth, int merge_threads,
		      struct tg_diag *d);
/* Whether A and B come from one run (version 2, same pid and start). */
int tg_snapshot_same_run(const struct tg_snapshot *a, const struct tg_snapshot *b);
/* Frees everything S holds; safe twice. */
void tg_snapshot_release(struct tg_snapshot *s);
/* Sorts the sites by KEY's bytes, largest first (ties: count, then site). */
void tg_snapshot_sort(struct tg_snapshot *s, enum tg_snap_key key);

/* One site's growth from A to B. */
struct tg_snap_delta {
	int64_t live_bytes, live_count;   /* B - A */
	int64_t total_bytes, total_count; /* B - A */
	int64_t base_live, live;          /* A's and B's live bytes */
	const char *thread;               /* points into A or B */
	const char *site;                 /* points into A or B */
};

/*
 * Growth per site (thread and context) from BASE to S (sites in either), sorted by live-byte growth,
 * largest first; sites with no change at all are left out.  *OUT is malloc'ed
 * (free it), *N its length.  Returns 0 or -1 (out of memory, d->msg set).
 */
int tg_snapshot_diff(const struct tg_snapshot *base, const struct tg_snapshot *s,
		     struct tg_snap_delta **out, size_t *n, struct tg_diag *d);

/* The summary's figures, in the order printed (TG_SUM_FIGURES_INIT). */
extern const char *const tg_sum_figures[TG_SUM_NFIG];

struct tg_sum_entity {
	char *name;                       /* thread or window name (owned); NULL: process */
	int64_t fig[TG_SUM_NFIG];
	int64_t hist_alloc[TG_SUM_BINS];
	int64_t hist_free[TG_SUM_BINS];
	int has_live_at_end;              /* thread: live_at_end set */
	int64_t live_at_end;              /* thread: what it allocated that is still live */
};

/* Bytes and blocks allocated in one thread and freed in another. */
struct tg_sum_pair {
	char *allocated_in, *freed_in;    /* thread names (owned) */
	int64_t bytes, blocks;
};

struct tg_summary {
	struct tg_sum_entity process;
	struct tg_sum_entity *threads;
	size_t n_threads;
	struct tg_sum_entity *windows;
	size_t n_windows;
	int has_freed_by;                 /* cross-thread frees were counted */
	int64_t freed_by_lost;            /* bytes of pairs the recorder could not keep */
	struct tg_sum_pair *pairs;        /* in the file's order (largest first) */
	size_t n_pairs;
};

/*
 * Reads DIR's summary.txt (or summary.txt.gz), or PATH itself when it is a
 * file, into S (needs no init).  Returns 0, or -1 with d->msg set.
 */
int tg_summary_read(struct tg_summary *s, const char *path, struct tg_diag *d);
void tg_summary_release(struct tg_summary *s);

/* Which of a run directory's snapshots tg_snapshot_find returns. */
enum tg_snap_pick {
	TG_SNAP_PICK_LAST,  /* the highest-numbered "-final" one, else the highest-numbered */
	TG_SNAP_PICK_PEAK,  /* the highest-numbered live-at-peak one ("-peak") */
};

/*
 * The run directory DIR's snapshot file chosen by PICK (".gz" or not; ".tmp"
 * files being written are skipped): a malloc'ed path, or NULL with d->msg set
 * (none there, DIR unreadable, out of memory).
 */
char *tg_snapshot_find(const char *dir, enum tg_snap_pick pick, struct tg_diag *d);

/*
 * Finds DIR/NAME or DIR/NAME.gz; returns a malloc'ed path or NULL (d->msg set).
 * A PATH that is not a directory is returned as is (copied).
 */
char *tg_acct_file(const char *path, const char *name, struct tg_diag *d);

#endif
