/*
 * Unit tests of the recorder's capture writer (src/recorder/capture_write.c) and the
 * record encoders of capture_write.h: a capture is written through the same calls the
 * recorder makes, read back byte by byte with the format's own definitions
 * (src/common/tg_capture.h), and compared with what was encoded.
 *
 * Covered: varints and zigzag at their limits, the C function id table, header
 * fields, definitions written before the chunk that uses them (and on their own
 * once they pass TG_CAP_DEFS_MAX), the END trailer, O_EXCL, a descriptor the
 * program closed and reused (never written), and chunks from several threads
 * at once (each whole, none interleaved).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capture_write.h"
#include "tg_test.h"

#ifdef TG_HAVE_ZSTD
#  include <zstd.h>
#endif

static char dir[] = "/tmp/tg_test_capture_XXXXXX";

static unsigned char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf;
	long n;
	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void test_varints(void)
{
	static const uint64_t vals[] = {0, 1, 127, 128, 300, 16383, 16384, UINT32_MAX,
					UINT64_C(1) << 63, UINT64_MAX};
	static const int64_t svals[] = {0, -1, 1, -64, 63, INT32_MIN, INT64_MAX, INT64_MIN};
	unsigned char buf[TG_CAP_VARINT_MAX];
	size_t i;

	for (i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		const unsigned char *p = buf;
		unsigned char *end = tg_cap_put_varint(buf, vals[i]);
		uint64_t v = 0;
		CHECK(end - buf <= TG_CAP_VARINT_MAX);
		CHECK_INT(tg_cap_get_varint(&p, end, &v), 0);
		CHECK(v == vals[i]);
		CHECK(p == end);
		/* one byte short: an error, the position unchanged */
		p = buf;
		CHECK_INT(tg_cap_get_varint(&p, end - 1, &v), -1);
		CHECK(p == buf);
	}
	for (i = 0; i < sizeof(svals) / sizeof(svals[0]); i++)
		CHECK(tg_cap_unzz(tg_cap_zz(svals[i])) == svals[i]);
	CHECK_INT(tg_cap_zz(-1), 1);
	CHECK_INT(tg_cap_zz(1), 2);
	/* 11 bytes (more than 64 bits) are refused */
	memset(buf, 0xff, sizeof(buf));
	{
		unsigned char big[11];
		const unsigned char *p = big;
		uint64_t v;
		memset(big, 0xff, 10);
		big[10] = 0;
		CHECK_INT(tg_cap_get_varint(&p, big + 11, &v), -1);
	}
}

static void test_idtab(void)
{
	struct tg_cap_idtab t = {0};
	uintptr_t i;
	int ok = 1;

	CHECK_INT(tg_cap_idtab_get(&t, 0x1000, 0), 0);
	for (i = 1; i <= 5000; i++)
		if (tg_cap_idtab_put(&t, i * 48, (i % 7) * 16, (uint32_t)i) < 0)
			ok = 0;
	CHECK(ok);
	for (i = 1; i <= 5000; i++)
		if (tg_cap_idtab_get(&t, i * 48, (i % 7) * 16) != i)
			ok = 0;
	CHECK(ok);
	/* same first pointer, another second one: a different key */
	CHECK_INT(tg_cap_idtab_get(&t, 48, 16 * 3), 0);
	CHECK_INT(t.used, 5000);
	tg_cap_idtab_clear(&t, NULL);
	CHECK_INT(tg_cap_idtab_get(&t, 48, 16), 0);
}

/* A chunk as read back. */
struct chunk {
	int kind, flags;
	uint32_t stream, len;
	const unsigned char *payload;
};

/* Splits BUF (after the header) into chunks; returns how many (at most MAX). */
static int read_chunks(const unsigned char *buf, size_t len, struct chunk *out, int max)
{
	size_t pos = TG_CAP_HEADER_SIZE;
	int n = 0;
	while (pos + TG_CAP_CHUNK_HEADER_SIZE <= len && n < max) {
		struct chunk *c = &out[n];
		c->kind = buf[pos];
		c->flags = buf[pos + 1];
		c->stream = tg_cap_get_u32(buf + pos + 4);
		c->len = tg_cap_get_u32(buf + pos + 8);
		c->payload = buf + pos + TG_CAP_CHUNK_HEADER_SIZE;
		if (pos + TG_CAP_CHUNK_HEADER_SIZE + c->len > len)
			break;
		pos += TG_CAP_CHUNK_HEADER_SIZE + c->len;
		n++;
	}
	CHECK(pos == len);  /* nothing left over, nothing cut */
	return n;
}

