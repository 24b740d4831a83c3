/*
 * snapshot.c - reading heap snapshots and accounting summaries, sorting and
 * diffing snapshots (see snapshot.h).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "linereader.h"
#include "snapshot.h"

const char *const tg_sum_figures[TG_SUM_NFIG] = {
	"total_requested_bytes", "freed_bytes", "alloc_calls", "free_calls",
	"live_bytes", "peak_bytes",
};

static int is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

char *tg_acct_file(const char *path, const char *name, struct tg_diag *d)
{
	char *p;

	if (!is_dir(path)) {
		if (!(p = strdup(path)))
			tg_error(d, "out of memory");
		return p;
	}
	if (asprintf(&p, "%s/%s", path, name) < 0) {
		tg_error(d, "out of memory");
		return NULL;
	}
	if (is_file(p))
		return p;
	free(p);
	if (asprintf(&p, "%s/%s.gz", path, name) < 0) {
		tg_error(d, "out of memory");
		return NULL;
	}
	if (is_file(p))
		return p;
	free(p);
	tg_error(d, "no %s in '%s' (was the run made with accounting on?)", name, path);
	return NULL;
}

/* Parses a signed decimal at *p, moving *p past it; 0 or -1. */
static int parse_i64(const char **p, const char *end, int64_t *v)
{
	const char *s = *p;
	int neg = 0;
	uint64_t x = 0;

	if (s < end && *s == '-') {
		neg = 1;
		s++;
	}
	if (s == end || *s < '0' || *s > '9')
		return -1;
	while (s < end && *s >= '0' && *s <= '9') {
		if (x > (UINT64_MAX - 9) / 10)
			return -1;
		x = x * 10 + (uint64_t)(*s++ - '0');
	}
	if (x > (uint64_t)INT64_MAX)
		return -1;
	*v = neg ? -(int64_t)x : (int64_t)x;
	*p = s;
	return 0;
}

/* The run directory's snapshot to read: the highest-numbered "final" one, else
 * the highest-numbered one.  Malloc'ed path, or NULL with d->msg. */
static char *snapshot_in_dir(const char *dir, struct tg_diag *d)
{
	DIR *dh = opendir(dir);
	struct dirent *e;
	long best = -1, best_final = -1;
	char *name = NULL, *name_final = NULL, *p = NULL;

	if (!dh) {
		tg_error(d, "unable to open '%s': %s", dir, strerror(errno));
		return NULL;
	}
	while ((e = readdir(dh))) {
		char *end;
		long n;
		if (strncmp(e->d_name, "snapshot-", 9))
			continue;
		n = strtol(e->d_name + 9, &end, 10);
		if (end == e->d_name + 9 || *end != '-' || strstr(e->d_name, ".tmp"))
			continue;
		if (n > best) {
			best = n;
			free(name);
			name = strdup(e->d_name);
		}
		if ((!strcmp(end, "-final") || !strcmp(end, "-final.gz")) && n > best_final) {
			best_final = n;
			free(name_final);
			name_final = strdup(e->d_name);
		}
	}
	closedir(dh);
	if (best < 0) {
		tg_error(d, "no snapshot in '%s' (was the run made with accounting on?)", dir);
		goto out;
	}
	if (asprintf(&p, "%s/%s", dir, name_final ? name_final : name) < 0) {
		p = NULL;
		tg_error(d, "out of memory");
	}
out:
	free(name);
	free(name_final);
	return p;
}

void tg_snapshot_release(struct tg_snapshot *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->sites[i].site);
	free(s->sites);
	free(s->label);
	free(s->path);
	memset(s, 0, sizeof(*s));
}

/* Handles a "# key: value" header line. */
static int snapshot_header(struct tg_snapshot *s, const char *line, size_t len)
{
	if (len > 9 && !memcmp(line, "# label: ", 9) && !s->label) {
		s->label = strndup(line + 9, len - 9);
		return s->label ? 0 : -1;
	}
	return 0;
}

