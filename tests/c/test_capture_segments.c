/*
 * test_capture_segments.c - a segmented capture (max_size) written by the
 * recorder's capture writer (src/recorder/capture_write.c) and read back by the
 * analysis library's reader (src/lib/capture_read.c), both linked here.
 *
 * Covered: the files' total stays within max_size; the oldest segments are
 * dropped and the newest records kept; the streams go on across segments (open
 * calls, record numbers, times, memory, process samples) from the first kept
 * segment's head; a thread that ended in a dropped segment is gone; a segment
 * deleted before the reader opens it is passed over; a newest segment cut short
 * is read up to its cut; compressed chunks the same; heads longer than a
 * segment counted in the limit, and one longer than the limit reported.  And a STATE chunk on its
 * own: a RETURN closing the call it left open, numbered and timed from it; an
 * open call of an undefined code, a state cut inside its chunk, and a RETURN
 * with no state refused.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/recorder/capture_write.h"
#include "../../src/lib/capture_read.h"
#include "tg_test.h"

#define MAX_SIZE (256u * 1024)
#define START_US 1700000000000000LL

/* What the writer wrote, for the checks. */
struct expect {
	uint64_t calls, returns;     /* thread stream 2 */
	int64_t t_us;                /* its last record's time */
	int64_t mem;                 /* sum of its outermost calls' deltas */
	int64_t inner;               /* its memory before main returns (live's
				      * figure): the sum of work()'s deltas */
	uint64_t samples;            /* process */
	int64_t bytes;
};

/* Sum of the sizes of dir's segment files; *n gets their count. */
static uint64_t segments_size(const char *dir, int *n, uint32_t *oldest)
{
	DIR *dh = opendir(dir);
	struct dirent *e;
	uint64_t total = 0;
	char path[512];
	struct stat st;
	uint32_t no;

	*n = 0;
	*oldest = UINT32_MAX;
	if (!dh)
		return 0;
	while ((e = readdir(dh))) {
		if (!tg_capture_segment_name(e->d_name, &no))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (stat(path, &st) == 0)
			total += (uint64_t)st.st_size;
		(*n)++;
		if (no < *oldest)
			*oldest = no;
	}
	closedir(dh);
	return total;
}

/* Writes a segmented capture into dir: thread 2 holds an outer call open for
 * the whole run and makes ROUNDS rounds of calls (a Python and a C function)
 * under it; thread 3 ends early; process samples throughout. */
