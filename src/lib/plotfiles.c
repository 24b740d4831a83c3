/*
 * plotfiles.c - where a graph is made and how it is put in place.
 *
 * Everything of a graph is made in a private folder, DIR/.NAME-plot-XXXXXX,
 * created by mkdtemp (mode 0700: no other user can enter it, plant a link in it
 * or change a file in it) and reached through a descriptor opened right after:
 * the script, the data files, and the graph gnuplot writes (gnuplot runs in that
 * folder through fchdir, and writes NAME.EXT there).  Nothing gnuplot does can
 * touch DIR, and a link planted in DIR is never followed.
 *
 * What gnuplot wrote is checked before anything is replaced (gnuplot does not
 * report a failed write: on a full disk it exits 0 with a truncated graph): the
 * graph must be a whole file of its terminal's format.  Then, holding an flock
 * on DIR (two runs with the same -o DIR take turns, so their graph, legend and
 * kept folder are never mixed), the graph is renamed to DIR/NAME.EXT (renameat:
 * a symbolic link there is replaced, never followed), the legend committed, and
 * a kept folder renamed to DIR/NAME-plot (an earlier one moved aside and
 * removed).  Any failure before that leaves DIR as it was.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gnuplot.h"

/* A graph larger than this is not read back for its check (no graph we draw
 * comes near). */
#define PF_GRAPH_MAX ((off_t)1 << 30)

