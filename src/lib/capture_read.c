/*
 * capture_read.c - open a binary capture and decode its streams (capture_read.h).
 *
 * The file is mapped read-only; opening walks the chunk headers once (a 1 GB
 * text run is a few hundred 64 KiB chunks), parses the definitions, and files
 * each payload under its stream.  Decoding is a loop over varints with a
 * one-byte fast path; nothing is allocated per record.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capture_read.h"
#include "tg_format.h"

#ifdef TG_HAVE_ZSTD
#include <zstd.h>
#endif

/* Ids below this bound (or below 4x the number of ids) are kept in an array. */
#define CAP_DIRECT_MIN 4096

/* --- id maps --------------------------------------------------------------- */

/* Maps id (>= 1, not yet present) to val (>= 1); 0 or -1 out of memory. */
static int cap_idmap_put(struct tg_cap_idmap *m, uint64_t id, uint32_t val, size_t count)
{
	size_t i;

	if (id < m->ndirect || id < CAP_DIRECT_MIN || id < 4 * (uint64_t)count) {
		if (id >= m->ndirect) {
			size_t n = m->ndirect ? m->ndirect : 256;
			uint32_t *nd;
			while (n <= id)
				n *= 2;
			nd = realloc(m->direct, n * sizeof(*nd));
			if (!nd)
				return -1;
			memset(nd + m->ndirect, 0, (n - m->ndirect) * sizeof(*nd));
			m->direct = nd;
			m->ndirect = n;
		}
		m->direct[id] = val;
		return 0;
	}
	if (2 * (m->hn + 1) > m->hcap) {
		size_t ncap = m->hcap ? 2 * m->hcap : 64;
		uint64_t *nk = calloc(ncap, sizeof(*nk));
		uint32_t *nv = calloc(ncap, sizeof(*nv));
		if (!nk || !nv) {
			free(nk);
			free(nv);
			return -1;
		}
		for (size_t j = 0; j < m->hcap; j++) {
			if (!m->hkeys[j])
				continue;
			for (i = tg_cap_hash(m->hkeys[j], m->seed) & (ncap - 1); nk[i]; i = (i + 1) & (ncap - 1))
				;
			nk[i] = m->hkeys[j];
			nv[i] = m->hvals[j];
		}
		free(m->hkeys);
		free(m->hvals);
		m->hkeys = nk;
		m->hvals = nv;
		m->hcap = ncap;
	}
	for (i = tg_cap_hash(id, m->seed) & (m->hcap - 1); m->hkeys[i]; i = (i + 1) & (m->hcap - 1))
		;
	m->hkeys[i] = id;
	m->hvals[i] = val;
	m->hn++;
	return 0;
}

/* A seed no input can predict: from the kernel, else from the clock and an
 * address (ASLR). */
static uint64_t cap_seed(void)
{
	uint64_t s = 0;
	struct timespec ts;

	if (getrandom(&s, sizeof(s), GRND_NONBLOCK) == (ssize_t)sizeof(s))
		return s;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^
	       (uint64_t)(uintptr_t)&s;
}

static void cap_idmap_release(struct tg_cap_idmap *m)
{
	free(m->direct);
	free(m->hkeys);
	free(m->hvals);
	memset(m, 0, sizeof(*m));
}

/* --- opening --------------------------------------------------------------- */

int tg_capture_is_magic(const void *p, size_t n)
{
	return n >= TG_CAP_MAGIC_LEN && !memcmp(p, TG_CAP_MAGIC, TG_CAP_MAGIC_LEN);
}

int tg_capture_segment_name(const char *base, uint32_t *no)
{
	size_t pl = strlen(TG_CAP_SEG_PREFIX), sl = strlen(TG_CAP_SEG_SUFFIX), n = strlen(base);
	uint64_t v = 0;

	if (n <= pl + sl || strncmp(base, TG_CAP_SEG_PREFIX, pl) ||
	    strcmp(base + n - sl, TG_CAP_SEG_SUFFIX))
		return 0;
	for (size_t i = pl; i < n - sl; i++) {
		if (base[i] < '0' || base[i] > '9')
			return 0;
		v = v * 10 + (uint64_t)(base[i] - '0');
		if (v > UINT32_MAX)
			return 0;
	}
	if (!v)
		return 0;
	{
		/* the name the recorder writes, which readers open: capture-1.tg
		 * or capture-0000001.tg is some other file */
		char canon[16];
		int len = snprintf(canon, sizeof(canon), "%0*u", TG_CAP_SEG_DIGITS, (unsigned)v);
		if (len != (int)(n - pl - sl) || memcmp(canon, base + pl, (size_t)len))
			return 0;
	}
	*no = (uint32_t)v;
	return 1;
}

/* dir/name, malloc'ed (NULL: out of memory). */
static char *cap_join(const char *dir, size_t dlen, const char *name)
{
	size_t n = strlen(name);
	char *f = malloc(dlen + n + 2);

	if (f) {
		memcpy(f, dir, dlen);
		f[dlen] = '/';
		memcpy(f + dlen + 1, name, n + 1);
	}
	return f;
}

/* The path of the newest segment in dir (NULL: none, or out of memory). */
static char *cap_find_segment(const char *dir, size_t dlen)
{
	DIR *dh = opendir(dir);
	struct dirent *e;
	uint32_t best = 0, no;
	char *f = NULL, name[64];

	if (!dh)
		return NULL;
	while ((e = readdir(dh)))
		if (tg_capture_segment_name(e->d_name, &no) && no > best &&
		    strlen(e->d_name) < sizeof(name)) {
			best = no;
			strcpy(name, e->d_name);
		}
	closedir(dh);
	if (best)
		f = cap_join(dir, dlen, name);
	return f;
}

