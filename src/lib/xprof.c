/*
 * xprof.c - a run's allocations as stack samples (xprof.h): interning the
 * strings, functions and frames, and filling the samples from an accounting
 * snapshot or from the delta metric's frame tree.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "xprof.h"
#include "tg_fnv.h"

const char *const tg_xval_names[TG_XV_N] = {
	"alloc_objects", "alloc_space", "inuse_objects", "inuse_space",
};
const char *const tg_xval_units[TG_XV_N] = { "count", "bytes", "count", "bytes" };

#define XP_NONE ((size_t)-1)

void tg_xprof_init(struct tg_xprof *x)
{
	memset(x, 0, sizeof(*x));
}

void tg_xprof_release(struct tg_xprof *x)
{
	for (size_t i = 0; i < x->n_strs; i++)
		free(x->strs[i]);
	free(x->strs);
	free(x->str_tab);
	free(x->funcs);
	free(x->func_tab);
	free(x->frames);
	free(x->frame_tab);
	free(x->stack_ids);
	free(x->samples);
	free(x->threads);
	free(x->source);
	memset(x, 0, sizeof(*x));
}


/* Makes room for one more element in *V (n used, *cap allocated); 0 or -1. */
static int xp_grow(void **v, size_t n, size_t *cap, size_t size)
{
	void *nv;
	size_t nc;

	if (n < *cap)
		return 0;
	nc = *cap ? *cap * 2 : 64;
	if (!(nv = realloc(*v, nc * size)))
		return -1;
	*v = nv;
	*cap = nc;
	return 0;
}

/*
 * An open-addressing table of ids + 1 (TAB, CAP slots, a power of two) kept
 * under half full: rebuilt twice as large from HASH_OF when N reaches half.
 * 0 or -1 (out of memory).
 */
static int xp_tab_fit(size_t **tab, size_t *cap, size_t n,
		      uint64_t (*hash_of)(const struct tg_xprof *, size_t), const struct tg_xprof *x)
{
	size_t nc = *cap ? *cap * 2 : 256, *nt;

	if (n + 1 <= *cap / 2)
		return 0;
	if (!(nt = calloc(nc, sizeof(*nt))))
		return -1;
	for (size_t i = 0; i < n; i++) {
		size_t j = hash_of(x, i) & (nc - 1);
		while (nt[j])
			j = (j + 1) & (nc - 1);
		nt[j] = i + 1;
	}
	free(*tab);
	*tab = nt;
	*cap = nc;
	return 0;
}

static uint64_t xp_str_hash(const struct tg_xprof *x, size_t id)
{
	return tg_fnv1a(TG_FNV_BASIS, x->strs[id], strlen(x->strs[id]));
}

static uint64_t xp_func_hash(const struct tg_xprof *x, size_t id)
{
	size_t k[2] = { x->funcs[id].name, x->funcs[id].file };
	return tg_fnv1a(TG_FNV_BASIS, k, sizeof(k));
}

static uint64_t xp_frame_hash(const struct tg_xprof *x, size_t id)
{
	struct { size_t func; int64_t line; } k = { x->frames[id].func, x->frames[id].line };
	return tg_fnv1a(TG_FNV_BASIS, &k, sizeof(k));
}

/* The id of the string S (LEN bytes), added if new; XP_NONE when out of memory. */
static size_t xp_str(struct tg_xprof *x, const char *s, size_t len)
{
	size_t j;
	char *copy;

	if (!x->n_strs) {  /* pprof wants "" at index 0 */
		if (xp_grow((void **)&x->strs, 0, &x->strs_cap, sizeof(*x->strs)) < 0 ||
		    !(x->strs[0] = strdup("")))
			return XP_NONE;
		x->n_strs = 1;
		if (xp_tab_fit(&x->str_tab, &x->str_tab_cap, 0, xp_str_hash, x) < 0)
			return XP_NONE;
		x->str_tab[xp_str_hash(x, 0) & (x->str_tab_cap - 1)] = 1;
	}
	if (xp_tab_fit(&x->str_tab, &x->str_tab_cap, x->n_strs, xp_str_hash, x) < 0)
		return XP_NONE;
	for (j = tg_fnv1a(TG_FNV_BASIS, s, len) & (x->str_tab_cap - 1); x->str_tab[j];
	     j = (j + 1) & (x->str_tab_cap - 1)) {
		const char *t = x->strs[x->str_tab[j] - 1];
		if (!strncmp(t, s, len) && !t[len])
			return x->str_tab[j] - 1;
	}
	if (xp_grow((void **)&x->strs, x->n_strs, &x->strs_cap, sizeof(*x->strs)) < 0 ||
	    !(copy = strndup(s, len)))
		return XP_NONE;
	x->strs[x->n_strs] = copy;
	x->str_tab[j] = ++x->n_strs;
	return x->n_strs - 1;
}

