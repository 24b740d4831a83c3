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
#include "testgate.h"

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

/* Free TG_WRITER_BUFSIZE buffers kept for the next writer that needs one:
 * a thread's start takes one, its end gives its own back, so that a
 * program starting and ending threads (or a flusher catching up with a
 * queue) does not take and free 64 KiB blocks from the heap all the time
 * (RSS moving with glibc's trims).  At most TG_WRITER_POOL_MAX (1 MiB), kept
 * for the process's life.  pool_lock is held only for the array, never
 * across I/O (any side takes it, the GIL holder included). */
#define TG_WRITER_POOL_MAX 16
static pthread_mutex_t tg_writer_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static char *tg_writer_pool[TG_WRITER_POOL_MAX];  /* pool_lock */
static unsigned tg_writer_npool;                  /* pool_lock */

/* A TG_WRITER_BUFSIZE buffer: a pooled one, or a new one; NULL when out of
 * memory. */
static char *
tg_writer_buf_new(void)
{
    char *b = NULL;

    pthread_mutex_lock(&tg_writer_pool_lock);
    if (tg_writer_npool > 0)
        b = tg_writer_pool[--tg_writer_npool];
    pthread_mutex_unlock(&tg_writer_pool_lock);
    return b != NULL ? b : malloc(TG_WRITER_BUFSIZE);
}

/* Give back buffer B of CAP bytes (NULL: nothing): pooled if it is a
 * TG_WRITER_BUFSIZE one and the pool has room, else freed. */
static void
tg_writer_buf_free(char *b, size_t cap)
{
    if (b != NULL && cap == TG_WRITER_BUFSIZE) {
        pthread_mutex_lock(&tg_writer_pool_lock);
        if (tg_writer_npool < TG_WRITER_POOL_MAX) {
            tg_writer_pool[tg_writer_npool++] = b;
            b = NULL;
        }
        pthread_mutex_unlock(&tg_writer_pool_lock);
    }
    free(b);
}

unsigned
tg_writer_pooled(void)
{
    unsigned n;

    pthread_mutex_lock(&tg_writer_pool_lock);
    n = tg_writer_npool;
    pthread_mutex_unlock(&tg_writer_pool_lock);
    return n;
}

/* The test gate of descriptor writes (writer.h, testgate.h). */
static struct tg_test_gate tg_writer_gate = TG_TEST_GATE_INIT;

void
tg_writer_gate_set(int closed)
{
    tg_test_gate_set(&tg_writer_gate, closed);
}

void
tg_writer_gate_wait_blocked(void)
{
    tg_test_gate_wait_blocked(&tg_writer_gate);
}

