/*
 * marks_plot.c - phases and marks in the time graphs' scripts (marks_plot.h).
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gnuplot.h"
#include "marks_plot.h"

/* Fill colours of the phases' shading, by the order of their names' first
 * phase (the same name, the same colour); more names cycle. */
static const char *const marks_colours[] = {
	"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
	"#8c564b", "#e377c2", "#bcbd22", "#17becf", "#7f7f7f",
};
#define MARKS_COLOURS (sizeof(marks_colours) / sizeof(marks_colours[0]))

/* The colour number of phase I: its name's first phase's rank among first
 * phases of their names; *first set when I is that first one. */
static size_t marks_colour(const struct tg_marks *m, size_t i, int *first)
{
	size_t rank = 0;

	for (size_t j = 0; j <= i; j++) {
		size_t k;
		for (k = 0; k < j && strcmp(m->phases[k].name, m->phases[j].name); k++)
			;
		if (k < j)
			continue;  /* not its name's first */
		if (!strcmp(m->phases[j].name, m->phases[i].name)) {
			*first = j == i;
			return rank % MARKS_COLOURS;
		}
		rank++;
	}
	*first = 0;
	return 0;
}

void tg_marks_plot_objects(FILE *f, const struct tg_marks *m, const struct tg_timeaxis *ta,
			   double lo, double hi)
{
	int first;

	if (!ta->seen)
		return;
	for (size_t i = 0; i < m->n_phases; i++) {
		const struct tg_phase *p = &m->phases[i];
		double a = fmax(p->start, lo), b = fmin(isinf(p->stop) ? ta->t1 : p->stop, hi);
		size_t c = marks_colour(m, i, &first);

		if (b < a)
			continue;
		fprintf(f, "set object rect from tx(%.6f), graph 0 to tx(%.6f), graph 1 back "
			"fc rgb '%s' fs transparent solid 0.12 noborder\n", a, b, marks_colours[c]);
	}
	for (size_t i = 0; i < m->n_marks; i++) {
		const struct tg_mark *k = &m->marks[i];
		if (k->t < lo || k->t > hi)
			continue;
		fprintf(f, "set arrow from tx(%.6f), graph 0 to tx(%.6f), graph 1 nohead back "
			"dt 3 lc rgb '#505050'\nset label ", k->t, k->t);
		tg_gp_quote_label(f, k->name, strlen(k->name), 40);
		fprintf(f, " at tx(%.6f), graph 0.98 rotate by 90 right offset char -0.6,0 "
			"tc rgb '#505050'\n", k->t);
	}
}

void tg_marks_plot_keys(FILE *f, const struct tg_marks *m, const char **sep)
{
	int first;

	for (size_t i = 0; i < m->n_phases; i++) {
		size_t c = marks_colour(m, i, &first);
		char *title;

		if (!first)
			continue;
		if (asprintf(&title, "phase %s", m->phases[i].name) < 0)
			continue;
		fprintf(f, "%skeyentry with boxes fc rgb '%s' fs transparent solid 0.3 noborder "
			"title ", *sep, marks_colours[c]);
		tg_gp_quote(f, title, strlen(title));
		free(title);
		*sep = ", \\\n     ";
	}
}
