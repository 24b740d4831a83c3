/*
 * fold.c - the frame tree behind folded stacks and flame graphs (fold.h): frame
 * texts interned once, children found by (parent, text) in one hash table, and
 * the folded-stack writer.  The readers that fill the tree are in fold_load.c.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fold.h"
#include "tg_format.h"
#include "tg_fnv.h"

const struct tg_fold_metric_info tg_fold_metrics[] = {
	{ "alloc", TG_FOLD_ALLOC, "B", "bytes allocated over the run", 1 },
	{ "live", TG_FOLD_LIVE, "B", "bytes still live at the end", 1 },
	{ "peak", TG_FOLD_PEAK, "B", "bytes live at the process-wide peak", 1 },
	{ "delta", TG_FOLD_DELTA, "B", "memory growth of each call's own code (recorded deltas)", 0 },
	{ "time", TG_FOLD_TIME, "us", "time spent in each call's own code", 0 },
};
const size_t tg_fold_n_metrics = sizeof(tg_fold_metrics) / sizeof(tg_fold_metrics[0]);

const struct tg_fold_metric_info *tg_fold_metric_find(const char *name)
{
	for (size_t i = 0; i < tg_fold_n_metrics; i++)
		if (!strcmp(name, tg_fold_metrics[i].name))
			return &tg_fold_metrics[i];
	return NULL;
}

void tg_fold_metric_names(char *buf, size_t n)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < tg_fold_n_metrics && len < n; i++)
		len += (size_t)snprintf(buf + len, n - len, "%s%s", !i ? "" :
					i + 1 == tg_fold_n_metrics ? " or " : ", ",
					tg_fold_metrics[i].name);
}


static uint64_t fold_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

void tg_fold_init(struct tg_fold *f)
{
	memset(f, 0, sizeof(*f));
}

void tg_fold_release(struct tg_fold *f)
{
	free(f->v);
	free(f->arena);
	free(f->names);
	free(f->kids);
	free(f->source);
	free(f->no_stack_thread);
	free(f->no_stack_mem);
	memset(f, 0, sizeof(*f));
}

/* Doubles the name table; 0 or -1. */
static int fold_names_grow(struct tg_fold *f)
{
	size_t cap = f->names_cap ? f->names_cap * 2 : 1024;
	size_t *t = calloc(cap, sizeof(*t));

	if (!t)
		return -1;
	for (size_t i = 0; i < f->names_cap; i++) {
		size_t off = f->names[i];
		const char *s;
		size_t j;
		if (!off)
			continue;
		s = f->arena + off - 1;
		j = (size_t)tg_fnv1a(TG_FNV_BASIS, s, strlen(s)) & (cap - 1);
		while (t[j])
			j = (j + 1) & (cap - 1);
		t[j] = off;
	}
	free(f->names);
	f->names = t;
	f->names_cap = cap;
	return 0;
}

/* The arena offset of TEXT, interned; 0 or -1 (out of memory). */
static int fold_intern(struct tg_fold *f, const char *text, size_t len, size_t *off)
{
	size_t j;

	if ((f->names_n + 1) * 2 > f->names_cap && fold_names_grow(f) < 0)
		return -1;
	j = (size_t)tg_fnv1a(TG_FNV_BASIS, text, len) & (f->names_cap - 1);
	for (; f->names[j]; j = (j + 1) & (f->names_cap - 1)) {
		const char *s = f->arena + f->names[j] - 1;
		if (!strncmp(s, text, len) && s[len] == '\0') {
			*off = f->names[j] - 1;
			return 0;
		}
	}
	if (f->arena_len + len + 1 > f->arena_cap) {
		size_t cap = f->arena_cap ? f->arena_cap * 2 : 65536;
		char *a;
		while (cap < f->arena_len + len + 1)
			cap *= 2;
		if (!(a = realloc(f->arena, cap)))
			return -1;
		f->arena = a;
		f->arena_cap = cap;
	}
	memcpy(f->arena + f->arena_len, text, len);
	f->arena[f->arena_len + len] = '\0';
	*off = f->arena_len;
	f->arena_len += len + 1;
	f->names[j] = *off + 1;
	f->names_n++;
	return 0;
}

static size_t fold_kid_slot(const struct tg_fold *f, size_t parent, size_t name)
{
	return (size_t)fold_mix(((uint64_t)parent << 32) ^ (uint64_t)name ^ ((uint64_t)parent >> 32))
	       & (f->kids_cap - 1);
}

