/*
 * writer.c - buffered whole-line output streams (see writer.h for the
 * producer/consumer rules).
 *
 * Flushing never raises: a failed write records its errno in the writer, which
 * stops that stream for good; disable() reports stopped streams as a warning.
 * Plain C: no Python, no other recorder file (tests/c/test_writer.c links it
 * alone).
 */
#include "writer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int64_t
tg_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int
tg_fd_is_ours(int fd, dev_t dev, ino_t ino)
{
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

/* Stop W's stream with errno E (the first error is kept), and send the
 * producer's next reserve to the slow path (see lim in writer.h).  Any side. */
static void
tg_writer_stop(struct tg_writer *w, int e)
{
    int none = 0;
    atomic_compare_exchange_strong(&w->err, &none, e);
    atomic_store(&w->lim, 0);
}

/* W's buffer is empty again (len 0): its next line takes the slow path, which
 * stamps first_ns.  The producer's side, or with no producer running. */
static void
tg_writer_emptied(struct tg_writer *w)
{
    atomic_store_explicit(&w->len, 0, memory_order_relaxed);
    atomic_store(&w->lim, 0);
}

/* Before touching W's descriptor: if the program closed it (and maybe reused its
 * number for a file of its own), forget it without closing and stop the stream. */
static int
tg_writer_check_fd(struct tg_writer *w)
{
    if (w->fd < 0)
        return 0;
    if (tg_fd_is_ours(w->fd, w->dev, w->ino))
        return 1;
    w->fd = -1;
    tg_writer_stop(w, EBADF);
    return 0;
}

void
tg_writer_init(struct tg_writer *w)
{
    memset(w, 0, sizeof(*w));
    pthread_mutex_init(&w->lock, NULL);
    w->fd = -1;
}

void
tg_writer_set_kick(struct tg_writer *w, void (*kick)(void *ctx), void *ctx)
{
    w->kick = kick;
    w->kick_ctx = ctx;
}

static int
tg_writer_init_buffer(struct tg_writer *w, const char *label)
{
    w->fd = -1;
    w->sink = NULL;
    w->sink_ctx = NULL;
    w->sink_tag = 0;
    w->pyfile = NULL;
    tg_writer_emptied(w);
    w->flushed = 0;
    w->first_ns = 0;
    atomic_store(&w->err, 0);
    w->dropped = 0;
    w->in_sink_write = 0;
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
        atomic_store(&w->err, errno);
        return ret;
    }
    {
        struct stat st;
        if (fstat(w->fd, &st) < 0) {
            ret = -errno;
            atomic_store(&w->err, errno);
            close(w->fd);
            w->fd = -1;
            return ret;
        }
        w->dev = st.st_dev;
        w->ino = st.st_ino;
    }
    return 0;
}

