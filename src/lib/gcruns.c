/*
 * gcruns.c - gc.txt read, and the runs within a call (gcruns.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gcruns.h"
#include "records.h"

void tg_gc_runs_init(struct tg_gc_runs *g)
{
	memset(g, 0, sizeof(*g));
}

void tg_gc_runs_release(struct tg_gc_runs *g)
{
	for (size_t i = 0; i < g->n; i++)
		free(g->v[i].family);
	free(g->v);
	tg_gc_runs_init(g);
}

/* Parses "NATIVE_ID START STOP COLLECTED [FAMILY]" (LINE, LEN bytes, no
 * newline; FAMILY the rest of the line, spaces and all) into *r, FAMILY's
 * offset and length in *fam_off, *fam_len (0: none); returns NULL or why it is
 * malformed. */
static const char *gc_parse(struct tg_gc_run *r, const char *line, size_t len, size_t *fam_off,
			    size_t *fam_len)
{
	const char *f[4], *end = line + len, *p = line;
	size_t fl[4];
	long long id;
	int i;

	*fam_off = *fam_len = 0;
	for (i = 0; i < 4; i++) {
		const char *sp = memchr(p, ' ', (size_t)(end - p));
		if (i < 3 && !sp)
			return "not NATIVE_ID START STOP COLLECTED";
		if (i == 3 && sp) {  /* FAMILY follows */
			if (sp + 1 == end)
				return "empty FAMILY";
			*fam_off = (size_t)(sp + 1 - line);
			*fam_len = (size_t)(end - sp - 1);
		}
		f[i] = p;
		fl[i] = (size_t)((sp ? sp : end) - p);
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
	char *path = malloc(plen), line[512];  /* a FAMILY: a base name, TG_BASENAME_CAP */
	unsigned long lineno = 0;
	FILE *f;
	int ret = -1;

	if (!path)
		return tg_error(d, "out of memory");
	snprintf(path, plen, "%s/gc.txt", dir);
	{
		/* O_NONBLOCK: a FIFO planted as gc.txt must not make us wait */
		int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		struct stat st;
		if (fd < 0) {
			if (errno == ENOENT || errno == ENOTDIR)
				ret = 0;
			else
				tg_error(d, "cannot open '%s': %s", path, strerror(errno));
			goto free_path;
		}
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			close(fd);
			tg_error(d, "cannot read '%s': not a regular file", path);
			goto free_path;
		}
		if (!(f = fdopen(fd, "r"))) {
			close(fd);
			tg_error(d, "cannot open '%s': %s", path, strerror(errno));
			goto free_path;
		}
	}
	while (fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);
		struct tg_gc_run r;
		const char *why;
		size_t fam_off, fam_len;

		lineno++;
		if (len && line[len - 1] == '\n') {
			line[--len] = '\0';
			if (len && line[len - 1] == '\r')  /* lines may end with \r\n */
				line[--len] = '\0';
		} else if (!feof(f)) {  /* longer than any line the recorder writes */
			int c;
			while ((c = getc(f)) != EOF && c != '\n')
				;
			why = "line too long";
			goto malformed;
		}
		if (!len || line[0] == '#')
			continue;
		if ((why = gc_parse(&r, line, len, &fam_off, &fam_len)))
			goto malformed;
		r.family = NULL;
		if (fam_len && !(r.family = strndup(line + fam_off, fam_len))) {
			tg_error(d, "out of memory");
			goto close;
		}
		if (g->n == g->alloc) {
			size_t na = g->alloc ? 2 * g->alloc : 64;
			struct tg_gc_run *nv = realloc(g->v, na * sizeof(*nv));
			if (!nv) {
				free(r.family);
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

/* The runs of NATIVE_ID (FAMILY NULL) or of the family FAMILY within
 * [start, end]: tg_gc_runs_within and tg_gc_runs_within_family. */
static size_t gc_within(const struct tg_gc_runs *g, unsigned long long native_id,
			const char *family, double start, double end, long long *collected)
{
	size_t n = 0;
	long long objects = 0;

	for (size_t i = 0; i < g->n; i++) {
		const struct tg_gc_run *r = &g->v[i];
		if ((family ? !r->family || strcmp(r->family, family)
			    : r->family || r->native_id != native_id)
		    || r->start < start - TG_GC_SLACK || r->stop > end + TG_GC_SLACK)
			continue;
		n++;
		objects += r->collected > 0 ? r->collected : 0;
	}
	if (collected)
		*collected = objects;
	return n;
}

size_t tg_gc_runs_within(const struct tg_gc_runs *g, unsigned long long native_id,
			 double start, double end, long long *collected)
{
	return gc_within(g, native_id, NULL, start, end, collected);
}

size_t tg_gc_runs_within_family(const struct tg_gc_runs *g, const char *family,
				double start, double end, long long *collected)
{
	return gc_within(g, 0, family, start, end, collected);
}