int tg_snapshot_read(struct tg_snapshot *s, const char *path, struct tg_diag *d)
{
	struct tg_lr lr;
	const char *line;
	size_t len;
	int r, ret = -1, seen_header = 0;

	memset(s, 0, sizeof(*s));
	s->path = is_dir(path) ? snapshot_in_dir(path, d) : strdup(path);
	if (!s->path) {
		if (!is_dir(path))
			tg_error(d, "out of memory");
		return -1;
	}
	if (tg_lr_open(&lr, s->path, 0, d) < 0)
		goto out_release;
	while ((r = tg_lr_next(&lr, &line, &len, d)) == 1) {
		struct tg_snap_site *e;
		const char *p = line, *end = line + len;
		int64_t v[4];
		int k;

		if (len && line[0] == '#') {
			if (len >= 24 && !memcmp(line, "# threadgraph snapshot ", 23))
				seen_header = 1;
			if (snapshot_header(s, line, len) < 0) {
				tg_error(d, "out of memory");
				goto out;
			}
			continue;
		}
		if (!len)
			continue;
		for (k = 0; k < 4; k++) {
			if (parse_i64(&p, end, &v[k]) < 0 || p == end || *p != ' ')
				break;
			p++;
		}
		if (k < 4 || p == end || lr.overlong) {
			if (tg_malformed(d, s->path, lr.lineno, "not a snapshot line") < 0)
				goto out;
			continue;
		}
		if (s->n == s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 256;
			struct tg_snap_site *ns = realloc(s->sites, cap * sizeof(*ns));
			if (!ns) {
				tg_error(d, "out of memory");
				goto out;
			}
			s->sites = ns;
			s->cap = cap;
		}
		e = &s->sites[s->n];
		e->live_bytes = v[0];
		e->live_count = v[1];
		e->total_bytes = v[2];
		e->total_count = v[3];
		e->site = strndup(p, (size_t)(end - p));
		if (!e->site) {
			tg_error(d, "out of memory");
			goto out;
		}
		s->n++;
		s->live_bytes += v[0];
		s->total_bytes += v[2];
	}
	if (r < 0)
		goto out;
	if (!seen_header) {
		tg_error(d, "'%s' is not a threadgraph snapshot (no '# threadgraph snapshot' line)",
			 s->path);
		goto out;
	}
	ret = 0;
out:
	tg_lr_release(&lr);
out_release:
	if (ret < 0)
		tg_snapshot_release(s);
	return ret;
}

static int cmp_live(const void *a, const void *b)
{
	const struct tg_snap_site *x = a, *y = b;
	if (x->live_bytes != y->live_bytes)
		return x->live_bytes < y->live_bytes ? 1 : -1;
	if (x->live_count != y->live_count)
		return x->live_count < y->live_count ? 1 : -1;
	return strcmp(x->site, y->site);
}

static int cmp_total(const void *a, const void *b)
{
	const struct tg_snap_site *x = a, *y = b;
	if (x->total_bytes != y->total_bytes)
		return x->total_bytes < y->total_bytes ? 1 : -1;
	if (x->total_count != y->total_count)
		return x->total_count < y->total_count ? 1 : -1;
	return strcmp(x->site, y->site);
}

void tg_snapshot_sort(struct tg_snapshot *s, enum tg_snap_key key)
{
	if (s->n)
		qsort(s->sites, s->n, sizeof(*s->sites), key == TG_SNAP_TOTAL ? cmp_total : cmp_live);
}

static int cmp_site_ptr(const void *a, const void *b)
{
	const struct tg_snap_site *const *x = a, *const *y = b;
	return strcmp((*x)->site, (*y)->site);
}

static int cmp_delta(const void *a, const void *b)
{
	const struct tg_snap_delta *x = a, *y = b;
	if (x->live_bytes != y->live_bytes)
		return x->live_bytes < y->live_bytes ? 1 : -1;
	if (x->total_bytes != y->total_bytes)
		return x->total_bytes < y->total_bytes ? 1 : -1;
	return strcmp(x->site, y->site);
}

