/* Unit tests of decorate-stack's pairing and output (decorate.c). */
#include <stdlib.h>
#include <unistd.h>

#include "decorate.h"
#include "tg_test.h"

static char dir[] = "/tmp/tg_test_dec.XXXXXX";

static char *put(const char *name, const char *text)
{
	char *path = malloc(256);
	FILE *f;

	snprintf(path, 256, "%s/%s", dir, name);
	f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	return path;
}

/* Runs decorate; returns its output (or "ERROR: msg"), caller frees. */
static char *run(const char *mem, const char *stack, const char *event,
		 const char *prefix, const char *indent)
{
	struct tg_decorate_opts o = { prefix, indent };
	struct tg_diag d = { 0 };
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	int rc = tg_decorate_run(mem, stack, event, &o, f, NULL, &d);

	fclose(f);
	if (rc < 0) {
		free(buf);
		buf = malloc(strlen(d.msg) + 8);
		sprintf(buf, "ERROR: %s", d.msg);
	}
	return buf;
}

/* Runs decorate with a bound (has_depth, depth, max_lines); output as run's. */
static char *run_bounded(const char *mem, const char *stack, const char *event,
			 int has_depth, unsigned long depth, size_t max_lines)
{
	struct tg_decorate_opts o = { "/src/", NULL, 0, has_depth, depth, max_lines };
	struct tg_diag d = { 0 };
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	int rc = tg_decorate_run(mem, stack, event, &o, f, NULL, &d);

	fclose(f);
	if (rc < 0) {
		free(buf);
		buf = malloc(strlen(d.msg) + 8);
		sprintf(buf, "ERROR: %s", d.msg);
	}
	return buf;
}