static uint64_t get(const unsigned char **p, const unsigned char *end)
{
	uint64_t v = UINT64_MAX;
	CHECK_INT(tg_cap_get_varint(p, end, &v), 0);
	return v;
}

static void test_round_trip(void)
{
	char path[256];
	struct tg_cap cap;
	unsigned char ev[256], *p = ev;
	unsigned char *buf;
	size_t len;
	struct chunk ch[16];
	int n;
	uint32_t py, c;

	snprintf(path, sizeof(path), "%s/capture.tg", dir);
	tg_cap_init(&cap);
	CHECK_INT(tg_cap_open(&cap, path, TG_CAP_F_TIME | TG_CAP_F_MEMORY | TG_CAP_F_STACK,
			      1700000000123456LL, 0, 1, 4242, 0), 0);
	CHECK(tg_cap_usable(&cap));
	CHECK_INT(tg_cap_open(&cap, path, 0, 0, 0, 0, 0, 0), -EEXIST);  /* O_EXCL */
	/* the failed open closed the first one: reopen under another name */
	snprintf(path, sizeof(path), "%s/capture2.tg", dir);
	CHECK_INT(tg_cap_open(&cap, path, TG_CAP_F_TIME | TG_CAP_F_MEMORY | TG_CAP_F_STACK,
			      1700000000123456LL, 0, 1, 4242, 0), 0);
	py = tg_cap_new_code_id(&cap);
	c = tg_cap_new_code_id(&cap);
	CHECK_INT(py, 1);
	CHECK_INT(c, 2);
	CHECK_INT(tg_cap_define(&cap, py, TG_CAP_CODE_PYTHON, 27, "main.py", 7, "doStuff", 7), 0);
	CHECK_INT(tg_cap_define(&cap, c, TG_CAP_CODE_C, 0, "time", 4, "sleep", 5), 0);
	CHECK_INT(tg_cap_thread(&cap, TG_CAP_STREAM_FIRST, 6685, 140023, "MainThread", 10,
				"MainThread", 10), 0);
	/* CALL doStuff @+5us, CALL sleep from line 30 @+0, RETURN sleep at 30, delta -3,
	 * a dropped mark, RETURN doStuff at 39 (+12 from 27) @+200us, delta 167936 */
	p = tg_cap_enc_call(p, py, 1, 5, 0, 0);
	p = tg_cap_enc_call(p, c, 1, 0, 1, 30);
	p = tg_cap_enc_return(p, 0, 1, 1, 1, -3);
	p = tg_cap_enc_dropped(p, 2);
	p = tg_cap_enc_return(p, 39 - 27, 1, 200, 1, 167936);
	CHECK_INT(tg_cap_chunk_out(&cap, TG_CAP_CHUNK_EVENTS, TG_CAP_STREAM_FIRST, ev,
				   (size_t)(p - ev)), 0);
	p = tg_cap_enc_sample(ev, 1, 7, 31457280);
	CHECK_INT(tg_cap_chunk_out(&cap, TG_CAP_CHUNK_PROCESS, TG_CAP_STREAM_PROCESS, ev,
				   (size_t)(p - ev)), 0);
	CHECK_INT(tg_cap_deposit(&cap, TG_CAP_STREAM_FIRST, 2, 2, 2), 0);
	CHECK_INT(tg_cap_finish(&cap, 1700000001000000LL), 0);
	CHECK(!tg_cap_usable(&cap));

	buf = slurp(path, &len);
	CHECK(buf != NULL);
	if (buf == NULL)
		return;
	CHECK(memcmp(buf, TG_CAP_MAGIC, TG_CAP_MAGIC_LEN) == 0);
	CHECK_INT(tg_cap_get_u32(buf + 8), TG_CAP_VERSION);
	CHECK_INT(tg_cap_get_u32(buf + 12), TG_CAP_F_TIME | TG_CAP_F_MEMORY | TG_CAP_F_STACK);
	CHECK((int64_t)tg_cap_get_u64(buf + 16) == 1700000000123456LL);
	CHECK_INT(tg_cap_get_u32(buf + 28), 1);
	CHECK_INT(tg_cap_get_u32(buf + 32), 4242);
	n = read_chunks(buf, len, ch, 16);
	/* the definitions go out with the first chunk after them (the thread's) */
	CHECK_INT(n, 5);
	CHECK_INT(ch[0].kind, TG_CAP_CHUNK_CODES);
	CHECK_INT(ch[0].stream, TG_CAP_STREAM_META);
	CHECK_INT(ch[1].kind, TG_CAP_CHUNK_THREAD);
	CHECK_INT(ch[2].kind, TG_CAP_CHUNK_EVENTS);
	CHECK_INT(ch[3].kind, TG_CAP_CHUNK_PROCESS);
	CHECK_INT(ch[4].kind, TG_CAP_CHUNK_END);
	{
		const unsigned char *q = ch[0].payload, *e = q + ch[0].len;
		CHECK_INT(get(&q, e), 1);
		CHECK_INT(*q++, TG_CAP_CODE_PYTHON);
		CHECK_INT(get(&q, e), 27);
		CHECK_INT(get(&q, e), 7);
		CHECK_MEM((const char *)q, 7, "main.py");
		q += 7;
		CHECK_INT(get(&q, e), 7);
		CHECK_MEM((const char *)q, 7, "doStuff");
		q += 7;
		CHECK_INT(get(&q, e), 2);
		CHECK_INT(*q++, TG_CAP_CODE_C);
		CHECK_INT(get(&q, e), 0);
		CHECK_INT(get(&q, e), 4);
		CHECK_MEM((const char *)q, 4, "time");
		q += 4;
		CHECK_INT(get(&q, e), 5);
		CHECK_MEM((const char *)q, 5, "sleep");
		q += 5;
		CHECK(q == e);
	}
	{
		const unsigned char *q = ch[1].payload, *e = q + ch[1].len;
		CHECK_INT(ch[1].stream, TG_CAP_STREAM_FIRST);
		CHECK_INT(get(&q, e), 6685);
		CHECK_INT(get(&q, e), 140023);
		CHECK_INT(get(&q, e), 10);
		CHECK_MEM((const char *)q, 10, "MainThread");
		q += 10;
		CHECK_INT(get(&q, e), 10);
		q += 10;
		CHECK(q == e);
	}
	{
		const unsigned char *q = ch[2].payload, *e = q + ch[2].len;
		CHECK_INT(get(&q, e), 1 << 1);          /* CALL 1 */
		CHECK_INT(get(&q, e), 5);
		CHECK_INT(get(&q, e), 2 << 1);          /* CALL 2 (C) */
		CHECK_INT(get(&q, e), 0);
		CHECK_INT(tg_cap_unzz(get(&q, e)), 30);
		CHECK_INT(get(&q, e), 1);               /* RETURN, line offset 0 */
		CHECK_INT(get(&q, e), 1);
		CHECK_INT(tg_cap_unzz(get(&q, e)), -3);
		CHECK_INT(get(&q, e), 0);               /* SPECIAL */
		CHECK_INT(*q++, TG_CAP_EV_DROPPED);
		CHECK_INT(get(&q, e), 2);
		CHECK_INT(get(&q, e), tg_cap_zz(12) << 1 | 1);
		CHECK_INT(get(&q, e), 200);
		CHECK_INT(tg_cap_unzz(get(&q, e)), 167936);
		CHECK(q == e);
	}
	{
		const unsigned char *q = ch[3].payload, *e = q + ch[3].len;
		CHECK_INT(get(&q, e), 7);
		CHECK_INT(tg_cap_unzz(get(&q, e)), 31457280);
		CHECK(q == e);
	}
	{
		const unsigned char *q = ch[4].payload + 8, *e = ch[4].payload + ch[4].len;
		CHECK((int64_t)tg_cap_get_u64(ch[4].payload) == 1700000001000000LL);
		CHECK_INT(get(&q, e), 1);
		CHECK_INT(get(&q, e), TG_CAP_STREAM_FIRST);
		CHECK_INT(get(&q, e), 2);
		CHECK_INT(get(&q, e), 2);
		CHECK_INT(get(&q, e), 2);
		CHECK(q == e);
	}
	free(buf);
	tg_cap_close(&cap);
	tg_cap_destroy(&cap);
}

