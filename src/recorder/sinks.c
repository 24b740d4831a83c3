/*
 * sinks.c - the writer's sinks (writer.h): the binary capture's chunks, and
 * stream_factory's Python file objects.  The writer itself is plain C; what
 * needs the capture or Python is here.
 */
#include "sinks.h"

#include <errno.h>
#include <stdlib.h>

/* --- capture chunks --------------------------------------------------------- */

/* TAG: the chunk kind in the high 32 bits, the stream id in the low ones. */
static int
tg_sink_chunks_write(void *ctx, uint64_t tag, const char *buf, size_t len)
{
    return tg_cap_chunk_out(ctx, (int)(tag >> 32), (uint32_t)tag, buf, len);
}

static const struct tg_writer_sink tg_sink_chunks = {
    .write = tg_sink_chunks_write,
    .close = NULL,  /* the capture is closed by its owner, after every stream */
    .owner_only = 0,
};

int
tg_sink_open_chunks(struct tg_writer *w, struct tg_cap *cap, int kind, uint32_t stream,
                    const char *label)
{
    return tg_writer_open_sink(w, &tg_sink_chunks, cap,
                               ((uint64_t)(uint32_t)kind << 32) | stream, label);
}

/* --- Python file objects ------------------------------------------------------ */

/* A stream_factory file; only touched with the GIL. */
struct tg_pyfile {
    PyObject *file;   /* strong reference */
    int bytes;        /* 1 once FILE rejected str and takes bytes */
};

/* file.write(the LEN bytes at BUF), as str (surrogateescape) or bytes.  GIL
 * held; the exception in flight is kept.  The bytes are copied into the str or
 * bytes object before any Python code runs (writer.h's owner_only rule). */
static int
tg_sink_pyfile_write(void *ctx, uint64_t tag, const char *buf, size_t len)
{
    struct tg_pyfile *pf = ctx;
    tg_saved_exc saved;
    PyObject *data, *res;
    int e = 0;
    (void)tag;

    tg_exc_save(&saved);
    if (pf->bytes)
        data = PyBytes_FromStringAndSize(buf, (Py_ssize_t)len);
    else
        data = PyUnicode_DecodeUTF8(buf, (Py_ssize_t)len, "surrogateescape");
    if (data == NULL) {
        PyErr_Clear();
        e = ENOMEM;
        goto restore;
    }
    res = PyObject_CallMethod(pf->file, "write", "O", data);
    if (res == NULL && !pf->bytes && PyErr_ExceptionMatches(PyExc_TypeError)) {
        /* A binary stream: retry with bytes and remember. */
        PyObject *b;
        PyErr_Clear();
        b = PyUnicode_AsEncodedString(data, "utf-8", "surrogateescape");
        if (b != NULL) {
            pf->bytes = 1;
            res = PyObject_CallMethod(pf->file, "write", "O", b);
            Py_DECREF(b);
        }
    }
    Py_DECREF(data);
    if (res == NULL) {
        e = EIO;
        PyErr_Clear();
    }
    Py_XDECREF(res);
restore:
    tg_exc_restore(&saved);
    return e;
}

/* file.flush() unless DROPPED (a forked child's inherited stream), then let go
 * of the file.  GIL held; the exception in flight is kept. */
static int
tg_sink_pyfile_close(void *ctx, int dropped)
{
    struct tg_pyfile *pf = ctx;
    tg_saved_exc saved;
    int e = 0;

    tg_exc_save(&saved);
    if (!dropped) {
        PyObject *res = PyObject_CallMethod(pf->file, "flush", NULL);
        if (res == NULL) {
            PyErr_Clear();
            e = EIO;
        }
        Py_XDECREF(res);
    }
    Py_DECREF(pf->file);
    free(pf);
    tg_exc_restore(&saved);
    return e;
}

static const struct tg_writer_sink tg_sink_pyfile = {
    .write = tg_sink_pyfile_write,
    .close = tg_sink_pyfile_close,
    .owner_only = 1,
};

int
tg_sink_open_pyfile(struct tg_writer *w, PyObject *file, const char *label)
{
    struct tg_pyfile *pf = malloc(sizeof(*pf));
    int ret;

    if (pf == NULL)
        return -ENOMEM;
    pf->file = file;
    pf->bytes = 0;
    ret = tg_writer_open_sink(w, &tg_sink_pyfile, pf, 0, label);
    if (ret < 0) {
        free(pf);
        return ret;
    }
    Py_INCREF(file);
    return 0;
}