/* Pointers to S's sites sorted by site text; NULL when out of memory. */
static const struct tg_snap_site **by_site(const struct tg_snapshot *s)
{
	const struct tg_snap_site **v = malloc((s->n ? s->n : 1) * sizeof(*v));
	if (!v)
		return NULL;
	for (size_t i = 0; i < s->n; i++)
		v[i] = &s->sites[i];
	if (s->n)
		qsort(v, s->n, sizeof(*v), cmp_site_ptr);
	return v;
}

int tg_snapshot_diff(const struct tg_snapshot *base, const struct tg_snapshot *s,
		     struct tg_snap_delta **out, size_t *n, struct tg_diag *d)
{
	const struct tg_snap_site **a = by_site(base), **b = by_site(s);
	struct tg_snap_delta *v = malloc((base->n + s->n + 1) * sizeof(*v));
	size_t i = 0, j = 0, k = 0;
	int ret = -1;

	if (!a || !b || !v) {
		tg_error(d, "out of memory");
		free(v);
		goto out;
	}
	/* Merge the two site-sorted lists; a site in one snapshot only has 0 in the other. */
	while (i < base->n || j < s->n) {
		const struct tg_snap_site *x = NULL, *y = NULL;
		int c = i == base->n ? 1 : j == s->n ? -1 : strcmp(a[i]->site, b[j]->site);
		struct tg_snap_delta *e = &v[k];
		if (c <= 0)
			x = a[i++];
		if (c >= 0)
			y = b[j++];
		e->base_live = x ? x->live_bytes : 0;
		e->live = y ? y->live_bytes : 0;
		e->live_bytes = e->live - e->base_live;
		e->live_count = (y ? y->live_count : 0) - (x ? x->live_count : 0);
		e->total_bytes = (y ? y->total_bytes : 0) - (x ? x->total_bytes : 0);
		e->total_count = (y ? y->total_count : 0) - (x ? x->total_count : 0);
		e->site = y ? y->site : x->site;
		if (e->live_bytes || e->live_count || e->total_bytes || e->total_count)
			k++;
	}
	if (k)
		qsort(v, k, sizeof(*v), cmp_delta);
	*out = v;
	*n = k;
	ret = 0;
out:
	free(a);
	free(b);
	return ret;
}

/* --- summary.txt --------------------------------------------------------- */

void tg_summary_release(struct tg_summary *s)
{
	for (size_t i = 0; i < s->n_threads; i++)
		free(s->threads[i].name);
	for (size_t i = 0; i < s->n_windows; i++)
		free(s->windows[i].name);
	free(s->threads);
	free(s->windows);
	memset(s, 0, sizeof(*s));
}

/* The entity called NAME in *V (added if new); NULL when out of memory. */
static struct tg_sum_entity *entity(struct tg_sum_entity **v, size_t *n, const char *name,
				    size_t len)
{
	struct tg_sum_entity *nv;
	for (size_t i = 0; i < *n; i++)
		if (strlen((*v)[i].name) == len && !memcmp((*v)[i].name, name, len))
			return &(*v)[i];
	nv = realloc(*v, (*n + 1) * sizeof(*nv));
	if (!nv)
		return NULL;
	*v = nv;
	memset(&nv[*n], 0, sizeof(nv[*n]));
	if (!(nv[*n].name = strndup(name, len)))
		return NULL;
	return &nv[(*n)++];
}

static int figure_index(const char *key, size_t len)
{
	for (int i = 0; i < TG_SUM_NFIG; i++)
		if (strlen(tg_sum_figures[i]) == len && !memcmp(tg_sum_figures[i], key, len))
			return i;
	return -1;
}

