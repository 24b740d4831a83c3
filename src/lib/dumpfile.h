/*
 * dumpfile.h - what a dump path holds, from its name.
 *
 * The base name before the last '.' is the thread's name; the base name
 * "process" is the process file.  A trailing ".gz" is ignored for naming.
 */
#ifndef TG_DUMPFILE_H
#define TG_DUMPFILE_H

enum tg_dump_kind {
	TG_DUMP_MEM,     /* <Thread>.mem, or any other thread file */
	TG_DUMP_STACK,   /* <Thread>.stack */
	TG_DUMP_PROCESS, /* process.mem (any suffix with base name "process") */
};

struct tg_capture;
struct tg_cap_thread;
struct tg_aggfile;
struct tg_agg_rthread;

struct tg_dumpfile {
	const char *path;       /* as given (not owned) */
	char *thread;           /* thread name (owned), "process" for the process file */
	enum tg_dump_kind kind;
	/* a file of a binary capture (dumpset.h): read from cap, not from path, which
	 * names the file `threadgraph export` writes; NULL for a text dump */
	const struct tg_capture *cap;
	const struct tg_cap_thread *cap_thread; /* its thread (NULL: process.mem) */
	/* a thread's memory curve in an aggregate run (dumpset.h): its buckets
	 * read as .mem records, path the .mem file it stands for; NULL otherwise */
	const struct tg_aggfile *agg;
	const struct tg_agg_rthread *agg_thread;
	/* records the recorder dropped in this text dump's run (its runinfo.json,
	 * tg_run_dropped), set by the caller; 0: none known.  A .stack that does not
	 * pair with the .mem is then said to be the drops', not damage */
	unsigned long long run_dropped;
};

/* Fills df from path (a text dump: cap NULL); returns 0, or -1 when out of memory. */
int tg_dumpfile_init(struct tg_dumpfile *df, const char *path);
/* Frees df->thread. */
void tg_dumpfile_release(struct tg_dumpfile *df);

#endif
