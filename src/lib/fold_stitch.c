/*
 * fold_stitch.c - grafting pool and asyncio tasks under their submitters'
 * calls in the frame tree (fold_stitch.h).
 *
 * A submitter's path is kept relative: the frames from the innermost run call
 * that encloses the submission (a task submitted by a task), or from its
 * thread's outermost call, interned in a trie (a tg_fold of its own) so that
 * many submissions from one place cost one path.  Turning a path into frames
 * of the real tree needs the enclosing task's marker first: tg_stitch_marker
 * follows that chain iteratively (a chain of tasks each submitting the next
 * may be long), and a chain that loops (only a forged marks.txt can) leaves
 * its tasks where they ran.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fold_stitch.h"
#include "marks.h"
#include "recsrc.h"
#include "records.h"

enum { STITCH_NEW, STITCH_BUSY, STITCH_DONE };

struct stitch_task {
	uint64_t id;
	const char *thread;      /* submitting thread (marks') */
	const char *label;       /* "[LABEL]" (marks') */
	uint64_t calls;          /* the note's position */
	unsigned long depth;
	int scanned;             /* its position was found in the thread's records */
	uint64_t base;           /* task whose run encloses the submission; 0: none */
	size_t rel;              /* trie node of the frames below base (or from the
				  * thread's outermost call); TG_FOLD_NONE: none */
	size_t node;             /* its marker frame in the fold (STITCH_DONE) */
	int state;
};

struct stitch_thread {
	char *name;
	struct tg_stitch_run *v;
	size_t n, cap;
};

struct tg_stitch {
	struct tg_marks marks;
	struct stitch_task *tasks;   /* sorted by id, ids unique */
	size_t n_tasks;
	struct tg_fold trie;         /* relative paths */
	struct stitch_thread *threads;
	size_t n_threads, threads_cap;
};

static int stitch_task_cmp(const void *a, const void *b)
{
	const struct stitch_task *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

static struct stitch_task *stitch_find(const struct tg_stitch *s, uint64_t id)
{
	struct stitch_task key = { .id = id };
	return bsearch(&key, s->tasks, s->n_tasks, sizeof(key), stitch_task_cmp);
}

void tg_stitch_free(struct tg_stitch *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_threads; i++) {
		free(s->threads[i].name);
		free(s->threads[i].v);
	}
	free(s->threads);
	free(s->tasks);
	tg_fold_release(&s->trie);
	tg_marks_release(&s->marks);
	free(s);
}