/* Doubles the child table; 0 or -1. */
static int fold_kids_grow(struct tg_fold *f)
{
	size_t cap = f->kids_cap ? f->kids_cap * 2 : 1024;
	size_t *t = calloc(cap, sizeof(*t)), *old = f->kids, old_cap = f->kids_cap;

	if (!t)
		return -1;
	f->kids = t;
	f->kids_cap = cap;
	for (size_t i = 0; i < old_cap; i++) {
		size_t j;
		if (!old[i])
			continue;
		j = fold_kid_slot(f, f->v[old[i] - 1].parent, f->v[old[i] - 1].name);
		while (t[j])
			j = (j + 1) & (cap - 1);
		t[j] = old[i];
	}
	free(old);
	return 0;
}

/* Makes the root if F has none; 0 or -1. */
static int fold_root(struct tg_fold *f, struct tg_diag *d)
{
	size_t off;

	if (f->n)
		return 0;
	if (!(f->v = malloc(256 * sizeof(*f->v))) || fold_intern(f, "all", 3, &off) < 0)
		return tg_error(d, "out of memory");
	f->cap = 256;
	memset(&f->v[0], 0, sizeof(f->v[0]));
	f->v[0].parent = TG_FOLD_NONE;
	f->v[0].name = off;
	f->v[0].kind = TG_FOLD_ROOT;
	f->n = 1;
	return 0;
}

int tg_fold_child(struct tg_fold *f, size_t parent, const char *text, size_t len,
		  enum tg_fold_kind kind, size_t *out, struct tg_diag *d)
{
	struct tg_fold_node *nd;
	size_t name, j;

	if (fold_root(f, d) < 0)
		return -1;
	if (fold_intern(f, text, len, &name) < 0)
		return tg_error(d, "out of memory");
	if ((f->n + 1) * 2 > f->kids_cap && fold_kids_grow(f) < 0)
		return tg_error(d, "out of memory");
	for (j = fold_kid_slot(f, parent, name); f->kids[j]; j = (j + 1) & (f->kids_cap - 1)) {
		nd = &f->v[f->kids[j] - 1];
		if (nd->parent == parent && nd->name == name) {
			*out = f->kids[j] - 1;
			return 0;
		}
	}
	if (f->n == f->cap) {
		struct tg_fold_node *nv = realloc(f->v, f->cap * 2 * sizeof(*nv));
		if (!nv)
			return tg_error(d, "out of memory");
		f->v = nv;
		f->cap *= 2;
	}
	nd = &f->v[f->n];
	memset(nd, 0, sizeof(*nd));
	nd->parent = parent;
	nd->name = name;
	nd->kind = kind;
	nd->depth = f->v[parent].depth + 1;
	f->kids[j] = f->n + 1;
	*out = f->n++;
	return 0;
}

/* Orders node indices by (parent, name). */
static int fold_cmp(const void *a, const void *b, void *ctx)
{
	const struct tg_fold *f = ctx;
	const struct tg_fold_node *x = &f->v[*(const size_t *)a], *y = &f->v[*(const size_t *)b];

	if (x->parent != y->parent)
		return x->parent < y->parent ? -1 : 1;
	return strcmp(f->arena + x->name, f->arena + y->name);
}

int tg_fold_finish(struct tg_fold *f, struct tg_diag *d)
{
	size_t *order, i;

	if (fold_root(f, d) < 0)
		return -1;
	for (i = 0; i < f->n; i++) {
		f->v[i].total = f->v[i].self;
		f->v[i].count = 1;
		f->v[i].child = f->v[i].next = TG_FOLD_NONE;
	}
	/* parents come before their children: one backward pass sums */
	for (i = f->n - 1; i > 0; i--) {
		tg_fold_add(&f->v[f->v[i].parent].total, f->v[i].total);
		f->v[f->v[i].parent].count += f->v[i].count;
	}
	if (f->n < 2)
		return 0;
	if (!(order = malloc((f->n - 1) * sizeof(*order))))
		return tg_error(d, "out of memory");
	for (i = 1; i < f->n; i++)
		order[i - 1] = i;
	qsort_r(order, f->n - 1, sizeof(*order), fold_cmp, f);
	/* linked from the last: each child is pushed in front of its siblings */
	for (i = f->n - 1; i > 0; i--) {
		struct tg_fold_node *c = &f->v[order[i - 1]];
		c->next = f->v[c->parent].child;
		f->v[c->parent].child = order[i - 1];
	}
	free(order);
	return 0;
}

