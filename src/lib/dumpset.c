/*
 * dumpset.c - operands to dump files: text dumps, run directories, captures.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "aggfile.h"
#include "dumpset.h"
#include "tg_format.h"

/* Keeps p in s->owned (freed on release); 0 or -1 (p freed). */
static int ds_own(struct tg_dumpset *s, char *p)
{
	if (s->n_owned == s->owned_alloc) {
		size_t na = s->owned_alloc ? 2 * s->owned_alloc : 16;
		char **nv = realloc(s->owned, na * sizeof(*nv));
		if (!nv) {
			free(p);
			return -1;
		}
		s->owned = nv;
		s->owned_alloc = na;
	}
	s->owned[s->n_owned++] = p;
	return 0;
}

/* Appends a file for path (not copied) to s; 0 or -1. */
static int ds_add(struct tg_dumpset *s, const char *path, struct tg_diag *d)
{
	if (s->n == s->alloc) {
		size_t na = s->alloc ? 2 * s->alloc : 16;
		struct tg_dumpfile *nv = realloc(s->v, na * sizeof(*nv));
		if (!nv)
			return tg_error(d, "out of memory");
		s->v = nv;
		s->alloc = na;
	}
	if (tg_dumpfile_init(&s->v[s->n], path) < 0)
		return tg_error(d, "out of memory");
	s->n++;
	return 0;
}

/* dir + "/" + name in a new string (dir "" gives name alone). */
static char *ds_join(const char *dir, size_t dlen, const char *name, const char *suffix)
{
	size_t nl = strlen(name), sl = suffix ? strlen(suffix) : 0;
	char *p = malloc(dlen + 1 + nl + sl + 1), *q;

	if (!p)
		return NULL;
	q = p;
	if (dlen) {
		memcpy(q, dir, dlen);
		q += dlen;
		if (q[-1] != '/')
			*q++ = '/';
	}
	memcpy(q, name, nl);
	memcpy(q + nl, suffix ? suffix : "", sl + 1);
	return p;
}

static int ds_cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Non-zero when name ends with suffix, or (GZ) with suffix + ".gz". */
static int ds_has_suffix(const char *name, const char *suffix, int gz)
{
	size_t n = strlen(name), k = strlen(suffix);

	if (gz && n > k + 3 && !strcmp(name + n - 3, ".gz"))
		n -= 3;
	return n > k && !memcmp(name + n - k, suffix, k);
}

void tg_dir_names_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int tg_dir_names(const char *dir, const char *suffix, int gz, char ***names, size_t *n,
		 struct tg_diag *d)
{
	DIR *dh = opendir(dir);
	struct dirent *e;
	char **v = NULL;
	size_t k = 0, alloc = 0;

	*names = NULL;
	*n = 0;
	if (!dh)
		return tg_error(d, "unable to read directory '%s': %s", dir, strerror(errno));
	while ((e = readdir(dh))) {
		if (e->d_name[0] == '.' || !ds_has_suffix(e->d_name, suffix, gz))
			continue;
		if (k == alloc) {
			size_t na = alloc ? 2 * alloc : 16;
			char **nv = realloc(v, na * sizeof(*nv));
			if (!nv)
				goto oom;
			v = nv;
			alloc = na;
		}
		if (!(v[k] = strdup(e->d_name)))
			goto oom;
		k++;
	}
	closedir(dh);
	if (k > 1)
		qsort(v, k, sizeof(*v), ds_cmp_names);
	*names = v;
	*n = k;
	return 0;
oom:
	closedir(dh);
	tg_dir_names_free(v, k);
	return tg_error(d, "out of memory");
}

/* A text run directory: its dump files of the view, in name order. */
static int ds_add_dir(struct tg_dumpset *s, const char *dir, enum tg_dumpset_view view,
		      struct tg_diag *d)
{
	const char *suffix = view == TG_VIEW_STACK ? TG_STACK_SUFFIX : TG_MEM_SUFFIX;
	char **names;
	size_t n, i;
	int ret = -1;

