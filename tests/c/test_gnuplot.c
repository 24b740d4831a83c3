/* Unit tests of gnuplot script quoting (gnuplot.c). */
#include <stdlib.h>

#include "gnuplot.h"
#include "tg_test.h"

static char *quote(const char *s)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	tg_gp_quote(f, s, strlen(s));
	fclose(f);
	return buf;
}

int main(void)
{
	char *q;
	struct tg_plot_opts o = { ".", "png", 800, 600, 0 };
	char name[64];

	q = quote("Thread-1");
	CHECK_STR(q, "'Thread-1'");
	free(q);
	/* backquotes and system() stay text: single quotes expand nothing */
	q = quote("x`touch /tmp/pwned`");
	CHECK_STR(q, "'x`touch /tmp/pwned`'");
	free(q);
	q = quote("it's");
	CHECK_STR(q, "'it''s'");
	free(q);
	q = quote("a'\n'b\r\x1b");
	CHECK_STR(q, "'a''?''b?" "?'");
	free(q);
	q = quote("\"; system(\"id\"); \"");
	CHECK_STR(q, "'\"; system(\"id\"); \"'");
	free(q);
	CHECK(tg_gp_terminal_known("svg") && tg_gp_terminal_known("png") &&
	      tg_gp_terminal_known("pdf") && !tg_gp_terminal_known("x11"));
	tg_gp_graph_name(name, sizeof(name), &o, "nesting");
	CHECK_STR(name, "nesting.png");
	{
		char *buf = NULL;
		size_t n = 0;
		FILE *f = open_memstream(&buf, &n);
		tg_gp_preamble(f, &o, "nesting");
		fclose(f);
		CHECK(strstr(buf, "set terminal pngcairo size 800,600\n") != NULL);
		CHECK(strstr(buf, "outfile = 'nesting.png'") != NULL);
		CHECK(strstr(buf, "set termoption noenhanced\n") != NULL);
		free(buf);
	}
	TG_TEST_DONE();
}
