/*
 * test_gcruns.c - gc.txt's runs and the runs within a call (gcruns.h), and the
 * threads of runinfo.json (runinfo.h) that give a text dump's native id.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gcruns.h"
#include "runinfo.h"
#include "tg_test.h"

static char dir[] = "/tmp/tg_test_gcruns_XXXXXX";

static void put(const char *name, const char *text)
{
	char path[256];
	FILE *f;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void count_warn(void *ctx, const char *path, unsigned long lineno, const char *why)
{
	(void)path;
	(void)why;
	((unsigned long *)ctx)[0] = lineno;
}

static void test_runs(void)
{
	struct tg_gc_runs g;
	unsigned long last_bad = 0;
	struct tg_diag d = { .warn = count_warn, .warn_ctx = &last_bad };
	long long objects;

	tg_gc_runs_init(&g);
	CHECK_INT(tg_gc_runs_read(&g, dir, &d), 0);  /* no gc.txt: no runs */
	CHECK_INT(g.n, 0);
	put("gc.txt", "7 100.000010 100.000020 5\n"
		      "7 100.500000 100.600000 -1\n"
		      "8 100.000010 100.000020 9\n"
		      "7 1 x 3\n"
		      "# 2 later runs not kept\n");
	CHECK_INT(tg_gc_runs_read(&g, dir, &d), 0);
	CHECK_INT(g.n, 3);
	CHECK_INT(last_bad, 4);  /* the malformed line, reported and skipped */
	/* within the call, its own thread only; -1 (not given) counts no objects */
	CHECK_INT(tg_gc_runs_within(&g, 7, 100.0, 101.0, &objects), 2);
	CHECK_INT(objects, 5);
	CHECK_INT(tg_gc_runs_within(&g, 8, 100.0, 101.0, &objects), 1);
	CHECK_INT(objects, 9);
	/* a run that starts before the call, or ends after it, is not the call's */
	CHECK_INT(tg_gc_runs_within(&g, 7, 100.000015, 101.0, &objects), 1);
	CHECK_INT(tg_gc_runs_within(&g, 7, 100.0, 100.55, &objects), 1);
	/* one microsecond of slack: both sides are cut to microseconds */
	CHECK_INT(tg_gc_runs_within(&g, 7, 100.000011, 100.000019, NULL), 1);
	CHECK_INT(tg_gc_runs_within(&g, 7, 100.000013, 100.000019, NULL), 0);
	d.strict = 1;
	CHECK_INT(tg_gc_runs_read(&g, dir, &d), -1);
	tg_gc_runs_release(&g);
}

/* An aggregate run's folded threads: a run's FAMILY (the rest of the line,
 * spaces kept) names it, and it is not the run of a listed thread that has
 * the same native id (ids are reused). */
static void test_family_runs(void)
{
	struct tg_gc_runs g;
	unsigned long last_bad = 0;
	struct tg_diag d = { .warn = count_warn, .warn_ctx = &last_bad };
	long long objects;

	tg_gc_runs_init(&g);
	put("gc.txt", "7 100.000010 100.000020 5 Thread-* (handler)\n"
		      "7 100.500000 100.600000 4\n"
		      "9 100.700000 100.800000 3 req-*\n"
		      "9 100.900000 100.950000 2 Thread-* (handler)\n"
		      "9 101.000000 101.100000 1 \n");
	CHECK_INT(tg_gc_runs_read(&g, dir, &d), 0);
	CHECK_INT(g.n, 4);
	CHECK_INT(last_bad, 5);  /* an empty FAMILY */
	CHECK_STR(g.v[0].family, "Thread-* (handler)");
	CHECK(g.v[1].family == NULL);
	CHECK_INT(g.v[0].collected, 5);
	CHECK_INT(tg_gc_runs_within(&g, 7, 100.0, 102.0, &objects), 1);
	CHECK_INT(objects, 4);
	CHECK_INT(tg_gc_runs_within(&g, 9, 100.0, 102.0, &objects), 0);
	CHECK_INT(tg_gc_runs_within_family(&g, "Thread-* (handler)", 100.0, 102.0, &objects), 2);
	CHECK_INT(objects, 7);
	CHECK_INT(tg_gc_runs_within_family(&g, "req-*", 100.0, 100.75, &objects), 0);
	CHECK_INT(tg_gc_runs_within_family(&g, "req-*", 100.0, 100.8, &objects), 1);
	CHECK_INT(tg_gc_runs_within_family(&g, "Thread-*", 100.0, 102.0, NULL), 0);
	tg_gc_runs_release(&g);
}

