/*
 * tg_format.h - the on-disk text formats shared by the recorder and the CLI.
 *
 * This header is the single definition of the dump line formats; docs/formats.md
 * describes them for users.  The formats are the original ThreadGraph's, byte for
 * byte, so dumps written by the original are read by our CLI and ours by any tool
 * written for the original.
 *
 *   <Thread>.mem   one line per return:  [TIME#]FILE:LINE:FUNCTION=>DELTA
 *   <Thread>.stack one line per call:    INDENT[TIME#]FILE:LINE:FUNCTION
 *   process.mem    one line per sample:  [TIME#]BYTES
 *
 * TIME is Unix time in seconds with a fractional part.  The recorder writes
 * exactly TG_TIME_FRAC_DIGITS decimals; readers accept any number (including
 * none), as the original wrote str(time.time()).
 */
#ifndef TG_FORMAT_H
#define TG_FORMAT_H

#include <stddef.h>

/* Separates TIME from the rest of a line (absent when timestamps are off). */
#define TG_TIME_SEP '#'
/* Separates FILE, LINE and FUNCTION; readers split on the last two. */
#define TG_FIELD_SEP ':'
/* Separates the call site from DELTA in .mem lines; readers split on the last. */
#define TG_DELTA_SEP "=>"
#define TG_DELTA_SEP_LEN 2
/*
 * Largest magnitude of a DELTA or BYTES readers take, 2^53 bytes (8 PiB): a
 * larger value is no memory change of a real process (even a thread that only
 * frees what others allocate takes 100 days at 1 GB/s to reach it), and every
 * value up to it is exact as a double.  A line beyond it is malformed ("memory
 * delta out of range"), so one value is sane; sums of many stay overflow-checked.
 */
#define TG_DELTA_MAX (1LL << 53)

/* One indentation unit per nesting level in .stack lines (depth 0 has none). */
#define TG_INDENT_CHAR ' '

/* Decimals the recorder writes after the point of TIME (microseconds). */
#define TG_TIME_FRAC_DIGITS 6

/* File name suffixes; the base name before the last '.' names the thread. */
#define TG_MEM_SUFFIX ".mem"
#define TG_STACK_SUFFIX ".stack"
/* Base name of the per-process RSS file; no thread file may use it. */
#define TG_PROCESS_BASENAME "process"
#define TG_RUNINFO_NAME "runinfo.json"

/*
 * Name given to C functions whose __module__ is None or missing, as the original
 * wrote str(None).
 */
#define TG_NONE_MODULE "None"

/*
 * FILE of a C function with no module and no object it is bound to (a C
 * function bound to an object names the object's type instead, docs/formats.md).
 */
#define TG_NO_OWNER "<builtin>"

/*
 * Characters of FILE and FUNCTION that the recorder escapes as \xHH so that every
 * record stays on one line: bytes below 0x20 and 0x7f.  Readers print what they
 * read; they never unescape.
 */
#define TG_NEEDS_ESCAPE(c) ((unsigned char)(c) < 0x20 || (unsigned char)(c) == 0x7f)

/*
 * Length of the terminal-unsafe sequence starting S (N bytes available), or 0:
 * a byte TG_NEEDS_ESCAPE (1); a UTF-8 C1 control U+0080-U+009F (2: C2 80-C2 9F,
 * U+009B is CSI to some terminals); a bidirectional control that reorders what
 * a terminal shows, U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069 (2 or 3).
 * Whatever reaches a terminal, and the recorder's file names, escape these.
 */
static inline size_t tg_unsafe_seq(const unsigned char *s, size_t n)
{
	if (!n)
		return 0;
	if (TG_NEEDS_ESCAPE(s[0]))
		return 1;
	if (n >= 2 && ((s[0] == 0xc2 && s[1] >= 0x80 && s[1] <= 0x9f) ||
		       (s[0] == 0xd8 && s[1] == 0x9c)))
		return 2;
	if (n >= 3 && s[0] == 0xe2 &&
	    ((s[1] == 0x80 && (s[2] == 0x8e || s[2] == 0x8f || (s[2] >= 0xaa && s[2] <= 0xae))) ||
	     (s[1] == 0x81 && s[2] >= 0xa6 && s[2] <= 0xa9)))
		return 3;
	return 0;
}

/*
 * Thread name to file base name (recorder side):
 *   - the name is encoded as UTF-8 (surrogates backslash-escaped);
 *   - '/', '%', '\\', bytes below 0x20 and 0x7f, and the bytes of a C1 or
 *     bidirectional control (tg_unsafe_seq) become %HH;
 *   - a leading '.' becomes %2E (no ".", "..", or hidden files);
 *   - an empty name becomes "%00";
 *   - at most TG_NAME_MAX bytes are kept (cut on a UTF-8 boundary);
 *   - "process" and names already used by another thread of the run get a
 *     suffix "~N", N = 2, 3, ... (first free).
 */
#define TG_NAME_MAX 200

/*
 * A sampled run's memory curve (mode="sampled", no recorded calls): each line of
 * its .mem files is a reading of the thread's memory, as the DELTA of one
 * pseudo-call from the run's start to the reading:
 *   [TIME#]<thread memory>:0:sampled=>BYTES
 */
#define TG_CURVE_FILE "<thread memory>"
#define TG_CURVE_FUNC "sampled"
/* An aggregate run's curve read as .mem records (src/lib/dumpset.h): the same
 * pseudo-call, named so. */
#define TG_AGG_CURVE_FUNC "aggregate"

#endif /* TG_FORMAT_H */
