/*
 * runinfo.h - the threads of a run's runinfo.json (docs/formats.md): which
 * native thread id a thread's dump file belongs to, for what is kept by native
 * id (gc.txt), and the run's pid, end and mode (threadgraph live on a sampled
 * run).  Only those keys are read; a JSON reader of just what the recorder
 * writes (json.dump), bounded, that refuses anything else.
 */
#ifndef TG_RUNINFO_H
#define TG_RUNINFO_H

#include <stddef.h>

#include "diag.h"

struct tg_run_thread {
	char *name;                   /* threading name (UTF-8, owned) */
	char *mem;                    /* its .mem file's base name, or NULL (a capture) */
	unsigned long long native_id;
	long long open_at_start;      /* calls open where its dumps begin (an export of
				       * a capture's kept segments); -1: not given */
	int has_held;                 /* "held_at_start" given (such an export) */
	long long *held;              /* its memory there by depth (owned), n_held */
	size_t n_held;
};

struct tg_run_threads {
	struct tg_run_thread *v;
	size_t n, alloc;
	/* The run's own keys, for threadgraph live on a text run: */
	unsigned long long pid;       /* "pid" (0 when not known) */
	int ended;                    /* "end_time" is a number: the run ended */
	int has_end;                  /* "end_time" is there (a number or null) */
	long long end_us;             /* that number in microseconds since the epoch
					 (0 when not known or not a time) */
	char *mode;                   /* "mode" ("full", "sampled"; NULL before
					 the key existed), owned */
	int has_capture;              /* "capture" names a binary capture */
	int aggregate;                /* "aggregate" is true: aggregate.tga */
	int no_time;                  /* "timestamps" is false: no TIME# */
	long long kept_from_us;       /* "kept_from" (an export of a capture's kept
				       * segments): where they begin, in microseconds
				       * since the epoch; 0 when not given */
	long long start_us;           /* "start_time": the run's start, microseconds
				       * since the epoch; 0 when not given */
	unsigned seg_first, seg_last; /* "segments_kept": [FIRST, LAST], the segments
				       * an export of a capture of limited size was
				       * written from; 0 when not given */
	int accounting;               /* "accounting": 1 true (the run counted
				       * allocations), 0 false, -1 not given (a file
				       * written before the key) */
	unsigned long long accounting_in; /* "accounting_in": a forked child of a
				       * run with accounting, the pid whose run does
				       * it (the child's does none); 0 when null or
				       * not given */
	unsigned long long dropped;   /* "dropped": records the recorder could not
				       * write (0: none, or not given) */
	int native;                   /* "native": 1 true (native memory counted),
				       * 0 false, -1 not given */
};

/* runinfo.json is read up to this size (a larger one names a huge argv). */
#define TG_RUNINFO_MAX (16u << 20)

void tg_run_threads_init(struct tg_run_threads *t);
void tg_run_threads_release(struct tg_run_threads *t);

/*
 * Reads DIR/runinfo.json's threads (and pid, end_time, mode, kept_from) into t.  No file, or one that is not the
 * JSON the recorder writes, gives no threads (the caller then knows none).
 * Returns 0, or -1 only when out of memory (d->msg set).
 */
int tg_run_threads_read(struct tg_run_threads *t, const char *dir, struct tg_diag *d);

/*
 * The native id of the thread whose dump is named BASE (a .mem file's base name,
 * as dumpfile's thread): by its "mem" entry, else by its name.  Returns 1 with
 * *id set, or 0 when no single thread matches.
 */
int tg_run_threads_id(const struct tg_run_threads *t, const char *base,
		      unsigned long long *id);
/*
 * What DIR/runinfo.json says of the run's end, for the commands that read a
 * file written at the end (the accounting summary, the final snapshot): 1 the
 * run ended ("end_time" a time), 0 it has not ("end_time" null: still
 * running, or killed or crashed), -1 not known (no runinfo.json, one without
 * the key, or no memory to read it).  *SAMPLED, if SAMPLED is not NULL: its
 * "mode" is "sampled".
 */
int tg_run_end_state(const char *dir, int *sampled);
/*
 * Why DIR has no NAME (an accounting file: "summary.txt", "snapshot") when its
 * runinfo.json says: a forked child of a run with accounting ("accounting_in":
 * the message names the process that has it, and its run when it is DIR's
 * sibling), or a run made without accounting ("accounting": false).  Returns 1
 * with d->msg set, or 0 when runinfo.json says neither (the caller's message
 * stands).
 */
int tg_run_no_accounting(const char *dir, const char *name, struct tg_diag *d);

/*
 * DIR/runinfo.json's "dropped": the records the recorder could not write (a
 * sink 64 MiB behind, a write error, out of memory); 0 when none, or not known.
 * In a text run each .mem and .stack line is dropped on its own, so past a
 * thread's first drop its k-th .mem line need not be the return of the k-th
 * call to close: what pairs them is then off (TG_RUN_DROPPED_PAIRING).
 */
unsigned long long tg_run_dropped(const char *dir);

/* What a run's dropped records do to text dumps, said by the commands that
 * read them (after "the recorder dropped N records ...: "). */
#define TG_RUN_DROPPED_PAIRING "lines are missing from its text dumps, and past a " \
	"thread's first drop its .mem and .stack lines may not pair (a call paired with " \
	"the return of another)"

/* The words of a message on a run that has not ended (tg_run_end_state 0). */
#define TG_RUN_UNENDED "the run has not ended (runinfo.json has no end time: it is still " \
	"running, or was killed or crashed)"

/* The thread whose dump is named BASE, matched as tg_run_threads_id does, or NULL. */
const struct tg_run_thread *tg_run_threads_find(const struct tg_run_threads *t,
						const char *base);

#endif
