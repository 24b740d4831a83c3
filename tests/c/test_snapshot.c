/*
 * test_snapshot.c - heap snapshots and summaries: reading (plain, gzip, run
 * directories), sorting, diffing, histogram bin names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "acct_out.h"
#include "snapshot.h"
#include "tg_test.h"

static char dir[] = "/tmp/tg_test_snap.XXXXXX";

static const char *write_file(const char *name, const char *data, int gz)
{
	static char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (gz) {
		gzFile g = gzopen(path, "wb");
		gzwrite(g, data, (unsigned)strlen(data));
		gzclose(g);
	} else {
		FILE *f = fopen(path, "w");
		fputs(data, f);
		fclose(f);
	}
	return path;
}

static const char snap_a[] =
	"# threadgraph snapshot 1\n# label: a\n"
	"100 1 500 5 x.py:1:f<-x.py:9:main\n"
	"40 2 40 2 <no python frame>\n";
static const char snap_b[] =
	"# threadgraph snapshot 1\n# label: b b\n"
	"1000 1 1000 1 y.py:3:leak with space<-x.py:9:main\n"
	"100 1 900 9 x.py:1:f<-x.py:9:main\n"
	"10 1 50 3 <no python frame>\n";

static void test_read_and_sort(void)
{
	struct tg_snapshot s;
	struct tg_diag d = { .strict = 1 };

	CHECK_INT(tg_snapshot_read(&s, write_file("snapshot-1-a", snap_a, 0), &d), 0);
	CHECK_INT(s.n, 2);
	CHECK_STR(s.label, "a");
	CHECK_INT(s.live_bytes, 140);
	CHECK_INT(s.total_bytes, 540);
	tg_snapshot_sort(&s, TG_SNAP_LIVE);
	CHECK_STR(s.sites[0].thread, "-");
	CHECK_STR(s.sites[0].site, "x.py:1:f<-x.py:9:main");
	tg_snapshot_sort(&s, TG_SNAP_TOTAL);
	CHECK_INT(s.sites[0].total_bytes, 500);
	tg_snapshot_release(&s);
	tg_snapshot_release(&s);  /* safe twice */

	CHECK_INT(tg_snapshot_read(&s, write_file("snapshot-2-b.gz", snap_b, 1), &d), 0);
	CHECK_INT(s.n, 3);
	CHECK_STR(s.label, "b b");
	tg_snapshot_sort(&s, TG_SNAP_LIVE);
	CHECK_STR(s.sites[0].site, "y.py:3:leak with space<-x.py:9:main");
	tg_snapshot_release(&s);

	/* a directory: its highest-numbered snapshot, then its final one */
	CHECK_INT(tg_snapshot_read(&s, dir, &d), 0);
	CHECK_STR(s.label, "b b");
	tg_snapshot_release(&s);
	write_file("snapshot-1-final", snap_a, 0);
	CHECK_INT(tg_snapshot_read(&s, dir, &d), 0);
	CHECK_STR(s.label, "a");
	tg_snapshot_release(&s);

	CHECK_INT(tg_snapshot_read(&s, write_file("bad", "1 2 3 x\n", 0), &d), -1);
	CHECK(strstr(d.msg, "not a snapshot line") == NULL || d.malformed == 1);
	d.strict = 0;
	d.malformed = 0;
	CHECK_INT(tg_snapshot_read(&s, write_file("nohdr", "1 2 3 4 x\n", 0), &d), -1);
	CHECK(strstr(d.msg, "not a threadgraph snapshot") != NULL);
}

static void test_diff(void)
{
	struct tg_snapshot a, b;
	struct tg_snap_delta *v = NULL;
	struct tg_diag d = { .strict = 1 };
	size_t n = 0;

	CHECK_INT(tg_snapshot_read(&a, write_file("da", snap_a, 0), &d), 0);
	CHECK_INT(tg_snapshot_read(&b, write_file("db", snap_b, 0), &d), 0);
	CHECK_INT(tg_snapshot_diff(&a, &b, &v, &n, &d), 0);
	/* f: live unchanged but total grew: kept; leak first, no-frame last */
	CHECK_INT(n, 3);
	CHECK_STR(v[0].site, "y.py:3:leak with space<-x.py:9:main");
	CHECK_INT(v[0].live_bytes, 1000);
	CHECK_INT(v[0].base_live, 0);
	CHECK_STR(v[1].site, "x.py:1:f<-x.py:9:main");
	CHECK_INT(v[1].live_bytes, 0);
	CHECK_INT(v[1].total_bytes, 400);
	CHECK_STR(v[2].site, "<no python frame>");
	CHECK_INT(v[2].live_bytes, -30);
	CHECK_INT(v[2].live_count, -1);
	free(v);
	/* identical snapshots: nothing */
	CHECK_INT(tg_snapshot_diff(&a, &a, &v, &n, &d), 0);
	CHECK_INT(n, 0);
	free(v);
	tg_snapshot_release(&a);
	tg_snapshot_release(&b);
}

