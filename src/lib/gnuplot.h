/*
 * gnuplot.h - writing gnuplot scripts safely and running gnuplot.
 *
 * Dump text (thread, file and function names) is untrusted.  gnuplot expands
 * backquotes inside double-quoted strings and on the command line, and has
 * system(); so dump text only ever reaches a script through tg_gp_quote(), as a
 * single-quoted string (no expansion; a quote is doubled) with control bytes
 * replaced, or through data files, which gnuplot never executes.  Numbers plotted
 * come from data files too.  Each script takes its output file from the variable
 * `outfile` (set with -e by tg_plot_finish), defaulting to the final name, so the
 * kept script can be rerun by hand with `gnuplot NAME.gp`.
 */
#ifndef TG_GNUPLOT_H
#define TG_GNUPLOT_H

#include <stddef.h>
#include <stdio.h>

#include "atomic_out.h"
#include "diag.h"

struct tg_plot_opts {
	const char *dir;      /* output directory */
	const char *terminal; /* "svg", "png" or "pdf" */
	int width, height;    /* pixels (pdf: converted at 96 per inch) */
	int script_only;      /* write script and data, run no gnuplot */
};

/* Non-zero when name is a terminal tg_gp_preamble() knows. */
int tg_gp_terminal_known(const char *name);

/* Writes s as a single-quoted gnuplot string literal; returns 0 or EOF. */
int tg_gp_quote(FILE *f, const char *s, size_t len);

/*
 * Writes the script's first lines: the outfile default (NAME.EXT), the terminal
 * with its size, noenhanced text (no markup from names), set output.  0 or EOF.
 */
int tg_gp_preamble(FILE *f, const struct tg_plot_opts *o, const char *name);

/* Writes the graph's file name (NAME.EXT) into buf of size n. */
void tg_gp_graph_name(char *buf, size_t n, const struct tg_plot_opts *o, const char *name);

/*
 * Runs gnuplot ($GNUPLOT, else gnuplot from PATH) in dir on script (a name in
 * dir) with outfile set to outfile (a name in dir).  Returns 0 when gnuplot ran
 * and exited 0, else -1 with d->msg saying why (not found, exit status, signal).
 */
int tg_gnuplot_run(const char *dir, const char *script, const char *outfile,
		   struct tg_diag *d);

/*
 * Finishes a graph: commits the script (already written into *script), then,
 * unless o->script_only, runs gnuplot into a temporary graph file and renames it
 * to NAME.EXT.  The legend (may be NULL) is committed only when the graph was
 * made (or with script_only); on failure it is removed and no graph is left.
 * Data files must be committed before.  Returns 0 or -1 (d->msg set).
 */
int tg_plot_finish(const struct tg_plot_opts *o, const char *name, struct tg_aout *script,
		   struct tg_aout *legend, struct tg_diag *d);

#endif
