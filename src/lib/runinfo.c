/*
 * runinfo.c - runinfo.json's threads and the run's pid, end and mode (runinfo.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runinfo.h"

/* The JSON text being read. */
struct ri {
	const char *p, *end;
	int depth;
};

#define RI_DEPTH_MAX 64

static void ri_ws(struct ri *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\t' || *r->p == '\r'))
		r->p++;
}

static int ri_hex4(const char *p, unsigned *v)
{
	*v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		*v <<= 4;
		if (c >= '0' && c <= '9')
			*v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			*v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			*v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	return 0;
}

/* Reads a string at r->p ('"'); into *out (malloc'ed, UTF-8) when OUT is not
 * NULL.  Returns 0, -1 (not JSON), -2 (out of memory). */
static int ri_string(struct ri *r, char **out)
{
	char *buf = NULL, *q = NULL;

	if (r->p >= r->end || *r->p != '"')
		return -1;
	r->p++;
	/* the decoded text is never longer than the escaped one */
	if (out && !(buf = q = malloc((size_t)(r->end - r->p) + 1)))
		return -2;
	while (r->p < r->end && *r->p != '"') {
		unsigned char c = (unsigned char)*r->p++;
		unsigned cp;

		if (c < 0x20)
			goto bad;
		if (c != '\\') {
			if (q)
				*q++ = (char)c;
			continue;
		}
		if (r->p >= r->end)
			goto bad;
		c = (unsigned char)*r->p++;
		switch (c) {
		case '"': case '\\': case '/': cp = c; break;
		case 'b': cp = '\b'; break;
		case 'f': cp = '\f'; break;
		case 'n': cp = '\n'; break;
		case 'r': cp = '\r'; break;
		case 't': cp = '\t'; break;
		case 'u':
			if (r->end - r->p < 4 || ri_hex4(r->p, &cp) < 0)
				goto bad;
			r->p += 4;
			if (cp >= 0xd800 && cp < 0xdc00 && r->end - r->p >= 6 && r->p[0] == '\\' &&
			    r->p[1] == 'u') {
				unsigned lo;
				if (ri_hex4(r->p + 2, &lo) == 0 && lo >= 0xdc00 && lo < 0xe000) {
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
					r->p += 6;
				}
			}
			break;
		default:
			goto bad;
		}
		if (!q)
			continue;
		/* UTF-8 (a lone surrogate as its three bytes: json.dump writes one
		 * for a name that holds one, and no file name matches it anyway) */
		if (cp < 0x80) {
			*q++ = (char)cp;
		} else if (cp < 0x800) {
			*q++ = (char)(0xc0 | cp >> 6);
			*q++ = (char)(0x80 | (cp & 0x3f));
		} else if (cp < 0x10000) {
			*q++ = (char)(0xe0 | cp >> 12);
			*q++ = (char)(0x80 | (cp >> 6 & 0x3f));
			*q++ = (char)(0x80 | (cp & 0x3f));
		} else {
			*q++ = (char)(0xf0 | cp >> 18);
			*q++ = (char)(0x80 | (cp >> 12 & 0x3f));
			*q++ = (char)(0x80 | (cp >> 6 & 0x3f));
			*q++ = (char)(0x80 | (cp & 0x3f));
		}
	}
	if (r->p >= r->end)
		goto bad;
	r->p++;
	if (out) {
		*q = '\0';
		*out = buf;
	}
	return 0;
bad:
	free(buf);
	return -1;
}

/* After a member of an array or object: skips the separator.  1 when CLOSE
 * ended the container (consumed), 0 after a ',', -1 (not JSON) otherwise. */
static int ri_after_member(struct ri *r, char close)
{
	ri_ws(r);
	if (r->p >= r->end)
		return -1;
	if (*r->p == close) {
		r->p++;
		return 1;
	}
	return *r->p++ == ',' ? 0 : -1;
}

