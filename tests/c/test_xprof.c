/*
 * test_xprof.c - the export model (xprof.c): samples, stacks and interning from
 * a snapshot and from a delta frame tree; the pprof encoding walked field by
 * field with a protobuf wire-format reader of its own; the speedscope text.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fold.h"
#include "pprof.h"
#include "snapshot.h"
#include "speedscope.h"
#include "tg_test.h"
#include "xprof.h"

static char dir[] = "/tmp/tg_xprof_XXXXXX";

static const char *write_file(const char *name, const char *text)
{
	static char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	return path;
}

/* The frame at depth K (0: the leaf) of sample S, as "FUNC FILE LINE". */
static const char *frame_at(const struct tg_xprof *x, const struct tg_xsample *s, size_t k)
{
	static char buf[256];
	const struct tg_xframe *fr = &x->frames[x->stack_ids[s->stack + k]];

	snprintf(buf, sizeof(buf), "%s %s %lld", tg_xprof_str(x, x->funcs[fr->func].name),
		 tg_xprof_str(x, x->funcs[fr->func].file), (long long)fr->line);
	return buf;
}

static void test_from_snapshot(void)
{
	struct tg_snapshot s;
	struct tg_xprof x;
	struct tg_diag d = { 0 };
	const char *path = write_file("snapshot-1-final",
		"# threadgraph snapshot 2\n# thread: 0 Main\n# thread: 1 Loader\n"
		"# columns: ID PARENT THREAD LIVE_BYTES LIVE_COUNT TOTAL_BYTES TOTAL_COUNT CALL\n"
		"1 - 0 0 0 0 0 /m.py:1:main\n"
		"2 1 - 100 1 300 3 /a.py:5:load\n"
		"3 - 1 0 0 0 0 /m.py:1:main\n"
		"4 3 - 7 1 7 1 /a.py:5:load\n"
		"5 4 - 0 0 0 0 /a.py:9:load\n"          /* same function, another line */
		"6 5 - 1 1 2 2 <no python frame>\n");

	CHECK_INT(tg_snapshot_read(&s, path, &d), 0);
	tg_xprof_init(&x);
	CHECK_INT(tg_xprof_from_snapshot(&x, &s, &d), 0);
	CHECK_INT(x.from, TG_XPROF_ACCOUNTING);
	CHECK_STR(tg_xprof_str(&x, 0), "");
	CHECK_INT(x.n_samples, 3);                 /* the nodes with counters */
	CHECK_INT(x.n_frames, 4);                  /* main, load:5, load:9, <no python frame> */
	CHECK_INT(x.n_funcs, 3);                   /* main, load, <no python frame> */
	CHECK_INT(x.n_threads, 2);
	CHECK_STR(tg_xprof_str(&x, x.threads[0]), "Main");
	CHECK_STR(tg_xprof_str(&x, x.threads[1]), "Loader");
	CHECK_INT(x.samples[0].depth, 2);
	CHECK_STR(frame_at(&x, &x.samples[0], 0), "load /a.py 5");  /* leaf first */
	CHECK_STR(frame_at(&x, &x.samples[0], 1), "main /m.py 1");
	CHECK_INT(x.samples[0].v[TG_XV_ALLOC_OBJECTS], 3);
	CHECK_INT(x.samples[0].v[TG_XV_ALLOC_SPACE], 300);
	CHECK_INT(x.samples[0].v[TG_XV_INUSE_OBJECTS], 1);
	CHECK_INT(x.samples[0].v[TG_XV_INUSE_SPACE], 100);
	CHECK_STR(tg_xprof_str(&x, x.samples[1].thread), "Loader");
	/* one frame shared by both threads' load:5 */
	CHECK_INT(x.stack_ids[x.samples[0].stack], x.stack_ids[x.samples[1].stack]);
	CHECK_INT(x.samples[2].depth, 4);
	CHECK_STR(frame_at(&x, &x.samples[2], 0), "<no python frame>  0");
	CHECK_STR(frame_at(&x, &x.samples[2], 1), "load /a.py 9");
	CHECK_STR(frame_at(&x, &x.samples[2], 3), "main /m.py 1");
	tg_xprof_release(&x);
	tg_xprof_release(&x);  /* safe twice */
	tg_snapshot_release(&s);
}

