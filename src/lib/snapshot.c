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
#include "runinfo.h"
#include "snapshot.h"

const char *const tg_sum_figures[TG_SUM_NFIG] = TG_SUM_FIGURES_INIT;

/* a + b and a - b, saturated at the int64 limits: a damaged or hostile file may
 * hold counters near them (sums of sites, differences of two snapshots). */
static inline int64_t snap_add(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_add_overflow(a, b, &r))
		return b > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

static inline int64_t snap_sub(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_sub_overflow(a, b, &r))
		return b < 0 ? INT64_MAX : INT64_MIN;
	return r;
}

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
	/* a run without accounting (or a forked child's) never writes it, ended or not */
	if (!d->probe && tg_run_no_accounting(path, name, d))
		;  /* a forked child's, or a run without accounting: said */
	else if (!d->probe && tg_run_end_state(path, NULL) == 0)
		tg_error(d, "no %s in '%s': " TG_RUN_UNENDED ", and a run writes it at its end",
			 name, path);
	else
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

/* Whether NAME ends a snapshot file name with SUFFIX (optionally gzipped). */
static int has_suffix(const char *end, const char *suffix)
{
	size_t n = strlen(suffix);
	return !strncmp(end, suffix, n) && (!end[n] || !strcmp(end + n, ".gz"));
}

/* *SLOT becomes a copy of NAME and *BEST N; -1 when out of memory. */
static int take_name(char **slot, const char *name, long *best, long n)
{
	char *copy = strdup(name);
	if (!copy)
		return -1;
	free(*slot);
	*slot = copy;
	*best = n;
	return 0;
}

char *tg_snapshot_find(const char *dir, enum tg_snap_pick pick, struct tg_diag *d)
{
	DIR *dh = opendir(dir);
	struct dirent *e;
	long best = -1, best_final = -1;
	char *name = NULL, *name_final = NULL, *p = NULL;
	int oom;
	const size_t plen = TG_LIT_LEN(TG_SNAP_FILE_PREFIX);

	if (!dh) {
		tg_error(d, "unable to open '%s': %s", dir, strerror(errno));
		return NULL;
	}
	while ((e = readdir(dh))) {
		char *end;
		long n;
		if (strncmp(e->d_name, TG_SNAP_FILE_PREFIX, plen))
			continue;
		n = strtol(e->d_name + plen, &end, 10);
		if (end == e->d_name + plen || *end != '-' || strstr(e->d_name, ".tmp"))
			continue;
		if (pick == TG_SNAP_PICK_PEAK && !has_suffix(end, "-" TG_SNAP_PEAK_LABEL))
			continue;
		if (n > best && take_name(&name, e->d_name, &best, n) < 0)
			break;
		if (pick == TG_SNAP_PICK_LAST && has_suffix(end, TG_SNAP_FINAL_SUFFIX)
		    && n > best_final && take_name(&name_final, e->d_name, &best_final, n) < 0)
			break;
	}
	oom = e != NULL;  /* the loop ends early only when a copy failed */
	closedir(dh);
	if (oom) {
		tg_error(d, "out of memory");
		goto out;
	}
	if (best < 0) {
		if (pick == TG_SNAP_PICK_PEAK)
			tg_error(d, "no live-at-peak snapshot (snapshot-N-peak) in '%s': the peak "
				 "metric needs a run made with accounting on (threadgraph run "
				 "--accounting, ProcessProfile(accounting=True)) by a threadgraph "
				 "that records the peak", dir);
		else if (!d->probe && tg_run_no_accounting(dir, "snapshot", d))
			;  /* a forked child's, or a run without accounting: said */
		else if (!d->probe && tg_run_end_state(dir, NULL) == 0)
			tg_error(d, "no snapshot in '%s': " TG_RUN_UNENDED ", and a run writes "
				 "its final snapshot at its end (a threshold snapshot when "
				 "crossed: none was)", dir);
		else
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

static void release_sites(struct tg_snapshot *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->sites[i].site);
	free(s->sites);
	s->sites = NULL;
	s->n = s->cap = 0;
}

void tg_snapshot_release(struct tg_snapshot *s)
{
	release_sites(s);
	for (size_t i = 0; i < s->n_nodes; i++)
		free(s->nodes[i].call);
	for (size_t i = 0; i < s->n_threads; i++)
		free(s->threads[i]);
	free(s->nodes);
	free(s->threads);
	free(s->thread_ix);
	free(s->label);
	free(s->run);
	free(s->path);
	memset(s, 0, sizeof(*s));
}

/* What the header lines say, kept until the nodes start. */
struct snap_hdr {
	char *pid, *run_start;   /* owned */
	int threads_sorted;      /* threads[] sorted by ix since the last add */
};

/* Parses an unsigned decimal at *p (for ids); 0 or -1. */
static int parse_u(const char **p, const char *end, uint64_t *v)
{
	int64_t x;
	if (*p < end && **p == '-')
		return -1;
	if (parse_i64(p, end, &x) < 0)
		return -1;
	*v = (uint64_t)x;
	return 0;
}

/* Whether TEXT (LEN bytes) holds a control character: names and calls are
 * written escaped, so one there is a damaged or hostile file (and would reach
 * the terminal as is). */
static int has_control(const char *text, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)text[i] < 0x20 || text[i] == 0x7f)
			return 1;
	return 0;
}