static void write_run(const char *dir, int compress, int rounds, struct expect *x)
{
	struct tg_cap cap;
	unsigned char ev[16384], *p = ev;
	uint32_t outer, py, c;
	int64_t delta;
	uint64_t lcg = 12345;

	memset(x, 0, sizeof(*x));
	x->t_us = START_US;
	tg_cap_init(&cap);
	CHECK_INT(tg_cap_open_segments(&cap, dir, 1000, TG_CAP_F_TIME | TG_CAP_F_MEMORY,
				       START_US, 0, 0, 7, compress), -EINVAL);
	CHECK_INT(tg_cap_open_segments(&cap, dir, MAX_SIZE, TG_CAP_F_TIME | TG_CAP_F_MEMORY,
				       START_US, 0, 0, 7, compress), 0);
	outer = tg_cap_new_code_id(&cap);
	py = tg_cap_new_code_id(&cap);
	c = tg_cap_new_code_id(&cap);
	CHECK_INT(tg_cap_define(&cap, outer, TG_CAP_CODE_PYTHON, 5, "m.py", 4, "main", 4), 0);
	CHECK_INT(tg_cap_define(&cap, py, TG_CAP_CODE_PYTHON, 20, "m.py", 4, "work", 4), 0);
	CHECK_INT(tg_cap_define(&cap, c, TG_CAP_CODE_C, 0, "time", 4, "sleep", 5), 0);
	CHECK_INT(tg_cap_thread(&cap, 2, 100, 200, "T2", 2, "T2", 2), 0);
	CHECK_INT(tg_cap_thread(&cap, 3, 101, 201, "T3", 2, "T3", 2), 0);
	p = tg_cap_enc_call(p, py, 1, 3, 0, 0);
	p = tg_cap_enc_return(p, 1, 1, 2, 1, 64);
	CHECK_INT(tg_cap_chunk_out(&cap, TG_CAP_CHUNK_EVENTS, 3, ev, (size_t)(p - ev)), 0);
	CHECK_INT(tg_cap_deposit(&cap, 3, 1, 1, 0), 0);
	p = ev;
	p = tg_cap_enc_call(p, outer, 1, 1, 0, 0);
	x->calls++;
	x->t_us += 1;
	for (int i = 0; i < rounds; i++) {
		/* work() { sleep() } with a varying delta; distinct varint sizes */
		lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
		delta = (int64_t)(lcg >> 40) % 200000 - 100000;  /* hard to compress */
		p = tg_cap_enc_call(p, py, 1, 2, 0, 0);
		p = tg_cap_enc_call(p, c, 1, 1, 1, 21 + i % 3);
		p = tg_cap_enc_return(p, 0, 1, (uint64_t)(i % 5), 1, 8);
		p = tg_cap_enc_return(p, 4, 1, 1, 1, delta);
		x->inner += delta;
		x->calls += 2;
		x->returns += 2;
		x->t_us += 2 + 1 + i % 5 + 1;
		if ((size_t)(p - ev) > sizeof(ev) - 8 * TG_CAP_RECORD_MAX) {
			CHECK_INT(tg_cap_chunk_out(&cap, TG_CAP_CHUNK_EVENTS, 2, ev,
						   (size_t)(p - ev)), 0);
			p = ev;
			/* a process sample per chunk */
			unsigned char s[32], *q = tg_cap_enc_sample(s, 1, 1000, 4096);
			CHECK_INT(tg_cap_chunk_out(&cap, TG_CAP_CHUNK_PROCESS, TG_CAP_STREAM_PROCESS,
						   s, (size_t)(q - s)), 0);
			x->samples++;
			x->bytes += 4096;
		}
	}
	p = tg_cap_enc_return(p, 9, 1, 5, 1, -1);  /* main returns at line 14 */
	x->returns++;
	x->t_us += 5;
	x->mem -= 1;
	CHECK_INT(tg_cap_chunk_out(&cap, TG_CAP_CHUNK_EVENTS, 2, ev, (size_t)(p - ev)), 0);
	CHECK_INT(tg_cap_deposit(&cap, 2, x->calls, x->returns, 0), 0);
	CHECK(tg_cap_segments_dropped(&cap) > 0);
	CHECK_INT(tg_cap_finish(&cap, START_US + 99000000), 0);
	tg_cap_destroy(&cap);
}

/* Reads dir's capture and checks it against x (kept: segments all there;
 * cut: the newest segment was cut short). */