	if (tg_dir_names(dir, suffix, 1, &names, &n, d) < 0)
		return -1;
	if (!n) {
		tg_error(d, "no %s files in directory '%s' (and no capture.tg, nor runs in "
			 "subdirectories: give a run directory, BASE/<pid>)", suffix, dir);
		goto out;
	}
	for (i = 0; i < n; i++) {
		char *p = ds_join(dir, strlen(dir), names[i], NULL);
		if (!p || ds_own(s, p) < 0)
			goto oom;
		if (ds_add(s, p, d) < 0)
			goto out;
	}
	ret = 0;
	goto out;
oom:
	tg_error(d, "out of memory");
out:
	tg_dir_names_free(names, n);
	return ret;
}

/* One file the capture stands for: its would-be path and its stream. */
struct ds_capfile {
	char *path;
	const struct tg_cap_thread *t; /* NULL: process.mem */
};

static int ds_cmp_capfiles(const void *a, const void *b)
{
	const struct ds_capfile *x = a, *y = b;
	const char *bx = strrchr(x->path, '/'), *by = strrchr(y->path, '/');

	return strcmp(bx ? bx + 1 : x->path, by ? by + 1 : y->path);
}

/* The files of the capture s->cap for the view, in name order. */
static int ds_add_capture(struct tg_dumpset *s, enum tg_dumpset_view view, struct tg_diag *d)
{
	const struct tg_capture *cap = s->cap;
	const char *slash = strrchr(cap->path, '/');
	size_t dlen = slash ? (size_t)(slash - cap->path) + 1 : 0, n = 0, i;
	struct ds_capfile *f = calloc(cap->n_threads + 1, sizeof(*f));
	const char *suffix = view == TG_VIEW_STACK ? TG_STACK_SUFFIX : TG_MEM_SUFFIX;
	/* every capture holds each call's record, stacks asked for (TG_CAP_F_STACK,
	 * .stack files in the export) or not: its stack view is always there */
	int want = view == TG_VIEW_STACK || (cap->flags & TG_CAP_F_MEMORY) != 0;

	if (!f)
		return tg_error(d, "out of memory");
	for (i = 0; want && i < cap->n_threads; i++) {
		if (!(f[n].path = ds_join(cap->path, dlen, cap->threads[i].base, suffix)))
			goto oom;
		f[n++].t = &cap->threads[i];
	}
	if (view == TG_VIEW_MEM && (cap->flags & TG_CAP_F_PROCESS)) {
		if (!(f[n].path = ds_join(cap->path, dlen, TG_PROCESS_BASENAME, TG_MEM_SUFFIX)))
			goto oom;
		f[n++].t = NULL;
	}
	qsort(f, n, sizeof(*f), ds_cmp_capfiles);
	for (i = 0; i < n; i++) {
		char *p = f[i].path;
		f[i].path = NULL;
		if (ds_own(s, p) < 0)
			goto oom;
		if (ds_add(s, p, d) < 0)
			goto out;
		s->v[s->n - 1].cap = cap;
		s->v[s->n - 1].cap_thread = f[i].t;
		if (!f[i].t)
			s->v[s->n - 1].kind = TG_DUMP_PROCESS;
		else
			s->v[s->n - 1].kind = view == TG_VIEW_STACK ? TG_DUMP_STACK : TG_DUMP_MEM;
	}
	free(f);
	return 0;
oom:
	tg_error(d, "out of memory");
out:
	for (i = 0; i < n; i++)
		free(f[i].path);
	free(f);
	return -1;
}

int tg_dumpset_open_capture(const char *path, struct tg_capture **cap, struct tg_diag *d)
{
	char *file;

	*cap = NULL;
	if (!tg_capture_detect(path, &file))
		return 0;
	*cap = malloc(sizeof(**cap));
	if (!*cap) {
		free(file);
		return tg_error(d, "out of memory");
	}
	if (tg_capture_open(*cap, file, d) < 0) {
		free(*cap);
		*cap = NULL;
		free(file);
		return -1;
	}
	free(file);
	return 1;
}

void tg_dumpset_free_capture(struct tg_capture *cap)
{
	if (cap) {
		tg_capture_close(cap);
		free(cap);
	}
}

static int ds_cmp_aggthreads(const void *a, const void *b)
{
	const struct tg_agg_rthread *x = *(const struct tg_agg_rthread *const *)a;
	const struct tg_agg_rthread *y = *(const struct tg_agg_rthread *const *)b;
	return strcmp(x->base, y->base);
}

