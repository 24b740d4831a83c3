/*
 * fold_load.c - filling the frame tree (fold.h) from a run: the snapshot
 * metrics from a heap snapshot's calling-context trees, delta and time from
 * each thread's .stack and .mem dumps.
 *
 * The dumps pair as decorate-stack pairs them (decorate.c, docs/formats.md):
 * a .stack record at depth D closes the open calls at depth D or deeper,
 * deepest first, and the end of the file closes the rest; the k-th call to
 * close is the one the k-th .mem record returns from.  One pass over both
 * files holds only the open calls.  A binary capture is read natively through
 * recsrc.h, as the files `threadgraph export` would write from it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "aggfile.h"
#include "dumpset.h"
#include "fold.h"
#include "fold_stitch.h"
#include "linereader.h"
#include "recsrc.h"
#include "records.h"
#include "runinfo.h"
#include "snapshot.h"
#include "tg_format.h"
#include "tg_fnv.h"

static int load_is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/*
 * Splits CALL "FILE:LINE:FUNCTION" at its last two ':' (LINE all digits) and
 * writes its frame text into *buf; a call of another form is taken as is.
 * Returns the length or -1 (out of memory).
 */
static long load_call_text(char **buf, size_t *cap, const char *call, size_t len)
{
	const char *c2 = NULL, *c1 = NULL;

	for (size_t i = len; i-- > 0;)
		if (call[i] == ':') {
			if (!c2) {
				c2 = call + i;
			} else {
				c1 = call + i;
				break;
			}
		}
	if (c1 && c2 > c1 + 1) {
		const char *p;
		for (p = c1 + 1; p < c2 && *p >= '0' && *p <= '9'; p++)
			;
		if (p == c2)
			return tg_fold_frame_text(buf, cap, call, (size_t)(c1 - call), c1 + 1,
						  (size_t)(c2 - c1 - 1), c2 + 1,
						  (size_t)(call + len - c2 - 1));
	}
	return tg_fold_frame_text(buf, cap, call, len, NULL, 0, NULL, 0);
}

/* The frame a thread's calls go under: the root, or the thread's frame. */
static int load_thread_root(struct tg_fold *f, const struct tg_fold_opts *o,
			    const char *thread, size_t *root, struct tg_diag *d)
{
	*root = 0;  /* tg_fold_child makes the root when it adds the first frame */
	if (o->merge_threads || o->thread)
		return 0;
	return tg_fold_child(f, 0, thread, strlen(thread), TG_FOLD_THREAD, root, d);
}

static int load_snapshot(struct tg_fold *f, const struct tg_fold_opts *o, struct tg_diag *d)
{
	struct tg_snapshot s;
	char *path = NULL, *buf = NULL;
	size_t cap = 0, *map = NULL, i;
	int ret = -1, matched = 0;

	if (o->metric->metric == TG_FOLD_PEAK && load_is_dir(o->path)) {
		if (!(path = tg_snapshot_find(o->path, TG_SNAP_PICK_PEAK, d)))
			return -1;
	} else if (!(path = strdup(o->path))) {
		return tg_error(d, "out of memory");
	}
	if (tg_snapshot_read(&s, path, d) < 0) {
		free(path);
		return -1;
	}
	free(path);
	if (!(f->source = strdup(s.path)) || !(map = malloc((s.n_nodes + 1) * sizeof(*map)))) {
		tg_error(d, "out of memory");
		goto out;
	}
	f->sampled = s.sampled;
	f->threads = s.n_threads;
	for (i = 0; i < s.n_nodes; i++) {
		const struct tg_snap_node *nd = &s.nodes[i];
		const char *thread = nd->thread == TG_SNAP_NONE ? "<no thread>" : s.threads[nd->thread];
		int64_t v = o->metric->metric == TG_FOLD_ALLOC ? nd->total_bytes : nd->live_bytes;
		size_t at;

		map[i] = TG_FOLD_NONE;
		if (nd->parent != TG_SNAP_NONE) {
			at = map[nd->parent];
			if (at == TG_FOLD_NONE)
				continue;  /* under a thread left out */
		} else {
			if (o->thread && strcmp(o->thread, thread))
				continue;
			if (load_thread_root(f, o, thread, &at, d) < 0)
				goto out;
		}
		matched = 1;
		if (s.version < 2) {
			/* a version 1 site: "call<-caller", innermost first */
			const char *end = nd->call + strlen(nd->call), *p = end;
			while (p > nd->call) {
				const char *q = p;
				long len;
				while (q > nd->call && !(q - nd->call >= 2 && q[-2] == '<' && q[-1] == '-'))
					q--;
				if ((len = load_call_text(&buf, &cap, q, (size_t)(p - q))) < 0) {
					tg_error(d, "out of memory");
					goto out;
				}
				if (tg_fold_child(f, at, buf, (size_t)len, TG_FOLD_CALL, &at, d) < 0)
					goto out;
				p = q > nd->call ? q - 2 : q;
			}
		} else {
			long len = load_call_text(&buf, &cap, nd->call, strlen(nd->call));
			if (len < 0) {
				tg_error(d, "out of memory");
				goto out;
			}
			if (tg_fold_child(f, at, buf, (size_t)len, TG_FOLD_CALL, &at, d) < 0)
				goto out;
		}
		map[i] = at;
		tg_fold_add(&f->v[at].self, v);
	}
	if (o->thread && !matched) {
		tg_error(d, "no thread '%s' in '%s'", o->thread, s.path);
		goto out;
	}
	ret = 0;
out:
	free(buf);
	free(map);
	tg_snapshot_release(&s);
	return ret;
}