/* Skips one value (any JSON).  Returns 0 or -1 (not JSON). */
static int ri_skip(struct ri *r)
{
	ri_ws(r);
	if (r->p >= r->end)
		return -1;
	if (*r->p == '"')
		return ri_string(r, NULL);
	if (*r->p == '{' || *r->p == '[') {
		char close = *r->p == '{' ? '}' : ']';
		int obj = close == '}', e;
		if (++r->depth > RI_DEPTH_MAX)
			return -1;
		r->p++;
		ri_ws(r);
		if (r->p < r->end && *r->p == close) {
			r->p++;
			r->depth--;
			return 0;
		}
		for (;;) {
			if (obj) {
				ri_ws(r);
				if (ri_string(r, NULL) < 0)
					return -1;
				ri_ws(r);
				if (r->p >= r->end || *r->p++ != ':')
					return -1;
			}
			if (ri_skip(r) < 0 || (e = ri_after_member(r, close)) < 0)
				return -1;
			if (e) {
				r->depth--;
				return 0;
			}
		}
	}
	/* a number, true, false, null */
	if (!strchr("-0123456789tfn", *r->p))
		return -1;
	while (r->p < r->end && strchr("+-.0123456789eEtruefalsn", *r->p))
		r->p++;
	return 0;
}

/* The time [p, end) (seconds since the epoch, a JSON number) in microseconds,
 * or 0 when it is not one a run can have. */
static long long ri_time_us(const char *p, const char *end);

/* "segments_kept": [FIRST, LAST], two segment numbers, FIRST <= LAST; anything
 * else is skipped and leaves them 0. */