int tg_stitch_open(struct tg_stitch **out, const char *dir, struct tg_diag *d)
{
	struct tg_stitch *s = calloc(1, sizeof(*s));
	size_t k = 0;

	*out = NULL;
	if (!s)
		return tg_error(d, "out of memory");
	tg_marks_init(&s->marks);
	tg_fold_init(&s->trie);
	if (tg_marks_read(&s->marks, dir, d) < 0)
		goto fail;
	if (!s->marks.n_tasks || !s->marks.n_runs) {
		tg_stitch_free(s);
		return 0;
	}
	if (!(s->tasks = calloc(s->marks.n_tasks, sizeof(*s->tasks)))) {
		tg_error(d, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < s->marks.n_tasks; i++) {
		const struct tg_task_pos *p = &s->marks.tasks[i];
		struct stitch_task *t = &s->tasks[s->n_tasks++];
		t->id = p->id;
		t->thread = p->thread;
		t->label = p->label;
		t->calls = p->calls;
		t->depth = p->depth;
		t->rel = TG_FOLD_NONE;
		t->node = TG_FOLD_NONE;
	}
	qsort(s->tasks, s->n_tasks, sizeof(*s->tasks), stitch_task_cmp);
	for (size_t i = 0; i < s->n_tasks; i++)  /* a repeated id: the first one */
		if (!k || s->tasks[k - 1].id != s->tasks[i].id)
			s->tasks[k++] = s->tasks[i];
	s->n_tasks = k;
	*out = s;
	return 0;
fail:
	tg_stitch_free(s);
	return -1;
}

/* THREAD's run list, made if missing; NULL when out of memory. */
static struct stitch_thread *stitch_thread(struct tg_stitch *s, const char *thread)
{
	struct stitch_thread *t;

	for (size_t i = 0; i < s->n_threads; i++)
		if (!strcmp(s->threads[i].name, thread))
			return &s->threads[i];
	if (s->n_threads == s->threads_cap) {
		size_t nc = s->threads_cap ? s->threads_cap * 2 : 16;
		struct stitch_thread *nv = realloc(s->threads, nc * sizeof(*nv));
		if (!nv)
			return NULL;
		s->threads = nv;
		s->threads_cap = nc;
	}
	t = &s->threads[s->n_threads];
	memset(t, 0, sizeof(*t));
	if (!(t->name = strdup(thread)))
		return NULL;
	s->n_threads++;
	return t;
}

const struct tg_stitch_run *tg_stitch_runs(const struct tg_stitch *s, const char *thread,
					   size_t *n)
{
	for (size_t i = 0; s && i < s->n_threads; i++)
		if (!strcmp(s->threads[i].name, thread)) {
			*n = s->threads[i].n;
			return s->threads[i].v;
		}
	*n = 0;
	return NULL;
}

/* An open call while scanning. */
struct stitch_open {
	unsigned depth;          /* .stack indentation */
	uint64_t call;           /* its CALL number */
	uint64_t run;            /* the task it runs (a checked run call), 0: none */
	uint64_t base;           /* the innermost enclosing run's task, 0: none */
	size_t rel;              /* trie node of the frames from base's run (exclusive) to it */
};

/* A note of the thread being scanned: a task (index into s->tasks) or a run
 * (index into marks.runs), by position. */
struct stitch_note {
	uint64_t calls;
	size_t ix;
	int run;
};

static int stitch_note_cmp(const void *a, const void *b)
{
	const struct stitch_note *x = a, *y = b;
	return x->calls < y->calls ? -1 : x->calls > y->calls;
}

/* Takes the notes at position CALLS (open calls OPEN[0..TOP)) .  0 or -1. */
static int stitch_take(struct tg_stitch *s, struct stitch_thread *th,
		       const struct stitch_note *notes, size_t n, size_t *next, uint64_t calls,
		       struct stitch_open *open, size_t top)
{
	for (; *next < n && notes[*next].calls <= calls; (*next)++) {
		const struct stitch_note *nt = &notes[*next];
		if (nt->calls != calls)
			continue;  /* a position past the records kept (segments dropped) */
		if (nt->run) {
			const struct tg_task_pos *p = &s->marks.runs[nt->ix];
			/* the run_task call itself must be the innermost open one */
			if (!top || p->depth != top || open[top - 1].call != calls)
				continue;
			open[top - 1].run = p->id;
			if (th->n == th->cap) {
				size_t nc = th->cap ? th->cap * 2 : 64;
				struct tg_stitch_run *nv = realloc(th->v, nc * sizeof(*nv));
				if (!nv)
					return -1;
				th->v = nv;
				th->cap = nc;
			}
			th->v[th->n].call = calls;
			th->v[th->n++].task = p->id;
		} else {
			struct stitch_task *t = &s->tasks[nt->ix];
			if (t->depth > top)
				continue;
			t->scanned = 1;
			if (!t->depth)
				continue;  /* outside any call: under the thread's frame */
			if (open[t->depth - 1].run) {
				t->base = open[t->depth - 1].run;
			} else {
				t->base = open[t->depth - 1].base;
				t->rel = open[t->depth - 1].rel;
			}
		}
	}
	return 0;
}

int tg_stitch_scan(struct tg_stitch *s, const char *thread, const struct tg_dumpfile *stack,
		   int has_time, struct tg_diag *d)
{
	struct tg_diag sub = { .strict = d->strict };  /* the pairing reports the lines */
	struct stitch_note *notes = NULL;
	struct stitch_open *open = NULL;
	struct stitch_thread *th;
	struct tg_stackrec r;
	struct tg_src ss;
	size_t n = 0, next = 0, top = 0, cap = 0, bcap = 0;
	char *buf = NULL;
	int got, ret = -1;

	for (size_t i = 0; i < s->n_tasks; i++)
		n += !strcmp(s->tasks[i].thread, thread);
	for (size_t i = 0; i < s->marks.n_runs; i++)
		n += !strcmp(s->marks.runs[i].thread, thread);
	if (!n)
		return 0;
	if (!(notes = malloc(n * sizeof(*notes))) || !(th = stitch_thread(s, thread))) {
		free(notes);
		return tg_error(d, "out of memory");
	}
	n = 0;
	for (size_t i = 0; i < s->n_tasks; i++)
		if (!strcmp(s->tasks[i].thread, thread))
			notes[n++] = (struct stitch_note){ s->tasks[i].calls, i, 0 };
	for (size_t i = 0; i < s->marks.n_runs; i++)
		if (!strcmp(s->marks.runs[i].thread, thread))
			notes[n++] = (struct stitch_note){ s->marks.runs[i].calls, i, 1 };
	qsort(notes, n, sizeof(*notes), stitch_note_cmp);
	if (tg_src_open(&ss, stack, has_time, 0, &sub) < 0) {
		free(notes);
		return tg_error(d, "%s", sub.msg);
	}
	if (stitch_take(s, th, notes, n, &next, 0, open, 0) < 0)
		goto oom;
	while ((got = tg_src_next_stack(&ss, &r, &sub)) > 0) {
		struct stitch_open *c, *p;
		char num[24];
		long tlen;

		while (top && open[top - 1].depth >= r.depth)
			top--;
		if (top == cap) {
			size_t nc = cap ? cap * 2 : 64;
			struct stitch_open *nv = realloc(open, nc * sizeof(*nv));
			if (!nv)
				goto oom;
			open = nv;
			cap = nc;
		}
		snprintf(num, sizeof(num), "%lu", r.line);
		tlen = tg_fold_frame_text(&buf, &bcap, r.file.s, r.file.len, num, strlen(num),
					  r.func.s, r.func.len);
		if (tlen < 0)
			goto oom;
		c = &open[top];
		p = top ? &open[top - 1] : NULL;
		c->depth = r.depth;
		c->call = ss.lineno;
		c->run = 0;
		c->base = p ? (p->run ? p->run : p->base) : 0;
		if (tg_fold_child(&s->trie, p && !p->run ? p->rel : 0, buf, (size_t)tlen,
				  TG_FOLD_CALL, &c->rel, &sub) < 0)
			goto oom;
		top++;
		if (stitch_take(s, th, notes, n, &next, ss.lineno, open, top) < 0)
			goto oom;
	}
	if (got < 0) {
		tg_error(d, "%s", sub.msg);
		goto out;
	}
	ret = 0;
	goto out;
oom:
	tg_error(d, "out of memory");
out:
	tg_src_release(&ss);
	free(notes);
	free(open);
	free(buf);
	return ret;
}

/* The frame of thread THREAD's outermost calls: its thread frame, or the root. */
static int stitch_thread_root(struct tg_fold *f, const struct tg_fold_opts *o,
			      const char *thread, size_t *root, struct tg_diag *d)
{
	*root = 0;
	if (o->merge_threads)
		return 0;
	return tg_fold_child(f, 0, thread, strlen(thread), TG_FOLD_THREAD, root, d);
}

/* Makes T's relative path under PARENT, then its marker frame.  0 or -1. */
static int stitch_graft(struct tg_stitch *s, struct tg_fold *f, struct stitch_task *t,
			size_t parent, struct tg_diag *d)
{
	if (t->rel != TG_FOLD_NONE) {
		size_t depth = s->trie.v[t->rel].depth, at = t->rel, i = depth;
		size_t *path = malloc((depth ? depth : 1) * sizeof(*path));

		if (!path)
			return tg_error(d, "out of memory");
		while (at != 0 && i > 0) {  /* innermost first, into place */
			path[--i] = at;
			at = s->trie.v[at].parent;
		}
		for (; i < depth; i++) {
			const char *text = tg_fold_name(&s->trie, path[i]);
			if (tg_fold_child(f, parent, text, strlen(text), TG_FOLD_CALL, &parent,
					  d) < 0) {
				free(path);
				return -1;
			}
		}
		free(path);
	}
	return tg_fold_child(f, parent, t->label, strlen(t->label), TG_FOLD_CALL, &t->node, d);
}

int tg_stitch_marker(struct tg_stitch *s, struct tg_fold *f, const struct tg_fold_opts *o,
		     uint64_t task, size_t *node, struct tg_diag *d)
{
	struct stitch_task *t = stitch_find(s, task), *cur, **chain = NULL;
	size_t n = 0, cap = 0;
	int loop = 0, ret = -1;

	*node = TG_FOLD_NONE;
	if (!t || !t->scanned)
		return 0;
	/* the tasks whose markers T's needs, T first, up to a resolved one */
	for (cur = t; cur && cur->state != STITCH_DONE; ) {
		if (cur->state == STITCH_BUSY || !cur->scanned) {
			loop = cur->state == STITCH_BUSY;
			break;
		}
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 16;
			struct stitch_task **nv = realloc(chain, nc * sizeof(*nv));
			if (!nv) {
				tg_error(d, "out of memory");
				goto out;
			}
			chain = nv;
			cap = nc;
		}
		cur->state = STITCH_BUSY;
		chain[n++] = cur;
		cur = cur->base ? stitch_find(s, cur->base) : NULL;
	}
	while (n > 0) {
		struct stitch_task *c = chain[--n];
		size_t parent = TG_FOLD_NONE;

		c->state = STITCH_DONE;
		if (loop)
			continue;  /* a loop: none of them is stitched */
		if (!c->base) {
			if (stitch_thread_root(f, o, c->thread, &parent, d) < 0)
				goto out;
		} else {
			struct stitch_task *b = stitch_find(s, c->base);
			if (b && b->state == STITCH_DONE)
				parent = b->node;
		}
		if (parent != TG_FOLD_NONE && stitch_graft(s, f, c, parent, d) < 0)
			goto out;
	}
	*node = t->node;
	ret = 0;
out:
	for (size_t i = 0; i < n; i++)
		chain[i]->state = STITCH_DONE;  /* out of memory midway: not stitched */
	free(chain);
	return ret;
}