/* Seconds beyond which TIME is taken as this (year 33658): keeps sums exact. */
#define LOAD_TIME_MAX_S 1000000000000LL

/* Microseconds of a TIME text (digits, '.', digits), rounded to nearest. */
static int64_t load_time_us(const struct tg_str *t)
{
	int64_t sec = 0, frac = 0;
	size_t i = 0;
	int digits = 0;

	for (; i < t->len && t->s[i] != '.'; i++)
		if ((sec = sec * 10 + (t->s[i] - '0')) > LOAD_TIME_MAX_S)
			sec = LOAD_TIME_MAX_S;
	for (i++; i < t->len && digits < 6; i++, digits++)
		frac = frac * 10 + (t->s[i] - '0');
	for (; digits < 6; digits++)
		frac *= 10;
	if (i < t->len && t->s[i] >= '5')
		frac++;
	return sec * 1000000 + frac;
}

/* The microseconds of a capture record's time, as load_time_us reads the
 * text the capture's export writes for it (tg_cap_fmt_time: six decimals of
 * the unsigned value), without writing the text. */
static int64_t load_cap_us(int64_t t_us)
{
	uint64_t u = (uint64_t)t_us, sec = u / 1000000;

	if (sec > (uint64_t)LOAD_TIME_MAX_S)
		sec = (uint64_t)LOAD_TIME_MAX_S;
	return (int64_t)(sec * 1000000 + u % 1000000);
}

/* A record's time in microseconds: a capture's from its value, a text
 * dump's from its TIME. */
static inline int64_t load_rec_us(const struct tg_src *s, const struct tg_time *t)
{
	return s->is_cap ? load_cap_us(s->rec.t_us) : load_time_us(&t->text);
}

/*
 * A capture's calls name their function by its definition (a code), so the
 * frame a call makes under a given parent is known from (parent, code,
 * line): remembered here, direct-mapped, it spares the frame text, its
 * interning and the child lookup for every call but the first of each
 * (parent, site), which on a long run is nearly every call.  Text dumps
 * (whose names live in the line buffer) do without.
 */
#define LOAD_MEMO_SIZE 4096  /* a power of two */

struct load_memo {
	const struct tg_cap_code *code; /* NULL: empty */
	size_t parent;
	int64_t line;
	size_t node;            /* the frame: tg_fold_child(parent, text of code, line) */
	uint64_t site;          /* load_site_hash of the code's FILE and FUNCTION */
};

static inline size_t load_memo_slot(size_t parent, const struct tg_cap_code *code,
				    int64_t line)
{
	uint64_t h = ((uint64_t)(uintptr_t)code >> 4) * 0x9e3779b97f4a7c15ULL;

	h ^= ((uint64_t)parent * 0xff51afd7ed558ccdULL) ^ (uint64_t)line;
	h *= 0xc4ceb9fe1a85ec53ULL;
	return (size_t)(h >> 40) & (LOAD_MEMO_SIZE - 1);
}