static int ri_segments(struct ri *r, struct tg_run_threads *t)
{
	unsigned long v[2];
	const char *p = r->p;
	char *e;

	for (int k = 0; k < 2; k++) {
		while (p < r->end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r'))
			p++;
		if (p >= r->end || *p != (k ? ',' : '['))
			return ri_skip(r);
		p++;
		while (p < r->end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r'))
			p++;
		if (p >= r->end || *p < '0' || *p > '9')
			return ri_skip(r);
		errno = 0;
		v[k] = strtoul(p, &e, 10);
		if (errno || e > r->end || v[k] > 0xffffffffUL)
			return ri_skip(r);
		p = e;
	}
	while (p < r->end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r'))
		p++;
	if (p >= r->end || *p != ']' || v[0] > v[1])
		return ri_skip(r);
	r->p = p + 1;
	t->seg_first = (unsigned)v[0];
	t->seg_last = (unsigned)v[1];
	return 0;
}

static long long ri_time_us(const char *p, const char *end)
{
	char buf[64], *num_end;
	size_t n = (size_t)(end - p);
	double v;

	if (n == 0 || n >= sizeof(buf))
		return 0;
	memcpy(buf, p, n);
	buf[n] = '\0';
	errno = 0;
	v = strtod(buf, &num_end);
	if (*num_end || errno || !(v > 0 && v < 1e11))  /* before the year 5138 */
		return 0;
	return (long long)(v * 1e6 + 0.5);
}

/* Reads an array of integers at r->p ('[') into *v (malloc'ed, *n of them;
 * NULL when empty).  0, -1 (not such an array), -2 (out of memory). */
static int ri_int_array(struct ri *r, long long **v, size_t *n)
{
	size_t alloc = 0;
	int e;

	*v = NULL;
	*n = 0;
	if (r->p >= r->end || *r->p++ != '[')
		return -1;
	ri_ws(r);
	if (r->p < r->end && *r->p == ']') {
		r->p++;
		return 0;
	}
	for (;;) {
		char buf[32], *num_end;
		size_t len = 0;

		ri_ws(r);
		while (r->p + len < r->end && len < sizeof(buf) - 1 &&
		       strchr("-0123456789", r->p[len]) && r->p[len])
			len++;
		memcpy(buf, r->p, len);
		buf[len] = '\0';
		if (*n == alloc) {
			size_t na = alloc ? 2 * alloc : 8;
			long long *nv = realloc(*v, na * sizeof(*nv));
			if (!nv)
				return -2;
			*v = nv;
			alloc = na;
		}
		errno = 0;
		(*v)[*n] = strtoll(buf, &num_end, 10);
		if (!len || *num_end || errno)
			return -1;
		(*n)++;
		r->p += len;
		if ((e = ri_after_member(r, ']')) != 0)
			return e > 0 ? 0 : -1;
	}
}

/* Reads one thread object at r->p into *t.  0, -1 (not JSON), -2 (memory). */
static int ri_thread(struct ri *r, struct tg_run_thread *t)
{
	int e;

	memset(t, 0, sizeof(*t));
	t->open_at_start = -1;
	ri_ws(r);
	if (r->p >= r->end || *r->p++ != '{')
		return -1;
	ri_ws(r);
	if (r->p < r->end && *r->p == '}') {
		r->p++;
		return 0;
	}
	for (;;) {
		char *key = NULL;
		ri_ws(r);
		if ((e = ri_string(r, &key)) < 0)
			return e;
		ri_ws(r);
		if (r->p >= r->end || *r->p++ != ':') {
			free(key);
			return -1;
		}
		ri_ws(r);
		e = 0;
		if ((!strcmp(key, "name") || !strcmp(key, "mem")) && r->p < r->end && *r->p == '"') {
			char **dst = key[0] == 'n' ? &t->name : &t->mem;
			free(*dst);
			*dst = NULL;
			e = ri_string(r, dst);
		} else if (!strcmp(key, "native_id")) {
			char *num_end;
			errno = 0;
			t->native_id = strtoull(r->p, &num_end, 10);
			if (num_end == r->p || errno || num_end > r->end)
				e = -1;
			else
				r->p = num_end;
		} else if (!strcmp(key, "open_at_start") && r->p < r->end &&
			   *r->p >= '0' && *r->p <= '9') {
			char *num_end;
			errno = 0;
			t->open_at_start = strtoll(r->p, &num_end, 10);
			if (num_end == r->p || errno || num_end > r->end)
				e = -1;
			else
				r->p = num_end;
		} else if (!strcmp(key, "held_at_start") && !t->has_held && r->p < r->end &&
			   *r->p == '[') {
			t->has_held = 1;
			e = ri_int_array(r, &t->held, &t->n_held);
		} else {
			e = ri_skip(r);
		}
		free(key);
		if (e < 0)
			return e;
		if ((e = ri_after_member(r, '}')) != 0)
			return e > 0 ? 0 : -1;
	}
}

void tg_run_threads_init(struct tg_run_threads *t)
{
	memset(t, 0, sizeof(*t));
	t->accounting = -1;
	t->native = -1;
}

void tg_run_threads_release(struct tg_run_threads *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->v[i].name);
		free(t->v[i].mem);
		free(t->v[i].held);
	}
	free(t->v);
	free(t->mode);
	tg_run_threads_init(t);
}

/* Reads the "threads" array at r->p into t.  0, -1 (not JSON), -2 (memory). */
static int ri_threads(struct ri *r, struct tg_run_threads *t)
{
	int e;

	ri_ws(r);
	if (r->p >= r->end || *r->p++ != '[')
		return -1;
	ri_ws(r);
	if (r->p < r->end && *r->p == ']') {
		r->p++;
		return 0;
	}
	for (;;) {
		struct tg_run_thread th;
		if (t->n == t->alloc) {
			size_t na = t->alloc ? 2 * t->alloc : 16;
			struct tg_run_thread *nv = realloc(t->v, na * sizeof(*nv));
			if (!nv)
				return -2;
			t->v = nv;
			t->alloc = na;
		}
		e = ri_thread(r, &th);
		if (e < 0) {
			free(th.name);
			free(th.mem);
			free(th.held);
			return e;
		}
		t->v[t->n++] = th;
		/* the ']' consumed: the keys after it are read too */
		if ((e = ri_after_member(r, ']')) != 0)
			return e > 0 ? 0 : -1;
	}
}

int tg_run_threads_read(struct tg_run_threads *t, const char *dir, struct tg_diag *d)
{
	size_t plen = strlen(dir) + sizeof("/runinfo.json"), len;
	char *path = malloc(plen), *buf = NULL;
	struct ri r;
	FILE *f = NULL;
	int e = 0;

	if (!path)
		return tg_error(d, "out of memory");
	snprintf(path, plen, "%s/runinfo.json", dir);
	{
		/* never wait on a FIFO (or read a device) planted as runinfo.json */
		int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		struct stat st;
		if (fd < 0)
			goto out;
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !(f = fdopen(fd, "r"))) {
			close(fd);
			goto out;
		}
	}
	if (!(buf = malloc(TG_RUNINFO_MAX))) {
		e = -2;
		goto out;
	}
	len = fread(buf, 1, TG_RUNINFO_MAX, f);
	if (ferror(f) || len == TG_RUNINFO_MAX)
		goto out;
	buf[len] = '\0';  /* strtoull stops there at the latest */
	r.p = buf;
	r.end = buf + len;
	r.depth = 1;
	ri_ws(&r);
	if (r.p >= r.end || *r.p++ != '{')
		goto out;
	for (;;) {
		char *key = NULL;
		ri_ws(&r);
		if ((e = ri_string(&r, &key)) < 0)
			break;
		ri_ws(&r);
		if (r.p >= r.end || *r.p++ != ':') {
			free(key);
			e = -1;
			break;
		}
		ri_ws(&r);
		if (!strcmp(key, "threads")) {
			e = ri_threads(&r, t);
		} else if (!strcmp(key, "mode") && r.p < r.end && *r.p == '"') {
			free(t->mode);
			t->mode = NULL;
			e = ri_string(&r, &t->mode);
		} else if (!strcmp(key, "pid") && r.p < r.end && *r.p >= '0' && *r.p <= '9') {
			char *num_end;
			errno = 0;
			t->pid = strtoull(r.p, &num_end, 10);
			if (errno || num_end > r.end)
				e = -1;
			else
				r.p = num_end;
		} else if (!strcmp(key, "timestamps")) {
			t->no_time = r.p < r.end && *r.p == 'f';
			e = ri_skip(&r);
		} else if (!strcmp(key, "aggregate")) {
			t->aggregate = r.p < r.end && *r.p == 't';
			e = ri_skip(&r);
		} else if (!strcmp(key, "native") && r.p < r.end && (*r.p == 't' || *r.p == 'f')) {
			t->native = *r.p == 't';
			e = ri_skip(&r);
		} else if (!strcmp(key, "accounting") && r.p < r.end && (*r.p == 't' || *r.p == 'f')) {
			t->accounting = *r.p == 't';
			e = ri_skip(&r);
		} else if (!strcmp(key, "accounting_in") && r.p < r.end && *r.p >= '0' && *r.p <= '9') {
			char *num_end;
			errno = 0;
			t->accounting_in = strtoull(r.p, &num_end, 10);
			if (errno || num_end > r.end)
				e = -1;
			else
				r.p = num_end;
		} else if (!strcmp(key, "dropped") && r.p < r.end && *r.p >= '0' && *r.p <= '9') {
			char *num_end;
			errno = 0;
			t->dropped = strtoull(r.p, &num_end, 10);
			if (errno || num_end > r.end)
				e = -1;
			else
				r.p = num_end;
		} else if (!strcmp(key, "capture")) {
			t->has_capture = r.p < r.end && *r.p == '"';
			e = ri_skip(&r);
		} else if (!strcmp(key, "kept_from")) {
			const char *v = r.p;
			e = ri_skip(&r);
			if (e == 0)
				t->kept_from_us = ri_time_us(v, r.p);
		} else if (!strcmp(key, "start_time")) {
			const char *v = r.p;
			e = ri_skip(&r);
			if (e == 0)
				t->start_us = ri_time_us(v, r.p);
		} else if (!strcmp(key, "segments_kept")) {
			e = ri_segments(&r, t);
		} else if (!strcmp(key, "end_time")) {
			const char *v = r.p;
			t->ended = r.p < r.end && *r.p != 'n';
			t->has_end = 1;
			e = ri_skip(&r);
			if (e == 0 && t->ended)
				t->end_us = ri_time_us(v, r.p);
		} else {
			e = ri_skip(&r);
		}
		free(key);
		if (e < 0)
			break;
		ri_ws(&r);
		if (r.p >= r.end || *r.p != ',')
			break;
		r.p++;
	}
out:
	if (e < 0)
		tg_run_threads_release(t);  /* not what the recorder writes: none known */
	if (f)
		fclose(f);
	free(buf);
	free(path);
	if (e == -2)
		return tg_error(d, "out of memory");
	return 0;
}