static void test_summary(void)
{
	struct tg_summary s;
	struct tg_diag d = { .strict = 1 };
	char sub[600];

	snprintf(sub, sizeof(sub), "%s/run", dir);
	CHECK_INT(mkdir(sub, 0755), 0);
	write_file("run/summary.txt.gz",
		   "# threadgraph summary 1\nprocess\tpeak_bytes\t5000\nprocess\tlive_bytes\t-3\n"
		   "thread\talloc_calls\t7\tMain Thread\nhist\talloc\t17\t10\tthread Main Thread\n"
		   "hist\tfree\t0\t2\tprocess\nwindow\tpeak_bytes\t9\tw\n", 1);
	CHECK_INT(tg_summary_read(&s, sub, &d), 0);
	CHECK_INT(s.process.fig[5], 5000);
	CHECK_INT(s.process.fig[4], -3);
	CHECK_INT(s.process.hist_free[0], 2);
	CHECK_INT(s.n_threads, 1);
	CHECK_STR(s.threads[0].name, "Main Thread");
	CHECK_INT(s.threads[0].fig[2], 7);
	CHECK_INT(s.threads[0].hist_alloc[17], 10);
	CHECK_INT(s.n_windows, 1);
	CHECK_INT(s.windows[0].fig[5], 9);
	CHECK_INT(s.has_freed_by, 0);  /* a summary before cross-thread frees */
	CHECK_INT(s.n_pairs, 0);
	CHECK_INT(s.threads[0].has_live_at_end, 0);
	tg_summary_release(&s);
	/* cross-thread frees: the pairs, the lost bytes, each thread's live at end */
	write_file("run/summary.txt",
		   "# threadgraph summary 1\nthread\tpeak_bytes\t3\tP q\n"
		   "process\tfreed_by_lost_bytes\t0\nthread\tlive_at_end_bytes\t-4\tP q\n"
		   "freed_by\t2001140\t40\tP q\tC\nfreed_by\t88\t2\tC\tP q\n", 0);
	CHECK_INT(tg_summary_read(&s, sub, &d), 0);
	CHECK_INT(s.has_freed_by, 1);
	CHECK_INT(s.freed_by_lost, 0);
	CHECK_INT(s.n_threads, 1);
	CHECK_INT(s.threads[0].has_live_at_end, 1);
	CHECK_INT(s.threads[0].live_at_end, -4);
	CHECK_INT(s.n_pairs, 2);
	CHECK_STR(s.pairs[0].allocated_in, "P q");
	CHECK_STR(s.pairs[0].freed_in, "C");
	CHECK_INT(s.pairs[0].bytes, 2001140);
	CHECK_INT(s.pairs[0].blocks, 40);
	CHECK_STR(s.pairs[1].allocated_in, "C");
	tg_summary_release(&s);
	write_file("run/summary.txt", "# threadgraph summary 1\nfreed_by\tx\t1\ta\tb\n", 0);
	CHECK_INT(tg_summary_read(&s, sub, &d), -1);  /* strict: bytes not a number */
	write_file("run/summary.txt", "# threadgraph summary 1\nhist\talloc\t99\t1\tprocess\n", 0);
	CHECK_INT(tg_summary_read(&s, sub, &d), -1);  /* plain first; bin out of range */
}

/* Format 2: two threads (one with a space), f called from main via two paths. */
static const char snap_v2[] =
	"# threadgraph snapshot 2\n# label: v2\n# pid: 7\n# run_start: 100.000001\n"
	"# thread: 0 Main Thread\n# thread: 3 w1\n"
	"# columns: ID PARENT THREAD LIVE_BYTES LIVE_COUNT TOTAL_BYTES TOTAL_COUNT CALL\n"
	"0 - - 5 1 5 1 <no python frame>\n"
	"2 - 0 0 0 0 0 m.py:1:main\n"
	"4 2 0 0 0 0 0 m.py:5:a\n"
	"5 4 0 100 1 100 1 m.py:9:f\n"
	"6 2 0 0 0 0 0 m.py:6:b\n"
	"7 6 0 300 3 300 3 m.py:9:f\n"
	"9 - 3 0 0 0 0 m.py:1:main\n"
	"10 9 3 0 0 0 0 m.py:5:a\n"
	"11 10 3 1000 1 2000 2 m.py:9:f\n";

static const struct tg_snap_site *find_site(const struct tg_snapshot *s, const char *thread,
					    const char *site)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->sites[i].thread, thread) && !strcmp(s->sites[i].site, site))
			return &s->sites[i];
	return NULL;
}