/* Writes a frame's name as a folded line takes it: a ';' as ',', a terminal-
 * unsafe sequence (tg_unsafe_seq) as '?'.  Call frames are made so already
 * (tg_fold_frame_text); a thread's frame is its name as the run gave it. */
static void fold_fputs_safe(FILE *out, const char *s)
{
	size_t n = strlen(s);

	for (size_t i = 0; i < n; i++) {
		size_t u = tg_unsafe_seq((const unsigned char *)s + i, n - i);
		if (u) {
			putc('?', out);
			i += u - 1;
		} else {
			putc(s[i] == ';' ? ',' : s[i], out);
		}
	}
}

uint64_t tg_fold_text_size(const struct tg_fold *f, unsigned *max_depth)
{
	uint64_t *plen, total = 0;

	*max_depth = 0;
	if (f->n < 2)
		return 0;
	if (!(plen = malloc(f->n * sizeof(*plen))))
		return UINT64_MAX;
	plen[0] = 0;
	/* parents come before their children: a path's length from its parent's */
	for (size_t i = 1; i < f->n; i++) {
		const struct tg_fold_node *nd = &f->v[i];
		plen[i] = (nd->parent ? plen[nd->parent] + 1 : 0) + strlen(tg_fold_name(f, i));
		if (nd->self > 0)
			total += plen[i] + 22;  /* " VALUE\n" */
		if (nd->depth > *max_depth)
			*max_depth = nd->depth;
	}
	free(plen);
	return total;
}

int tg_fold_write(const struct tg_fold *f, FILE *out)
{
	size_t *path, top = 0, i;

	if (f->n < 2)
		return ferror(out) ? EOF : 0;
	if (!(path = malloc((f->n + 1) * sizeof(*path))))
		return EOF;
	/* depth-first: path[] holds the frames from the root's child down */
	for (i = f->v[0].child; i != TG_FOLD_NONE && !ferror(out);) {
		const struct tg_fold_node *nd = &f->v[i];
		path[top++] = i;
		if (nd->self > 0) {
			for (size_t k = 0; k < top; k++) {
				if (k)
					putc(';', out);
				fold_fputs_safe(out, tg_fold_name(f, path[k]));
			}
			fprintf(out, " %" PRId64 "\n", nd->self);
		}
		if (nd->child != TG_FOLD_NONE) {
			i = nd->child;
			continue;
		}
		/* up until a frame with a next sibling */
		while (top && f->v[path[top - 1]].next == TG_FOLD_NONE)
			top--;
		if (!top)
			break;
		i = f->v[path[--top]].next;
	}
	free(path);
	return ferror(out) ? EOF : 0;
}

/* Appends LEN bytes of S to *buf at *len, made safe for folded lines. */
static void fold_put_safe(char *buf, size_t *len, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		size_t u = tg_unsafe_seq((const unsigned char *)s + i, n - i);
		if (u) {  /* a control, C1 or bidirectional control: one '?' */
			buf[(*len)++] = '?';
			i += u - 1;
			continue;
		}
		buf[(*len)++] = c == ';' ? ',' : (char)c;
	}
}

long tg_fold_frame_text(char **buf, size_t *cap, const char *file, size_t flen,
			const char *line, size_t llen, const char *func, size_t fnlen)
{
	size_t need = flen + llen + fnlen + 8, len = 0;

	if (need > *cap) {
		char *nb = realloc(*buf, need);
		if (!nb)
			return -1;
		*buf = nb;
		*cap = need;
	}
	if (!line) {  /* not a FILE:LINE:FUNCTION call: as is */
		fold_put_safe(*buf, &len, file, flen);
	} else {
		fold_put_safe(*buf, &len, func, fnlen);
		memcpy(*buf + len, " (", 2);
		len += 2;
		fold_put_safe(*buf, &len, file, flen);
		(*buf)[len++] = ':';
		fold_put_safe(*buf, &len, line, llen);
		(*buf)[len++] = ')';
	}
	(*buf)[len] = '\0';
	return (long)len;
}
