/*
 * writer.h - buffered, whole-line output streams for the dump files.
 *
 * A writer owns either a file descriptor (the default files) or a Python file
 * object (stream_factory).  Records are appended into a 64 KiB buffer that only
 * ever holds whole lines, and leave the process with one write(2) per flush, so a
 * killed process leaves at most its last line incomplete.  A writer has no lock of
 * its own: its owner (struct tg_thread's lock, or the process-file lock) guards it.
 * Buffers come from malloc(), never PyMem, so the tracer's own memory is invisible
 * to the allocator hooks.
 */
#ifndef TG_WRITER_H
#define TG_WRITER_H

#include "tg_compat.h"
#include <stdint.h>
#include <stddef.h>

#define TG_WRITER_BUFSIZE (64 * 1024)

struct tg_writer {
    int fd;              /* open descriptor, or -1 (closed, Python stream, or unused) */
    PyObject *pyfile;    /* stream_factory file or NULL; only touched with the GIL */
    int py_bytes;        /* 1 once pyfile rejected str and takes bytes */
    char *buf;           /* malloc'ed; whole lines only */
    size_t len;          /* bytes pending in buf */
    size_t cap;          /* size of buf */
    int64_t first_ns;    /* CLOCK_MONOTONIC time of the oldest pending line, 0 if none */
    int err;             /* errno of the first failed write: the stream is stopped */
    int dropped;         /* set in a forked child: inherited data is discarded */
    int in_py_write;     /* a Python write is in progress (it may release the GIL) */
    char *path;          /* for error messages; malloc'ed */
};

/* Open PATH (O_EXCL|O_NOFOLLOW, 0644) into W.  Returns 0, or -errno and leaves W
 * unusable but safe to release. */
int tg_writer_open_path(struct tg_writer *w, const char *path);
/* Use the Python file object FILE (a new reference is taken).  Returns 0 or -ENOMEM. */
int tg_writer_open_pyfile(struct tg_writer *w, PyObject *file, const char *label);
/* Whether records may still be appended. */
static inline int tg_writer_usable(const struct tg_writer *w)
{
    return w->buf != NULL && !w->err && !w->dropped;
}
/* Space for N more bytes at the end of the buffer, flushing or growing first as
 * needed; NULL if the stream is stopped or memory ran out.  Follow with commit. */
char *tg_writer_reserve_unlocked(struct tg_writer *w, size_t n);
/* Account USED bytes written at the pointer reserve returned; NOW_NS is the
 * monotonic time of the record. */
static inline void tg_writer_commit_unlocked(struct tg_writer *w, size_t used, int64_t now_ns)
{
    if (w->len == 0)
        w->first_ns = now_ns;
    w->len += used;
}
/* Write the pending bytes out.  Descriptor writers: no GIL needed.  Python
 * writers: the GIL must be held (does nothing otherwise-safe: callers check). */
void tg_writer_flush_unlocked(struct tg_writer *w);
/* Flush, close and free everything; W may be released twice.  Python writers
 * need the GIL. */
void tg_writer_release(struct tg_writer *w);
/* In a forked child: forget pending bytes and close the inherited descriptor
 * without writing (async-signal-safe: no malloc, no Python). */
void tg_writer_drop_in_child(struct tg_writer *w);

int64_t tg_monotonic_ns(void);

#endif /* TG_WRITER_H */