static void read_run(const char *dir, const struct expect *x, int cut)
{
	struct tg_capture cap;
	struct tg_capcur cur;
	struct tg_cap_rec_data r;
	struct tg_diag d;
	char *file = NULL;
	unsigned long first_return = 0, n = 0;
	int64_t mem, before_main = 0, last_t = 0;
	int64_t lvl[3] = { 0 };  /* live.c's sums by depth: under main, work, sleep */
	size_t top = 0;
	int rc, last_depth = -1;
	const char *last_func = NULL;

	memset(&d, 0, sizeof(d));
	CHECK(tg_capture_detect(dir, &file));
	if (!file)
		return;
	rc = tg_capture_open(&cap, file, &d);
	free(file);
	CHECK_INT(rc, 0);
	if (rc < 0) {
		fprintf(stderr, "  %s\n", d.msg);
		return;
	}
	CHECK(cap.seg_first > 1);
	CHECK(cap.seg_last >= cap.seg_first);
	CHECK_INT(cap.n_segs, cap.seg_last - cap.seg_first + 1);
	CHECK_INT(cap.has_end, !cut);
	CHECK_INT(cap.cut, cut);
	CHECK(cap.kept_from_us > START_US);
	CHECK_INT(cap.n_threads, 1);  /* T3 ended in a dropped segment */
	CHECK_STR(cap.threads[0].base, "T2");
	CHECK(cap.threads[0].has_state);
	/* the head splits the memory before by depth: main's callees' sums */
	CHECK(cap.threads[0].state.n_lvl >= 2 && cap.threads[0].state.n_lvl <= 3);
	mem = 0;
	for (size_t k = 0; k < cap.threads[0].state.n_lvl && k < 3; k++) {
		lvl[k] = cap.threads[0].state.lvl[k];
		mem += lvl[k];
		top = k;
	}
	CHECK(mem == cap.threads[0].state.mem);
	tg_capcur_init(&cur, &cap, &cap.threads[0]);
	CHECK(cur.depth >= 1);  /* main() is open at every segment's start */
	while ((rc = tg_capcur_next(&cur, &r, &d)) > 0) {
		CHECK(r.t_us > cap.kept_from_us || r.t_us == cap.kept_from_us);
		if (r.type == TG_CAP_REC_RETURN) {
			if (!first_return)
				first_return = r.number;
			/* live.c's memory now: a return replaces its callees' sums */
			if (r.depth == 0)
				before_main = mem;
			while (top > r.depth && top < 3) {
				mem -= lvl[top];
				lvl[top--] = 0;
			}
			top = r.depth;
			if (r.depth < 3)
				lvl[r.depth] += r.value;
			mem += r.value;
			last_depth = (int)r.depth;
			last_func = r.code->func;
			n++;
		}
		last_t = r.t_us;
	}
	CHECK_INT(rc, 0);
	if (!cut) {
		/* the newest records are all there, numbered as in the whole run */
		CHECK_INT(cur.calls, x->calls);
		CHECK_INT(cur.returns, x->returns);
		CHECK_INT(first_return + n - 1, x->returns);
		CHECK(last_t == x->t_us);
		CHECK_INT(last_depth, 0);
		CHECK(last_func && !strncmp(last_func, "main", 4));
		/* the memory before the kept records and theirs make the whole
		 * run's, before main returns (its loop's calls) and after */
		CHECK(before_main == x->inner);
		CHECK(mem == x->mem);
	} else {
		CHECK(cur.returns < x->returns);
		CHECK(n > 0);
	}
	tg_capcur_release(&cur);
	tg_capcur_init(&cur, &cap, NULL);
	n = 0;
	while ((rc = tg_capcur_next(&cur, &r, &d)) > 0)
		n++;
	CHECK_INT(rc, 0);
	if (!cut) {
		CHECK_INT(cur.samples, x->samples);
		CHECK(r.value == x->bytes || n == 0);
		CHECK(cur.bytes == x->bytes);
	}
	tg_capcur_release(&cur);
	tg_capture_close(&cap);
}

static void rm_dir(const char *dir)
{
	DIR *dh = opendir(dir);
	struct dirent *e;
	char path[512];

	if (!dh)
		return;
	while ((e = readdir(dh)))
		if (e->d_name[0] != '.') {
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			unlink(path);
		}
	closedir(dh);
	rmdir(dir);
}

static void test_segments(int compress)
{
	char dir[] = "/tmp/tg_test_segments_XXXXXX", path[512];
	struct expect x;
	uint64_t total;
	uint32_t oldest;
	int n;

	if (!mkdtemp(dir))
		abort();
	write_run(dir, compress, compress ? 200000 : 60000, &x);
	total = segments_size(dir, &n, &oldest);
	CHECK(total <= MAX_SIZE);
	CHECK(n >= 2);
	CHECK(oldest > 1);
	read_run(dir, &x, 0);
	/* the recorder deleted the oldest one meanwhile: the next one has a head */
	snprintf(path, sizeof(path), "%s/" TG_CAP_SEG_PREFIX "%0*u" TG_CAP_SEG_SUFFIX, dir,
		 TG_CAP_SEG_DIGITS, oldest);
	CHECK_INT(unlink(path), 0);
	read_run(dir, &x, 0);
	/* killed while writing: the newest segment ends inside a chunk */
	total = segments_size(dir, &n, &oldest);
	snprintf(path, sizeof(path), "%s/" TG_CAP_SEG_PREFIX "%0*u" TG_CAP_SEG_SUFFIX, dir,
		 TG_CAP_SEG_DIGITS, oldest + (uint32_t)n - 1);
	{
		struct stat st;
		CHECK_INT(stat(path, &st), 0);
		CHECK_INT(truncate(path, st.st_size - 100), 0);
	}
	read_run(dir, &x, 1);
	rm_dir(dir);
}

/* Appends a chunk (KIND, FLAGS, STREAM, PAYLOAD/N) at *P. */
static unsigned char *put_chunk(unsigned char *p, int kind, int flags, uint32_t stream,
				const unsigned char *payload, size_t n)
{
	p[0] = (unsigned char)kind;
	p[1] = (unsigned char)flags;
	p[2] = p[3] = 0;
	tg_cap_put_u32(p + 4, stream);
	tg_cap_put_u32(p + 8, (uint32_t)n);
	memcpy(p + TG_CAP_CHUNK_HEADER_SIZE, payload, n);
	return p + TG_CAP_CHUNK_HEADER_SIZE + n;
}

