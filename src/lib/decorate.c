/*
 * decorate.c - the decorate-stack algorithm of the original, streamed.
 *
 * The call an event returns from is found by position first: calls and returns
 * pair up (docs/formats.md), so the event, the K-th memory record, closes the
 * K-th call to close in the stack file.  Only when that call does not name the
 * event's FILE and FUNCTION (dumps whose pairing is broken) does the original's
 * rule apply: the last call of that FILE and FUNCTION at or before the event's
 * time.  The original's rule alone picks the wrong call when a return and the
 * next call of the same function share a timestamp.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "decorate.h"
#include "fmt.h"
#include "linereader.h"
#include "records.h"
#include "recsrc.h"
#include "runinfo.h"
#include "tg_format.h"

/* One call of the subtree. */
struct dec_node {
	unsigned depth;             /* indentation in the .stack file */
	unsigned long first_line;   /* LINE of the .stack record (function start) */
	unsigned long stack_lineno; /* line in the .stack file */
	double t_call;              /* call time */
	size_t file_off, file_len;  /* FILE in the arena */
	size_t func_off, func_len;  /* FUNCTION in the arena */
	size_t post_rank;           /* the subtree's calls that close before it */
	/* from the paired .mem record: */
	unsigned long end_line;     /* LINE at the return */
	unsigned long mem_lineno;   /* line in the .mem file */
	long long delta;            /* DELTA */
	double t_ret;               /* return time */
	int mismatched;             /* the record names another FILE or FUNCTION */
};

/* dec_open.node of a call left out by the options' bound */
#define DEC_LEFT_OUT ((size_t)-1)

/* A call of the subtree not closed yet where it is read. */
struct dec_open {
	unsigned depth;             /* indentation in the .stack file */
	size_t node;                /* index in nodes, or DEC_LEFT_OUT */
};

/*
 * The subtree being read.  Only the calls printed are held (nodes), with the
 * calls still open (the nesting, not the subtree's size): a bounded output is
 * read in bounded memory however large the subtree.
 */
struct dec_state {
	const struct tg_decorate_opts *o;  /* the bound: has_depth, depth, max_lines */
	struct dec_node *nodes;     /* the calls printed, in pre-order */
	size_t n, alloc;
	char *arena;                /* FILE and FUNCTION texts of the nodes */
	size_t arena_len, arena_alloc;
	size_t *post;               /* node indices in post-order (the order they close) */
	size_t n_post;              /* entries of post; its size is alloc */
	struct dec_open *open;      /* the calls open, outermost first */
	size_t top, open_alloc;
	size_t total;               /* calls of the subtree read, printed or not */
	size_t closed;              /* of them, the calls closed */
	size_t deep;                /* left out: deeper than o->depth */
	size_t past;                /* left out: past the first o->max_lines */
};

