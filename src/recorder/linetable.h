/*
 * linetable.h - a code object's line of every instruction, from its location
 * table (CPython 3.11+ co_linetable), in one pass.
 *
 * PyCode_Addr2Line walks the location table from its start on every call:
 * for an offset near the end of a long function, thousands of instructions.
 * The recorder caches offset -> line per code object (recorder.c's direct-
 * mapped line cache); a code object whose events miss that cache again and
 * again (a long function calling builtins at many offsets) gets the whole
 * table decoded once instead.  The table's format (CPython's
 * InternalDocs/locations.md, Objects/locations.md before 3.13) is the same on
 * 3.11, 3.12 and 3.13; this is pure C, so tests/c/test_linetable.c checks it
 * alone, and recorder.c checks the decoded table against PyCode_Addr2Line
 * when built with -DTG_LINE_TABLE_CHECK.
 */
#ifndef TG_LINETABLE_H
#define TG_LINETABLE_H

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

/* A code unit the table says nothing of (past its end). */
#define TG_LINE_TABLE_NONE INT32_MIN

/* The number of code units the location table TAB (LEN bytes) covers. */
size_t tg_line_table_units(const uint8_t *tab, size_t len);

/* Decode TAB (LEN bytes) of a code object whose first line is FIRSTLINENO
 * into OUT[0..N): OUT[i] is the line of the instruction at offset 2*i, as
 * PyCode_Addr2Line gives it (-1 for an instruction without a line), or
 * TG_LINE_TABLE_NONE for a unit past the table's end.  Returns 0, or -1 when
 * the table is malformed (OUT then must not be used). */
int tg_line_table_decode(const uint8_t *tab, size_t len, int firstlineno, int32_t *out,
                         size_t n);

#pragma GCC visibility pop

#endif /* TG_LINETABLE_H */
