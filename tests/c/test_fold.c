/*
 * test_fold.c - the frame tree (fold.c), its loaders (fold_load.c) on small
 * files, the folded writer, the flame graph SVG (flamesvg.c) and the markup
 * helpers (markup.c).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flamesvg.h"
#include "fold.h"
#include "markup.h"
#include "tg_test.h"

static char dir[] = "/tmp/tg_test_fold.XXXXXX";

static void write_file(const char *name, const char *data)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	fputs(data, f);
	fclose(f);
}

/* Runs fn(arg) into a memory stream; returns the malloc'ed text. */
static char *folded_text(const struct tg_fold *f)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	tg_fold_write(f, m);
	fclose(m);
	return buf;
}

static void test_tree(void)
{
	struct tg_fold f;
	struct tg_diag d = { 0 };
	size_t a, b, c, a2;
	char *text;

	tg_fold_init(&f);
	CHECK_INT(tg_fold_child(&f, 0, "t", 1, TG_FOLD_THREAD, &a, &d), 0);
	CHECK_INT(tg_fold_child(&f, a, "b", 1, TG_FOLD_CALL, &b, &d), 0);
	CHECK_INT(tg_fold_child(&f, a, "a", 1, TG_FOLD_CALL, &c, &d), 0);
	CHECK_INT(tg_fold_child(&f, 0, "t", 1, TG_FOLD_THREAD, &a2, &d), 0);
	CHECK_INT(a2, a);  /* found, not made again */
	f.v[b].self = 5;
	f.v[c].self = 7;
	f.v[a].self = 1;
	f.metric = tg_fold_metric_find("alloc");
	CHECK_INT(tg_fold_finish(&f, &d), 0);
	CHECK_INT(f.v[0].total, 13);
	CHECK_INT(f.v[a].total, 13);
	CHECK_INT(f.v[a].count, 3);
	CHECK_INT(f.v[a].child, c);  /* children by name */
	text = folded_text(&f);
	CHECK_STR(text, "t 1\nt;a 7\nt;b 5\n");
	free(text);
	tg_fold_release(&f);

	/* many children: the tables grow and every frame stays findable */
	tg_fold_init(&f);
	for (int i = 0; i < 5000; i++) {
		char name[32];
		int n = snprintf(name, sizeof(name), "f%d", i % 2500);
		CHECK_INT(tg_fold_child(&f, 0, name, (size_t)n, TG_FOLD_CALL, &a, &d), 0);
		f.v[a].self++;
	}
	CHECK_INT(f.n, 2501);
	f.metric = tg_fold_metric_find("alloc");
	tg_fold_finish(&f, &d);
	CHECK_INT(f.v[0].total, 5000);
	tg_fold_release(&f);
}

static void test_frame_text(void)
{
	char *buf = NULL;
	size_t cap = 0;

	CHECK_INT(tg_fold_frame_text(&buf, &cap, "a;b.py", 6, "12", 2, "f\x01g", 3), 15);
	CHECK_STR(buf, "f?g (a,b.py:12)");
	CHECK_INT(tg_fold_frame_text(&buf, &cap, "<no python frame>", 17, NULL, 0, NULL, 0), 17);
	CHECK_STR(buf, "<no python frame>");
	free(buf);
}