int
tg_writer_open_sink(struct tg_writer *w, const struct tg_writer_sink *sink, void *ctx,
                    uint64_t tag, const char *label)
{
    int ret = tg_writer_init_buffer(w, label);
    if (ret < 0)
        return ret;
    w->sink = sink;
    w->sink_ctx = ctx;
    w->sink_tag = tag;
    if (sink->owner_only)
        w->pyfile = ctx;
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

/* Write LEN bytes of whole records at BUF to W's file: a write(2) of the
 * descriptor, or one call of the sink.  Returns 0 or an errno. */
static int
tg_writer_out(struct tg_writer *w, const char *buf, size_t len)
{
    if (w->sink != NULL)
        return w->sink->write(w->sink_ctx, w->sink_tag, buf, len);
    return tg_write_all(w->fd, buf, len);
}

/* Whether W's descriptor may be written now; the caller holds w->lock. */
static int
tg_writer_writable_unlocked(struct tg_writer *w)
{
    if (w->sink != NULL)
        return !w->dropped && !atomic_load_explicit(&w->err, memory_order_relaxed);
    return w->fd >= 0 && !w->dropped && !atomic_load_explicit(&w->err, memory_order_relaxed)
           && tg_writer_check_fd(w);
}

/* Write the handed-off buffer, if any, and keep it as the spare; the caller
 * holds w->lock. */
static void
tg_writer_write_full_unlocked(struct tg_writer *w)
{
    if (w->full == NULL)
        return;
    if (w->full_len > w->full_from && tg_writer_writable_unlocked(w)) {
        int e = tg_writer_out(w, w->full + w->full_from, w->full_len - w->full_from);
        if (e)
            tg_writer_stop(w, e);
    }
    if (w->spare == NULL)
        w->spare = w->full;
    else
        free(w->full);
    w->full = NULL;
    w->full_from = w->full_len = 0;
}

/* Write [flushed, len) to the descriptor, after the handed-off buffer; the
 * caller holds w->lock. */
static void
tg_writer_write_pending_unlocked(struct tg_writer *w)
{
    size_t end = atomic_load_explicit(&w->len, memory_order_acquire);
    tg_writer_write_full_unlocked(w);
    if (end > w->flushed && tg_writer_writable_unlocked(w)) {
        int e = tg_writer_out(w, w->buf + w->flushed, end - w->flushed);
        if (e)
            tg_writer_stop(w, e);
    }
    w->flushed = end;
}

/* Hand the pending bytes to W's owner-only sink.  The GIL is held.  The buffer
 * is emptied before the call because the sink (file.write()) may run code that
 * appends to W again, or release the GIL and let another flush of W run. */
static void
tg_writer_flush_owner(struct tg_writer *w)
{
    size_t len = atomic_load_explicit(&w->len, memory_order_relaxed);
    int e;

    if (w->in_sink_write || len == 0)
        return;
    tg_writer_emptied(w);
    w->first_ns = 0;
    w->in_sink_write = 1;
    e = w->sink->write(w->sink_ctx, w->sink_tag, w->buf, len);
    w->in_sink_write = 0;
    if (e)
        tg_writer_stop(w, e);
}

void
tg_writer_flush_full_nogil(struct tg_writer *w)
{
    if (w->pyfile != NULL || atomic_load_explicit(&w->full, memory_order_relaxed) == NULL)
        return;  /* unlocked peek (atomic); the locked path re-reads */
    pthread_mutex_lock(&w->lock);
    tg_writer_write_full_unlocked(w);
    pthread_mutex_unlock(&w->lock);
}

void
tg_writer_flush_nogil(struct tg_writer *w)
{
    if (w->buf == NULL || w->pyfile != NULL)
        return;
    if (atomic_load_explicit(&w->len, memory_order_relaxed)
                == atomic_load_explicit(&w->flushed, memory_order_relaxed)
            && atomic_load_explicit(&w->full, memory_order_relaxed) == NULL)
        return;  /* unlocked peeks (atomics); the locked path re-reads */
    pthread_mutex_lock(&w->lock);
    if (w->buf != NULL)
        tg_writer_write_pending_unlocked(w);
    pthread_mutex_unlock(&w->lock);
}

void
tg_writer_flush(struct tg_writer *w)
{
    if (w->buf == NULL)
        return;
    if (atomic_load_explicit(&w->err, memory_order_relaxed) || w->dropped) {
        if (w->pyfile == NULL) {
            pthread_mutex_lock(&w->lock);
            tg_writer_write_full_unlocked(w);  /* writes nothing: recycles it */
            pthread_mutex_unlock(&w->lock);
        }
        tg_writer_emptied(w);
        w->flushed = 0;
        return;
    }
    if (w->pyfile != NULL) {
        tg_writer_flush_owner(w);
        return;
    }
    pthread_mutex_lock(&w->lock);
    tg_writer_write_pending_unlocked(w);
    tg_writer_emptied(w);
    w->flushed = 0;
    pthread_mutex_unlock(&w->lock);
}

int
tg_writer_take_pending(struct tg_writer *w, char **out, size_t *split, size_t *len)
{
    size_t a = 0, b = 0, end;
    char *copy = NULL;
    int ret = 0;

    *out = NULL;
    *split = *len = 0;
    if (w->buf == NULL || w->pyfile != NULL)
        return 0;
    pthread_mutex_lock(&w->lock);
    end = atomic_load_explicit(&w->len, memory_order_acquire);
    if (!atomic_load_explicit(&w->err, memory_order_relaxed) && !w->dropped) {
        if (w->full != NULL && w->full_len > w->full_from)
            a = w->full_len - w->full_from;
        if (end > w->flushed)
            b = end - w->flushed;
        if (a + b > 0) {
            if ((copy = malloc(a + b)) == NULL) {
                ret = -1;
                goto out;
            }
            if (a > 0)
                memcpy(copy, w->full + w->full_from, a);
            if (b > 0)
                memcpy(copy + a, w->buf + w->flushed, b);
        }
    }
    if (w->full != NULL) {  /* taken (or not to be written): recycled */
        w->full_from = w->full_len;
        tg_writer_write_full_unlocked(w);
    }
    tg_writer_emptied(w);
    w->flushed = 0;
    *out = copy;
    *split = a;
    *len = a + b;
out:
    pthread_mutex_unlock(&w->lock);
    return ret;
}

/* Hand W's filled buffer to the flusher and continue in the spare one.  GIL
 * held (the producer).  Returns 0 when the flusher still has the previous one
 * (or no spare can be had): the caller then writes both itself. */
static int
tg_writer_handoff(struct tg_writer *w)
{
    int done = 0;

    if (w->pyfile != NULL || w->cap != TG_WRITER_BUFSIZE || w->kick == NULL)
        return 0;
    pthread_mutex_lock(&w->lock);
    if (w->full == NULL && w->spare == NULL)
        w->spare = malloc(TG_WRITER_BUFSIZE);
    if (w->full == NULL && w->spare != NULL) {
        w->full = w->buf;
        w->full_from = w->flushed;
        w->full_len = atomic_load_explicit(&w->len, memory_order_relaxed);
        w->buf = w->spare;
        w->spare = NULL;
        tg_writer_emptied(w);
        w->flushed = 0;
        done = 1;
    }
    pthread_mutex_unlock(&w->lock);
    if (done)
        w->kick(w->kick_ctx);
    return done;
}

char *
tg_writer_reserve_slow(struct tg_writer *w, size_t n)
{
    size_t len;

    if (!tg_writer_usable(w))
        return NULL;
    len = atomic_load_explicit(&w->len, memory_order_relaxed);
    if (len + n > w->cap && n <= TG_WRITER_BUFSIZE && tg_writer_handoff(w)) {
        len = 0;
    } else if (len + n > w->cap) {
        tg_writer_flush(w);
        if (!tg_writer_usable(w))
            return NULL;
        if (atomic_load_explicit(&w->len, memory_order_relaxed) != 0)
            return NULL;  /* an owner-only sink's write re-entered: not flushed */
        if (n > w->cap) {
            /* One record larger than the buffer (a huge file name): grow, under
             * the lock so that the flusher never reads a moving buffer. */
            char *nb;
            int pyfile = w->pyfile != NULL;
            if (!pyfile)
                pthread_mutex_lock(&w->lock);
            nb = realloc(w->buf, n);
            if (nb != NULL) {
                w->buf = nb;
                w->cap = n;
            }
            if (!pyfile)
                pthread_mutex_unlock(&w->lock);
            if (nb == NULL)
                return NULL;
        }
        len = 0;
    }
    if (len == 0)
        w->first_ns = tg_monotonic_ns();
    /* The fast path's bound (writer.h, lim): raised, then err read again, so
     * that a stream stopped meanwhile is seen here or has its lim lowered after
     * this store. */
    atomic_store(&w->lim, w->cap);
    if (atomic_load(&w->err) || w->dropped) {
        atomic_store(&w->lim, 0);
        return NULL;
    }
    return w->buf + len;
}

void
tg_writer_release(struct tg_writer *w)
{
    int owner = w->pyfile != NULL;

    if (w->buf == NULL && w->path == NULL && w->sink == NULL && w->fd < 0)
        return;
    /* callers that report errors read w->err and w->path before releasing */
    tg_writer_flush(w);
    if (!owner)
        pthread_mutex_lock(&w->lock);
    if (w->sink != NULL && w->sink->close != NULL) {
        int e = w->sink->close(w->sink_ctx, w->dropped);
        if (e)
            tg_writer_stop(w, e);
    }
    w->sink = NULL;
    w->sink_ctx = NULL;
    w->pyfile = NULL;
    if (tg_writer_check_fd(w))
        close(w->fd);
    w->fd = -1;
    atomic_store(&w->lim, 0);
    free(w->buf);
    w->buf = NULL;
    w->cap = 0;
    free(w->full);
    w->full = NULL;
    w->full_from = w->full_len = 0;
    free(w->spare);
    w->spare = NULL;
    tg_writer_emptied(w);
    w->flushed = 0;
    free(w->path);
    w->path = NULL;
    if (!owner)
        pthread_mutex_unlock(&w->lock);
}

void
tg_writer_destroy(struct tg_writer *w)
{
    pthread_mutex_destroy(&w->lock);
}

void
tg_writer_drop_in_child(struct tg_writer *w)
{
    if (pthread_mutex_trylock(&w->lock) != 0) {
        /* fork() takes no writer's lock (a consumer holds it across write(2),
         * and a fork must not wait for the disk): held here, it was held by
         * a thread that is not in the child, in the middle of writing W's
         * buffers, perhaps moving them.  They are left as they are (never
         * freed here: leaked, at most this writer's three buffers) and W
         * goes on empty, with a lock of its own. */
        pthread_mutex_init(&w->lock, NULL);
        w->buf = NULL;
        w->cap = 0;
        w->full = NULL;
        w->spare = NULL;
    } else {
        /* The inherited full buffer is the parent's to write: recycle it
         * unwritten. */
        if (w->full != NULL && w->spare == NULL)
            w->spare = w->full;
        else
            free(w->full);
        w->full = NULL;
        pthread_mutex_unlock(&w->lock);
    }
    w->full_from = w->full_len = 0;
    w->dropped = 1;
    tg_writer_emptied(w);
    w->flushed = 0;
    w->first_ns = 0;
    if (tg_fd_is_ours(w->fd, w->dev, w->ino))
        close(w->fd);
    w->fd = -1;
}