/* Definitions past TG_CAP_DEFS_MAX leave in chunks of their own, each below it. */
static void test_many_definitions(void)
{
	char path[256], file[200];
	struct tg_cap cap;
	unsigned char *buf;
	size_t len;
	struct chunk ch[64];
	int n, i, codes = 0, ids = 0;

	snprintf(path, sizeof(path), "%s/defs.tg", dir);
	tg_cap_init(&cap);
	CHECK_INT(tg_cap_open(&cap, path, 0, 0, 0, 0, 1, 0), 0);
	memset(file, 'f', sizeof(file));
	for (i = 0; i < 2000; i++) {
		uint32_t id = tg_cap_new_code_id(&cap);
		CHECK_INT(tg_cap_define(&cap, id, TG_CAP_CODE_PYTHON, (uint32_t)i, file,
					sizeof(file), "g", 1), 0);
	}
	CHECK_INT(tg_cap_finish(&cap, 0), 0);
	buf = slurp(path, &len);
	CHECK(buf != NULL);
	if (buf == NULL)
		return;
	n = read_chunks(buf, len, ch, 64);
	for (i = 0; i < n; i++) {
		if (ch[i].kind != TG_CAP_CHUNK_CODES)
			continue;
		codes++;
		CHECK(ch[i].len <= TG_CAP_DEFS_MAX);
		{
			const unsigned char *q = ch[i].payload, *e = q + ch[i].len;
			while (q < e) {
				uint64_t id = get(&q, e), fl;
				CHECK_INT(id, ids + 1);
				ids++;
				q++;
				get(&q, e);
				fl = get(&q, e);
				q += fl;
				fl = get(&q, e);
				q += fl;
			}
			CHECK(q == e);
		}
	}
	CHECK(codes >= 2000 * 210 / TG_CAP_DEFS_MAX);
	CHECK_INT(ids, 2000);
	CHECK_INT(ch[n - 1].kind, TG_CAP_CHUNK_END);
	free(buf);
	tg_cap_destroy(&cap);
}

