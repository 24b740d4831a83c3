/*
 * aggfile.c - aggregate.tga's reader (aggfile.h; docs/formats.md "Aggregate").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aggfile.h"
#include "capture_read.h"

#define AGG_MAGIC "threadgraph-aggregate "  /* then the version, 1 or 2 */
#define AGG_MAX_BUCKET (1u << 20)           /* a bucket index past this is not ours */
#define AGG_MAX_WIDTH_US 100000000000000LL  /* about three years */
#define AGG_MAX_TIME_US 4102444800000000LL  /* 2100-01-01 */

/* Grows *V (*ALLOC elements of SIZE) to hold N + 1; 0 or -1. */
static int agg_grow(void **v, size_t *alloc, size_t n, size_t size)
{
	size_t cap;
	void *p;

	if (n < *alloc)
		return 0;
	cap = *alloc ? *alloc * 2 : 16;
	if (cap > SIZE_MAX / size)
		return -1;
	if (!(p = realloc(*v, cap * size)))
		return -1;
	*v = p;
	*alloc = cap;
	return 0;
}

/* A decimal field at *P (before END), then a space or END; 0 or -1. */
static int agg_u64(const char **p, const char *end, uint64_t *v)
{
	const char *s = *p;
	uint64_t x = 0;

	if (s >= end || *s < '0' || *s > '9')
		return -1;
	for (; s < end && *s >= '0' && *s <= '9'; s++) {
		if (x > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -1;
		x = x * 10 + (uint64_t)(*s - '0');
	}
	if (s < end) {
		if (*s != ' ')
			return -1;
		s++;
	}
	*p = s;
	*v = x;
	return 0;
}

static int agg_i64(const char **p, const char *end, int64_t *v)
{
	int neg = *p < end && **p == '-';
	uint64_t x;

	if (neg)
		(*p)++;
	if (agg_u64(p, end, &x) < 0 || x > (uint64_t)INT64_MAX + (uint64_t)neg)
		return -1;
	*v = neg ? (int64_t)(0 - x) : (int64_t)x;
	return 0;
}

static int agg_u32(const char **p, const char *end, uint32_t *v)
{
	uint64_t x;
	if (agg_u64(p, end, &x) < 0 || x > UINT32_MAX)
		return -1;
	*v = (uint32_t)x;
	return 0;
}

/* A copy of [S, E) as a string, or NULL (out of memory, or a NUL inside). */
static char *agg_str(const char *s, const char *e, int *nul)
{
	char *c;
	*nul = memchr(s, '\0', (size_t)(e - s)) != NULL;
	if (*nul || !(c = malloc((size_t)(e - s) + 1)))
		return NULL;
	memcpy(c, s, (size_t)(e - s));
	c[e - s] = '\0';
	return c;
}

/* One line L (without its newline) of kind KEY; returns NULL or why it is
 * malformed ("out of memory" included). */
static const char *agg_line(struct tg_aggfile *a, const char *l, const char *end)
{
	struct tg_agg_rthread *t = a->nt ? &a->t[a->nt - 1] : NULL;
	const char *p;
	int nul;

	if (end - l >= 9 && !memcmp(l, "start_us ", 9)) {
		p = l + 9;
		if (agg_i64(&p, end, &a->start_us) < 0 || p != end || a->start_us < 0
		    || a->start_us > AGG_MAX_TIME_US)
			return "a start_us that is not a time";
		return NULL;
	}
	if (end - l >= 7 && !memcmp(l, "end_us ", 7)) {
		p = l + 7;
		if (agg_i64(&p, end, &a->end_us) < 0 || p != end || a->end_us < 0
		    || a->end_us > AGG_MAX_TIME_US)
			return "an end_us that is not a time";
		return NULL;
	}
	if (end - l >= 7 && !memcmp(l, "memory ", 7)) {
		size_t n = (size_t)(end - l - 7);
		if (!((n == 6 && !memcmp(l + 7, "thread", 6)) || (n == 7 && !memcmp(l + 7, "process", 7))
		      || (n == 3 && !memcmp(l + 7, "rss", 3))))
			return "a memory mode that is not thread, process or rss";
		memcpy(a->memory, l + 7, n);
		a->memory[n] = '\0';
		return NULL;
	}
	if (end - l < 2 || l[1] != ' ')
		return "a line of no known kind";
	p = l + 2;
	switch (l[0]) {
	case 't': {
		struct tg_agg_rthread nt;
		uint64_t id;
		memset(&nt, 0, sizeof(nt));
		if (agg_u64(&p, end, &id) < 0)
			return "a thread line without its native id";
		nt.native_id = (unsigned long)id;
		if (agg_u64(&p, end, &nt.dropped) < 0 || p >= end)
			return "a thread line without its drop count and name";
		if (!(nt.base = agg_str(p, end, &nul)))
			return nul ? "a thread name with a NUL byte" : "out of memory";
		if (!tg_capture_base_ok(nt.base, strlen(nt.base))) {
			free(nt.base);
			return "a thread name that is no file base name (the recorder writes "
			       "'/', control bytes and a leading '.' as %HH)";
		}
		if (agg_grow((void **)&a->t, &a->t_alloc, a->nt, sizeof(*a->t)) < 0
		    || !(nt.nodes = calloc(16, sizeof(*nt.nodes)))) {
			free(nt.base);
			return "out of memory";
		}
		nt.nodes_alloc = 16;
		nt.n_nodes = 1;  /* node 0: the thread */
		a->t[a->nt++] = nt;
		return NULL;
	}
	case 'n': {
		struct tg_agg_rnode n;
		if (!t)
			return "a node before any thread line";
		if (agg_u32(&p, end, &n.parent) < 0 || agg_u32(&p, end, &n.func) < 0
		    || agg_u32(&p, end, &n.line) < 0 || agg_u64(&p, end, &n.count) < 0
		    || agg_i64(&p, end, &n.total) < 0 || agg_i64(&p, end, &n.max) < 0
		    || agg_i64(&p, end, &n.time_us) < 0 || p != end)
			return "a node line that is not PARENT FUNC LINE COUNT TOTAL MAX TIME";
		if (n.parent >= t->n_nodes)
			return "a node whose parent does not come before it";
		if (n.func == 0)
			return "a node without a function";
		if (t->n_nodes >= UINT32_MAX
		    || agg_grow((void **)&t->nodes, &t->nodes_alloc, t->n_nodes,
				sizeof(*t->nodes)) < 0)
			return "out of memory";
		t->nodes[t->n_nodes++] = n;
		return NULL;
	}
	case 'm': {
		if (!t || a->version < 2)
			return a->version < 2 ? "a folded entry in a version 1 file"
					      : "a folded count before any thread line";
		if (t->folded || t->n_nodes > 1 || t->width_us)
			return "a folded count not right after its thread line";
		if (agg_u64(&p, end, &t->folded) < 0 || p != end || !t->folded)
			return "a folded count that is not a positive number";
		return NULL;
	}
	case 'c': {
		if (!t)
			return "a curve before any thread line";
		if (agg_i64(&p, end, &t->width_us) < 0 || p != end || t->width_us <= 0
		    || t->width_us > AGG_MAX_WIDTH_US)
			return "a curve width that is not a positive number of microseconds";
		return NULL;
	}
	case 'b': {
		uint32_t idx;
		struct tg_agg_rbucket b;
		if (!t || !t->width_us)
			return "a bucket before its curve line";
		if (agg_u32(&p, end, &idx) < 0 || agg_i64(&p, end, &b.min) < 0
		    || agg_i64(&p, end, &b.max) < 0 || p != end)
			return "a bucket line that is not INDEX MIN MAX";
		if (idx >= AGG_MAX_BUCKET || b.min > b.max)
			return "a bucket out of range";
		if (__builtin_mul_overflow((int64_t)idx, t->width_us, &b.t_us)
		    || __builtin_add_overflow(b.t_us, a->start_us, &b.t_us) || b.t_us > AGG_MAX_TIME_US)
			return "a bucket whose time does not fit";
		if (t->nb && b.t_us <= t->b[t->nb - 1].t_us)
			return "buckets out of order";
		if (agg_grow((void **)&t->b, &t->b_alloc, t->nb, sizeof(*t->b)) < 0)
			return "out of memory";
		t->b[t->nb++] = b;
		return NULL;
	}
	case 'f': {
		uint32_t id;
		const char *tab;
		struct tg_agg_rfunc f;
		if (agg_u32(&p, end, &id) < 0 || id != a->nf + 1)
			return "a function whose id is not the next one";
		if (end - p >= 3 && !memcmp(p, "py ", 3)) {
			f.is_c = 0;
			p += 3;
		} else if (end - p >= 2 && !memcmp(p, "c ", 2)) {
			f.is_c = 1;
			p += 2;
		} else {
			return "a function that is neither py nor c";
		}
		if (!(tab = memchr(p, '\t', (size_t)(end - p))))
			return "a function line without FILE<tab>FUNCTION";
		if (!(f.file = agg_str(p, tab, &nul)))
			return nul ? "a function with a NUL byte" : "out of memory";
		if (!(f.func = agg_str(tab + 1, end, &nul))) {
			free(f.file);
			return nul ? "a function with a NUL byte" : "out of memory";
		}
		if (agg_grow((void **)&a->f, &a->f_alloc, a->nf, sizeof(*a->f)) < 0) {
			free(f.file);
			free(f.func);
			return "out of memory";
		}
		a->f[a->nf++] = f;
		return NULL;
	}
	}
	return "a line of no known kind";
}

int tg_aggfile_parse(struct tg_aggfile *a, const char *path, const char *buf, size_t len,
		     struct tg_diag *d)
{
	const char *p = buf, *end = buf + len;
	unsigned long lineno = 0;
	int ended = 0;

	memset(a, 0, sizeof(*a));
	if (!(a->path = strdup(path)))
		return tg_error(d, "out of memory");
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *why;
		if (!nl)
			return tg_error(d, "%s: cut short at line %lu (an aggregate file ends "
					"with 'end')", path, lineno + 1);
		lineno++;
		if (ended)
			return tg_error(d, "%s:%lu: data after the 'end' line", path, lineno);
		if (lineno == 1) {
			if ((size_t)(nl - p) != sizeof(AGG_MAGIC) || memcmp(p, AGG_MAGIC,
			    sizeof(AGG_MAGIC) - 1) || (p[sizeof(AGG_MAGIC) - 1] != '1'
			    && p[sizeof(AGG_MAGIC) - 1] != '2'))
				return tg_error(d, "%s: not a threadgraph aggregate file (version 1 "
						"or 2)", path);
			a->version = p[sizeof(AGG_MAGIC) - 1] - '0';
		} else if (nl - p == 3 && !memcmp(p, "end", 3)) {
			ended = 1;
		} else if ((why = agg_line(a, p, nl))) {
			return tg_error(d, "%s:%lu: %s", path, lineno, why);
		}
		p = nl + 1;
	}
	if (!ended)
		return tg_error(d, "%s: cut short (an aggregate file ends with 'end')", path);
	if (!a->start_us || !a->memory[0])
		return tg_error(d, "%s: no start_us or memory line", path);
	for (size_t i = 0; i < a->nt; i++)
		for (size_t j = 1; j < a->t[i].n_nodes; j++)
			if (a->t[i].nodes[j].func > a->nf)
				return tg_error(d, "%s: thread '%s' names function %u, which is not "
						"defined", path, a->t[i].base, a->t[i].nodes[j].func);
	return 0;
}

