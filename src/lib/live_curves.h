/*
 * live_curves.h - the figures of threadgraph live for a sampled run
 * (mode="sampled"), which writes no capture: each thread's memory curve, the
 * `<thread>.mem` readings `TIME#<thread memory>:0:sampled=>BYTES` it appends
 * as it goes (docs/formats.md), read incrementally: a reading reads only what
 * the files gained since the previous one, so that watching a run of hours
 * costs what it adds, not its length.
 *
 * A thread's NOW is its latest reading: exact at that moment (the bytes it
 * allocated minus the bytes it freed since enable()), as old as that
 * reading (a thread gets one per sample, about one per sample_bytes it
 * allocates: a thread that only frees, or idles, keeps its last one); its
 * PEAK the highest reading; the view shows each reading's age (none in a run
 * without timestamps: runinfo.json's "timestamps" false).  The figures go
 * into a struct tg_live (live.h) so that one view draws both kinds of run.
 */
#ifndef TG_LIVE_CURVES_H
#define TG_LIVE_CURVES_H

#include <stdint.h>
#include <sys/types.h>

#include "diag.h"
#include "live.h"

/* One thread's .mem file, as far as it was read. */
struct tg_live_curve {
	char *path;             /* DIR/NAME.mem (owned) */
	char *name;             /* the thread's name (owned): runinfo.json's, else
				 * the file's base name */
	off_t off;              /* bytes read: up to the end of the last whole line */
	unsigned long lineno;   /* lines read */
	int64_t now, peak;      /* latest and highest reading, bytes */
	int64_t last_us;        /* time of the latest reading (0: none yet) */
	unsigned long readings; /* its readings so far */
};

struct tg_live_curves {
	struct tg_live_curve *v;  /* in the order they were found */
	size_t n, alloc;
};

void tg_live_curves_init(struct tg_live_curves *c);
void tg_live_curves_release(struct tg_live_curves *c);

struct tg_run_threads;
/* Whether a run directory whose runinfo.json RI holds (tg_run_threads_read) is
 * a sampled run's: it says mode "sampled" (the recorder writes it at enable()). */
int tg_live_curves_is_run(const struct tg_run_threads *ri);

/*
 * Reads what the .mem files of DIR gained since the previous reading (a file
 * that shrank is read again from its start) and fills LV: a thread per file,
 * its change against LV's previous reading, the run's pid and whether it
 * ended (runinfo.json).  Returns 0, or -1 with d->msg set (a file that cannot
 * be read, a line that is not a sampled reading: named by file and line); LV
 * then keeps its previous figures.
 */
int tg_live_curves_read(struct tg_live *lv, struct tg_live_curves *c, const char *dir,
			struct tg_diag *d);

#endif