static void test_v2_contexts(void)
{
	struct tg_snapshot s, o;
	struct tg_diag d = { .strict = 1 };
	const struct tg_snap_site *e;
	struct tg_snap_delta *v = NULL;
	size_t n = 0;

	CHECK_INT(tg_snapshot_read(&s, write_file("snapshot-1-v2", snap_v2, 0), &d), 0);
	CHECK_INT(s.version, 2);
	CHECK_INT(s.n_nodes, 9);
	CHECK_INT(s.live_bytes, 1405);
	CHECK_STR(s.run, "7 100.000001");
	/* the default depth: every counted node is a site of its own */
	CHECK_INT(s.n, 4);
	e = find_site(&s, "Main Thread", "m.py:9:f<-m.py:6:b<-m.py:1:main");
	CHECK(e && e->live_bytes == 300 && e->live_count == 3);
	e = find_site(&s, "w1", "m.py:9:f<-m.py:5:a<-m.py:1:main");
	CHECK(e && e->total_bytes == 2000);
	CHECK(find_site(&s, "-", "<no python frame>") != NULL);
	/* depth 1: per function and thread */
	CHECK_INT(tg_snapshot_group(&s, 1, 0, &d), 0);
	CHECK_INT(s.n, 3);
	e = find_site(&s, "Main Thread", "m.py:9:f");
	CHECK(e && e->live_bytes == 400 && e->live_count == 4);
	/* depth 2, threads merged: f<-a of both threads is one site */
	CHECK_INT(tg_snapshot_group(&s, 2, 1, &d), 0);
	CHECK_INT(s.n, 3);
	e = find_site(&s, "*", "m.py:9:f<-m.py:5:a");
	CHECK(e && e->live_bytes == 1100 && e->total_count == 3);
	tg_snapshot_sort(&s, TG_SNAP_LIVE);
	CHECK_STR(s.sites[0].site, "m.py:9:f<-m.py:5:a");
	/* all frames */
	CHECK_INT(tg_snapshot_group(&s, 0, 0, &d), 0);
	CHECK(find_site(&s, "w1", "m.py:9:f<-m.py:5:a<-m.py:1:main") != NULL);

	/* same run: per thread diff against a version 1 snapshot works too */
	CHECK_INT(tg_snapshot_read(&o, write_file("snapshot-2-v2", snap_v2, 0), &d), 0);
	CHECK(tg_snapshot_same_run(&s, &o));
	CHECK_INT(tg_snapshot_group(&s, 5, 0, &d), 0);
	CHECK_INT(tg_snapshot_diff(&s, &o, &v, &n, &d), 0);
	CHECK_INT(n, 0);
	free(v);
	tg_snapshot_release(&o);
	CHECK_INT(tg_snapshot_read(&o, write_file("v1", snap_a, 0), &d), 0);
	CHECK(!tg_snapshot_same_run(&s, &o));
	tg_snapshot_release(&o);
	tg_snapshot_release(&s);
}

/* Malformed format-2 input: each bad line is reported with its line number and
 * left out (with the nodes that hang from it); strict mode makes it an error. */
static unsigned long warned_line;
static char warned_why[128];

static void note_warning(void *ctx, const char *path, unsigned long lineno, const char *why)
{
	(void)ctx;
	(void)path;
	warned_line = lineno;
	snprintf(warned_why, sizeof(warned_why), "%s", why);
}

static void test_v2_malformed(void)
{
	static const struct {
		const char *body, *why;
	} bad[] = {
		{ "5 - 0 1 1 1 1 x\n5 - 0 1 1 1 1 y\n", "node id not above the previous one" },
		{ "5 4 0 1 1 1 1 x\n", "parent node not listed before" },
		{ "5 - 9 1 1 1 1 x\n", "thread not listed in the header" },
		{ "5 - 0 1 1 1 x\n", "not a snapshot line" },
		{ "5 - 0 1 1 1 1 \n", "not a snapshot line" },
		{ "-5 - 0 1 1 1 1 x\n", "not a snapshot line" },
		{ "5 - 0 1 1 1 1 x\n# thread: 1 late\n", "not a thread or label line" },
		{ "99999999999999999999 - 0 1 1 1 1 x\n", "not a snapshot line" },
		{ "5 - 0 1 1 1 1 x\x1b[2Jy\n", "control character in the call" },
		{ "# thread: 2 \x1b]0;x\n5 - 0 1 1 1 1 x\n", "not a thread or label line" },
	};
	char body[512];
	struct tg_snapshot s;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct tg_diag d = { .strict = 0, .warn = note_warning };
		warned_line = 0;
		snprintf(body, sizeof(body), "# threadgraph snapshot 2\n# thread: 0 t\n%s", bad[i].body);
		CHECK_INT(tg_snapshot_read(&s, write_file("bad2", body, 0), &d), 0);
		CHECK_INT(d.malformed, 1);
		CHECK_STR(warned_why, bad[i].why);
		CHECK(warned_line >= 3);
		tg_snapshot_release(&s);
		d.strict = 1;
		CHECK_INT(tg_snapshot_read(&s, write_file("bad2", body, 0), &d), -1);
	}
	{
		struct tg_diag d = { .strict = 0 };
		CHECK_INT(tg_snapshot_read(&s, write_file("v9", "# threadgraph snapshot 9\n1 2 3 4 x\n",
							  0), &d), -1);
		CHECK(strstr(d.msg, "v9:1: unsupported snapshot format") != NULL);
	}
}