int main(void)
{
	char *mem, *stack, *out;
	unsigned long line;
	struct tg_diag d = { 0 };

	if (!mkdtemp(dir))
		return 2;
	/* f calls g (which calls h) and then g again; an unrelated k before */
	stack = put("T.stack",
		    "1.0#/src/k.py:1:k\n"
		    "2.0#/src/a.py:10:f\n"
		    " 2.5#/src/a.py:20:g\n"
		    "  2.5#None:0:h\n"
		    " 3.25#/src/a.py:20:g\n"
		    "9.0#/src/a.py:10:f\n");
	mem = put("T.mem",
		  "1.5#/src/k.py:2:k=>4096\n"
		  "2.5#None:0:h=>0\n"
		  "3.0#/src/a.py:22:g=>-4096\n"
		  "3.5#/src/a.py:22:g=>8192\n"
		  "4.0#/src/a.py:15:f=>167936\n"
		  "9.5#/src/a.py:15:f=>0\n");
	out = run(mem, stack, "5", "/src/", NULL);
	CHECK_STR(out, "f@a.py:10-15, Time: 2.0 s, Memory: 167936 B\n"
		       " g@a.py:20-22, Time: 0.5 s, Memory: -4096 B\n"
		       "  h@None:0-0, Time: 0.0 s, Memory: 0 B\n"
		       " g@a.py:20-22, Time: 0.25 s, Memory: 8192 B\n");
	free(out);
	/* bounded: the calls below --depth, then past --max-lines, counted */
	out = run_bounded(mem, stack, "5", 1, 1, 0);
	CHECK_STR(out, "f@a.py:10-15, Time: 2.0 s, Memory: 167936 B\n"
		       " g@a.py:20-22, Time: 0.5 s, Memory: -4096 B\n"
		       " g@a.py:20-22, Time: 0.25 s, Memory: 8192 B\n"
		       "... 1 more call not shown (1 deeper than --depth 1)\n");
	free(out);
	out = run_bounded(mem, stack, "5", 0, 0, 2);
	CHECK_STR(out, "f@a.py:10-15, Time: 2.0 s, Memory: 167936 B\n"
		       " g@a.py:20-22, Time: 0.5 s, Memory: -4096 B\n"
		       "... 2 more calls not shown (2 past --max-lines 2)\n");
	free(out);
	out = run_bounded(mem, stack, "5", 1, 0, 1);
	CHECK_STR(out, "f@a.py:10-15, Time: 2.0 s, Memory: 167936 B\n"
		       "... 3 more calls not shown (3 deeper than --depth 0)\n");
	free(out);
	out = run_bounded(mem, stack, "5", 1, 1, 1);
	CHECK_STR(out, "f@a.py:10-15, Time: 2.0 s, Memory: 167936 B\n"
		       "... 3 more calls not shown (1 deeper than --depth 1, 2 past --max-lines 1)\n");
	free(out);
	out = run_bounded(mem, stack, "5", 1, 2, 4);  /* a bound that leaves nothing out */
	CHECK_STR(out, "f@a.py:10-15, Time: 2.0 s, Memory: 167936 B\n"
		       " g@a.py:20-22, Time: 0.5 s, Memory: -4096 B\n"
		       "  h@None:0-0, Time: 0.0 s, Memory: 0 B\n"
		       " g@a.py:20-22, Time: 0.25 s, Memory: 8192 B\n");
	free(out);
	/* the same event by text: whole line, without TIME#, memg.txt legend line */
	out = run(mem, stack, "4.0#/src/a.py:15:f=>167936", NULL, "..");
	CHECK_STR(out, "f@/src/a.py:10-15, Time: 2.0 s, Memory: 167936 B\n"
		       "..g@/src/a.py:20-22, Time: 0.5 s, Memory: -4096 B\n"
		       "....h@None:0-0, Time: 0.0 s, Memory: 0 B\n"
		       "..g@/src/a.py:20-22, Time: 0.25 s, Memory: 8192 B\n");
	free(out);
	CHECK_INT(tg_decorate_find_event(mem, "/src/a.py:15:f=>167936", &line, &d), 0);
	CHECK_INT(line, 5);
	CHECK_INT(tg_decorate_find_event(mem, "12: T>/src/a.py:15:f=>167936", &line, &d), 0);
	CHECK_INT(line, 5);
	CHECK_INT(tg_decorate_find_event(mem, "12: T>/src/a.py:15:f=>16793", &line, &d), -1);
	CHECK_INT(tg_decorate_find_event(mem, "x: T>/src/a.py:15:f=>167936", &line, &d), -1);
	/* a leaf event */
	out = run(mem, stack, "2", NULL, NULL);
	CHECK_STR(out, "h@None:0-0, Time: 0.0 s, Memory: 0 B\n");
	free(out);
	/* the later call of f (time 9.0 <= 9.5) is picked for the last event */
	out = run(mem, stack, "6", NULL, NULL);
	CHECK_STR(out, "f@/src/a.py:10-15, Time: 0.5 s, Memory: 0 B\n");
	free(out);
	/* errors */
	out = run(mem, stack, "7", NULL, NULL);
	CHECK(!strncmp(out, "ERROR: no event at line 7: ", 27));
	CHECK(strstr(out, "has 6 lines") != NULL);
	free(out);
	out = run(mem, stack, "0", NULL, NULL);
	CHECK(strstr(out, "bad event '0': line numbers go from 1 to") != NULL);
	free(out);
	/* beyond an unsigned long: no line has it (strtoul's ULONG_MAX was taken
	 * for a number) */
	out = run(mem, stack, "99999999999999999999999", NULL, NULL);
	CHECK(strstr(out, "bad event '99999999999999999999999': line numbers go from 1 to")
	      != NULL);
	free(out);
	out = run(mem, stack, "nothing like it", NULL, NULL);
	CHECK(strstr(out, "ERROR: event not found in") != NULL);
	free(out);
	{ /* the report's durations for people: to the microsecond (the times'
	   * resolution), not the doubles' 954 ns for 1 us near 1.7e9 s */
		struct tg_decorate_opts ho = { NULL, " ", 1 };
		char *s1 = put("H.stack", "1700000000.000001#/src/a.py:10:f\n"
				" 1700000000.000002#/src/a.py:20:g\n");
		char *m1 = put("H.mem", "1700000000.000003#/src/a.py:21:g=>0\n"
			       "1700000000.012346#/src/a.py:11:f=>0\n");
		char *buf = NULL;
		size_t n = 0;
		FILE *f = open_memstream(&buf, &n);
		CHECK_INT(tg_decorate_run(m1, s1, "2", &ho, f, NULL, &d), 0);
		fclose(f);
		CHECK_STR(buf, "f@/src/a.py:10-11, Time: 12.3 ms, Memory: 0 B\n"
			       " g@/src/a.py:20-21, Time: 1 us, Memory: 0 B\n");
		free(buf);
		free(s1);
		free(m1);
	}
	{ /* event earlier than any matching call */
		char *m2 = put("U.mem", "0.5#/src/a.py:15:f=>1\n");
		out = run(m2, stack, "1", NULL, NULL);
		CHECK(strstr(out, "ERROR: no call of f (/src/a.py) at or before") != NULL);
		free(out);
		free(m2);
	}
	{ /* the subtree has more calls than memory events before the event */
		char *m3 = put("V.mem", "4.0#/src/a.py:15:f=>1\n");
		out = run(m3, stack, "1", NULL, NULL);
		CHECK(strstr(out, "4 calls in its subtree but only 1 memory events") != NULL);
		free(out);
		free(m3);
	}
	{ /* malformed lines inside the range are skipped (warned), pairing by records */
		char *m4 = put("W.mem",
			       "2.5#None:0:h=>0\n"
			       "garbage\n"
			       "3.0#/src/a.py:22:g=>-4096\n"
			       "3.5#/src/a.py:22:g=>8192\n"
			       "4.0#/src/a.py:15:f=>167936\n");
		out = run(m4, stack, "5", "/src/", NULL);
		CHECK(!strncmp(out, "f@a.py:10-15, Time: 2.0 s, Memory: 167936 B\n", 44));
		free(out);
		free(m4);
	}
	free(mem);
	free(stack);
	{
		char cmd[64];
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			return 2;
	}
	TG_TEST_DONE();
}
