/*
 * live.h - the figures of threadgraph live: each thread's memory now, its
 * change since the previous reading, its peak and its largest single call,
 * the process's memory, and the functions whose calls grew memory most, read
 * from a binary capture that may still be written (docs/attach.md).
 *
 * A reading (tg_live_read) opens the capture as it is on disk now (its last
 * chunk may be cut short: used up to its last complete record) and decodes only
 * what it gained since the previous reading: LV keeps, between readings, where
 * each stream's decoding stopped and its state there (open calls, the running
 * sums, peak, largest, returns, each function's net and calls), and a chunk
 * cut short at the previous reading is read again from its record cut short.
 * A reading therefore costs the records appended since the previous one, plus
 * the walk of the capture's chunk headers and definitions that opening it
 * takes (about 1/3000 of its bytes); the figures are those a first reading of
 * the same bytes gives.  What cannot go on (another run in the file, a file
 * replaced or shorter than read, a function index that moved, records dropped
 * with their segments before any reading decoded them) is read from the start
 * instead, for that reading (tg_live.restarts counts them): never a wrong
 * figure.  Of a capture of limited size whose segments are dropped as it
 * grows, the records a reading decoded stay counted when their segment is
 * dropped: peak, largest, returns and the functions are of everything the
 * readings decoded since the first one (which began at the segments then kept),
 * and "now" is the same either way; a thread that ended in a dropped segment
 * leaves the view, as it leaves the segments kept.
 * The previous reading's figures give the changes.
 * The view that draws them is the CLI's (src/cli/cmd_live.c): nothing here
 * knows a terminal.
 *
 * A thread's memory "now" is the sum of the deltas of its recorded calls that
 * returned and that no returned call encloses: what its completed calls
 * allocated and did not free, the calls completed inside calls still open
 * included (a worker's loop that has not returned shows its iterations; exact
 * per thread in memory mode "thread").  Once every call has returned it is the
 * sum of its outermost calls' deltas.  Its peak is the highest that sum
 * reached; "largest" is its largest single return delta, the figure `threadgraph
 * peaks` lists first for that thread.
 */
#ifndef TG_LIVE_H
#define TG_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include "diag.h"

/* One thread's figures. */
struct tg_live_thread {
	char *name;             /* threading name (owned) */
	uint32_t stream;        /* capture stream id: pairs a thread across readings */
	int64_t now;            /* bytes: sum of its unenclosed returns' deltas */
	int64_t change;         /* now - now at the previous reading (0 the first time) */
	int64_t peak;           /* highest now so far */
	int64_t largest;        /* largest single return delta (0 before any) */
	unsigned long returns;  /* returns decoded */
	int ended;              /* its stream has a final count (the run ended) */
	int64_t last_us;        /* a sampled run's curve: its latest reading's time
				 * (0: none yet; live_curves.h) */
};

/* One function's figures: the net bytes of its calls (inclusive of callees),
 * in all threads or in the thread of tg_live.focus. */
struct tg_live_func {
	const char *file, *func; /* escaped as in .mem lines; point into names (owned) */
	int64_t net;            /* sum of the deltas of its returns */
	unsigned long calls;    /* returns of it */
	uint64_t line;          /* its first line (Python: co_firstlineno; C: 0) */
};

struct tg_live_state;

struct tg_live {
	struct tg_live_thread *threads;  /* in attach order */
	size_t n_threads;
	struct tg_live_func *funcs;      /* largest net first, at most TG_LIVE_FUNCS */
	size_t n_funcs;
	char *names;                     /* texts of funcs (owned) */
	int64_t process_bytes;           /* last process sample (0 without samples) */
	int has_process;                 /* the capture has process samples */
	unsigned memory_mode;            /* the capture's (0 thread, 1 process, 2 rss) */
	int ended;                       /* the run ended (END chunk) */
	int curves;                      /* figures from a sampled run's curves
					  * (live_curves.h): returns are readings,
					  * no funcs, largest unused */
	int timed;                       /* its records carry times (else last_us
					  * is start_us) */
	uint32_t pid;                    /* the recorded process */
	uint32_t seg_first, seg_last;    /* a capture of limited size: the segments
					  * read (seg_first > 1: the ones before were
					  * dropped, and the figures but "now" are of
					  * the records kept); 0 for one file */
	int64_t kept_from_us;            /* when the oldest kept segment began
					  * (seg_first > 1; capture_read.h) */
	int64_t end_us;                  /* the run's end (its END chunk), when ended */
	int64_t start_us, last_us;       /* first record's time base, latest record */
	unsigned long readings;          /* tg_live_read calls that succeeded */
	uint32_t focus;                  /* set by the caller: funcs of this stream's
					  * thread only (0: of all threads) */
	unsigned long restarts;          /* readings of a capture that could not go on
					  * from the readings before (read from its start) */
	struct tg_live_state *state;     /* the decoding state between readings of a
					  * capture (live.c; owned) */
};

/* Functions kept per reading (the view shows fewer). */
#define TG_LIVE_FUNCS 64

/* A function's texts, for tg_live_keep_funcs. */
struct tg_live_name {
	const char *file, *func;
	size_t file_len, func_len;
};

/*
 * For the readers of each kind of run (live.c, live_agg.c): takes ALL[0, N)
 * (malloc'ed; each one's .file holds the reader's index of the function, which
 * NAME(CTX, index, ...) gives the texts of) and keeps in LV the TG_LIVE_FUNCS
 * of largest net, their texts copied.  0, or -1 when out of memory (ALL freed).
 */
int tg_live_keep_funcs(struct tg_live *lv, struct tg_live_func *all, size_t n,
		       void (*name)(const void *ctx, size_t ix, struct tg_live_name *out),
		       const void *ctx, struct tg_diag *d);

void tg_live_init(struct tg_live *lv);
void tg_live_release(struct tg_live *lv);
/*
 * Reads the capture file at PATH as it is now into LV, decoding what it gained
 * since LV's previous reading (of the same capture; all of it the first time),
 * computing each thread's change against that reading.  Returns 0, or -1 with
 * d->msg set (the file is not a capture yet, unreadable, corrupt); LV keeps its
 * previous figures on failure, and its next reading decodes the capture from
 * its start.
 */
int tg_live_read(struct tg_live *lv, const char *path, struct tg_diag *d);

#endif
