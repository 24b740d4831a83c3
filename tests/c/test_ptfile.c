/* Unit tests of memg --held's binary temporary series (ptfile.c) and of the
 * thinning as points are written (thin.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture_read.h"
#include "ptfile.h"
#include "thin.h"
#include "tg_test.h"

struct sink {
	char buf[4096];
	size_t n;
};

static void sink_write(void *ctx, const void *data, size_t len)
{
	struct sink *s = ctx;

	memcpy(s->buf + s->n, data, len);
	s->n += len;
	s->buf[s->n] = '\0';
}

int main(void)
{
	char dir[] = "/tmp/tg-ptfile-XXXXXX", text[TG_PT_TEXT_MAX + 1];
	struct tg_ptfile f = TG_PTFILE_INIT;
	struct tg_diag d = { 0 };
	struct tg_pt p;
	struct tg_thin t;
	struct sink s = { .n = 0 };
	double x;

	CHECK(mkdtemp(dir) != NULL);
	CHECK_INT(tg_ptfile_open(&f, dir, ".s.bin", &d), 0);
	CHECK(rmdir(dir) == 0);  /* the file is unlinked at once: the folder is empty */
	/* a capture's time: 17 bytes, its value strtod's of its text */
	CHECK_INT(tg_ptfile_put_us(&f, 1732945123123457LL, -42, &x, &d), 0);
	CHECK(x == strtod("1732945123.123457", NULL));
	CHECK_INT(tg_ptfile_put(&f, 1.5, 7, "1.500", 5, &d), 0);
	for (int i = 0; i < 5000; i++)  /* more than a buffer */
		CHECK_INT(tg_ptfile_put_us(&f, 1000000LL * i, i, &x, &d), 0);
	CHECK_INT(tg_ptfile_rewind(&f, &d), 0);
	CHECK_INT(tg_ptfile_get(&f, &p, &d), 1);
	CHECK(p.has_us && p.v == -42 && p.x == strtod("1732945123.123457", NULL));
	text[tg_pt_text(&p, text)] = '\0';
	CHECK_STR(text, "1732945123.123457");
	CHECK_INT(tg_ptfile_get(&f, &p, &d), 1);
	CHECK(!p.has_us && p.v == 7 && p.x == 1.5);
	CHECK_STR(p.xs, "1.500");
	for (int i = 0; i < 5000; i++) {
		CHECK_INT(tg_ptfile_get(&f, &p, &d), 1);
		CHECK(p.v == i && p.x == (double)i);
	}
	CHECK_INT(tg_ptfile_get(&f, &p, &d), 0);
	/* read again from the start */
	CHECK_INT(tg_ptfile_rewind(&f, &d), 0);
	CHECK_INT(tg_ptfile_get(&f, &p, &d), 1);
	CHECK(p.v == -42);
	tg_ptfile_release(&f);

	/* 2 columns over 0..10: of each, the first, lowest, highest, last, once
	 * each and in order */
	tg_thin_init(&t, sink_write, &s, 0, 10, 2);
	{
		static const double xy[][2] = { { 0, 5 }, { 1, 1 }, { 2, 9 }, { 3, 4 }, { 4, 6 },
						{ 5, 3 }, { 6, 3 }, { 10, 8 } };
		for (size_t i = 0; i < sizeof(xy) / sizeof(xy[0]); i++) {
			char line[32];
			int len = snprintf(line, sizeof(line), "%g %g\n", xy[i][0], xy[i][1]);
			tg_thin_point(&t, xy[i][0], xy[i][1], line, (size_t)len);
		}
	}
	tg_thin_finish(&t);
	CHECK_STR(s.buf, "0 5\n1 1\n2 9\n4 6\n5 3\n6 3\n10 8\n");
	/* columns 0: every point, as given */
	s.n = 0;
	tg_thin_init(&t, sink_write, &s, 0, 10, 0);
	tg_thin_point(&t, 1, 1, "a\n", 2);
	tg_thin_point(&t, 1, 1, "b\n", 2);
	tg_thin_finish(&t);
	CHECK_STR(s.buf, "a\nb\n");
	TG_TEST_DONE();
}