static void test_from_fold(void)
{
	struct tg_fold f;
	struct tg_xprof x;
	struct tg_diag d = { 0 };
	size_t t, a, b, c;
	static const char ta[] = "main (/m.py:1)", tb[] = "f (/dir (x)/a.py:12)", tc[] = "odd (name)";

	tg_fold_init(&f);
	CHECK_INT(tg_fold_child(&f, 0, "T 1", 3, TG_FOLD_THREAD, &t, &d), 0);
	CHECK_INT(tg_fold_child(&f, t, ta, strlen(ta), TG_FOLD_CALL, &a, &d), 0);
	CHECK_INT(tg_fold_child(&f, a, tb, strlen(tb), TG_FOLD_CALL, &b, &d), 0);
	CHECK_INT(tg_fold_child(&f, b, tc, strlen(tc), TG_FOLD_CALL, &c, &d), 0);
	f.v[b].self = 500;
	f.v[b].grew = 2;
	f.v[c].self = 0;   /* no positive own delta: no sample */
	CHECK_INT(tg_fold_finish(&f, &d), 0);
	tg_xprof_init(&x);
	CHECK_INT(tg_xprof_from_fold(&x, &f, &d), 0);
	CHECK_INT(x.from, TG_XPROF_DELTA);
	CHECK_INT(x.n_samples, 1);
	CHECK_STR(tg_xprof_str(&x, x.samples[0].thread), "T 1");
	CHECK_STR(frame_at(&x, &x.samples[0], 0), "f /dir (x)/a.py 12");
	CHECK_STR(frame_at(&x, &x.samples[0], 1), "main /m.py 1");
	CHECK_INT(x.samples[0].v[TG_XV_ALLOC_SPACE], 500);
	CHECK_INT(x.samples[0].v[TG_XV_INUSE_SPACE], 500);
	CHECK_INT(x.samples[0].v[TG_XV_ALLOC_OBJECTS], 2);
	CHECK_INT(x.n_frames, 3);   /* the call without a sample still has its frame */
	CHECK_STR(tg_xprof_str(&x, x.funcs[x.frames[2].func].name), "odd (name)");
	tg_xprof_release(&x);
	tg_fold_release(&f);
}

/* A protobuf wire-format reader: the next field of [*p, end) into *field,
 * *wire, and *v (varint) or (*data, *len); 1, 0 at the end, -1 malformed. */
static int pb_next(const unsigned char **p, const unsigned char *end, unsigned *field,
		   unsigned *wire, uint64_t *v, const unsigned char **data, size_t *len)
{
	uint64_t key = 0, x = 0;
	int sh;

	if (*p == end)
		return 0;
	for (sh = 0; *p < end && sh < 64; sh += 7) {
		key |= (uint64_t)(**p & 0x7f) << sh;
		if (!(*(*p)++ & 0x80))
			break;
	}
	*field = (unsigned)(key >> 3);
	*wire = key & 7;
	for (sh = 0; *p < end && sh < 70; sh += 7) {
		x |= (uint64_t)(**p & 0x7f) << sh;
		if (!(*(*p)++ & 0x80))
			break;
	}
	if (*wire == 0) {
		*v = x;
		return 1;
	}
	if (*wire != 2 || x > (uint64_t)(end - *p))
		return -1;
	*data = *p;
	*len = (size_t)x;
	*p += x;
	return 1;
}