/* Splits LINE at tabs into at most MAX fields; returns the count. */
static int split_tabs(const char *line, size_t len, const char **f, size_t *fl, int max)
{
	int n = 0;
	const char *p = line, *end = line + len;
	while (n < max) {
		const char *t = n == max - 1 ? NULL : memchr(p, '\t', (size_t)(end - p));
		f[n] = p;
		fl[n] = (size_t)((t ? t : end) - p);
		n++;
		if (!t)
			break;
		p = t + 1;
	}
	return n;
}

int tg_summary_read(struct tg_summary *s, const char *path, struct tg_diag *d)
{
	struct tg_lr lr;
	const char *line;
	size_t len;
	char *file;
	int r, ret = -1, seen_header = 0;

	memset(s, 0, sizeof(*s));
	if (!(file = tg_acct_file(path, "summary.txt", d)))
		return -1;
	if (tg_lr_open(&lr, file, 0, d) < 0) {
		free(file);
		return -1;
	}
	while ((r = tg_lr_next(&lr, &line, &len, d)) == 1) {
		const char *f[5], *p;
		size_t fl[5];
		int n, k;
		int64_t v, bin;
		struct tg_sum_entity *e;

		if (len && line[0] == '#') {
			if (len >= 22 && !memcmp(line, "# threadgraph summary ", 22))
				seen_header = 1;
			continue;
		}
		if (!len)
			continue;
		n = split_tabs(line, len, f, fl, 5);
		if (n == 3 && fl[0] == 7 && !memcmp(f[0], "process", 7)) {
			k = figure_index(f[1], fl[1]);
			p = f[2];
			if (k >= 0 && !parse_i64(&p, f[2] + fl[2], &v) && p == f[2] + fl[2]) {
				s->process.fig[k] = v;
				continue;
			}
		} else if (n == 4 && ((fl[0] == 6 && !memcmp(f[0], "thread", 6))
				      || (fl[0] == 6 && !memcmp(f[0], "window", 6)))) {
			int thr = f[0][0] == 't';
			k = figure_index(f[1], fl[1]);
			p = f[2];
			if (k >= 0 && !parse_i64(&p, f[2] + fl[2], &v) && p == f[2] + fl[2]) {
				e = thr ? entity(&s->threads, &s->n_threads, f[3], fl[3])
					: entity(&s->windows, &s->n_windows, f[3], fl[3]);
				if (!e) {
					tg_error(d, "out of memory");
					goto out;
				}
				e->fig[k] = v;
				continue;
			}
		} else if (n == 5 && fl[0] == 4 && !memcmp(f[0], "hist", 4)) {
			int alloc = fl[1] == 5 && !memcmp(f[1], "alloc", 5);
			int freed = fl[1] == 4 && !memcmp(f[1], "free", 4);
			const char *q = f[3];
			p = f[2];
			if ((alloc || freed) && !parse_i64(&p, f[2] + fl[2], &bin) && p == f[2] + fl[2]
			    && bin >= 0 && bin < TG_SUM_BINS && !parse_i64(&q, f[3] + fl[3], &v)
			    && q == f[3] + fl[3]) {
				e = NULL;
				if (fl[4] == 7 && !memcmp(f[4], "process", 7))
					e = &s->process;
				else if (fl[4] > 7 && !memcmp(f[4], "thread ", 7))
					e = entity(&s->threads, &s->n_threads, f[4] + 7, fl[4] - 7);
				if (!e) {
					if (tg_malformed(d, file, lr.lineno, "unknown histogram owner") < 0)
						goto out;
					continue;
				}
				(alloc ? e->hist_alloc : e->hist_free)[bin] = v;
				continue;
			}
		}
		if (tg_malformed(d, file, lr.lineno, "not a summary line") < 0)
			goto out;
	}
	if (r < 0)
		goto out;
	if (!seen_header) {
		tg_error(d, "'%s' is not a threadgraph summary", file);
		goto out;
	}
	ret = 0;
out:
	tg_lr_release(&lr);
	free(file);
	if (ret < 0)
		tg_summary_release(s);
	return ret;
}
