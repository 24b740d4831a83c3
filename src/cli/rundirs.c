/*
 * rundirs.c - an operand naming the base directory of several runs reads the
 * latest of them.
 *
 * The profiler writes each run into BASE/<pid>/ (docs/formats.md), so after a
 * second `threadgraph run` a glob of BASE's entries names two runs, and BASE itself is not
 * a run.  An operand that is such a base (a directory with no capture.tg, no
 * runinfo.json and no .mem file of its own, holding run directories) stands for
 * its latest run: the one started last among those that are not a forked child
 * of another run there (runinfo.json's ppid), so a multiprocessing program's
 * parent is read rather than its last worker.  A note on stderr says which.
 */
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

struct rd_run {
	char *path;
	double start;   /* runinfo.json start_time, else capture.tg's mtime */
	double end;     /* runinfo.json end_time, or 0: unknown (still running) */
	long pid, ppid; /* runinfo.json; -1 when unknown */
};

static char *rd_join(const char *dir, const char *name)
{
	size_t n = strlen(dir), m = strlen(name);
	char *p;

	while (n > 1 && dir[n - 1] == '/')
		n--;
	p = malloc(n + m + 2);
	if (p) {
		memcpy(p, dir, n);
		p[n] = '/';
		memcpy(p + n + 1, name, m + 1);
	}
	return p;
}

static int rd_is_file(const char *dir, const char *name, struct stat *st)
{
	char *p = rd_join(dir, name);
	int yes = p && stat(p, st) == 0 && S_ISREG(st->st_mode);

	free(p);
	return yes;
}

/* The number after "KEY": in runinfo.json's TEXT (written by json.dump: keys are
 * unique at the top level, and no nested object has these names), or -1 when
 * absent, negative or not a finite number below 1e15. */
static double rd_json_number(const char *text, const char *key)
{
	char pat[32];
	const char *p;
	char *end;
	double v;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(text, pat);
	if (!p)
		return -1;
	p += strlen(pat);
	v = strtod(p, &end);
	return end == p || !isfinite(v) || v < 0 || v >= 1e15 ? -1 : v;
}

/* Fill R from DIR/runinfo.json (its first MiB: a longer one names a huge argv
 * before start_time; such a run keeps its capture's time). */
static void rd_read_info(struct rd_run *r)
{
	enum { CAP = 1 << 20 };
	char *p = rd_join(r->path, "runinfo.json"), *buf = malloc(CAP + 1);
	int fd = p && buf ? open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK) : -1;  /* no FIFO wait */
	struct stat st;
	FILE *f = NULL;
	size_t n;

	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !(f = fdopen(fd, "r"))))
		close(fd);
	free(p);
	if (!f) {
		free(buf);
		return;
	}
	n = fread(buf, 1, CAP, f);
	fclose(f);
	buf[n] = '\0';
	r->pid = (long)rd_json_number(buf, "pid");
	r->ppid = (long)rd_json_number(buf, "ppid");
	if (rd_json_number(buf, "start_time") > 0)
		r->start = rd_json_number(buf, "start_time");
	if (rd_json_number(buf, "end_time") > 0)
		r->end = rd_json_number(buf, "end_time");
	free(buf);
}

/* Whether C is a forked child of P: P's pid is C's parent, and C started while
 * P ran (pids are reused: the same number may be an older, unrelated run). */
static int rd_child_of(const struct rd_run *c, const struct rd_run *p)
{
	return c->ppid > 0 && p->pid == c->ppid && p->start <= c->start &&
	       (p->end <= 0 || c->start <= p->end);
}

/* Whether DIR is a run itself (its files are read as they are). */
static int rd_is_run(const char *dir)
{
	struct stat st;
	DIR *d;
	struct dirent *e;
	int yes = 0;

	if (rd_is_file(dir, "capture.tg", &st) || rd_is_file(dir, "runinfo.json", &st)
	    || rd_is_file(dir, "aggregate.tga", &st))
		return 1;
	d = opendir(dir);
	if (!d)
		return 1;  /* unreadable: let the command say why */
	while (!yes && (e = readdir(d)) != NULL) {
		const char *dot = strrchr(e->d_name, '.');
		uint32_t no;
		if (tg_capture_segment_name(e->d_name, &no)) {  /* capture-N.tg */
			yes = 1;
			break;
		}
		if (dot && !strcmp(dot, ".gz"))  /* NAME.mem.gz, NAME.stack.gz */
			while (dot > e->d_name && *--dot != '.')
				;
		yes = dot && (!strncmp(dot, ".mem", 4) || !strncmp(dot, ".stack", 6));
	}
	closedir(d);
	return yes;
}

/* The latest top-level run under BASE, or NULL (none, or out of memory); *N
 * gets the number of runs found. */
static char *rd_latest(const char *base, size_t *n_runs)
{
	DIR *d = opendir(base);
	struct dirent *e;
	struct rd_run *runs = NULL;
	size_t n = 0, cap = 0, i, j, best = (size_t)-1;
	char *ret = NULL;

	*n_runs = 0;
	if (!d)
		return NULL;
	while ((e = readdir(d)) != NULL) {
		struct stat st, cst;
		char *p;
		int tg, info;

		if (e->d_name[0] == '.')
			continue;
		p = rd_join(base, e->d_name);
		/* lstat: a symbolic link to a run ("latest") is not one more run */
		if (!p || lstat(p, &st) < 0 || !S_ISDIR(st.st_mode)) {
			free(p);
			continue;
		}
		tg = rd_is_file(p, "capture.tg", &cst);
		info = rd_is_file(p, "runinfo.json", &st);
		if (!tg && !info) {
			free(p);
			continue;
		}
		if (n == cap) {
			struct rd_run *nr = realloc(runs, (cap = cap ? 2 * cap : 8) * sizeof(*nr));
			if (!nr) {
				free(p);
				goto out;
			}
			runs = nr;
		}
		runs[n].path = p;
		runs[n].pid = runs[n].ppid = -1;
		runs[n].end = 0;
		runs[n].start = (double)(tg ? cst.st_mtime : st.st_mtime);
		rd_read_info(&runs[n]);
		n++;
	}
	for (i = 0; i < n; i++) {
		int child = 0;
		for (j = 0; j < n && !child; j++)
			child = j != i && rd_child_of(&runs[i], &runs[j]);
		if (child)
			continue;
		if (best == (size_t)-1 || runs[i].start > runs[best].start ||
		    (runs[i].start == runs[best].start && strcmp(runs[i].path, runs[best].path) > 0))
			best = i;
	}
	if (best != (size_t)-1) {
		ret = runs[best].path;
		runs[best].path = NULL;
	}
	*n_runs = n;
out:
	closedir(d);
	for (i = 0; i < n; i++)
		free(runs[i].path);
	free(runs);
	return ret;
}

void tg_resolve_run_bases(char **operands, int n)
{
	for (int i = 0; i < n; i++) {
		struct stat st;
		size_t n_runs;
		char *run;

		if (stat(operands[i], &st) < 0 || !S_ISDIR(st.st_mode) || rd_is_run(operands[i]))
			continue;
		run = rd_latest(operands[i], &n_runs);
		if (!run)
			continue;
		if (n_runs > 1) {  /* names through tg_cli_put: no raw control byte */
			fputs("threadgraph: '", stderr);
			tg_cli_put(stderr, operands[i]);
			fprintf(stderr, "' holds %zu runs; reading the latest, '", n_runs);
			tg_cli_put(stderr, run);
			fputs("'\n", stderr);
		}
		operands[i] = run;  /* lives as long as the process */
	}
}
