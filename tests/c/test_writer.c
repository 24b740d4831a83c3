/*
 * Unit tests of the recorder's output streams (src/recorder/writer.c), linked
 * alone: no Python, no other recorder file.
 *
 * Real descriptors throughout (temporary files, pipes, /dev/full): records
 * appended with reserve/commit come out byte for byte; a full buffer is handed
 * off and the kick callback called; write errors (a file size limit, a sink on
 * /dev/full, a descriptor the program closed and reused) stop the stream and are
 * reported in err, never crash; a forked child drops what it inherited; and a
 * flusher thread writing while a producer thread appends yields exactly the
 * producer's lines, in order.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "writer.h"
#include "tg_test.h"

static char tmpdir[] = "/tmp/tg_test_writer.XXXXXX";
static int path_counter;

/* A fresh path in the test's directory (the file does not exist yet). */
static const char *fresh_path(void)
{
	static char path[256];
	snprintf(path, sizeof(path), "%s/f%d", tmpdir, ++path_counter);
	return path;
}

/* The whole content of PATH (malloc'ed, NUL-terminated); *LEN its size. */
static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n = 0, got;
	*len = 0;
	if (f == NULL)
		return NULL;
	do {
		if (cap - n < 65536) {
			cap = cap ? cap * 2 : 65536;
			buf = realloc(buf, cap + 1);
		}
		got = fread(buf + n, 1, cap - n, f);
		n += got;
	} while (got > 0);
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* Append the line "<prefix><i>\n" through reserve/commit; 0 if W refused it. */
static int put_line(struct tg_writer *w, const char *prefix, long i)
{
	char line[64];
	int n = snprintf(line, sizeof(line), "%s%ld\n", prefix, i);
	char *p = tg_writer_reserve(w, (size_t)n);
	if (p == NULL)
		return 0;
	memcpy(p, line, (size_t)n);
	tg_writer_commit(w, (size_t)n);
	return 1;
}

/* The expected content of lines FROM..TO-1 of put_line. */
static char *expected_lines(const char *prefix, long from, long to, size_t *len)
{
	size_t cap = 64 * (size_t)(to - from) + 1, n = 0;
	char *buf = malloc(cap);
	for (long i = from; i < to; i++)
		n += (size_t)snprintf(buf + n, cap - n, "%s%ld\n", prefix, i);
	*len = n;
	return buf;
}

static int check_file_lines(const char *path, const char *prefix, long from, long to)
{
	size_t got_len, want_len;
	char *got = slurp(path, &got_len), *want = expected_lines(prefix, from, to, &want_len);
	int ok = got != NULL && got_len == want_len && memcmp(got, want, want_len) == 0;
	if (!ok)
		fprintf(stderr, "%s: %zu bytes, expected %zu\n", path, got_len, want_len);
	free(got);
	free(want);
	return ok;
}

/* --- reserve, commit, flush ------------------------------------------------ */

static void test_basic(void)
{
	struct tg_writer w;
	const char *path = fresh_path();
	char saved[256];
	size_t len;
	char *got;

	tg_writer_init(&w);
	CHECK(!tg_writer_usable(&w));
	CHECK(tg_writer_reserve(&w, 10) == NULL);  /* closed: refuses, no crash */
	tg_writer_release(&w);                     /* a closed writer releases */
	CHECK_INT(tg_writer_open_path(&w, path), 0);
	CHECK(tg_writer_usable(&w));
	snprintf(saved, sizeof(saved), "%s", path);
	/* Exclusive create: a second writer on the same path fails with EEXIST. */
	{
		struct tg_writer w2;
		tg_writer_init(&w2);
		CHECK_INT(tg_writer_open_path(&w2, saved), -EEXIST);
		CHECK(!tg_writer_usable(&w2));
		CHECK_INT(atomic_load(&w2.err), EEXIST);
		tg_writer_release(&w2);
		tg_writer_destroy(&w2);
	}
	CHECK(put_line(&w, "a", 1));
	CHECK(put_line(&w, "b", 2));
	CHECK(w.first_ns > 0);  /* the first line of an empty buffer stamps its age */
	/* Nothing written before a flush: one write(2) per flush. */
	got = slurp(saved, &len);
	CHECK_INT(len, 0);
	free(got);
	tg_writer_flush(&w);
	CHECK_INT(atomic_load(&w.len), 0);
	got = slurp(saved, &len);
	CHECK_MEM(got, len, "a1\nb2\n");
	free(got);
	/* A reservation not committed is not written. */
	CHECK(tg_writer_reserve(&w, 5) != NULL);
	CHECK(put_line(&w, "c", 3));
	tg_writer_flush_nogil(&w);  /* the flusher's flush: writes, does not rewind */
	CHECK_INT(atomic_load(&w.len), 3);
	CHECK_INT(w.flushed, 3);
	CHECK(put_line(&w, "d", 4));
	tg_writer_release(&w);  /* flushes the rest */
	tg_writer_release(&w);  /* twice is fine */
	got = slurp(saved, &len);
	CHECK_MEM(got, len, "a1\nb2\nc3\nd4\n");
	free(got);
	CHECK_INT(atomic_load(&w.err), 0);
	tg_writer_destroy(&w);
}

