/*
 * peaks_out.h - the peak list as text (tab-separated) or JSON.
 */
#ifndef TG_PEAKS_OUT_H
#define TG_PEAKS_OUT_H

#include <stdio.h>

#include "dumpfile.h"
#include "peaks.h"

/*
 * One line per peak: N TIME THREAD DELTA MEMFILE LINE FILE:LINE:FUNCTION, tab
 * separated, dump text with control bytes as \xHH.  TIME is the dump's text, or
 * the event index without timestamps.  files are indexed by peak.thread.
 */
int tg_peaks_write_text(FILE *f, const struct tg_peaks *p, const struct tg_dumpfile *files,
			int has_time);

/*
 * A JSON array of {index, time, thread, site, file, line, function, delta,
 * mem_file, mem_line}; time is null without timestamps.  Returns 0 or EOF.
 */
int tg_peaks_write_json(FILE *f, const struct tg_peaks *p, const struct tg_dumpfile *files,
			int has_time);

/* As tg_peaks_write_json, each object with "phase": the name of the
 * innermost phase of M at the peak's time, or null (M may be NULL). */
struct tg_marks;
int tg_peaks_write_json_phases(FILE *f, const struct tg_peaks *p,
			       const struct tg_dumpfile *files, int has_time,
			       const struct tg_marks *m);

/* Writes s as a JSON string (quotes included); invalid UTF-8 becomes U+FFFD,
 * and the terminal-unsafe sequences (tg_unsafe_seq) \u escapes. */
int tg_json_string(FILE *f, const char *s, size_t len);

#endif
