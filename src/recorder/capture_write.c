/*
 * capture_write.c - the capture file of a run: header, chunks, pending code
 * definitions, END trailer, and the C function id table (capture_write.h).
 *
 * Never raises, never prints: failures are errnos, and the first failed write
 * stops the capture for good (the recorder reports it at disable()).
 */
#include "capture_write.h"
#include "testgate.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#ifdef TG_HAVE_ZSTD
#  include <zstd.h>
/* Level 1: the fastest of the regular levels; a chunk is compressed under the
 * capture's lock (never defs_lock), by the flusher or (when it lags) by the
 * program's thread. */
#  define TG_CAP_ZSTD_LEVEL 1
#endif

int
tg_cap_can_compress(void)
{
#ifdef TG_HAVE_ZSTD
    return 1;
#else
    return 0;
#endif
}

/* Source of capture epochs (code ids are valid within one epoch). */
static _Atomic uint64_t tg_cap_epochs;

void
tg_cap_init(struct tg_cap *cap)
{
    memset(cap, 0, sizeof(*cap));
    pthread_mutex_init(&cap->lock, NULL);
    pthread_mutex_init(&cap->defs_lock, NULL);
    cap->fd = -1;
}

/* Stop the capture for good with errno E (the first one stays).  Lock held;
 * the store is atomic because tg_cap_define and tg_cap_usable read err
 * without the lock. */
static void
tg_cap_fail_locked(struct tg_cap *cap, int e)
{
    if (!cap->err)
        __atomic_store_n(&cap->err, e, __ATOMIC_RELAXED);
}