static int dec_is_number(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

/* The number EVENT names (dec_is_number), or 0 when it is 0 or beyond an
 * unsigned long: no line or record has it. */
static unsigned long dec_number(const char *event)
{
	unsigned long v;

	errno = 0;
	v = strtoul(event, NULL, 10);
	return errno == ERANGE ? 0 : v;
}

/* Non-zero when line (with rest = the part after TIME#) is what event names. */
static int dec_line_matches(const char *event, size_t elen, const char *line, size_t len,
			    const struct tg_str *rest)
{
	const char *p;

	if (elen == len && !memcmp(event, line, len))
		return 1;
	if (!rest)
		return 0;
	if (elen == rest->len && !memcmp(event, rest->s, elen))
		return 1;
	/* memg.txt legend line: "N: THREAD>REST" */
	if (elen <= rest->len + 1 || event[elen - rest->len - 1] != '>' ||
	    memcmp(event + elen - rest->len, rest->s, rest->len))
		return 0;
	for (p = event; *p >= '0' && *p <= '9'; p++)
		;
	return p > event && p[0] == ':' && p[1] == ' ';
}

int tg_decorate_find_event(const char *mem_path, const char *event, unsigned long *lineno,
			   struct tg_diag *d)
{
	struct tg_lr lr;
	const char *line;
	size_t len, elen = strlen(event);
	int got, number = dec_is_number(event);
	unsigned long want = number ? dec_number(event) : 0;

	if (number && want == 0)
		return tg_error(d, "bad event '%s': line numbers go from 1 to %lu", event,
				ULONG_MAX);
	if (tg_lr_open(&lr, mem_path, 0, d) < 0)
		return -1;
	while ((got = tg_lr_next(&lr, &line, &len, d)) > 0) {
		const char *hash;
		struct tg_str rest;

		if (number) {
			if (lr.lineno == want)
				break;
			continue;
		}
		if (lr.overlong)
			continue;
		hash = memchr(line, '#', len);
		rest.s = hash ? hash + 1 : line;
		rest.len = hash ? len - (size_t)(hash + 1 - line) : len;
		if (dec_line_matches(event, elen, line, len, &rest))
			break;
	}
	*lineno = lr.lineno;
	tg_lr_release(&lr);
	if (got < 0)
		return -1;
	if (got == 0) {
		if (number)
			return tg_error(d, "no event at line %lu: '%s' has %lu lines", want,
					mem_path, *lineno);
		return tg_error(d, "event not found in '%s'", mem_path);
	}
	return 0;
}

static int dec_arena_add(struct dec_state *s, const struct tg_str *t, size_t *off,
			 struct tg_diag *d)
{
	/* allocated on the first add even for an empty text: node offsets are
	 * applied to the arena, and NULL + 0 is undefined */
	if (!s->arena || s->arena_len + t->len > s->arena_alloc) {
		size_t na = s->arena_alloc ? s->arena_alloc * 2 : 4096;
		char *nb;
		while (na < s->arena_len + t->len)
			na *= 2;
		nb = realloc(s->arena, na);
		if (!nb)
			return tg_error(d, "out of memory");
		s->arena = nb;
		s->arena_alloc = na;
	}
	memcpy(s->arena + s->arena_len, t->s, t->len);
	*off = s->arena_len;
	s->arena_len += t->len;
	return 0;
}

static int dec_node_add(struct dec_state *s, const struct tg_stackrec *r,
			unsigned long lineno, struct tg_diag *d)
{
	struct dec_node *n;

	if (s->n == s->alloc) {
		size_t na = s->alloc ? s->alloc * 2 : 64;
		struct dec_node *nv = realloc(s->nodes, na * sizeof(*nv));
		size_t *pv;
		if (!nv)
			return tg_error(d, "out of memory");
		s->nodes = nv;
		if (!(pv = realloc(s->post, na * sizeof(*pv))))
			return tg_error(d, "out of memory");
		s->post = pv;
		s->alloc = na;
	}
	n = &s->nodes[s->n];
	memset(n, 0, sizeof(*n));
	n->depth = r->depth;
	n->first_line = r->line;
	n->stack_lineno = lineno;
	n->t_call = tg_time_exact(&r->time.text);
	n->file_len = r->file.len;
	n->func_len = r->func.len;
	if (dec_arena_add(s, &r->file, &n->file_off, d) < 0 ||
	    dec_arena_add(s, &r->func, &n->func_off, d) < 0)
		return -1;
	s->n++;
	return 0;
}

/* Forgets the subtree read so far (the bound's counts too). */
static void dec_state_reset(struct dec_state *s)
{
	s->n = s->n_post = s->top = 0;
	s->arena_len = 0;
	s->total = s->closed = s->deep = s->past = 0;
}

/*
 * Counts a call of the subtree at depth `depth` (the first is its root) and
 * says whether the options' bound prints it: 1 if so, else 0 (counted in
 * s->deep or s->past).  The root is always printed.
 */
static int dec_keeps(struct dec_state *s, unsigned depth)
{
	const struct tg_decorate_opts *o = s->o;

	s->total++;
	if (!s->n)
		return 1;
	if (o && o->has_depth && depth - s->nodes[0].depth > o->depth) {
		s->deep++;
		return 0;
	}
	if (o && o->max_lines && s->n >= o->max_lines) {
		s->past++;
		return 0;
	}
	return 1;
}

/* Pushes a call on the open calls: node is its index, or DEC_LEFT_OUT. */
static int dec_open_push(struct dec_state *s, unsigned depth, size_t node, struct tg_diag *d)
{
	if (s->top == s->open_alloc) {
		size_t na = s->open_alloc ? s->open_alloc * 2 : 64;
		struct dec_open *nv = realloc(s->open, na * sizeof(*nv));
		if (!nv)
			return tg_error(d, "out of memory");
		s->open = nv;
		s->open_alloc = na;
	}
	s->open[s->top].depth = depth;
	s->open[s->top].node = node;
	s->top++;
	return 0;
}

/* Closes the open calls at depth `depth` or deeper, deepest first: the post-order. */
static void dec_close_to(struct dec_state *s, unsigned depth)
{
	while (s->top && s->open[s->top - 1].depth >= depth) {
		size_t node = s->open[--s->top].node;

		if (node != DEC_LEFT_OUT) {
			s->nodes[node].post_rank = s->closed;
			s->post[s->n_post++] = node;
		}
		s->closed++;
	}
}

/* Reads line r (number lineno) of the subtree: closes the calls it follows,
 * and holds it if the bound prints it.  Returns 0 or -1. */
static int dec_enter(struct dec_state *s, const struct tg_stackrec *r, unsigned long lineno,
		     struct tg_diag *d)
{
	size_t node = DEC_LEFT_OUT;

	dec_close_to(s, r->depth);
	if (dec_keeps(s, r->depth)) {
		if (dec_node_add(s, r, lineno, d) < 0)
			return -1;
		node = s->n - 1;
	}
	return dec_open_push(s, r->depth, node, d);
}

/*
 * Collects into s the subtree of the call at line at_line of the stack if that
 * line is a call of file:func; with at_line 0, of the last call of file:func at
 * or before t.  Leaves s->n 0 when there is no such call.  Returns 0 or -1.
 */
static int dec_scan_stack(struct dec_state *s, const char *path, const struct tg_str *file,
			  const struct tg_str *func, double t, unsigned long at_line,
			  struct tg_diag *d)
{
	struct tg_lr lr;
	struct tg_time_order order = { 0 };
	struct tg_stackrec r;
	const char *line, *why;
	size_t len;
	int got, ret = -1, open_tree = 0;

	if (tg_lr_open(&lr, path, 0, d) < 0)
		return -1;
	while ((got = tg_lr_next(&lr, &line, &len, d)) > 0) {
		why = tg_lr_bad(&lr) ?: tg_stackrec_parse(&r, line, len, 1);
		if (why) {
			if (tg_malformed(d, path, lr.lineno, why) < 0)
				goto release;
			continue;
		}
		if (tg_time_order_check(&order, r.time.v, path, lr.lineno, d) < 0)
			goto release;
		if (at_line ? lr.lineno > at_line && !open_tree
			    : r.time.v > t && tg_time_exact(&r.time.text) > t)
			break;
		if ((!at_line || lr.lineno == at_line) &&
		    r.file.len == file->len && r.func.len == func->len &&
		    !memcmp(r.file.s, file->s, file->len) && !memcmp(r.func.s, func->s, func->len)) {
			dec_state_reset(s); /* a later call: forget the earlier subtree */
			open_tree = 1;
		} else if (open_tree && r.depth <= s->nodes[0].depth) {
			open_tree = 0;
			dec_close_to(s, 0);
		}
		if (open_tree && dec_enter(s, &r, lr.lineno, d) < 0)
			goto release;
	}
	if (got < 0)
		goto release;
	dec_close_to(s, 0); /* the end of the file closes the rest */
	ret = 0;
release:
	tg_lr_release(&lr);
	return ret;
}

/*
 * Counts in *k the valid .mem records of path up to and including line lineno
 * (malformed lines are reported by the other passes).  Returns 0 or -1.
 */
static int dec_count_records(const char *path, unsigned long lineno, unsigned long *k,
			     struct tg_diag *d)
{
	struct tg_lr lr;
	struct tg_memrec r;
	const char *line;
	size_t len;
	int got;

	*k = 0;
	if (tg_lr_open(&lr, path, 0, d) < 0)
		return -1;
	while ((got = tg_lr_next(&lr, &line, &len, d)) > 0 && lr.lineno <= lineno)
		if (!tg_lr_bad(&lr) && !tg_memrec_parse(&r, line, len, 1))
			(*k)++;
	tg_lr_release(&lr);
	return got < 0 ? -1 : 0;
}

/*
 * Finds in *call_line the stack line of the k-th call to close: a record at
 * depth D closes the open calls at depth D or deeper, deepest first, and the end
 * of the file closes the rest.  `before` calls, at depths 0 to before - 1, are
 * open where the file begins (an export of a capture's kept segments says how
 * many: runinfo.json's open_at_start); -1 takes the first record's depth, as
 * folded reads text dumps.  They close as the file's calls do, but have no line.
 * Holds only the open calls of the file.  Returns 1 when found, 2 when the k-th
 * call to close is one of those begun before the file, 0 when fewer than k
 * calls close, -1 on error.
 */
static int dec_kth_closed_call(const char *path, unsigned long k, long long before,
			       unsigned long *call_line, struct tg_diag *d)
{
	struct tg_lr lr;
	struct tg_stackrec r;
	const char *line;
	size_t len, top = 0, alloc = 0;
	struct { unsigned depth; unsigned long lineno; } *open = NULL;
	unsigned long closed = 0;
	/* the calls begun before the file still open: depths 0 to pre - 1,
	 * counted, not held (runinfo.json may give any number) */
	unsigned long long pre = before > 0 ? (unsigned long long)before : 0;
	int got, ret = -1, started = before >= 0;

	if (tg_lr_open(&lr, path, 0, d) < 0)
		return -1;
	while ((got = tg_lr_next(&lr, &line, &len, d)) > 0) {
		if (tg_lr_bad(&lr) || tg_stackrec_parse(&r, line, len, 1))
			continue;
		if (!started) {
			started = 1;
			pre = r.depth;
		}
		while (top && open[top - 1].depth >= r.depth)
			if (++closed, top--, closed == k)
				goto found;
		if (!top && pre > r.depth) {
			if (pre - r.depth >= k - closed) {
				ret = 2;
				goto release;
			}
			closed += (unsigned long)(pre - r.depth);
			pre = r.depth;
		}
		if (top == alloc) {
			size_t na = alloc ? alloc * 2 : 64;
			void *nv = realloc(open, na * sizeof(*open));
			if (!nv) {
				tg_error(d, "out of memory");
				goto release;
			}
			open = nv;
			alloc = na;
		}
		open[top].depth = r.depth;
		open[top].lineno = lr.lineno;
		top++;
	}
	if (got < 0)
		goto release;
	ret = 0;
	while (top)
		if (++closed, top--, closed == k)
			goto found;
	if (pre >= k - closed)
		ret = 2;
	goto release;
found:
	*call_line = open[top].lineno;
	ret = 1;
release:
	free(open);
	tg_lr_release(&lr);
	return ret;
}

/* The directory of path ("." for a bare name), malloc'ed, or NULL (memory). */
static char *dec_dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return strdup(".");
	return strndup(path, slash > path ? (size_t)(slash - path) : 1);
}