/* One record larger than the buffer: the buffer grows, the bytes are exact. */
static void test_huge_record(void)
{
	struct tg_writer w;
	const char *p = fresh_path();
	char path[256];
	size_t n = TG_WRITER_BUFSIZE * 3 + 17, len;
	char *rec, *got, *want;

	snprintf(path, sizeof(path), "%s", p);
	tg_writer_init(&w);
	CHECK_INT(tg_writer_open_path(&w, path), 0);
	CHECK(put_line(&w, "x", 0));
	rec = tg_writer_reserve(&w, n);
	CHECK(rec != NULL);
	if (rec != NULL) {
		memset(rec, 'h', n - 1);
		rec[n - 1] = '\n';
		tg_writer_commit(&w, n);
	}
	CHECK(put_line(&w, "y", 1));
	tg_writer_release(&w);
	want = malloc(n + 16);
	memcpy(want, "x0\n", 3);
	memset(want + 3, 'h', n - 1);
	want[3 + n - 1] = '\n';
	memcpy(want + 3 + n, "y1\n", 3);
	got = slurp(path, &len);
	CHECK_INT(len, n + 6);
	CHECK(got != NULL && len == n + 6 && memcmp(got, want, n + 6) == 0);
	free(got);
	free(want);
	tg_writer_destroy(&w);
}

/* --- a full buffer: handoff and kick ------------------------------------------ */

static int kicks;
static void count_kick(void *ctx)
{
	CHECK(ctx == &kicks);
	kicks++;
}

/* One record larger than the buffer, with a flusher: the producer writes
 * nothing itself (it used to flush and grow its buffer, waiting for any
 * write in progress, with the GIL held): the buffer before it is handed off,
 * the record goes in a buffer of its own, handed off in turn at the next
 * record, weighed by its size against TG_WRITER_QUEUED_MAX; the flusher
 * writes both in order; the writer goes on in a 64 KiB buffer. */
static void test_huge_record_handoff(void)
{
	struct tg_writer w;
	const char *p = fresh_path();
	char path[256];
	size_t n = TG_WRITER_BUFSIZE * 3 + 17, len;
	char *rec, *got, *want;
	struct stat st;

	snprintf(path, sizeof(path), "%s", p);
	tg_writer_init(&w);
	tg_writer_set_kick(&w, count_kick, &kicks);
	CHECK_INT(tg_writer_open_path(&w, path), 0);
	kicks = 0;
	CHECK(put_line(&w, "x", 0));
	rec = tg_writer_reserve(&w, n);
	CHECK(rec != NULL);
	if (rec != NULL) {
		memset(rec, 'h', n - 1);
		rec[n - 1] = '\n';
		tg_writer_commit(&w, n);
	}
	CHECK_INT(kicks, 1);
	CHECK_INT(atomic_load(&w.nfull), 1);  /* "x0" */
	CHECK_INT(w.cap, n);
	CHECK(put_line(&w, "y", 1));
	CHECK_INT(kicks, 2);
	CHECK_INT(atomic_load(&w.nfull), 2);  /* and the long record's own */
	CHECK_INT(tg_writer_queued(), 1 + 4);  /* 64 KiB, then 3 x 64 KiB + 17 */
	CHECK_INT(w.cap, TG_WRITER_BUFSIZE);
	CHECK(stat(path, &st) == 0 && st.st_size == 0);  /* nothing written by it */
	tg_writer_flush_full_nogil(&w);  /* the flusher */
	CHECK_INT(tg_writer_queued(), 0);
	CHECK(w.spare != NULL);  /* the 64 KiB one; the long one freed */
	CHECK(stat(path, &st) == 0 && (size_t)st.st_size == n + 3);
	tg_writer_release(&w);
	want = malloc(n + 16);
	memcpy(want, "x0\n", 3);
	memset(want + 3, 'h', n - 1);
	want[3 + n - 1] = '\n';
	memcpy(want + 3 + n, "y1\n", 3);
	got = slurp(path, &len);
	CHECK_INT(len, n + 6);
	CHECK(got != NULL && len == n + 6 && memcmp(got, want, n + 6) == 0);
	free(got);
	free(want);
	CHECK_INT(atomic_load(&w.err), 0);
	tg_writer_destroy(&w);
}

