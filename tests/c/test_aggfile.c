/*
 * test_aggfile.c - the aggregate.tga reader (src/lib/aggfile.c): a file as the
 * recorder writes it (version 2, with a folded entry, and version 1), and each
 * kind of broken file refused with its line.
 */
#include <stdlib.h>
#include <string.h>

#include "aggfile.h"
#include "tg_test.h"

#define HEAD "threadgraph-aggregate 1\nstart_us 1000000\nend_us 2000000\nmemory thread\n"
#define HEAD2 "threadgraph-aggregate 2\nstart_us 1000000\nend_us 2000000\nmemory thread\n"

static int parse(const char *text, struct tg_aggfile *a, struct tg_diag *d)
{
	memset(d, 0, sizeof(*d));
	return tg_aggfile_parse(a, "run/aggregate.tga", text, strlen(text), d);
}

/* Parses TEXT, expects an error containing WHY. */
static void refused(const char *text, const char *why)
{
	struct tg_aggfile a;
	struct tg_diag d;
	int rc = parse(text, &a, &d);
	CHECK_INT(rc, -1);
	if (!strstr(d.msg, why))
		fprintf(stderr, "message: %s (expected %s)\n", d.msg, why);
	CHECK(strstr(d.msg, why) != NULL);
	tg_aggfile_release(&a);
}

int main(void)
{
	struct tg_aggfile a;
	struct tg_diag d;

	CHECK_INT(parse(HEAD "t 42 3 w 1\nn 0 1 5 2 -10 7 30\nn 1 2 9 4 12 6 8\nc 10000\n"
			"b 0 -5 4\nb 7 1 9\nf 1 py a.py\twork\nf 2 c list\tappend\nend\n", &a, &d), 0);
	CHECK_INT(a.start_us, 1000000);
	CHECK_INT(a.end_us, 2000000);
	CHECK_STR(a.memory, "thread");
	CHECK_INT(a.nt, 1);
	CHECK_STR(a.t[0].base, "w 1");
	CHECK_INT(a.t[0].native_id, 42);
	CHECK_INT(a.t[0].dropped, 3);
	CHECK_INT(a.t[0].n_nodes, 3);
	CHECK_INT(a.t[0].nodes[1].total, -10);
	CHECK_INT(a.t[0].nodes[2].parent, 1);
	CHECK_INT(a.t[0].nodes[2].count, 4);
	CHECK_INT(a.t[0].nodes[2].time_us, 8);
	CHECK_INT(a.t[0].nb, 2);
	CHECK_INT(a.t[0].b[1].t_us, 1000000 + 7 * 10000);
	CHECK_INT(a.t[0].b[1].max, 9);
	CHECK_INT(a.nf, 2);
	CHECK(a.f[1].is_c);
	CHECK_STR(a.f[1].func, "append");
	tg_aggfile_release(&a);

	/* version 2: a folded entry's count right after its t line */
	CHECK_INT(parse(HEAD2 "t 7 0 w 1\nn 0 1 5 2 -10 7 30\nt 0 4 w *\nm 284\n"
			"n 0 1 5 568 100 9 1\nc 20000\nb 1 3 8\nf 1 py a.py\twork\nend\n", &a, &d), 0);
	CHECK_INT(a.version, 2);
	CHECK_INT(a.nt, 2);
	CHECK_INT(a.t[0].folded, 0);
	CHECK_INT(a.t[1].folded, 284);
	CHECK_STR(a.t[1].base, "w *");
	CHECK_INT(a.t[1].dropped, 4);
	CHECK_INT(a.t[1].nodes[1].count, 568);
	CHECK_INT(a.t[1].b[0].t_us, 1000000 + 20000);
	tg_aggfile_release(&a);
	refused(HEAD "t 0 0 x\nm 3\nend\n", ":6: a folded entry in a version 1 file");
	refused(HEAD2 "m 3\nend\n", "before any thread line");
	refused(HEAD2 "t 0 0 x\nn 0 1 0 1 1 1 1\nm 3\nf 1 py a\tb\nend\n", "not right after");
	refused(HEAD2 "t 0 0 x\nm 3\nm 3\nend\n", "not right after");
	refused(HEAD2 "t 0 0 x\nm 0\nend\n", "not a positive number");
	refused(HEAD2 "t 0 0 x\nm 3 4\nend\n", "not a positive number");
	refused("threadgraph-aggregate 3\n", "not a threadgraph aggregate file");
	refused("threadgraph-aggregate 12\n", "not a threadgraph aggregate file");
	refused(HEAD "t 1 0 x\n", "cut short");
	refused(HEAD "t 1 0 x\nend", "cut short");
	refused(HEAD "end\nt 1 0 x\n", "after the 'end' line");
	refused(HEAD "n 0 1 0 1 1 1 1\nend\n", ":5: a node before any thread");
	refused(HEAD "t 1 0 x\nn 1 1 0 1 1 1 1\nf 1 py a\tb\nend\n", "parent does not come before");
	refused(HEAD "t 1 0 x\nn 0 2 0 1 1 1 1\nf 1 py a\tb\nend\n", "names function 2");
	refused(HEAD "t 1 0 x\nn 0 1 0 1 99999999999999999999 1 1\nend\n", "not PARENT");
	refused(HEAD "t 1 0 x\nb 0 1 2\nend\n", "before its curve");
	refused(HEAD "t 1 0 x\nc 0\nend\n", "curve width");
	refused(HEAD "t 1 0 x\nc 10\nb 3 1 2\nb 3 1 2\nend\n", "out of order");
	refused(HEAD "t 1 0 x\nc 10\nb 1 5 2\nend\n", "out of range");
	refused(HEAD "t 1 0 x\nc 100000000000000\nb 1048575 1 2\nend\n", "does not fit");
	refused(HEAD "f 2 py a\tb\nend\n", "not the next one");
	refused(HEAD "f 1 rb a\tb\nend\n", "neither py nor c");
	refused(HEAD "f 1 py ab\nend\n", "FILE<tab>FUNCTION");
	refused("threadgraph-aggregate 1\nstart_us 1\nmemory thr\x1b\nend\n", "not thread");
	refused("threadgraph-aggregate 1\nend\n", "no start_us");
	refused(HEAD "x 1\nend\n", "no known kind");
	{
		static const char nul[] = HEAD "t 1 0 a\0b\nend\n";
		CHECK_INT(tg_aggfile_parse(&a, "p", nul, sizeof(nul) - 1, &d), -1);
		CHECK(strstr(d.msg, "NUL") != NULL);
		tg_aggfile_release(&a);
	}
	TG_TEST_DONE();
}
