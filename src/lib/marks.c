/*
 * marks.c - reading marks.txt (marks.h, docs/formats.md "marks.txt"): one
 * tab-separated record per line, after a "# threadgraph marks 1" line.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "linereader.h"
#include "marks.h"

#define MARKS_MAX_FIELDS 7

void tg_marks_init(struct tg_marks *m)
{
	memset(m, 0, sizeof(*m));
}

void tg_marks_release(struct tg_marks *m)
{
	for (size_t i = 0; i < m->n_phases; i++) {
		free(m->phases[i].thread);
		free(m->phases[i].name);
	}
	for (size_t i = 0; i < m->n_marks; i++) {
		free(m->marks[i].thread);
		free(m->marks[i].name);
	}
	for (size_t i = 0; i < m->n_tasks; i++) {
		free(m->tasks[i].thread);
		free(m->tasks[i].label);
	}
	for (size_t i = 0; i < m->n_runs; i++)
		free(m->runs[i].thread);
	free(m->phases);
	free(m->marks);
	free(m->tasks);
	free(m->runs);
	memset(m, 0, sizeof(*m));
}

/* A field's copy, NUL-terminated; NULL when out of memory. */
static char *marks_dup(const char *s, size_t len)
{
	return strndup(s, len);
}

/* TIME (digits, optionally '.' and digits) into *t; -1 if it is not one. */
static int marks_time(const char *s, size_t len, double *t)
{
	char buf[40];
	size_t i, dots = 0;

	if (!len || len >= sizeof(buf))
		return -1;
	for (i = 0; i < len; i++) {
		if (s[i] == '.')
			dots++;
		else if (s[i] < '0' || s[i] > '9')
			return -1;
	}
	if (dots > 1 || s[0] == '.')
		return -1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	*t = strtod(buf, NULL);
	return 0;
}

/* A decimal count into *v; -1 if it is not one. */
static int marks_count(const char *s, size_t len, uint64_t *v)
{
	uint64_t x = 0;

	if (!len || len > 19)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		x = x * 10 + (uint64_t)(s[i] - '0');
	}
	*v = x;
	return 0;
}

/* Grows *v (of *n elements of size sz) by one zeroed element; NULL when out of memory. */
static void *marks_push(void *vp, size_t *n, size_t sz)
{
	void **v = vp;
	char *nv;

	if (!(*n & (*n - 1))) {  /* 0, 1, 2, 4...: double */
		nv = realloc(*v, (*n ? *n * 2 : 8) * sz);
		if (!nv)
			return NULL;
		*v = nv;
	}
	nv = (char *)*v + (*n)++ * sz;
	memset(nv, 0, sz);
	return nv;
}

/*
 * One record of F fields (f[i], l[i]) into M: 1 done, 0 malformed (why set),
 * -1 out of memory.
 */
static int marks_record(struct tg_marks *m, const char **f, const size_t *l, size_t nf,
			const char **why)
{
#define IS(k) (l[0] == sizeof(k) - 1 && !memcmp(f[0], k, sizeof(k) - 1))
	if (IS("phase")) {
		struct tg_phase *p;
		double a, b = INFINITY;
		if (nf != 5 || marks_time(f[1], l[1], &a) < 0 ||
		    (!(l[2] == 1 && f[2][0] == '-') && marks_time(f[2], l[2], &b) < 0) ||
		    b < a || !l[3] || !l[4]) {
			*why = "not a phase record (phase START STOP THREAD NAME)";
			return 0;
		}
		if (!(p = marks_push(&m->phases, &m->n_phases, sizeof(*p))))
			return -1;
		p->start = a;
		p->stop = b;
		if (!(p->thread = marks_dup(f[3], l[3])) || !(p->name = marks_dup(f[4], l[4])))
			return -1;
	} else if (IS("mark")) {
		struct tg_mark *k;
		double t;
		if (nf != 4 || marks_time(f[1], l[1], &t) < 0 || !l[2] || !l[3]) {
			*why = "not a mark record (mark TIME THREAD NAME)";
			return 0;
		}
		if (!(k = marks_push(&m->marks, &m->n_marks, sizeof(*k))))
			return -1;
		k->t = t;
		if (!(k->thread = marks_dup(f[2], l[2])) || !(k->name = marks_dup(f[3], l[3])))
			return -1;
	} else if (IS("task") || IS("run")) {
		int task = IS("task");
		struct tg_task_pos *p, pos;
		uint64_t depth;
		if (nf != (task ? 6u : 5u) || marks_count(f[1], l[1], &pos.id) < 0 || !l[2] ||
		    marks_count(f[3], l[3], &pos.calls) < 0 ||
		    marks_count(f[4], l[4], &depth) < 0 || depth > 1000000000 ||
		    (task && !l[5])) {
			*why = task ? "not a task record (task ID THREAD CALLS DEPTH LABEL)"
				    : "not a run record (run ID THREAD CALLS DEPTH)";
			return 0;
		}
		p = task ? marks_push(&m->tasks, &m->n_tasks, sizeof(*p))
			 : marks_push(&m->runs, &m->n_runs, sizeof(*p));
		if (!p)
			return -1;
		p->id = pos.id;
		p->calls = pos.calls;
		p->depth = (unsigned long)depth;
		if (!(p->thread = marks_dup(f[2], l[2])))
			return -1;
		if (task && asprintf(&p->label, "[%.*s]", (int)l[5], f[5]) < 0) {
			p->label = NULL;
			return -1;
		}
	}
	/* another kind: a later version's, skipped */
	return 1;
#undef IS
}