static void test_load(void)
{
	struct tg_fold f;
	struct tg_diag d = { 0 };
	struct tg_fold_opts o = { dir, NULL, NULL, 0, 1 };
	char *text;

	write_file("T.stack", "1.000000#m.py:1:main\n 1.000100#m.py:5:sub\n 1.000300#m.py:5:sub\n");
	write_file("T.mem", "1.000200#m.py:6:sub=>100\n1.000400#m.py:6:sub=>-40\n"
		   "1.001000#m.py:2:main=>90\n");
	write_file("snapshot-1-final", "# threadgraph snapshot 2\n# sampled: 512\n# thread: 0 T\n"
		   "1 - 0 10 1 20 2 m.py:1:main\n2 1 0 5 1 7 1 m.py:5:sub\n");
	o.metric = tg_fold_metric_find("delta");
	tg_fold_init(&f);
	CHECK_INT(tg_fold_load(&f, &o, &d), 0);
	text = folded_text(&f);
	/* main: 90 - (100 - 40) = 30; sub: +100 and -40 (left out, in neg) */
	CHECK_STR(text, "T;main (m.py:1) 30\nT;main (m.py:1);sub (m.py:5) 100\n");
	CHECK_INT(f.neg, 40);
	free(text);
	tg_fold_release(&f);

	o.metric = tg_fold_metric_find("time");
	o.merge_threads = 1;
	tg_fold_init(&f);
	CHECK_INT(tg_fold_load(&f, &o, &d), 0);
	text = folded_text(&f);
	CHECK_STR(text, "main (m.py:1) 800\nmain (m.py:1);sub (m.py:5) 200\n");
	free(text);
	tg_fold_release(&f);

	o.metric = tg_fold_metric_find("alloc");
	o.merge_threads = 0;
	tg_fold_init(&f);
	CHECK_INT(tg_fold_load(&f, &o, &d), 0);
	CHECK_INT(f.sampled, 512);
	text = folded_text(&f);
	CHECK_STR(text, "T;main (m.py:1) 20\nT;main (m.py:1);sub (m.py:5) 7\n");
	free(text);
	tg_fold_release(&f);

	o.metric = tg_fold_metric_find("peak");
	tg_fold_init(&f);
	CHECK_INT(tg_fold_load(&f, &o, &d), -1);
	CHECK(strstr(d.msg, "snapshot-N-peak") != NULL);
	tg_fold_release(&f);
}

static void test_svg(void)
{
	struct tg_fold f;
	struct tg_diag d = { 0 };
	struct tg_flamesvg_opts so = { "g1", "a <title> & more", 1200, 0.1, 1 };
	struct tg_flamesvg_stats st;
	size_t a, b, len = 0;
	char *buf = NULL;
	FILE *m;

	tg_fold_init(&f);
	f.metric = tg_fold_metric_find("alloc");
	tg_fold_child(&f, 0, "big", 3, TG_FOLD_CALL, &a, &d);
	f.v[a].self = 1000000;
	for (int i = 0; i < 100; i++) {  /* 100 frames of 1 byte: 0.001 px each */
		char name[16];
		int n = snprintf(name, sizeof(name), "tiny%d", i);
		tg_fold_child(&f, a, name, (size_t)n, TG_FOLD_CALL, &b, &d);
		f.v[b].self = 1;
	}
	tg_fold_finish(&f, &d);
	m = open_memstream(&buf, &len);
	CHECK_INT(tg_flamesvg_write(m, &f, &so, &st, &d), 0);
	fclose(m);
	CHECK_INT(st.drawn, 2);     /* all, big */
	CHECK_INT(st.hidden, 100);
	CHECK_INT(st.boxes, 1);     /* 100 bytes together: 0.1 px */
	CHECK(strstr(buf, "a &lt;title&gt; &amp; more") != NULL);
	CHECK(strstr(buf, "[100 small frames]") != NULL);
	CHECK(strstr(buf, "100 frames narrower than 0.1 px hidden") != NULL);
	CHECK(strncmp(buf, "<?xml", 5) == 0);
	free(buf);
	tg_fold_release(&f);
}

static void test_markup(void)
{
	char *buf = NULL, g[32];
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	tg_xml_text(m, "<a&\"'>\n\x01\xff\xc3\xa9", 11);
	tg_base64_write(m, (const unsigned char *)" Man", 4);
	fclose(m);
	CHECK_STR(buf, "&lt;a&amp;&quot;&#39;&gt;\n?\xef\xbf\xbd\xc3\xa9IE1hbg==");
	free(buf);
	tg_fmt_grouped(g, -1234567);
	CHECK_STR(g, "-1,234,567");
	tg_fmt_grouped(g, 0);
	CHECK_STR(g, "0");
	tg_fmt_bytes_short(g, 1536);
	CHECK_STR(g, "1.50 KB");
}

int main(void)
{
	char cmd[600];

	if (!mkdtemp(dir))
		return 2;
	test_tree();
	test_frame_text();
	test_load();
	test_svg();
	test_markup();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		return 2;
	TG_TEST_DONE();
}