static void test_full_kick(void)
{
	struct tg_writer w;
	const char *p = fresh_path();
	char path[256];
	long i, n = 0;

	snprintf(path, sizeof(path), "%s", p);
	tg_writer_init(&w);
	tg_writer_set_kick(&w, count_kick, &kicks);
	CHECK_INT(tg_writer_open_path(&w, path), 0);
	kicks = 0;
	/* Fill the buffer exactly up to the first line that does not fit. */
	while (kicks == 0 && n < 100000) {  /* bounded: a writer that never kicks fails */
		CHECK(put_line(&w, "line ", n));
		n++;
	}
	CHECK_INT(kicks, 1);
	CHECK_INT(atomic_load(&w.nfull), 1);  /* handed to the flusher, not written */
	CHECK_INT(atomic_load(&w.len), (long)strlen("line ") + 1 + snprintf(NULL, 0, "%ld", n - 1));
	{
		struct stat st;
		CHECK(stat(path, &st) == 0 && st.st_size == 0);
	}
	/* The flusher, woken, writes the handed-off buffer only. */
	tg_writer_flush_full_nogil(&w);
	CHECK_INT(atomic_load(&w.nfull), 0);
	CHECK(w.spare != NULL);  /* kept for the next handoff */
	CHECK(check_file_lines(path, "line ", 0, n - 1));
	/* Full buffers while the flusher writes none: each handed off (a kick
	 * each), up to TG_WRITER_QUEUED_MAX in all; then the producer neither writes nor
	 * waits: its records are refused (dropped, counted by its caller). */
	CHECK_INT(tg_writer_queued(), 0);  /* none left by other writers */
	kicks = 0;
	while (tg_writer_queued() < TG_WRITER_QUEUED_MAX && n < 100000000) {
		CHECK(put_line(&w, "line ", n));
		n++;
	}
	CHECK_INT(kicks, TG_WRITER_QUEUED_MAX);
	{
		struct stat st;
		CHECK(stat(path, &st) == 0);
		i = (long)st.st_size;
	}
	while (put_line(&w, "line ", n) && n < 100000000)
		n++;  /* the current buffer fills */
	CHECK(!put_line(&w, "line ", n));  /* refused, and again */
	CHECK_INT(atomic_load(&w.nfull), TG_WRITER_QUEUED_MAX);
	CHECK_INT(atomic_load(&w.err), 0);  /* the stream goes on */
	{
		struct stat st;
		CHECK(stat(path, &st) == 0 && st.st_size == i);  /* nothing written */
	}
	tg_writer_flush(&w);  /* all, in order */
	CHECK(check_file_lines(path, "line ", 0, n));
	tg_writer_release(&w);
	CHECK_INT(atomic_load(&w.err), 0);
	tg_writer_destroy(&w);
}

/* Without a kick the producer writes its full buffer itself. */
static void test_full_no_kick(void)
{
	struct tg_writer w;
	const char *p = fresh_path();
	char path[256];
	long n;

	snprintf(path, sizeof(path), "%s", p);
	tg_writer_init(&w);
	CHECK_INT(tg_writer_open_path(&w, path), 0);
	for (n = 0; n < 50000; n++)
		CHECK(put_line(&w, "n", n));
	CHECK_INT(atomic_load(&w.nfull), 0);
	CHECK(w.spare == NULL);
	{
		struct stat st;  /* more than one buffer has left already */
		CHECK(stat(path, &st) == 0 && st.st_size >= TG_WRITER_BUFSIZE);
	}
	tg_writer_release(&w);
	CHECK(check_file_lines(path, "n", 0, n));
	tg_writer_destroy(&w);
}

/* --- write errors ----------------------------------------------------------------- */

/* A file size limit: write(2) fails with EFBIG (SIGXFSZ ignored). */
static void test_efbig(void)
{
	struct tg_writer w;
	struct rlimit old, lim;
	const char *p = fresh_path();
	char path[256];
	long n;
	int refused = 0;

	snprintf(path, sizeof(path), "%s", p);
	getrlimit(RLIMIT_FSIZE, &old);
	lim = old;
	lim.rlim_cur = 1000;
	signal(SIGXFSZ, SIG_IGN);
	tg_writer_init(&w);
	CHECK_INT(tg_writer_open_path(&w, path), 0);
	CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
	for (n = 0; n < 30000; n++)
		if (!put_line(&w, "e", n))
			refused++;
	tg_writer_flush(&w);
	CHECK_INT(atomic_load(&w.err), EFBIG);
	CHECK(refused > 0);  /* stopped: later records are refused */
	CHECK(!tg_writer_usable(&w));
	CHECK(tg_writer_reserve(&w, 4) == NULL);
	tg_writer_flush(&w);
	tg_writer_flush_nogil(&w);
	tg_writer_release(&w);
	setrlimit(RLIMIT_FSIZE, &old);
	signal(SIGXFSZ, SIG_DFL);
	{
		struct stat st;  /* what fit under the limit, no more */
		CHECK(stat(path, &st) == 0 && st.st_size <= 1000);
	}
	tg_writer_destroy(&w);
}

/* The program closed our descriptor and opened its own file under the number:
 * the writer stops (EBADF), never writes or closes the program's file. */