/* Adds thread IX called NAME (LEN bytes); 0, or -1 when out of memory. */
static int add_thread(struct tg_snapshot *s, uint64_t ix, const char *name, size_t len)
{
	char **nt = realloc(s->threads, (s->n_threads + 1) * sizeof(*nt));
	uint64_t *ni;
	if (!nt)
		return -1;
	s->threads = nt;
	ni = realloc(s->thread_ix, (s->n_threads + 1) * sizeof(*ni));
	if (!ni)
		return -1;
	s->thread_ix = ni;
	if (!(nt[s->n_threads] = strndup(name, len)))
		return -1;
	ni[s->n_threads++] = ix;
	return 0;
}

/* Whether LINE (LEN bytes) is the header line of KEY with a non-empty value:
 * "# KEY: value" (tg_snapshot.h). */
#define HDR_IS(line, len, key) \
	((len) > TG_LIT_LEN(TG_SNAP_HDR(key)) \
	 && !memcmp((line), TG_SNAP_HDR(key), TG_LIT_LEN(TG_SNAP_HDR(key))))
/* The value of a header line HDR_IS matched. */
#define HDR_VAL(line, key) ((line) + TG_LIT_LEN(TG_SNAP_HDR(key)))

/* Handles a "# key: value" header line: 0, 1 when malformed, -1 out of memory. */
static int snapshot_header(struct tg_snapshot *s, struct snap_hdr *h, const char *line,
			   size_t len)
{
	const char *end = line + len, *p;
	uint64_t ix;

	if (HDR_IS(line, len, TG_SNAP_KEY_LABEL) && !s->label) {
		p = HDR_VAL(line, TG_SNAP_KEY_LABEL);
		if (has_control(p, (size_t)(end - p)))
			return 1;  /* it would be printed */
		s->label = strndup(p, (size_t)(end - p));
		return s->label ? 0 : -1;
	}
	if (HDR_IS(line, len, TG_SNAP_KEY_SAMPLED)) {
		p = HDR_VAL(line, TG_SNAP_KEY_SAMPLED);
		return parse_i64(&p, end, &s->sampled) < 0 || p != end || s->sampled < 0;
	}
	if (HDR_IS(line, len, TG_SNAP_KEY_PID) && !h->pid) {
		p = HDR_VAL(line, TG_SNAP_KEY_PID);
		return (h->pid = strndup(p, (size_t)(end - p))) ? 0 : -1;
	}
	if (HDR_IS(line, len, TG_SNAP_KEY_RUN_START) && !h->run_start) {
		p = HDR_VAL(line, TG_SNAP_KEY_RUN_START);
		return (h->run_start = strndup(p, (size_t)(end - p))) ? 0 : -1;
	}
	if (HDR_IS(line, len, TG_SNAP_KEY_THREAD)) {
		if (s->n_nodes)  /* nodes already point into the table */
			return 1;
		p = HDR_VAL(line, TG_SNAP_KEY_THREAD);
		if (parse_u(&p, end, &ix) < 0 || p == end || *p != ' ' || p + 1 == end
		    || has_control(p + 1, (size_t)(end - p - 1)))
			return 1;
		h->threads_sorted = 0;
		return add_thread(s, ix, p + 1, (size_t)(end - p - 1));
	}
	return 0;
}