/*
 * The calls open where the dumps begin, as the runinfo.json beside them gives
 * it for the thread of mem_path (an export of a capture's kept segments writes
 * open_at_start): -1 when it gives none, when the two files are not in the same
 * directory, or when mem_path is not a THREAD.mem; -2 when out of memory
 * (d->msg set).
 */
static long long dec_open_at_start(const char *mem_path, const char *stack_path,
				   struct tg_diag *d)
{
	const char *slash = strrchr(mem_path, '/'), *base = slash ? slash + 1 : mem_path;
	size_t blen = strlen(base), slen = strlen(TG_MEM_SUFFIX);
	char *dir = NULL, *sdir = NULL, *name = NULL;
	struct tg_run_threads info;
	const struct tg_run_thread *t;
	struct stat a, b;
	long long ret = -1;

	tg_run_threads_init(&info);
	if (blen <= slen || strcmp(base + blen - slen, TG_MEM_SUFFIX))
		return -1;
	if (!(dir = dec_dir_of(mem_path)) || !(sdir = dec_dir_of(stack_path)) ||
	    !(name = strndup(base, blen - slen))) {
		tg_error(d, "out of memory");
		ret = -2;
		goto out;
	}
	if (stat(dir, &a) < 0 || stat(sdir, &b) < 0 || a.st_dev != b.st_dev ||
	    a.st_ino != b.st_ino)
		goto out;
	if (tg_run_threads_read(&info, dir, d) < 0) {
		ret = -2;
		goto out;
	}
	if ((t = tg_run_threads_find(&info, name)))
		ret = t->open_at_start;
out:
	tg_run_threads_release(&info);
	free(dir);
	free(sdir);
	free(name);
	return ret;
}