/* The id of the frame FUNC in FILE at LINE, added if new; XP_NONE when out of memory. */
static size_t xp_frame(struct tg_xprof *x, const char *func, size_t fnlen, const char *file,
		       size_t flen, int64_t line)
{
	size_t name = xp_str(x, func, fnlen), fil, fn, j;
	size_t fk[2];
	struct { size_t func; int64_t line; } k;

	if (name == XP_NONE || (fil = xp_str(x, file, flen)) == XP_NONE)
		return XP_NONE;
	fk[0] = name;
	fk[1] = fil;
	if (xp_tab_fit(&x->func_tab, &x->func_tab_cap, x->n_funcs, xp_func_hash, x) < 0)
		return XP_NONE;
	for (j = tg_fnv1a(TG_FNV_BASIS, fk, sizeof(fk)) & (x->func_tab_cap - 1); x->func_tab[j];
	     j = (j + 1) & (x->func_tab_cap - 1)) {
		const struct tg_xfunc *f = &x->funcs[x->func_tab[j] - 1];
		if (f->name == name && f->file == fil)
			break;
	}
	if (x->func_tab[j]) {
		fn = x->func_tab[j] - 1;
	} else {
		if (xp_grow((void **)&x->funcs, x->n_funcs, &x->funcs_cap, sizeof(*x->funcs)) < 0)
			return XP_NONE;
		x->funcs[x->n_funcs] = (struct tg_xfunc){ name, fil };
		x->func_tab[j] = ++x->n_funcs;
		fn = x->n_funcs - 1;
	}
	memset(&k, 0, sizeof(k));  /* the padding is hashed */
	k.func = fn;
	k.line = line;
	if (xp_tab_fit(&x->frame_tab, &x->frame_tab_cap, x->n_frames, xp_frame_hash, x) < 0)
		return XP_NONE;
	for (j = tg_fnv1a(TG_FNV_BASIS, &k, sizeof(k)) & (x->frame_tab_cap - 1); x->frame_tab[j];
	     j = (j + 1) & (x->frame_tab_cap - 1)) {
		const struct tg_xframe *f = &x->frames[x->frame_tab[j] - 1];
		if (f->func == fn && f->line == line)
			return x->frame_tab[j] - 1;
	}
	if (xp_grow((void **)&x->frames, x->n_frames, &x->frames_cap, sizeof(*x->frames)) < 0)
		return XP_NONE;
	x->frames[x->n_frames] = (struct tg_xframe){ fn, line };
	x->frame_tab[j] = ++x->n_frames;
	return x->n_frames - 1;
}

/* Whether S[0..LEN) is all digits (at least one) and fits 9 of them. */
static int xp_line(const char *s, size_t len, int64_t *line)
{
	int64_t v = 0;

	if (!len || len > 9)
		return 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return 0;
		v = v * 10 + (s[i] - '0');
	}
	*line = v;
	return 1;
}

/*
 * The frame of a recorded call "FILE:LINE:FUNCTION" (split at its last two ':',
 * LINE all digits); a call of another form ("<no python frame>") is a function
 * of that name without file or line.  XP_NONE when out of memory.
 */
static size_t xp_call_frame(struct tg_xprof *x, const char *call, size_t len)
{
	const char *c1 = NULL, *c2 = NULL;
	int64_t line;

	for (size_t i = len; i-- > 0;)
		if (call[i] == ':') {
			if (!c2) {
				c2 = call + i;
			} else {
				c1 = call + i;
				break;
			}
		}
	if (c1 && xp_line(c1 + 1, (size_t)(c2 - c1 - 1), &line))
		return xp_frame(x, c2 + 1, (size_t)(call + len - c2 - 1), call,
				(size_t)(c1 - call), line);
	return xp_frame(x, call, len, "", 0, 0);
}

