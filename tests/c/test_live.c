/*
 * test_live.c - threadgraph live's readings (src/lib/live.c) of a capture
 * that grows between them, written by the recorder's capture writer
 * (src/recorder/capture_write.c), both linked here.
 *
 * A reading decodes only what the capture gained since the previous one; its
 * figures must be those of a first reading of the same bytes.  Covered: a
 * capture grown by arbitrary byte counts (chunks cut anywhere, zstd ones too),
 * every figure and the functions (of all threads and of one) against a fresh
 * reading of each prefix; a file replaced by another run's; a capture of
 * limited size read as its segments rotate, against the same records written
 * to one file (the readings keep what the dropped segments held), and read too
 * rarely to go on (read from its start: the fresh reading's figures).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/recorder/capture_write.h"
#include "../../src/lib/capture_read.h"
#include "../../src/lib/live.h"
#include "tg_test.h"

#define START_US 1700000000000000LL
#define N_THREADS 3
#define N_CODES 6
#define FLAGS (TG_CAP_F_TIME | TG_CAP_F_MEMORY | TG_CAP_F_PROCESS)

static uint64_t lcg = 42;

static uint64_t rnd(uint64_t n)
{
	lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
	return (lcg >> 33) % n;
}

/* A made-up thread: its open calls, as the writer sees them. */
struct gen_thread {
	uint32_t stream;
	int depth;
	int code[64];
	int64_t mem, starts[64];
	uint64_t calls, returns;
	unsigned char buf[4096];
	size_t len;
};

/* The writers of the same records (a capture.tg, and segments). */
struct gen {
	struct tg_cap *w[2];
	int n_w;
	uint32_t codes[N_CODES];
	struct gen_thread t[N_THREADS];
	int64_t bytes;
};

static void gen_chunk(struct gen *g, int kind, uint32_t stream, const void *p, size_t n)
{
	for (int i = 0; i < g->n_w; i++)
		CHECK_INT(tg_cap_chunk_out(g->w[i], kind, stream, p, n), 0);
}

static void gen_start(struct gen *g)
{
	for (int i = 0; i < g->n_w; i++) {
		for (int c = 0; c < N_CODES; c++) {
			char file[16], func[16];
			int kind = c == N_CODES - 1 ? TG_CAP_CODE_C : TG_CAP_CODE_PYTHON;

			g->codes[c] = tg_cap_new_code_id(g->w[i]);
			snprintf(file, sizeof(file), "m%d.py", c % 2);
			snprintf(func, sizeof(func), "f%d", c);
			CHECK_INT(tg_cap_define(g->w[i], g->codes[c], kind,
						kind == TG_CAP_CODE_C ? 0 : 10 * (uint32_t)c + 1,
						file, strlen(file), func, strlen(func)), 0);
		}
		for (int t = 0; t < N_THREADS; t++) {
			char name[8];

			snprintf(name, sizeof(name), "T%d", t);
			CHECK_INT(tg_cap_thread(g->w[i], (uint32_t)(2 + t), 100u + (unsigned)t,
						200u + (unsigned)t, name, strlen(name), name,
						strlen(name)), 0);
		}
	}
	for (int t = 0; t < N_THREADS; t++) {
		memset(&g->t[t], 0, sizeof(g->t[t]));
		g->t[t].stream = (uint32_t)(2 + t);
	}
}

/* Writes thread T's records so far as a chunk. */
static void gen_flush(struct gen *g, struct gen_thread *t)
{
	if (t->len)
		gen_chunk(g, TG_CAP_CHUNK_EVENTS, t->stream, t->buf, t->len);
	t->len = 0;
}