/* An open call while pairing. */
struct load_open {
	size_t node;            /* its frame */
	unsigned depth;         /* .stack indentation */
	uint64_t site;          /* hash of FILE and FUNCTION, to check the pairing */
	const struct tg_cap_code *code; /* a capture's: its function's code (a return
				 * of the same code pairs without hashing) */
	int64_t t_call;         /* microseconds */
	int64_t kids_delta;     /* DELTA of its paired callees */
	int64_t kids_time;      /* durations of its paired callees */
};

struct load_thread {
	struct tg_src mem;      /* the .mem records, read as calls close */
	struct load_open *open;
	size_t top, cap;
	unsigned long beyond;   /* open calls past max_depth, nested inside open[top - 1]
				 * (their .stack depths follow its one by one) */
	unsigned long before;   /* calls open before the first record (depths 0 to
				 * before - 1: the calls a kept segment's head carries),
				 * under open[0]; not frames, their returns are skipped */
	int started;            /* a .stack record was read */
};

/* Closes the innermost open call past max_depth: its .mem record is read and
 * left out (its values are part of its ancestor's own).  0 or -1. */
static int load_close_deep(struct load_thread *t, struct tg_diag *d)
{
	struct tg_memrec r;
	int got = tg_src_next_mem(&t->mem, &r, d);

	t->beyond--;
	return got < 0 ? -1 : 0;
}

static uint64_t load_site_hash(const struct tg_str *file, const struct tg_str *func)
{
	return tg_fnv1a_pair(TG_FNV_BASIS, file->s, file->len, func->s, func->len);
}

/* Closes the innermost call open before the first .stack record: its .mem
 * record is read and left out (the call is not in the tree, and its DELTA
 * holds what its callees did before the dumps begin).  With the .mem read to
 * its end, none of them returned: all are forgotten at once, so that a count
 * of any size (runinfo.json's open_at_start) is not stepped through.  0 or -1. */
static int load_close_before(struct load_thread *t, struct tg_diag *d)
{
	struct tg_memrec r;
	int got = tg_src_next_mem(&t->mem, &r, d);

	if (got == 0)
		t->before = 0;
	else
		t->before--;
	return got < 0 ? -1 : 0;
}

/* Closes the innermost open call with the next .mem record.  0 or -1. */
static int load_close(struct tg_fold *f, const struct tg_fold_opts *o, struct load_thread *t,
		      struct tg_diag *d)
{
	struct load_open *c = &t->open[--t->top], *parent = t->top ? &t->open[t->top - 1] : NULL;
	struct tg_memrec r;
	int got = tg_src_next_mem(&t->mem, &r, d);

	if (got < 0)
		return -1;
	if (!got) {  /* still open when the run ended: nothing known of it */
		f->unpaired++;
		return 0;
	}
	if (!(c->code && t->mem.is_cap && t->mem.rec.code == c->code) &&
	    load_site_hash(&r.file, &r.func) != c->site)
		f->mismatched++;
	if (o->metric->metric == TG_FOLD_DELTA) {
		int64_t own = r.delta;
		tg_fold_add(&own, c->kids_delta == INT64_MIN ? INT64_MAX : -c->kids_delta);
		if (own > 0) {
			tg_fold_add(&f->v[c->node].self, own);
			f->v[c->node].grew++;
		} else {
			tg_fold_add(&f->neg, own == INT64_MIN ? INT64_MAX : -own);
		}
		if (parent)
			tg_fold_add(&parent->kids_delta, r.delta);
	} else {
		/* times are below 2^53 microseconds (load_time_us): no overflow */
		int64_t dur = load_rec_us(&t->mem, &r.time) - c->t_call, own = dur - c->kids_time;
		if (own > 0)
			tg_fold_add(&f->v[c->node].self, own);
		if (parent)
			tg_fold_add(&parent->kids_time, dur);
	}
	return 0;
}

/*
 * Counts the .mem records left after the last call into f->extra, silently
 * skipping malformed ones (they are not returns either).  0 or -1.
 */
