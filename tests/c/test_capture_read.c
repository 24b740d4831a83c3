/*
 * test_capture_read.c - the capture reader (capture_read.c, recsrc.c) on captures built
 * here with tg_capture.h's encoders: decoded records, their text, every
 * truncation, corruption, sparse ids.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture_read.h"
#include "recsrc.h"
#include "tg_test.h"

/* A capture being built. */
struct buf {
	unsigned char b[4096];
	size_t n;
};

static void put(struct buf *b, const void *p, size_t n)
{
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

static void put_varint(struct buf *b, uint64_t v)
{
	b->n = (size_t)(tg_cap_put_varint(b->b + b->n, v) - b->b);
}

static void put_text(struct buf *b, const char *s)
{
	put_varint(b, strlen(s));
	put(b, s, strlen(s));
}

static void header(struct buf *b, uint32_t flags, int64_t start)
{
	unsigned char h[TG_CAP_HEADER_SIZE] = { 0 };

	memcpy(h, TG_CAP_MAGIC, TG_CAP_MAGIC_LEN);
	tg_cap_put_u32(h + 8, TG_CAP_VERSION);
	tg_cap_put_u32(h + 12, flags);
	tg_cap_put_u64(h + 16, (uint64_t)start);
	tg_cap_put_u32(h + 32, 99);
	put(b, h, sizeof(h));
}

static void chunk(struct buf *b, unsigned kind, uint32_t stream, const struct buf *payload)
{
	unsigned char h[TG_CAP_CHUNK_HEADER_SIZE] = { 0 };

	h[0] = (unsigned char)kind;
	tg_cap_put_u32(h + 4, stream);
	tg_cap_put_u32(h + 8, (uint32_t)payload->n);
	put(b, h, sizeof(h));
	put(b, payload->b, payload->n);
}

static void code(struct buf *p, uint64_t id, unsigned kind, uint64_t first, const char *file,
		 const char *func)
{
	put_varint(p, id);
	p->b[p->n++] = (unsigned char)kind;
	put_varint(p, first);
	put_text(p, file);
	put_text(p, func);
}

/* Writes b to a temporary file; returns its path (static buffer). */
static const char *tmpfile_of(const struct buf *b, size_t n)
{
	static char path[64];
	int fd;

	strcpy(path, "/tmp/tg-test-capture-XXXXXX");
	fd = mkstemp(path);
	if (fd < 0 || write(fd, b->b, n) != (ssize_t)n)
		abort();
	close(fd);
	return path;
}

#define F_ALL (TG_CAP_F_TIME | TG_CAP_F_MEMORY | TG_CAP_F_STACK | TG_CAP_F_PROCESS)
#define START 1700000000999999LL

/* The capture of the tests: thread "Main" calls f, f calls len (C), process samples. */
static void build(struct buf *b, uint64_t fid)
{
	struct buf p = { .n = 0 };

	header(b, F_ALL, START);
	code(&p, fid, TG_CAP_CODE_PYTHON, 10, "a.py", "f");
	code(&p, 2, TG_CAP_CODE_C, 0, "builtins", "len\\x1b");
	chunk(b, TG_CAP_CHUNK_CODES, TG_CAP_STREAM_META, &p);
	p.n = 0;
	put_varint(&p, 1000);
	put_varint(&p, 2000);
	put_text(&p, "Main");
	put_text(&p, "Main thread");
	chunk(b, TG_CAP_CHUNK_THREAD, 2, &p);
	p.n = 0;
	put_varint(&p, fid << 1);         /* CALL f */
	put_varint(&p, 5);
	put_varint(&p, 2 << 1);           /* CALL len, at line 12 */
	put_varint(&p, 1);
	put_varint(&p, tg_cap_zz(12));
	put_varint(&p, tg_cap_zz(0) << 1 | 1); /* RETURN len at line 12 */
	put_varint(&p, 2);
	put_varint(&p, tg_cap_zz(-7));
	chunk(b, TG_CAP_CHUNK_EVENTS, 2, &p);
	p.n = 0;
	put_varint(&p, 0);                /* SPECIAL: 3 dropped */
	p.b[p.n++] = TG_CAP_EV_DROPPED;
	put_varint(&p, 3);
	put_varint(&p, tg_cap_zz(4) << 1 | 1); /* RETURN f at line 14 */
	put_varint(&p, 1);
	put_varint(&p, tg_cap_zz(100));
	chunk(b, TG_CAP_CHUNK_EVENTS, 2, &p);
	p.n = 0;
	put_varint(&p, 3);
	put_varint(&p, tg_cap_zz(1000));
	put_varint(&p, 4);
	put_varint(&p, tg_cap_zz(-10));
	chunk(b, TG_CAP_CHUNK_PROCESS, TG_CAP_STREAM_PROCESS, &p);
	p.n = 0;
	tg_cap_put_u64(p.b, (uint64_t)START + 50);
	p.n = 8;
	put_varint(&p, 1);
	put_varint(&p, 2);
	put_varint(&p, 2);
	put_varint(&p, 2);
	put_varint(&p, 3);
	chunk(b, TG_CAP_CHUNK_END, TG_CAP_STREAM_META, &p);
}

static void test_decode(uint64_t fid)
{
	struct buf b = { .n = 0 };
	struct tg_capture cap;
	struct tg_capcur c;
	struct tg_cap_rec_data r;
	struct tg_diag d = { 0 };
	const char *path;
	char line[256];
	size_t n;

	build(&b, fid);
	path = tmpfile_of(&b, b.n);
	CHECK_INT(tg_capture_open(&cap, path, &d), 0);
	CHECK_INT(cap.n_threads, 1);
	CHECK_STR(cap.threads[0].base, "Main");
	CHECK_STR(cap.threads[0].name, "Main thread");
	CHECK_INT(cap.threads[0].native_id, 1000);
	CHECK_INT(cap.has_end, 1);
	CHECK_INT(cap.cut, 0);
	CHECK_INT(cap.pid, 99);
	CHECK_INT(tg_capture_dropped(&cap), 3);
	CHECK(tg_capture_code(&cap, fid) != NULL);
	CHECK(tg_capture_code(&cap, 77) == NULL);

	tg_capcur_init(&c, &cap, &cap.threads[0]);
	CHECK_INT(tg_capcur_next(&c, &r, &d), 1);
	CHECK_INT(r.type, TG_CAP_REC_CALL);
	CHECK_INT(r.line, 10);
	CHECK_INT(r.depth, 0);
	CHECK_INT(r.t_us, START + 5);
	CHECK_INT(r.number, 1);
	n = tg_src_fmt_record(line, sizeof(line), &r, 1);
	CHECK_MEM(line, n, "1700000001.000004#a.py:10:f\n");
	CHECK_INT(tg_capcur_next(&c, &r, &d), 1);
	CHECK_INT(r.type, TG_CAP_REC_CALL);
	CHECK_INT(r.line, 12);
	CHECK_INT(r.depth, 1);
	n = tg_src_fmt_record(line, sizeof(line), &r, 1);
	CHECK_MEM(line, n, " 1700000001.000005#builtins:12:len\\x1b\n");
	CHECK_INT(tg_capcur_next(&c, &r, &d), 1);
	CHECK_INT(r.type, TG_CAP_REC_RETURN);
	CHECK_INT(r.line, 12);
	CHECK_INT(r.value, -7);
	CHECK_INT(r.number, 1);
	CHECK_INT(r.call_number, 2);
	n = tg_src_fmt_record(line, sizeof(line), &r, 0);
	CHECK_MEM(line, n, "builtins:12:len\\x1b=>-7\n");
	CHECK_INT(tg_capcur_next(&c, &r, &d), 1);
	CHECK_INT(r.type, TG_CAP_REC_RETURN);
	CHECK_INT(r.line, 14);
	CHECK_INT(r.value, 100);
	CHECK_INT(r.t_us, START + 9);
	CHECK_INT(r.call_number, 1);
	CHECK_INT(r.depth, 0);
	CHECK_INT(c.dropped, 3);
	CHECK_INT(tg_capcur_next(&c, &r, &d), 0);
	CHECK_INT(c.cut, 0);
	tg_capcur_release(&c);

	tg_capcur_init(&c, &cap, NULL);
	CHECK_INT(tg_capcur_next(&c, &r, &d), 1);
	CHECK_INT(r.value, 1000);
	CHECK_INT(r.t_us, START + 3);
	CHECK_INT(tg_capcur_next(&c, &r, &d), 1);
	CHECK_INT(r.value, 990);
	n = tg_src_fmt_record(line, sizeof(line), &r, 1);
	CHECK_MEM(line, n, "1700000001.000006#990\n");
	CHECK_INT(tg_capcur_next(&c, &r, &d), 0);
	tg_capcur_release(&c);
	tg_capture_close(&cap);
	unlink(path);
}

/* The record source over the same capture: memrec fields and texts. */
static void test_recsrc(void)
{
	struct buf b = { .n = 0 };
	struct tg_capture cap;
	struct tg_dumpfile df = { 0 };
	struct tg_src s;
	struct tg_memrec m;
	struct tg_stackrec st;
	struct tg_diag d = { 0 };
	const char *path;

	build(&b, 1);
	path = tmpfile_of(&b, b.n);
	CHECK_INT(tg_capture_open(&cap, path, &d), 0);
	df.path = "Main.mem";
	df.thread = "Main";
	df.cap = &cap;
	df.cap_thread = &cap.threads[0];
	CHECK_INT(tg_src_open(&s, &df, 1, 0, &d), 0);
	CHECK_INT(tg_src_next_mem(&s, &m, &d), 1);
	CHECK_MEM(m.time.text.s, m.time.text.len, "1700000001.000007");
	CHECK(m.time.v == 1700000001.0 + 7 * 1e-6);
	CHECK_MEM(m.func.s, m.func.len, "len\\x1b");
	CHECK_INT(m.delta, -7);
	CHECK_INT(tg_src_mem_text(&s, &m, &d), 0);
	CHECK_MEM(m.rest.s, m.rest.len, "builtins:12:len\\x1b=>-7");
	CHECK_MEM(m.site.s, m.site.len, "builtins:12:len\\x1b");
	CHECK_INT(tg_src_next_mem(&s, &m, &d), 1);
	CHECK_INT(s.lineno, 2);
	CHECK_INT(tg_src_mem_text(&s, &m, &d), 0);
	CHECK_MEM(m.rest.s, m.rest.len, "a.py:14:f=>100");
	CHECK_INT(tg_src_next_mem(&s, &m, &d), 0);
	tg_src_release(&s);
	df.path = "Main.stack";
	CHECK_INT(tg_src_open(&s, &df, 1, 0, &d), 0);
	CHECK_INT(tg_src_next_stack(&s, &st, &d), 1);
	CHECK_INT(tg_src_next_stack(&s, &st, &d), 1);
	CHECK_INT(st.depth, 1);
	CHECK_INT(st.line, 12);
	CHECK_INT(tg_src_next_stack(&s, &st, &d), 0);
	tg_src_release(&s);
	tg_capture_close(&cap);
	unlink(path);
}

/* Every prefix: opened (header complete) and decoded up to the cut, no error. */
static void test_truncation(void)
{
	struct buf b = { .n = 0 };
	unsigned long last_returns = 0;

	build(&b, 1);
	for (size_t n = 0; n <= b.n; n++) {
		struct tg_capture cap;
		struct tg_diag d = { 0 };
		const char *path = tmpfile_of(&b, n);
		int rc = tg_capture_open(&cap, path, &d);

		unlink(path);
		if (n < TG_CAP_HEADER_SIZE) {
			CHECK_INT(rc, -1);
			CHECK(strstr(d.msg, "cut short in its header") || strstr(d.msg, "magic"));
			continue;
		}
		CHECK_INT(rc, 0);
		if (rc)
			continue;
		CHECK(n == b.n ? cap.has_end && !cap.cut : !cap.has_end);
		for (size_t t = 0; t <= cap.n_threads; t++) {
			struct tg_capcur c;
			struct tg_cap_rec_data r;
			int got;
			tg_capcur_init(&c, &cap, t < cap.n_threads ? &cap.threads[t] : NULL);
			while ((got = tg_capcur_next(&c, &r, &d)) > 0)
				;
			CHECK_INT(got, 0);
			if (t < cap.n_threads) {
				CHECK(c.returns >= last_returns);
				last_returns = c.returns;
			}
			tg_capcur_release(&c);
		}
		tg_capture_close(&cap);
	}
	CHECK_INT(last_returns, 2);
}

static void test_corrupt(void)
{
	struct buf b = { .n = 0 }, p = { .n = 0 };
	struct tg_capture cap;
	struct tg_capcur c;
	struct tg_cap_rec_data r;
	struct tg_diag d = { 0 };
	const char *path;

	header(&b, TG_CAP_F_MEMORY, 0);
	put_varint(&p, 0);
	put_varint(&p, 0);
	put_text(&p, "T");
	put_text(&p, "T");
	chunk(&b, TG_CAP_CHUNK_THREAD, 2, &p);
	p.n = 0;
	put_varint(&p, 1); /* a RETURN first */
	put_varint(&p, 0);
	chunk(&b, TG_CAP_CHUNK_EVENTS, 2, &p);
	path = tmpfile_of(&b, b.n);
	CHECK_INT(tg_capture_open(&cap, path, &d), 0);
	tg_capcur_init(&c, &cap, &cap.threads[0]);
	CHECK_INT(tg_capcur_next(&c, &r, &d), -1);
	CHECK(strstr(d.msg, "a return without an open call") != NULL);
	CHECK(strstr(d.msg, "at byte 70") != NULL); /* 40 + 18 + 12 */
	tg_capcur_release(&c);
	tg_capture_close(&cap);
	unlink(path);

	/* not a capture, a later version */
	b.n = 0;
	header(&b, 0, 0);
	b.b[0] = 'x';
	path = tmpfile_of(&b, b.n);
	CHECK_INT(tg_capture_open(&cap, path, &d), -1);
	CHECK(strstr(d.msg, "not a capture") != NULL);
	unlink(path);
	b.n = 0;
	header(&b, 0, 0);
	tg_cap_put_u32(b.b + 8, TG_CAP_VERSION + 1);
	path = tmpfile_of(&b, b.n);
	CHECK_INT(tg_capture_open(&cap, path, &d), -1);
	{
		char want[64];
		snprintf(want, sizeof(want), "capture version %u, this threadgraph reads "
			 "versions 1 to %u", TG_CAP_VERSION + 1, TG_CAP_VERSION);
		CHECK(strstr(d.msg, want) != NULL);
	}
	unlink(path);
}

static void test_fmt_time(void)
{
	char buf[TG_CAP_TIME_MAX];

	CHECK_MEM(buf, tg_cap_fmt_time(buf, 0), "0.000000");
	CHECK_MEM(buf, tg_cap_fmt_time(buf, 1394031433400000LL), "1394031433.400000");
	CHECK_MEM(buf, tg_cap_fmt_time(buf, INT64_MAX), "9223372036854.775807");
	CHECK(tg_cap_time_value(1394031433456789LL) == 1394031433.0 + 456789 * 1e-6);
}

int main(void)
{
	test_decode(1);
	test_decode(1ULL << 40); /* a sparse id: the hash table */
	test_recsrc();
	test_truncation();
	test_corrupt();
	test_fmt_time();
	TG_TEST_DONE();
}
