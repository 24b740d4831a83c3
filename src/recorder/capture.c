/*
 * capture.c - the capture file of a run: header, chunks, pending code
 * definitions, END trailer, and the C function id table (capture.h).
 *
 * Never raises, never prints: failures are errnos, and the first failed write
 * stops the capture for good (the recorder reports it at disable()).
 */
#include "capture.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#ifdef TG_HAVE_ZSTD
#  include <zstd.h>
/* Level 1: the fastest of the regular levels; a chunk is compressed under the
 * capture's lock, by the flusher or (when it lags) by the program's thread. */
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
    cap->fd = -1;
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
    if (!cap->err)
        cap->err = EBADF;
    return 0;
}

/* writev(2) all of IOV[0..N) (modified); returns 0 or an errno. */
static int
tg_cap_writev_all(int fd, struct iovec *iov, int n)
{
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

/* Write the pending definitions (if any) and then chunk KIND/STREAM of BUF/LEN
 * (if BUF is not NULL), in one writev.  Lock held. */
static int
tg_cap_out_locked(struct tg_cap *cap, int kind, uint32_t stream, const void *buf, size_t len)
{
    unsigned char dh[TG_CAP_CHUNK_HEADER_SIZE], ch[TG_CAP_CHUNK_HEADER_SIZE];
    struct iovec iov[4];
    int n = 0, e;

    if (cap->err)
        return cap->err;
    if (cap->dropped_child || !tg_cap_fd_ok(cap))
        return cap->err ? cap->err : EBADF;
    /* a chunk's length is a u32 that readers take up to TG_CAP_CHUNK_MAX: never
     * cut a longer one to 32 bits (its callers cap what they write) */
    if (len > TG_CAP_CHUNK_MAX || cap->defs_len > TG_CAP_CHUNK_MAX)
        return E2BIG;
    if (cap->defs_len > 0) {
        tg_cap_chunk_header(dh, TG_CAP_CHUNK_CODES, 0, TG_CAP_STREAM_META, cap->defs_len);
        iov[n].iov_base = dh;
        iov[n++].iov_len = sizeof(dh);
        iov[n].iov_base = cap->defs;
        iov[n++].iov_len = cap->defs_len;
    }
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
        iov[n].iov_base = ch;
        iov[n++].iov_len = sizeof(ch);
        iov[n].iov_base = (void *)buf;
        iov[n++].iov_len = len;
    }
    if (n == 0)
        return 0;
    e = tg_cap_writev_all(cap->fd, iov, n);
    cap->defs_len = 0;
    if (e)
        cap->err = e;
    return e;
}

int
tg_cap_open(struct tg_cap *cap, const char *path, uint32_t flags, int64_t start_us,
            uint32_t memory_mode, uint32_t clock, uint32_t pid, int compress)
{
    unsigned char h[TG_CAP_HEADER_SIZE];
    struct stat st;
    struct iovec iov;
    int fd, e;

    tg_cap_close(cap);
    cap->path = strdup(path);
    if (cap->path == NULL)
        return -ENOMEM;
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0) {
        e = errno;
        close(fd);
        return -e;
    }
    memcpy(h, TG_CAP_MAGIC, TG_CAP_MAGIC_LEN);
    tg_cap_put_u32(h + 8, TG_CAP_VERSION);
    tg_cap_put_u32(h + 12, flags);
    tg_cap_put_u64(h + 16, (uint64_t)start_us);
    tg_cap_put_u32(h + 24, memory_mode);
    tg_cap_put_u32(h + 28, clock);
    tg_cap_put_u32(h + 32, pid);
    tg_cap_put_u32(h + 36, 0);
    iov.iov_base = h;
    iov.iov_len = sizeof(h);
    e = tg_cap_writev_all(fd, &iov, 1);
    if (e) {
        close(fd);
        return -e;
    }
    pthread_mutex_lock(&cap->lock);
    cap->fd = fd;
    cap->dev = st.st_dev;
    cap->ino = st.st_ino;
    cap->err = 0;
    cap->dropped_child = 0;
    cap->flags = flags;
    cap->start_us = start_us;
    cap->epoch = atomic_fetch_add(&tg_cap_epochs, 1) + 1;
    cap->next_code = 1;
    cap->compress = compress && tg_cap_can_compress();
    cap->defs_len = 0;
    cap->n_stats = 0;
    pthread_mutex_unlock(&cap->lock);
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
    pthread_mutex_lock(&cap->lock);
    if (cap->err || cap->fd < 0 || cap->dropped_child)
        goto out;
    if (cap->defs_len > 0 && cap->defs_len + need > TG_CAP_DEFS_MAX
            && tg_cap_out_locked(cap, 0, 0, NULL, 0) != 0)
        goto out;
    if (cap->defs_len + need > cap->defs_cap) {
        size_t nc = cap->defs_cap ? cap->defs_cap : 4096;
        unsigned char *nb;
        while (nc < cap->defs_len + need)
            nc *= 2;
        nb = realloc(cap->defs, nc);
        if (nb == NULL)
            goto out;
        cap->defs = nb;
        cap->defs_cap = nc;
    }
    p = cap->defs + cap->defs_len;
    p = tg_cap_put_varint(p, id);
    *p++ = (unsigned char)kind;
    p = tg_cap_put_varint(p, firstline);
    p = tg_cap_put_varint(p, file_len);
    memcpy(p, file, file_len);
    p += file_len;
    p = tg_cap_put_varint(p, func_len);
    memcpy(p, func, func_len);
    p += func_len;
    cap->defs_len = (size_t)(p - cap->defs);
    ret = 0;
