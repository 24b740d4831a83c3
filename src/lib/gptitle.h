/*
 * gptitle.h - thread names shortened for a graph's key and tic labels.
 *
 * gnuplot sizes the key outside the plot to its longest title: one thread
 * named with 64 characters took 45% of a 1920 px memg and 60% of each report
 * graph.  A graph's titles are therefore at most TG_GP_TITLE_MAX characters: a
 * longer name keeps its head (two thirds) and its tail around "..", as `live`
 * shows names (names differ near their start, "Thread-12 (handler)", or at
 * their end, "pool-worker-17").  Names whose shortened titles would be the
 * same (they differ in the middle: "...-number-003-of-the-pool") keep,
 * instead of the default tail, the end from where they differ, or a window
 * there; any still equal get " #K" (1, 2...) after.  The full names stay in
 * the text outputs (memg.txt, memg-held.txt, interleave.txt).
 */
#ifndef TG_GPTITLE_H
#define TG_GPTITLE_H

#include <stddef.h>

#include "dumpfile.h"

/* The longest title, in characters (UTF-8), before " #K". */
#define TG_GP_TITLE_MAX 32

/*
 * The titles of names[0..n) (names[i] NULL: a series with no title, whose
 * title is NULL), as above, one graph's together.  Returns an array of n
 * titles in one allocation (free() it), or NULL when out of memory.
 */
char **tg_gp_titles(const char *const *names, size_t n);

/* The same for the thread names of files[0..n) with show[i] set (the series
 * with a key entry; the others' titles NULL). */
char **tg_gp_thread_titles(const struct tg_dumpfile *files, size_t n,
			   const unsigned char *show);

#endif