/*
 * Pairs the calls held with their returns: of the k valid .mem records up to
 * line lineno (the event the k-th), the last s->total are the subtree's returns
 * in post-order (children first), the i-th closing the call with post_rank i.
 * Only those of the calls held are kept.  Returns 0 or -1.
 */
static int dec_read_returns(struct dec_state *s, const char *path, unsigned long lineno,
			    unsigned long k, struct tg_diag *d)
{
	struct tg_lr lr;
	struct tg_time_order order = { 0 };
	struct tg_memrec r;
	const char *line, *why;
	size_t len, next = 0;
	unsigned long have = 0;
	int got, ret = -1;

	if (tg_lr_open(&lr, path, 0, d) < 0)
		return -1;
	while ((got = tg_lr_next(&lr, &line, &len, d)) > 0 && lr.lineno <= lineno) {
		struct dec_node *n;

		why = tg_lr_bad(&lr) ?: tg_memrec_parse(&r, line, len, 1);
		if (why) {
			if (tg_malformed(d, path, lr.lineno, why) < 0)
				goto release;
			continue;
		}
		if (tg_time_order_check(&order, r.time.v, path, lr.lineno, d) < 0)
			goto release;
		have++;
		/* record `have` is the (have - (k - total) - 1)-th return of the subtree */
		if (have + s->total <= k || next == s->n_post ||
		    s->nodes[s->post[next]].post_rank != have + s->total - k - 1)
			continue;
		n = &s->nodes[s->post[next++]];
		n->end_line = r.line;
		n->delta = r.delta;
		n->t_ret = tg_time_exact(&r.time.text);
		n->mem_lineno = lr.lineno;
		n->mismatched = r.func.len != n->func_len ||
				memcmp(r.func.s, s->arena + n->func_off, r.func.len) ||
				r.file.len != n->file_len ||
				memcmp(r.file.s, s->arena + n->file_off, r.file.len);
	}
	if (got < 0)
		goto release;
	if (have < s->total) {
		tg_error(d, "the call has %zu calls in its subtree but only %lu memory events "
			 "end at line %lu of '%s'", s->total, have, lineno, path);
		goto release;
	}
	ret = 0;
release:
	tg_lr_release(&lr);
	return ret;
}