int tg_capture_detect(const char *path, char **file)
{
	struct stat st;
	const char *base = strrchr(path, '/');
	char magic[TG_CAP_MAGIC_LEN];
	size_t n = strlen(path);
	uint32_t no;
	int fd, yes = 0;

	*file = NULL;
	if (stat(path, &st) < 0)
		return 0;
	if (S_ISDIR(st.st_mode)) {
		char *f;
		while (n > 1 && path[n - 1] == '/')
			n--;
		f = cap_join(path, n, TG_CAP_FILENAME);
		if (!f)
			return 0;
		/* whatever is named capture.tg (a directory, a dangling link, an
		 * unreadable file) is the run's capture: reading it then says what is
		 * wrong with it, rather than "no capture.tg" and the text dumps; a FIFO
		 * is left alone (opening it would wait for a writer) */
		if (stat(f, &st) == 0 ? !S_ISFIFO(st.st_mode) : lstat(f, &st) == 0) {
			*file = f;
			return 1;
		}
		free(f);
		*file = cap_find_segment(path, n);
		return *file != NULL;
	}
	base = base ? base + 1 : path;
	if (!strcmp(base, TG_CAP_FILENAME) || tg_capture_segment_name(base, &no)) {
		yes = 1;
	} else if (S_ISREG(st.st_mode) && (fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
		/* only a regular file is sniffed: reading a pipe would eat its start */
		yes = read(fd, magic, sizeof(magic)) == (ssize_t)sizeof(magic) &&
		      tg_capture_is_magic(magic, sizeof(magic));
		close(fd);
	}
	if (yes && !(*file = strdup(path)))
		yes = 0;
	return yes;
}

size_t tg_capture_offset(const struct tg_capture *cap, const void *at, const char **path)
{
	const unsigned char *a = at;

	for (size_t i = 0; i < cap->n_segs; i++)
		if (a >= cap->segs[i].map && a < cap->segs[i].map + cap->segs[i].size) {
			*path = cap->segs[i].path;
			return (size_t)(a - cap->segs[i].map);
		}
	*path = cap->path;
	return (size_t)(a - cap->map);
}

/* Appends a span to l; 0 or -1 out of memory. */
static int cap_spans_add(struct tg_cap_spans *l, const unsigned char *p, uint32_t len,
			 int partial, uint32_t zsize)
{
	if (l->n == l->alloc) {
		size_t na = l->alloc ? 2 * l->alloc : 16;
		struct tg_cap_span *nv = realloc(l->v, na * sizeof(*nv));
		if (!nv)
			return -1;
		l->v = nv;
		l->alloc = na;
	}
	l->v[l->n].p = p;
	l->v[l->n].len = len;
	l->v[l->n].partial = (uint32_t)partial;
	l->v[l->n].zsize = zsize;
	l->n++;
	return 0;
}

/* Reads a varint-length text at *p: sets *s and *len, advances; 0 or -1. */
static int cap_get_text(const unsigned char **p, const unsigned char *end, const char **s,
			uint32_t *len)
{
	uint64_t n;

	if (tg_cap_get_varint(p, end, &n) < 0 || n > (uint64_t)(end - *p))
		return -1;
	*s = (const char *)*p;
	*len = (uint32_t)n;
	*p += n;
	return 0;
}

static int cap_corrupt(const struct tg_capture *cap, struct tg_diag *d, const unsigned char *at,
		       const char *what)
{
	const char *path;
	size_t off = tg_capture_offset(cap, at, &path);

	return tg_error(d, "'%s': corrupt capture at byte %zu: %s", path, off, what);
}

/* Non-zero when s[0..n) holds a byte the text formats escape (TG_NEEDS_ESCAPE). */
static int cap_has_control(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (TG_NEEDS_ESCAPE(s[i]))
			return 1;
	return 0;
}

/* Parses one CODES payload (complete definitions only when partial). */
static int cap_read_codes(struct tg_capture *cap, const unsigned char *p, uint32_t len,
			  int partial, struct tg_diag *d)
{
	const unsigned char *end = p + len;

	while (p < end) {
		const unsigned char *start = p;
		struct tg_cap_code c;
		uint64_t id, first;
		unsigned kind;

		if (tg_cap_get_varint(&p, end, &id) < 0 || p >= end)
			goto short_def;
		kind = *p++;
		if (tg_cap_get_varint(&p, end, &first) < 0 ||
		    cap_get_text(&p, end, &c.file, &c.file_len) < 0 ||
		    cap_get_text(&p, end, &c.func, &c.func_len) < 0)
			goto short_def;
		if (id == 0)
			return cap_corrupt(cap, d, start, "code id 0");
		if (kind != TG_CAP_CODE_PYTHON && kind != TG_CAP_CODE_C)
			return cap_corrupt(cap, d, start, "unknown code kind");
		if (first > INT64_MAX)
			return cap_corrupt(cap, d, start, "line number out of range");
		if (cap_has_control(c.file, c.file_len) || cap_has_control(c.func, c.func_len))
			return cap_corrupt(cap, d, start, "a control byte in a code's name "
					   "(the recorder escapes them)");
		if (tg_cap_idmap_get(&cap->code_ids, id))
			return cap_corrupt(cap, d, start, "code defined twice");
		c.first_line = first;
		c.kind = kind;
		if (cap->n_codes == cap->codes_alloc) {
			size_t na = cap->codes_alloc ? 2 * cap->codes_alloc : 256;
			struct tg_cap_code *nv = realloc(cap->codes, na * sizeof(*nv));
			if (!nv)
				return tg_error(d, "out of memory");
			cap->codes = nv;
			cap->codes_alloc = na;
		}
		if (cap->n_codes >= UINT32_MAX - 1)
			return cap_corrupt(cap, d, start, "too many codes");
		cap->codes[cap->n_codes++] = c;
		if (cap_idmap_put(&cap->code_ids, id, (uint32_t)cap->n_codes, cap->n_codes) < 0)
			return tg_error(d, "out of memory");
		continue;
short_def:
		if (partial)
			return 0; /* the cut: the rest is lost */
		return cap_corrupt(cap, d, start, "code definition runs past its chunk");
	}
	return 0;
}

int tg_capture_base_ok(const char *b, size_t n)
{
	if (!n || memchr(b, '/', n) || cap_has_control(b, n))
		return 0;
	if (b[0] == '.') /* ".", ".." or a hidden file: the recorder writes %2E */
		return 0;
	return !(n == strlen(TG_PROCESS_BASENAME) && !memcmp(b, TG_PROCESS_BASENAME, n));
}

static char *cap_strndup(const char *s, size_t n)
{
	char *r = malloc(n + 1);

	if (r) {
		memcpy(r, s, n);
		r[n] = '\0';
	}
	return r;
}

/* Parses a THREAD payload for stream (a partial one is ignored). */
static int cap_read_thread(struct tg_capture *cap, uint32_t stream, const unsigned char *p,
			   uint32_t len, int partial, struct tg_diag *d)
{
	const unsigned char *start = p, *end = p + len;
	struct tg_cap_thread t;
	const char *base, *name;
	uint32_t blen, nlen;

	memset(&t, 0, sizeof(t));
	if (tg_cap_get_varint(&p, end, &t.native_id) < 0 ||
	    tg_cap_get_varint(&p, end, &t.ident) < 0 ||
	    cap_get_text(&p, end, &base, &blen) < 0 || cap_get_text(&p, end, &name, &nlen) < 0) {
		if (partial)
			return 0;
		return cap_corrupt(cap, d, start, "thread definition runs past its chunk");
	}
	if (stream < TG_CAP_STREAM_FIRST)
		return cap_corrupt(cap, d, start, "thread definition on a reserved stream");
	if (tg_cap_idmap_get(&cap->stream_ids, stream))
		return cap_corrupt(cap, d, start, "thread defined twice");
	if (!tg_capture_base_ok(base, blen))
		return cap_corrupt(cap, d, start, "a thread's file name is not a safe file name");
	if (cap->n_threads == cap->threads_alloc) {
		size_t na = cap->threads_alloc ? 2 * cap->threads_alloc : 16;
		struct tg_cap_thread *nv = realloc(cap->threads, na * sizeof(*nv));
		if (!nv)
			return tg_error(d, "out of memory");
		cap->threads = nv;
		cap->threads_alloc = na;
	}
	t.stream = stream;
	t.offset = (uint64_t)(start - cap->map);
	t.at = start;
	t.base = cap_strndup(base, blen);
	t.name = cap_strndup(name, nlen);
	if (!t.base || !t.name) {
		free(t.base);
		free(t.name);
		return tg_error(d, "out of memory");
	}
	cap->threads[cap->n_threads++] = t;
	if (cap_idmap_put(&cap->stream_ids, stream, (uint32_t)cap->n_threads, cap->n_threads) < 0)
		return tg_error(d, "out of memory");
	return 0;
}

/* Parses the END payload (a partial one counts as missing). */
static int cap_read_end(struct tg_capture *cap, const unsigned char *p, uint32_t len,
			int partial, struct tg_diag *d)
{
	const unsigned char *start = p, *end = p + len;
	uint64_t n;

	if (partial)
		return 0;
	if (cap->has_end)
		return cap_corrupt(cap, d, start, "two end chunks");
	if (len < 8)
		return cap_corrupt(cap, d, start, "end chunk too short");
	cap->end_us = (int64_t)tg_cap_get_u64(p);
	p += 8;
	if (tg_cap_get_varint(&p, end, &n) < 0)
		return cap_corrupt(cap, d, start, "end chunk too short");
	while (n--) {
		uint64_t stream, calls, returns, dropped;
		uint32_t ix;

		if (tg_cap_get_varint(&p, end, &stream) < 0 ||
		    tg_cap_get_varint(&p, end, &calls) < 0 ||
		    tg_cap_get_varint(&p, end, &returns) < 0 ||
		    tg_cap_get_varint(&p, end, &dropped) < 0)
			return cap_corrupt(cap, d, start, "end chunk too short");
		ix = tg_cap_idmap_get(&cap->stream_ids, stream);
		if (ix) {
			cap->threads[ix - 1].end_calls = calls;
			cap->threads[ix - 1].end_returns = returns;
			cap->threads[ix - 1].dropped = dropped;
		}
	}
	cap->has_end = 1;
	return 0;
}

/* Parses a STATE payload (a segment's head) for stream; a partial one is
 * ignored (the cut is in the head: the segment has no records). */
static int cap_read_state(struct tg_capture *cap, uint32_t stream, const unsigned char *p,
			  uint32_t len, int partial, struct tg_diag *d)
{
	const unsigned char *start = p, *end = p + len;
	struct tg_cap_base b;
	uint64_t t, a, r, m, depth;
	uint32_t ix = 0;

	memset(&b, 0, sizeof(b));
	if (tg_cap_get_varint(&p, end, &t) < 0 || tg_cap_get_varint(&p, end, &a) < 0 ||
	    tg_cap_get_varint(&p, end, &r) < 0 || tg_cap_get_varint(&p, end, &m) < 0 ||
	    tg_cap_get_varint(&p, end, &depth) < 0)
		goto short_state;
	if (t > (uint64_t)(INT64_MAX - cap->start_us))
		return cap_corrupt(cap, d, start, "time overflow");
	b.t_us = cap->start_us + (int64_t)t;
	b.calls = a;
	b.returns = r;
	b.mem = tg_cap_unzz(m);
	if (stream == TG_CAP_STREAM_META) {
		cap->kept_from_us = b.t_us;
		return 0;
	}
	if (stream != TG_CAP_STREAM_PROCESS) {
		ix = tg_cap_idmap_get(&cap->stream_ids, stream);
		if (!ix)
			return cap_corrupt(cap, d, start, "state of an undefined thread");
		if (cap->threads[ix - 1].has_state)
			return cap_corrupt(cap, d, start, "a thread's state given twice");
	}
	if (depth > (uint64_t)(end - p))  /* each open call takes 2 bytes or more */
		goto short_state;
	if (depth && !(b.open = malloc((size_t)depth * sizeof(*b.open))))
		return tg_error(d, "out of memory");
	for (b.depth = 0; b.depth < depth; b.depth++) {
		struct tg_cap_open *o = &b.open[b.depth];
		uint64_t id, number, v;
		if (tg_cap_get_varint(&p, end, &id) < 0 || tg_cap_get_varint(&p, end, &number) < 0)
			goto short_open;
		if (!(o->code = tg_capture_code(cap, id))) {
			free(b.open);
			return cap_corrupt(cap, d, start, "an open call of an undefined code");
		}
		o->number = (unsigned long)number;
		o->t_us = TG_CAP_T_UNKNOWN;  /* a state gives no call times */
		if (o->code->kind == TG_CAP_CODE_C) {
			if (tg_cap_get_varint(&p, end, &v) < 0)
				goto short_open;
			o->ref = tg_cap_unzz(v);
		} else {
			o->ref = (int64_t)o->code->first_line;
		}
	}
	if (p < end) {  /* MEM by depth (optional: older segments end here) */
		uint64_t n, v;
		int64_t sum = 0;
		int wrapped = 0;  /* a hostile level's sum past int64_t: no match */

		if (tg_cap_get_varint(&p, end, &n) < 0 || n > (uint64_t)(end - p))
			goto short_open;
		if (n && !(b.lvl = malloc((size_t)n * sizeof(*b.lvl)))) {
			free(b.open);
			return tg_error(d, "out of memory");
		}
		for (b.n_lvl = 0; b.n_lvl < n; b.n_lvl++) {
			if (tg_cap_get_varint(&p, end, &v) < 0)
				goto short_open;
			b.lvl[b.n_lvl] = tg_cap_unzz(v);
			wrapped |= __builtin_add_overflow(sum, b.lvl[b.n_lvl], &sum);
		}
		if (wrapped || sum != b.mem) {
			free(b.open);
			free(b.lvl);
			return cap_corrupt(cap, d, start, "a state's memory by depth does not add up");
		}
	}
	if (b.depth > a || b.returns > b.calls) {
		free(b.open);
		free(b.lvl);
		return cap_corrupt(cap, d, start, "a state with more open calls than calls");
	}
	if (stream == TG_CAP_STREAM_PROCESS) {
		free(b.open);
		free(b.lvl);
		b.lvl = NULL;
		b.n_lvl = 0;
		b.open = NULL;
		b.depth = 0;
		cap->process_base = b;
		cap->has_process_base = 1;
	} else {
		cap->threads[ix - 1].state = b;
		cap->threads[ix - 1].has_state = 1;
	}
	return 0;
short_open:
	free(b.open);
	free(b.lvl);
short_state:
	if (partial)
		return 0;
	return cap_corrupt(cap, d, start, "state runs past its chunk");
}

/* Files one chunk's payload [p, p + len) (decompressed if it was) by kind:
 * definitions parsed, records added to their stream.  0 or -1. */
static int cap_file_chunk(struct tg_capture *cap, const unsigned char *h, unsigned kind,
			  uint32_t stream, const unsigned char *p, uint32_t len, int partial,
			  uint32_t zsize, struct tg_diag *d)
{
	int rc = 0;

	switch (kind) {
	case TG_CAP_CHUNK_EVENTS: {
		uint32_t ix = tg_cap_idmap_get(&cap->stream_ids, stream);
		if (!ix && cap->seg_first > 1) {
			/* a thread the recorder could not carry into the segments kept */
			cap->orphan_chunks++;
			break;
		}
		if (!ix)
			return cap_corrupt(cap, d, h, "events of an undefined thread");
		if (len && cap_spans_add(&cap->threads[ix - 1].spans, p, len, partial, zsize) < 0)
			return tg_error(d, "out of memory");
		break;
	}
	case TG_CAP_CHUNK_CODES:
		rc = cap_read_codes(cap, p, len, partial, d);
		break;
	case TG_CAP_CHUNK_THREAD:
		rc = cap_read_thread(cap, stream, p, len, partial, d);
		break;
	case TG_CAP_CHUNK_PROCESS:
		if (len && cap_spans_add(&cap->process, p, len, partial, zsize) < 0)
			return tg_error(d, "out of memory");
		break;
	case TG_CAP_CHUNK_END:
		rc = cap_read_end(cap, p, len, partial, d);
		break;
	case TG_CAP_CHUNK_STATE:
		rc = cap_read_state(cap, stream, p, len, partial, d);
		break;
	default: /* a later version's chunk: skipped */
		cap->skipped_chunks++;
		break;
	}
	return rc;
}

#ifdef TG_HAVE_ZSTD
/*
 * Decompresses the zstd frame [src, src + len) of the chunk at h, of `size`
 * bytes of records, into buf (size bytes).  A chunk cut short gives the records
 * its bytes decode to (the last may be incomplete, as in an uncompressed cut
 * chunk).  *ctx is a ZSTD_DCtx, made on first use.  Returns the bytes
 * decompressed, or -1 with d->msg set (corrupt frame, out of memory).
 */
static long cap_zstd_into(const struct tg_capture *cap, void **ctx, const unsigned char *h,
			  const unsigned char *src, uint32_t len, int partial, unsigned char *buf,
			  uint32_t size, struct tg_diag *d)
{
	ZSTD_inBuffer in = { src, len, 0 };
	ZSTD_outBuffer out = { buf, size, 0 };
	size_t r;

	if (!*ctx) {
		if (!(*ctx = ZSTD_createDCtx()))
			return tg_error(d, "out of memory");
		/* the frame's window may not ask for more than its records */
		ZSTD_DCtx_setParameter(*ctx, ZSTD_d_windowLogMax, 20);
	}
	if (!partial) {
		r = ZSTD_decompressDCtx(*ctx, buf, size, src, len);
		if (ZSTD_isError(r) || r != size)
			return cap_corrupt(cap, d, h, "zstd chunk does not decompress");
		return (long)r;
	}
	ZSTD_DCtx_reset(*ctx, ZSTD_reset_session_only);
	r = ZSTD_decompressStream(*ctx, &out, &in);
	if (ZSTD_isError(r))
		return cap_corrupt(cap, d, h, "zstd chunk does not decompress");
	return (long)out.pos;
}

static void cap_zstd_free(void *ctx)
{
	ZSTD_freeDCtx(ctx);
}

/* The records' size of the zstd chunk at h (payload [p, p + len)) into *size:
 * 0 (a chunk cut inside its frame header: *size 0, nothing usable), or -1. */
static int cap_zstd_size(const struct tg_capture *cap, const unsigned char *h,
			 const unsigned char *p, uint32_t len, int partial, uint32_t *size,
			 struct tg_diag *d)
{
	unsigned long long n = ZSTD_getFrameContentSize(p, len);

	*size = 0;
	if (n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN) {
		if (partial)
			return 0;
		return cap_corrupt(cap, d, h, "zstd chunk without its size");
	}
	if (n > TG_CAP_ZSTD_MAX)
		return cap_corrupt(cap, d, h, "zstd chunk of more than 1 MB of records (the "
				   "recorder compresses 64 KB)");
	*size = (uint32_t)n;
	return 0;
}
#else
static long cap_zstd_into(const struct tg_capture *cap, void **ctx, const unsigned char *h,
			  const unsigned char *src, uint32_t len, int partial, unsigned char *buf,
			  uint32_t size, struct tg_diag *d)
{
	(void)cap, (void)ctx, (void)h, (void)src, (void)len, (void)partial, (void)buf;
	(void)size;
	return tg_error(d, "zstd is not built in");
}

static void cap_zstd_free(void *ctx)
{
	(void)ctx;
}

static int cap_zstd_size(const struct tg_capture *cap, const unsigned char *h,
			 const unsigned char *p, uint32_t len, int partial, uint32_t *size,
			 struct tg_diag *d)
{
	(void)p, (void)len, (void)partial, (void)size;
	return tg_error(d, "'%s': chunk at byte %zu is zstd-compressed, and this "
			"threadgraph was built without zstd (install libzstd-dev and "
			"reinstall threadgraph)", cap->path, (size_t)(h - cap->map));
}
#endif

/* Takes n bytes from the capture's zstd budget; 0 or -1 (d->msg set). */
static int cap_budget_take(const struct tg_capture *cap, size_t n, struct tg_diag *d)
{
	if (n > TG_CAP_ZSTD_BUDGET - cap->zb->live)
		return tg_error(d, "'%s': its zstd chunks would need more than %u MB of memory "
				"at once", cap->path, TG_CAP_ZSTD_BUDGET >> 20);
	cap->zb->live += n;
	return 0;
}

/* Decompresses a definitions chunk (codes point into its records, so the
 * capture keeps them) and files it.  0 or -1. */
static int cap_zstd_defs(struct tg_capture *cap, const unsigned char *h, unsigned kind,
			 uint32_t stream, const unsigned char *p, uint32_t len, int partial,
			 uint32_t size, struct tg_diag *d)
{
	unsigned char *buf, **owned;
	void *ctx = NULL;
	long n;

	if (cap->n_owned == cap->owned_alloc) {
		size_t na = cap->owned_alloc ? 2 * cap->owned_alloc : 16;
		if (!(owned = realloc(cap->owned, na * sizeof(*owned))))
			return tg_error(d, "out of memory");
		cap->owned = owned;
		cap->owned_alloc = na;
	}
	if (cap_budget_take(cap, size, d) < 0)
		return -1;
	if (!(buf = malloc(size ? size : 1)))
		return tg_error(d, "out of memory");
	cap->owned[cap->n_owned++] = buf;
	n = cap_zstd_into(cap, &ctx, h, p, len, partial, buf, size, d);
	cap_zstd_free(ctx);
	if (n < 0)
		return -1;
	return cap_file_chunk(cap, h, kind, stream, buf, (uint32_t)n, partial, 0, d);
}

static int cap_cmp_base(const void *a, const void *b)
{
	const struct tg_cap_thread *x = *(struct tg_cap_thread *const *)a;
	const struct tg_cap_thread *y = *(struct tg_cap_thread *const *)b;
	int c = strcmp(x->base, y->base);

	if (c)
		return c;
	return x < y ? -1 : x > y;  /* definition order (offsets are per segment) */
}

/* Refuses two threads with one file name (export would write one file twice),
 * naming the later definition: sorted, so linear-logarithmic in the thread
 * count (a capture can define a thread per few bytes).  0 or -1. */
static int cap_check_bases(struct tg_capture *cap, struct tg_diag *d)
{
	struct tg_cap_thread **v;
	int ret = 0;

	if (cap->n_threads < 2)
		return 0;
	if (!(v = malloc(cap->n_threads * sizeof(*v))))
		return tg_error(d, "out of memory");
	for (size_t i = 0; i < cap->n_threads; i++)
		v[i] = &cap->threads[i];
	qsort(v, cap->n_threads, sizeof(*v), cap_cmp_base);
	for (size_t i = 1; i < cap->n_threads && !ret; i++)
		if (!strcmp(v[i - 1]->base, v[i]->base))
			ret = cap_corrupt(cap, d, v[i]->at,
					  "two threads have the same file name");
	free(v);
	return ret;
}

/* Walks the chunks of seg once: definitions parsed, payloads filed by stream.
 * head: the segment's head is read (the first segment read), else skipped. */
static int cap_scan(struct tg_capture *cap, const struct tg_cap_seg *seg, int head,
		    struct tg_diag *d)
{
	const unsigned char *p = seg->map + TG_CAP_HEADER_SIZE, *end = seg->map + seg->size;

	while (p < end) {
		const unsigned char *h = p;
		unsigned kind, flags;
		uint32_t stream, len;
		int partial = 0;
		int rc = 0;

		if ((size_t)(end - p) < TG_CAP_CHUNK_HEADER_SIZE) {
			cap->cut = 1;
			cap->cut_at = (uint64_t)(h - seg->map);
			break;
		}
		kind = p[0];
		flags = p[1];
		stream = tg_cap_get_u32(p + 4);
		len = tg_cap_get_u32(p + 8);
		p += TG_CAP_CHUNK_HEADER_SIZE;
		if (len > TG_CAP_CHUNK_MAX)
			return cap_corrupt(cap, d, h, "chunk longer than 16 MB");
		if (len > (size_t)(end - p)) {
			cap->cut = 1;
			cap->cut_at = (uint64_t)(h - seg->map);
			partial = 1;
			len = (uint32_t)(end - p);
		}
		if ((flags & TG_CAP_CHUNK_HEAD) && !head) {
			p += len;  /* known from the segments before */
			continue;
		}
		if (cap->has_end && kind >= TG_CAP_CHUNK_EVENTS && kind <= TG_CAP_CHUNK_END)
			return cap_corrupt(cap, d, h, "chunk after the end chunk");
		if ((flags & TG_CAP_CHUNK_ZSTD) && kind >= TG_CAP_CHUNK_EVENTS &&
		    kind <= TG_CAP_CHUNK_END) {
			/* records are decompressed by the cursor that reads them, one
			 * chunk at a time; definitions now */
			uint32_t size;
			if (cap_zstd_size(cap, h, p, len, partial, &size, d) < 0)
				return -1;
			if (!size)
				rc = 0;
			else if (kind == TG_CAP_CHUNK_EVENTS || kind == TG_CAP_CHUNK_PROCESS)
				rc = cap_file_chunk(cap, h, kind, stream, p, len, partial, size, d);
			else
				rc = cap_zstd_defs(cap, h, kind, stream, p, len, partial, size, d);
			if (rc < 0)
				return -1;
			p += len;
			continue;
		}
		rc = cap_file_chunk(cap, h, kind, stream, p, len, partial, 0, d);
		if (rc < 0)
			return -1;
		p += len;
	}
	return 0;
}

/* Maps path into seg (path copied).  0, or -1 with d->msg set; *gone is set
 * when the file does not exist (a segment deleted since it was listed),
 * *short_head (if not NULL) when it is a capture cut short in its header. */
static int cap_map_seg(struct tg_cap_seg *seg, const char *path, int *gone, int *short_head,
		       struct tg_diag *d)
{
	struct stat st;
	void *map;
	int fd;

	memset(seg, 0, sizeof(*seg));
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);  /* a FIFO: refused below, not waited on */
	if (fd < 0) {
		if (gone)
			*gone = errno == ENOENT;
		return tg_error(d, "unable to open '%s': %s", path, strerror(errno));
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return tg_error(d, "'%s' is not a capture file", path);
	}
	if ((size_t)st.st_size < TG_CAP_HEADER_SIZE) {
		char buf[TG_CAP_MAGIC_LEN];
		ssize_t n = read(fd, buf, sizeof(buf));
		close(fd);
		if (n >= 0 && !memcmp(buf, TG_CAP_MAGIC, (size_t)n)) {
			if (short_head)
				*short_head = 1;
			return tg_error(d, "'%s': capture cut short in its header (%lld bytes): "
					"no records", path, (long long)st.st_size);
		}
		return tg_error(d, "'%s' is not a capture (no capture magic)", path);
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return tg_error(d, "unable to read '%s': %s", path, strerror(errno));
	seg->map = map;
	seg->size = (size_t)st.st_size;
	madvise(map, seg->size, MADV_SEQUENTIAL);
	if (!(seg->path = strdup(path))) {
		munmap(map, seg->size);
		seg->map = NULL;
		return tg_error(d, "out of memory");
	}
	if (!tg_capture_is_magic(seg->map, seg->size))
		return tg_error(d, "'%s' is not a capture (no capture magic)", path);
	return 0;
}

static int cap_map(struct tg_cap_seg *seg, const char *path, int *gone, struct tg_diag *d)
{
	return cap_map_seg(seg, path, gone, NULL, d);
}

/* Reads seg's header into cap (first: the first file read; later ones must
 * agree with it), appends seg to cap->segs and scans it.  0 or -1. */
static int cap_add(struct tg_capture *cap, struct tg_cap_seg *seg, int first,
		   struct tg_diag *d)
{
	const unsigned char *h = seg->map;
	uint32_t version = tg_cap_get_u32(h + 8), no = tg_cap_get_u32(h + 36);
	struct tg_cap_seg *nv;

	nv = realloc(cap->segs, (cap->n_segs + 1) * sizeof(*nv));
	if (!nv)
		return tg_error(d, "out of memory");
	cap->segs = nv;
	cap->segs[cap->n_segs++] = *seg;
	memset(seg, 0, sizeof(*seg));
	seg = &cap->segs[cap->n_segs - 1];
	if (!first && cap->cut)
		/* only the newest may be cut (a killed recorder leaves the older
		 * ones whole): the rest of this one's records are lost, and the
		 * streams would go on in the next one from a state they never
		 * reached -- a wrong graph, not a shorter one */
		return tg_error(d, "'%s' is cut short: it ends at byte %zu, inside the chunk at "
				"byte %llu, but it is not the newest segment (a partial copy?): "
				"the rest of its records are lost; remove it and the segments "
				"before it to read the ones after it",
				cap->segs[cap->n_segs - 2].path, cap->segs[cap->n_segs - 2].size,
				(unsigned long long)cap->cut_at);
	if (version < 1 || version > TG_CAP_VERSION)
		return tg_error(d, "'%s': capture version %u, this threadgraph reads versions "
				"1 to %u%s", seg->path, version, TG_CAP_VERSION,
				version > TG_CAP_VERSION ? " (made by a later threadgraph: "
				"read it with that one)" : "");
	if (!first && version != cap->version)
		return cap_corrupt(cap, d, h + 8, "a segment of another capture version");
	if (no != seg->no)
		return cap_corrupt(cap, d, h + 36, seg->no ? "the segment number is not its "
				   "file name's" : "a segment's header in capture.tg");
	if (first) {
		cap->version = version;
		cap->flags = tg_cap_get_u32(h + 12);
		cap->start_us = (int64_t)tg_cap_get_u64(h + 16);
		cap->memory_mode = tg_cap_get_u32(h + 24);
		cap->clock = tg_cap_get_u32(h + 28);
		cap->pid = tg_cap_get_u32(h + 32);
		if (cap->start_us < 0)
			return cap_corrupt(cap, d, h + 16, "negative start time");
		cap->kept_from_us = cap->start_us;
		cap->seg_first = no;
	} else if (memcmp(h + 12, cap->segs[0].map + 12, 24)) {
		return cap_corrupt(cap, d, h, "a segment of another run (its header differs "
				   "from the first segment's)");
	}
	cap->seg_last = no;
	free(cap->path);
	if (!(cap->path = strdup(seg->path)))
		return tg_error(d, "out of memory");
	cap->map = seg->map;
	cap->size = seg->size;
	if (cap->has_end)
		return cap_corrupt(cap, d, h, "a segment after the one that ended the run");
	return cap_scan(cap, seg, first, d);
}

static int cap_cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Opens the segments in dir: the newest run of consecutive numbers, oldest
 * first; one deleted since the listing is passed over (the next has a head). */
static int cap_open_segments(struct tg_capture *cap, const char *dir, size_t dlen,
			     struct tg_diag *d)
{
	uint32_t *nos = NULL, no;
	size_t n = 0, alloc = 0, from;
	struct tg_cap_seg seg;
	struct dirent *e;
	char *dirz = malloc(dlen + 1);
	DIR *dh;
	int rc = -1;

	if (!dirz)
		return tg_error(d, "out of memory");
	memcpy(dirz, dir, dlen);
	dirz[dlen] = '\0';
	if (!(dh = opendir(dirz))) {
		tg_error(d, "unable to read directory '%s': %s", dirz, strerror(errno));
		goto out;
	}
	while ((e = readdir(dh))) {
		if (!tg_capture_segment_name(e->d_name, &no))
			continue;
		if (n == alloc) {
			uint32_t *nv;
			alloc = alloc ? 2 * alloc : 64;
			if (!(nv = realloc(nos, alloc * sizeof(*nv)))) {
				closedir(dh);
				tg_error(d, "out of memory");
				goto out;
			}
			nos = nv;
		}
		nos[n++] = no;
	}
	closedir(dh);
	if (!n) {
		tg_error(d, "no capture segments in '%s'", dirz);
		goto out;
	}
	qsort(nos, n, sizeof(*nos), cap_cmp_u32);
	for (from = n - 1; from > 0 && nos[from - 1] + 1 == nos[from]; from--)
		;
	for (size_t i = from; i < n; i++) {
		char name[64], *path;
		int gone = 0, short_head = 0;

		snprintf(name, sizeof(name), TG_CAP_SEG_PREFIX "%0*u" TG_CAP_SEG_SUFFIX,
			 TG_CAP_SEG_DIGITS, nos[i]);
		if (!(path = cap_join(dirz, dlen, name))) {
			tg_error(d, "out of memory");
			goto out;
		}
		if (cap_map_seg(&seg, path, &gone, &short_head, d) < 0) {
			free(path);
			free(seg.path);
			if (seg.map)
				munmap((void *)seg.map, seg.size);
			if (gone && !cap->n_segs && i + 1 < n)
				continue;  /* deleted by the recorder meanwhile */
			if (short_head && cap->n_segs && i + 1 == n) {
				/* the newest, its header unwritten: an older
				 * recorder killed as it started it */
				cap->empty_last = nos[i];
				break;
			}
			goto out;
		}
		free(path);
		seg.no = nos[i];
		if (cap_add(cap, &seg, !cap->n_segs, d) < 0)
			goto out;
	}
	if (from > 0) {  /* a gap: the older ones are not part of this capture */
		cap->skip_lo = nos[0];
		cap->skip_hi = nos[from - 1];
		cap->n_skipped = from;
	}
	rc = 0;
out:
	free(nos);
	free(dirz);
	return rc;
}

int tg_capture_open(struct tg_capture *cap, const char *path, struct tg_diag *d)
{
	const char *base = strrchr(path, '/');
	struct tg_cap_seg seg;
	uint32_t no;

	memset(cap, 0, sizeof(*cap));
	cap->code_ids.seed = cap_seed();
	cap->stream_ids.seed = cap_seed();
	if (!(cap->zb = calloc(1, sizeof(*cap->zb))))
		return tg_error(d, "out of memory");
	base = base ? base + 1 : path;
	if (tg_capture_segment_name(base, &no)) {
		size_t dlen = (size_t)(base - path);
		if (dlen > 1)
			dlen--;  /* the '/' */
		if (cap_open_segments(cap, dlen ? path : ".", dlen ? dlen : 1, d) < 0 ||
		    cap_check_bases(cap, d) < 0)
			goto fail;
		return 0;
	}
	if (cap_map(&seg, path, NULL, d) < 0) {
		free(seg.path);
		if (seg.map)
			munmap((void *)seg.map, seg.size);
		goto fail;
	}
	if (cap_add(cap, &seg, 1, d) < 0 || cap_check_bases(cap, d) < 0)
		goto fail;
	return 0;
fail:
	tg_capture_close(cap);
	return -1;
}

void tg_capture_close(struct tg_capture *cap)
{
	for (size_t i = 0; i < cap->n_threads; i++) {
		free(cap->threads[i].base);
		free(cap->threads[i].name);
		free(cap->threads[i].spans.v);
		free(cap->threads[i].state.open);
		free(cap->threads[i].state.lvl);
	}
	free(cap->threads);
	free(cap->codes);
	free(cap->process.v);
	cap_idmap_release(&cap->code_ids);
	cap_idmap_release(&cap->stream_ids);
	for (size_t i = 0; i < cap->n_owned; i++)
		free(cap->owned[i]);
	free(cap->owned);
	free(cap->zb);
	free(cap->process_base.open);
	for (size_t i = 0; i < cap->n_segs; i++) {
		munmap((void *)cap->segs[i].map, cap->segs[i].size);
		free(cap->segs[i].path);
	}
	free(cap->segs);
	free(cap->path);
	memset(cap, 0, sizeof(*cap));
}

uint64_t tg_capture_dropped(const struct tg_capture *cap)
{
	uint64_t n = 0;

	for (size_t i = 0; i < cap->n_threads; i++)
		n += cap->threads[i].dropped;
	return n;
}

/* --- cursors --------------------------------------------------------------- */

void tg_capcur_init(struct tg_capcur *c, const struct tg_capture *cap,
		    const struct tg_cap_thread *t)
{
	const struct tg_cap_spans *l = t ? &t->spans : &cap->process;

	memset(c, 0, sizeof(*c));
	c->cap = cap;
	c->thread = t;
	c->spans = l->v;
	c->n_spans = l->n;
	c->timed = (cap->flags & TG_CAP_F_TIME) != 0;
	c->memory = (cap->flags & TG_CAP_F_MEMORY) != 0;
	c->t_us = cap->start_us;
	c->si = (size_t)-1;  /* before the first span: cap_next_span() loads it */
	if (t && t->has_state) {  /* a segment's head: the stream goes on from here */
		const struct tg_cap_base *b = &t->state;
		c->t_us = b->t_us;
		c->calls = (unsigned long)b->calls;
		c->returns = (unsigned long)b->returns;
		if (b->depth && (c->open = malloc(b->depth * sizeof(*c->open)))) {
			memcpy(c->open, b->open, b->depth * sizeof(*c->open));
			c->depth = c->open_alloc = b->depth;
		} else if (b->depth) {
			c->n_spans = 0;  /* its records would not pair with their calls */
			c->no_state = 1;
		}
	} else if (!t && cap->has_process_base) {
		c->t_us = cap->process_base.t_us;
		c->samples = (unsigned long)cap->process_base.calls;
		c->bytes = cap->process_base.mem;
	}
}

void tg_capcur_release(struct tg_capcur *c)
{
	free(c->open);
	c->open = NULL;
	free(c->starts);
	c->starts = NULL;
	c->n_starts = c->starts_alloc = 0;
	c->open_alloc = c->depth = 0;
	if (c->zalloc)
		c->cap->zb->live -= c->zalloc;
	free(c->zbuf);
	c->zbuf = NULL;
	c->zalloc = 0;
	if (c->zctx)
		cap_zstd_free(c->zctx);
	c->zctx = NULL;
}

/*
 * A varint, with the one- and two-byte cases inline and without a branch between
 * them (record fields are one or two bytes in no predictable order); 0 or -1
 * (bytes end, more than 64 bits).
 */
static inline int cap_varint(const unsigned char **p, const unsigned char *end, uint64_t *v)
{
	const unsigned char *q = *p;

	if (__builtin_expect(end - q >= 2, 1)) {
		uint64_t b0 = q[0], b1 = q[1], more = b0 >> 7;
		if (!(more & (b1 >> 7))) {
			*v = (b0 & 0x7f) | (((b1 & 0x7f) << 7) & (0 - more));
			*p = q + 1 + more;
			return 0;
		}
	} else if (q < end && !(*q & 0x80)) {
		*v = *q;
		*p = q + 1;
		return 0;
	}
	return tg_cap_get_varint(p, end, v);
}

static int cap_cur_corrupt(struct tg_capcur *c, struct tg_diag *d, const unsigned char *at,
			   const char *what)
{
	const char *path;
	size_t off = tg_capture_offset(c->cap, at, &path);

	if (c->thread)
		return tg_error(d, "'%s': corrupt capture at byte %zu: %s (thread '%s', after "
				"%lu calls and %lu returns)", path, off, what, c->thread->base,
				c->calls, c->returns);
	return tg_error(d, "'%s': corrupt capture at byte %zu: %s (process samples, after %lu)",
			path, off, what, c->samples);
}

/* Adds dt to the cursor's time; 0 or -1 on overflow. */
static inline int cap_add_time(struct tg_capcur *c, uint64_t dt)
{
	if (dt > (uint64_t)(INT64_MAX - c->t_us))
		return -1;
	c->t_us += (int64_t)dt;
	return 0;
}

/*
 * A record ran past the bytes of its span at `at`: the cut of a capture cut
 * short (end of stream, 0) or corruption (-1).
 */
static int cap_cur_short(struct tg_capcur *c, struct tg_diag *d, const unsigned char *at)
{
	if (c->partial) {
		const struct tg_cap_span *sp = &c->spans[c->si];

		c->cut = 1;
		c->cut_si = c->si;
		c->cut_pos = (size_t)(at - (sp->zsize ? c->zbuf : sp->p));
		c->p = c->end;
		c->si = c->n_spans;
		return 0;
	}
	return cap_cur_corrupt(c, d, at, "record runs past the end of its chunk");
}

/* A record's line as readers take it: -1, CPython's "no line", which
 * threadgraph 0.1.0 wrote (a generator's implicit return on 3.12, a C call
 * made where the caller has no line), is 0 as the recorder now writes it.  A
 * RETURN's line is computed from the raw line of its CALL (the ref on the open
 * stack), never from this one. */
static inline int64_t cap_line(int64_t line)
{
	return line == -1 ? 0 : line;
}

/* Grows the open-call stack; 0 or -1. */
static int cap_grow(struct tg_capcur *c, struct tg_diag *d)
{
	size_t na = c->open_alloc ? 2 * c->open_alloc : 64;
	struct tg_cap_open *nv;

	if (na > UINT32_MAX)
		return tg_error(d, "calls nested too deep");
	nv = realloc(c->open, na * sizeof(*nv));
	if (!nv)
		return tg_error(d, "out of memory");
	c->open = nv;
	c->open_alloc = na;
	return 0;
}

static inline int cap_push(struct tg_capcur *c, const struct tg_cap_code *code, int64_t ref,
			   struct tg_diag *d)
{
	struct tg_cap_open *o;

	if (c->depth == c->open_alloc && cap_grow(c, d) < 0)
		return -1;
	o = &c->open[c->depth++];
	o->code = code;
	o->ref = ref;
	o->number = c->calls;
	o->t_us = c->t_us;
	return 0;
}

/* The next process sample. */
static int cap_next_sample(struct tg_capcur *c, struct tg_cap_rec_data *r, struct tg_diag *d)
{
	const unsigned char *start = c->p;
	uint64_t dt = 0, zz;

	if (c->timed && cap_varint(&c->p, c->end, &dt) < 0)
		return cap_cur_short(c, d, start);
	if (cap_varint(&c->p, c->end, &zz) < 0) {
		c->p = start;
		return cap_cur_short(c, d, start);
	}
	if (cap_add_time(c, dt) < 0)
		return cap_cur_corrupt(c, d, start, "time overflow");
	if (__builtin_add_overflow(c->bytes, tg_cap_unzz(zz), &c->bytes))
		return cap_cur_corrupt(c, d, start, "memory size out of range");
	c->samples++;
	r->type = TG_CAP_REC_SAMPLE;
	r->code = NULL;
	r->t_us = c->t_us;
	r->value = c->bytes;
	r->number = c->samples;
	return 1;
}

/* Points the cursor at the records of the zstd span sp, decompressed into its
 * buffer (grown within the capture's budget); 0 or -1. */
static int cap_load_zstd(struct tg_capcur *c, const struct tg_cap_span *sp, struct tg_diag *d)
{
	const unsigned char *h = sp->p - TG_CAP_CHUNK_HEADER_SIZE;
	long n;

	if (sp->zsize > c->zalloc) {
		unsigned char *nb;
		if (cap_budget_take(c->cap, sp->zsize - c->zalloc, d) < 0)
			return -1;
		if (!(nb = realloc(c->zbuf, sp->zsize))) {
			c->cap->zb->live -= sp->zsize - c->zalloc;
			return tg_error(d, "out of memory");
		}
		c->zbuf = nb;
		c->zalloc = sp->zsize;
	}
	n = cap_zstd_into(c->cap, &c->zctx, h, sp->p, sp->len, (int)sp->partial, c->zbuf,
			  sp->zsize, d);
	if (n < 0)
		return -1;
	c->p = c->zbuf;
	c->end = c->zbuf + n;
	return 0;
}

/* Moves to the next non-empty span; 1, 0 at the end of the stream, or -1 (a
 * zstd chunk that does not decompress or passes the budget). */
static int cap_next_span(struct tg_capcur *c, struct tg_diag *d)
{
	while (c->p == c->end) {
		const struct tg_cap_span *sp;
		if (c->si + 1 >= c->n_spans) {
			c->si = c->n_spans;
			if (c->no_state)  /* the stream was not started (tg_capcur_init) */
				return tg_error(d, "out of memory");
			return 0;
		}
		sp = &c->spans[++c->si];
		c->partial = (int)sp->partial;
		if (sp->zsize) {
			if (cap_load_zstd(c, sp, d) < 0) {
				c->p = c->end = NULL;
				c->si = c->n_spans;
				return -1;
			}
			continue;
		}
		c->p = sp->p;
		c->end = c->p + sp->len;
	}
	return 1;
}

/*
 * The thread records.  The hot loop keeps the read position in a local (the
 * varint reads would otherwise store it through c at every field) and reads
 * codes from the direct id array when the id is in it.
 */
static inline __attribute__((always_inline)) int
cap_next(struct tg_capcur *c, struct tg_cap_rec_data *r, const unsigned want, struct tg_diag *d)
{
	const uint32_t *direct = c->cap->code_ids.direct;
	const uint64_t ndirect = c->cap->code_ids.ndirect;
	const struct tg_cap_code *codes = c->cap->codes;
	const unsigned char *p = c->p, *end = c->end, *start;
	const int timed = c->timed, memory = c->memory;
	uint64_t head, dt = 0, v;

	if (!c->thread) {
		int more = cap_next_span(c, d);
		if (more <= 0)
			return more;
		return cap_next_sample(c, r, d);
	}
	for (;;) {
		if (__builtin_expect(p == end, 0)) {
			int more;
			c->p = p;
			if ((more = cap_next_span(c, d)) <= 0)
				return more;
			p = c->p;
			end = c->end;
		}
		start = p;
		if (cap_varint(&p, end, &head) < 0)
			goto short_rec;
		if (head & 1) { /* RETURN */
			struct tg_cap_open *o;
			if (timed && cap_varint(&p, end, &dt) < 0)
				goto short_rec;
			v = 0;
			if (memory && cap_varint(&p, end, &v) < 0)
				goto short_rec;
			if (__builtin_expect(!c->depth, 0)) {
				c->p = p;
				return cap_cur_corrupt(c, d, start, "a return without an open call");
			}
			if (__builtin_expect(dt > (uint64_t)(INT64_MAX - c->t_us), 0))
				goto overflow;
			c->t_us += (int64_t)dt;
			o = &c->open[--c->depth];
			c->returns++;
			if (!(want & TG_CAP_WANT_RETURN))
				continue;
			c->p = p;
			if (__builtin_add_overflow(o->ref, tg_cap_unzz(head >> 1), &r->line))
				return cap_cur_corrupt(c, d, start, "line number out of range");
			r->line = cap_line(r->line);
			r->type = TG_CAP_REC_RETURN;
			r->code = o->code;
			r->depth = (unsigned)c->depth;
			r->t_us = c->t_us;
			r->value = tg_cap_unzz(v);
			r->number = c->returns;
			r->call_number = o->number;
			r->call_t_us = o->t_us;
			return 1;
		}
		if (head) { /* CALL */
			const struct tg_cap_code *code;
			uint64_t id = head >> 1;
			int64_t line;
			uint32_t ix;
			if (timed && cap_varint(&p, end, &dt) < 0)
				goto short_rec;
			ix = id < ndirect ? direct[id] : tg_cap_idmap_get(&c->cap->code_ids, id);
			if (__builtin_expect(!ix, 0)) {
				c->p = p;
				return cap_cur_corrupt(c, d, start, "a call of an undefined code");
			}
			code = &codes[ix - 1];
			if (code->kind == TG_CAP_CODE_C) {
				if (cap_varint(&p, end, &v) < 0)
					goto short_rec;
				line = tg_cap_unzz(v);  /* zigzag: -1 is a line too */
			} else {
				line = (int64_t)code->first_line; /* checked when defined */
			}
			if (__builtin_expect(dt > (uint64_t)(INT64_MAX - c->t_us), 0))
				goto overflow;
			c->t_us += (int64_t)dt;
			c->calls++;
			if (want & TG_CAP_WANT_CALL) {
				r->type = TG_CAP_REC_CALL;
				r->code = code;
				r->line = cap_line(line);
				r->depth = (unsigned)c->depth;
				r->t_us = c->t_us;
				r->value = 0;
				r->number = c->calls;
			}
			if (cap_push(c, code, line, d) < 0) {
				c->p = p;
				return -1;
			}
			if (want & TG_CAP_WANT_CALL) {
				c->p = p;
				return 1;
			}
			continue;
		}
		/* SPECIAL */
		if (p == end)
			goto short_rec;
		switch (*p++) {
		case TG_CAP_EV_DROPPED:
			if (cap_varint(&p, end, &v) < 0)
				goto short_rec;
			c->dropped += v;
			break;
		case TG_CAP_EV_UNWOUND:
			if (cap_varint(&p, end, &v) < 0)
				goto short_rec;
			if (v > c->depth) {
				c->p = p;
				return cap_cur_corrupt(c, d, start,
						       "more calls unwound than are open");
			}
			c->depth -= (size_t)v;
			c->unwound += v;
			break;
		case TG_CAP_EV_LEVEL: {
			uint64_t n, s;
			int64_t level, at = 0;
			int ok;

			if (cap_varint(&p, end, &v) < 0 || cap_varint(&p, end, &n) < 0)
				goto short_rec;
			level = tg_cap_unzz(v);
			ok = (want & TG_CAP_WANT_LEVEL) && n == c->depth;
			if (ok && n > c->starts_alloc) {
				int64_t *ns = realloc(c->starts, n * sizeof(*ns));
				if (!ns) {
					c->p = p;
					return tg_error(d, "out of memory");
				}
				c->starts = ns;
				c->starts_alloc = n;
			}
			for (uint64_t k = 0; k < n; k++) {
				if (cap_varint(&p, end, &s) < 0)
					goto short_rec;
				if (ok && __builtin_add_overflow(at, tg_cap_unzz(s), &at)) {
					c->p = p;
					return cap_cur_corrupt(c, d, start,
							       "memory out of range");
				}
				if (ok)
					c->starts[k] = at;
			}
			c->n_starts = ok ? n : 0;
			if (want & TG_CAP_WANT_LEVEL) {
				c->p = p;
				r->type = TG_CAP_REC_LEVEL;
				r->code = NULL;
				r->line = 0;
				r->depth = (unsigned)c->depth;
				r->t_us = c->t_us;
				r->value = level;
				r->number = c->returns;
				return 1;
			}
			break;
		}
		default:
			c->p = p;
			return cap_cur_corrupt(c, d, start, "unknown special event");
		}
	}
short_rec:
	c->p = start;
	return cap_cur_short(c, d, start);
overflow:
	c->p = start;
	return cap_cur_corrupt(c, d, start, "time overflow");
}

/* One copy of the loop per kind of caller: the want tests fold away. */
int tg_capcur_next_return(struct tg_capcur *c, struct tg_cap_rec_data *r, struct tg_diag *d)
{
	return cap_next(c, r, TG_CAP_WANT_RETURN, d);
}

int tg_capcur_next_call(struct tg_capcur *c, struct tg_cap_rec_data *r, struct tg_diag *d)
{
	return cap_next(c, r, TG_CAP_WANT_CALL, d);
}

int tg_capcur_next_of(struct tg_capcur *c, struct tg_cap_rec_data *r, unsigned want,
		      struct tg_diag *d)
{
	if (want == TG_CAP_WANT_RETURN)
		return tg_capcur_next_return(c, r, d);
	if (want == TG_CAP_WANT_CALL)
		return tg_capcur_next_call(c, r, d);
	if (want == (TG_CAP_WANT_CALL | TG_CAP_WANT_RETURN))
		return tg_capcur_next(c, r, d);
	return cap_next(c, r, want, d);
}

int tg_capcur_next(struct tg_capcur *c, struct tg_cap_rec_data *r, struct tg_diag *d)
{
	return cap_next(c, r, TG_CAP_WANT_CALL | TG_CAP_WANT_RETURN, d);
}

/* --- marks --------------------------------------------------------------- */

void tg_capcur_mark_init(struct tg_capcur_mark *m)
{
	memset(m, 0, sizeof(*m));
	m->at_start = 1;
}

void tg_capcur_mark_release(struct tg_capcur_mark *m)
{
	free(m->open);
	tg_capcur_mark_init(m);
}

/* The segment number and file offset of the mapped byte P. */
static void cap_where(const struct tg_capture *cap, const unsigned char *p, uint32_t *no,
		      uint64_t *off)
{
	*no = 0;
	*off = 0;
	for (size_t i = 0; i < cap->n_segs; i++)
		if (p >= cap->segs[i].map && p < cap->segs[i].map + cap->segs[i].size) {
			*no = cap->segs[i].no;
			*off = (uint64_t)(p - cap->segs[i].map);
			return;
		}
}

int tg_capcur_mark_take(const struct tg_capcur *c, struct tg_capcur_mark *m,
			struct tg_diag *d)
{
	const struct tg_cap_span *sp;
	size_t si, pos;

	if (c->depth > m->alloc) {
		struct tg_cap_mark_open *nv = realloc(m->open, c->depth * sizeof(*nv));
		if (!nv)
			return tg_error(d, "out of memory");
		m->open = nv;
		m->alloc = c->depth;
	}
	if (c->cut) {
		si = c->cut_si;
		pos = c->cut_pos;
	} else if (c->n_spans) {  /* the end of the stream: of its last span */
		si = c->n_spans - 1;
		sp = &c->spans[si];
		pos = sp->zsize ? (size_t)(c->end - c->zbuf) : sp->len;
	} else {
		si = (size_t)-1;
		pos = 0;
	}
	m->at_start = si == (size_t)-1;
	m->seg = 0;
	m->off = 0;
	m->pos = pos;
	if (!m->at_start)
		cap_where(c->cap, c->spans[si].p, &m->seg, &m->off);
	m->t_us = c->t_us;
	m->bytes = c->bytes;
	m->calls = c->calls;
	m->returns = c->returns;
	m->samples = c->samples;
	m->dropped = c->dropped;
	m->unwound = c->unwound;
	for (size_t i = 0; i < c->depth; i++) {
		m->open[i].code_ix = (uint32_t)(c->open[i].code - c->cap->codes);
		m->open[i].ref = c->open[i].ref;
		m->open[i].t_us = c->open[i].t_us;
		m->open[i].number = c->open[i].number;
	}
	m->depth = c->depth;
	return 0;
}

/* Puts M's state (not its place) into C, which tg_capcur_init() started; 1, 0
 * (a code index this opening does not have) or -1. */
static int cap_mark_state(struct tg_capcur *c, const struct tg_capcur_mark *m,
			  struct tg_diag *d)
{
	c->depth = 0;
	while (c->open_alloc < m->depth)
		if (cap_grow(c, d) < 0)
			return -1;
	for (size_t i = 0; i < m->depth; i++) {
		if (m->open[i].code_ix >= c->cap->n_codes)
			return 0;
		c->open[i].code = &c->cap->codes[m->open[i].code_ix];
		c->open[i].ref = m->open[i].ref;
		c->open[i].t_us = m->open[i].t_us;
		c->open[i].number = m->open[i].number;
	}
	c->depth = m->depth;
	c->t_us = m->t_us;
	c->bytes = m->bytes;
	c->calls = m->calls;
	c->returns = m->returns;
	c->samples = m->samples;
	c->dropped = m->dropped;
	c->unwound = m->unwound;
	return 1;
}

int tg_capcur_resume(struct tg_capcur *c, const struct tg_capture *cap,
		     const struct tg_cap_thread *t, const struct tg_capcur_mark *m,
		     struct tg_diag *d)
{
	const struct tg_cap_span *sp;
	size_t lo = 0, hi;
	uint32_t no;
	uint64_t off;

	tg_capcur_init(c, cap, t);
	if (c->no_state)
		return tg_error(d, "out of memory");
	hi = c->n_spans;
	if (!m->at_start) {
		while (lo < hi) {  /* spans are in file order: (segment, offset) grows */
			size_t mid = lo + (hi - lo) / 2;
			cap_where(cap, c->spans[mid].p, &no, &off);
			if (no < m->seg || (no == m->seg && off < m->off))
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < c->n_spans) {
			cap_where(cap, c->spans[lo].p, &no, &off);
			if (no == m->seg && off == m->off) {  /* the span it stopped in */
				sp = &c->spans[lo];
				if (sp->zsize) {
					if (cap_load_zstd(c, sp, d) < 0)
						return -1;
				} else {
					c->p = sp->p;
					c->end = sp->p + sp->len;
				}
				if (m->pos > (size_t)(c->end - c->p))
					return 0;  /* shorter than read: another chunk */
				c->p += m->pos;
				c->si = lo;
				c->partial = (int)sp->partial;
				return cap_mark_state(c, m, d);
			}
		}
		if (!m->seg || m->seg >= cap->seg_first)
			return 0;  /* not in this opening, yet not dropped */
	}
	/* M is before every span of this opening: at the stream's start, or in a
	 * segment dropped since.  It goes on from the segments kept only when
	 * nothing was written between (their head's state is M's). */
	if (t ? c->calls != m->calls || c->returns != m->returns || c->depth != m->depth
	      : c->samples != m->samples)
		return 0;
	for (size_t i = 0; i < c->depth; i++)
		if (c->open[i].number != m->open[i].number)
			return 0;
	return cap_mark_state(c, m, d);
}

size_t tg_cap_fmt_time(char *buf, int64_t t_us)
{
	uint64_t s = (uint64_t)t_us / 1000000, us = (uint64_t)t_us % 1000000;
	char tmp[24];
	size_t n = 0, len;

	do {
		tmp[n++] = (char)('0' + s % 10);
		s /= 10;
	} while (s);
	for (len = 0; n; len++)
		buf[len] = tmp[--n];
	buf[len++] = '.';
	for (int i = 5; i >= 0; i--) {
		buf[len + (size_t)i] = (char)('0' + us % 10);
		us /= 10;
	}
	return len + 6;
}