out:
    pthread_mutex_unlock(&cap->lock);
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
    size_t n = 4 * TG_CAP_VARINT_MAX + base_len + name_len;
    unsigned char *buf = malloc(n), *p;
    int e;

    if (buf == NULL)
        return ENOMEM;
    p = tg_cap_put_varint(buf, native_id);
    p = tg_cap_put_varint(p, ident);
    p = tg_cap_put_varint(p, base_len);
    memcpy(p, base, base_len);
    p += base_len;
    p = tg_cap_put_varint(p, name_len);
    memcpy(p, name, name_len);
    p += name_len;
    e = tg_cap_chunk_out(cap, TG_CAP_CHUNK_THREAD, stream, buf, (size_t)(p - buf));
    free(buf);
    return e;
}

int
tg_cap_deposit(struct tg_cap *cap, uint32_t stream, uint64_t calls, uint64_t returns,
               uint64_t dropped)
{
    int ret = 0;
    pthread_mutex_lock(&cap->lock);
    if (cap->n_stats == cap->stats_cap) {
        size_t nc = cap->stats_cap ? cap->stats_cap * 2 : 16;
        struct tg_cap_stat *ns = realloc(cap->stats, nc * sizeof(*ns));
        if (ns == NULL) {
            ret = -1;
            goto out;
        }
        cap->stats = ns;
        cap->stats_cap = nc;
    }
    cap->stats[cap->n_stats].stream = stream;
    cap->stats[cap->n_stats].calls = calls;
    cap->stats[cap->n_stats].returns = returns;
    cap->stats[cap->n_stats].dropped = dropped;
    cap->n_stats++;
out:
    pthread_mutex_unlock(&cap->lock);
    return ret;
}

int
tg_cap_finish(struct tg_cap *cap, int64_t end_us)
{
    size_t n, i;
    unsigned char *buf, *p;
    int e;

    pthread_mutex_lock(&cap->lock);
    n = 8 + TG_CAP_VARINT_MAX + cap->n_stats * 4 * TG_CAP_VARINT_MAX;
    buf = malloc(n);
    if (buf == NULL) {
        e = ENOMEM;
        tg_cap_out_locked(cap, 0, 0, NULL, 0);  /* the definitions at least */
    } else {
        tg_cap_put_u64(buf, (uint64_t)end_us);
        p = tg_cap_put_varint(buf + 8, cap->n_stats);
        for (i = 0; i < cap->n_stats; i++) {
            p = tg_cap_put_varint(p, cap->stats[i].stream);
            p = tg_cap_put_varint(p, cap->stats[i].calls);
            p = tg_cap_put_varint(p, cap->stats[i].returns);
            p = tg_cap_put_varint(p, cap->stats[i].dropped);
        }
        e = tg_cap_out_locked(cap, TG_CAP_CHUNK_END, TG_CAP_STREAM_META, buf,
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
    pthread_mutex_lock(&cap->lock);
    if (cap->fd >= 0 && !cap->dropped_child && tg_cap_fd_ok(cap))
        close(cap->fd);
    cap->fd = -1;
    free(cap->defs);
    cap->defs = NULL;
    cap->defs_len = cap->defs_cap = 0;
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
    pthread_mutex_unlock(&cap->lock);
}

void
tg_cap_destroy(struct tg_cap *cap)
{
    pthread_mutex_destroy(&cap->lock);
}

void
tg_cap_drop_in_child(struct tg_cap *cap)
{
    struct stat st;
    cap->defs_len = 0;
    cap->n_stats = 0;
    if (cap->fd >= 0 && fstat(cap->fd, &st) == 0 && st.st_dev == cap->dev
            && st.st_ino == cap->ino)
        close(cap->fd);
    cap->fd = -1;
    cap->dropped_child = 1;
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