static int cmp_thread_ix(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;
	return *x < *y ? -1 : *x > *y;
}

/* Sorts the thread table by ix (names follow their ix). 0 or -1 (no memory). */
static int sort_threads(struct tg_snapshot *s)
{
	struct { uint64_t ix; char *name; } *v;
	size_t n = s->n_threads;

	if (n < 2)
		return 0;
	if (!(v = malloc(n * sizeof(*v))))
		return -1;
	for (size_t i = 0; i < n; i++) {
		v[i].ix = s->thread_ix[i];
		v[i].name = s->threads[i];
	}
	qsort(v, n, sizeof(*v), cmp_thread_ix);  /* ix is the first member */
	for (size_t i = 0; i < n; i++) {
		s->thread_ix[i] = v[i].ix;
		s->threads[i] = v[i].name;
	}
	free(v);
	return 0;
}

/* Index of thread IX, or TG_SNAP_NONE. */
static size_t find_thread(const struct tg_snapshot *s, uint64_t ix)
{
	size_t lo = 0, hi = s->n_threads;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->thread_ix[mid] == ix)
			return mid;
		if (s->thread_ix[mid] < ix)
			lo = mid + 1;
		else
			hi = mid;
	}
	return TG_SNAP_NONE;
}

/* Index of the node with id ID (ids are increasing), or TG_SNAP_NONE. */
static size_t find_node(const struct tg_snapshot *s, uint64_t id)
{
	size_t lo = 0, hi = s->n_nodes;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->nodes[mid].id == id)
			return mid;
		if (s->nodes[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return TG_SNAP_NONE;
}

/* Parses "- " or "N " at *p; *v = TG_SNAP_NONE for "-", *is_num says which. */
static int parse_ref(const char **p, const char *end, uint64_t *v, int *is_num)
{
	if (*p < end && **p == '-') {
		(*p)++;
		*is_num = 0;
	} else {
		if (parse_u(p, end, v) < 0)
			return -1;
		*is_num = 1;
	}
	if (*p == end || **p != ' ')
		return -1;
	(*p)++;
	return 0;
}

/* Parses one node line of version S->version into E; NULL when fine, else why
 * the line is malformed. */
static const char *parse_node(struct tg_snapshot *s, const char *line, size_t len,
			      struct tg_snap_node *e)
{
	const char *p = line, *end = line + len;
	int64_t v[4];
	uint64_t id = 0, parent = 0, thread = 0;
	int has_parent = 0, has_thread = 0;

	e->parent = e->thread = TG_SNAP_NONE;
	if (s->version >= 2) {
		if (parse_u(&p, end, &id) < 0 || p == end || *p != ' ')
			return "not a snapshot line";
		p++;
		if (parse_ref(&p, end, &parent, &has_parent) < 0
		    || parse_ref(&p, end, &thread, &has_thread) < 0)
			return "not a snapshot line";
		if (s->n_nodes && id <= s->nodes[s->n_nodes - 1].id)
			return "node id not above the previous one";
		if (has_parent && (e->parent = find_node(s, parent)) == TG_SNAP_NONE)
			return "parent node not listed before";
		if (has_thread && (e->thread = find_thread(s, thread)) == TG_SNAP_NONE)
			return "thread not listed in the header";
	}
	for (int k = 0; k < 4; k++) {
		if (parse_i64(&p, end, &v[k]) < 0 || p == end || *p != ' ')
			return "not a snapshot line";
		p++;
	}
	if (p == end)
		return "not a snapshot line";
	if (has_control(p, (size_t)(end - p)))
		return "control character in the call";
	e->id = id;
	e->live_bytes = v[0];
	e->live_count = v[1];
	e->total_bytes = v[2];
	e->total_count = v[3];
	e->call = NULL;
	return NULL;
}

int tg_snapshot_read(struct tg_snapshot *s, const char *path, struct tg_diag *d)
{
	struct tg_lr lr;
	struct snap_hdr h = { NULL, NULL, 1 };
	const char *line;
	size_t len;
	int r, ret = -1;

	memset(s, 0, sizeof(*s));
	s->path = is_dir(path) ? tg_snapshot_find(path, TG_SNAP_PICK_LAST, d) : strdup(path);
	if (!s->path) {
		if (!is_dir(path))
			tg_error(d, "out of memory");
		return -1;
	}
	if (tg_lr_open(&lr, s->path, 0, d) < 0)
		goto out_release;
	while ((r = tg_lr_next(&lr, &line, &len, d)) == 1) {
		struct tg_snap_node e;
		const char *why;

		if (len && line[0] == '#') {
			if (!s->version && len > TG_LIT_LEN(TG_SNAP_MAGIC)
			    && !memcmp(line, TG_SNAP_MAGIC, TG_LIT_LEN(TG_SNAP_MAGIC))) {
				const char *p = line + TG_LIT_LEN(TG_SNAP_MAGIC);
				int64_t ver;
				if (parse_i64(&p, line + len, &ver) < 0 || p != line + len
				    || ver < TG_SNAP_VERSION_MIN || ver > TG_SNAP_VERSION) {
					tg_error(d, "%s:%lu: unsupported snapshot format '%.*s' (this "
						 "threadgraph reads versions 1 and 2)", s->path,
						 lr.lineno, (int)(len > 64 ? 64 : len), line);
					goto out;
				}
				s->version = (int)ver;
				continue;
			}
			r = snapshot_header(s, &h, line, len);
			if (r < 0) {
				tg_error(d, "out of memory");
				goto out;
			}
			if (r > 0 && tg_malformed(d, s->path, lr.lineno, "not a thread or label line") < 0)
				goto out;
			continue;
		}
		if (!len && !lr.overlong)
			continue;
		if (!s->version)
			break;  /* reported below */
		if (!h.threads_sorted) {
			if (sort_threads(s) < 0) {
				tg_error(d, "out of memory");
				goto out;
			}
			h.threads_sorted = 1;
		}
		why = lr.overlong ? "line too long" : parse_node(s, line, len, &e);
		if (why) {
			if (tg_malformed(d, s->path, lr.lineno, why) < 0)
				goto out;
			continue;
		}
		if (s->n_nodes == s->nodes_cap) {
			size_t cap = s->nodes_cap ? s->nodes_cap * 2 : 256;
			struct tg_snap_node *ns = realloc(s->nodes, cap * sizeof(*ns));
			if (!ns) {
				tg_error(d, "out of memory");
				goto out;
			}
			s->nodes = ns;
			s->nodes_cap = cap;
		}
		{
			/* CALL: after the last of the numeric fields. */
			const char *p = line, *end = line + len;
			int fields = s->version >= 2 ? TG_SNAP_NUM_FIELDS_V2 : TG_SNAP_NUM_FIELDS_V1;
			for (int k = 0; k < fields; k++)
				p = (const char *)memchr(p, ' ', (size_t)(end - p)) + 1;
			e.call = strndup(p, (size_t)(end - p));
		}
		if (!e.call) {
			tg_error(d, "out of memory");
			goto out;
		}
		s->nodes[s->n_nodes++] = e;
		s->live_bytes = snap_add(s->live_bytes, e.live_bytes);
		s->total_bytes = snap_add(s->total_bytes, e.total_bytes);
	}
	if (r < 0)
		goto out;
	if (!s->version) {
		tg_error(d, "'%s' is not a threadgraph snapshot (no '# threadgraph snapshot' line)",
			 s->path);
		goto out;
	}
	if (h.pid && h.run_start && asprintf(&s->run, "%s %s", h.pid, h.run_start) < 0) {
		s->run = NULL;
		tg_error(d, "out of memory");
		goto out;
	}
	ret = tg_snapshot_group(s, TG_SNAP_DEPTH_DEFAULT, 0, d);
out:
	free(h.pid);
	free(h.run_start);
	tg_lr_release(&lr);
out_release:
	if (ret < 0)
		tg_snapshot_release(s);
	return ret;
}

int tg_snapshot_same_run(const struct tg_snapshot *a, const struct tg_snapshot *b)
{
	return a->run && b->run && !strcmp(a->run, b->run);
}

/* Orders sites by thread, then context. */
static int cmp_key(const struct tg_snap_site *x, const struct tg_snap_site *y)
{
	int c = strcmp(x->thread, y->thread);
	return c ? c : strcmp(x->site, y->site);
}

static int cmp_key_v(const void *a, const void *b)
{
	return cmp_key(a, b);
}

/* The context of node I: at most DEPTH calls (0: all), innermost first.
 * Malloc'ed, or NULL when out of memory. */
static char *context_text(const struct tg_snapshot *s, size_t i, unsigned depth)
{
	size_t len = 0, cap = 128;
	char *buf = malloc(cap);
	unsigned k = 0;

	if (!buf)
		return NULL;
	for (size_t j = i; j != TG_SNAP_NONE && (!depth || k < depth); j = s->nodes[j].parent, k++) {
		size_t n = strlen(s->nodes[j].call);
		if (len + n + 3 > cap) {
			char *nb;
			while (len + n + 3 > cap)
				cap *= 2;
			if (!(nb = realloc(buf, cap))) {
				free(buf);
				return NULL;
			}
			buf = nb;
		}
		if (k) {
			memcpy(buf + len, "<-", 2);
			len += 2;
		}
		memcpy(buf + len, s->nodes[j].call, n);
		len += n;
	}
	buf[len] = '\0';
	return buf;
}

/* Longest text all the sites' contexts may take together when they are printed
 * whole: a deep recursion (every level allocating) makes it quadratic. */
#define TG_SNAP_TEXT_MAX ((size_t)64 << 20)

/* Bytes the contexts of S's counted nodes take at most with DEPTH frames (exact
 * for 0: all), in O(nodes): a node's whole context is its call and its parent's
 * whole context (parents come first).  Saturates at SIZE_MAX. */
static size_t context_bytes(const struct tg_snapshot *s, unsigned depth, struct tg_diag *d,
			    int *err)
{
	size_t *full, sum = 0;

	*err = 0;
	if (depth && depth <= 64)
		return 0;  /* short contexts: bounded by the lines themselves */
	if (!(full = malloc((s->n_nodes ? s->n_nodes : 1) * sizeof(*full)))) {
		*err = tg_error(d, "out of memory");
		return 0;
	}
	for (size_t i = 0; i < s->n_nodes; i++) {
		const struct tg_snap_node *e = &s->nodes[i];
		size_t n = strlen(e->call);
		if (e->parent != TG_SNAP_NONE)
			n = full[e->parent] > SIZE_MAX - n - 2 ? SIZE_MAX : n + 2 + full[e->parent];
		full[i] = n;
		if (e->live_bytes || e->live_count || e->total_bytes || e->total_count)
			sum = sum > SIZE_MAX - n ? SIZE_MAX : sum + n;
	}
	free(full);
	return sum;
}

int tg_snapshot_group(struct tg_snapshot *s, unsigned depth, int merge_threads,
		      struct tg_diag *d)
{
	size_t k = 0, bytes;
	int err;

	release_sites(s);
	bytes = context_bytes(s, depth, d, &err);
	if (err)
		return -1;
	if (bytes > TG_SNAP_TEXT_MAX)
		return tg_error(d, "the calling contexts of '%s' are too deep to print whole "
				"(%zu MB of text): give a --depth of at most 64", s->path,
				bytes >> 20);
	s->merged = merge_threads;
	if (!(s->sites = malloc((s->n_nodes ? s->n_nodes : 1) * sizeof(*s->sites))))
		return tg_error(d, "out of memory");
	s->cap = s->n_nodes;
	for (size_t i = 0; i < s->n_nodes; i++) {
		const struct tg_snap_node *e = &s->nodes[i];
		struct tg_snap_site *t = &s->sites[s->n];
		if (!e->live_bytes && !e->live_count && !e->total_bytes && !e->total_count)
			continue;  /* an ancestor kept for its children's contexts */
		t->live_bytes = e->live_bytes;
		t->live_count = e->live_count;
		t->total_bytes = e->total_bytes;
		t->total_count = e->total_count;
		t->thread = merge_threads ? "*" : e->thread == TG_SNAP_NONE ? "-"
			: s->threads[e->thread];
		if (!(t->site = context_text(s, i, depth)))
			return tg_error(d, "out of memory");
		s->n++;
	}
	if (!s->n)
		return 0;
	/* Sites that print the same are one. */
	qsort(s->sites, s->n, sizeof(*s->sites), cmp_key_v);
	for (size_t i = 1; i < s->n; i++) {
		struct tg_snap_site *x = &s->sites[k], *y = &s->sites[i];
		if (!cmp_key(x, y)) {
			x->live_bytes = snap_add(x->live_bytes, y->live_bytes);
			x->live_count = snap_add(x->live_count, y->live_count);
			x->total_bytes = snap_add(x->total_bytes, y->total_bytes);
			x->total_count = snap_add(x->total_count, y->total_count);
			free(y->site);
		} else {
			s->sites[++k] = *y;
		}
	}
	s->n = k + 1;
	return 0;
}

static int cmp_live(const void *a, const void *b)
{
	const struct tg_snap_site *x = a, *y = b;
	if (x->live_bytes != y->live_bytes)
		return x->live_bytes < y->live_bytes ? 1 : -1;
	if (x->live_count != y->live_count)
		return x->live_count < y->live_count ? 1 : -1;
	return cmp_key(x, y);
}

static int cmp_total(const void *a, const void *b)
{
	const struct tg_snap_site *x = a, *y = b;
	if (x->total_bytes != y->total_bytes)
		return x->total_bytes < y->total_bytes ? 1 : -1;
	if (x->total_count != y->total_count)
		return x->total_count < y->total_count ? 1 : -1;
	return cmp_key(x, y);
}

void tg_snapshot_sort(struct tg_snapshot *s, enum tg_snap_key key)
{
	if (s->n)
		qsort(s->sites, s->n, sizeof(*s->sites), key == TG_SNAP_TOTAL ? cmp_total : cmp_live);
}

static int cmp_site_ptr(const void *a, const void *b)
{
	const struct tg_snap_site *const *x = a, *const *y = b;
	return cmp_key(*x, *y);
}

static int cmp_delta(const void *a, const void *b)
{
	const struct tg_snap_delta *x = a, *y = b;
	int c;
	if (x->live_bytes != y->live_bytes)
		return x->live_bytes < y->live_bytes ? 1 : -1;
	if (x->total_bytes != y->total_bytes)
		return x->total_bytes < y->total_bytes ? 1 : -1;
	c = strcmp(x->thread, y->thread);
	return c ? c : strcmp(x->site, y->site);
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
		int c = i == base->n ? 1 : j == s->n ? -1 : cmp_key(a[i], b[j]);
		struct tg_snap_delta *e = &v[k];
		if (c <= 0)
			x = a[i++];
		if (c >= 0)
			y = b[j++];
		e->base_live = x ? x->live_bytes : 0;
		e->live = y ? y->live_bytes : 0;
		e->live_bytes = snap_sub(e->live, e->base_live);
		e->live_count = snap_sub(y ? y->live_count : 0, x ? x->live_count : 0);
		e->total_bytes = snap_sub(y ? y->total_bytes : 0, x ? x->total_bytes : 0);
		e->total_count = snap_sub(y ? y->total_count : 0, x ? x->total_count : 0);
		e->site = y ? y->site : x->site;
		e->thread = y ? y->thread : x->thread;
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
	for (size_t i = 0; i < s->n_pairs; i++) {
		free(s->pairs[i].allocated_in);
		free(s->pairs[i].freed_in);
	}
	free(s->threads);
	free(s->windows);
	free(s->pairs);
	memset(s, 0, sizeof(*s));
}

/* Adds a freed_by pair; 0 or -1 (out of memory). */
static int sum_pair_add(struct tg_summary *s, int64_t bytes, int64_t blocks, const char *a,
			size_t al, const char *f, size_t fl)
{
	struct tg_sum_pair *nv = realloc(s->pairs, (s->n_pairs + 1) * sizeof(*nv));

	if (!nv)
		return -1;
	s->pairs = nv;
	nv += s->n_pairs;
	nv->bytes = bytes;
	nv->blocks = blocks;
	nv->allocated_in = strndup(a, al);
	nv->freed_in = strndup(f, fl);
	if (!nv->allocated_in || !nv->freed_in) {
		free(nv->allocated_in);
		free(nv->freed_in);
		return -1;
	}
	s->n_pairs++;
	return 0;
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

/* Whether field F of FL bytes is the literal LIT. */
#define FIELD_IS(f, fl, lit) ((fl) == TG_LIT_LEN(lit) && !memcmp((f), lit, TG_LIT_LEN(lit)))

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
	if (!(file = tg_acct_file(path, TG_SUM_FILENAME, d)))
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
			if (len >= TG_LIT_LEN(TG_SUM_MAGIC)
			    && !memcmp(line, TG_SUM_MAGIC, TG_LIT_LEN(TG_SUM_MAGIC)))
				seen_header = 1;
			continue;
		}
		if (!len)
			continue;
		n = split_tabs(line, len, f, fl, 5);
		if (n == 3 && FIELD_IS(f[0], fl[0], TG_SUM_REC_PROCESS)) {
			k = figure_index(f[1], fl[1]);
			p = f[2];
			if (!parse_i64(&p, f[2] + fl[2], &v) && p == f[2] + fl[2]) {
				if (k >= 0) {
					s->process.fig[k] = v;
					continue;
				}
				if (FIELD_IS(f[1], fl[1], TG_SUM_FIG_FREED_BY_LOST)) {
					s->has_freed_by = 1;
					s->freed_by_lost = v;
					continue;
				}
			}
		} else if (n == 4 && FIELD_IS(f[0], fl[0], TG_SUM_REC_THREAD)
			   && FIELD_IS(f[1], fl[1], TG_SUM_FIG_LIVE_AT_END)) {
			p = f[2];
			if (!parse_i64(&p, f[2] + fl[2], &v) && p == f[2] + fl[2]) {
				if (!(e = entity(&s->threads, &s->n_threads, f[3], fl[3]))) {
					tg_error(d, "out of memory");
					goto out;
				}
				e->live_at_end = v;
				e->has_live_at_end = 1;
				continue;
			}
		} else if (n == 5 && FIELD_IS(f[0], fl[0], TG_SUM_REC_FREED_BY)) {
			const char *q = f[2];
			p = f[1];
			if (!parse_i64(&p, f[1] + fl[1], &v) && p == f[1] + fl[1]
			    && !parse_i64(&q, f[2] + fl[2], &bin) && q == f[2] + fl[2]) {
				if (sum_pair_add(s, v, bin, f[3], fl[3], f[4], fl[4]) < 0) {
					tg_error(d, "out of memory");
					goto out;
				}
				continue;
			}
		} else if (n == 4 && (FIELD_IS(f[0], fl[0], TG_SUM_REC_THREAD)
				      || FIELD_IS(f[0], fl[0], TG_SUM_REC_WINDOW))) {
			int thr = FIELD_IS(f[0], fl[0], TG_SUM_REC_THREAD);
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
		} else if (n == 5 && FIELD_IS(f[0], fl[0], TG_SUM_REC_HIST)) {
			int alloc = FIELD_IS(f[1], fl[1], TG_SUM_HIST_ALLOC);
			int freed = FIELD_IS(f[1], fl[1], TG_SUM_HIST_FREE);
			const char *q = f[3];
			p = f[2];
			if ((alloc || freed) && !parse_i64(&p, f[2] + fl[2], &bin) && p == f[2] + fl[2]
			    && bin >= 0 && bin < TG_SUM_BINS && !parse_i64(&q, f[3] + fl[3], &v)
			    && q == f[3] + fl[3]) {
				e = NULL;
				const size_t tl = TG_LIT_LEN(TG_SUM_HIST_THREAD);
				if (FIELD_IS(f[4], fl[4], TG_SUM_HIST_PROCESS))
					e = &s->process;
				else if (fl[4] > tl && !memcmp(f[4], TG_SUM_HIST_THREAD, tl))
					e = entity(&s->threads, &s->n_threads, f[4] + tl, fl[4] - tl);
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