#define NO_LEVELS INT64_MIN  /* a state without its memory by depth (older) */

/* A one-file capture whose head gives thread 2 a STATE (open call of code
 * OPEN_CODE, DEPTH given as STATE_DEPTH, memory 500: LVL0 of it at depth 0,
 * the rest plus BAD_SUM at depth 1, or not split), then a RETURN: reads (1),
 * or the reader's error (0) with its message containing WANT. */
static void state_case(uint64_t open_code, uint64_t state_depth, int64_t lvl0, int bad_sum,
		       int ok, const char *want)
{
	unsigned char buf[512], pay[64], *p = buf, *q;
	char path[] = "/tmp/tg_test_state_XXXXXX";
	struct tg_capture cap;
	struct tg_capcur cur;
	struct tg_cap_rec_data r;
	struct tg_diag d;
	int fd, rc;

	memset(&d, 0, sizeof(d));
	memcpy(p, TG_CAP_MAGIC, TG_CAP_MAGIC_LEN);
	tg_cap_put_u32(p + 8, TG_CAP_VERSION);
	tg_cap_put_u32(p + 12, TG_CAP_F_TIME | TG_CAP_F_MEMORY);
	tg_cap_put_u64(p + 16, (uint64_t)START_US);
	memset(p + 24, 0, 16);
	p += TG_CAP_HEADER_SIZE;
	q = pay;  /* code 1: m.py:5 main */
	q = tg_cap_put_varint(q, 1);
	*q++ = TG_CAP_CODE_PYTHON;
	q = tg_cap_put_varint(q, 5);
	q = tg_cap_put_varint(q, 4);
	memcpy(q, "m.py", 4);
	q += 4;
	q = tg_cap_put_varint(q, 4);
	memcpy(q, "main", 4);
	q += 4;
	p = put_chunk(p, TG_CAP_CHUNK_CODES, TG_CAP_CHUNK_HEAD, 0, pay, (size_t)(q - pay));
	q = pay;  /* thread T2 */
	q = tg_cap_put_varint(q, 1);
	q = tg_cap_put_varint(q, 2);
	q = tg_cap_put_varint(q, 2);
	memcpy(q, "T2", 2);
	q += 2;
	q = tg_cap_put_varint(q, 2);
	memcpy(q, "T2", 2);
	q += 2;
	p = put_chunk(p, TG_CAP_CHUNK_THREAD, TG_CAP_CHUNK_HEAD, 2, pay, (size_t)(q - pay));
	q = pay;  /* at +100 us: 7 calls, 6 returns, memory 500, main open */
	q = tg_cap_put_varint(q, 100);
	q = tg_cap_put_varint(q, 7);
	q = tg_cap_put_varint(q, 6);
	q = tg_cap_put_varint(q, tg_cap_zz(500));
	q = tg_cap_put_varint(q, state_depth);
	if (state_depth) {
		q = tg_cap_put_varint(q, open_code);
		q = tg_cap_put_varint(q, 3);
	}
	if (lvl0 != NO_LEVELS) {  /* the memory by depth: lvl0 under main, the rest in it */
		q = tg_cap_put_varint(q, 2);
		q = tg_cap_put_varint(q, tg_cap_zz(lvl0));
		q = tg_cap_put_varint(q, tg_cap_zz(500 - lvl0 + bad_sum));
	}
	p = put_chunk(p, TG_CAP_CHUNK_STATE, TG_CAP_CHUNK_HEAD, 2, pay, (size_t)(q - pay));
	q = tg_cap_enc_return(pay, 4, 1, 10, 1, -20);  /* main returns at line 9 */
	p = put_chunk(p, TG_CAP_CHUNK_EVENTS, 0, 2, pay, (size_t)(q - pay));
	fd = mkstemp(path);
	if (fd < 0 || write(fd, buf, (size_t)(p - buf)) != p - buf)
		abort();
	close(fd);
	rc = tg_capture_open(&cap, path, &d);
	if (rc == 0) {
		tg_capcur_init(&cur, &cap, &cap.threads[0]);
		rc = tg_capcur_next(&cur, &r, &d);
		if (rc == 1) {
			CHECK_INT(r.type, TG_CAP_REC_RETURN);
			CHECK_INT(r.line, 9);
			CHECK_INT(r.number, 7);       /* the 7th return: numbers go on */
			CHECK_INT(r.call_number, 3);  /* closes the 3rd call */
			CHECK(r.t_us == START_US + 110);
			CHECK_INT(r.depth, 0);
			/* live's figure after main returns: main's delta replaces
			 * what returned in it (all of it without the split) */
			CHECK(cap.threads[0].state.mem + r.value == 480 || lvl0 != NO_LEVELS);
			if (lvl0 != NO_LEVELS) {
				CHECK_INT(cap.threads[0].state.n_lvl, 2);
				CHECK(cap.threads[0].state.lvl[0] + r.value == lvl0 - 20);
			}
		}
		tg_capcur_release(&cur);
		tg_capture_close(&cap);
		rc = rc == 1 ? 0 : -1;
	}
	CHECK_INT(rc == 0, ok);
	if (!ok)
		CHECK(d.msg && strstr(d.msg, want));
	unlink(path);
}