static void test_fd_reused(void)
{
	struct tg_writer w;
	const char *p = fresh_path();
	char path[256], other[256];
	int fd, ofd;

	snprintf(path, sizeof(path), "%s", p);
	snprintf(other, sizeof(other), "%s", fresh_path());
	tg_writer_init(&w);
	CHECK_INT(tg_writer_open_path(&w, path), 0);
	CHECK(put_line(&w, "r", 1));
	tg_writer_flush(&w);
	fd = w.fd;
	close(fd);
	ofd = open(other, O_WRONLY | O_CREAT | O_EXCL, 0644);
	CHECK_INT(ofd, fd);  /* lowest free number: ours */
	CHECK(put_line(&w, "r", 2));
	tg_writer_flush(&w);
	CHECK_INT(atomic_load(&w.err), EBADF);
	CHECK_INT(w.fd, -1);
	tg_writer_release(&w);
	/* The program's descriptor is still open and its file untouched. */
	CHECK(write(ofd, "mine\n", 5) == 5);
	CHECK(close(ofd) == 0);
	CHECK(check_file_lines(path, "r", 1, 2));
	{
		size_t len;
		char *got = slurp(other, &len);
		CHECK_MEM(got, len, "mine\n");
		free(got);
	}
	/* Closed and not reused: the writer stops too. */
	tg_writer_init(&w);
	CHECK_INT(tg_writer_open_path(&w, fresh_path()), 0);
	close(w.fd);
	CHECK(put_line(&w, "z", 0));
	tg_writer_flush(&w);
	CHECK_INT(atomic_load(&w.err), EBADF);
	tg_writer_release(&w);
	tg_writer_destroy(&w);
}

/* --- sinks ---------------------------------------------------------------------- */

/* A sink writing to a real descriptor; counts its calls. */
struct fd_sink {
	int fd;
	int writes, closes, closed_dropped;
	uint64_t tag;
	struct tg_writer *reenter;  /* owner-only: append a line from inside write */
	long reenter_next;
};

static int fd_sink_write(void *ctx, uint64_t tag, const char *buf, size_t len)
{
	struct fd_sink *s = ctx;
	s->writes++;
	s->tag = tag;
	while (len > 0) {
		ssize_t n = write(s->fd, buf, len);
		if (n < 0)
			return errno;
		buf += n;
		len -= (size_t)n;
	}
	if (s->reenter != NULL)  /* code run by the sink records more */
		put_line(s->reenter, "in-sink ", s->reenter_next++);
	return 0;
}

static int fd_sink_close(void *ctx, int dropped)
{
	struct fd_sink *s = ctx;
	s->closes++;
	s->closed_dropped = dropped;
	return 0;
}

static const struct tg_writer_sink shared_sink = { fd_sink_write, fd_sink_close, 0 };
static const struct tg_writer_sink owner_sink = { fd_sink_write, fd_sink_close, 1 };

static void test_sink(void)
{
	struct tg_writer w;
	struct fd_sink s = { 0 };
	int pfd[2];
	char buf[256];
	ssize_t n;

	CHECK(pipe(pfd) == 0);
	s.fd = pfd[1];
	tg_writer_init(&w);
	CHECK_INT(tg_writer_open_sink(&w, &shared_sink, &s, 0x500000007ULL, "pipe"), 0);
	CHECK(w.pyfile == NULL);  /* not owner-only: the flusher writes it */
	CHECK(put_line(&w, "s", 1));
	CHECK(put_line(&w, "s", 2));
	tg_writer_flush_nogil(&w);
	CHECK_INT(s.writes, 1);
	CHECK(s.tag == 0x500000007ULL);
	n = read(pfd[0], buf, sizeof(buf));
	CHECK_MEM(buf, n > 0 ? (size_t)n : 0, "s1\ns2\n");
	tg_writer_release(&w);
	CHECK_INT(s.closes, 1);
	CHECK_INT(s.closed_dropped, 0);
	tg_writer_release(&w);
	CHECK_INT(s.closes, 1);  /* closed once */
	tg_writer_destroy(&w);
	close(pfd[0]);
	close(pfd[1]);

	/* A sink on /dev/full: ENOSPC stops the stream. */
	memset(&s, 0, sizeof(s));
	s.fd = open("/dev/full", O_WRONLY);
	CHECK(s.fd >= 0);
	tg_writer_init(&w);
	CHECK_INT(tg_writer_open_sink(&w, &shared_sink, &s, 0, "/dev/full"), 0);
	CHECK(put_line(&w, "f", 1));
	tg_writer_flush(&w);
	CHECK_INT(atomic_load(&w.err), ENOSPC);
	CHECK(!tg_writer_usable(&w));
	CHECK(!put_line(&w, "f", 2));
	tg_writer_release(&w);
	CHECK_INT(s.closes, 1);
	CHECK(w.path == NULL);  /* path freed at release */
	tg_writer_destroy(&w);
	close(s.fd);
}

/* A closed writer's 64 KiB buffers are kept for the next writer, up to the
 * pool's bound; a long record's buffer is not. */
