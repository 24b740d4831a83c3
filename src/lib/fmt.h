/*
 * fmt.h - number and text formatting shared by the commands.
 *
 * Everything writes into a caller's buffer or FILE *; nothing allocates.
 */
#ifndef TG_FMT_H
#define TG_FMT_H

#include <stddef.h>
#include <stdio.h>

/* Longest text tg_fmt_milli() writes, with its NUL. */
#define TG_FMT_MILLI_MAX 32

/* Bytes to thousandths of a KB, rounded to nearest (ties away from zero). */
long long tg_bytes_to_milli_kb(long long bytes);

/*
 * Writes m/1000 as a decimal ("-163.999", "12.5", "0") into buf (at least
 * TG_FMT_MILLI_MAX bytes); returns the length.  Hand-written: called per line.
 */
size_t tg_fmt_milli(char *buf, long long m);

/*
 * Writes v the way Python 3's repr(float) does: the shortest text that reads back
 * as v, ".0" added to integral values, exponent form below 1e-4 and from 1e16.
 * buf needs 32 bytes; returns the length.
 */
size_t tg_fmt_pyfloat(char *buf, double v);

/* A duration for people: "950 ns", "12.3 us", "48.9 ms", "1.25 s", "12.5 min",
 * three significant digits, into buf (at least TG_FMT_DURATION_MAX bytes);
 * returns the length. */
#define TG_FMT_DURATION_MAX 40
size_t tg_fmt_duration(char *buf, double secs);

/*
 * Writes len bytes of dump text to f with every terminal-unsafe sequence
 * (tg_unsafe_seq: bytes below 0x20 and 0x7f, the UTF-8 C1 controls, the
 * bidirectional controls such as U+202E) as \xHH per byte, so text from a dump
 * cannot carry terminal escape sequences nor reorder a line.  Returns 0 or EOF.
 */
int tg_fputs_safe(FILE *f, const char *s, size_t len);

/* tg_fputs_safe of the string s, then spaces up to width columns (counting
 * bytes, as printf's %-*s).  0 or EOF. */
int tg_fputs_safe_pad(FILE *f, const char *s, int width);

/*
 * Writes len bytes of JSON text to f with each terminal-unsafe sequence but
 * tab as a \uXXXX escape of its code point (the same text to a JSON reader
 * where it was inside a string, where a raw control is not even allowed).
 * Returns 0 or EOF.
 */
int tg_fputs_json_safe(FILE *f, const char *s, size_t len);

#endif
