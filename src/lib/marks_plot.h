/*
 * marks_plot.h - a run's phases and marks (marks.h) in the time graphs'
 * gnuplot scripts: memg and memg --held shade each phase behind the lines, in
 * a colour of its name's, with a key entry "phase NAME", and draw each mark
 * as a dotted vertical line with its name.
 */
#ifndef TG_MARKS_PLOT_H
#define TG_MARKS_PLOT_H

#include <stdio.h>

#include "marks.h"
#include "timeaxis.h"

/*
 * Writes the phases' shaded rectangles and the marks' lines and labels for
 * the part [LO, HI] (seconds since the epoch) of the run; after the x axis
 * (they use the script's tx()), before the plot command.  A phase still open
 * at the end runs to the axis's last event.  Nothing without an event seen.
 */
void tg_marks_plot_objects(FILE *f, const struct tg_marks *m, const struct tg_timeaxis *ta,
			   double lo, double hi);

/*
 * Appends to the plot command one key entry per phase name ("phase NAME", its
 * shading's colour), each preceded by *SEP, which is then the separator of
 * plot elements.
 */
void tg_marks_plot_keys(FILE *f, const struct tg_marks *m, const char **sep);

#endif