static void test_threads(void)
{
	struct tg_run_threads t;
	struct tg_diag d = { 0 };
	unsigned long long id = 0;

	tg_run_threads_init(&t);
	CHECK_INT(tg_run_threads_read(&t, dir, &d), 0);  /* no runinfo.json */
	CHECK_INT(t.n, 0);
	put("runinfo.json",
	    "{\n \"format\": 1,\n \"argv\": [\"a\", {\"x\": [1, 2.5e3, null, true]}],\n"
	    " \"threads\": [\n"
	    "  {\"name\": \"MainThread\", \"native_id\": 11, \"mem\": \"MainThread.mem\"},\n"
	    "  {\"name\": \"w \\\"q\\\" \\u00e9\\ud83d\\ude00\", \"native_id\": 12, \"mem\": null},\n"
	    "  {\"name\": \"a/b\", \"native_id\": 13, \"mem\": \"run/a%2Fb.mem\", "
	    "\"open_at_start\": 7, \"held_at_start\": [0, -12, 4096 ]},\n"
	    "  {\"name\": \"twin\", \"native_id\": 14}, {\"name\": \"twin\", \"native_id\": 15}\n"
	    " ],\n \"kept_from\": 1700000001.250000, \"end_time\": 2.5\n}\n");
	CHECK_INT(tg_run_threads_read(&t, dir, &d), 0);
	CHECK_INT(t.n, 5);
	CHECK(tg_run_threads_id(&t, "MainThread", &id) && id == 11);
	CHECK(tg_run_threads_id(&t, "w \"q\" \xc3\xa9\xf0\x9f\x98\x80", &id) && id == 12);
	CHECK(tg_run_threads_id(&t, "a%2Fb", &id) && id == 13);  /* by its .mem */
	CHECK(!tg_run_threads_id(&t, "twin", &id));              /* two threads: neither */
	CHECK(!tg_run_threads_id(&t, "nobody", &id));
	CHECK(t.ended && t.end_us == 2500000);  /* a key after the threads */
	/* an export's: the calls open where a thread's files begin */
	CHECK(tg_run_threads_find(&t, "a%2Fb") && tg_run_threads_find(&t, "a%2Fb")->open_at_start == 7);
	CHECK(tg_run_threads_find(&t, "MainThread") &&
	      tg_run_threads_find(&t, "MainThread")->open_at_start == -1);  /* not given */
	/* and what it held there by depth, and where the kept range begins */
	{
		const struct tg_run_thread *a = tg_run_threads_find(&t, "a%2Fb");
		CHECK(a && a->has_held && a->n_held == 3 && a->held[0] == 0 &&
		      a->held[1] == -12 && a->held[2] == 4096);
		CHECK(!tg_run_threads_find(&t, "MainThread")->has_held);
		CHECK(t.kept_from_us == 1700000001250000LL);
	}
	tg_run_threads_release(&t);
	/* a held_at_start that is not a list of integers: not the recorder's JSON */
	put("runinfo.json", "{\"threads\": [{\"name\": \"x\", \"native_id\": 1, "
	    "\"held_at_start\": [1, 2.5]}]}");
	CHECK_INT(tg_run_threads_read(&t, dir, &d), 0);
	CHECK_INT(t.n, 0);
	tg_run_threads_release(&t);
	/* not the recorder's JSON: no threads known, no error */
	put("runinfo.json", "{\"threads\": [{\"name\": \"x\", \"native_id\": 1}");
	CHECK_INT(tg_run_threads_read(&t, dir, &d), 0);
	CHECK_INT(t.n, 0);
	tg_run_threads_release(&t);
}

int main(void)
{
	char cmd[300];
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	test_runs();
	test_family_runs();
	test_threads();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	TG_TEST_DONE();
}
