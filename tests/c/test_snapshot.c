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
	tg_summary_release(&s);
	write_file("run/summary.txt", "# threadgraph summary 1\nhist\talloc\t99\t1\tprocess\n", 0);
	CHECK_INT(tg_summary_read(&s, sub, &d), -1);  /* plain first; bin out of range */
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

int main(void)
{
	if (!mkdtemp(dir))
		return 2;
	test_read_and_sort();
	test_diff();
	test_summary();
	test_bin_names();
	{
		char cmd[600];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", dir);
	}
	TG_TEST_DONE();
}
