/*
 * timeparse.h - the --time_from/--time_to formats of the original memg.
 *
 * Accepted, in local time: "dd/mm/yyyy HH:MM", "dd/mm/yy HH:MM", "dd/mm/yyyy",
 * "dd/mm/yy" (midnight) and "HH:MM" (today).  Two-digit years follow Python's
 * %y: 69-99 are 19xx, 00-68 are 20xx.
 */
#ifndef TG_TIMEPARSE_H
#define TG_TIMEPARSE_H

#include <time.h>

/*
 * Parses s into seconds since the epoch in *out; "today" is the local day of
 * now.  Returns 0, or -1 if s has none of the formats or is not a valid date.
 */
int tg_timespec_parse(const char *s, time_t now, double *out);

#endif