/* Whether FD is the file DEV/INO (fstat only: async-signal-safe). */
static int
tg_fd_ours(int fd, dev_t dev, ino_t ino)
{
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

/* Whether CAP's descriptor is still the file we opened (the program may have
 * closed it and reused the number); forgets it when not.  Lock held. */
static int
tg_cap_fd_ok(struct tg_cap *cap)
{
    struct stat st;
    if (cap->fd < 0)
        return 0;
    if (fstat(cap->fd, &st) == 0 && st.st_dev == cap->dev && st.st_ino == cap->ino)
        return 1;
    cap->fd = -1;  /* not ours any more: never write or close it */
    tg_cap_fail_locked(cap, EBADF);
    return 0;
}

/* The capture's test gate (capture_write.h, testgate.h). */
static struct tg_test_gate tg_cap_gate = TG_TEST_GATE_INIT;

void
tg_cap_gate_set(int closed)
{
    tg_test_gate_set(&tg_cap_gate, closed);
}

void
tg_cap_gate_wait_blocked(void)
{
    tg_test_gate_wait_blocked(&tg_cap_gate);
}

/* writev(2) all of IOV[0..N) (modified); returns 0 or an errno. */
static int
tg_cap_writev_all(int fd, struct iovec *iov, int n)
{
    tg_test_gate_check(&tg_cap_gate);
    while (n > 0) {
        ssize_t w = writev(fd, iov, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

static void
tg_cap_chunk_header(unsigned char *h, int kind, int flags, uint32_t stream, size_t len)
{
    h[0] = (unsigned char)kind;
    h[1] = (unsigned char)flags;
    h[2] = h[3] = 0;
    tg_cap_put_u32(h + 4, stream);
    tg_cap_put_u32(h + 8, (uint32_t)len);
}

static int tg_cap_rotate_locked(struct tg_cap *cap, uint64_t need);
static uint64_t tg_cap_seg_target(const struct tg_cap *cap);
static struct tg_cap_shadow *tg_cap_shadow_get(struct tg_cap *cap, uint32_t stream);
static void tg_cap_shadow_chunk(struct tg_cap *cap, int kind, uint32_t stream,
                                const unsigned char *p, size_t len);

/* Keep the CODES payload DEFS/LEN (about to be written) for later segments'
 * heads.  Returns 0 or an errno.  Lock held. */
static int
tg_cap_keep_defs(struct tg_cap *cap, const unsigned char *defs, size_t len)
{
    if (cap->alldefs_len + len > cap->alldefs_cap) {
        size_t nc = cap->alldefs_cap ? cap->alldefs_cap : 16384;
        unsigned char *nb;
        while (nc < cap->alldefs_len + len)
            nc *= 2;
        if ((nb = realloc(cap->alldefs, nc)) == NULL)
            return ENOMEM;
        cap->alldefs = nb;
        cap->alldefs_cap = nc;
    }
    if (cap->n_defs_ends == cap->defs_ends_cap) {
        size_t nc = cap->defs_ends_cap ? 2 * cap->defs_ends_cap : 16;
        size_t *ne = realloc(cap->defs_ends, nc * sizeof(*ne));
        if (ne == NULL)
            return ENOMEM;
        cap->defs_ends = ne;
        cap->defs_ends_cap = nc;
    }
    memcpy(cap->alldefs + cap->alldefs_len, defs, len);
    cap->alldefs_len += len;
    cap->defs_ends[cap->n_defs_ends++] = cap->alldefs_len;
    return 0;
}

/* Space for NEED more bytes at the end of B (grown from FIRST bytes, doubling),
 * or NULL (out of memory: B unchanged). */
static unsigned char *
tg_cap_buf_reserve(struct tg_cap_buf *b, size_t need, size_t first)
{
    if (b->len + need > b->cap) {
        size_t nc = b->cap ? b->cap : first;
        unsigned char *nb;
        while (nc < b->len + need)
            nc *= 2;
        if ((nb = realloc(b->data, nc)) == NULL)
            return NULL;
        b->data = nb;
        b->cap = nc;
    }
    return b->data + b->len;
}

/* The ends queued in Q, and how many (*N). */
static struct tg_cap_end *
tg_cap_queue_ends(const struct tg_cap_queue *q, size_t *n)
{
    *n = q->ends.len / sizeof(struct tg_cap_end);
    return (struct tg_cap_end *)(void *)q->ends.data;
}

/* Free what Q holds and leave it empty. */
static void
tg_cap_queue_free(struct tg_cap_queue *q)
{
    free(q->defs.data);
    free(q->thr.data);
    free(q->ends.data);
    memset(q, 0, sizeof(*q));
}

/* Move the pending definitions, THREAD chunks and ends to the writer's side
 * (q -> wq), unless the last ones taken are still there (a failed write: the
 * capture has stopped).  The buffers are swapped, not copied, under defs_lock
 * alone: a definer (or a thread starting or ending) waits at most for this
 * swap, never for the compression or the write that follow.  Lock held. */
static void
tg_cap_take_defs_locked(struct tg_cap *cap)
{
    struct tg_cap_queue emptied;

    if (cap->wq.defs.len > 0 || cap->wq.thr.len > 0 || cap->wq.ends.len > 0)
        return;
    emptied = cap->wq;  /* empty: its buffers become the threads' */
    pthread_mutex_lock(&cap->defs_lock);
    cap->wq = cap->q;
    cap->q = emptied;
    pthread_mutex_unlock(&cap->defs_lock);
}

/* End of the CODES payload that starts at FROM in wq.defs: whole definitions,
 * at most TG_CAP_DEFS_MAX bytes (or one longer definition alone).  In a
 * segmented capture, notes each definition's kind for decoding CALLs (kinds).
 * Returns the end, or 0 (malformed: cannot happen; out of memory for kinds).
 * Lock held. */
static size_t
tg_cap_defs_piece(struct tg_cap *cap, size_t from)
{
    const unsigned char *p = cap->wq.defs.data + from, *end = cap->wq.defs.data + cap->wq.defs.len;
    const unsigned char *cut = p;

    while (p < end) {
        const unsigned char *q = p;
        uint64_t id, v;
        int kind;

        if (tg_cap_get_varint(&q, end, &id) < 0 || q >= end)
            return 0;
        kind = *q++;
        if (tg_cap_get_varint(&q, end, &v) < 0 || tg_cap_get_varint(&q, end, &v) < 0
                || v > (uint64_t)(end - q))
            return 0;
        q += v;
        if (tg_cap_get_varint(&q, end, &v) < 0 || v > (uint64_t)(end - q))
            return 0;
        q += v;
        if (cut > cap->wq.defs.data + from && (size_t)(q - (cap->wq.defs.data + from)) > TG_CAP_DEFS_MAX)
            break;  /* the next payload starts with this one */
        if (cap->max_size) {
            if (id >= UINT32_MAX)
                return 0;
            if (id >= cap->kinds_cap) {
                size_t nc = cap->kinds_cap ? cap->kinds_cap : 1024;
                unsigned char *nk;
                while (nc <= id)
                    nc *= 2;
                if ((nk = realloc(cap->kinds, nc)) == NULL)
                    return 0;
                memset(nk + cap->kinds_cap, 0, nc - cap->kinds_cap);
                cap->kinds = nk;
                cap->kinds_cap = nc;
            }
            cap->kinds[id] = (unsigned char)(kind + 1);  /* 0: undefined */
        }
        p = cut = q;
    }
    return (size_t)(cut - cap->wq.defs.data);
}

/* Write the definitions taken (wq.defs, if any, as CODES chunks of at most
 * TG_CAP_DEFS_MAX bytes) and then chunk KIND/STREAM of BUF/LEN (if BUF is not
 * NULL); the last definitions go in one writev with the chunk.  In a
 * segmented capture, a data chunk that would take the current segment past
 * its target (tg_cap_seg_target) starts the next one first, and the bytes are followed
 * (tg_cap_shadow_chunk).  Lock held (not defs_lock: tg_cap_define goes on
 * meanwhile, into the other buffer). */
static int
tg_cap_raw_out_locked(struct tg_cap *cap, int kind, uint32_t stream, const void *buf,
                      size_t len)
{
    unsigned char dh[TG_CAP_CHUNK_HEADER_SIZE], ch[TG_CAP_CHUNK_HEADER_SIZE];
    const void *raw = buf;
    size_t raw_len = len, total = 0, from = 0;
    struct iovec iov[4];
    int n = 0, e, i;

    if (cap->err)
        return cap->err;
    if (cap->dropped_child || !tg_cap_fd_ok(cap))
        return cap->err ? cap->err : EBADF;
    /* a chunk's length is a u32 that readers take up to TG_CAP_CHUNK_MAX: never
     * cut a longer one to 32 bits (its callers cap what they write) */
    if (len > TG_CAP_CHUNK_MAX)
        return E2BIG;
    if (buf != NULL) {
        int flags = 0;
#ifdef TG_HAVE_ZSTD
        if (cap->compress && (kind == TG_CAP_CHUNK_EVENTS || kind == TG_CAP_CHUNK_PROCESS)) {
            size_t bound = ZSTD_compressBound(len), z;
            if (cap->zctx == NULL)
                cap->zctx = ZSTD_createCCtx();
            if (bound > cap->zbuf_cap) {
                unsigned char *nb = realloc(cap->zbuf, bound);
                if (nb != NULL) {
                    cap->zbuf = nb;
                    cap->zbuf_cap = bound;
                }
            }
            if (cap->zctx != NULL && bound <= cap->zbuf_cap) {
                z = ZSTD_compressCCtx(cap->zctx, cap->zbuf, cap->zbuf_cap, buf, len,
                                      TG_CAP_ZSTD_LEVEL);
                if (!ZSTD_isError(z) && z < len) {  /* else the records as they are */
                    buf = cap->zbuf;
                    len = z;
                    flags = TG_CAP_CHUNK_ZSTD;
                }
            }
        }
#endif
        tg_cap_chunk_header(ch, kind, flags, stream, len);
    }
    /* every chunk of a segment's body counts: THREAD chunks (a thread per
     * request writes one each) and disable()'s END (an entry per thread the
     * run saw) can be the bulk of a segment, and the END, written last, would
     * otherwise leave the files past the limit for good */
    if (cap->max_size && buf != NULL
            && (kind == TG_CAP_CHUNK_EVENTS || kind == TG_CAP_CHUNK_PROCESS
                || kind == TG_CAP_CHUNK_THREAD || kind == TG_CAP_CHUNK_END)) {
        uint64_t cur = cap->seg_sizes[cap->seg_no - cap->seg_first];
        uint64_t need = sizeof(ch) + len + cap->wq.defs.len
                        + (cap->wq.defs.len / TG_CAP_DEFS_MAX + 1) * sizeof(dh);
        if (cur + need > tg_cap_seg_target(cap) && cur > cap->seg_head
                && (e = tg_cap_rotate_locked(cap, need)) != 0) {
            tg_cap_fail_locked(cap, e);
            return e;
        }
    }
    while (from < cap->wq.defs.len) {
        size_t end = tg_cap_defs_piece(cap, from);
        if (end <= from) {
            tg_cap_fail_locked(cap, ENOMEM);
            return ENOMEM;
        }
        tg_cap_chunk_header(dh, TG_CAP_CHUNK_CODES, 0, TG_CAP_STREAM_META, end - from);
        if (cap->max_size && (e = tg_cap_keep_defs(cap, cap->wq.defs.data + from, end - from)) != 0) {
            tg_cap_fail_locked(cap, e);
            return e;
        }
        iov[0].iov_base = dh;
        iov[0].iov_len = sizeof(dh);
        iov[1].iov_base = cap->wq.defs.data + from;
        iov[1].iov_len = end - from;
        n = 2;
        from = end;
        if (from == cap->wq.defs.len && buf != NULL)
            break;  /* the last ones go with the chunk */
        e = tg_cap_writev_all(cap->fd, iov, n);
        n = 0;
        if (e) {
            tg_cap_fail_locked(cap, e);
            return e;
        }
        if (cap->max_size)
            cap->seg_sizes[cap->seg_no - cap->seg_first] += sizeof(dh) + iov[1].iov_len;
    }
    if (buf != NULL) {
        iov[n].iov_base = ch;
        iov[n++].iov_len = sizeof(ch);
        iov[n].iov_base = (void *)buf;
        iov[n++].iov_len = len;
    }
    if (n == 0) {
        cap->wq.defs.len = 0;
        return 0;
    }
    for (i = 0; i < n; i++)
        total += iov[i].iov_len;
    e = tg_cap_writev_all(cap->fd, iov, n);
    cap->wq.defs.len = 0;
    if (e) {
        tg_cap_fail_locked(cap, e);
        return e;
    }
    if (cap->max_size) {
        cap->seg_sizes[cap->seg_no - cap->seg_first] += total;
        if (kind == TG_CAP_CHUNK_EVENTS || kind == TG_CAP_CHUNK_PROCESS)
            tg_cap_shadow_chunk(cap, kind, stream, raw, raw_len);
        else if (kind == TG_CAP_CHUNK_THREAD && raw != NULL) {
            struct tg_cap_shadow *s = tg_cap_shadow_get(cap, stream);
            unsigned char *def = malloc(raw_len ? raw_len : 1);
            if (s != NULL && def != NULL) {
                memcpy(def, raw, raw_len);
                free(s->def);
                s->def = def;
                s->def_len = raw_len;
                s->live = 1;
            } else {
                free(def);
                if (s != NULL)
                    s->broken = 1;  /* lost in later segments, as if ended */
            }
        }
    }
    return 0;
}

/* Apply the end EN of a thread whose last chunk is written: its counters for
 * END, and (segments) its THREAD is no longer repeated.  Lock held. */
static void
tg_cap_apply_end_locked(struct tg_cap *cap, const struct tg_cap_end *en)
{
    uint32_t stream = en->stat.stream;

    if (cap->n_stats == cap->stats_cap) {
        size_t nc = cap->stats_cap ? cap->stats_cap * 2 : 16;
        struct tg_cap_stat *ns = realloc(cap->stats, nc * sizeof(*ns));
        if (ns != NULL) {
            cap->stats = ns;
            cap->stats_cap = nc;
        }
    }
    /* out of memory: the stream is left out of the END counters */
    if (cap->n_stats < cap->stats_cap)
        cap->stats[cap->n_stats++] = en->stat;
    if (stream < cap->n_sh && !cap->keep_ended) {  /* ended: its definition is not repeated */
        free(cap->sh[stream].def);
        cap->sh[stream].def = NULL;
        cap->sh[stream].live = 0;
    }
}

/* Write the THREAD chunks taken (wq.thr), after the definitions taken, then
 * apply the ends taken (wq.ends).  Returns 0 or the errno that stopped the
 * capture (what is left is freed at close).  Lock held. */
static int
tg_cap_out_queued_locked(struct tg_cap *cap)
{
    size_t off = 0, i, n;
    struct tg_cap_end *ends;
    int e;

    while (off < cap->wq.thr.len) {
        uint32_t stream, len;
        memcpy(&stream, cap->wq.thr.data + off, 4);
        memcpy(&len, cap->wq.thr.data + off + 4, 4);
        e = tg_cap_raw_out_locked(cap, TG_CAP_CHUNK_THREAD, stream, cap->wq.thr.data + off + 8, len);
        if (e && cap->err)
            return e;  /* else this one alone is lost (E2BIG: cannot happen) */
        off += 8 + (size_t)len;
    }
    cap->wq.thr.len = 0;
    ends = tg_cap_queue_ends(&cap->wq, &n);
    for (i = 0; i < n; i++)
        tg_cap_apply_end_locked(cap, &ends[i]);
    cap->wq.ends.len = 0;
    return 0;
}

/* Write what is pending (definitions, THREAD chunks: see capture_write.h),
 * apply the ends, then chunk KIND/STREAM of BUF/LEN (if BUF
 * is not NULL).  Returns 0 or an errno (the capture stops).  Lock held. */
static int
tg_cap_out_locked(struct tg_cap *cap, int kind, uint32_t stream, const void *buf, size_t len)
{
    int e;

    if (cap->err)
        return cap->err;
    if (cap->dropped_child || !tg_cap_fd_ok(cap))
        return cap->err ? cap->err : EBADF;
    tg_cap_take_defs_locked(cap);
    if ((cap->wq.thr.len > 0 || cap->wq.ends.len > 0) && (e = tg_cap_out_queued_locked(cap)) != 0)
        return e;
    return tg_cap_raw_out_locked(cap, kind, stream, buf, len);
}

/* Create PATH (O_EXCL, O_APPEND) and write HEADER into it.  Returns the
 * descriptor (its identity in *ST), or -errno. */
static int
tg_cap_create(const char *path, const unsigned char *header, struct stat *st)
{
    struct iovec iov;
    int fd, e;

    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    if (fstat(fd, st) < 0) {
        e = errno;
        close(fd);
        return -e;
    }
    iov.iov_base = (void *)header;
    iov.iov_len = TG_CAP_HEADER_SIZE;
    e = tg_cap_writev_all(fd, &iov, 1);
    if (e) {
        close(fd);
        return -e;
    }
    return fd;
}

/* Open PATH as the capture's (first) file, segment number SEG (0: none). */
static int
tg_cap_open_file(struct tg_cap *cap, const char *path, uint32_t seg, uint32_t flags,
                 int64_t start_us, uint32_t memory_mode, uint32_t clock, uint32_t pid,
                 int compress)
{
    unsigned char h[TG_CAP_HEADER_SIZE];
    struct stat st;
    int fd;

    memcpy(h, TG_CAP_MAGIC, TG_CAP_MAGIC_LEN);
    tg_cap_put_u32(h + 8, TG_CAP_VERSION);
    tg_cap_put_u32(h + 12, flags);
    tg_cap_put_u64(h + 16, (uint64_t)start_us);
    tg_cap_put_u32(h + 24, memory_mode);
    tg_cap_put_u32(h + 28, clock);
    tg_cap_put_u32(h + 32, pid);
    tg_cap_put_u32(h + 36, seg);
    fd = tg_cap_create(path, h, &st);
    if (fd < 0)
        return fd;
    pthread_mutex_lock(&cap->lock);
    memcpy(cap->header, h, sizeof(h));
    cap->fd = fd;
    cap->dev = st.st_dev;
    cap->ino = st.st_ino;
    __atomic_store_n(&cap->err, 0, __ATOMIC_RELAXED);
    cap->dropped_child = 0;
    cap->flags = flags;
    cap->start_us = start_us;
    cap->epoch = atomic_fetch_add(&tg_cap_epochs, 1) + 1;
    cap->next_code = 1;
    cap->compress = compress && tg_cap_can_compress();
    /* empty: a close before (tg_cap_open) freed what they held */
    cap->wq.defs.len = cap->wq.thr.len = cap->wq.ends.len = 0;
    cap->n_stats = 0;
    pthread_mutex_lock(&cap->defs_lock);
    cap->q.defs.len = cap->q.thr.len = cap->q.ends.len = 0;
    cap->defs_open = 1;
    pthread_mutex_unlock(&cap->defs_lock);
    pthread_mutex_unlock(&cap->lock);
    return 0;
}

int
tg_cap_open(struct tg_cap *cap, const char *path, uint32_t flags, int64_t start_us,
            uint32_t memory_mode, uint32_t clock, uint32_t pid, int compress)
{
    tg_cap_close(cap);
    cap->path = strdup(path);
    if (cap->path == NULL)
        return -ENOMEM;
    return tg_cap_open_file(cap, path, 0, flags, start_us, memory_mode, clock, pid,
                            compress);
}

/* DIR/capture-<NO>.tg, malloc'ed (NULL: out of memory). */
static char *
tg_cap_seg_path(const char *dir, uint32_t no)
{
    size_t n = strlen(dir) + sizeof(TG_CAP_SEG_PREFIX) + sizeof(TG_CAP_SEG_SUFFIX) + 16;
    char *p = malloc(n);
    if (p != NULL)
        snprintf(p, n, "%s/" TG_CAP_SEG_PREFIX "%0*u" TG_CAP_SEG_SUFFIX, dir,
                 TG_CAP_SEG_DIGITS, no);
    return p;
}

/* PATH's hidden twin (DIR/.capture-<NO>.tg.part) where a segment is written
 * before it gets its name; malloc'ed (NULL: out of memory). */
static char *
tg_cap_seg_tmp_path(const char *path)
{
    const char *base = strrchr(path, '/');
    size_t dlen = base != NULL ? (size_t)(base - path) + 1 : 0;
    size_t n = strlen(path) + sizeof(".part") + 1;
    char *p = malloc(n);
    if (p != NULL)
        snprintf(p, n, "%.*s.%s.part", (int)dlen, path, path + dlen);
    return p;
}

int
tg_cap_open_segments(struct tg_cap *cap, const char *dir, uint64_t max_size,
                     uint32_t flags, int64_t start_us, uint32_t memory_mode,
                     uint32_t clock, uint32_t pid, int compress)
{
    size_t n = strlen(dir) + sizeof(TG_CAP_SEG_PREFIX "*" TG_CAP_SEG_SUFFIX) + 1;
    char *first;
    int ret;

    if (max_size < TG_CAP_MAX_SIZE_MIN)
        return -EINVAL;
    tg_cap_close(cap);
    cap->path = malloc(n);
    cap->dir = strdup(dir);
    cap->seg_sizes = calloc(TG_CAP_SEGS * 2, sizeof(*cap->seg_sizes));
    first = tg_cap_seg_path(dir, 1);
    if (cap->path == NULL || cap->dir == NULL || cap->seg_sizes == NULL || first == NULL) {
        free(first);
        tg_cap_close(cap);
        return -ENOMEM;
    }
    /* A pattern, not the current file: threads read it without the lock. */
    snprintf(cap->path, n, "%s/" TG_CAP_SEG_PREFIX "*" TG_CAP_SEG_SUFFIX, dir);
    cap->seg_sizes_cap = TG_CAP_SEGS * 2;
    ret = tg_cap_open_file(cap, first, 1, flags, start_us, memory_mode, clock, pid,
                           compress);
    free(first);
    if (ret < 0) {
        tg_cap_close(cap);
        return ret;
    }
    pthread_mutex_lock(&cap->lock);
    cap->max_size = max_size;
    cap->seg_max = max_size / TG_CAP_SEGS;
    if (cap->seg_max < TG_CAP_SEG_MIN)
        cap->seg_max = TG_CAP_SEG_MIN;
    cap->seg_no = cap->seg_first = 1;
    cap->seg_sizes[0] = cap->seg_head = TG_CAP_HEADER_SIZE;
    cap->over_limit = 0;
    cap->keep_ended = 0;
    pthread_mutex_unlock(&cap->lock);
    return 0;
}

char *
tg_cap_current_path(struct tg_cap *cap)
{
    char *p = NULL;
    pthread_mutex_lock(&cap->lock);
    if (cap->max_size && cap->dir != NULL)
        p = tg_cap_seg_path(cap->dir, cap->seg_no);
    else if (cap->path != NULL)
        p = strdup(cap->path);
    pthread_mutex_unlock(&cap->lock);
    return p;
}

uint64_t
tg_cap_over_limit(struct tg_cap *cap)
{
    uint64_t n;
    pthread_mutex_lock(&cap->lock);
    n = cap->over_limit;
    pthread_mutex_unlock(&cap->lock);
    return n;
}

uint64_t
tg_cap_segments_dropped(struct tg_cap *cap)
{
    uint64_t n;
    pthread_mutex_lock(&cap->lock);
    n = cap->segs_deleted;
    pthread_mutex_unlock(&cap->lock);
    return n;
}

/* --- segments: the streams' state, the heads, rotation ----------------------- */

/* STREAM's shadow, the table grown as needed; NULL out of memory.  Lock held. */
static struct tg_cap_shadow *
tg_cap_shadow_get(struct tg_cap *cap, uint32_t stream)
{
    if (stream >= cap->n_sh) {
        size_t nn = cap->n_sh ? cap->n_sh : 16;
        struct tg_cap_shadow *ns;
        while (nn <= stream)
            nn *= 2;
        ns = realloc(cap->sh, nn * sizeof(*ns));
        if (ns == NULL)
            return NULL;
        memset(ns + cap->n_sh, 0, (nn - cap->n_sh) * sizeof(*ns));
        cap->sh = ns;
        cap->n_sh = nn;
    }
    if (!cap->sh[stream].used) {
        cap->sh[stream].used = 1;
        cap->sh[stream].t_us = cap->start_us;
    }
    return &cap->sh[stream];
}

static void
tg_cap_shadow_free(struct tg_cap_shadow *s)
{
    free(s->def);
    free(s->open);
    free(s->lvl);
    memset(s, 0, sizeof(*s));
}

/* Room for one more open call in S's arrays: 0, or -1 (out of memory). */
static int
tg_cap_shadow_grow(struct tg_cap_shadow *s)
{
    size_t nc = s->open_cap ? 2 * s->open_cap : 32;
    struct tg_cap_open_call *no = realloc(s->open, nc * sizeof(*no));
    int64_t *nl;
    if (no == NULL)
        return -1;
    s->open = no;
    nl = realloc(s->lvl, nc * sizeof(*nl));
    if (nl == NULL)
        return -1;
    memset(nl + s->open_cap, 0, (nc - s->open_cap) * sizeof(*nl));
    s->lvl = nl;
    s->open_cap = nc;
    return 0;
}

/* A LEVEL event's memory LEVEL and open calls' starts (at *P, moved past
 * them) in S: its sums by depth become exact, as live.c makes them.  0, or -1
 * when the event does not decode. */
static int
tg_cap_shadow_level(struct tg_cap_shadow *s, int64_t level, const unsigned char **p,
                    const unsigned char *end)
{
    uint64_t n, v;
    int64_t start = 0;
    size_t k;

    if (tg_cap_get_varint(p, end, &n) < 0)
        return -1;
    while (s->depth >= s->open_cap)
        if (tg_cap_shadow_grow(s) < 0)
            return -1;
    if (n != s->depth) {
        /* starts not of these calls: the memory alone, what the sums missed
         * put at the innermost open call's depth (live.c's rule) */
        while (n-- > 0)
            if (tg_cap_get_varint(p, end, &v) < 0)
                return -1;
        s->lvl[s->depth] += level - s->mem;
        s->top = s->top > s->depth ? s->top : s->depth;
        s->mem = level;
        return 0;
    }
    for (k = s->depth + 1; k <= s->top; k++)
        s->lvl[k] = 0;
    for (k = 0; k < n; k++) {
        if (tg_cap_get_varint(p, end, &v) < 0)
            return -1;
        s->lvl[k] = tg_cap_unzz(v);
        start += s->lvl[k];
    }
    s->lvl[n] = level - start;
    s->top = n;
    s->mem = level;
    return 0;
}

/* Follow the records of a chunk of STREAM (KIND events or process samples) in
 * its shadow.  A record that does not decode marks the stream broken (its
 * STATE is not written: a reader starting after it refuses the stream rather
 * than misreading it).  Lock held. */
static void
tg_cap_shadow_chunk(struct tg_cap *cap, int kind, uint32_t stream, const unsigned char *p,
                    size_t len)
{
    const unsigned char *end = p + len;
    const int timed = (cap->flags & TG_CAP_F_TIME) != 0;
    const int memory = (cap->flags & TG_CAP_F_MEMORY) != 0;
    struct tg_cap_shadow *s = tg_cap_shadow_get(cap, stream);
    uint64_t head, v, dt = 0;

    if (s == NULL || s->broken)
        goto broken;
    while (p < end) {
        if (kind == TG_CAP_CHUNK_PROCESS) {
            if ((timed && tg_cap_get_varint(&p, end, &dt) < 0)
                    || tg_cap_get_varint(&p, end, &v) < 0)
                goto broken;
            s->t_us += (int64_t)dt;
            s->calls++;
            s->mem += tg_cap_unzz(v);
            continue;
        }
        if (tg_cap_get_varint(&p, end, &head) < 0)
            goto broken;
        if (head & 1) {  /* RETURN */
            if (timed && tg_cap_get_varint(&p, end, &dt) < 0)
                goto broken;
            v = 0;
            if (memory && tg_cap_get_varint(&p, end, &v) < 0)
                goto broken;
            if (s->depth == 0)
                goto broken;
            s->t_us += (int64_t)dt;
            s->depth--;
            s->returns++;
            /* live's "memory now" (src/lib/live.c): the call's delta replaces
             * its callees' sums, which it includes; a loop that never returns
             * counts its returned iterations.  Amortized O(1): each level is
             * cleared once per return that filled it. */
            while (s->top > s->depth) {
                s->mem -= s->lvl[s->top];
                s->lvl[s->top--] = 0;
            }
            s->top = s->depth;
            s->lvl[s->depth] += tg_cap_unzz(v);
            s->mem += tg_cap_unzz(v);
        } else if (head) {  /* CALL */
            uint64_t id = head >> 1;
            int64_t line = 0;
            if (timed && tg_cap_get_varint(&p, end, &dt) < 0)
                goto broken;
            if (id >= cap->kinds_cap || cap->kinds[id] == 0)
                goto broken;
            if (cap->kinds[id] == TG_CAP_CODE_C + 1) {
                if (tg_cap_get_varint(&p, end, &v) < 0)
                    goto broken;
                line = tg_cap_unzz(v);
            }
            if (s->depth == s->open_cap && tg_cap_shadow_grow(s) < 0)
                goto broken;
            s->t_us += (int64_t)dt;
            s->calls++;
            s->open[s->depth].code = (uint32_t)id;
            s->open[s->depth].line = line;
            s->open[s->depth].number = s->calls;
            s->depth++;
        } else {  /* SPECIAL */
            int type = p < end ? *p++ : -1;
            if ((type != TG_CAP_EV_DROPPED && type != TG_CAP_EV_UNWOUND
                 && type != TG_CAP_EV_LEVEL)
                    || tg_cap_get_varint(&p, end, &v) < 0)
                goto broken;
            if (type == TG_CAP_EV_UNWOUND) {  /* closes the V innermost open calls */
                if (v > s->depth)
                    goto broken;
                s->depth -= (size_t)v;
            } else if (type == TG_CAP_EV_LEVEL
                       && tg_cap_shadow_level(s, tg_cap_unzz(v), &p, end) < 0) {
                goto broken;
            }
        }
    }
    return;
broken:
    if (s != NULL)
        s->broken = 1;
}

/* Write one head chunk (TG_CAP_CHUNK_HEAD) to FD; returns 0 or an errno. */
static int
tg_cap_head_chunk(int fd, int kind, uint32_t stream, const void *buf, size_t len,
                  uint64_t *size)
{
    unsigned char h[TG_CAP_CHUNK_HEADER_SIZE];
    struct iovec iov[2];
    tg_cap_chunk_header(h, kind, TG_CAP_CHUNK_HEAD, stream, len);
    iov[0].iov_base = h;
    iov[0].iov_len = sizeof(h);
    iov[1].iov_base = (void *)buf;
    iov[1].iov_len = len;
    *size += sizeof(h) + len;
    return tg_cap_writev_all(fd, iov, 2);
}

/* Write STATE chunk of stream NO (shadow S) to FD; 0 or an errno. */
static int
tg_cap_head_state(struct tg_cap *cap, int fd, uint32_t no, const struct tg_cap_shadow *s,
                  uint64_t *size)
{
    size_t levels = s->lvl != NULL ? s->top + 1 : 0;  /* threads that made a call */
    size_t n = (6 + levels) * TG_CAP_VARINT_MAX + s->depth * 3 * TG_CAP_VARINT_MAX, i;
    unsigned char *buf = malloc(n), *p;
    int e;

    if (buf == NULL)
        return ENOMEM;
    p = tg_cap_put_varint(buf, (uint64_t)(s->t_us - cap->start_us));
    p = tg_cap_put_varint(p, s->calls);
    p = tg_cap_put_varint(p, s->returns);
    p = tg_cap_put_varint(p, tg_cap_zz(s->mem));
    p = tg_cap_put_varint(p, s->depth);
    for (i = 0; i < s->depth; i++) {
        p = tg_cap_put_varint(p, s->open[i].code);
        p = tg_cap_put_varint(p, s->open[i].number);
        if (cap->kinds[s->open[i].code] == TG_CAP_CODE_C + 1)
            p = tg_cap_put_varint(p, tg_cap_zz(s->open[i].line));
    }
    if (levels) {  /* how MEM splits by depth: a reader replaces the deeper sums
                    * by the delta of the open call that returns */
        p = tg_cap_put_varint(p, levels);
        for (i = 0; i < levels; i++)
            p = tg_cap_put_varint(p, tg_cap_zz(s->lvl[i]));
    }
    e = tg_cap_head_chunk(fd, TG_CAP_CHUNK_STATE, no, buf, (size_t)(p - buf), size);
    free(buf);
    return e;
}

/* Write the head of a new segment to FD (its size added to *SIZE): the code
 * definitions written so far, the live threads, every stream's state.
 * Returns 0 or an errno.  Lock held. */
static int
tg_cap_write_head(struct tg_cap *cap, int fd, uint64_t *size)
{
    struct tg_cap_shadow meta;
    size_t i, from = 0;
    int e = 0;

    for (i = 0; i < cap->n_defs_ends && !e; i++) {
        e = tg_cap_head_chunk(fd, TG_CAP_CHUNK_CODES, TG_CAP_STREAM_META,
                              cap->alldefs + from, cap->defs_ends[i] - from, size);
        from = cap->defs_ends[i];
    }
    for (i = TG_CAP_STREAM_FIRST; i < cap->n_sh && !e; i++)
        if (cap->sh[i].used && cap->sh[i].live && !cap->sh[i].broken && cap->sh[i].def != NULL)
            e = tg_cap_head_chunk(fd, TG_CAP_CHUNK_THREAD, (uint32_t)i, cap->sh[i].def,
                                  cap->sh[i].def_len, size);
    memset(&meta, 0, sizeof(meta));
    meta.t_us = cap->start_us;
    for (i = 0; i < cap->n_sh; i++)
        if (cap->sh[i].used && cap->sh[i].t_us > meta.t_us)
            meta.t_us = cap->sh[i].t_us;
    if (!e)
        e = tg_cap_head_state(cap, fd, TG_CAP_STREAM_META, &meta, size);
    for (i = TG_CAP_STREAM_PROCESS; i < cap->n_sh && !e; i++) {
        const struct tg_cap_shadow *s = &cap->sh[i];
        if (s->used && !s->broken && (s->live || i == TG_CAP_STREAM_PROCESS))
            e = tg_cap_head_state(cap, fd, (uint32_t)i, s, size);
    }
    return e;
}

/* The size the current segment may reach before the next one starts: seg_max,
 * or twice its head when that is longer (a head of many threads' open calls
 * would otherwise leave a segment room for one chunk, and every chunk would
 * write a new head).  Twice the head is cut to max_size while that leaves
 * seg_max beside the head, so that the limit holds; a head longer than that
 * passes the limit anyway, and keeps its twice: cut to max_size, a segment
 * would hold less than seg_max of records (nothing but one chunk once the
 * head alone is longer than the limit), and a run would write a new head, the
 * bulk of the bytes, at every chunk.  Lock held. */
static uint64_t
tg_cap_seg_target(const struct tg_cap *cap)
{
    uint64_t t = 2 * cap->seg_head;
    if (t > cap->max_size && cap->seg_head + cap->seg_max <= cap->max_size)
        t = cap->max_size;
    return t > cap->seg_max ? t : cap->seg_max;
}

/* Start the next segment, for a chunk of NEED bytes: create it with its head,
 * make it current, delete the oldest segments while the older ones and the
 * current one at its largest (its target, or its head and that chunk) would
 * pass max_size.  When the current one alone passes it (a head longer than
 * the limit allows), over_limit keeps by how much.  Returns 0 or an errno
 * (the capture stops).  Lock held. */
static int
tg_cap_rotate_locked(struct tg_cap *cap, uint64_t need)
{
    unsigned char h[TG_CAP_HEADER_SIZE];
    uint64_t size = TG_CAP_HEADER_SIZE, older = 0, largest;
    struct stat st;
    size_t i, kept = (size_t)(cap->seg_no - cap->seg_first) + 1;
    char *path, *tmp;
    int fd, e;

    if (kept + 1 > cap->seg_sizes_cap) {
        size_t nc = 2 * (kept + 1);
        uint64_t *ns = realloc(cap->seg_sizes, nc * sizeof(*ns));
        if (ns == NULL)
            return ENOMEM;
        cap->seg_sizes = ns;
        cap->seg_sizes_cap = nc;
    }
    if (cap->seg_no == UINT32_MAX || (path = tg_cap_seg_path(cap->dir, cap->seg_no + 1)) == NULL)
        return ENOMEM;
    /* Written under a hidden name and renamed when its head is complete, so
     * that a process killed meanwhile leaves no segment a reader would find
     * empty or cut short (readers list only capture-<NO>.tg names). */
    tmp = tg_cap_seg_tmp_path(path);
    if (tmp == NULL) {
        free(path);
        return ENOMEM;
    }
    memcpy(h, cap->header, sizeof(h));
    tg_cap_put_u32(h + 36, cap->seg_no + 1);
    fd = tg_cap_create(tmp, h, &st);
    if (fd < 0) {
        free(tmp);
        free(path);
        return -fd;
    }
    e = tg_cap_write_head(cap, fd, &size);
    if (!e && rename(tmp, path) < 0)
        e = errno;
    if (e) {
        close(fd);
        unlink(tmp);
        free(tmp);
        free(path);
        return e;
    }
    free(tmp);
    free(path);
    if (tg_cap_fd_ok(cap))
        close(cap->fd);
    cap->fd = fd;
    cap->dev = st.st_dev;
    cap->ino = st.st_ino;
    cap->seg_no++;
    cap->seg_sizes[kept++] = size;
    cap->seg_head = size;
    largest = tg_cap_seg_target(cap);
    if (size + need > largest)
        largest = size + need;
    for (i = 0; i + 1 < kept; i++)
        older += cap->seg_sizes[i];
    while (kept > 1 && older + largest > cap->max_size) {
        char *old = tg_cap_seg_path(cap->dir, cap->seg_first);
        if (old == NULL)
            break;
        if (unlink(old) < 0 && errno != ENOENT) {
            free(old);
            break;  /* kept: the limit gives way rather than the records */
        }
        free(old);
        older -= cap->seg_sizes[0];
        memmove(cap->seg_sizes, cap->seg_sizes + 1, (kept - 1) * sizeof(*cap->seg_sizes));
        kept--;
        cap->seg_first++;
        cap->segs_deleted++;
    }
    if (older + largest > cap->max_size && older + largest - cap->max_size > cap->over_limit)
        cap->over_limit = older + largest - cap->max_size;
    return 0;
}

int
tg_cap_usable(struct tg_cap *cap)
{
    return cap->fd >= 0 && !__atomic_load_n(&cap->err, __ATOMIC_RELAXED) && !cap->dropped_child;
}

uint32_t
tg_cap_new_code_id(struct tg_cap *cap)
{
    if (cap->next_code == 0 || cap->next_code >= UINT32_MAX / 2)
        return 0;  /* a CALL's varint holds id << 1 in 32 bits: stop there */
    return cap->next_code++;
}

int
tg_cap_define(struct tg_cap *cap, uint32_t id, int kind, uint32_t firstline,
              const char *file, size_t file_len, const char *func, size_t func_len)
{
    size_t need = 4 * TG_CAP_VARINT_MAX + 1 + file_len + func_len;
    unsigned char *p;
    int ret = -1;

    if (need > TG_CAP_CHUNK_MAX)
        return -1;  /* a definition is one chunk: its texts are capped (names.h) */
    if (__atomic_load_n(&cap->err, __ATOMIC_RELAXED))
        return -1;  /* stopped: its records would never be written */
    /* Only defs_lock, never `lock`: the writer holds that across compression
     * and write(2), and a blocked sink must not stop a thread (holding the
     * GIL) at its first call of a new function. */
    pthread_mutex_lock(&cap->defs_lock);
    if (!cap->defs_open)
        goto out;
    if ((p = tg_cap_buf_reserve(&cap->q.defs, need, 4096)) == NULL)
        goto out;
    p = tg_cap_put_varint(p, id);
    *p++ = (unsigned char)kind;
    p = tg_cap_put_varint(p, firstline);
    p = tg_cap_put_varint(p, file_len);
    memcpy(p, file, file_len);
    p += file_len;
    p = tg_cap_put_varint(p, func_len);
    memcpy(p, func, func_len);
    p += func_len;
    cap->q.defs.len = (size_t)(p - cap->q.defs.data);
    ret = 0;
out:
    pthread_mutex_unlock(&cap->defs_lock);
    return ret;
}

int
tg_cap_chunk_out(struct tg_cap *cap, int kind, uint32_t stream, const void *buf, size_t len)
{
    int e;
    pthread_mutex_lock(&cap->lock);
    e = tg_cap_out_locked(cap, kind, stream, buf, len);
    pthread_mutex_unlock(&cap->lock);
    return e;
}

int
tg_cap_thread(struct tg_cap *cap, uint32_t stream, uint64_t native_id, uint64_t ident,
              const char *base, size_t base_len, const char *name, size_t name_len)
{
    size_t need = 8 + 4 * TG_CAP_VARINT_MAX + base_len + name_len;
    unsigned char *p, *start;
    uint32_t len;
    int e = 0;

    if (need - 8 > TG_CAP_CHUNK_MAX)
        return E2BIG;  /* its callers cap the names (names.h) */
    if ((e = __atomic_load_n(&cap->err, __ATOMIC_RELAXED)) != 0)
        return e;  /* stopped: never written */
    /* Only defs_lock, never `lock` (as tg_cap_define): a thread starting with
     * the GIL held must not wait for a blocked sink. */
    pthread_mutex_lock(&cap->defs_lock);
    if (!cap->defs_open) {
        e = EBADF;
        goto out;
    }
    if ((start = tg_cap_buf_reserve(&cap->q.thr, need, 1024)) == NULL) {
        e = ENOMEM;
        goto out;
    }
    p = tg_cap_put_varint(start + 8, native_id);
    p = tg_cap_put_varint(p, ident);
    p = tg_cap_put_varint(p, base_len);
    memcpy(p, base, base_len);
    p += base_len;
    p = tg_cap_put_varint(p, name_len);
    memcpy(p, name, name_len);
    p += name_len;
    len = (uint32_t)(p - start - 8);
    memcpy(start, &stream, 4);  /* native order: read back by this process only */
    memcpy(start + 4, &len, 4);
    cap->q.thr.len = (size_t)(p - cap->q.thr.data);
out:
    pthread_mutex_unlock(&cap->defs_lock);
    return e;
}

int
tg_cap_deposit(struct tg_cap *cap, uint32_t stream, uint64_t calls, uint64_t returns,
               uint64_t dropped)
{
    struct tg_cap_end *en;
    int ret = 0;

    /* Only defs_lock, never `lock` (as tg_cap_define): the flusher, or a
     * thread ending with the GIL held, must not wait for a blocked sink. */
    pthread_mutex_lock(&cap->defs_lock);
    if (!cap->defs_open)  /* closed, or a forked child's: nothing to write */
        goto unlock;
    en = (struct tg_cap_end *)(void *)tg_cap_buf_reserve(&cap->q.ends, sizeof(*en),
                                                        16 * sizeof(*en));
    if (en == NULL) {
        ret = -1;
        goto unlock;
    }
    cap->q.ends.len += sizeof(*en);
    en->stat.stream = stream;
    en->stat.calls = calls;
    en->stat.returns = returns;
    en->stat.dropped = dropped;
unlock:
    pthread_mutex_unlock(&cap->defs_lock);
    return ret;
}

int
tg_cap_finish(struct tg_cap *cap, int64_t end_us)
{
    size_t n, i;
    unsigned char *buf, *p;
    int e;

    pthread_mutex_lock(&cap->lock);
    /* what is queued first: THREAD chunks, and the ends' counters */
    e = tg_cap_out_locked(cap, 0, 0, NULL, 0);
    n = 8 + TG_CAP_VARINT_MAX + cap->n_stats * 4 * TG_CAP_VARINT_MAX;
    buf = e ? NULL : malloc(n);
    if (e) {
        /* the capture has stopped: no END */
    } else if (buf == NULL) {
        e = ENOMEM;
    } else {
        tg_cap_put_u64(buf, (uint64_t)end_us);
        p = tg_cap_put_varint(buf + 8, cap->n_stats);
        for (i = 0; i < cap->n_stats; i++) {
            p = tg_cap_put_varint(p, cap->stats[i].stream);
            p = tg_cap_put_varint(p, cap->stats[i].calls);
            p = tg_cap_put_varint(p, cap->stats[i].returns);
            p = tg_cap_put_varint(p, cap->stats[i].dropped);
        }
        /* raw: an end queued since would not be in these counters */
        e = tg_cap_raw_out_locked(cap, TG_CAP_CHUNK_END, TG_CAP_STREAM_META, buf,
                                  (size_t)(p - buf));
        free(buf);
    }
    pthread_mutex_unlock(&cap->lock);
    tg_cap_close(cap);
    return e;
}

void
tg_cap_close(struct tg_cap *cap)
{
    size_t i;
    pthread_mutex_lock(&cap->lock);
    if (cap->fd >= 0 && !cap->dropped_child && tg_cap_fd_ok(cap))
        close(cap->fd);
    cap->fd = -1;
    pthread_mutex_lock(&cap->defs_lock);
    tg_cap_queue_free(&cap->q);
    cap->defs_open = 0;
    pthread_mutex_unlock(&cap->defs_lock);
    tg_cap_queue_free(&cap->wq);
    free(cap->stats);
    cap->stats = NULL;
    cap->n_stats = cap->stats_cap = 0;
    free(cap->path);
    cap->path = NULL;
    cap->dropped_child = 0;
#ifdef TG_HAVE_ZSTD
    ZSTD_freeCCtx(cap->zctx);
#endif
    cap->zctx = NULL;
    free(cap->zbuf);
    cap->zbuf = NULL;
    cap->zbuf_cap = 0;
    cap->compress = 0;
    for (i = 0; i < cap->n_sh; i++)
        tg_cap_shadow_free(&cap->sh[i]);
    free(cap->sh);
    cap->sh = NULL;
    cap->n_sh = 0;
    free(cap->alldefs);
    cap->alldefs = NULL;
    cap->alldefs_len = cap->alldefs_cap = 0;
    free(cap->defs_ends);
    cap->defs_ends = NULL;
    cap->n_defs_ends = cap->defs_ends_cap = 0;
    free(cap->kinds);
    cap->kinds = NULL;
    cap->kinds_cap = 0;
    free(cap->seg_sizes);
    cap->seg_sizes = NULL;
    cap->seg_sizes_cap = 0;
    free(cap->dir);
    cap->dir = NULL;
    cap->max_size = cap->seg_max = 0;
    cap->seg_no = cap->seg_first = 0;
    cap->keep_ended = 0;
    pthread_mutex_unlock(&cap->lock);
}

void
tg_cap_keep_ended(struct tg_cap *cap)
{
    pthread_mutex_lock(&cap->lock);
    if (cap->max_size) {  /* segments: the only heads */
        /* the ends queued so far are applied as before: those threads ended */
        (void)tg_cap_out_locked(cap, 0, 0, NULL, 0);
        cap->keep_ended = 1;
    }
    pthread_mutex_unlock(&cap->lock);
}

void
tg_cap_destroy(struct tg_cap *cap)
{
    pthread_mutex_destroy(&cap->defs_lock);
    pthread_mutex_destroy(&cap->lock);
}

void
tg_cap_prepare_fork(struct tg_cap *cap)
{
    pthread_mutex_lock(&cap->defs_lock);
}

void
tg_cap_after_fork_parent(struct tg_cap *cap)
{
    pthread_mutex_unlock(&cap->defs_lock);
}

void
tg_cap_drop_in_child(struct tg_cap *cap)
{
    int was_held = pthread_mutex_trylock(&cap->lock) != 0;

    if (was_held) {
        /* Held at the fork by a write of a thread that is not in the child
         * (fork() does not take `lock`: it must not wait for the disk).  What
         * `lock` guards may be half-way changed: left as it is, never freed
         * (leaked), and the child's capture starts from nothing. */
        pthread_mutex_init(&cap->lock, NULL);
        memset(&cap->wq, 0, sizeof(cap->wq));
        cap->stats = NULL;
        cap->stats_cap = 0;
        cap->zctx = NULL;
        cap->zbuf = NULL;
        cap->zbuf_cap = 0;
        cap->sh = NULL;
        cap->n_sh = 0;
        cap->alldefs = NULL;
        cap->alldefs_len = cap->alldefs_cap = 0;
        cap->defs_ends = NULL;
        cap->n_defs_ends = cap->defs_ends_cap = 0;
        cap->kinds = NULL;
        cap->kinds_cap = 0;
        cap->seg_sizes = NULL;
        cap->seg_sizes_cap = 0;
        cap->dir = NULL;
        cap->max_size = cap->seg_max = 0;
        cap->seg_no = cap->seg_first = 0;
    }
    /* q is whole: tg_cap_prepare_fork took defs_lock (its queued ends hold
     * no memory of their own: left for the next close) */
    cap->q.defs.len = cap->q.thr.len = 0;
    cap->defs_open = 0;
    cap->wq.defs.len = cap->wq.thr.len = 0;
    cap->n_stats = 0;
    if (tg_fd_ours(cap->fd, cap->dev, cap->ino))
        close(cap->fd);
    cap->fd = -1;
    cap->dropped_child = 1;
    if (!was_held)
        pthread_mutex_unlock(&cap->lock);
    pthread_mutex_unlock(&cap->defs_lock);
    tg_test_gate_reset_in_child(&tg_cap_gate);
}

/* --- C function ids --------------------------------------------------------- */

int
tg_cap_idtab_put(struct tg_cap_idtab *t, uintptr_t a, uintptr_t b, uint32_t id)
{
    size_t i, mask;

    if ((t->used + 1) * 4 > t->cap * 3) {
        size_t nc = t->cap ? t->cap * 2 : 256, j;
        struct tg_cap_idtab_entry *ns = calloc(nc, sizeof(*ns));
        if (ns == NULL)
            return -1;
        for (j = 0; j < t->cap; j++) {
            if (t->slots[j].a == 0)
                continue;
            i = tg_cap_idtab_slot(t->slots[j].a, t->slots[j].b, nc - 1);
            while (ns[i].a != 0)
                i = (i + 1) & (nc - 1);
            ns[i] = t->slots[j];
        }
        free(t->slots);
        t->slots = ns;
        t->cap = nc;
    }
    mask = t->cap - 1;
    i = tg_cap_idtab_slot(a, b, mask);
    while (t->slots[i].a != 0)
        i = (i + 1) & mask;
    t->slots[i].a = a;
    t->slots[i].b = b;
    t->slots[i].id = id;
    t->used++;
    return 0;
}

void
tg_cap_idtab_clear(struct tg_cap_idtab *t, void (*cb)(uintptr_t a, uintptr_t b))
{
    size_t i;
    if (cb != NULL)
        for (i = 0; i < t->cap; i++)
            if (t->slots[i].a != 0)
                cb(t->slots[i].a, t->slots[i].b);
    free(t->slots);
    t->slots = NULL;
    t->cap = t->used = 0;
}
