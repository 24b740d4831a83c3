/*
 * linetable.c - a code object's line of every instruction (linetable.h).
 *
 * The location table is a sequence of entries, each covering 1-8 code units:
 * a first byte with bit 7 set, bits 3-6 the entry's kind and bits 0-2 its
 * length in code units less one, then the kind's varints (6 bits each, bit 6
 * the continuation) and bytes.  Only the line matters here: kind 15 is "no
 * location" (line -1, the running line unchanged), 14 (long form) and 13 (no
 * columns) start with a signed varint line delta, 10-12 move the line by 0-2,
 * 0-9 keep it.  PyCode_Addr2Line reports the line of the entry covering the
 * offset: the same walk, done once.
 */
#include "linetable.h"

/* Whether P (< END) starts an entry. */
static int
tg_lt_is_start(const uint8_t *p)
{
    return (*p & 0x80) != 0;
}

/* The signed varint at *P (not past END): its value; *P moves past it.
 * *OK is cleared when it runs past END. */
static int64_t
tg_lt_svarint(const uint8_t **p, const uint8_t *end, int *ok)
{
    uint64_t v = 0;
    unsigned shift = 0;
    for (;;) {
        uint8_t b;
        if (*p >= end || shift > 42) {
            *ok = 0;
            return 0;
        }
        b = *(*p)++;
        v |= (uint64_t)(b & 63) << shift;
        shift += 6;
        if (!(b & 64))
            break;
    }
    return (v & 1) ? -(int64_t)(v >> 1) : (int64_t)(v >> 1);
}

size_t
tg_line_table_units(const uint8_t *tab, size_t len)
{
    size_t units = 0, i;
    for (i = 0; i < len; i++)
        if (tg_lt_is_start(tab + i))
            units += (size_t)(tab[i] & 7) + 1;
    return units;
}

int
tg_line_table_decode(const uint8_t *tab, size_t len, int firstlineno, int32_t *out,
                     size_t n)
{
    const uint8_t *p = tab, *end = tab + len;
    int64_t line = firstlineno;
    size_t unit = 0, i;

    while (p < end) {
        uint8_t head = *p;
        int kind = (head >> 3) & 15, ok = 1;
        size_t count = (size_t)(head & 7) + 1;
        int64_t at;
        if (!tg_lt_is_start(p))
            return -1;
        if (kind == 13 || kind == 14) {
            const uint8_t *q = p + 1;
            line += tg_lt_svarint(&q, end, &ok);
            if (!ok)
                return -1;
        } else if (kind >= 10 && kind <= 12) {
            line += kind - 10;
        }
        at = kind == 15 ? -1 : line;
        if (at < INT32_MIN + 1 || at > INT32_MAX)
            return -1;
        for (i = 0; i < count && unit < n; i++)
            out[unit++] = (int32_t)at;
        /* the next entry starts at the next byte with bit 7 set */
        do
            p++;
        while (p < end && !tg_lt_is_start(p));
    }
    for (; unit < n; unit++)
        out[unit] = TG_LINE_TABLE_NONE;
    return 0;
}
