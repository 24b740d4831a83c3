/*
 * test_live_curves.c - threadgraph live's reading of a sampled run's curves
 * (live_curves.h): the figures, what a reading adds to the previous one, a
 * line still being written, a file written anew, bad lines, and the run's
 * keys of runinfo.json (runinfo.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "live_curves.h"
#include "runinfo.h"
#include "tg_test.h"

static char dir[] = "/tmp/tg_test_live_curves_XXXXXX";

static void put(const char *name, const char *mode, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, mode);
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static const struct tg_live_thread *thread(const struct tg_live *lv, const char *name)
{
	for (size_t i = 0; i < lv->n_threads; i++)
		if (!strcmp(lv->threads[i].name, name))
			return &lv->threads[i];
	return NULL;
}

#define R(t, b) "17000000" t "#<thread memory>:0:sampled=>" b "\n"

int main(void)
{
	struct tg_live lv;
	struct tg_live_curves c;
	struct tg_run_threads ri;
	struct tg_diag d = { 0 };
	const struct tg_live_thread *t;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	/* runinfo.json at enable(): mode, pid, no end, no threads yet */
	put("runinfo.json", "w", "{\"format\": 1, \"pid\": 4242, \"start_time\": 1.5, "
	    "\"end_time\": null, \"mode\": \"sampled\", \"capture\": null, \"threads\": []}\n");
	tg_run_threads_init(&ri);
	CHECK_INT(tg_run_threads_read(&ri, dir, &d), 0);
	CHECK_INT(ri.pid, 4242);
	CHECK_INT(ri.ended, 0);
	CHECK_STR(ri.mode, "sampled");
	CHECK_INT(ri.has_capture, 0);
	CHECK(tg_live_curves_is_run(&ri));
	tg_run_threads_release(&ri);

	tg_live_init(&lv);
	tg_live_curves_init(&c);
	put("b.mem", "w", R("00.5", "1000") R("01.0", "5000") R("01.5", "3000"));
	put("a.mem", "w", "");
	put("c.mem.gz", "w", "not a curve: no .mem");
	CHECK_INT(tg_live_curves_read(&lv, &c, dir, &d), 0);
	CHECK_INT(lv.curves, 1);
	CHECK_INT(lv.pid, 4242);
	CHECK_INT(lv.ended, 0);
	CHECK_INT(lv.n_threads, 2);
	CHECK_STR(lv.threads[0].name, "a");  /* found together: by name */
	CHECK_STR(lv.threads[1].name, "b");
	t = thread(&lv, "b");
	CHECK(t && t->now == 3000 && t->peak == 5000 && t->returns == 3 && t->change == 0);
	CHECK(t && t->last_us == INT64_C(1700000001500000));
	CHECK_INT(lv.last_us, INT64_C(1700000001500000));
	t = thread(&lv, "a");
	CHECK(t && t->now == 0 && t->returns == 0 && t->last_us == 0);

	/* The next reading: what the files gained, a line cut short left for
	 * later, a new thread (named by runinfo.json once it lists it), the
	 * change against the previous reading. */
	put("b.mem", "a", R("02.0", "2500") "17000000" "02.5#<thread memory>:0:samp");
	put("a.mem", "a", R("02.1", "700"));
	put("d.mem", "w", R("02.2", "64"));
	put("runinfo.json", "w", "{\"pid\": 4242, \"end_time\": null, \"mode\": \"sampled\", "
	    "\"threads\": [{\"name\": \"worker 4\", \"native_id\": 9, \"mem\": \"d.mem\"}]}\n");
	CHECK_INT(tg_live_curves_read(&lv, &c, dir, &d), 0);
	CHECK_INT(lv.n_threads, 3);
	t = thread(&lv, "b");
	CHECK(t && t->now == 2500 && t->peak == 5000 && t->returns == 4 && t->change == -500);
	t = thread(&lv, "a");
	CHECK(t && t->now == 700 && t->change == 700 && t->returns == 1);
	t = thread(&lv, "worker 4");
	CHECK(t && t->now == 64 && t->stream == 3 && t->change == 0);
	/* the cut line completed */
	put("b.mem", "a", "led=>9000\n");
	CHECK_INT(tg_live_curves_read(&lv, &c, dir, &d), 0);
	t = thread(&lv, "b");
	CHECK(t && t->now == 9000 && t->peak == 9000 && t->returns == 5 && t->change == 6500);
	CHECK(t && t->last_us == INT64_C(1700000002500000));

	/* A file written anew (shorter): read from its start. */
	put("a.mem", "w", R("03.0", "10"));
	CHECK_INT(tg_live_curves_read(&lv, &c, dir, &d), 0);
	t = thread(&lv, "a");
	CHECK(t && t->now == 10 && t->peak == 10 && t->returns == 1);

	/* A line that is not a reading of the curve: an error naming the file and
	 * line, the figures kept; and again at the next reading. */
	put("b.mem", "a", "17000000" "04.0#app.py:3:work=>10\n");
	CHECK_INT(tg_live_curves_read(&lv, &c, dir, &d), -1);
	CHECK(strstr(d.msg, "/b.mem:6: not a reading of a sampled run's memory curve") != NULL);
	t = thread(&lv, "b");
	CHECK(t && t->now == 9000);
	CHECK_INT(tg_live_curves_read(&lv, &c, dir, &d), -1);
	CHECK(strstr(d.msg, "/b.mem:6:") != NULL);
	put("b.mem", "w", R("00.5", "1") "garbage\n");
	CHECK_INT(tg_live_curves_read(&lv, &c, dir, &d), -1);
	CHECK(strstr(d.msg, "/b.mem:2: ") != NULL);
	put("b.mem", "w", R("00.5", "1"));

	/* The run ended. */
	put("runinfo.json", "w", "{\"pid\": 4242, \"end_time\": 9.25, \"mode\": \"sampled\"}\n");
	CHECK_INT(tg_live_curves_read(&lv, &c, dir, &d), 0);
	CHECK_INT(lv.ended, 1);
	CHECK(lv.end_us == 9250000);  /* the readings' ages are taken at the end */
	CHECK(lv.threads[0].ended);
	put("runinfo.json", "w", "{\"pid\": 4242, \"end_time\": 1e300, \"mode\": \"sampled\"}\n");
	CHECK_INT(tg_live_curves_read(&lv, &c, dir, &d), 0);
	CHECK(lv.ended && lv.end_us == 0);  /* not a time: not known */

	/* A run without timestamps: readings without TIME#, no time kept. */
	tg_live_curves_release(&c);
	tg_live_release(&lv);
	tg_live_init(&lv);
	tg_live_curves_init(&c);
	put("runinfo.json", "w", "{\"pid\": 7, \"timestamps\": false, \"mode\": \"sampled\"}");
	put("a.mem", "w", "");
	put("d.mem", "w", "");
	put("b.mem", "w", "<thread memory>:0:sampled=>300\n<thread memory>:0:sampled=>200\n");
	CHECK_INT(tg_live_curves_read(&lv, &c, dir, &d), 0);
	CHECK_INT(lv.timed, 0);
	t = thread(&lv, "b");
	CHECK(t && t->now == 200 && t->peak == 300 && t->returns == 2 && t->last_us == 0);

	/* Not a sampled run: a full one, with and without a capture. */
	put("runinfo.json", "w", "{\"pid\": 1, \"mode\": \"full\", \"capture\": \"capture.tg\"}");
	tg_run_threads_init(&ri);
	CHECK_INT(tg_run_threads_read(&ri, dir, &d), 0);
	CHECK(!tg_live_curves_is_run(&ri));
	CHECK_INT(ri.has_capture, 1);
	CHECK_STR(ri.mode, "full");
	tg_run_threads_release(&ri);
	put("runinfo.json", "w", "{\"pid\": 1}");  /* before the key existed */
	tg_run_threads_init(&ri);
	CHECK_INT(tg_run_threads_read(&ri, dir, &d), 0);
	CHECK(!tg_live_curves_is_run(&ri));
	tg_run_threads_release(&ri);

	tg_live_curves_release(&c);
	tg_live_release(&lv);
	{
		char cmd[300];
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
	TG_TEST_DONE();
}