/*
 * The frame of a frame tree's text "FUNCTION (FILE:LINE)" (tg_fold_frame_text:
 * the first " (" after which the text is "FILE:DIGITS)"); other texts are a
 * function of that name.  XP_NONE when out of memory.
 */
static size_t xp_fold_frame(struct tg_xprof *x, const char *t)
{
	size_t len = strlen(t);
	const char *colon = NULL, *p;
	int64_t line;

	if (len > 4 && t[len - 1] == ')') {
		for (p = t + len - 1; p > t && p[-1] != ':'; p--)
			;
		colon = p > t ? p - 1 : NULL;
	}
	if (colon && xp_line(colon + 1, (size_t)(t + len - 1 - colon - 1), &line) &&
	    (p = strstr(t, " (")) && p < colon)
		return xp_frame(x, t, (size_t)(p - t), p + 2, (size_t)(colon - p - 2), line);
	return xp_frame(x, t, len, "", 0, 0);
}

static int xp_oom(struct tg_diag *d)
{
	return tg_error(d, "out of memory");
}

/* Appends frame FR to the stack being built; 0 or -1 (d->msg set). */
static int xp_push(struct tg_xprof *x, size_t fr, struct tg_diag *d)
{
	if (x->n_stack_ids >= TG_XPROF_MAX_STACK_FRAMES)
		return tg_error(d, "the profile's stacks would hold more than %zu frames (calls "
				"nested deep, allocating at every level): not written",
				TG_XPROF_MAX_STACK_FRAMES);
	if (xp_grow((void **)&x->stack_ids, x->n_stack_ids, &x->stack_ids_cap,
		    sizeof(*x->stack_ids)) < 0)
		return xp_oom(d);
	x->stack_ids[x->n_stack_ids++] = fr;
	return 0;
}

/* Adds a sample of THREAD (a string id) whose stack starts at START; 0 or -1. */
static int xp_sample(struct tg_xprof *x, size_t thread, size_t start, const int64_t v[TG_XV_N],
		     struct tg_diag *d)
{
	struct tg_xsample *sm;
	size_t i;

	/* samples come grouped by thread, mostly: the last one first */
	if (x->n_threads && x->threads[x->n_threads - 1] == thread)
		i = x->n_threads - 1;
	else
		for (i = 0; i < x->n_threads && x->threads[i] != thread; i++)
			;
	if (i == x->n_threads) {
		if (xp_grow((void **)&x->threads, x->n_threads, &x->threads_cap,
			    sizeof(*x->threads)) < 0)
			return xp_oom(d);
		x->threads[x->n_threads++] = thread;
	}
	if (xp_grow((void **)&x->samples, x->n_samples, &x->samples_cap, sizeof(*x->samples)) < 0)
		return xp_oom(d);
	sm = &x->samples[x->n_samples++];
	sm->thread = thread;
	sm->stack = start;
	sm->depth = x->n_stack_ids - start;
	memcpy(sm->v, v, sizeof(sm->v));
	return 0;
}

/* Moves the string id NO_THREAD, when among x->threads, to their end. */
static void xp_no_thread_last(struct tg_xprof *x, size_t no_thread)
{
	size_t i;

	for (i = 0; i < x->n_threads && x->threads[i] != no_thread; i++)
		;
	if (i == x->n_threads)
		return;
	memmove(&x->threads[i], &x->threads[i + 1], (x->n_threads - i - 1) * sizeof(*x->threads));
	x->threads[x->n_threads - 1] = no_thread;
}

