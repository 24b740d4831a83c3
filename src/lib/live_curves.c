/*
 * live_curves.c - threadgraph live's figures from a sampled run's curves
 * (live_curves.h).
 */
#define _GNU_SOURCE  /* memrchr */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "live_curves.h"
#include "records.h"
#include "runinfo.h"

#define CURVE_SITE "<thread memory>:0:sampled"
#define CURVE_CHUNK (1u << 20)  /* read at most this much of a file at once; a
				   line is far shorter */

void tg_live_curves_init(struct tg_live_curves *c)
{
	memset(c, 0, sizeof(*c));
}

void tg_live_curves_release(struct tg_live_curves *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->v[i].path);
		free(c->v[i].name);
	}
	free(c->v);
	tg_live_curves_init(c);
}

int tg_live_curves_is_run(const struct tg_run_threads *ri)
{
	return ri->mode && strcmp(ri->mode, "sampled") == 0;
}

/* The name runinfo.json gives the thread whose .mem file is FILE (a base
 * name), or NULL. */
static const char *curve_ri_name(const struct tg_run_threads *ri, const char *file)
{
	for (size_t i = 0; i < ri->n; i++) {
		const char *m = ri->v[i].mem, *slash;
		if (!m || !ri->v[i].name)
			continue;
		if ((slash = strrchr(m, '/')))
			m = slash + 1;
		if (strcmp(m, file) == 0)
			return ri->v[i].name;
	}
	return NULL;
}

static int curve_known(const struct tg_live_curves *c, const char *path)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->v[i].path, path) == 0)
			return 1;
	return 0;
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds the .mem files of DIR not known yet, in name order.  0 or -1. */
static int curves_scan(struct tg_live_curves *c, const char *dir, struct tg_diag *d)
{
	DIR *dh = opendir(dir);
	struct dirent *e;
	char **found = NULL;
	size_t n = 0, cap = 0;
	int ret = -1;

	if (!dh)
		return tg_error(d, "cannot read the directory '%s': %s", dir, strerror(errno));
	while ((e = readdir(dh)) != NULL) {
		size_t len = strlen(e->d_name);
		char *path;
		struct stat st;

		if (len <= 4 || strcmp(e->d_name + len - 4, ".mem") != 0)
			continue;
		if (asprintf(&path, "%s/%s", dir, e->d_name) < 0) {
			tg_error(d, "out of memory");
			goto out;
		}
		if (curve_known(c, path) || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
			free(path);
			continue;
		}
		if (n == cap) {
			size_t nc = cap ? 2 * cap : 16;
			char **g = realloc(found, nc * sizeof(*g));
			if (!g) {
				free(path);
				tg_error(d, "out of memory");
				goto out;
			}
			found = g;
			cap = nc;
		}
		found[n++] = path;
	}
	if (n)
		qsort(found, n, sizeof(*found), str_cmp);
	if (c->n + n > c->alloc) {
		size_t na = c->alloc ? c->alloc : 16;
		struct tg_live_curve *g;
		while (na < c->n + n)
			na *= 2;
		if (!(g = realloc(c->v, na * sizeof(*g)))) {
			tg_error(d, "out of memory");
			goto out;
		}
		c->v = g;
		c->alloc = na;
	}
	for (size_t i = 0; i < n; i++) {
		struct tg_live_curve *cv = &c->v[c->n];
		const char *base = strrchr(found[i], '/') + 1;

		memset(cv, 0, sizeof(*cv));
		if (!(cv->name = strndup(base, strlen(base) - 4))) {
			tg_error(d, "out of memory");
			goto out;
		}
		cv->path = found[i];
		found[i] = NULL;
		c->n++;
	}
	ret = 0;
out:
	for (size_t i = 0; i < n; i++)
		free(found[i]);
	free(found);
	closedir(dh);
	return ret;
}

/* One line of CV's file, S[0, LEN) without its newline (with TIME# when
 * HAS_TIME).  0 or -1. */
static int curve_line(struct tg_live_curve *cv, const char *s, size_t len, int has_time,
		      struct tg_diag *d)
{
	struct tg_memrec r;
	const char *why;

	if (len && s[len - 1] == '\r')  /* lines may end with \r\n, as the other readers take them */
		len--;
	why = tg_memrec_parse(&r, s, len, has_time);

	if (why)
		return tg_error(d, "%s:%lu: %s", cv->path, cv->lineno + 1, why);
	if (r.site.len != strlen(CURVE_SITE) || memcmp(r.site.s, CURVE_SITE, r.site.len) != 0)
		return tg_error(d, "%s:%lu: not a reading of a sampled run's memory curve "
				"(TIME#" CURVE_SITE "=>BYTES)", cv->path, cv->lineno + 1);
	cv->lineno++;
	cv->readings++;
	cv->now = r.delta;
	if (r.delta > cv->peak)
		cv->peak = r.delta;
	if (has_time)
		cv->last_us = (int64_t)(r.time.v * 1e6);
	return 0;
}