void
tg_writer_pool_after_fork_child(void)
{
    tg_test_gate_reset_in_child(&tg_writer_gate);
    if (pthread_mutex_trylock(&tg_writer_pool_lock) != 0) {
        /* held at the fork by a thread not in the child, maybe in the
         * middle of a change: the pooled buffers are left (leaked) */
        tg_writer_npool = 0;
        pthread_mutex_init(&tg_writer_pool_lock, NULL);
        return;
    }
    pthread_mutex_unlock(&tg_writer_pool_lock);
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
    pthread_mutex_init(&w->io_lock, NULL);
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
    w->buf = tg_writer_buf_new();
    w->path = strdup(label);
    if (w->buf == NULL || w->path == NULL) {
        tg_writer_buf_free(w->buf, TG_WRITER_BUFSIZE);
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
    tg_test_gate_check(&tg_writer_gate);
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

/* Buffer F, written or given up, becomes W's spare (or is freed: a spare
 * is there already, or F was made for a record longer than the buffer).  The
 * caller holds io_lock and lock: no consumer is reading F. */
static void
tg_writer_recycle_unlocked(struct tg_writer *w, struct tg_writer_full f)
{
    if (w->spare == NULL && f.cap == TG_WRITER_BUFSIZE)
        w->spare = f.buf;
    else
        tg_writer_buf_free(f.buf, f.cap);
}

/* Filled buffers queued in every writer (TG_WRITER_QUEUED_MAX); atomic. */
static _Atomic unsigned tg_writer_nqueued;

unsigned
tg_writer_queued(void)
{
    return atomic_load_explicit(&tg_writer_nqueued, memory_order_relaxed);
}

/* Take the oldest handed-off buffer out of the queue.  lock held, nfull > 0. */
static struct tg_writer_full
tg_writer_pop_unlocked(struct tg_writer *w)
{
    unsigned n = atomic_load_explicit(&w->nfull, memory_order_relaxed);
    struct tg_writer_full f = w->fullq[0];
    memmove(w->fullq, w->fullq + 1, (n - 1) * sizeof(f));
    atomic_store_explicit(&w->nfull, n - 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&w->nslots, f.slots, memory_order_relaxed);
    atomic_fetch_sub_explicit(&tg_writer_nqueued, f.slots, memory_order_relaxed);
    return f;
}

/* Write the handed-off buffers, oldest first, and recycle them.  The caller
 * holds io_lock and lock; lock is let go across each write (a handoff
 * meanwhile queues behind). */
static void
tg_writer_write_full_unlocked(struct tg_writer *w)
{
    while (atomic_load_explicit(&w->nfull, memory_order_relaxed) > 0) {
        struct tg_writer_full f = tg_writer_pop_unlocked(w);
        if (f.len > f.from && tg_writer_writable_unlocked(w)) {
            int e;
            pthread_mutex_unlock(&w->lock);
            e = tg_writer_out(w, f.buf + f.from, f.len - f.from);
            pthread_mutex_lock(&w->lock);
            if (e)
                tg_writer_stop(w, e);
        }
        tg_writer_recycle_unlocked(w, f);
    }
}

/* Give up the handed-off buffers unwritten (a stopped or dropped stream).
 * The caller holds io_lock and lock. */
static void
tg_writer_forget_full_unlocked(struct tg_writer *w)
{
    while (atomic_load_explicit(&w->nfull, memory_order_relaxed) > 0)
        tg_writer_recycle_unlocked(w, tg_writer_pop_unlocked(w));
}

/* Write [flushed, len) to the descriptor, after the handed-off buffers.  The
 * caller holds io_lock and lock; lock is let go across the write: the range
 * is claimed first (flushed advanced), so a handoff meanwhile queues the
 * buffer from its end, and the buffer is not reused while it is read (only
 * io_lock holders recycle buffers). */
static void
tg_writer_write_pending_unlocked(struct tg_writer *w)
{
    size_t end, from;
    char *b;

    tg_writer_write_full_unlocked(w);
    end = atomic_load_explicit(&w->len, memory_order_acquire);
    from = w->flushed;
    b = w->buf;
    if (end <= from)
        return;
    w->flushed = end;
    if (tg_writer_writable_unlocked(w)) {
        int e;
        pthread_mutex_unlock(&w->lock);
        e = tg_writer_out(w, b + from, end - from);
        pthread_mutex_lock(&w->lock);
        if (e)
            tg_writer_stop(w, e);
    }
}

/* Take W's io_lock then lock / let them go (a consumer's pair). */
static void
tg_writer_lock_io(struct tg_writer *w)
{
    pthread_mutex_lock(&w->io_lock);
    pthread_mutex_lock(&w->lock);
}

static void
tg_writer_unlock_io(struct tg_writer *w)
{
    pthread_mutex_unlock(&w->lock);
    pthread_mutex_unlock(&w->io_lock);
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
    if (w->pyfile != NULL || atomic_load_explicit(&w->nfull, memory_order_relaxed) == 0)
        return;  /* unlocked peek (atomic); the locked path re-reads */
    tg_writer_lock_io(w);
    tg_writer_write_full_unlocked(w);
    tg_writer_unlock_io(w);
}

void
tg_writer_flush_nogil(struct tg_writer *w)
{
    if (w->buf == NULL || w->pyfile != NULL)
        return;
    if (atomic_load_explicit(&w->len, memory_order_relaxed)
                == atomic_load_explicit(&w->flushed, memory_order_relaxed)
            && atomic_load_explicit(&w->nfull, memory_order_relaxed) == 0)
        return;  /* unlocked peeks (atomics); the locked path re-reads */
    tg_writer_lock_io(w);
    if (w->buf != NULL)
        tg_writer_write_pending_unlocked(w);
    tg_writer_unlock_io(w);
}

void
tg_writer_flush(struct tg_writer *w)
{
    if (w->buf == NULL)
        return;
    if (atomic_load_explicit(&w->err, memory_order_relaxed) || w->dropped) {
        if (w->pyfile == NULL) {
            tg_writer_lock_io(w);
            tg_writer_forget_full_unlocked(w);
            tg_writer_unlock_io(w);
        }
        tg_writer_emptied(w);
        w->flushed = 0;
        return;
    }
    if (w->pyfile != NULL) {
        tg_writer_flush_owner(w);
        return;
    }
    tg_writer_lock_io(w);
    tg_writer_write_pending_unlocked(w);
    tg_writer_emptied(w);
    w->flushed = 0;
    tg_writer_unlock_io(w);
}

/* Room for one more entry in W's queue, and the buffer to go on in: the
 * spare (made if need be) for a record of NEED bytes that fits a buffer, else
 * a new one of NEED bytes in *BIG.  lock held.  Returns 0 or -1. */
static int
tg_writer_queue_room_unlocked(struct tg_writer *w, unsigned n, size_t need, char **big)
{
    if (n == w->fullq_cap) {
        unsigned nc = w->fullq_cap ? 2 * w->fullq_cap : 4;
        struct tg_writer_full *nq = realloc(w->fullq, nc * sizeof(*nq));
        if (nq == NULL)
            return -1;
        w->fullq = nq;
        w->fullq_cap = nc;
    }
    if (need > TG_WRITER_BUFSIZE)
        return (*big = malloc(need)) != NULL ? 0 : -1;
    if (w->spare == NULL && (w->spare = tg_writer_buf_new()) == NULL)
        return -1;
    return 0;
}

/* Hand W's filled buffer to the flusher and continue in a fresh one that
 * holds a record of NEED bytes: the spare (or a new one), or, for a record
 * longer than a buffer, one made for it (handed off in turn when the next
 * record does not fit, so a long record never makes its writer write its
 * buffers itself).  GIL held (the producer).  Takes only `lock`, never held
 * across I/O: a write in progress, even a stuck one, is not waited for.  A
 * buffer weighs its size in TG_WRITER_BUFSIZE units against
 * TG_WRITER_QUEUED_MAX, so the bound stays one of memory.  Returns 1 (handed
 * off), 0 (no flusher to hand it to: the caller writes it itself) or -1
 * (the bound is reached, or no memory: this record is dropped). */
static int
tg_writer_handoff(struct tg_writer *w, size_t need)
{
    int done = -1;
    unsigned n, slots;
    char *big = NULL;

    if (w->pyfile != NULL || w->kick == NULL)
        return 0;
    slots = (unsigned)((w->cap + TG_WRITER_BUFSIZE - 1) / TG_WRITER_BUFSIZE);
    pthread_mutex_lock(&w->lock);
    n = atomic_load_explicit(&w->nfull, memory_order_relaxed);
    if (atomic_fetch_add_explicit(&tg_writer_nqueued, slots, memory_order_relaxed) + slots
                > TG_WRITER_QUEUED_MAX
            || tg_writer_queue_room_unlocked(w, n, need, &big) < 0) {
        atomic_fetch_sub_explicit(&tg_writer_nqueued, slots, memory_order_relaxed);
    } else {
        w->fullq[n].buf = w->buf;
        w->fullq[n].from = w->flushed;
        w->fullq[n].len = atomic_load_explicit(&w->len, memory_order_relaxed);
        w->fullq[n].cap = w->cap;
        w->fullq[n].slots = slots;
        atomic_store_explicit(&w->nfull, n + 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&w->nslots, slots, memory_order_relaxed);
        if (big != NULL) {
            w->buf = big;
            w->cap = need;
        } else {
            w->buf = w->spare;
            w->spare = NULL;
            w->cap = TG_WRITER_BUFSIZE;
        }
        tg_writer_emptied(w);
        w->flushed = 0;
        done = 1;
    }
    pthread_mutex_unlock(&w->lock);
    if (done > 0 || n > 0)
        w->kick(w->kick_ctx);  /* again when full: a flusher that lags */
    return done;
}

char *
tg_writer_reserve_slow(struct tg_writer *w, size_t n)
{
    size_t len;
    int h = 0;

    if (!tg_writer_usable(w))
        return NULL;
    len = atomic_load_explicit(&w->len, memory_order_relaxed);
    if (len + n > w->cap && (h = tg_writer_handoff(w, n)) != 0) {
        if (h < 0)
            return NULL;  /* dropped, counted by the caller; lim kept: the
                           * next record tries again */
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
                tg_writer_lock_io(w);
            nb = realloc(w->buf, n);
            if (nb != NULL) {
                w->buf = nb;
                w->cap = n;
            }
            if (!pyfile)
                tg_writer_unlock_io(w);
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

/* Close W's descriptor (if it is still ours) and free its buffers: the
 * stream takes no more records.  err, path and the sink stay.  The caller
 * holds io_lock and lock, or W is owner-only (the GIL). */
static void
tg_writer_close_unlocked(struct tg_writer *w)
{
    if (tg_writer_check_fd(w))
        close(w->fd);
    w->fd = -1;
    atomic_store(&w->lim, 0);
    tg_writer_buf_free(w->buf, w->cap);
    w->buf = NULL;
    w->cap = 0;
    while (atomic_load_explicit(&w->nfull, memory_order_relaxed) > 0) {
        struct tg_writer_full f = tg_writer_pop_unlocked(w);
        tg_writer_buf_free(f.buf, f.cap);
    }
    free(w->fullq);
    w->fullq = NULL;
    w->fullq_cap = 0;
    tg_writer_buf_free(w->spare, TG_WRITER_BUFSIZE);
    w->spare = NULL;
    tg_writer_emptied(w);
    w->flushed = 0;
}

void
tg_writer_close_nogil(struct tg_writer *w)
{
    if (w->pyfile != NULL || (w->buf == NULL && w->fd < 0))
        return;
    tg_writer_lock_io(w);
    if (w->buf != NULL)
        tg_writer_write_pending_unlocked(w);  /* nothing, if stopped or dropped */
    tg_writer_close_unlocked(w);
    tg_writer_unlock_io(w);
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
        tg_writer_lock_io(w);
    if (w->sink != NULL && w->sink->close != NULL) {
        int e = w->sink->close(w->sink_ctx, w->dropped);
        if (e)
            tg_writer_stop(w, e);
    }
    w->sink = NULL;
    w->sink_ctx = NULL;
    w->pyfile = NULL;
    tg_writer_close_unlocked(w);
    free(w->path);
    w->path = NULL;
    if (!owner)
        tg_writer_unlock_io(w);
}

void
tg_writer_destroy(struct tg_writer *w)
{
    pthread_mutex_destroy(&w->lock);
    pthread_mutex_destroy(&w->io_lock);
}

void
tg_writer_drop_in_child(struct tg_writer *w)
{
    int io_held = pthread_mutex_trylock(&w->io_lock) != 0;
    int held = pthread_mutex_trylock(&w->lock) != 0;

    if (io_held || held) {
        if (!held)
            pthread_mutex_unlock(&w->lock);
        if (!io_held)
            pthread_mutex_unlock(&w->io_lock);
        /* fork() takes no writer's lock (a consumer holds io_lock across
         * write(2), and a fork must not wait for the disk): held here, it was
         * held by a thread that is not in the child, in the middle of writing
         * W's buffers.  They are left as they are (never freed here: leaked,
         * the buffers of this writer's queue and two more) and W goes on
         * empty, with locks of its own. */
        pthread_mutex_init(&w->io_lock, NULL);
        pthread_mutex_init(&w->lock, NULL);
        w->buf = NULL;
        w->cap = 0;
        atomic_fetch_sub_explicit(&tg_writer_nqueued,
                                  atomic_load_explicit(&w->nslots, memory_order_relaxed),
                                  memory_order_relaxed);
        atomic_store_explicit(&w->nfull, 0, memory_order_relaxed);
        atomic_store_explicit(&w->nslots, 0, memory_order_relaxed);
        w->fullq = NULL;
        w->fullq_cap = 0;
        w->spare = NULL;
    } else {
        /* The inherited full buffers are the parent's to write: recycled
         * unwritten. */
        tg_writer_forget_full_unlocked(w);
        pthread_mutex_unlock(&w->lock);
        pthread_mutex_unlock(&w->io_lock);
    }
    w->dropped = 1;
    tg_writer_emptied(w);
    w->flushed = 0;
    w->first_ns = 0;
    if (tg_fd_is_ours(w->fd, w->dev, w->ino))
        close(w->fd);
    w->fd = -1;
}
