/*
 * flamesvg.h - an interactive flame graph of a frame tree (fold.h) as one
 * self-contained SVG: a rectangle per frame, its width proportional to the
 * frame's total; the root ("all") on top and callees below their callers.
 * Hovering shows the frame, its value and share; a click zooms on a frame (it
 * then spans the width); a search box highlights the frames whose text
 * contains what is typed and shows their share.  The script and style are
 * inline, the fonts the viewer's own: nothing is fetched.
 *
 * Frames narrower than min_px at full width are not drawn: the children of a
 * frame that are too narrow are drawn as one box "[N small frames]" when
 * together they are wide enough, else left out; the subtitle says how many
 * frames were hidden.  This keeps 10,000+ distinct frames readable and the
 * file proportional to what can be seen.
 */
#ifndef TG_FLAMESVG_H
#define TG_FLAMESVG_H

#include <stdio.h>

#include "diag.h"
#include "fold.h"

struct tg_flamesvg_opts {
	const char *id;          /* id of the <svg> element, unique in its page ([A-Za-z0-9_-]) */
	const char *title;       /* first line (untrusted text is escaped) */
	int width;               /* pixels; 0: 1200 */
	double min_px;           /* narrower frames are hidden; 0: 0.1 */
	int standalone;          /* a file of its own: XML declaration first */
};

struct tg_flamesvg_stats {
	size_t drawn;            /* frames drawn (the root included) */
	size_t hidden;           /* frames not drawn on their own */
	size_t boxes;            /* "[N small frames]" boxes drawn */
	unsigned depth;          /* deepest level drawn */
};

/*
 * Writes F's flame graph to OUT; ST (may be NULL) receives what was drawn.
 * Returns 0, or -1 with d->msg set (write error, out of memory).
 */
int tg_flamesvg_write(FILE *out, const struct tg_fold *f, const struct tg_flamesvg_opts *o,
		      struct tg_flamesvg_stats *st, struct tg_diag *d);

#endif