/* Reads the whole lines CV's file gained (their times: HAS_TIME).  A file that shrank (written
 * anew) is read from its start; one that is gone keeps its figures.  0 or -1. */
static int curve_read(struct tg_live_curve *cv, char *buf, int has_time, struct tg_diag *d)
{
	int fd = open(cv->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	int ret = -1;

	if (fd < 0)
		return errno == ENOENT ? 0 : tg_error(d, "cannot read '%s': %s", cv->path,
							strerror(errno));
	if (fstat(fd, &st) != 0) {
		tg_error(d, "cannot read '%s': %s", cv->path, strerror(errno));
		goto out;
	}
	if (st.st_size < cv->off) {
		cv->off = 0;
		cv->lineno = cv->readings = 0;
		cv->now = cv->peak = cv->last_us = 0;
	}
	for (;;) {
		ssize_t n = pread(fd, buf, CURVE_CHUNK, cv->off);
		const char *p = buf, *end, *nl;

		if (n < 0) {
			tg_error(d, "cannot read '%s': %s", cv->path, strerror(errno));
			goto out;
		}
		end = buf + n;
		if (!n || !(end = memrchr(buf, '\n', (size_t)n))) {
			if (n == (ssize_t)CURVE_CHUNK) {
				tg_error(d, "%s:%lu: line longer than %u bytes", cv->path,
					 cv->lineno + 1, CURVE_CHUNK);
				goto out;
			}
			break;  /* nothing more, or a line still being written */
		}
		while (p <= end && (nl = memchr(p, '\n', (size_t)(end - p) + 1)) != NULL) {
			if (curve_line(cv, p, (size_t)(nl - p), has_time, d) < 0)
				goto out;
			cv->off += nl + 1 - p;
			p = nl + 1;
		}
		if (n < (ssize_t)CURVE_CHUNK)
			break;
	}
	ret = 0;
out:
	close(fd);
	return ret;
}

int tg_live_curves_read(struct tg_live *lv, struct tg_live_curves *c, const char *dir,
			struct tg_diag *d)
{
	struct tg_run_threads ri;
	struct tg_live_thread *threads = NULL;
	char *buf = NULL;
	int64_t last_us = 0;
	size_t i = 0;
	int ret = -1;

	tg_run_threads_init(&ri);
	if (tg_run_threads_read(&ri, dir, d) < 0)
		return -1;
	if (curves_scan(c, dir, d) < 0)
		goto out;
	if (!(buf = malloc(CURVE_CHUNK))) {
		tg_error(d, "out of memory");
		goto out;
	}
	for (i = 0; i < c->n; i++) {
		struct tg_live_curve *cv = &c->v[i];
		const char *name = curve_ri_name(&ri, strrchr(cv->path, '/') + 1);

		if (name && strcmp(name, cv->name) != 0) {
			char *copy = strdup(name);
			if (!copy) {
				tg_error(d, "out of memory");
				goto out;
			}
			free(cv->name);
			cv->name = copy;
		}
		if (curve_read(cv, buf, !ri.no_time, d) < 0)
			goto out;
	}
	if (c->n && !(threads = calloc(c->n, sizeof(*threads)))) {
		tg_error(d, "out of memory");
		goto out;
	}
	for (i = 0; i < c->n; i++) {
		const struct tg_live_curve *cv = &c->v[i];
		struct tg_live_thread *t = &threads[i];

		t->stream = (uint32_t)(i + 1);
		if (!(t->name = strdup(cv->name))) {
			tg_error(d, "out of memory");
			goto out;
		}
		t->now = cv->now;
		t->peak = cv->peak;
		t->returns = cv->readings;
		t->last_us = cv->last_us;
		t->ended = ri.ended;
		t->change = 0;
		for (size_t j = 0; j < lv->n_threads; j++)
			if (lv->threads[j].stream == t->stream)
				t->change = t->now - lv->threads[j].now;
		if (cv->last_us > last_us)
			last_us = cv->last_us;
	}
	for (size_t j = 0; j < lv->n_threads; j++)
		free(lv->threads[j].name);
	free(lv->threads);
	lv->threads = threads;
	lv->n_threads = c->n;
	threads = NULL;
	free(lv->funcs);
	free(lv->names);
	lv->funcs = NULL;
	lv->names = NULL;
	lv->n_funcs = 0;
	lv->has_process = 0;
	lv->memory_mode = 0;
	lv->curves = 1;
	lv->ended = ri.ended;
	lv->end_us = ri.end_us;
	lv->timed = !ri.no_time;
	lv->pid = (uint32_t)ri.pid;
	if (last_us)
		lv->last_us = last_us;
	lv->readings++;
	ret = 0;
out:
	if (threads) {
		for (size_t j = 0; j < c->n; j++)
			free(threads[j].name);
		free(threads);
	}
	free(buf);
	tg_run_threads_release(&ri);
	return ret;
}
