/*
 * test_linetable.c - a code object's line table decoded in one pass
 * (src/recorder/linetable.c), alone: hand-made location tables of every entry
 * form, against the lines PyCode_Addr2Line's walk gives them.
 */
#include <stdint.h>

#include "linetable.h"
#include "tg_test.h"

/* An entry's first byte: KIND, covering UNITS code units (1-8). */
#define HEAD(kind, units) (uint8_t)(0x80 | (kind) << 3 | ((units) - 1))

int
main(void)
{
    /* first line 10:
     * - no columns (13), 2 units, delta +3 -> 13
     * - one-line form (11), 1 unit, delta +1 -> 14, two column bytes
     * - short form (5), 3 units, same line -> 14, one byte
     * - no location (15), 1 unit -> -1 (the running line stays 14)
     * - one-line form (12), 1 unit, +2 -> 16
     * - long form (14), 2 units, delta -6 (svarint 13) -> 10, end line, columns
     * - no columns (13), 1 unit, delta +100 (svarint 200: 8 | 64, 3) -> 110
     * - one-line form (10), 1 unit, +0 -> 110 */
    const uint8_t tab[] = {
        HEAD(13, 2), 6,
        HEAD(11, 1), 4, 9,
        HEAD(5, 3), 7,
        HEAD(15, 1),
        HEAD(12, 1), 1, 2,
        HEAD(14, 2), 13, 0, 5, 9,
        HEAD(13, 1), 8 | 64, 3,
        HEAD(10, 1), 0, 0,
    };
    const int32_t want[] = {13, 13, 14, 14, 14, 14, -1, 16, 10, 10, 110, 110};
    int32_t out[14];
    size_t n = tg_line_table_units(tab, sizeof tab), i;

    CHECK_INT(n, 12);
    CHECK_INT(tg_line_table_decode(tab, sizeof tab, 10, out, n), 0);
    for (i = 0; i < 12; i++)
        CHECK_INT(out[i], want[i]);

    /* a longer output: the units past the table are "none" */
    CHECK_INT(tg_line_table_decode(tab, sizeof tab, 10, out, 14), 0);
    CHECK_INT(out[11], 110);
    CHECK_INT(out[12], TG_LINE_TABLE_NONE);
    CHECK_INT(out[13], TG_LINE_TABLE_NONE);

    /* a shorter one: decoding stops there */
    out[3] = 77;
    CHECK_INT(tg_line_table_decode(tab, sizeof tab, 10, out, 3), 0);
    CHECK_INT(out[2], 14);
    CHECK_INT(out[3], 77);

    /* the empty table covers nothing */
    CHECK_INT(tg_line_table_units(tab, 0), 0);

    /* malformed: a table that does not start an entry, a varint cut short */
    {
        const uint8_t bad1[] = {0x05, HEAD(13, 1), 2};
        const uint8_t bad2[] = {HEAD(13, 1), 8 | 64};
        CHECK_INT(tg_line_table_decode(bad1, sizeof bad1, 1, out, 2), -1);
        CHECK_INT(tg_line_table_decode(bad2, sizeof bad2, 1, out, 1), -1);
    }
    TG_TEST_DONE();
}