static int load_count_extra(struct tg_fold *f, struct tg_src *m, struct tg_diag *d)
{
	const char *line;
	size_t len;
	int got;

	if (m->is_cap) {
		/* the records tg_src_cap_next_mem takes, without its warnings */
		while ((got = tg_capcur_next_return(&m->cur, &m->rec, d)) > 0)
			if (m->rec.line >= 0 && m->rec.line <= 999999999 &&
			    m->rec.value <= TG_DELTA_MAX && m->rec.value >= -TG_DELTA_MAX)
				f->extra++;
		return got;
	}
	while ((got = tg_lr_next(&m->lr, &line, &len, d)) > 0)
		if (!tg_lr_bad(&m->lr) && !tg_memrec_parse(&(struct tg_memrec){ 0 }, line, len,
							   m->has_time))
			f->extra++;
	return got;
}

int tg_fold_load_pair(struct tg_fold *f, const struct tg_fold_opts *o,
		      const struct tg_dumpfile *stack, const struct tg_dumpfile *mem, size_t root,
		      long long open_at_start, struct tg_diag *d)
{
	struct load_thread t;
	struct tg_src ss;
	struct tg_stackrec r;
	struct load_memo *memo = NULL;
	char *buf = NULL;
	size_t cap = 0, nruns = 0, ri = 0;
	const struct tg_stitch_run *runs = o->stitch && stack->thread ?
		tg_stitch_runs(o->stitch, stack->thread, &nruns) : NULL;
	int got, ret = -1;

	memset(&t, 0, sizeof(t));
	if (tg_src_open(&ss, stack, o->has_time, 0, d) < 0)
		return -1;
	if (tg_src_open(&t.mem, mem, o->has_time, 0, d) < 0)
		goto out_stack;
	/* a capture's times are read as numbers (load_rec_us), never as text */
	ss.lazy_time = t.mem.lazy_time = 1;
	/* a capture of the segments kept says how many calls were open where
	 * they start (its head's state): some may return before the first
	 * CALL, which a text export's first depth cannot tell */
	if (ss.is_cap && !ss.is_agg && ss.cur.thread && ss.cur.thread->has_state) {
		t.before = ss.cur.thread->state.depth;
		t.started = 1;
	} else if (!ss.is_cap && open_at_start >= 0) {
		/* its export says so (runinfo.json): the same pairing as the
		 * capture's, the returns before the first CALL included */
		t.before = (unsigned long)open_at_start;
		t.started = 1;
	}
	if (ss.is_cap && !ss.is_agg && !(memo = calloc(LOAD_MEMO_SIZE, sizeof(*memo)))) {
		tg_error(d, "out of memory");
		goto out;
	}
	while ((got = tg_src_next_stack(&ss, &r, d)) > 0) {
		struct load_open *c;
		struct load_memo *m = NULL;
		size_t parent;
		long tlen;

		while (t.beyond && t.open[t.top - 1].depth + t.beyond >= r.depth)
			if (load_close_deep(&t, d) < 0)
				goto out;
		while (t.top && t.open[t.top - 1].depth >= r.depth)
			if (load_close(f, o, &t, d) < 0)
				goto out;
		/* a first record at depth D: D calls were open when the dumps
		 * begin (an export or a capture of the segments kept after
		 * dropped ones); their returns come in the .mem file when they
		 * close, as a later record's lower depth says, and must be
		 * skipped there or every later call pairs one return off */
		if (!t.started) {
			t.started = 1;
			t.before = r.depth;
		}
		while (!t.top && t.before > r.depth)
			if (load_close_before(&t, d) < 0)
				goto out;
		if (o->max_depth && t.top >= o->max_depth) {
			t.beyond++;
			f->deep++;
			continue;
		}
		if (t.top == t.cap) {
			size_t nc = t.cap ? t.cap * 2 : 64;
			struct load_open *nv = realloc(t.open, nc * sizeof(*nv));
			if (!nv) {
				tg_error(d, "out of memory");
				goto out;
			}
			t.open = nv;
			t.cap = nc;
		}
		c = &t.open[t.top];
		memset(c, 0, sizeof(*c));
		c->node = TG_FOLD_NONE;
		while (ri < nruns && runs[ri].call < ss.lineno)
			ri++;
		/* a task's run: its marker frame, under the submitter's calls */
		if (ri < nruns && runs[ri].call == ss.lineno) {
			if (tg_stitch_marker(o->stitch, f, o, runs[ri].task, &c->node, d) < 0)
				goto out;
			f->stitched += c->node != TG_FOLD_NONE;
		}
		parent = t.top ? t.open[t.top - 1].node : root;
		if (memo) {
			c->code = ss.rec.code;
			m = &memo[load_memo_slot(parent, c->code, ss.rec.line)];
		}
		if (c->node != TG_FOLD_NONE) {
			c->site = load_site_hash(&r.file, &r.func);
		} else if (m && m->code == c->code && m->parent == parent &&
			   m->line == ss.rec.line) {
			c->node = m->node;
			c->site = m->site;
		} else {
			char num[24];
			int nlen = snprintf(num, sizeof(num), "%lu", r.line);
			tlen = tg_fold_frame_text(&buf, &cap, r.file.s, r.file.len, num,
						  (size_t)nlen, r.func.s, r.func.len);
			if (tlen < 0) {
				tg_error(d, "out of memory");
				goto out;
			}
			if (tg_fold_child(f, parent, buf, (size_t)tlen, TG_FOLD_CALL, &c->node,
					  d) < 0)
				goto out;
			c->site = load_site_hash(&r.file, &r.func);
			if (m) {
				m->code = c->code;
				m->parent = parent;
				m->line = ss.rec.line;
				m->node = c->node;
				m->site = c->site;
			}
		}
		c->depth = r.depth;
		c->t_call = ss.has_time && o->metric->metric == TG_FOLD_TIME ?
			    load_rec_us(&ss, &r.time) : 0;
		t.top++;
	}
	if (got < 0)
		goto out;
	while (t.beyond)
		if (load_close_deep(&t, d) < 0)
			goto out;
	while (t.top)
		if (load_close(f, o, &t, d) < 0)
			goto out;
	while (t.before)
		if (load_close_before(&t, d) < 0)
			goto out;
	if (load_count_extra(f, &t.mem, d) < 0)
		goto out;
	ret = 0;
out:
	tg_src_release(&t.mem);
	free(t.open);
	free(memo);
	free(buf);
out_stack:
	tg_src_release(&ss);
	return ret;
}