static void dec_step(const struct tg_decorate_report *r, const char *msg)
{
	if (r && r->step)
		r->step(r->ctx, msg);
}

static void dec_state_release(struct dec_state *s)
{
	free(s->open);
	free(s->nodes);
	free(s->arena);
	free(s->post);
}

/* Reads line `lineno` of path as a .mem record into r, its text into *copy. */
static int dec_read_event(const char *path, unsigned long lineno, struct tg_memrec *r,
			  char **copy, struct tg_diag *d)
{
	struct tg_lr lr;
	const char *line, *why;
	size_t len;
	int got;

	if (tg_lr_open(&lr, path, 0, d) < 0)
		return -1;
	while ((got = tg_lr_next(&lr, &line, &len, d)) > 0 && lr.lineno < lineno)
		;
	if (got <= 0) {
		tg_lr_release(&lr);
		return got < 0 ? -1 : tg_error(d, "no event at line %lu of '%s'", lineno, path);
	}
	if (tg_lr_bad(&lr)) {
		why = tg_lr_bad(&lr);
		tg_lr_release(&lr);
		return tg_error(d, "line %lu of '%s' is not a memory event: %s", lineno, path, why);
	}
	*copy = malloc(len + 1);
	if (!*copy) {
		tg_lr_release(&lr);
		return tg_error(d, "out of memory");
	}
	memcpy(*copy, line, len);
	(*copy)[len] = '\0';
	tg_lr_release(&lr);
	why = tg_memrec_parse(r, *copy, len, 1);
	if (why)
		return tg_error(d, "line %lu of '%s' is not a memory event: %s", lineno, path, why);
	return 0;
}