int tg_plot_files_open(struct tg_plot_files *pf, const struct tg_plot_opts *o,
		       const char *name, struct tg_diag *d)
{
	struct stat st;

	memset(pf, 0, sizeof(*pf));
	pf->fd = pf->outfd = -1;
	pf->kept = !tg_plot_draws(o) || o->keep;
	if ((size_t)snprintf(pf->kept_dir, sizeof(pf->kept_dir), "%s/%s-plot", o->dir, name) >=
	    sizeof(pf->kept_dir) ||
	    (size_t)snprintf(pf->dir, sizeof(pf->dir), "%s/.%s-plot-XXXXXX", o->dir, name) >=
	    sizeof(pf->dir))
		return tg_error(d, "output directory name too long");
	/* refused up front, and again when the folder is put in place */
	if (pf->kept && lstat(pf->kept_dir, &st) == 0 && !S_ISDIR(st.st_mode))
		return tg_error(d, "'%s' is in the way: not a directory", pf->kept_dir);
	pf->outfd = open(o->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pf->outfd < 0)
		return tg_error(d, "unable to use '%s': %s", o->dir, strerror(errno));
	/* the messages name DIR: the private folder's name is random */
	if (!mkdtemp(pf->dir)) {
		tg_error(d, "unable to write the graph into '%s': %s", o->dir, strerror(errno));
		goto fail;
	}
	pf->fd = open(pf->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (pf->fd < 0) {
		tg_error(d, "unable to write the graph into '%s': %s", o->dir, strerror(errno));
		rmdir(pf->dir);
		goto fail;
	}
	pf->made = 1;
	return 0;
fail:
	close(pf->outfd);
	pf->outfd = -1;
	return -1;
}

int tg_plot_files_out(struct tg_plot_files *pf, struct tg_aout *a, const char *name,
		      struct tg_diag *d)
{
	return tg_aout_open_in(a, pf->dir, pf->kept_dir, name, d);
}

/* Removes the files in folder fd (one level: ours hold no folder) and closes it. */
static void pf_empty(int fd)
{
	DIR *dir = fdopendir(fd);
	struct dirent *e;

	if (!dir) {
		close(fd);
		return;
	}
	while ((e = readdir(dir)) != NULL)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(dirfd(dir), e->d_name, 0);
	closedir(dir);
}

void tg_plot_files_release(struct tg_plot_files *pf)
{
	if (pf->made) {
		pf_empty(pf->fd);
		pf->fd = -1;
		rmdir(pf->dir);
		pf->made = 0;
	}
	if (pf->fd >= 0)
		close(pf->fd);
	if (pf->outfd >= 0)
		close(pf->outfd);
	pf->fd = pf->outfd = -1;
}

/* Non-zero when buf (len bytes) ends, but for trailing white space, with tail. */
static int pf_ends_with(const char *buf, size_t len, const char *tail)
{
	size_t n = strlen(tail);

	while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
		len--;
	return len >= n && !memcmp(buf + len - n, tail, n);
}

/* Non-zero when the len bytes at buf are a whole graph for terminal term. */
static int pf_graph_whole(const char *term, const char *buf, size_t len)
{
	static const char png_end[12] = { 0, 0, 0, 0, 'I', 'E', 'N', 'D',
					  (char)0xAE, 0x42, 0x60, (char)0x82 };

	if (!strcmp(term, "png"))
		return len > 20 && !memcmp(buf, "\x89PNG\r\n\x1a\n", 8) &&
			!memcmp(buf + len - 12, png_end, 12);
	if (!strcmp(term, "pdf"))
		return len > 10 && !memcmp(buf, "%PDF-", 5) && pf_ends_with(buf, len, "%%EOF");
	return len > 10 && pf_ends_with(buf, len, "</svg>");
}

/*
 * gnuplot's svg terminal escapes '<' and '&' in text but not '>', so a name
 * holding "]]>" makes the file invalid XML: writes buf to f with every "]]>"
 * outside a CDATA section as "]]&gt;".  0 or EOF.
 */
static int pf_svg_fix(FILE *f, const char *buf, size_t len)
{
	size_t i = 0, from = 0;
	int cdata = 0;

	while (i < len) {
		if (!cdata && len - i >= 9 && !memcmp(buf + i, "<![CDATA[", 9)) {
			cdata = 1;
			i += 9;
		} else if (len - i >= 3 && !memcmp(buf + i, "]]>", 3)) {
			if (cdata) {
				cdata = 0;
			} else {
				if (fwrite(buf + from, 1, i + 2 - from, f) != i + 2 - from ||
				    fputs("&gt;", f) == EOF)
					return EOF;
				from = i + 3;
			}
			i += 3;
		} else {
			i++;
		}
	}
	return fwrite(buf + from, 1, len - from, f) == len - from ? 0 : EOF;
}

/*
 * Checks the graph gnuplot wrote into the private folder (file graph) and, for
 * svg, rewrites it with "]]>" escaped.  0, or -1 with d set (nothing replaced).
 */
static int pf_check_graph(const struct tg_plot_opts *o, struct tg_plot_files *pf,
			  const char *graph, struct tg_diag *d)
{
	struct stat st;
	char *buf = NULL, fixed[300];
	size_t got = 0;
	FILE *f;
	int fd, ret = -1;

	fd = openat(pf->fd, graph, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return tg_error(d, "gnuplot wrote no graph");
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
		tg_error(d, "gnuplot wrote no graph");
		goto out;
	}
	if (st.st_size > PF_GRAPH_MAX) {
		tg_error(d, "gnuplot wrote a graph of %lld bytes", (long long)st.st_size);
		goto out;
	}
	buf = malloc((size_t)st.st_size);
	if (!buf) {
		tg_error(d, "out of memory");
		goto out;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (!pf_graph_whole(o->terminal, buf, got)) {
		tg_error(d, "gnuplot wrote an incomplete graph (disk full?): %s/%s not replaced",
			 o->dir, graph);
		goto out;
	}
	if (strcmp(o->terminal, "svg") || !memmem(buf, got, "]]>", 3)) {
		ret = 0;
		goto out;
	}
	snprintf(fixed, sizeof(fixed), "%s.xml", graph);
	close(fd);
	fd = openat(pf->fd, fixed, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		tg_error(d, "unable to write the graph: %s", strerror(errno));
		goto out;
	}
	fd = -1;
	ret = pf_svg_fix(f, buf, got);
	if (fflush(f) != 0 || ferror(f))
		ret = EOF;
	if (fclose(f) != 0)
		ret = EOF;
	if (ret == 0 && renameat(pf->fd, fixed, pf->fd, graph) < 0)
		ret = EOF;
	if (ret) {
		tg_error(d, "unable to write the graph: %s", strerror(errno));
		ret = -1;
	}
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	return ret;
}

/* umask without changing it for long (the CLI has one thread). */
static mode_t pf_umask(void)
{
	mode_t m = umask(077);

	umask(m);
	return m;
}

/*
 * Puts the private folder in place as DIR/NAME-plot, an earlier one moved aside
 * and removed.  Called with DIR locked.  0 or -1 (d set).
 */
static int pf_publish_folder(struct tg_plot_files *pf, struct tg_diag *d)
{
	const char *kept = strrchr(pf->kept_dir, '/') + 1;
	const char *priv = strrchr(pf->dir, '/') + 1;
	char old[4200];
	struct stat st;
	int oldfd;

	if (fstatat(pf->outfd, kept, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (!S_ISDIR(st.st_mode))
			return tg_error(d, "'%s' is in the way: not a directory", pf->kept_dir);
		/* rename(2) onto an empty folder of ours replaces it */
		snprintf(old, sizeof(old), "%s-old-XXXXXX", pf->dir);
		if (!mkdtemp(old))
			return tg_error(d, "unable to replace '%s': %s", pf->kept_dir,
					strerror(errno));
		if (renameat(pf->outfd, kept, pf->outfd, strrchr(old, '/') + 1) < 0) {
			tg_error(d, "unable to replace '%s': %s", pf->kept_dir, strerror(errno));
			rmdir(old);
			return -1;
		}
		oldfd = openat(pf->outfd, strrchr(old, '/') + 1,
			       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (oldfd >= 0)
			pf_empty(oldfd);
		unlinkat(pf->outfd, strrchr(old, '/') + 1, AT_REMOVEDIR);
	}
	fchmod(pf->fd, 0777 & ~pf_umask());
	if (renameat(pf->outfd, priv, pf->outfd, kept) < 0)
		return tg_error(d, "unable to write '%s': %s", pf->kept_dir, strerror(errno));
	pf->made = 0;  /* it is the kept folder now */
	return 0;
}

int tg_plot_finish(const struct tg_plot_opts *o, struct tg_plot_files *pf,
		   const char *name, struct tg_aout *script, struct tg_aout *legend,
		   struct tg_diag *d)
{
	char graph[256], script_name[256];
	int drawn = 0, ret = -1;

	if (tg_aout_commit(script, d) < 0) {
		tg_aout_abort(script);
		goto abort_legend;
	}
	tg_aout_release(script);
	if (tg_plot_draws(o)) {
		tg_gp_graph_name(graph, sizeof(graph), o, name);
		snprintf(script_name, sizeof(script_name), "%s.gp", name);
		if (tg_gnuplot_run(o->gnuplot, pf->fd, script_name, graph, o->messages, d) < 0) {
			size_t len = strlen(d->msg);
			if (!pf->kept)
				snprintf(d->msg + len, sizeof(d->msg) - len,
					 " (--keep keeps the script and data in %s-plot/)", name);
			goto failed;
		}
		if (pf_check_graph(o, pf, graph, d) < 0)
			goto failed;
		drawn = 1;
	}
	/* what follows takes turns with another run writing into the same DIR */
	while (flock(pf->outfd, LOCK_EX) < 0)
		if (errno != EINTR) {
			tg_error(d, "unable to lock '%s': %s", o->dir, strerror(errno));
			goto abort_legend;
		}
	if (drawn && renameat(pf->fd, graph, pf->outfd, graph) < 0) {
		tg_error(d, "unable to put '%s' in '%s': %s", graph, o->dir, strerror(errno));
		goto unlock;
	}
	if (legend && tg_aout_commit(legend, d) < 0)
		goto unlock;
	if (legend)
		tg_aout_release(legend);
	legend = NULL;
	if (pf->kept && pf_publish_folder(pf, d) < 0)
		goto unlock;
	ret = 0;
unlock:
	flock(pf->outfd, LOCK_UN);
abort_legend:
	if (legend)
		tg_aout_abort(legend);
	return ret;

failed:
	/* a kept folder is kept, to see what failed; no graph, no legend */
	if (pf->kept) {
		struct tg_diag d2 = { 0 };
		if (tg_plot_draws(o))
			unlinkat(pf->fd, graph, 0);
		while (flock(pf->outfd, LOCK_EX) < 0 && errno == EINTR)
			;
		pf_publish_folder(pf, &d2);
		flock(pf->outfd, LOCK_UN);
	}
	goto abort_legend;
}
