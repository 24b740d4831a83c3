/*
 * writer.c - buffered whole-line output streams (see writer.h).
 *
 * Flushing never raises: a failed write records its errno in the writer, which
 * stops that stream for good; disable() reports stopped streams as a warning.
 */
#include "writer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int64_t
tg_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int
tg_writer_init_buffer(struct tg_writer *w, const char *label)
{
    w->fd = -1;
    w->pyfile = NULL;
    w->py_bytes = 0;
    w->len = 0;
    w->first_ns = 0;
    w->err = 0;
    w->dropped = 0;
    w->in_py_write = 0;
    w->cap = TG_WRITER_BUFSIZE;
    w->buf = malloc(w->cap);
    w->path = strdup(label);
    if (w->buf == NULL || w->path == NULL) {
        free(w->buf);
        free(w->path);
        w->buf = NULL;
        w->path = NULL;
        return -ENOMEM;
    }
    return 0;
}

int
tg_writer_open_path(struct tg_writer *w, const char *path)
{
    int ret = tg_writer_init_buffer(w, path);
    if (ret < 0)
        return ret;
    w->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        ret = -errno;
        w->err = errno;
        return ret;
    }
    return 0;
}

int
tg_writer_open_pyfile(struct tg_writer *w, PyObject *file, const char *label)
{
    int ret = tg_writer_init_buffer(w, label);
    if (ret < 0)
        return ret;
    Py_INCREF(file);
    w->pyfile = file;
    return 0;
}

/* write(2) all of BUF; returns 0 or an errno. */
static int
tg_write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Hand the pending bytes to the Python stream.  The GIL is held.  The buffer is
 * emptied before the call because file.write() may release the GIL and let
 * another flush of this writer run. */
static void
tg_writer_flush_py_unlocked(struct tg_writer *w)
{
    tg_saved_exc saved;
    PyObject *data, *res;

    if (w->in_py_write)
        return;
    tg_exc_save(&saved);
    if (w->py_bytes)
        data = PyBytes_FromStringAndSize(w->buf, (Py_ssize_t)w->len);
    else
        data = PyUnicode_DecodeUTF8(w->buf, (Py_ssize_t)w->len, "surrogateescape");
    w->len = 0;
    w->first_ns = 0;
    if (data == NULL) {
        w->err = ENOMEM;
        PyErr_Clear();
        goto restore;
    }
    w->in_py_write = 1;
    res = PyObject_CallMethod(w->pyfile, "write", "O", data);
    if (res == NULL && !w->py_bytes && PyErr_ExceptionMatches(PyExc_TypeError)) {
        /* A binary stream: retry with bytes and remember. */
        PyObject *b;
        PyErr_Clear();
        b = PyUnicode_AsEncodedString(data, "utf-8", "surrogateescape");
        if (b != NULL) {
            w->py_bytes = 1;
            res = PyObject_CallMethod(w->pyfile, "write", "O", b);
            Py_DECREF(b);
        }
    }
    w->in_py_write = 0;
    Py_DECREF(data);
    if (res == NULL) {
        w->err = EIO;
        PyErr_Clear();
    }
    Py_XDECREF(res);
restore:
    tg_exc_restore(&saved);
}

void
tg_writer_flush_unlocked(struct tg_writer *w)
{
    if (w->len == 0 || w->buf == NULL)
        return;
    if (w->err || w->dropped) {
        w->len = 0;
        return;
    }
    if (w->pyfile != NULL) {
        tg_writer_flush_py_unlocked(w);
        return;
    }
    if (w->fd >= 0) {
        int e = tg_write_all(w->fd, w->buf, w->len);
        if (e)
            w->err = e;
    }
    w->len = 0;
    w->first_ns = 0;
}

char *
tg_writer_reserve_unlocked(struct tg_writer *w, size_t n)
{
    if (!tg_writer_usable(w))
        return NULL;
    if (w->len + n > w->cap) {
        /* Python writers are only flushed here with the GIL: reserve is only
         * called from the profile function, which holds it. */
        tg_writer_flush_unlocked(w);
        if (!tg_writer_usable(w))
            return NULL;
        if (n > w->cap) {
            /* One record larger than the buffer (a huge file name): grow. */
            char *nb = realloc(w->buf, n);
            if (nb == NULL)
                return NULL;
            w->buf = nb;
            w->cap = n;
        }
    }
    return w->buf + w->len;
}

void
tg_writer_release(struct tg_writer *w)
{
    if (w->buf == NULL && w->path == NULL && w->pyfile == NULL && w->fd < 0)
        return;
    /* callers that report errors read w->err and w->path before releasing */
    tg_writer_flush_unlocked(w);
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
    if (w->pyfile != NULL) {
        tg_saved_exc saved;
        tg_exc_save(&saved);
        if (!w->dropped) {
            PyObject *res = PyObject_CallMethod(w->pyfile, "flush", NULL);
            if (res == NULL) {
                PyErr_Clear();
                if (!w->err)
                    w->err = EIO;
            }
            Py_XDECREF(res);
        }
        Py_CLEAR(w->pyfile);
        tg_exc_restore(&saved);
    }
    free(w->buf);
    w->buf = NULL;
    w->len = 0;
    free(w->path);
    w->path = NULL;
}

void
tg_writer_drop_in_child(struct tg_writer *w)
{
    w->len = 0;
    w->first_ns = 0;
    w->dropped = 1;
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
}