/* Writes the decorated subtree s (nodes complete) to out. */
static void dec_print(const struct dec_state *s, const struct tg_decorate_opts *o, FILE *out)
{
	size_t plen = o->prefix ? strlen(o->prefix) : 0;
	const char *indent = o->indent ? o->indent : " ";

	for (size_t i = 0; i < s->n; i++) {
		const struct dec_node *n = &s->nodes[i];
		const char *file = s->arena + n->file_off;
		size_t flen = n->file_len;
		char secs[TG_FMT_DURATION_MAX];

		for (unsigned k = n->depth - s->nodes[0].depth; k; k--)
			fputs(indent, out);
		if (plen && flen >= plen && !memcmp(file, o->prefix, plen)) {
			file += plen;
			flen -= plen;
		}
		tg_fputs_safe(out, s->arena + n->func_off, n->func_len);
		putc('@', out);
		tg_fputs_safe(out, file, flen);
		if (o->human) {
			/* to the microsecond, the times' own resolution: as doubles
			 * near 1.7e9 s they are 238 ns apart, so a 1 us call read
			 * as "954 ns" */
			tg_fmt_duration(secs, round((n->t_ret - n->t_call) * 1e6) / 1e6);
			fprintf(out, ":%lu-%lu, Time: %s, Memory: %lld B\n", n->first_line,
				n->end_line, secs, n->delta);
			continue;
		}
		tg_fmt_pyfloat(secs, n->t_ret - n->t_call);
		fprintf(out, ":%lu-%lu, Time: %s s, Memory: %lld B\n", n->first_line, n->end_line,
			secs, n->delta);
	}
	if (s->deep || s->past) {
		/* the calls the bound left out, said where the output ends */
		fprintf(out, "... %zu more call%s not shown (", s->deep + s->past,
			s->deep + s->past == 1 ? "" : "s");
		if (s->deep)
			fprintf(out, "%zu deeper than --depth %lu%s", s->deep, o->depth,
				s->past ? ", " : "");
		if (s->past)
			fprintf(out, "%zu past --max-lines %zu", s->past, o->max_lines);
		fputs(")\n", out);
	}
}

int tg_decorate_run(const char *mem_path, const char *stack_path, const char *event,
		    const struct tg_decorate_opts *o, FILE *out,
		    const struct tg_decorate_report *r, struct tg_diag *d)
{
	struct dec_state s;
	struct tg_memrec ev;
	char *evcopy = NULL;
	unsigned long lineno, k, call_line = 0;
	long long before;
	int found;
	int ret = -1;

	memset(&s, 0, sizeof(s));
	s.o = o;
	dec_step(r, "Scanning memory file looking for the event.");
	if (tg_decorate_find_event(mem_path, event, &lineno, d) < 0 ||
	    dec_read_event(mem_path, lineno, &ev, &evcopy, d) < 0)
		goto out;
	dec_step(r, "Scanning stack file looking for a matching event.");
	if ((before = dec_open_at_start(mem_path, stack_path, d)) < -1 ||
	    dec_count_records(mem_path, lineno, &k, d) < 0 ||
	    (found = dec_kth_closed_call(stack_path, k, before, &call_line, d)) < 0)
		goto out;
	if (found == 2) {
		/* the time rule would take an earlier call of the function */
		tg_error(d, "the call that line %lu of '%s' returns from began before the first "
			 "record of '%s' (%s), so its subtree is not there; choose a call that "
			 "began inside the files", lineno, mem_path, stack_path,
			 before >= 0 ? "an export of a capture of limited size: its runinfo.json "
				       "gives the calls open where the files begin" :
				       "its first record's depth gives the calls open before it");
		goto out;
	}
	if (found && dec_scan_stack(&s, stack_path, &ev.file, &ev.func, 0, call_line, d) < 0)
		goto out;
	if (!s.n && dec_scan_stack(&s, stack_path, &ev.file, &ev.func,
				   tg_time_exact(&ev.time.text), 0, d) < 0)
		goto out;
	if (!s.n) {
		tg_error(d, "no call of %.*s (%.*s) at or before the event's time in '%s'",
			 (int)ev.func.len, ev.func.s, (int)ev.file.len, ev.file.s, stack_path);
		goto out;
	}
	dec_step(r, "Reversing memory events of interest.");
	if (dec_read_returns(&s, mem_path, lineno, k, d) < 0)
		goto out;
	/* the tree was built as the stack was read (dec_enter): the original's
	 * steps are kept for their messages */
	dec_step(r, "Parsing stack trace into a tree.");
	dec_step(r, "Reconciling trace and memory.");
	for (size_t i = 0; i < s.n_post; i++) {
		const struct dec_node *n = &s.nodes[s.post[i]];

		if (n->mismatched && r && r->mismatch)
			r->mismatch(r->ctx, n->stack_lineno, n->mem_lineno);
	}
	dec_step(r, "Decorating trace.");
	dec_print(&s, o, out);
	ret = 0;
out:
	free(evcopy);
	dec_state_release(&s);
	return ret;
}