/* The threads of the aggregate run PATH as .mem files (dumpset.h); 0 or -1. */
static int ds_add_aggregate(struct tg_dumpset *s, const char *path, enum tg_dumpset_view view,
			    struct tg_diag *d)
{
	const struct tg_agg_rthread **order;
	const char *slash;
	size_t dlen;

	if (!(s->agg = calloc(1, sizeof(*s->agg))))
		return tg_error(d, "out of memory");
	if (tg_aggfile_load(s->agg, path, d) < 0)
		return -1;
	if (view == TG_VIEW_STACK || !s->agg->nt)
		return 0;
	slash = strrchr(s->agg->path, '/');
	dlen = slash ? (size_t)(slash - s->agg->path) + 1 : 0;
	if (!(order = malloc(s->agg->nt * sizeof(*order))))
		return tg_error(d, "out of memory");
	for (size_t i = 0; i < s->agg->nt; i++)
		order[i] = &s->agg->t[i];
	qsort(order, s->agg->nt, sizeof(*order), ds_cmp_aggthreads);
	for (size_t i = 0; i < s->agg->nt; i++) {
		char *p = ds_join(s->agg->path, dlen, order[i]->base, TG_MEM_SUFFIX);
		if (!p || ds_own(s, p) < 0) {
			free(order);
			return tg_error(d, "out of memory");
		}
		if (ds_add(s, p, d) < 0) {
			free(order);
			return -1;
		}
		s->v[s->n - 1].kind = TG_DUMP_MEM;
		s->v[s->n - 1].agg = s->agg;
		s->v[s->n - 1].agg_thread = order[i];
	}
	free(order);
	return 0;
}

static int ds_init(struct tg_dumpset *s, char **paths, size_t n, enum tg_dumpset_view view,
		   struct tg_diag *d)
{
	struct stat st;

	for (size_t i = 0; i < n; i++) {
		int rc = tg_dumpset_open_capture(paths[i], &s->cap, d);

		if (rc == 0 && tg_aggfile_is_run(paths[i])) {
			if (n != 1)
				return tg_error(d, "an aggregate run ('%s') must be the only operand",
						paths[i]);
			return ds_add_aggregate(s, paths[i], view, d);
		}

		if (rc < 0)
			return -1;
		if (rc > 0) {
			if (n != 1)
				return tg_error(d, "a capture ('%s') must be the only operand: "
						"give its run directory or capture.tg alone", paths[i]);
			return ds_add_capture(s, view, d);
		}
		if (stat(paths[i], &st) < 0)  /* before any work is reported on the others */
			return tg_error(d, "unable to open '%s': %s", paths[i], strerror(errno));
		if (S_ISDIR(st.st_mode)) {
			if (ds_add_dir(s, paths[i], view, d) < 0)
				return -1;
			continue;
		}
		if (ds_add(s, paths[i], d) < 0)
			return -1;
	}
	return 0;
}

int tg_dumpset_init(struct tg_dumpset *s, char **paths, size_t n, enum tg_dumpset_view view,
		    struct tg_diag *d)
{
	memset(s, 0, sizeof(*s));
	if (ds_init(s, paths, n, view, d) == 0)
		return 0;
	tg_dumpset_release(s);  /* what a failure part-way had loaded */
	return -1;
}

int tg_dumpset_init_capture(struct tg_dumpset *s, const struct tg_capture *cap,
			    enum tg_dumpset_view view, struct tg_diag *d)
{
	memset(s, 0, sizeof(*s));
	s->cap = (struct tg_capture *)cap;  /* only read; never freed (cap_borrowed) */
	s->cap_borrowed = 1;
	return ds_add_capture(s, view, d);
}

void tg_dumpset_release(struct tg_dumpset *s)
{
	for (size_t i = 0; i < s->n; i++)
		tg_dumpfile_release(&s->v[i]);
	free(s->v);
	for (size_t i = 0; i < s->n_owned; i++)
		free(s->owned[i]);
	free(s->owned);
	if (!s->cap_borrowed)
		tg_dumpset_free_capture(s->cap);
	if (s->agg) {
		tg_aggfile_release(s->agg);
		free(s->agg);
	}
	memset(s, 0, sizeof(*s));
}