/* One record (or a special event) of thread T. */
static void gen_step(struct gen *g, struct gen_thread *t)
{
	unsigned char *p = t->buf + t->len;
	uint64_t r = rnd(100);

	if (t->len > sizeof(t->buf) - 256)
		gen_flush(g, t), p = t->buf;
	if (r < 45 && t->depth < 60) {  /* a call */
		int c = (int)rnd(N_CODES);
		p = tg_cap_enc_call(p, g->codes[c], 1, rnd(3), c == N_CODES - 1,
				    (int64_t)rnd(50));
		t->starts[t->depth] = t->mem;
		t->code[t->depth++] = c;
		t->calls++;
	} else if (r < 92 && t->depth > 1) {  /* a return (the outermost call stays) */
		int64_t delta = (int64_t)rnd(20000) - 9000;

		p = tg_cap_enc_return(p, (int64_t)rnd(4), 1, rnd(3), 1, delta);
		t->mem += delta;
		t->depth--;
		t->returns++;
	} else if (r < 96) {  /* the thread's memory here, and its open calls' starts */
		int with = rnd(2) && t->depth;
		int64_t at = 0;

		t->mem += (int64_t)rnd(3000) - 1000;  /* the open calls' own code */
		*p++ = 0;
		*p++ = TG_CAP_EV_LEVEL;
		p = tg_cap_put_varint(p, tg_cap_zz(t->mem));
		p = tg_cap_put_varint(p, with ? (uint64_t)t->depth : 0);
		for (int k = 0; with && k < t->depth; k++) {
			p = tg_cap_put_varint(p, tg_cap_zz(t->starts[k] - at));
			at = t->starts[k];
		}
	} else if (r < 98 && t->depth > 2) {
		p = tg_cap_enc_unwound(p, 1);
		t->depth--;
	} else if (t->depth == 0) {
		p = tg_cap_enc_call(p, g->codes[0], 1, 1, 0, 0);
		t->starts[0] = t->mem;
		t->code[t->depth++] = 0;
		t->calls++;
	}
	t->len = (size_t)(p - t->buf);
}

/* A round: records of every thread, some chunks flushed, a process sample. */
static void gen_round(struct gen *g, int steps)
{
	for (int s = 0; s < steps; s++)
		gen_step(g, &g->t[rnd(N_THREADS)]);
	for (int t = 0; t < N_THREADS; t++)
		if (rnd(3) == 0)
			gen_flush(g, &g->t[t]);
	if (rnd(2)) {
		unsigned char s[32], *q;
		int64_t change = (int64_t)rnd(1 << 20) - (1 << 19);

		q = tg_cap_enc_sample(s, 1, 1000, change);
		g->bytes += change;
		gen_chunk(g, TG_CAP_CHUNK_PROCESS, TG_CAP_STREAM_PROCESS, s, (size_t)(q - s));
	}
}

static void gen_finish(struct gen *g)
{
	for (int t = 0; t < N_THREADS; t++) {
		gen_flush(g, &g->t[t]);
		for (int i = 0; i < g->n_w; i++)
			CHECK_INT(tg_cap_deposit(g->w[i], g->t[t].stream, g->t[t].calls,
						 g->t[t].returns, 0), 0);
	}
	for (int i = 0; i < g->n_w; i++)
		CHECK_INT(tg_cap_finish(g->w[i], START_US + 99000000), 0);
}

/* LV's figures are REF's (changes aside; OLD_THREADS: LV may be missing the
 * threads that ended in dropped segments, and has nothing REF lacks). */
static int same_figures(const struct tg_live *lv, const struct tg_live *ref, const char *what)
{
	int bad = 0;

	bad |= lv->n_threads != ref->n_threads;
	for (size_t i = 0; !bad && i < lv->n_threads; i++) {
		const struct tg_live_thread *a = &lv->threads[i], *b = &ref->threads[i];
		bad |= a->stream != b->stream || strcmp(a->name, b->name) || a->now != b->now ||
		       a->peak != b->peak || a->largest != b->largest ||
		       a->returns != b->returns || a->ended != b->ended;
	}
	bad |= lv->n_funcs != ref->n_funcs;
	for (size_t i = 0; !bad && i < lv->n_funcs; i++)
		bad |= lv->funcs[i].net != ref->funcs[i].net ||
		       lv->funcs[i].calls != ref->funcs[i].calls ||
		       lv->funcs[i].line != ref->funcs[i].line ||
		       strcmp(lv->funcs[i].file, ref->funcs[i].file) ||
		       strcmp(lv->funcs[i].func, ref->funcs[i].func);
	bad |= lv->has_process != ref->has_process || lv->process_bytes != ref->process_bytes ||
	       lv->last_us != ref->last_us || lv->ended != ref->ended;
	if (bad) {
		fprintf(stderr, "  %s: figures differ from a fresh reading's\n", what);
		for (size_t i = 0; i < lv->n_threads && i < ref->n_threads; i++)
			fprintf(stderr, "    %s now %lld/%lld peak %lld/%lld largest %lld/%lld "
				"returns %lu/%lu\n", lv->threads[i].name,
				(long long)lv->threads[i].now, (long long)ref->threads[i].now,
				(long long)lv->threads[i].peak, (long long)ref->threads[i].peak,
				(long long)lv->threads[i].largest,
				(long long)ref->threads[i].largest, lv->threads[i].returns,
				ref->threads[i].returns);
	}
	return !bad;
}