/* ---- a thread of a binary capture ---- */

/* The time of a capture record as the text path reads it: strtod of its text. */
static double dec_cap_time(int64_t t_us)
{
	char buf[TG_CAP_TIME_MAX];
	struct tg_str t = { buf, tg_cap_fmt_time(buf, t_us) };

	return tg_time_exact(&t);
}

/* The error for record WANT of thread BASE, in the segments dropped before the
 * BEFORE-th return: which returns are kept, if any (up to RETURNS). */
static void dec_dropped_event(struct tg_diag *d, unsigned long want, const char *base,
			      unsigned long before, unsigned long returns)
{
	if (returns > before)
		tg_error(d, "no event %lu in the records kept: it was in the segments dropped "
			 "(a capture of limited size keeps its newest segments: docs/formats.md, "
			 "\"Segments\"); thread '%s' has its returns %lu-%lu kept", want, base,
			 before + 1, returns);
	else
		tg_error(d, "no event %lu in the records kept: it was in the segments dropped "
			 "(a capture of limited size keeps its newest segments: docs/formats.md, "
			 "\"Segments\"); thread '%s' has no return kept (its %lu returns were "
			 "all in them)", want, base, before);
}

/*
 * Finds the event in thread t: a record number, or the text of a .mem line as
 * tg_decorate_find_event takes it.  Stores the return's number in *number and
 * the number of the call it closes in *call.  Returns 0 or -1.
 */
static int dec_cap_find(const struct tg_capture *cap, const struct tg_cap_thread *t,
			const char *event, unsigned long *number, unsigned long *call,
			struct tg_diag *d)
{
	struct tg_capcur c;
	struct tg_cap_rec_data r;
	size_t elen = strlen(event), cap_len = TG_SRC_TEXT_MAX;
	int number_only = dec_is_number(event), got, timed = (cap->flags & TG_CAP_F_TIME) != 0;
	unsigned long want = number_only ? dec_number(event) : 0;
	char *line = number_only ? NULL : malloc(cap_len);

	if (number_only && want == 0)
		return tg_error(d, "bad event '%s': record numbers go from 1 to %lu", event,
				ULONG_MAX);
	if (!number_only && !line)
		return tg_error(d, "out of memory");
	tg_capcur_init(&c, cap, t);
	while ((got = tg_capcur_next(&c, &r, d)) > 0) {
		size_t len;
		const char *hash;
		struct tg_str rest;

		if (r.type != TG_CAP_REC_RETURN)
			continue;
		if (number_only) {
			if (r.number == want)
				break;
			continue;
		}
		len = tg_src_fmt_record(line, cap_len, &r, timed);
		if (!len)
			continue;
		len--; /* the newline */
		hash = timed ? memchr(line, '#', len) : NULL;
		rest.s = hash ? hash + 1 : line;
		rest.len = hash ? len - (size_t)(hash + 1 - line) : len;
		if (dec_line_matches(event, elen, line, len, &rest))
			break;
	}
	if (got > 0) {
		*number = r.number;
		*call = r.call_number;
	} else if (got == 0) {
		unsigned long before = t->has_state ? (unsigned long)t->state.returns : 0;

		if (number_only && before && want <= before)
			/* a capture of limited size: its returns go on from the
			 * segments dropped, which held this one */
			dec_dropped_event(d, want, t->base, before, c.returns);
		else if (number_only && before)
			tg_error(d, "no event %lu: thread '%s' has %lu returns (%lu-%lu kept)",
				 want, t->base, c.returns, before + 1, c.returns);
		else if (number_only)
			tg_error(d, "no event %lu: thread '%s' has %lu returns", want, t->base,
				 c.returns);
		else
			tg_error(d, "event not found in thread '%s'", t->base);
	}
	tg_capcur_release(&c);
	free(line);
	return got > 0 ? 0 : -1;
}

