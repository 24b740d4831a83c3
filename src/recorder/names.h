/*
 * names.h - untrusted text to safe output: thread names to file base names, and
 * FILE / FUNCTION fields of records (rules in src/common/tg_format.h).
 */
#ifndef TG_NAMES_H
#define TG_NAMES_H

#include <stddef.h>

#pragma GCC visibility push(hidden)

/* Worst case size of tg_safe_basename's output, suffix and NUL included. */
#define TG_BASENAME_CAP (3 * 4 + 200 + 32)

/* Map the UTF-8 thread name NAME (LEN bytes) to a file base name in OUT (at least
 * TG_BASENAME_CAP bytes, NUL-terminated): '/', '%', '\\', bytes < 0x20 and 0x7f
 * as %HH, a leading '.' as %2E, empty as %00, cut to TG_NAME_MAX bytes on a
 * character boundary.  No "~N" suffix: see tg_nameset_claim. */
void tg_safe_basename(const char *name, size_t len, char *out);

/* The file base names of one run, for making new ones unique in O(1) per try
 * (a server may start thousands of threads with the same name). */
struct tg_nameset;

/* A set holding "process" (reserved); NULL when out of memory. */
struct tg_nameset *tg_nameset_new(void);
void tg_nameset_free(struct tg_nameset *s);
/* Make OUT (a tg_safe_basename result, buffer of TG_BASENAME_CAP) distinct from
 * every name in S and from "process" by appending "~2", "~3", ... (the first
 * free), and add it to S.  Returns 0, or -1 when out of memory
 * (S unchanged). */
int tg_nameset_claim(struct tg_nameset *s, char *out);
/* Take NAME out of S (nothing if absent; "process" stays): a later claim may
 * get it, or a released "NAME~N", again.  Names are then distinct among those
 * held, not over the set's life (an aggregate run's folded threads, thread.h). */
void tg_nameset_release(struct tg_nameset *s, const char *name);

/*
 * Longest text the recorder writes for a FILE, a FUNCTION or a thread's name (a
 * capture's THREAD definition): a record stays a line the readers take (their
 * limit is 64 KiB) and a definition a chunk (16 MiB).  A longer text is cut on
 * a character boundary (and outside a \xHH) and ends with "~" and 16 hex
 * digits of a hash of the whole text, so that two cut texts stay distinct.
 */
#define TG_TEXT_MAX 8192
#define TG_TEXT_SUFFIX 17  /* "~" + 16 hex digits */

/* Length of SRC (LEN bytes) once bytes < 0x20 and 0x7f are written as \xHH,
 * cut to TG_TEXT_MAX. */
size_t tg_escaped_len(const char *src, size_t len);
/* Write the escaped form of SRC into DST (tg_escaped_len bytes); returns the end. */
char *tg_escape(char *dst, const char *src, size_t len);
/* Copy SRC (unescaped) into OUT (TG_TEXT_MAX bytes), cut as above; returns the
 * length written. */
size_t tg_text_cap(const char *src, size_t len, char *out);

#pragma GCC visibility pop

#endif /* TG_NAMES_H */