static void test_state(void)
{
	state_case(1, 1, NO_LEVELS, 0, 1, NULL);
	state_case(1, 1, 100, 0, 1, NULL);
	state_case(1, 1, 100, 1, 0, "a state's memory by depth does not add up");
	state_case(9, 1, NO_LEVELS, 0, 0, "an open call of an undefined code");
	state_case(1, 2, NO_LEVELS, 0, 0, "state runs past its chunk");
	state_case(1, 0, NO_LEVELS, 0, 0, "a return without an open call");
}

#define DEEP_CHUNK 16384  /* stream 2's chunks in write_deep, at most */

/* Writes a run whose THREADS threads (streams 3 on) stay DEPTH calls deep while
 * stream 2 writes ROUNDS chunks; returns the largest total of the segment files
 * seen after each chunk, and *OVER tg_cap_over_limit at the end; *STARTED (if
 * not NULL) the segments started while stream 2 wrote, *HEAD the shortest
 * head of those, *WRITTEN the bytes of stream 2's chunks. */
static uint64_t write_deep_counted(const char *dir, int threads, int depth, int rounds,
				   uint64_t *over, uint32_t *started, uint64_t *head,
				   uint64_t *written)
{
	struct tg_cap cap;
	unsigned char ev[DEEP_CHUNK], *p;
	uint64_t total, largest = 0, chunks = 0, shortest = UINT64_MAX;
	uint32_t f, g, oldest, first;
	int n;

	tg_cap_init(&cap);
	CHECK_INT(tg_cap_open_segments(&cap, dir, MAX_SIZE, TG_CAP_F_TIME | TG_CAP_F_MEMORY,
				       START_US, 0, 0, 7, 0), 0);
	f = tg_cap_new_code_id(&cap);
	g = tg_cap_new_code_id(&cap);
	CHECK_INT(tg_cap_define(&cap, f, TG_CAP_CODE_PYTHON, 5, "m.py", 4, "down", 4), 0);
	CHECK_INT(tg_cap_define(&cap, g, TG_CAP_CODE_PYTHON, 9, "m.py", 4, "churn", 5), 0);
	CHECK_INT(tg_cap_thread(&cap, 2, 100, 200, "main", 4, "main", 4), 0);
	for (int k = 0; k < threads; k++) {
		char name[16];
		int len = snprintf(name, sizeof(name), "d%d", k);
		CHECK_INT(tg_cap_thread(&cap, (uint32_t)(3 + k), 101 + (uint64_t)k,
					201 + (uint64_t)k, name, (size_t)len, name, (size_t)len), 0);
		p = ev;
		for (int i = 0; i < depth; i++)
			p = tg_cap_enc_call(p, f, 1, 1, 0, 0);
		CHECK_INT(tg_cap_chunk_out(&cap, TG_CAP_CHUNK_EVENTS, (uint32_t)(3 + k), ev,
					   (size_t)(p - ev)), 0);
	}
	first = cap.seg_no;
	for (int r = 0; r < rounds; r++) {
		p = ev;
		while ((size_t)(p - ev) < sizeof(ev) - 8 * TG_CAP_RECORD_MAX) {
			p = tg_cap_enc_call(p, g, 1, 1, 0, 0);
			p = tg_cap_enc_return(p, 1, 1, 1, 1, (int64_t)(p - ev) % 977 - 400);
		}
		CHECK_INT(tg_cap_chunk_out(&cap, TG_CAP_CHUNK_EVENTS, 2, ev, (size_t)(p - ev)), 0);
		total = segments_size(dir, &n, &oldest);
		if (total > largest)
			largest = total;
		chunks += (uint64_t)(p - ev);
		if (cap.seg_no != first && cap.seg_head < shortest)
			shortest = cap.seg_head;
	}
	*over = tg_cap_over_limit(&cap);
	if (started != NULL) {
		*started = cap.seg_no - first;
		*head = shortest;
		*written = chunks;
	}
	CHECK(tg_cap_segments_dropped(&cap) > 0);
	CHECK_INT(tg_cap_finish(&cap, START_US + 99000000), 0);
	tg_cap_destroy(&cap);
	return largest;
}