int tg_marks_read(struct tg_marks *m, const char *dir, struct tg_diag *d)
{
	struct tg_lr lr;
	struct stat st;
	char *path = NULL;
	const char *line;
	size_t len;
	int got, ret = -1;

	if (asprintf(&path, "%s/%s", dir, TG_MARKS_FILENAME) < 0)
		return tg_error(d, "out of memory");
	if (stat(path, &st) < 0 && errno == ENOENT) {
		free(path);
		return 0;
	}
	if (tg_lr_open(&lr, path, 64 * 1024, d) < 0) {
		free(path);
		return -1;
	}
	while ((got = tg_lr_next(&lr, &line, &len, d)) > 0) {
		const char *f[MARKS_MAX_FIELDS], *why = tg_lr_bad(&lr);
		size_t l[MARKS_MAX_FIELDS], nf = 0, i, s = 0;
		int rc;

		if (!why && (!len || line[0] == '#'))
			continue;
		for (i = 0; !why && i <= len; i++) {
			if (i < len && line[i] != '\t')
				continue;
			if (nf == MARKS_MAX_FIELDS) {
				why = "too many fields";
				break;
			}
			f[nf] = line + s;
			l[nf++] = i - s;
			s = i + 1;
		}
		if (!why && (rc = marks_record(m, f, l, nf, &why)) < 0) {
			tg_error(d, "out of memory");
			goto out;
		}
		if (why && tg_malformed(d, path, lr.lineno, why) < 0)
			goto out;
	}
	ret = got < 0 ? -1 : 0;
out:
	tg_lr_release(&lr);
	free(path);
	return ret;
}

int tg_marks_read_near(struct tg_marks *m, const struct tg_dumpfile *files, size_t n,
		       struct tg_diag *d)
{
	for (size_t i = 0; i < n; i++) {
		const char *slash = strrchr(files[i].path, '/');
		char *dir;
		int rc;

		if (!slash)
			return tg_marks_read(m, ".", d);
		if (!(dir = strndup(files[i].path, slash == files[i].path ? 1 :
				    (size_t)(slash - files[i].path))))
			return tg_error(d, "out of memory");
		rc = tg_marks_read(m, dir, d);
		free(dir);
		return rc;
	}
	return 0;
}

const struct tg_phase *tg_marks_phase_at(const struct tg_marks *m, double t)
{
	const struct tg_phase *best = NULL;

	for (size_t i = 0; i < m->n_phases; i++) {
		const struct tg_phase *p = &m->phases[i];
		if (p->start <= t && t <= p->stop && (!best || p->start >= best->start))
			best = p;
	}
	return best;
}

int tg_marks_has_phase(const struct tg_marks *m, const char *name)
{
	for (size_t i = 0; i < m->n_phases; i++)
		if (!strcmp(m->phases[i].name, name))
			return 1;
	return 0;
}

void tg_marks_keep_peaks(struct tg_peaks *p, const struct tg_marks *m, const char *name)
{
	size_t k = 0;

	for (size_t i = 0; i < p->n; i++) {
		const struct tg_phase *ph = tg_marks_phase_at(m, p->v[i].x);
		if (ph && !strcmp(ph->name, name))
			p->v[k++] = p->v[i];
	}
	p->n = k;
}

int tg_run_file_copy(const char *srcdir, const char *dstdir, const char *name,
		      struct tg_diag *d)
{
	struct stat ss, ds;
	char *src = NULL, *dst = NULL, buf[65536];
	int in = -1, out = -1, ret = -1;
	ssize_t n;

	if (stat(srcdir, &ss) == 0 && stat(dstdir, &ds) == 0 && ss.st_dev == ds.st_dev &&
	    ss.st_ino == ds.st_ino)
		return 0;
	if (asprintf(&src, "%s/%s", srcdir, name) < 0) {
		src = NULL;
		goto oom;
	}
	if (asprintf(&dst, "%s/%s", dstdir, name) < 0) {
		dst = NULL;
		goto oom;
	}
	if ((in = open(src, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0) {
		ret = errno == ENOENT ? 0 : tg_error(d, "cannot read '%s': %s", src, strerror(errno));
		goto out;
	}
	if (fstat(in, &ss) < 0 || !S_ISREG(ss.st_mode)) {
		ret = tg_error(d, "cannot read '%s': not a regular file", src);
		goto out;
	}
	if ((out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)) < 0) {
		ret = errno == EEXIST ? 0 : tg_error(d, "cannot create '%s': %s", dst,
						     strerror(errno));
		goto out;
	}
	while ((n = read(in, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			tg_error(d, "cannot read '%s': %s", src, strerror(errno));
			goto out;
		}
		for (ssize_t off = 0, w; off < n; off += w)
			if ((w = write(out, buf + off, (size_t)(n - off))) < 0) {
				if (errno == EINTR) {
					w = 0;
					continue;
				}
				tg_error(d, "cannot write '%s': %s", dst, strerror(errno));
				goto out;
			}
	}
	if (close(out) < 0) {
		out = -1;
		tg_error(d, "cannot write '%s': %s", dst, strerror(errno));
		goto out;
	}
	out = -1;
	ret = 1;
	goto out;
oom:
	tg_error(d, "out of memory");
out:
	if (ret < 0 && out >= 0)
		unlink(dst);
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	free(src);
	free(dst);
	return ret;
}

int tg_marks_copy(const char *srcdir, const char *dstdir, struct tg_diag *d)
{
	return tg_run_file_copy(srcdir, dstdir, TG_MARKS_FILENAME, d);
}
