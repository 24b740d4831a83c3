/*
 * linereader.h - fast buffered line reader over a file (plain or gzip).
 *
 * Reads with large read(2) calls into one buffer and finds line ends with memchr,
 * so there is no per-line allocation or copy.  A file that starts with the gzip
 * magic is read through zlib transparently.  Lines end with "\n"; a "\r" before
 * it is dropped; a last line without "\n" is returned like any other.  A line
 * longer than TG_LR_MAX_LINE is returned empty with .overlong set, so the caller
 * can report it as malformed; memory use never depends on the file's size.
 */
#ifndef TG_LINEREADER_H
#define TG_LINEREADER_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "diag.h"

/* Longest line kept whole; longer lines are reported as overlong. */
#define TG_LR_MAX_LINE (64 * 1024)
/* Default buffer size: big reads amortise the system calls. */
#define TG_LR_BUFSIZE (256 * 1024)

struct tg_lr {
	const char *path;     /* file name, for messages (not owned) */
	int fd;               /* open file, -1 once released */
	void *gz;             /* gzFile when the file is gzip-compressed, else NULL */
	char *buf;            /* read buffer of cap bytes */
	size_t cap;           /* buffer size */
	size_t pos;           /* start of unread data in buf */
	size_t end;           /* end of valid data in buf */
	int eof;              /* the file has no more data to read */
	int discarding;       /* skipping the rest of an overlong line */
	int overlong;         /* the last line returned was overlong (and emptied) */
	int no_newline;       /* the last line returned had no final newline */
	int has_nul;          /* the last line returned contains a NUL byte */
	size_t nul_at;        /* index in buf of the first NUL at or after pos, or SIZE_MAX */
	int has_cr;           /* the last line returned has a '\r' before its end (a line
			       * ending "\r\n" is a line; a bare '\r' joins two) */
	size_t cr_at;         /* index in buf of the first '\r' at or after pos, or SIZE_MAX */
	unsigned long lineno; /* 1-based number of the last line returned */
};

/*
 * Opens path for reading with a buffer of bufsize bytes (0: TG_LR_BUFSIZE).
 * Returns 0, or -1 with d->msg set (missing, unreadable, a directory, binary
 * content); lr needs no release after a failure.
 */
int tg_lr_open(struct tg_lr *lr, const char *path, size_t bufsize, struct tg_diag *d);

/* The general case of tg_lr_next(): refills, overlong lines, NULs, last line. */
int tg_lr_next_slow(struct tg_lr *lr, const char **line, size_t *len, struct tg_diag *d);

/*
 * Returns 1 and the next line in *line and *len (not NUL-terminated, valid until the
 * next call), 0 at end of file, or -1 with d->msg set on a read error.  Inline: the
 * common case (a whole, ordinary line in the buffer) costs one memchr.
 */
static inline int tg_lr_next(struct tg_lr *lr, const char **line, size_t *len,
			     struct tg_diag *d)
{
	char *s = lr->buf + lr->pos, *nl;
	size_t l;

	if (lr->pos < lr->end && !lr->discarding &&
	    (nl = memchr(s, '\n', lr->end - lr->pos)) != NULL) {
		l = (size_t)(nl - s);
		if (l <= TG_LR_MAX_LINE && lr->nul_at > lr->pos + l && lr->cr_at > lr->pos + l) {
			lr->pos += l + 1;
			lr->lineno++;
			lr->overlong = lr->has_nul = lr->no_newline = lr->has_cr = 0;
			*line = s;
			*len = l;
			return 1;
		}
	}
	return tg_lr_next_slow(lr, line, len, d);
}

/*
 * Why the last line returned cannot be a record ("line too long", "NUL byte in
 * line"), or NULL.  NUL bytes are found once per buffer fill, not per line.
 */
static inline const char *tg_lr_bad(const struct tg_lr *lr)
{
	return lr->overlong ? "line too long" : lr->has_nul ? "NUL byte in line"
	       : lr->has_cr ? "carriage return inside the line" : NULL;
}

/* Closes the file and frees the buffer; safe to call twice. */
void tg_lr_release(struct tg_lr *lr);

#endif
