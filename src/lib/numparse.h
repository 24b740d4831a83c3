/*
 * numparse.h - reading back the numbers the commands wrote into their data
 * files, faster than sscanf/strtod and with the same result.
 */
#ifndef TG_NUMPARSE_H
#define TG_NUMPARSE_H

#include <stddef.h>

/*
 * The value strtod() gives for the number at s[0..len) (s need not be
 * NUL-terminated): a plain decimal ("-12.345", "1732945123.123456") whose
 * digits make an integer below 2^53 is read by hand, exactly as strtod rounds
 * it (that integer divided by a power of ten up to 1e22 is rounded once);
 * anything else goes to strtod.  *used gets the bytes read (0: no number).
 */
double tg_parse_double(const char *s, size_t len, size_t *used);

#endif