static void test_pool(void)
{
	struct tg_writer w, v;
	const char *p;
	char path[256];
	char *buf;
	unsigned before;
	int i;

	tg_writer_init(&w);
	tg_writer_init(&v);
	p = fresh_path();
	snprintf(path, sizeof(path), "%s", p);
	CHECK_INT(tg_writer_open_path(&w, path), 0);
	CHECK(put_line(&w, "p", 0));
	buf = w.buf;
	before = tg_writer_pooled();
	tg_writer_release(&w);
	CHECK_INT(tg_writer_pooled(), before + 1);
	p = fresh_path();
	snprintf(path, sizeof(path), "%s", p);
	CHECK_INT(tg_writer_open_path(&v, path), 0);
	CHECK(v.buf == buf);  /* the same block, from the pool */
	CHECK_INT(tg_writer_pooled(), before);
	tg_writer_release(&v);
	/* bounded: writers closed past it free their buffers */
	for (i = 0; i < 40; i++) {
		p = fresh_path();
		snprintf(path, sizeof(path), "%s", p);
		CHECK_INT(tg_writer_open_path(&w, path), 0);
		CHECK_INT(tg_writer_open_path(&v, path), -EEXIST);  /* a stopped one too */
		tg_writer_release(&v);
		tg_writer_release(&w);
	}
	CHECK_INT(tg_writer_pooled(), 16);
	tg_writer_destroy(&w);
	tg_writer_destroy(&v);
}

/* A thread's stream closed by the flusher after its end
 * (tg_writer_close_nogil): the handed-off buffer, then the rest, written in
 * order, the buffers freed, the error and path kept for the report; the
 * release writes nothing more and closes the sink once. */
static void test_close_nogil(void)
{
	struct tg_writer w;
	const char *p = fresh_path();
	char path[256];
	struct fd_sink s = { 0 };
	long n = 0;

	snprintf(path, sizeof(path), "%s", p);
	s.fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	CHECK(s.fd >= 0);
	tg_writer_init(&w);
	tg_writer_set_kick(&w, count_kick, &kicks);
	CHECK_INT(tg_writer_open_sink(&w, &shared_sink, &s, 0, "close"), 0);
	kicks = 0;
	while (kicks == 0 && n < 100000) {  /* bounded: a writer that never kicks fails */
		CHECK(put_line(&w, "c", n));
		n++;
	}
	CHECK_INT(atomic_load(&w.nfull), 1);  /* handed off, not written yet */
	CHECK(put_line(&w, "c", n));
	n++;
	tg_writer_close_nogil(&w);
	CHECK_INT(s.writes, 2);
	CHECK(check_file_lines(path, "c", 0, n));
	CHECK(w.buf == NULL && w.spare == NULL && w.fullq == NULL);
	CHECK_INT(tg_writer_queued(), 0);
	CHECK(w.path != NULL && strcmp(w.path, "close") == 0);  /* for the report */
	CHECK_INT(s.closes, 0);
	tg_writer_close_nogil(&w);  /* twice: nothing */
	tg_writer_release(&w);
	CHECK_INT(s.writes, 2);
	CHECK_INT(s.closes, 1);
	CHECK(w.path == NULL);
	tg_writer_destroy(&w);
	close(s.fd);

	/* A stopped stream: nothing written, the error kept. */
	memset(&s, 0, sizeof(s));
	s.fd = open("/dev/full", O_WRONLY);
	CHECK(s.fd >= 0);
	tg_writer_init(&w);
	CHECK_INT(tg_writer_open_sink(&w, &shared_sink, &s, 0, "/dev/full"), 0);
	CHECK(put_line(&w, "f", 1));
	tg_writer_close_nogil(&w);
	CHECK_INT(atomic_load(&w.err), ENOSPC);
	CHECK(w.buf == NULL && w.path != NULL);
	tg_writer_release(&w);
	CHECK_INT(s.writes, 1);
	tg_writer_destroy(&w);
	close(s.fd);
}

/* An owner-only sink (a Python stream): the flusher leaves it alone, and records
 * appended while the sink writes are kept, after the ones being written. */
static void test_owner_sink(void)
{
	struct tg_writer w;
	struct fd_sink s = { 0 };
	const char *p = fresh_path();
	char path[256];
	long n;

	snprintf(path, sizeof(path), "%s", p);
	s.fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	CHECK(s.fd >= 0);
	tg_writer_init(&w);
	tg_writer_set_kick(&w, count_kick, &kicks);
	CHECK_INT(tg_writer_open_sink(&w, &owner_sink, &s, 0, "owner"), 0);
	CHECK(w.pyfile == &s);
	CHECK(put_line(&w, "o", 0));
	tg_writer_flush_nogil(&w);
	tg_writer_flush_full_nogil(&w);
	CHECK_INT(s.writes, 0);
	s.reenter = &w;
	tg_writer_flush(&w);
	CHECK_INT(s.writes, 1);
	CHECK_INT(atomic_load(&w.len), strlen("in-sink 0\n"));
	s.reenter = NULL;
	/* A full owner-only buffer is never handed off: written in place. */
	kicks = 0;
	for (n = 1; n < 20000; n++)
		CHECK(put_line(&w, "o", n));
	CHECK_INT(kicks, 0);
	CHECK_INT(atomic_load(&w.nfull), 0);
	tg_writer_release(&w);
	CHECK_INT(s.closes, 1);
	close(s.fd);
	{
		size_t len, want_len, head;
		char *got = slurp(path, &len), *want = expected_lines("o", 1, 20000, &want_len);
		head = strlen("o0\nin-sink 0\n");
		CHECK(got != NULL && len == head + want_len
		      && memcmp(got, "o0\nin-sink 0\n", head) == 0
		      && memcmp(got + head, want, want_len) == 0);
		free(got);
		free(want);
	}
	tg_writer_destroy(&w);
}