/* The program closed our descriptor and opened a file that got its number: the
 * capture stops, and the program's file is never written or closed by us. */
static void test_reused_descriptor(void)
{
	char path[256], other[256];
	struct tg_cap cap;
	int fd;
	struct stat st;

	snprintf(path, sizeof(path), "%s/reused.tg", dir);
	snprintf(other, sizeof(other), "%s/program.txt", dir);
	tg_cap_init(&cap);
	CHECK_INT(tg_cap_open(&cap, path, 0, 0, 0, 0, 1, 0), 0);
	close(cap.fd);
	fd = open(other, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK_INT(fd, cap.fd);  /* the lowest number: ours */
	CHECK_INT(tg_cap_chunk_out(&cap, TG_CAP_CHUNK_EVENTS, 2, "x", 1), EBADF);
	CHECK(!tg_cap_usable(&cap));
	CHECK_INT(tg_cap_finish(&cap, 0), EBADF);
	CHECK(fstat(fd, &st) == 0);  /* still open: not closed by finish */
	CHECK_INT(st.st_size, 0);
	close(fd);
	tg_cap_destroy(&cap);
}

#define WRITERS 4
#define CHUNKS 500

struct writer_arg {
	struct tg_cap *cap;
	uint32_t stream;
};

static void *writer_main(void *p)
{
	struct writer_arg *a = p;
	unsigned char payload[3000];
	int i;
	for (i = 0; i < CHUNKS; i++) {
		size_t n = 1 + (size_t)(i * 37 % (int)sizeof(payload));
		memset(payload, (int)a->stream, n);
		if (tg_cap_chunk_out(a->cap, TG_CAP_CHUNK_EVENTS, a->stream, payload, n) != 0)
			break;
	}
	return NULL;
}

static void test_concurrent_chunks(void)
{
	char path[256];
	struct tg_cap cap;
	pthread_t th[WRITERS];
	struct writer_arg args[WRITERS];
	unsigned char *buf;
	size_t len, pos;
	int i, per[WRITERS] = {0}, whole = 1;

	snprintf(path, sizeof(path), "%s/threads.tg", dir);
	tg_cap_init(&cap);
	CHECK_INT(tg_cap_open(&cap, path, 0, 0, 0, 0, 1, 0), 0);
	for (i = 0; i < WRITERS; i++) {
		args[i].cap = &cap;
		args[i].stream = TG_CAP_STREAM_FIRST + (uint32_t)i;
		pthread_create(&th[i], NULL, writer_main, &args[i]);
	}
	for (i = 0; i < WRITERS; i++)
		pthread_join(th[i], NULL);
	tg_cap_close(&cap);
	buf = slurp(path, &len);
	CHECK(buf != NULL);
	if (buf == NULL)
		return;
	for (pos = TG_CAP_HEADER_SIZE; pos + TG_CAP_CHUNK_HEADER_SIZE <= len;) {
		uint32_t stream = tg_cap_get_u32(buf + pos + 4), n = tg_cap_get_u32(buf + pos + 8);
		uint32_t k;
		if (stream < TG_CAP_STREAM_FIRST || stream >= TG_CAP_STREAM_FIRST + WRITERS)
			break;
		/* every byte of a chunk is its own stream's: none interleaved */
		for (k = 0; k < n; k++)
			if (buf[pos + TG_CAP_CHUNK_HEADER_SIZE + k] != stream)
				whole = 0;
		per[stream - TG_CAP_STREAM_FIRST]++;
		pos += TG_CAP_CHUNK_HEADER_SIZE + n;
	}
	CHECK(pos == len);
	CHECK(whole);
	for (i = 0; i < WRITERS; i++)
		CHECK_INT(per[i], CHUNKS);
	free(buf);
	tg_cap_destroy(&cap);
}

/* A blocked sink: the capture's descriptor is a pipe that is full and that
 * nobody reads yet, so a writer blocks inside write(2) holding the capture's
 * lock.  Definitions still go on meanwhile (they take defs_lock alone: the
 * thread that meets a new function holds the GIL), and so do a thread's start
 * and end (tg_cap_thread, tg_cap_deposit); every one of them is written, in
 * order and before the END, once the pipe is read: the thread defined after
 * the codes, its counters in the END. */
#define BLOCKED_DEFS 1000

struct blocked_arg {
	struct tg_cap *cap;
	int ret;
	_Atomic int done;
};

static void *blocked_writer(void *p)
{
	struct blocked_arg *a = p;
	a->ret = tg_cap_chunk_out(a->cap, TG_CAP_CHUNK_EVENTS, TG_CAP_STREAM_FIRST, "ev", 2);
	atomic_store(&a->done, 1);
	return NULL;
}

struct drain_arg {
	int fd;
	unsigned char *buf;
	size_t len, cap;
};

static void *drainer(void *p)
{
	struct drain_arg *d = p;
	for (;;) {
		ssize_t r;
		if (d->len + 65536 > d->cap) {
			unsigned char *nb = realloc(d->buf, d->cap = 2 * d->cap + 65536);
			if (nb == NULL)
				break;
			d->buf = nb;
		}
		r = read(d->fd, d->buf + d->len, d->cap - d->len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		d->len += (size_t)r;
	}
	return NULL;
}

static void test_blocked_sink(void)
{
	char path[256];
	struct tg_cap cap;
	struct blocked_arg wa;
	struct drain_arg da;
	pthread_t wt, dt;
	struct stat st;
	struct chunk ch[64];
	char block[4096];
	size_t filled = 0;
	int pfd[2], n, i, ids = 0, events_at = -1, id1_at = -1, end_at = -1, in_order = 1;
	int thread_at = -1, stat_found = 0;
	const uint32_t late = TG_CAP_STREAM_FIRST + 1;  /* the thread started while blocked */

	snprintf(path, sizeof(path), "%s/blocked.tg", dir);
	tg_cap_init(&cap);
	CHECK_INT(tg_cap_open(&cap, path, 0, 0, 0, 0, 1, 0), 0);
	CHECK_INT(pipe(pfd), 0);
	/* fill the pipe, then make its writes blocking again */
	memset(block, 'x', sizeof(block));
	CHECK_INT(fcntl(pfd[1], F_SETFL, O_NONBLOCK), 0);
	for (;;) {
		ssize_t w = write(pfd[1], block, sizeof(block));
		if (w <= 0)
			break;
		filled += (size_t)w;
	}
	CHECK_INT(fcntl(pfd[1], F_SETFL, 0), 0);
	/* the pipe becomes the capture's descriptor, as if the path were a FIFO */
	CHECK_INT(dup2(pfd[1], cap.fd), cap.fd);
	close(pfd[1]);
	CHECK_INT(fstat(cap.fd, &st), 0);
	cap.dev = st.st_dev;
	cap.ino = st.st_ino;

	CHECK_INT(tg_cap_define(&cap, tg_cap_new_code_id(&cap), TG_CAP_CODE_PYTHON, 1,
				"a.py", 4, "f", 1), 0);
	wa.cap = &cap;
	wa.ret = -1;
	atomic_store(&wa.done, 0);
	CHECK_INT(pthread_create(&wt, NULL, blocked_writer, &wa), 0);
	/* wait (an event, not a time) until the writer holds the capture's lock:
	 * from then on it stays inside write(2) until the pipe is read */
	while (pthread_mutex_trylock(&cap.lock) == 0) {
		pthread_mutex_unlock(&cap.lock);
		if (atomic_load(&wa.done))
			break;
		sched_yield();
	}
	CHECK(!atomic_load(&wa.done));
	/* the progress under test: without defs_lock this loop never ends (the
	 * alarm set in main turns that hang into a failure) */
	for (i = 0; i < BLOCKED_DEFS; i++) {
		char func[32];
		int fl = snprintf(func, sizeof(func), "g%d", i);
		CHECK_INT(tg_cap_define(&cap, tg_cap_new_code_id(&cap), TG_CAP_CODE_PYTHON,
					(uint32_t)i, "b.py", 4, func, (size_t)fl), 0);
	}
	/* a thread starts and ends: its definition, then its end */
	CHECK_INT(tg_cap_thread(&cap, late, 77, 88, "Late", 4, "Late", 4), 0);
	CHECK_INT(tg_cap_deposit(&cap, late, 1, 1, 5), 0);
	CHECK(!atomic_load(&wa.done));  /* the sink is still blocked */

	da.fd = pfd[0];
	da.buf = NULL;
	da.len = da.cap = 0;
	CHECK_INT(pthread_create(&dt, NULL, drainer, &da), 0);
	pthread_join(wt, NULL);
	CHECK_INT(wa.ret, 0);
	CHECK_INT(tg_cap_finish(&cap, 0), 0);  /* closes the pipe: the drainer ends */
	pthread_join(dt, NULL);
	close(pfd[0]);
	CHECK(da.len > filled);
	if (da.len <= filled) {
		free(da.buf);
		tg_cap_destroy(&cap);
		return;
	}
	/* the chunks after the filler (read_chunks skips a header's room) */
	n = read_chunks(da.buf + filled - TG_CAP_HEADER_SIZE, da.len - filled + TG_CAP_HEADER_SIZE,
			ch, 64);
	for (i = 0; i < n; i++) {
		if (ch[i].kind == TG_CAP_CHUNK_EVENTS)
			events_at = i;
		if (ch[i].kind == TG_CAP_CHUNK_THREAD && ch[i].stream == late)
			thread_at = i;
		else if (ch[i].kind == TG_CAP_CHUNK_END) {
			const unsigned char *q = ch[i].payload + 8, *e = ch[i].payload + ch[i].len;
			uint64_t k = get(&q, e);
			end_at = i;
			while (k-- > 0 && q < e) {
				uint64_t st = get(&q, e), calls = get(&q, e);
				uint64_t rets = get(&q, e), drops = get(&q, e);
				if (st == late && calls == 1 && rets == 1 && drops == 5)
					stat_found = 1;
			}
		} else if (ch[i].kind == TG_CAP_CHUNK_CODES) {
			const unsigned char *q = ch[i].payload, *e = q + ch[i].len;
			while (q < e) {
				uint64_t id = get(&q, e), fl;
				if (id != (uint64_t)ids + 1)
					in_order = 0;
				if (id == 1)
					id1_at = i;
				ids++;
				q++;
				get(&q, e);
				fl = get(&q, e);
				q += fl;
				fl = get(&q, e);
				q += fl;
			}
		}
	}
	CHECK(in_order);
	CHECK_INT(ids, BLOCKED_DEFS + 1);
	CHECK(id1_at >= 0 && id1_at < events_at);  /* defined before the records */
	CHECK_INT(end_at, n - 1);
	/* the late thread: defined after the codes, its counters in the END */
	CHECK(thread_at > id1_at && thread_at >= 0 && thread_at < end_at);
	CHECK(stat_found);
	free(da.buf);
	tg_cap_destroy(&cap);
}

#ifdef TG_HAVE_ZSTD
/* compress: events chunks become zstd frames of exactly the records given;
 * definitions and chunks that would not shrink stay as they are. */
static void test_compressed_chunks(void)
{
	char path[256];
	struct tg_cap cap;
	unsigned char ev[4096], *p = ev, noise[64], out[8192];
	unsigned char *buf;
	size_t len;
	struct chunk ch[16];
	int n, i;
	uint32_t id;

	snprintf(path, sizeof(path), "%s/zstd.tg", dir);
	tg_cap_init(&cap);
	CHECK(tg_cap_can_compress());
	CHECK_INT(tg_cap_open(&cap, path, TG_CAP_F_TIME | TG_CAP_F_MEMORY, 0, 0, 0, 1, 1), 0);
	id = tg_cap_new_code_id(&cap);
	CHECK_INT(tg_cap_define(&cap, id, TG_CAP_CODE_PYTHON, 3, "a.py", 4, "f", 1), 0);
	for (i = 0; i < 300; i++) {
		p = tg_cap_enc_call(p, id, 1, 1, 0, 0);
		p = tg_cap_enc_return(p, 2, 1, 0, 1, 64);
	}
	CHECK_INT(tg_cap_chunk_out(&cap, TG_CAP_CHUNK_EVENTS, 2, ev, (size_t)(p - ev)), 0);
	for (i = 0; i < (int)sizeof(noise); i++)
		noise[i] = (unsigned char)(i * 97 + 13);
	CHECK_INT(tg_cap_chunk_out(&cap, TG_CAP_CHUNK_EVENTS, 2, noise, 5), 0);
	CHECK_INT(tg_cap_finish(&cap, 0), 0);
	buf = slurp(path, &len);
	CHECK(buf != NULL);
	if (buf == NULL)
		return;
	n = read_chunks(buf, len, ch, 16);
	CHECK_INT(n, 4);
	CHECK_INT(ch[0].kind, TG_CAP_CHUNK_CODES);
	CHECK_INT(ch[0].flags, 0);
	CHECK_INT(ch[1].kind, TG_CAP_CHUNK_EVENTS);
	CHECK_INT(ch[1].flags, TG_CAP_CHUNK_ZSTD);
	CHECK(ch[1].len < (uint32_t)(p - ev) / 4);
	{
		size_t got = ZSTD_decompress(out, sizeof(out), ch[1].payload, ch[1].len);
		CHECK(!ZSTD_isError(got));
		CHECK(got == (size_t)(p - ev) && memcmp(out, ev, got) == 0);
	}
	CHECK_INT(ch[2].flags, 0);  /* 5 bytes: a frame would be larger */
	CHECK_INT(ch[2].len, 5);
	CHECK(memcmp(ch[2].payload, noise, 5) == 0);
	CHECK_INT(ch[3].kind, TG_CAP_CHUNK_END);
	CHECK_INT(ch[3].flags, 0);
	free(buf);
	tg_cap_destroy(&cap);
}
#endif

int main(void)
{
	char cmd[300];
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	test_varints();
	test_idtab();
	test_round_trip();
	test_many_definitions();
	test_reused_descriptor();
	test_concurrent_chunks();
	/* a failsafe, not a timing check: a deadlock in test_blocked_sink ends the
	 * test (SIGALRM) instead of hanging the run */
	alarm(300);
	test_blocked_sink();
	alarm(0);
#ifdef TG_HAVE_ZSTD
	test_compressed_chunks();
#else
	printf("zstd compression not built (no zstd.h): its test skipped\n");
#endif
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	TG_TEST_DONE();
}
