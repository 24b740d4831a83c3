/*
 * gnuplot.c - script quoting, terminal table, running gnuplot as a child.
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
#include "tg_format.h"

struct gp_terminal {
	const char *name;  /* --terminal value and file extension */
	const char *gp;    /* gnuplot terminal */
	int inches;        /* size given in inches (pixels / 96) */
};

static const struct gp_terminal gp_terminals[] = {
	{ "svg", "svg", 0 },
	{ "png", "pngcairo", 0 },
	{ "pdf", "pdfcairo", 1 },
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

int tg_gp_quote(FILE *f, const char *s, size_t len)
{
	if (putc('\'', f) == EOF)
		return EOF;
	for (size_t i = 0; i < len; i++) {
		int c = (unsigned char)s[i];
		if (TG_NEEDS_ESCAPE(c))
			c = '?';
		if (c == '\'' && putc('\'', f) == EOF)
			return EOF;
		if (putc(c, f) == EOF)
			return EOF;
	}
	return putc('\'', f) == EOF ? EOF : 0;
}

void tg_gp_graph_name(char *buf, size_t n, const struct tg_plot_opts *o, const char *name)
{
	snprintf(buf, n, "%s.%s", name, o->terminal);
}

int tg_gp_preamble(FILE *f, const struct tg_plot_opts *o, const char *name)
{
	const struct gp_terminal *t = gp_terminal_find(o->terminal);
	char graph[256];

	if (!t)
		t = &gp_terminals[0];
	tg_gp_graph_name(graph, sizeof(graph), o, name);
	fprintf(f, "# threadgraph %s: rerun with `gnuplot %s.gp` in this directory\n", name,
		name);
	fprintf(f, "if (!exists(\"outfile\")) outfile = ");
	tg_gp_quote(f, graph, strlen(graph));
	fputc('\n', f);
	if (t->inches)
		fprintf(f, "set terminal %s size %.2fin,%.2fin\n", t->gp, o->width / 96.0,
			o->height / 96.0);
	else
		fprintf(f, "set terminal %s size %d,%d\n", t->gp, o->width, o->height);
	fprintf(f, "set termoption noenhanced\n");
	fprintf(f, "set output outfile\n");
	return ferror(f) ? EOF : 0;
}

int tg_gnuplot_run(const char *dir, const char *script, const char *outfile,
		   struct tg_diag *d)
{
	const char *prog = getenv("GNUPLOT");
	char setout[512];
	int pfd[2], status, child_errno = 0;
	pid_t pid;
	ssize_t n;

	if (!prog || !*prog)
		prog = "gnuplot";
	/* outfile is our own temporary name: no quote can be in it */
	snprintf(setout, sizeof(setout), "outfile='%s'", outfile);
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return tg_error(d, "unable to run gnuplot: %s", strerror(errno));
	pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return tg_error(d, "unable to run gnuplot: %s", strerror(errno));
	}
	if (pid == 0) {
		char *argv[] = { (char *)prog, "-e", setout, (char *)script, NULL };
		int fd = open("/dev/null", O_RDONLY);
		if (fd >= 0) {
			dup2(fd, 0);
			close(fd);
		}
		if (chdir(dir) == 0)
			execvp(prog, argv);
		child_errno = errno;
		if (write(pfd[1], &child_errno, sizeof(child_errno)) < 0)
			_exit(127);
		_exit(127);
	}
	close(pfd[1]);
	do
		n = read(pfd[0], &child_errno, sizeof(child_errno));
	while (n < 0 && errno == EINTR);
	close(pfd[0]);
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

int tg_plot_finish(const struct tg_plot_opts *o, const char *name, struct tg_aout *script,
		   struct tg_aout *legend, struct tg_diag *d)
{
	char graph[256], script_name[256];
	struct tg_aout out;
	struct stat st;
	const char *tmpbase;
	int ret = -1;

	if (tg_aout_commit(script, d) < 0) {
		tg_aout_abort(script);
		goto abort_legend;
	}
	tg_aout_release(script);
	if (o->script_only) {
		ret = legend ? tg_aout_commit(legend, d) : 0;
		goto release_legend;
	}
	tg_gp_graph_name(graph, sizeof(graph), o, name);
	snprintf(script_name, sizeof(script_name), "%s.gp", name);
	if (tg_aout_names(&out, o->dir, graph, d) < 0)
		goto abort_legend;
	tmpbase = strrchr(out.tmp, '/') + 1;
	unlink(out.tmp);
	if (tg_gnuplot_run(o->dir, script_name, tmpbase, d) < 0)
		goto abort_out;
	if (stat(out.tmp, &st) < 0 || st.st_size == 0) {
		tg_error(d, "gnuplot wrote no graph ('%s')", out.tmp);
		goto abort_out;
	}
	if (tg_aout_commit(&out, d) < 0)
		goto abort_out;
	tg_aout_release(&out);
	ret = legend ? tg_aout_commit(legend, d) : 0;
	goto release_legend;

abort_out:
	tg_aout_abort(&out);
abort_legend:
	if (legend)
		tg_aout_abort(legend);
	return -1;
release_legend:
	if (legend) {
		if (ret < 0)
			tg_aout_abort(legend);
		else
			tg_aout_release(legend);
	}
	return ret;
}
