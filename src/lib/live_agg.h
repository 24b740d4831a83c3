/*
 * live_agg.h - the figures of threadgraph live for an aggregate run
 * (aggregate=True), which writes no capture: its aggregate.tga, which the
 * recorder rewrites every second (docs/formats.md "Aggregate").
 *
 * Per thread entry (a thread, or ended threads folded by name): NOW is the
 * highest memory in the latest bucket of its curve (the curve keeps each
 * bucket's lowest and highest reading: the bucket is 1 ms wide at first and
 * doubles as the run goes on, about 8 s after an hour), PEAK the highest of all
 * buckets, LARGEST the largest single delta of its call paths and RETURNS the
 * calls counted on them; the functions are ranked by the sum of their paths'
 * totals (the net bytes of their calls, callees included), as for a capture.
 */
#ifndef TG_LIVE_AGG_H
#define TG_LIVE_AGG_H

#include "diag.h"
#include "live.h"

/*
 * Reads DIR/aggregate.tga as it is now into LV (the functions of the thread of
 * stream lv->focus only, when set), the changes against LV's previous reading,
 * the run's pid and whether it ended from runinfo.json.  Returns 0, or -1 with
 * d->msg set; LV then keeps its previous figures.
 */
int tg_live_agg_read(struct tg_live *lv, const char *dir, struct tg_diag *d);

#endif
