/*
 * threads.h - per-thread figures of a run and its cross-thread frees (the
 * threads command): for each thread, what it allocated, freed, its peak and
 * what it allocated that is still live at the end; for each pair of threads,
 * the bytes and blocks allocated in one and freed in the other.
 *
 * With accounting (summary.txt, docs/accounting.md) every figure comes from
 * the recorder's exact counters.  Without it, the dumps give each thread's held
 * memory (held.h): its peak and its level at the end stand in for peak and
 * live_at_end, allocated and freed are unknown, and there are no pairs (a free
 * does not say who allocated the block: that needs accounting's per-block
 * table).
 */
#ifndef TG_THREADS_H
#define TG_THREADS_H

#include <stdint.h>
#include <stdio.h>

#include "diag.h"
#include "dumpfile.h"
#include "memg.h"
#include "snapshot.h"

struct tg_thread_row {
	const char *name;        /* not owned: the summary's or the dump's */
	int has_counts;          /* allocated and freed are known (accounting) */
	int64_t allocated, freed;
	int64_t peak;            /* accounting: highest allocated - freed; else held peak */
	int has_live_at_end;
	int64_t live_at_end;     /* what it allocated that is still live at the end
				  * (without accounting: its held memory at its end) */
};

struct tg_threads {
	int accounting;          /* figures from the summary */
	struct tg_summary sum;   /* accounting: the summary read (owns names, pairs) */
	struct tg_thread_row *v;
	size_t n;
};

/*
 * Fills t from run directory RUN_DIR's accounting summary: 0, 1 when there is
 * none that reads (why in d->msg: then load the dumps), -1 when out of memory.
 */
int tg_threads_load_summary(struct tg_threads *t, const char *run_dir, struct tg_diag *d);
/*
 * Fills t from the held memory of the thread files among files[0..n) (r reports
 * files read or left out; may be NULL).  Returns 0 or -1 (d->msg set; also when
 * no thread has held memory).
 */
int tg_threads_load_dumps(struct tg_threads *t, const struct tg_dumpfile *files, size_t n,
			  const struct tg_memg_report *r, struct tg_diag *d);
void tg_threads_release(struct tg_threads *t);

/* The JSON document {"threads": [...], "freed_by": [...]} (docs/cli.md); a
 * figure that is unknown is null, freed_by is [] when not counted.  0 or EOF. */
int tg_threads_write_json(FILE *f, const struct tg_threads *t);

/* The table for people: one line per thread, then the pairs (or why there are
 * none).  0 or EOF. */
int tg_threads_write_text(FILE *f, const struct tg_threads *t);

#endif