/* DIR/BASE SUFFIX, or DIR/BASE SUFFIX.gz when only that one is there (a run's
 * dumps are read plain or gzip'd, docs/cli.md); NULL when out of memory. */
static char *fl_dump_path(const char *dir, const char *base, const char *suffix)
{
	struct stat st;
	char *p;

	if (asprintf(&p, "%s/%s%s", dir, base, suffix) < 0)
		return NULL;
	if (stat(p, &st) < 0 && errno == ENOENT) {
		char *gz;
		if (asprintf(&gz, "%s.gz", p) < 0)
			return p;
		if (stat(gz, &st) == 0) {
			free(p);
			return gz;
		}
		free(gz);
	}
	return p;
}

/*
 * Base names (SUFFIX and a trailing ".gz" cut) of DIR's files ending in SUFFIX
 * or SUFFIX.gz, each once, as *BASES and *N (tg_dir_names_free).  0 or -1.
 */
static int fl_dump_bases(const char *dir, const char *suffix, char ***bases, size_t *n,
			 struct tg_diag *d)
{
	size_t i, k = 0;

	if (tg_dir_names(dir, suffix, 1, bases, n, d) < 0)
		return -1;
	for (i = 0; i < *n; i++) {
		char *b = (*bases)[i];
		size_t len = strlen(b);
		if (len > 3 && !strcmp(b + len - 3, ".gz"))
			len -= 3;
		b[len - strlen(suffix)] = '\0';
	}
	/* X.SUFFIX and X.SUFFIX.gz: one thread, read once (the plain file) */
	for (i = 0; i < *n; i++) {
		if (k && !strcmp((*bases)[k - 1], (*bases)[i])) {
			free((*bases)[i]);
			continue;
		}
		(*bases)[k++] = (*bases)[i];
	}
	*n = k;
	return 0;
}

/*
 * Counts into f->no_stack the threads of o->path with a .mem and no .stack
 * (STACKS, N: the bases that have one), which the delta and time metrics
 * cannot read: each call's values come from pairing the two.  The first
 * one's name and .mem path go to f->no_stack_thread and f->no_stack_mem.
 * 0 or -1.
 */