static uint64_t write_deep(const char *dir, int threads, int depth, int rounds,
			   uint64_t *over)
{
	return write_deep_counted(dir, threads, depth, rounds, over, NULL, NULL, NULL);
}

/* Heads longer than a segment (threads deep in their calls): the rotation
 * counts them and the files stay within max_size; heads longer than max_size
 * cannot, and tg_cap_over_limit says by how much, no less. */
static void test_deep_heads(void)
{
	char dir[] = "/tmp/tg_test_segments_XXXXXX", dir2[] = "/tmp/tg_test_segments_XXXXXX";
	uint64_t largest, over;

	/* heads of 100 x 500 open calls, over half the limit: two segments of
	 * a head and a chunk passed it */
	if (!mkdtemp(dir))
		abort();
	largest = write_deep(dir, 100, 500, 200, &over);
	CHECK(largest <= MAX_SIZE);
	CHECK_INT(over, 0);
	rm_dir(dir);
	/* 300 x 400: past the limit */
	if (!mkdtemp(dir2))
		abort();
	largest = write_deep(dir2, 300, 400, 50, &over);
	CHECK(largest > MAX_SIZE);
	CHECK(over > 0);
	CHECK(largest <= MAX_SIZE + over);
	rm_dir(dir2);
}

/* A head longer than the limit allows: a segment still holds about as many
 * bytes of records as of head (its target is twice its head), so the
 * segments started grow with the records written, not one per chunk: each
 * but the last holds more than its head less one chunk of records. */
static void test_deep_heads_rotate_rarely(void)
{
	char dir[] = "/tmp/tg_test_segments_XXXXXX";
	uint64_t largest, over, head, written;
	uint32_t started;

	if (!mkdtemp(dir))
		abort();
	largest = write_deep_counted(dir, 300, 400, 200, &over, &started, &head, &written);
	CHECK(head > MAX_SIZE);
	CHECK(over > 0);
	CHECK(largest <= MAX_SIZE + over);
	CHECK(head > 2 * DEEP_CHUNK);
	CHECK(started > 0 && started <= 1 + written / (head - DEEP_CHUNK));
	rm_dir(dir);
}

/* Segment names: the recorder's own (at least six digits, no more zeros), and
 * nothing else, since readers open a segment by that name. */
static void test_segment_names(void)
{
	uint32_t no = 0;

	CHECK(tg_capture_segment_name("capture-000001.tg", &no) && no == 1);
	CHECK(tg_capture_segment_name("capture-000420.tg", &no) && no == 420);
	CHECK(tg_capture_segment_name("capture-1234567.tg", &no) && no == 1234567);
	CHECK(tg_capture_segment_name("capture-4294967295.tg", &no) && no == 4294967295u);
	CHECK(!tg_capture_segment_name("capture-1.tg", &no));
	CHECK(!tg_capture_segment_name("capture-0000001.tg", &no));
	CHECK(!tg_capture_segment_name("capture-000000.tg", &no));
	CHECK(!tg_capture_segment_name("capture-4294967296.tg", &no));
	CHECK(!tg_capture_segment_name("capture-00001a.tg", &no));
	CHECK(!tg_capture_segment_name("capture.tg", &no));
	CHECK(!tg_capture_segment_name("capture-.tg", &no));
}

int main(void)
{
	test_segment_names();
	test_state();
	test_deep_heads();
	test_deep_heads_rotate_rarely();
	test_segments(0);
	if (tg_cap_can_compress())
		test_segments(1);
	TG_TEST_DONE();
}
