/*
 * marks.h - a run's marks.txt (docs/formats.md): the phases and marks the
 * program noted (threadgraph.phase, threadgraph.mark), and the task links
 * behind stitching (which call path submitted each pool or asyncio task, and
 * where its runs are in the worker's records).
 *
 * The file sits beside the dumps (the recorder writes it at disable(), for
 * text dumps and binary captures alike); a run without one has no marks.
 * Names are kept as the file writes them (control characters as \xHH).
 */
#ifndef TG_MARKS_H
#define TG_MARKS_H

#include <stddef.h>
#include <stdint.h>

#include "diag.h"
#include "dumpfile.h"
#include "peaks.h"

#define TG_MARKS_FILENAME "marks.txt"

/* A named interval of one thread. */
struct tg_phase {
	double start, stop;    /* seconds since the epoch; stop is INFINITY while open
				* at the run's end */
	char *thread;          /* file base name, or "-" (a thread not recorded) */
	char *name;
};

/* A named instant of one thread. */
struct tg_mark {
	double t;
	char *thread;
	char *name;
};

/*
 * A thread's place in its records: the open calls right after its CALL number
 * `calls` (the calls-th .stack line), cut to the outermost `depth`.  Of a task,
 * the submitter's calls (the innermost the caller of submit); of a run, the
 * run_task call itself is the innermost, and CALL number `calls`.
 */
struct tg_task_pos {
	uint64_t id;           /* the task */
	char *thread;          /* file base name */
	uint64_t calls;
	unsigned long depth;
	char *label;           /* tasks: the marker frame's text, "[LABEL]"; runs: NULL */
};

struct tg_marks {
	struct tg_phase *phases;
	size_t n_phases;
	struct tg_mark *marks;
	size_t n_marks;
	struct tg_task_pos *tasks, *runs;
	size_t n_tasks, n_runs;
};

/* Empties M. */
void tg_marks_init(struct tg_marks *m);
/* Frees what M holds; safe twice. */
void tg_marks_release(struct tg_marks *m);

/*
 * Reads DIR/marks.txt into M (tg_marks_init'ed): 0 (no such file: M stays
 * empty), or -1 with d->msg set (unreadable; a malformed line in strict mode,
 * otherwise reported through d and skipped).  Lines of a kind it does not know
 * (a later version's) are skipped.
 */
int tg_marks_read(struct tg_marks *m, const char *dir, struct tg_diag *d);

/* As tg_marks_read, for the directory of the first of FILES that has one
 * (a run directory's dumps, a capture's). */
int tg_marks_read_near(struct tg_marks *m, const struct tg_dumpfile *files, size_t n,
		       struct tg_diag *d);

/* The innermost phase at time T (seconds since the epoch): of those whose
 * interval holds T, the one that started last; NULL if none. */
const struct tg_phase *tg_marks_phase_at(const struct tg_marks *m, double t);

/* Whether some phase is called NAME. */
int tg_marks_has_phase(const struct tg_marks *m, const char *name);

/*
 * Copies SRCDIR/NAME, a run's file, to DSTDIR (threadgraph export -o): 1
 * copied, 0 not (SRCDIR has none, DSTDIR is SRCDIR, or DSTDIR has one already:
 * never overwritten), or -1 with d->msg set.  tg_marks_copy: NAME marks.txt.
 */
int tg_run_file_copy(const char *srcdir, const char *dstdir, const char *name,
		     struct tg_diag *d);
int tg_marks_copy(const char *srcdir, const char *dstdir, struct tg_diag *d);

/* Keeps the peaks of P whose innermost phase (at the peak's time: the return
 * of its call) is called NAME, numbers unchanged. */
void tg_marks_keep_peaks(struct tg_peaks *p, const struct tg_marks *m, const char *name);

#endif
