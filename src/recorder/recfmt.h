/*
 * recfmt.h - the recorder's text formatting: decimal integers, "SECONDS.MICROS#"
 * timestamps, indents and escaped fields, written into a record's reserved
 * space without snprintf (formatting was the largest part of a text record's
 * cost).  Plain C, all inline: the hot path (recorder.c) inlines them, and
 * tests/c/test_recfmt.c checks them against snprintf alone.
 *
 * Every writer here writes at P and returns the end of what it wrote; the
 * caller has reserved the room (TG_INT_MAX per integer, TG_TIME_MAX per time,
 * TG_INDENT_BLOCK beyond an indent, 4 bytes per escaped byte).
 */
#ifndef TG_RECFMT_H
#define TG_RECFMT_H

#include "tg_format.h"
#include "names.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* The "SECONDS." part of the last timestamp formatted, reused while the second
 * stays the same (formats.md TIME: only the microseconds change). */
struct tg_time_cache {
    int64_t sec;       /* the second TEXT holds; valid iff len != 0 */
    size_t len;        /* bytes of TEXT used, the '.' included */
    char text[24];     /* up to 20 digits and '.' */
    int64_t last_ns;   /* last time given, ns: lines never go back (clock.h) */
};

/* "00" to "99": two decimal digits per table lookup, half the divisions of a
 * digit-by-digit loop (formatting was the largest part of a record's cost). */
static const char tg_digits2[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* Number of decimal digits of V (at least 1). */
static inline int
tg_u64_digits(uint64_t v)
{
    int n = 1;
    while (v >= 10000) {
        v /= 10000;
        n += 4;
    }
    if (v >= 1000)
        return n + 3;
    if (v >= 100)
        return n + 2;
    return v >= 10 ? n + 1 : n;
}

/* Write the last N digits of V (zero-padded) ending at P + N. */
static inline void
tg_put_digits(char *p, int n, uint64_t v)
{
    char *q = p + n;
    while (n >= 2) {
        q -= 2;
        memcpy(q, tg_digits2 + 2 * (v % 100), 2);
        v /= 100;
        n -= 2;
    }
    if (n)
        q[-1] = (char)('0' + v % 10);
}

static inline char *
tg_fmt_u64(char *p, uint64_t v)
{
    int n = tg_u64_digits(v);
    tg_put_digits(p, n, v);
    return p + n;
}

static inline char *
tg_fmt_i64(char *p, int64_t v)
{
    if (v < 0) {
        *p++ = '-';
        return tg_fmt_u64(p, (uint64_t)0 - (uint64_t)v);
    }
    return tg_fmt_u64(p, (uint64_t)v);
}

/* Longest "SECONDS.MICROS#". */
#define TG_TIME_MAX 32
#define TG_INT_MAX 21

#if TG_TIME_FRAC_DIGITS != 6
#  error "tg_fmt_time writes microseconds: six decimals"
#endif

/* Write "SECONDS.MICROS#" for the time TS; CACHE holds "SECONDS." of the last
 * second formatted (re-formatted only when the second changes). */
static inline char *
tg_fmt_timespec(char *p, const struct timespec *ts, struct tg_time_cache *cache)
{
    uint32_t us = (uint32_t)(ts->tv_nsec / 1000);

    if (ts->tv_sec != cache->sec || cache->len == 0) {
        char *e = tg_fmt_u64(cache->text, (uint64_t)ts->tv_sec);
        *e++ = '.';
        cache->len = (size_t)(e - cache->text);
        cache->sec = ts->tv_sec;
    }
    /* The record reserved TG_TIME_MAX bytes for the time: a fixed-size copy of
     * the whole cache is in bounds and cheaper than a variable one. */
    memcpy(p, cache->text, sizeof(cache->text));
    p += cache->len;
    memcpy(p, tg_digits2 + 2 * (us / 10000), 2);
    memcpy(p + 2, tg_digits2 + 2 * (us / 100 % 100), 2);
    memcpy(p + 4, tg_digits2 + 2 * (us % 100), 2);
    p[6] = TG_TIME_SEP;
    return p + 7;
}

/* Write "SECONDS.MICROS#" of NS (read by the caller with
 * tg_clock_now_ns_mono(&CACHE->last_ns), clock.h) using CACHE. */
static inline char *
tg_fmt_time_ns(char *p, int64_t ns, struct tg_time_cache *cache)
{
    struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };
    return tg_fmt_timespec(p, &ts, cache);
}

/* Append a field, escaping it when ESC. */
static inline char *
tg_put(char *p, const char *s, size_t len, int esc)
{
    if (esc)
        return tg_escape(p, s, len);
    memcpy(p, s, len);
    return p + len;
}

/* Indent bytes written in one go for shallow records (see tg_put_indent). */
#define TG_INDENT_BLOCK 64

/* Write DEPTH indent characters at P.  Up to TG_INDENT_BLOCK deep, one
 * fixed-size copy of a block of indent characters (two vector stores; a loop
 * here became `rep stos`, whose start-up cost more than the rest of the line):
 * the bytes past the indent lie inside the record's reservation (it counts
 * TG_INDENT_BLOCK extra bytes) and are overwritten by the fields that follow. */
static inline void
tg_put_indent(char *p, size_t depth)
{
    static const char block[TG_INDENT_BLOCK] = {
#define TG_I8 TG_INDENT_CHAR, TG_INDENT_CHAR, TG_INDENT_CHAR, TG_INDENT_CHAR, \
              TG_INDENT_CHAR, TG_INDENT_CHAR, TG_INDENT_CHAR, TG_INDENT_CHAR
        TG_I8, TG_I8, TG_I8, TG_I8, TG_I8, TG_I8, TG_I8, TG_I8
#undef TG_I8
    };
    if (depth > TG_INDENT_BLOCK) {  /* deep: libc's vector memset */
        memset(p, TG_INDENT_CHAR, depth);
        return;
    }
    memcpy(p, block, TG_INDENT_BLOCK);
}

#endif /* TG_RECFMT_H */