/* --- fork --------------------------------------------------------------------- */

/* A forked child drops what it inherited: the parent's bytes are written once,
 * by the parent; the child's release closes a sink with DROPPED. */
static void test_fork_drop(void)
{
	struct tg_writer w, ws;
	struct fd_sink s = { 0 };
	const char *p = fresh_path();
	char path[256];
	pid_t pid;
	int status;

	snprintf(path, sizeof(path), "%s", p);
	tg_writer_init(&w);
	tg_writer_init(&ws);
	CHECK_INT(tg_writer_open_path(&w, path), 0);
	s.fd = open("/dev/null", O_WRONLY);
	CHECK_INT(tg_writer_open_sink(&ws, &shared_sink, &s, 0, "null"), 0);
	CHECK(put_line(&w, "p", 0));
	CHECK(put_line(&ws, "p", 0));
	pid = fork();
	if (pid == 0) {
		int bad = 0;
		tg_writer_drop_in_child(&w);
		tg_writer_drop_in_child(&ws);
		bad |= tg_writer_usable(&w);
		bad |= put_line(&w, "child", 0);
		tg_writer_flush(&w);
		tg_writer_release(&w);
		tg_writer_release(&ws);
		bad |= s.writes != 0 || s.closes != 1 || !s.closed_dropped;
		_exit(bad ? 1 : 0);
	}
	CHECK(pid > 0);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(put_line(&w, "p", 1));
	tg_writer_release(&w);
	tg_writer_release(&ws);
	CHECK(check_file_lines(path, "p", 0, 2));
	CHECK_INT(s.writes, 1);
	CHECK_INT(s.closed_dropped, 0);
	close(s.fd);
	tg_writer_destroy(&w);
	tg_writer_destroy(&ws);
}

/* A sink whose write is stuck: its descriptor is a pipe that is full, and
 * nobody reads it until the test says so.  `entered` tells the test the
 * writer is inside the sink's write, its io_lock held. */
struct stuck_sink {
	int fd;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int entered, closes, closed_dropped;
};

