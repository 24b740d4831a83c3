/*
 * gcruns.c - gc.txt read, and the runs within a call (gcruns.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gcruns.h"
#include "records.h"

void tg_gc_runs_init(struct tg_gc_runs *g)
{
	memset(g, 0, sizeof(*g));
}

void tg_gc_runs_release(struct tg_gc_runs *g)
{
	free(g->v);
	tg_gc_runs_init(g);
}

/* Parses "NATIVE_ID START STOP COLLECTED" (LINE, LEN bytes, no newline) into
 * *r; returns NULL or why it is malformed. */
static const char *gc_parse(struct tg_gc_run *r, const char *line, size_t len)
{
	const char *f[4], *end = line + len, *p = line;
	size_t fl[4];
	long long id;
	int i;

	for (i = 0; i < 4; i++) {
		const char *sp = memchr(p, ' ', (size_t)(end - p));
		if (i < 3 && !sp)
			return "not NATIVE_ID START STOP COLLECTED";
		f[i] = p;
		fl[i] = (size_t)((i < 3 ? sp : end) - p);
		p = i < 3 ? sp + 1 : end;
	}
	if (tg_int_parse(f[0], fl[0], &id) < 0 || id < 0)
		return "bad native id";
	if (tg_time_parse(f[1], fl[1], &r->start) < 0 || tg_time_parse(f[2], fl[2], &r->stop) < 0
	    || r->stop < r->start)
		return "bad START or STOP";
	if (tg_int_parse(f[3], fl[3], &r->collected) < 0)
		return "bad COLLECTED";
	r->native_id = (unsigned long long)id;
	return NULL;
}

int tg_gc_runs_read(struct tg_gc_runs *g, const char *dir, struct tg_diag *d)
{
	size_t plen = strlen(dir) + sizeof("/gc.txt");
	char *path = malloc(plen), line[256];
	unsigned long lineno = 0;
	FILE *f;
	int ret = -1;

	if (!path)
		return tg_error(d, "out of memory");
	snprintf(path, plen, "%s/gc.txt", dir);
	if (!(f = fopen(path, "r"))) {
		if (errno == ENOENT || errno == ENOTDIR)
			ret = 0;
		else
			tg_error(d, "cannot open '%s': %s", path, strerror(errno));
		goto free_path;
	}
	while (fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);
		struct tg_gc_run r;
		const char *why;

		lineno++;
		if (len && line[len - 1] == '\n')
			line[--len] = '\0';
		else if (!feof(f)) {  /* longer than any line the recorder writes */
			int c;
			while ((c = getc(f)) != EOF && c != '\n')
				;
			why = "line too long";
			goto malformed;
		}
		if (!len || line[0] == '#')
			continue;
		if ((why = gc_parse(&r, line, len)))
			goto malformed;
		if (g->n == g->alloc) {
			size_t na = g->alloc ? 2 * g->alloc : 64;
			struct tg_gc_run *nv = realloc(g->v, na * sizeof(*nv));
			if (!nv) {
				tg_error(d, "out of memory");
				goto close;
			}
			g->v = nv;
			g->alloc = na;
		}
		g->v[g->n++] = r;
		continue;
malformed:
		if (tg_malformed(d, path, lineno, why) < 0)
			goto close;
	}
	if (ferror(f)) {
		tg_error(d, "cannot read '%s'", path);
		goto close;
	}
	ret = 0;
close:
	fclose(f);
free_path:
	free(path);
	return ret;
}

size_t tg_gc_runs_within(const struct tg_gc_runs *g, unsigned long long native_id,
			 double start, double end, long long *collected)
{
	size_t n = 0;
	long long objects = 0;

	for (size_t i = 0; i < g->n; i++) {
		const struct tg_gc_run *r = &g->v[i];
		if (r->native_id != native_id || r->start < start - TG_GC_SLACK
		    || r->stop > end + TG_GC_SLACK)
			continue;
		n++;
		objects += r->collected > 0 ? r->collected : 0;
	}
	if (collected)
		*collected = objects;
	return n;
}
