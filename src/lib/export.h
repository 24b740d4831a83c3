/*
 * export.h - a binary capture back to the text dumps (threadgraph export).
 *
 * Writes, byte for byte, the files the recorder writes in text mode for the
 * same run (docs/formats.md): <base>.mem for each thread when the capture
 * recorded memory, <base>.stack when it recorded stacks, process.mem when it
 * sampled the process.  A .mem line is the k-th RETURN of the thread's stream,
 * a .stack line its k-th CALL, so record numbers are line numbers.  Of a
 * capture of the segments kept (a size limit), runinfo.json too: the calls
 * open where each thread's files begin, for the pairing (docs/formats.md).
 */
#ifndef TG_EXPORT_H
#define TG_EXPORT_H

#include <stdint.h>

#include "capture_read.h"
#include "diag.h"

struct tg_export_stats {
	unsigned long files;     /* files written */
	uint64_t records;        /* lines written, all files */
	uint64_t dropped;        /* records the recorder reported lost (in the streams) */
	int runinfo_kept;        /* the export's runinfo.json (threads' ids and,
				  * of kept segments, the calls open where each
				  * thread begins) was not written: dir had one */
};

/*
 * Writes the text files of cap into dir, creating dir (and its parents) if
 * missing.  Never overwrites: if any of the files exists, fails before writing
 * anything; files are created O_EXCL|O_NOFOLLOW with mode 0644.  max_bytes (0:
 * no limit) bounds the text written, all files: a .stack line is indented by
 * its depth, so deep calls make text quadratic in the records.  Returns 0, or
 * -1 with d->msg set (a corrupt stream, a write error, max_bytes passed),
 * having removed the files it created.
 */
int tg_export_run(const struct tg_capture *cap, const char *dir, uint64_t max_bytes,
		  struct tg_export_stats *st, struct tg_diag *d);

/* The default of max_bytes for cap: 1 GiB plus 100 times the capture's size
 * (a text run is some 30 times its capture). */
uint64_t tg_export_default_max(const struct tg_capture *cap);

#endif