int tg_run_end_state(const char *dir, int *sampled)
{
	struct tg_run_threads t;
	struct tg_diag d;
	int state = -1;

	tg_run_threads_init(&t);
	memset(&d, 0, sizeof(d));
	if (tg_run_threads_read(&t, dir, &d) == 0 && t.has_end)
		state = t.ended;
	if (sampled)
		*sampled = t.mode && !strcmp(t.mode, "sampled");
	tg_run_threads_release(&t);
	return state;
}

unsigned long long tg_run_dropped(const char *dir)
{
	struct tg_run_threads t;
	struct tg_diag d = { .probe = 1 };
	unsigned long long n = 0;

	tg_run_threads_init(&t);
	if (tg_run_threads_read(&t, dir, &d) == 0)
		n = t.dropped;
	tg_run_threads_release(&t);
	return n;
}

const struct tg_run_thread *tg_run_threads_find(const struct tg_run_threads *t,
						const char *base)
{
	const struct tg_run_thread *named = NULL;
	size_t blen = strlen(base), found = 0;

	for (size_t i = 0; i < t->n; i++) {
		const char *m = t->v[i].mem;
		const char *slash = m ? strrchr(m, '/') : NULL;
		if (slash)
			m = slash + 1;
		if (m && !strncmp(m, base, blen) && !strcmp(m + blen, ".mem"))
			return &t->v[i];
	}
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].name && !strcmp(t->v[i].name, base)) {
			named = &t->v[i];
			found++;
		}
	return found == 1 ? named : NULL;
}