static int stuck_sink_write(void *ctx, uint64_t tag, const char *buf, size_t len)
{
	struct stuck_sink *s = ctx;
	(void)tag;
	pthread_mutex_lock(&s->lock);
	s->entered++;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	while (len > 0) {
		ssize_t n = write(s->fd, buf, len);
		if (n < 0)
			return errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static int stuck_sink_close(void *ctx, int dropped)
{
	struct stuck_sink *s = ctx;
	s->closes++;
	s->closed_dropped = dropped;
	return 0;
}

static const struct tg_writer_sink stuck_sink_ops = { stuck_sink_write, stuck_sink_close, 0 };

static void *stuck_flusher_main(void *arg)
{
	tg_writer_flush_nogil(arg);
	return NULL;
}

struct drainer {
	int fd;
	char *buf;
	size_t len, cap;
};

static void *drainer_main(void *arg)
{
	struct drainer *d = arg;
	ssize_t k;
	while (d->len < d->cap && (k = read(d->fd, d->buf + d->len, d->cap - d->len)) > 0)
		d->len += (size_t)k;
	return NULL;
}

static void no_kick(void *ctx)
{
	(void)ctx;
}

/* While a flush is stuck in the sink's write (io_lock held): the producer
 * still hands full buffers off (it takes only `lock`), and a fork neither
 * waits nor breaks: the child drops the writer, leaving the stuck write's
 * buffers alone, and ends; then the write goes on and every line arrives in
 * order. */
static void test_stuck_write(void)
{
	struct tg_writer w;
	struct stuck_sink s = { 0 };
	int pfd[2], status, flags;
	char junk[4096];
	pthread_t ft, dt;
	struct drainer dr = { 0 };
	pid_t pid;
	long n = 0, i;
	size_t got = 0, want_len, fill = 0;
	char *want, *all;

	/* a deadlock (the producer or the fork waiting for the stuck write)
	 * ends the test (SIGALRM's default action) instead of hanging it */
	alarm(120);
	CHECK(pipe(pfd) == 0);
	flags = fcntl(pfd[1], F_GETFL);
	fcntl(pfd[1], F_SETFL, flags | O_NONBLOCK);
	memset(junk, 'j', sizeof(junk));
	for (;;) {  /* fill the pipe */
		ssize_t k = write(pfd[1], junk, sizeof(junk));
		if (k <= 0)
			break;
		fill += (size_t)k;
	}
	fcntl(pfd[1], F_SETFL, flags);
	s.fd = pfd[1];
	pthread_mutex_init(&s.lock, NULL);
	pthread_cond_init(&s.cond, NULL);
	tg_writer_init(&w);
	tg_writer_set_kick(&w, no_kick, NULL);
	CHECK_INT(tg_writer_open_sink(&w, &stuck_sink_ops, &s, 0, "stuck"), 0);
	CHECK(put_line(&w, "s", n++));
	CHECK(pthread_create(&ft, NULL, stuck_flusher_main, &w) == 0);
	pthread_mutex_lock(&s.lock);
	while (s.entered == 0)
		pthread_cond_wait(&s.cond, &s.lock);
	pthread_mutex_unlock(&s.lock);
	/* the flusher is in the sink's write now, and stays there */
	for (i = 0; i < 3; i++) {  /* three full buffers handed off, no wait */
		unsigned q = atomic_load(&w.nfull);
		while (atomic_load(&w.nfull) == q)
			CHECK(put_line(&w, "s", n++));
	}
	pid = fork();
	if (pid == 0) {
		int bad = 0;
		tg_writer_drop_in_child(&w);
		bad |= tg_writer_usable(&w);
		bad |= put_line(&w, "child", 0);
		tg_writer_flush(&w);
		tg_writer_release(&w);
		bad |= s.closes != 1 || !s.closed_dropped;
		_exit(bad ? 1 : 0);
	}
	CHECK(pid > 0);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* let the write go: a drainer reads everything until the writer is
	 * released and the pipe closed */
	want = expected_lines("s", 0, n, &want_len);
	dr.fd = pfd[0];
	dr.cap = fill + want_len + 1;
	dr.buf = all = malloc(dr.cap);
	CHECK(pthread_create(&dt, NULL, drainer_main, &dr) == 0);
	pthread_join(ft, NULL);
	tg_writer_flush(&w);
	tg_writer_release(&w);
	close(pfd[1]);
	pthread_join(dt, NULL);
	got = dr.len;
	CHECK_INT(got, fill + want_len);
	CHECK(memcmp(all + fill, want, want_len) == 0);  /* all of them, in order */
	CHECK_INT(s.closes, 1);
	CHECK_INT(s.closed_dropped, 0);
	CHECK_INT(atomic_load(&w.err), 0);
	free(all);
	free(want);
	close(pfd[0]);
	tg_writer_destroy(&w);
	pthread_mutex_destroy(&s.lock);
	pthread_cond_destroy(&s.cond);
	alarm(0);
}

/* A record longer than a buffer while a flush is stuck in the sink's write
 * (io_lock held): the producer hands it off as it does a full buffer,
 * without waiting (it used to flush and grow its buffer itself, and so
 * waited for the stuck write, with the GIL held); once the write goes on,
 * everything arrives in order. */
static void test_stuck_long_record(void)
{
	struct tg_writer w;
	struct stuck_sink s = { 0 };
	int pfd[2], flags;
	char junk[4096];
	pthread_t ft, dt;
	struct drainer dr = { 0 };
	size_t fill = 0, n = TG_WRITER_BUFSIZE * 2 + 5, a_len, want_len;
	char *rec, *a, *want, *all;

	alarm(120);  /* a wait for the stuck write ends the test, not hangs it */
	CHECK(pipe(pfd) == 0);
	flags = fcntl(pfd[1], F_GETFL);
	fcntl(pfd[1], F_SETFL, flags | O_NONBLOCK);
	memset(junk, 'j', sizeof(junk));
	for (;;) {  /* fill the pipe */
		ssize_t k = write(pfd[1], junk, sizeof(junk));
		if (k <= 0)
			break;
		fill += (size_t)k;
	}
	fcntl(pfd[1], F_SETFL, flags);
	s.fd = pfd[1];
	pthread_mutex_init(&s.lock, NULL);
	pthread_cond_init(&s.cond, NULL);
	tg_writer_init(&w);
	tg_writer_set_kick(&w, no_kick, NULL);
	CHECK_INT(tg_writer_open_sink(&w, &stuck_sink_ops, &s, 0, "stuck-long"), 0);
	CHECK(put_line(&w, "s", 0));
	CHECK(pthread_create(&ft, NULL, stuck_flusher_main, &w) == 0);
	pthread_mutex_lock(&s.lock);
	while (s.entered == 0)
		pthread_cond_wait(&s.cond, &s.lock);
	pthread_mutex_unlock(&s.lock);
	/* the flusher is in the sink's write of "s0", and stays there */
	CHECK(put_line(&w, "s", 1));
	rec = tg_writer_reserve(&w, n);
	CHECK(rec != NULL);
	if (rec != NULL) {
		memset(rec, 'L', n - 1);
		rec[n - 1] = '\n';
		tg_writer_commit(&w, n);
	}
	CHECK(put_line(&w, "s", 2));
	CHECK_INT(atomic_load(&w.nfull), 2);  /* "s1", then the long record's own */
	/* let the write go */
	a = expected_lines("s", 0, 2, &a_len);
	want_len = a_len + n + 3;
	want = malloc(want_len);
	memcpy(want, a, a_len);
	memset(want + a_len, 'L', n - 1);
	want[a_len + n - 1] = '\n';
	memcpy(want + a_len + n, "s2\n", 3);
	dr.fd = pfd[0];
	dr.cap = fill + want_len + 1;
	dr.buf = all = malloc(dr.cap);
	CHECK(pthread_create(&dt, NULL, drainer_main, &dr) == 0);
	pthread_join(ft, NULL);
	tg_writer_flush(&w);
	tg_writer_release(&w);
	close(pfd[1]);
	pthread_join(dt, NULL);
	CHECK_INT(dr.len, fill + want_len);
	CHECK(dr.len == fill + want_len && memcmp(all + fill, want, want_len) == 0);
	CHECK_INT(atomic_load(&w.err), 0);
	CHECK_INT(tg_writer_queued(), 0);
	free(all);
	free(want);
	free(a);
	close(pfd[0]);
	tg_writer_destroy(&w);
	pthread_mutex_destroy(&s.lock);
	pthread_cond_destroy(&s.cond);
	alarm(0);
}

/* --- a flusher thread against a producer thread ---------------------------------- */

/* The flusher as lifecycle.c runs it: woken by kicks (and, here, spinning
 * otherwise), writing handed-off buffers and pending bytes without the GIL. */
struct flusher {
	struct tg_writer *w;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int kicked, stop;
	long kicks;
};

static void flusher_kick(void *ctx)
{
	struct flusher *f = ctx;
	pthread_mutex_lock(&f->lock);
	f->kicked = 1;
	f->kicks++;
	pthread_cond_signal(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

static void *flusher_main(void *arg)
{
	struct flusher *f = arg;
	long round = 0;
	pthread_mutex_lock(&f->lock);
	while (!f->stop) {
		int kicked = f->kicked;
		f->kicked = 0;
		pthread_mutex_unlock(&f->lock);
		if (kicked)
			tg_writer_flush_full_nogil(f->w);
		if (++round % 3 == 0)
			tg_writer_flush_nogil(f->w);  /* the periodic flush */
		sched_yield();
		pthread_mutex_lock(&f->lock);
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

#define PRODUCER_LINES 400000L

struct producer {
	struct tg_writer *w;
	long refused;
};

static void *producer_main(void *arg)
{
	struct producer *p = arg;
	for (long i = 0; i < PRODUCER_LINES; i++) {
		/* Refused while TG_WRITER_QUEUED_MAX buffers wait for the flusher (this
		 * producer is far faster than any profiled program): the recorder
		 * counts the record dropped; here it is offered again once the
		 * flusher has run, so that every line is checked in order. */
		while (!put_line(p->w, "thread line ", i)) {
			p->refused++;
			sched_yield();
		}
		if (i % 50000 == 49999)
			tg_writer_flush(p->w);  /* the owner's own flush (rewind) */
	}
	tg_writer_flush(p->w);
	return NULL;
}

static void test_concurrent(void)
{
	struct tg_writer w;
	struct flusher f = { 0 };
	struct producer pr = { 0 };
	const char *p = fresh_path();
	char path[256];
	pthread_t ft, pt;

	snprintf(path, sizeof(path), "%s", p);
	tg_writer_init(&w);
	f.w = &w;
	pthread_mutex_init(&f.lock, NULL);
	pthread_cond_init(&f.cond, NULL);
	tg_writer_set_kick(&w, flusher_kick, &f);
	CHECK_INT(tg_writer_open_path(&w, path), 0);
	pr.w = &w;
	CHECK(pthread_create(&ft, NULL, flusher_main, &f) == 0);
	CHECK(pthread_create(&pt, NULL, producer_main, &pr) == 0);
	pthread_join(pt, NULL);
	pthread_mutex_lock(&f.lock);
	f.stop = 1;
	pthread_mutex_unlock(&f.lock);
	pthread_join(ft, NULL);
	CHECK(f.kicks > 0);
	printf("  (%ld lines refused while the queue was full)\n", pr.refused);
	tg_writer_release(&w);
	CHECK_INT(atomic_load(&w.err), 0);
	CHECK(check_file_lines(path, "thread line ", 0, PRODUCER_LINES));
	tg_writer_destroy(&w);
	pthread_mutex_destroy(&f.lock);
	pthread_cond_destroy(&f.cond);
}

int main(void)
{
	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	test_basic();
	test_huge_record();
	test_full_kick();
	test_huge_record_handoff();
	test_full_no_kick();
	test_efbig();
	test_fd_reused();
	test_sink();
	test_close_nogil();
	test_pool();
	test_owner_sink();
	test_fork_drop();
	test_stuck_write();
	test_stuck_long_record();
	test_concurrent();
	{
		char cmd[300];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", tmpdir);
	}
	TG_TEST_DONE();
}