static int load_count_no_stack(struct tg_fold *f, const struct tg_fold_opts *o,
			       char **stacks, size_t n, struct tg_diag *d)
{
	char **mems = NULL;
	size_t nm = 0, i, j;
	int ret = -1;

	if (fl_dump_bases(o->path, TG_MEM_SUFFIX, &mems, &nm, d) < 0)
		return -1;
	for (i = 0; i < nm; i++) {
		if (!strcmp(mems[i], "process"))
			continue;
		for (j = 0; j < n && strcmp(stacks[j], mems[i]); j++)
			;
		if (j < n)
			continue;
		if (!f->no_stack++ &&
		    (!(f->no_stack_thread = strdup(mems[i])) ||
		     !(f->no_stack_mem = fl_dump_path(o->path, mems[i], TG_MEM_SUFFIX)))) {
			tg_error(d, "out of memory");
			goto out;
		}
	}
	ret = 0;
out:
	tg_dir_names_free(mems, nm);
	return ret;
}

static int load_dumps(struct tg_fold *f, const struct tg_fold_opts *o, struct tg_diag *d)
{
	char **bases = NULL, *stack = NULL, *mem = NULL;
	struct tg_run_threads info;  /* runinfo.json: the calls open where each begins */
	size_t n = 0, i;
	int ret = -1;

	tg_run_threads_init(&info);

	if (o->metric->metric == TG_FOLD_TIME && !o->has_time)
		return tg_error(d, "the time metric needs timestamps (the dumps have none: "
				"--no_time)");
	if (!(f->source = strdup(o->path)))
		return tg_error(d, "out of memory");
	if (fl_dump_bases(o->path, TG_STACK_SUFFIX, &bases, &n, d) < 0)
		return -1;
	if (!n) {
		int sampled = 0;
		(void)tg_run_end_state(o->path, &sampled);
		if (sampled)
			tg_error(d, "'%s' is a sampled run, which records no calls: the %s "
				 "metric needs a full run (the default metric gives a sampled "
				 "run's call sites, from its snapshots)", o->path,
				 o->metric->name);
		else
			tg_error(d, "no .stack files in '%s': the %s metric pairs each thread's "
				 ".stack and .mem dumps, so the run needs stacks (threadgraph run "
				 "--stack, ProcessProfile.trackStack())", o->path, o->metric->name);
		goto out;
	}
	if (!o->thread && load_count_no_stack(f, o, bases, n, d) < 0)
		goto out;
	if (tg_run_threads_read(&info, o->path, d) < 0)
		goto out;
	for (i = 0; o->stitch && i < n; i++) {  /* the task links' first pass */
		free(stack);
		if (!(stack = fl_dump_path(o->path, bases[i], TG_STACK_SUFFIX)))
			goto oom;
		{
			struct tg_dumpfile sdf = { stack, bases[i], TG_DUMP_STACK, NULL, NULL };
			if (tg_stitch_scan(o->stitch, bases[i], &sdf, o->has_time, d) < 0)
				goto out;
		}
	}
	for (i = 0; i < n; i++) {
		size_t root;
		if (o->thread && strcmp(o->thread, bases[i]))
			continue;
		free(stack);
		free(mem);
		mem = NULL;
		if (!(stack = fl_dump_path(o->path, bases[i], TG_STACK_SUFFIX)))
			goto oom;
		if (!(mem = fl_dump_path(o->path, bases[i], TG_MEM_SUFFIX)))
			goto oom;
		{
			struct tg_dumpfile sdf = { stack, bases[i], TG_DUMP_STACK, NULL, NULL };
			struct tg_dumpfile mdf = { mem, NULL, TG_DUMP_MEM, NULL, NULL };
			const struct tg_run_thread *ri = tg_run_threads_find(&info, bases[i]);
			if (load_thread_root(f, o, bases[i], &root, d) < 0 ||
			    tg_fold_load_pair(f, o, &sdf, &mdf, root,
					      ri ? ri->open_at_start : -1, d) < 0)
				goto out;
		}
		f->threads++;
	}
	if (o->thread && !f->threads) {
		tg_error(d, "no thread '%s' with a .stack file in '%s'", o->thread, o->path);
		goto out;
	}
	ret = 0;
	goto out;
oom:
	tg_error(d, "out of memory");
out:
	tg_dir_names_free(bases, n);
	tg_run_threads_release(&info);
	free(stack);
	free(mem);
	return ret;
}

/*
 * delta and time from a binary capture: each thread's call and return records,
 * paired as on the files `threadgraph export` writes (same threads, same
 * order, same messages).  0 or -1.
 */