int tg_run_threads_id(const struct tg_run_threads *t, const char *base,
		      unsigned long long *id)
{
	const struct tg_run_thread *r = tg_run_threads_find(t, base);

	if (r)
		*id = r->native_id;
	return r != NULL;
}

int tg_run_no_accounting(const char *dir, const char *name, struct tg_diag *d)
{
	struct tg_run_threads t, sib;
	struct tg_diag md = { 0 };
	size_t n = strlen(dir), at;
	char *parent = NULL;
	int said = 0;

	tg_run_threads_init(&t);
	tg_run_threads_init(&sib);
	if (tg_run_threads_read(&t, dir, &md) < 0)
		goto out;
	if (t.accounting_in) {
		/* its run is DIR's sibling when the runs share a base (run
		 * --follow-fork, ProcessProfile's default_log_path) */
		while (n > 1 && dir[n - 1] == '/')
			n--;
		for (at = n; at > 0 && dir[at - 1] != '/'; at--)
			;
		if (asprintf(&parent, "%.*s%llu", (int)at, dir, t.accounting_in) < 0)
			parent = NULL;
		if (parent && tg_run_threads_read(&sib, parent, &md) == 0
		    && sib.pid == t.accounting_in && sib.accounting == 1)
			tg_error(d, "no %s in '%s': a forked child does no accounting, which "
				 "stays with the process that enabled it (docs/accounting.md): "
				 "process %llu, whose run '%s' has it", name, dir,
				 t.accounting_in, parent);
		else
			tg_error(d, "no %s in '%s': a forked child does no accounting, which "
				 "stays with the process that enabled it (docs/accounting.md): "
				 "process %llu (its run is not beside this one)", name, dir,
				 t.accounting_in);
		said = 1;
	} else if (t.accounting == 0) {
		tg_error(d, "no %s in '%s': the run was made without accounting (runinfo.json; "
			 "threadgraph run --accounting, ProcessProfile(accounting=True))",
			 name, dir);
		said = 1;
	}
out:
	free(parent);
	tg_run_threads_release(&sib);
	tg_run_threads_release(&t);
	return said;
}
