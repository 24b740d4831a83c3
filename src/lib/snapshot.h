/*
 * snapshot.h - heap snapshots (snapshot-<N>-<label>[.gz]) and the accounting
 * summary (summary.txt[.gz]) written by the recorder's allocation accounting;
 * formats in docs/formats.md ("Allocation accounting") and docs/accounting.md.
 *
 * Snapshot: '#' header lines ("# key: value"), then one line per call site:
 *   LIVE_BYTES LIVE_COUNT TOTAL_BYTES TOTAL_COUNT SITE
 * SITE is the rest of the line (it may contain spaces) and is only used as a key.
 *
 * Summary: tab-separated lines
 *   process KEY VALUE | thread KEY VALUE NAME | window KEY VALUE NAME
 *   hist alloc|free BIN COUNT process|"thread NAME"
 */
#ifndef TG_SNAPSHOT_H
#define TG_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "diag.h"

struct tg_snap_site {
	int64_t live_bytes, live_count, total_bytes, total_count;
	char *site;              /* owned, NUL-terminated */
};

struct tg_snapshot {
	char *path;              /* the file read (owned) */
	char *label;             /* "# label:" or NULL (owned) */
	int64_t live_bytes;      /* sums over the sites */
	int64_t total_bytes;
	struct tg_snap_site *sites;
	size_t n, cap;
};

enum tg_snap_key { TG_SNAP_LIVE, TG_SNAP_TOTAL };

/*
 * Reads PATH (plain or gzip) into S, which needs no init.  PATH may also be a
 * run directory: its final snapshot (snapshot-N-final[.gz], the highest N) or,
 * without one, its highest-numbered snapshot is read.  Returns 0, or -1 with
 * d->msg set and S released.  Malformed site lines go through tg_malformed().
 */
int tg_snapshot_read(struct tg_snapshot *s, const char *path, struct tg_diag *d);
/* Frees everything S holds; safe twice. */
void tg_snapshot_release(struct tg_snapshot *s);
/* Sorts the sites by KEY's bytes, largest first (ties: count, then site). */
void tg_snapshot_sort(struct tg_snapshot *s, enum tg_snap_key key);

/* One site's growth from A to B. */
struct tg_snap_delta {
	int64_t live_bytes, live_count;   /* B - A */
	int64_t total_bytes, total_count; /* B - A */
	int64_t base_live, live;          /* A's and B's live bytes */
	const char *site;                 /* points into A or B */
};

/*
 * Growth per site from BASE to S (sites in either), sorted by live-byte growth,
 * largest first; sites with no change at all are left out.  *OUT is malloc'ed
 * (free it), *N its length.  Returns 0 or -1 (out of memory, d->msg set).
 */
int tg_snapshot_diff(const struct tg_snapshot *base, const struct tg_snapshot *s,
		     struct tg_snap_delta **out, size_t *n, struct tg_diag *d);

/* The summary's figures, in the order printed. */
#define TG_SUM_NFIG 6
extern const char *const tg_sum_figures[TG_SUM_NFIG];
#define TG_SUM_BINS 65

struct tg_sum_entity {
	char *name;                       /* thread or window name (owned); NULL: process */
	int64_t fig[TG_SUM_NFIG];
	int64_t hist_alloc[TG_SUM_BINS];
	int64_t hist_free[TG_SUM_BINS];
};

struct tg_summary {
	struct tg_sum_entity process;
	struct tg_sum_entity *threads;
	size_t n_threads;
	struct tg_sum_entity *windows;
	size_t n_windows;
};

/*
 * Reads DIR's summary.txt (or summary.txt.gz), or PATH itself when it is a
 * file, into S (needs no init).  Returns 0, or -1 with d->msg set.
 */
int tg_summary_read(struct tg_summary *s, const char *path, struct tg_diag *d);
void tg_summary_release(struct tg_summary *s);

/*
 * Finds DIR/NAME or DIR/NAME.gz; returns a malloc'ed path or NULL (d->msg set).
 * A PATH that is not a directory is returned as is (copied).
 */
char *tg_acct_file(const char *path, const char *name, struct tg_diag *d);

#endif