int tg_decorate_capture_run(const struct tg_capture *cap, const char *thread, const char *event,
			    const struct tg_decorate_opts *o, FILE *out,
			    const struct tg_decorate_report *r, struct tg_diag *d)
{
	const struct tg_cap_thread *t = NULL;
	struct dec_state s;
	struct tg_capcur c;
	struct tg_cap_rec_data rec;
	unsigned long number = 0, root = 0;
	int got, ret = -1;

	memset(&s, 0, sizeof(s));
	s.o = o;
	for (size_t i = 0; i < cap->n_threads; i++)
		if (!strcmp(cap->threads[i].base, thread))
			t = &cap->threads[i];
	if (!t) {
		char names[512];
		size_t n = 0;
		names[0] = '\0';
		for (size_t i = 0; i < cap->n_threads && n + 8 < sizeof(names); i++)
			n += (size_t)snprintf(names + n, sizeof(names) - n, "%s'%s'", i ? ", " : "",
					      cap->threads[i].base);
		if (n >= sizeof(names))
			strcpy(names + sizeof(names) - 5, "...");
		return tg_error(d, "no thread '%s' in '%s'; its threads: %s", thread, cap->path,
				cap->n_threads ? names : "none");
	}
	if (!(cap->flags & TG_CAP_F_TIME))
		return tg_error(d, "decorate-stack needs timestamps: '%s' was recorded without "
				"them", cap->path);
	dec_step(r, "Scanning memory file looking for the event.");
	if (dec_cap_find(cap, t, event, &number, &root, d) < 0)
		return -1;
	dec_step(r, "Scanning stack file looking for a matching event.");
	tg_capcur_init(&c, cap, t);
	while ((got = tg_capcur_next(&c, &rec, d)) > 0) {
		if (!s.total && ((rec.type == TG_CAP_REC_CALL && rec.number > root) ||
			     (rec.type == TG_CAP_REC_RETURN && rec.call_number >= root))) {
			/* the first record of the subtree is not its call: the call
			 * began in a segment no longer kept */
			tg_error(d, "'%s': the call of event %lu began before the records kept (a "
				 "capture of limited size keeps its newest segments: docs/formats.md, "
				 "\"Segments\"), so its subtree is not all there; choose a call that "
				 "began inside them (peaks --json gives its call_start)", cap->path,
				 number);
			goto out;
		}
		if (rec.type == TG_CAP_REC_CALL && rec.number >= root) {
			struct tg_stackrec sr;
			size_t node = DEC_LEFT_OUT;

			if (!dec_keeps(&s, rec.depth)) {
				if (dec_open_push(&s, rec.depth, node, d) < 0)
					goto out;
				continue;
			}
			sr.depth = rec.depth;
			sr.line = (unsigned long)rec.line;
			sr.file.s = rec.code->file;
			sr.file.len = rec.code->file_len;
			sr.func.s = rec.code->func;
			sr.func.len = rec.code->func_len;
			sr.time.text.s = "";
			sr.time.text.len = 0;
			if (dec_node_add(&s, &sr, rec.number, d) < 0)
				goto out;
			node = s.n - 1;
			s.nodes[node].t_call = dec_cap_time(rec.t_us);
			if (dec_open_push(&s, rec.depth, node, d) < 0)
				goto out;
		} else if (rec.type == TG_CAP_REC_RETURN && rec.call_number >= root) {
			struct dec_node *n;
			size_t node;
			if (!s.top) { /* cannot happen: the root closes last */
				tg_error(d, "'%s': unpaired return %lu", cap->path, rec.number);
				goto out;
			}
			node = s.open[--s.top].node;
			if (node == DEC_LEFT_OUT)
				continue; /* not the event's: its call, the root, is held */
			n = &s.nodes[node];
			n->end_line = (unsigned long)rec.line;
			n->delta = rec.value;
			n->t_ret = dec_cap_time(rec.t_us);
			n->mem_lineno = rec.number;
			if (rec.number == number)
				break;
		}
	}
	if (got < 0)
		goto out;
	if (got == 0 || !s.n) {
		tg_error(d, "'%s': the event's call was not found again", cap->path);
		goto out;
	}
	dec_step(r, "Decorating trace.");
	dec_print(&s, o, out);
	ret = 0;
out:
	tg_capcur_release(&c);
	dec_state_release(&s);
	return ret;
}