static void test_pprof_encoding(void)
{
	struct tg_snapshot s;
	struct tg_xprof x;
	struct tg_diag d = { 0 };
	unsigned char *buf;
	const unsigned char *p, *end, *data;
	size_t len, n[16] = { 0 };
	unsigned field, wire;
	uint64_t v;
	int r, bad = 0;
	const char *path = write_file("snapshot-2-x",
		"# threadgraph snapshot 2\n# thread: 0 W\n"
		"# columns: ID PARENT THREAD LIVE_BYTES LIVE_COUNT TOTAL_BYTES TOTAL_COUNT CALL\n"
		"1 - 0 -5 1 9223372036854775807 3 /x.py:2:neg\n");

	CHECK_INT(tg_snapshot_read(&s, path, &d), 0);
	tg_xprof_init(&x);
	CHECK_INT(tg_xprof_from_snapshot(&x, &s, &d), 0);
	CHECK_INT(tg_pprof_encode(&x, &buf, &len, &d), 0);
	for (p = buf, end = buf + len; (r = pb_next(&p, end, &field, &wire, &v, &data, &len)) > 0;) {
		if (field < 16)
			n[field]++;
		if (field == 2) {  /* the sample: its packed values */
			const unsigned char *q = data, *qe = data + len, *vd;
			size_t vl;
			while (pb_next(&q, qe, &field, &wire, &v, &vd, &vl) > 0)
				if (field == 2) {
					int64_t vals[4];
					int k = 0;
					const unsigned char *w = vd;
					while (w < vd + vl && k < 4) {
						uint64_t u = 0;
						for (int sh = 0; sh < 70; sh += 7) {
							u |= (uint64_t)(*w & 0x7f) << sh;
							if (!(*w++ & 0x80))
								break;
						}
						vals[k++] = (int64_t)u;
					}
					CHECK_INT(k, 4);
					CHECK_INT(vals[0], 3);
					CHECK_INT(vals[1], INT64_MAX);
					CHECK_INT(vals[2], 1);
					CHECK_INT(vals[3], -5);
					CHECK_INT(vl, 1 + 9 + 1 + 10);  /* -5: ten bytes */
				}
		}
	}
	if (r < 0)
		bad = 1;
	CHECK_INT(bad, 0);
	CHECK_INT(n[1], 4);                /* sample_type */
	CHECK_INT(n[2], 1);                /* sample */
	CHECK_INT(n[4], 1);                /* location */
	CHECK_INT(n[5], 1);                /* function */
	CHECK_INT(n[6], 1 + 8 + 1 + 2 + 4); /* "", 8 type strings, thread, 2 comments, 4 of X */
	CHECK_INT(n[13], 1);               /* comment, packed */
	CHECK_INT(n[3], 0);                /* no mapping */
	free(buf);
	tg_xprof_release(&x);
	tg_snapshot_release(&s);
}

static void test_speedscope_text(void)
{
	struct tg_snapshot s;
	struct tg_xprof x;
	struct tg_diag d = { 0 };
	char *text = NULL;
	size_t size = 0;
	FILE *f;
	const char *path = write_file("snapshot-3-y",
		"# threadgraph snapshot 2\n# thread: 0 A\n# thread: 1 B\n"
		"# columns: ID PARENT THREAD LIVE_BYTES LIVE_COUNT TOTAL_BYTES TOTAL_COUNT CALL\n"
		"1 - 1 0 0 10 1 /b.py:1:b\n"
		"2 - 0 4 1 8 1 /a.py:1:a\n"
		"3 2 - 0 0 6 1 /a.py:2:\"q\"\n"
		"4 - 1 0 0 5 1 /b.py:3:c\n");

	CHECK_INT(tg_snapshot_read(&s, path, &d), 0);
	tg_xprof_init(&x);
	CHECK_INT(tg_xprof_from_snapshot(&x, &s, &d), 0);
	f = open_memstream(&text, &size);
	CHECK_INT(tg_speedscope_write(f, &x, TG_XV_ALLOC_SPACE, "run", &d), 0);
	fclose(f);
	/* threads in order of first sample; each thread's samples together, outermost first */
	CHECK(strstr(text, "\"name\":\"B\",\"unit\":\"bytes\",\"startValue\":0,\"endValue\":15,\n"
		     "\"samples\":[\n[0],\n[3]],\n\"weights\":[10,5]}") != NULL);
	CHECK(strstr(text, "\"name\":\"A\",\"unit\":\"bytes\",\"startValue\":0,\"endValue\":14,\n"
		     "\"samples\":[\n[1],\n[1,2]],\n\"weights\":[8,6]}") != NULL);
	CHECK(strstr(text, "{\"name\":\"\\\"q\\\"\",\"file\":\"/a.py\",\"line\":2}") != NULL);
	free(text);
	text = NULL;
	f = open_memstream(&text, &size);
	CHECK_INT(tg_speedscope_write(f, &x, TG_XV_INUSE_SPACE, "run", &d), 0);
	fclose(f);
	CHECK(strstr(text, "\"name\":\"B\",\"unit\":\"bytes\",\"startValue\":0,\"endValue\":0,\n"
		     "\"samples\":[],\n\"weights\":[]}") != NULL);
	free(text);
	tg_xprof_release(&x);
	tg_snapshot_release(&s);
}

int main(void)
{
	char cmd[64];

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_from_snapshot();
	test_from_fold();
	test_pprof_encoding();
	test_speedscope_text();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	TG_TEST_DONE();
}