static int load_capture(struct tg_fold *f, const struct tg_fold_opts *o,
			const struct tg_capture *cap, struct tg_diag *d)
{
	struct tg_dumpset set;
	char *mem = NULL;
	int ret = -1;

	if (o->metric->metric == TG_FOLD_TIME && !o->has_time)
		return tg_error(d, "the time metric needs timestamps (the dumps have none: "
				"--no_time)");
	if (o->metric->metric == TG_FOLD_TIME && !(cap->flags & TG_CAP_F_TIME))
		return tg_error(d, "the time metric needs timestamps (the capture '%s' has "
				"none)", cap->path);
	if (!(f->source = strdup(o->path)))
		return tg_error(d, "out of memory");
	if (tg_dumpset_init_capture(&set, cap, TG_VIEW_STACK, d) < 0)
		goto out;
	if (!set.n) {
		tg_error(d, "no .stack files in '%s': the %s metric pairs each thread's .stack "
			 "and .mem dumps, so the run needs stacks (threadgraph run --stack, "
			 "ProcessProfile.trackStack())", o->path, o->metric->name);
		goto out;
	}
	if (!(cap->flags & TG_CAP_F_MEMORY)) {
		tg_error(d, "no .mem records in '%s': the %s metric pairs each thread's .stack "
			 "and .mem dumps", cap->path, o->metric->name);
		goto out;
	}
	for (size_t i = 0; o->stitch && i < set.n; i++)  /* the task links' first pass */
		if (tg_stitch_scan(o->stitch, set.v[i].thread, &set.v[i], o->has_time, d) < 0)
			goto out;
	for (size_t i = 0; i < set.n; i++) {
		const struct tg_dumpfile *st = &set.v[i];
		struct tg_dumpfile mdf = { NULL, NULL, TG_DUMP_MEM, cap, st->cap_thread };
		size_t root, len = strlen(st->path) - strlen(TG_STACK_SUFFIX);

		if (o->thread && strcmp(o->thread, st->thread))
			continue;
		free(mem);
		if (asprintf(&mem, "%.*s%s", (int)len, st->path, TG_MEM_SUFFIX) < 0) {
			mem = NULL;
			tg_error(d, "out of memory");
			goto out;
		}
		mdf.path = mem;
		if (load_thread_root(f, o, st->thread, &root, d) < 0 ||
		    tg_fold_load_pair(f, o, st, &mdf, root, -1, d) < 0)
			goto out;
		f->threads++;
	}
	if (o->thread && !f->threads) {
		tg_error(d, "no thread '%s' with a .stack file in '%s'", o->thread, o->path);
		goto out;
	}
	ret = 0;
out:
	free(mem);
	tg_dumpset_release(&set);
	return ret;
}

/*
 * delta and time from an aggregate run (aggfile.h): each call path is a frame;
 * its own value is the path's total (delta or time) minus its callees' totals,
 * self = max(own, 0) -- per path, where the dumps' pairing clamps per call;
 * delta's grew counts all the calls of a path whose own value is positive.
 * 0 or -1.
 */