/* A first reading of PATH into *REF (focus FOCUS); 0 or -1. */
static int fresh(struct tg_live *ref, const char *path, uint32_t focus)
{
	struct tg_diag d = { 0 };

	tg_live_init(ref);
	ref->focus = focus;
	return tg_live_read(ref, path, &d);
}

static void copy_range(int from, int to, off_t a, off_t b)
{
	char buf[65536];

	while (a < b) {
		size_t n = (size_t)(b - a) < sizeof(buf) ? (size_t)(b - a) : sizeof(buf);
		ssize_t got = pread(from, buf, n, a);
		if (got <= 0 || write(to, buf, (size_t)got) != got)
			abort();
		a += got;
	}
}

/* A whole capture, then its prefixes appended to another file a few hundred
 * bytes at a time: each reading equals a fresh reading of the same bytes. */
static void test_prefixes(int compress)
{
	char dir[] = "/tmp/tg_test_live_XXXXXX", whole[512], grown[512];
	struct tg_cap w;
	struct gen g;
	struct tg_live lv, ref;
	struct stat st;
	int from, to, readings = 0, same = 1;

	if (!mkdtemp(dir))
		abort();
	snprintf(whole, sizeof(whole), "%s/whole.tg", dir);
	snprintf(grown, sizeof(grown), "%s/capture.tg", dir);
	tg_cap_init(&w);
	CHECK_INT(tg_cap_open(&w, whole, FLAGS, START_US, 0, 0, 7, compress), 0);
	memset(&g, 0, sizeof(g));
	g.w[0] = &w;
	g.n_w = 1;
	gen_start(&g);
	for (int i = 0; i < 150; i++)
		gen_round(&g, 200);
	gen_finish(&g);
	tg_cap_destroy(&w);
	from = open(whole, O_RDONLY);
	to = open(grown, O_WRONLY | O_CREAT | O_APPEND, 0644);
	CHECK(from >= 0 && to >= 0);
	CHECK_INT(fstat(from, &st), 0);
	tg_live_init(&lv);
	for (off_t at = 0; at < st.st_size;) {
		off_t next = at + 1 + (off_t)rnd(at < 4096 ? 300 : 2000);
		struct tg_diag d = { 0 };
		uint32_t focus = rnd(4) == 0 ? (uint32_t)(2 + rnd(N_THREADS)) : 0;

		if (next > st.st_size)
			next = st.st_size;
		copy_range(from, to, at, next);
		at = next;
		lv.focus = focus;
		if (tg_live_read(&lv, grown, &d) < 0) {
			CHECK(at < TG_CAP_HEADER_SIZE);  /* only before its header is whole */
			continue;
		}
		CHECK_INT(fresh(&ref, grown, focus), 0);
		same &= same_figures(&lv, &ref, "a prefix");
		tg_live_release(&ref);
		readings++;
	}
	CHECK(same);
	CHECK(readings > 100);
	CHECK_INT(lv.restarts, 0);
	CHECK(lv.ended);
	CHECK(lv.n_funcs > 0);
	/* another run in its place: read from its start */
	close(to);
	unlink(grown);
	{
		struct tg_cap w2;
		struct tg_diag d = { 0 };

		tg_cap_init(&w2);
		CHECK_INT(tg_cap_open(&w2, grown, FLAGS, START_US + 5, 0, 0, 8, compress), 0);
		g.w[0] = &w2;
		gen_start(&g);
		for (int i = 0; i < 20; i++)
			gen_round(&g, 100);
		gen_finish(&g);
		tg_cap_destroy(&w2);
		lv.focus = 0;
		CHECK_INT(tg_live_read(&lv, grown, &d), 0);
		CHECK_INT(lv.restarts, 1);
		CHECK_INT(fresh(&ref, grown, 0), 0);
		CHECK(same_figures(&lv, &ref, "another run"));
		tg_live_release(&ref);
	}
	tg_live_release(&lv);
	close(from);
	unlink(whole);
	unlink(grown);
	rmdir(dir);
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

/* The same records in segments (256 KiB) and in one file: read at every
 * round, the segments give the one file's figures however many were dropped
 * (each reading decoded its records before they were); read once the first
 * segments are gone, they give a fresh reading's. */
static void test_rotation(int compress)
{
	char dir[] = "/tmp/tg_test_live_rot_XXXXXX", one[600], segs[600], seg1[700];
	struct tg_cap w1, w2;
	struct gen g;
	struct tg_live lv, rare, ref;
	int same = 1, readings = 0;

	if (!mkdtemp(dir))
		abort();
	snprintf(one, sizeof(one), "%s/one.tg", dir);
	snprintf(segs, sizeof(segs), "%s/segs", dir);
	CHECK_INT(mkdir(segs, 0755), 0);
	snprintf(seg1, sizeof(seg1), "%s/" TG_CAP_SEG_PREFIX "%0*u" TG_CAP_SEG_SUFFIX, segs,
		 TG_CAP_SEG_DIGITS, 1u);
	tg_cap_init(&w1);
	tg_cap_init(&w2);
	CHECK_INT(tg_cap_open(&w1, one, FLAGS, START_US, 0, 0, 7, compress), 0);
	CHECK_INT(tg_cap_open_segments(&w2, segs, TG_CAP_MAX_SIZE_MIN, FLAGS, START_US, 0, 0, 7,
				       compress), 0);
	memset(&g, 0, sizeof(g));
	g.w[0] = &w1;
	g.w[1] = &w2;
	g.n_w = 2;
	gen_start(&g);
	tg_live_init(&lv);
	tg_live_init(&rare);
	for (int i = 0; i < (compress ? 3000 : 1500); i++) {
		struct tg_diag d = { 0 };
		uint32_t focus = rnd(4) == 0 ? (uint32_t)(2 + rnd(N_THREADS)) : 0;

		gen_round(&g, 150);
		if (i == 0) {
			gen_flush(&g, &g.t[0]);
			CHECK_INT(tg_live_read(&rare, seg1, &d), 0);
		}
		lv.focus = focus;
		CHECK_INT(tg_live_read(&lv, seg1, &d), 0);
		if (i % 50 && i != 1)
			continue;  /* a fresh reading of all of it, now and then */
		CHECK_INT(fresh(&ref, one, focus), 0);
		same &= same_figures(&lv, &ref, "segments read as they rotate");
		tg_live_release(&ref);
		readings++;
	}
	CHECK(tg_cap_segments_dropped(&w2) > 2);
	gen_finish(&g);
	tg_cap_destroy(&w1);
	tg_cap_destroy(&w2);
	{
		struct tg_diag d = { 0 };

		lv.focus = 0;
		CHECK_INT(tg_live_read(&lv, seg1, &d), 0);
		CHECK_INT(fresh(&ref, one, 0), 0);
		same &= same_figures(&lv, &ref, "segments, ended");
		tg_live_release(&ref);
		CHECK(same);
		CHECK(lv.seg_first > 1);
		CHECK_INT(lv.restarts, 0);
		/* read too rarely: the records between were dropped unread */
		CHECK_INT(tg_live_read(&rare, seg1, &d), 0);
		CHECK_INT(rare.restarts, 1);
		CHECK_INT(fresh(&ref, seg1, 0), 0);
		CHECK(same_figures(&rare, &ref, "segments read rarely"));
		CHECK(ref.seg_first > 1);
		tg_live_release(&ref);
	}
	tg_live_release(&lv);
	tg_live_release(&rare);
	rm_dir(segs);
	rm_dir(dir);
}

int main(void)
{
	test_prefixes(0);
	test_rotation(0);
	if (tg_cap_can_compress()) {
		test_prefixes(1);
		test_rotation(1);
	}
	TG_TEST_DONE();
}
