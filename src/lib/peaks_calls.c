/*
 * peaks_calls.c - when a text dump's peak call began, from its .stack file
 * (tg_peaks_call_starts, peaks.h).  A capture's records pair calls and returns
 * themselves; a .mem line holds only the return, so its call is found as
 * decorate-stack finds it: by position, checked by name.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "linereader.h"
#include "peaks.h"
#include "records.h"
#include "tg_format.h"
#include "tg_fnv.h"

/* FNV-1a of FILE, a separator, FUNCTION: what a call and its return share. */
static uint64_t pc_hash(const struct tg_str *file, const struct tg_str *func)
{
	return tg_fnv1a_pair(TG_FNV_BASIS, file->s, file->len, func->s, func->len);
}

/* An open call of the .stack scan. */
struct pc_open {
	unsigned depth;
	double t;
	uint64_t hash;
};

/* A peak of the file being paired: its return number, its index in p->v. */
struct pc_want {
	unsigned long ret_no;
	size_t peak;
};

static int pc_want_cmp(const void *a, const void *b)
{
	const struct pc_want *x = a, *y = b;
	return (x->ret_no > y->ret_no) - (x->ret_no < y->ret_no);
}

/* Sets the call that closed as number CLOSED (OPEN) as the start of the wanted
 * peaks *W.. whose return it is; advances *wi past them. */
static void pc_closed(struct tg_peaks *p, const struct pc_want *w, size_t nw, size_t *wi,
		      unsigned long closed, const struct pc_open *open)
{
	while (*wi < nw && w[*wi].ret_no == closed) {
		struct tg_peak *k = &p->v[w[*wi].peak];
		struct tg_memrec r;

		if (!tg_memrec_parse(&r, tg_peak_rest(p, k), k->rest_len, 0) &&
		    pc_hash(&r.file, &r.func) == open->hash)
			k->call_start = open->t;
		(*wi)++;
	}
}

/* Pairs the wanted peaks W[0..NW) (sorted) with the calls of STACK_PATH. */
static int pc_scan(struct tg_peaks *p, const char *stack_path, const struct pc_want *w,
		   size_t nw, struct tg_diag *d)
{
	struct tg_diag quiet = { .strict = 0 };  /* the .stack's own warnings are not ours */
	struct tg_lr lr;
	struct tg_stackrec r;
	struct pc_open *open = NULL;
	const char *line;
	size_t len, top = 0, alloc = 0, wi = 0;
	unsigned long closed = 0;
	int got, ret = -1;

	if (tg_lr_open(&lr, stack_path, 0, &quiet) < 0)
		return 0;  /* no .stack: the starts stay unknown */
	while (wi < nw && (got = tg_lr_next(&lr, &line, &len, &quiet)) > 0) {
		if (tg_lr_bad(&lr) || tg_stackrec_parse(&r, line, len, 1))
			continue;
		while (top && open[top - 1].depth >= r.depth) {
			top--;
			pc_closed(p, w, nw, &wi, ++closed, &open[top]);
		}
		if (top == alloc) {
			size_t na = alloc ? alloc * 2 : 64;
			struct pc_open *nv = realloc(open, na * sizeof(*nv));
			if (!nv) {
				tg_error(d, "out of memory");
				goto release;
			}
			open = nv;
			alloc = na;
		}
		open[top].depth = r.depth;
		open[top].t = r.time.v;
		open[top].hash = pc_hash(&r.file, &r.func);
		top++;
	}
	while (top && wi < nw) {  /* the end of the file closes the rest */
		top--;
		pc_closed(p, w, nw, &wi, ++closed, &open[top]);
	}
	ret = 0;
release:
	free(open);
	tg_lr_release(&lr);
	return ret;
}

int tg_peaks_call_starts(struct tg_peaks *p, const struct tg_dumpfile *files, size_t n,
			 struct tg_diag *d)
{
	struct pc_want *w = malloc((p->n ? p->n : 1) * sizeof(*w));
	size_t sfx = strlen(TG_MEM_SUFFIX);
	int ret = -1;

	if (!w)
		return tg_error(d, "out of memory");
	for (size_t f = 0; f < n; f++) {
		const char *path = files[f].path;
		size_t nw = 0, plen = strlen(path);
		char *stack;

		if (files[f].cap || files[f].kind != TG_DUMP_MEM || plen < sfx ||
		    strcmp(path + plen - sfx, TG_MEM_SUFFIX))
			continue;
		for (size_t i = 0; i < p->n; i++)
			if (p->v[i].thread == f && p->v[i].call_start < 0) {
				w[nw].ret_no = p->v[i].ret_no;
				w[nw++].peak = i;
			}
		if (!nw)
			continue;
		qsort(w, nw, sizeof(*w), pc_want_cmp);
		if (!(stack = malloc(plen - sfx + sizeof(TG_STACK_SUFFIX)))) {
			tg_error(d, "out of memory");
			goto out;
		}
		memcpy(stack, path, plen - sfx);
		memcpy(stack + plen - sfx, TG_STACK_SUFFIX, sizeof(TG_STACK_SUFFIX));
		if (pc_scan(p, stack, w, nw, d) < 0) {
			free(stack);
			goto out;
		}
		free(stack);
	}
	ret = 0;
out:
	free(w);
	return ret;
}