int tg_aggfile_is_run(const char *path)
{
	struct stat st;
	char *p;
	int r;

	if (stat(path, &st) < 0)
		return 0;
	if (!S_ISDIR(st.st_mode)) {
		const char *b = strrchr(path, '/');
		return strcmp(b ? b + 1 : path, TG_AGG_FILE) == 0;
	}
	if (asprintf(&p, "%s/%s", path, TG_AGG_FILE) < 0)
		return 0;
	r = stat(p, &st) == 0 && S_ISREG(st.st_mode);
	free(p);
	return r;
}

int tg_aggfile_load(struct tg_aggfile *a, const char *path, struct tg_diag *d)
{
	struct stat st;
	char *file = NULL, *buf = NULL;
	FILE *f = NULL;
	int ret = -1;

	memset(a, 0, sizeof(*a));
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		if (asprintf(&file, "%s/%s", path, TG_AGG_FILE) < 0)
			return tg_error(d, "out of memory");
	} else if (!(file = strdup(path))) {
		return tg_error(d, "out of memory");
	}
	{
		/* O_NONBLOCK: a FIFO is refused below, not waited on */
		int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (fd >= 0 && !(f = fdopen(fd, "rb")))
			close(fd);
	}
	if (!f || fstat(fileno(f), &st) < 0) {
		tg_error(d, "%s: %s", file, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > TG_AGG_FILE_MAX) {
		tg_error(d, "%s: not a regular file of at most %zu bytes", file, TG_AGG_FILE_MAX);
		goto out;
	}
	if (!(buf = malloc((size_t)st.st_size + 1))) {
		tg_error(d, "out of memory");
		goto out;
	}
	if (fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
		tg_error(d, "%s: read error", file);
		goto out;
	}
	ret = tg_aggfile_parse(a, file, buf, (size_t)st.st_size, d);
out:
	if (f)
		fclose(f);
	free(buf);
	free(file);
	return ret;
}

void tg_aggfile_release(struct tg_aggfile *a)
{
	for (size_t i = 0; i < a->nt; i++) {
		free(a->t[i].base);
		free(a->t[i].nodes);
		free(a->t[i].b);
	}
	for (size_t i = 0; i < a->nf; i++) {
		free(a->f[i].file);
		free(a->f[i].func);
	}
	free(a->t);
	free(a->f);
	free(a->path);
	memset(a, 0, sizeof(*a));
}