static int load_aggregate(struct tg_fold *f, const struct tg_fold_opts *o, struct tg_diag *d)
{
	struct tg_aggfile a;
	size_t *map = NULL, *depth = NULL;
	int64_t *own = NULL;
	char *buf = NULL, line[16];
	size_t cap = 0;
	int ret = -1;

	if (tg_aggfile_load(&a, o->path, d) < 0)
		goto out;
	if (!(f->source = strdup(o->path)))
		goto oom;
	for (size_t i = 0; i < a.nt; i++) {
		const struct tg_agg_rthread *t = &a.t[i];
		size_t root;

		if (o->thread && strcmp(o->thread, t->base))
			continue;
		free(map);
		free(depth);
		free(own);
		map = malloc(t->n_nodes * sizeof(*map));
		depth = malloc(t->n_nodes * sizeof(*depth));
		own = malloc(t->n_nodes * sizeof(*own));
		if (!map || !depth || !own)
			goto oom;
		if (load_thread_root(f, o, t->base, &root, d) < 0)
			goto out;
		map[0] = root;
		depth[0] = 0;
		own[0] = 0;
		for (size_t j = 1; j < t->n_nodes; j++)
			own[j] = o->metric->metric == TG_FOLD_TIME ? t->nodes[j].time_us
				 : t->nodes[j].total;
		for (size_t j = 1; j < t->n_nodes; j++) {
			const struct tg_agg_rnode *n = &t->nodes[j];
			int64_t v = o->metric->metric == TG_FOLD_TIME ? n->time_us : n->total;
			if (n->parent)
				tg_fold_add(&own[n->parent], v == INT64_MIN ? INT64_MAX : -v);
		}
		for (size_t j = 1; j < t->n_nodes; j++) {
			const struct tg_agg_rnode *n = &t->nodes[j];
			const struct tg_agg_rfunc *fn = &a.f[n->func - 1];
			long len;
			depth[j] = depth[n->parent] + 1;
			if (o->max_depth && depth[j] > o->max_depth) {
				map[j] = map[n->parent];
				f->deep += n->count > ULONG_MAX ? ULONG_MAX : (unsigned long)n->count;
			} else {
				snprintf(line, sizeof(line), "%u", n->line);
				if ((len = tg_fold_frame_text(&buf, &cap, fn->file, strlen(fn->file), line,
							      strlen(line), fn->func, strlen(fn->func))) < 0)
					goto oom;
				if (tg_fold_child(f, map[n->parent], buf, (size_t)len, TG_FOLD_CALL,
						  &map[j], d) < 0)
					goto out;
			}
			if (own[j] > 0) {
				tg_fold_add(&f->v[map[j]].self, own[j]);
				/* the calls are known per path, not one by one: all of them */
				if (o->metric->metric == TG_FOLD_DELTA)
					f->v[map[j]].grew += n->count;
			} else if (o->metric->metric == TG_FOLD_DELTA)
				tg_fold_add(&f->neg, own[j]);
		}
		f->threads++;
	}
	if (o->thread && !f->threads) {
		tg_error(d, "no thread '%s' in '%s'", o->thread, a.path);
		goto out;
	}
	ret = 0;
	goto out;
oom:
	tg_error(d, "out of memory");
out:
	free(map);
	free(depth);
	free(own);
	free(buf);
	tg_aggfile_release(&a);
	return ret;
}

/* The task links of the run CAP (or the text dumps in o->path) into oo->stitch
 * when stitching applies.  0 or -1. */
static int load_stitch(struct tg_fold_opts *oo, const struct tg_capture *cap,
		       struct tg_diag *d)
{
	char *dir;
	int rc;

	oo->stitch = NULL;
	if (oo->no_stitch || oo->thread)
		return 0;
	if (!cap)
		return tg_stitch_open(&oo->stitch, oo->path, d);
	{
		const char *slash = strrchr(cap->path, '/');
		dir = slash ? strndup(cap->path, slash == cap->path ? 1 :
				      (size_t)(slash - cap->path)) : strdup(".");
	}
	if (!dir)
		return tg_error(d, "out of memory");
	rc = tg_stitch_open(&oo->stitch, dir, d);
	free(dir);
	return rc;
}

int tg_fold_load(struct tg_fold *f, const struct tg_fold_opts *o, struct tg_diag *d)
{
	struct tg_capture *cap = NULL;
	struct tg_fold_opts oo = *o;
	int rc;

	f->metric = o->metric;
	oo.stitch = NULL;
	if (o->metric->from_snapshot)
		rc = load_snapshot(f, o, d);
	else if (o->cap)
		rc = load_stitch(&oo, o->cap, d) < 0 ? -1 : load_capture(f, &oo, o->cap, d);
	else if (tg_aggfile_is_run(o->path))
		rc = load_aggregate(f, o, d);
	else if ((rc = tg_dumpset_open_capture(o->path, &cap, d)) != 0)
		rc = rc < 0 || load_stitch(&oo, cap, d) < 0 ? -1 : load_capture(f, &oo, cap, d);
	else if (!load_is_dir(o->path))
		rc = tg_error(d, "'%s' is not a run directory (the %s metric reads its .stack "
			      "and .mem dumps)", o->path, o->metric->name);
	else
		rc = load_stitch(&oo, NULL, d) < 0 ? -1 : load_dumps(f, &oo, d);
	tg_stitch_free(oo.stitch);
	tg_dumpset_free_capture(cap);
	if (rc < 0)
		return -1;
	return tg_fold_finish(f, d);
}