static void test_bin_names(void)
{
	char b[48];
	tg_hist_bin_name(b, sizeof(b), 0);
	CHECK_STR(b, "0");
	tg_hist_bin_name(b, sizeof(b), 1);
	CHECK_STR(b, "1");
	tg_hist_bin_name(b, sizeof(b), 2);
	CHECK_STR(b, "2-3");
	tg_hist_bin_name(b, sizeof(b), 10);
	CHECK_STR(b, "512-1023");
	tg_hist_bin_name(b, sizeof(b), 11);
	CHECK_STR(b, "1Ki-2Ki");
	tg_hist_bin_name(b, sizeof(b), 21);
	CHECK_STR(b, "1Mi-2Mi");
}

/* Creates an empty file NAME in SUB (a directory under dir). */
static void touch(const char *sub, const char *name)
{
	char path[600];
	FILE *f;
	snprintf(path, sizeof(path), "%s/%s", sub, name);
	f = fopen(path, "w");
	if (f)
		fclose(f);
}

/* The file name part of PATH (tg_snapshot_find's result), or NULL. */
static const char *base(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;
	return s ? s + 1 : path;
}

static void test_find(void)
{
	char sub[560], *p;
	struct tg_diag d = {0};

	snprintf(sub, sizeof(sub), "%s/find", dir);
	CHECK(mkdir(sub, 0700) == 0);
	/* nothing there yet: a message for each pick */
	p = tg_snapshot_find(sub, TG_SNAP_PICK_LAST, &d);
	CHECK(p == NULL && strstr(d.msg, "no snapshot in"));
	p = tg_snapshot_find(sub, TG_SNAP_PICK_PEAK, &d);
	CHECK(p == NULL && strstr(d.msg, "no live-at-peak snapshot"));
	/* periodic snapshots only: the highest-numbered one */
	touch(sub, "snapshot-3-periodic");
	touch(sub, "snapshot-12-periodic.gz");
	touch(sub, "snapshot-2-periodic");
	touch(sub, "summary.txt");
	p = tg_snapshot_find(sub, TG_SNAP_PICK_LAST, &d);
	CHECK_STR(base(p), "snapshot-12-periodic.gz");
	free(p);
	/* a final one wins over higher periodic ones; files being written and
	 * names that only look alike are skipped */
	touch(sub, "snapshot-4-final");
	touch(sub, "snapshot-9-final.gz");
	touch(sub, "snapshot-30-final.tmp");
	touch(sub, "snapshot-40-finally");
	touch(sub, "snapshot-x-final");
	touch(sub, "snapshot-50");
	p = tg_snapshot_find(sub, TG_SNAP_PICK_LAST, &d);
	CHECK_STR(base(p), "snapshot-9-final.gz");
	free(p);
	/* peaks: only "-peak" ones count, highest number first */
	p = tg_snapshot_find(sub, TG_SNAP_PICK_PEAK, &d);
	CHECK(p == NULL);
	touch(sub, "snapshot-5-peak");
	touch(sub, "snapshot-7-peak.gz");
	touch(sub, "snapshot-8-peak.tmp");
	touch(sub, "snapshot-60-peaks");
	p = tg_snapshot_find(sub, TG_SNAP_PICK_PEAK, &d);
	CHECK_STR(base(p), "snapshot-7-peak.gz");
	CHECK(p && !strncmp(p, sub, strlen(sub)));
	free(p);
	/* a directory that cannot be opened */
	snprintf(sub, sizeof(sub), "%s/missing", dir);
	p = tg_snapshot_find(sub, TG_SNAP_PICK_LAST, &d);
	CHECK(p == NULL && strstr(d.msg, "unable to open"));
}

int main(void)
{
	if (!mkdtemp(dir))
		return 2;
	test_read_and_sort();
	test_diff();
	test_v2_contexts();
	test_v2_malformed();
	test_summary();
	test_bin_names();
	test_find();
	{
		char cmd[600];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", dir);
	}
	TG_TEST_DONE();
}
