/* Unit tests of memh's site table (sitetab.c) and dump file naming (dumpfile.c). */
#include <stdio.h>
#include <stdlib.h>

#include "dumpfile.h"
#include "graphs.h"
#include "tg_test.h"

static void test_sitetab(void)
{
	struct tg_sitetab t;
	struct tg_diag d = { 0 };
	const struct tg_site_sum *pick[2 * TG_MEMH_SIDE];
	char site[64];
	long k;

	int bad = 0, unsorted = 0;

	tg_sitetab_init(&t);
	/* 5000 sites (forces growth), each added twice; sums (i - 2500) * 2 */
	for (int rep = 0; rep < 2; rep++)
		for (int i = 0; i < 5000; i++) {
			int n = snprintf(site, sizeof(site), "f.py:%d:g", i);
			bad += tg_sitetab_add(&t, site, (size_t)n, i - 2500, &d) != 0;
		}
	CHECK_INT(bad, 0);
	CHECK_INT(t.n, 5000);
	k = tg_sitetab_extremes(&t, TG_MEMH_SIDE, pick);
	CHECK_INT(k, 60);
	CHECK_INT(pick[0]->sum, -5000);
	CHECK_MEM(t.arena + pick[0]->off, pick[0]->len, "f.py:0:g");
	CHECK_INT(pick[29]->sum, -(2500 - 29) * 2);
	CHECK_INT(pick[30]->sum, (4970 - 2500) * 2);
	CHECK_INT(pick[59]->sum, 4999 * 2 - 5000);
	CHECK_MEM(t.arena + pick[59]->off, pick[59]->len, "f.py:4999:g");
	for (long i = 1; i < k; i++)
		unsorted += pick[i - 1]->sum > pick[i]->sum;
	CHECK_INT(unsorted, 0);
	tg_sitetab_release(&t);

	/* few sites, zero sums left out, one side only */
	tg_sitetab_init(&t);
	tg_sitetab_add(&t, "a:1:f", 5, 0, &d);
	tg_sitetab_add(&t, "b:1:f", 5, 10, &d);
	tg_sitetab_add(&t, "c:1:f", 5, 20, &d);
	tg_sitetab_add(&t, "a:1:f", 5, 0, &d);
	k = tg_sitetab_extremes(&t, TG_MEMH_SIDE, pick);
	CHECK_INT(k, 2);
	CHECK_INT(pick[0]->sum, 10);
	CHECK_INT(pick[1]->sum, 20);
	tg_sitetab_release(&t);
	tg_sitetab_init(&t);
	CHECK_INT(tg_sitetab_extremes(&t, TG_MEMH_SIDE, pick), 0);
	tg_sitetab_release(&t);
}

static void check_dump(const char *path, const char *thread, enum tg_dump_kind kind)
{
	struct tg_dumpfile df;

	CHECK_INT(tg_dumpfile_init(&df, path), 0);
	CHECK_STR(df.thread, thread);
	CHECK_INT(df.kind, kind);
	tg_dumpfile_release(&df);
}

static void test_dumpfile(void)
{
	check_dump("/data/6685/Thread-7.mem", "Thread-7", TG_DUMP_MEM);
	check_dump("Thread-7.stack", "Thread-7", TG_DUMP_STACK);
	check_dump("/x/process.mem", "process", TG_DUMP_PROCESS);
	check_dump("process.mem.gz", "process", TG_DUMP_PROCESS);
	check_dump("CP Server Thread-5.mem", "CP Server Thread-5", TG_DUMP_MEM);
	check_dump("a.b.stack.gz", "a.b", TG_DUMP_STACK);
	check_dump("dir.d/noext", "noext", TG_DUMP_MEM);
	check_dump("process.stack", "process", TG_DUMP_STACK);
	check_dump("%2Ehidden~2.mem", "%2Ehidden~2", TG_DUMP_MEM);
}

int main(void)
{
	test_sitetab();
	test_dumpfile();
	TG_TEST_DONE();
}