int tg_xprof_from_snapshot(struct tg_xprof *x, const struct tg_snapshot *s, struct tg_diag *d)
{
	size_t *fr = NULL, no_thread;
	int ret = -1;

	x->from = TG_XPROF_ACCOUNTING;
	x->sampled = s->sampled;
	if (!(x->source = strdup(s->path)) || (no_thread = xp_str(x, "<no thread>", 11)) == XP_NONE ||
	    !(fr = malloc((s->n_nodes + 1) * sizeof(*fr)))) {
		xp_oom(d);
		goto out;
	}
	for (size_t i = 0; i < s->n_nodes; i++) {
		const struct tg_snap_node *nd = &s->nodes[i];
		int64_t v[TG_XV_N] = { nd->total_count, nd->total_bytes, nd->live_count,
				       nd->live_bytes };
		size_t start = x->n_stack_ids, j = i, root = i, thread;

		fr[i] = XP_NONE;
		if (s->version >= 2 && (fr[i] = xp_call_frame(x, nd->call, strlen(nd->call))) == XP_NONE) {
			xp_oom(d);
			goto out;
		}
		if (!(v[0] | v[1] | v[2] | v[3]))
			continue;
		if (s->version < 2) {
			/* a version 1 site: "call<-caller<-...", innermost first */
			const char *p = nd->call, *q;
			for (;; p = q + 2) {
				size_t f;
				q = strstr(p, "<-");
				f = xp_call_frame(x, p, q ? (size_t)(q - p) : strlen(p));
				if (f == XP_NONE) {
					xp_oom(d);
					goto out;
				}
				if (xp_push(x, f, d) < 0)
					goto out;
				if (!q)
					break;
			}
		} else {
			for (; j != TG_SNAP_NONE; j = s->nodes[j].parent) {
				if (xp_push(x, fr[j], d) < 0)
					goto out;
				root = j;
			}
		}
		j = nd->thread != TG_SNAP_NONE ? nd->thread : s->nodes[root].thread;
		if (j == TG_SNAP_NONE)
			thread = no_thread;
		else if ((thread = xp_str(x, s->threads[j], strlen(s->threads[j]))) == XP_NONE) {
			xp_oom(d);
			goto out;
		}
		if (xp_sample(x, thread, start, v, d) < 0)
			goto out;
		if (thread == no_thread)
			x->no_thread_samples++;
	}
	xp_no_thread_last(x, no_thread);
	ret = 0;
out:
	free(fr);
	return ret;
}

int tg_xprof_from_fold(struct tg_xprof *x, const struct tg_fold *f, struct tg_diag *d)
{
	size_t *fr = NULL, *th = NULL, all;
	int ret = -1;

	x->from = TG_XPROF_DELTA;
	x->sampled = f->sampled;
	if ((f->source && !(x->source = strdup(f->source))) ||
	    (all = xp_str(x, "<all threads>", 13)) == XP_NONE ||
	    !(fr = malloc((f->n + 1) * sizeof(*fr))) || !(th = malloc((f->n + 1) * sizeof(*th)))) {
		xp_oom(d);
		goto out;
	}
	/* parents come before their children in f->v (tg_fold_child appends) */
	for (size_t i = 0; i < f->n; i++) {
		const struct tg_fold_node *nd = &f->v[i];
		const char *text = tg_fold_name(f, i);
		size_t start = x->n_stack_ids;

		fr[i] = XP_NONE;
		th[i] = nd->parent == TG_FOLD_NONE ? all : th[nd->parent];
		if (nd->kind == TG_FOLD_THREAD) {
			if ((th[i] = xp_str(x, text, strlen(text))) == XP_NONE) {
				xp_oom(d);
				goto out;
			}
			continue;
		}
		if (nd->kind != TG_FOLD_CALL)
			continue;
		if ((fr[i] = xp_fold_frame(x, text)) == XP_NONE) {
			xp_oom(d);
			goto out;
		}
		if (nd->self <= 0)
			continue;
		for (size_t j = i; j != TG_FOLD_NONE && f->v[j].kind == TG_FOLD_CALL; j = f->v[j].parent)
			if (xp_push(x, fr[j], d) < 0)
				goto out;
		{
			int64_t g = nd->grew > INT64_MAX ? INT64_MAX : (int64_t)nd->grew;
			int64_t v[TG_XV_N] = { g, nd->self, g, nd->self };
			if (xp_sample(x, th[i], start, v, d) < 0)
				goto out;
		}
	}
	ret = 0;
out:
	free(fr);
	free(th);
	return ret;
}
