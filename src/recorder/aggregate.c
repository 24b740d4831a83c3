/*
 * aggregate.c - plain C: aggregate=True's call-path trees, memory curves and
 * their file (aggregate.h; format in docs/formats.md "Aggregate").
 */
#include "aggregate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static _Atomic uint64_t tg_agg_epochs;

void
tg_agg_open(struct tg_agg *a, int64_t start_us, const char *memory, int64_t bucket_us)
{
    a->bucket_us = bucket_us > 0 ? bucket_us : TG_AGG_BUCKET_US;
    a->epoch = atomic_fetch_add(&tg_agg_epochs, 1) + 1;
    a->start_us = start_us;
    a->memory = memory;
    a->threads = NULL;
    atomic_store(&a->n_funcs, 0);
    a->write_err = 0;
}

static void
tg_agg_thread_free(struct tg_agg_thread *at)
{
    uint32_t i;
    for (i = 0; i < TG_AGG_MAX_CHUNKS && at->chunks[i] != NULL; i++)
        free(at->chunks[i]);
    free(at->slots);
    free(at->base);
    free(at);
}

static void
tg_agg_forget(struct tg_agg *a)
{
    struct tg_agg_thread *at, *next;
    uint32_t i, n = atomic_load(&a->n_funcs);

    for (at = a->threads; at != NULL; at = next) {
        next = at->next;
        tg_agg_thread_free(at);
    }
    a->threads = NULL;
    a->ends = 0;
    a->n_ended = 0;
    a->n_families = 0;
    for (i = 0; i < n; i++) {
        struct tg_agg_func *f = &a->fchunks[i / TG_AGG_CHUNK][i % TG_AGG_CHUNK];
        free(f->file);
        free(f->func);
    }
    for (i = 0; i < TG_AGG_FUNC_CHUNKS && a->fchunks[i] != NULL; i++) {
        free(a->fchunks[i]);
        a->fchunks[i] = NULL;
    }
    atomic_store(&a->n_funcs, 0);
}

void
tg_agg_close(struct tg_agg *a)
{
    pthread_mutex_lock(&a->lock);
    tg_agg_forget(a);
    pthread_mutex_unlock(&a->lock);
}

void
tg_agg_drop_in_child(struct tg_agg *a)
{
    pthread_mutex_init(&a->lock, NULL);  /* the parent's flusher may have held it */
    tg_agg_forget(a);
}

/* A new thread's (or folded entry's) state, not listed; NULL when out of memory. */
static struct tg_agg_thread *
tg_agg_thread_alloc(struct tg_agg *a, const char *base, unsigned long native_id)
{
    struct tg_agg_thread *at = calloc(1, sizeof(*at));
    struct tg_agg_node *root;
    uint32_t i;

    if (at == NULL)
        return NULL;
    at->base = strdup(base);
    at->chunks[0] = calloc(TG_AGG_CHUNK, sizeof(struct tg_agg_node));
    at->slots_cap = 64;
    at->slots = calloc(at->slots_cap, sizeof(uint32_t));
    if (at->base == NULL || at->chunks[0] == NULL || at->slots == NULL) {
        tg_agg_thread_free(at);
        return NULL;
    }
    root = &at->chunks[0][0];  /* node 0: the thread itself, never counted */
    root->parent = 0;
    root->func = 0;
    atomic_store(&at->n, 1);
    at->native_id = native_id;
    at->start_us = a->start_us;
    atomic_store(&at->width_us, a->bucket_us);
    for (i = 0; i < TG_AGG_BUCKETS; i++) {
        atomic_store_explicit(&at->bmin[i], INT64_MAX, memory_order_relaxed);
        atomic_store_explicit(&at->bmax[i], INT64_MIN, memory_order_relaxed);
    }
    return at;
}

struct tg_agg_thread *
tg_agg_thread_new(struct tg_agg *a, const char *base, unsigned long native_id, uint64_t tag)
{
    struct tg_agg_thread *at = tg_agg_thread_alloc(a, base, native_id);

    if (at == NULL)
        return NULL;
    at->tag = tag;
    pthread_mutex_lock(&a->lock);
    at->next = a->threads;
    a->threads = at;
    pthread_mutex_unlock(&a->lock);
    return at;
}

uint32_t
tg_agg_func_add(struct tg_agg *a, int is_c, const char *file, size_t file_len,
                const char *func, size_t func_len)
{
    uint32_t n = atomic_load_explicit(&a->n_funcs, memory_order_relaxed);
    struct tg_agg_func *f;

    if (n / TG_AGG_CHUNK >= TG_AGG_FUNC_CHUNKS)
        return 0;
    if (a->fchunks[n / TG_AGG_CHUNK] == NULL
            && (a->fchunks[n / TG_AGG_CHUNK] = calloc(TG_AGG_CHUNK, sizeof(*f))) == NULL)
        return 0;
    f = &a->fchunks[n / TG_AGG_CHUNK][n % TG_AGG_CHUNK];
    f->is_c = is_c;
    f->file = malloc(file_len + 1);
    f->func = malloc(func_len + 1);
    if (f->file == NULL || f->func == NULL) {
        free(f->file);
        free(f->func);
        f->file = f->func = NULL;
        return 0;
    }
    memcpy(f->file, file, file_len);
    f->file[file_len] = '\0';
    memcpy(f->func, func, func_len);
    f->func[func_len] = '\0';
    atomic_store_explicit(&a->n_funcs, n + 1, memory_order_release);
    return n + 1;
}

/* Doubles the slot table of AT; 0 or -1. */
static int
tg_agg_slots_grow(struct tg_agg_thread *at, uint32_t n)
{
    size_t cap = at->slots_cap * 2, i;
    uint32_t *s = calloc(cap, sizeof(uint32_t));
    if (s == NULL)
        return -1;
    for (i = 1; i < n; i++) {
        struct tg_agg_node *nd = tg_agg_node_at(at, (uint32_t)i);
        size_t j = tg_agg_hash(nd->parent, nd->func, nd->line) & (cap - 1);
        while (s[j] != 0)
            j = (j + 1) & (cap - 1);
        s[j] = (uint32_t)i + 1;
    }
    free(at->slots);
    at->slots = s;
    at->slots_cap = cap;
    return 0;
}

uint32_t
tg_agg_enter_slow(struct tg_agg_thread *at, uint32_t parent, uint32_t func, uint32_t line)
{
    uint32_t n = atomic_load_explicit(&at->n, memory_order_relaxed);
    struct tg_agg_node *nd;
    size_t j;

    if (n >= TG_AGG_MAX_CHUNKS * TG_AGG_CHUNK)
        return TG_AGG_NONE;
    if ((size_t)n * 2 >= at->slots_cap && tg_agg_slots_grow(at, n) < 0)
        return TG_AGG_NONE;
    if (at->chunks[n / TG_AGG_CHUNK] == NULL
            && (at->chunks[n / TG_AGG_CHUNK] = calloc(TG_AGG_CHUNK, sizeof(*nd))) == NULL)
        return TG_AGG_NONE;
    nd = tg_agg_node_at(at, n);
    nd->parent = parent;
    nd->func = func;
    nd->line = line;
    j = tg_agg_hash(parent, func, line) & (at->slots_cap - 1);
    while (at->slots[j] != 0)
        j = (j + 1) & (at->slots_cap - 1);
    at->slots[j] = n + 1;
    atomic_store_explicit(&at->n, n + 1, memory_order_release);
    return n;
}

/* Merges bucket pairs (2i, 2i+1) into i and doubles the width.  Owner only,
 * inside an odd seq. */
static void
tg_agg_curve_merge(struct tg_agg_thread *at)
{
    uint32_t nb = atomic_load_explicit(&at->nb, memory_order_relaxed), i;
    uint32_t half = (nb + 1) / 2;

    for (i = 0; i < half; i++) {
        int64_t lo = atomic_load_explicit(&at->bmin[2 * i], memory_order_relaxed);
        int64_t hi = atomic_load_explicit(&at->bmax[2 * i], memory_order_relaxed);
        if (2 * i + 1 < nb) {
            int64_t lo2 = atomic_load_explicit(&at->bmin[2 * i + 1], memory_order_relaxed);
            int64_t hi2 = atomic_load_explicit(&at->bmax[2 * i + 1], memory_order_relaxed);
            if (lo2 < lo)
                lo = lo2;
            if (hi2 > hi)
                hi = hi2;
        }
        atomic_store_explicit(&at->bmin[i], lo, memory_order_relaxed);
        atomic_store_explicit(&at->bmax[i], hi, memory_order_relaxed);
    }
    for (i = half; i < nb; i++) {
        atomic_store_explicit(&at->bmin[i], INT64_MAX, memory_order_relaxed);
        atomic_store_explicit(&at->bmax[i], INT64_MIN, memory_order_relaxed);
    }
    atomic_store_explicit(&at->nb, half, memory_order_relaxed);
    atomic_store_explicit(&at->width_us, atomic_load_explicit(&at->width_us,
                          memory_order_relaxed) * 2, memory_order_relaxed);
}

void
tg_agg_curve_slow(struct tg_agg_thread *at, int64_t now_us, int64_t bytes)
{
    int64_t off = now_us > at->start_us ? now_us - at->start_us : 0;
    int64_t w = atomic_load_explicit(&at->width_us, memory_order_relaxed);
    uint32_t nb = atomic_load_explicit(&at->nb, memory_order_relaxed);
    uint64_t idx = (uint64_t)(off / w);

    if (idx >= TG_AGG_BUCKETS) {
        uint32_t s = atomic_load_explicit(&at->seq, memory_order_relaxed);
        atomic_store_explicit(&at->seq, s + 1, memory_order_relaxed);
        atomic_thread_fence(memory_order_release);
        while (idx >= TG_AGG_BUCKETS) {
            tg_agg_curve_merge(at);
            w = atomic_load_explicit(&at->width_us, memory_order_relaxed);
            idx = (uint64_t)(off / w);
        }
        atomic_store_explicit(&at->seq, s + 2, memory_order_release);
        nb = atomic_load_explicit(&at->nb, memory_order_relaxed);
    }
    at->cur = (uint32_t)idx;
    at->cur_end_us = at->start_us + ((int64_t)idx + 1) * w;
    if (bytes < atomic_load_explicit(&at->bmin[idx], memory_order_relaxed))
        atomic_store_explicit(&at->bmin[idx], bytes, memory_order_relaxed);
    if (bytes > atomic_load_explicit(&at->bmax[idx], memory_order_relaxed))
        atomic_store_explicit(&at->bmax[idx], bytes, memory_order_relaxed);
    if (idx >= nb)
        atomic_store_explicit(&at->nb, (uint32_t)idx + 1, memory_order_release);
}

/* --- ended threads folded (aggregate.h) ----------------------------------- */

/* The folded entry named NAME, or NULL.  Lock held. */
static struct tg_agg_thread *
tg_agg_family_find(struct tg_agg *a, const char *name)
{
    struct tg_agg_thread *at;
    for (at = a->threads; at != NULL; at = at->next)
        if (at->folded != 0 && strcmp(at->base, name) == 0)
            return at;
    return NULL;
}

/* The entry that the ended thread named BASE folds into, made and listed when
 * new; NULL when out of memory.  Lock held. */
static struct tg_agg_thread *
tg_agg_family(struct tg_agg *a, const char *base)
{
    size_t n = strlen(base), i, o = 0;
    char *name = malloc(n + 3);
    struct tg_agg_thread *fam = NULL;
    int digits = 0;

    if (name == NULL)
        return NULL;
    /* every run of digits one "*"; a name without digits is its repeats' family
     * ("handler" and "handler~2" both "handler~*", docs "File names") */
    for (i = 0; i < n; i++) {
        int d = base[i] >= '0' && base[i] <= '9';
        if (!d)
            name[o++] = base[i];
        else if (i == 0 || base[i - 1] < '0' || base[i - 1] > '9')
            name[o++] = '*';
        digits |= d;
    }
    if (!digits) {
        name[o++] = '~';
        name[o++] = '*';
    }
    name[o] = '\0';
    if ((fam = tg_agg_family_find(a, name)) == NULL && a->n_families >= TG_AGG_FAMILIES) {
        strcpy(name, "*");  /* the entry of every other family */
        fam = tg_agg_family_find(a, name);
    }
    if (fam == NULL && (fam = tg_agg_thread_alloc(a, name, 0)) != NULL) {
        if (strcmp(name, "*") != 0)
            a->n_families++;
        fam->next = a->threads;
        a->threads = fam;
    }
    free(name);
    return fam;
}

/* Adds SRC's calls to DST's paths (SRC's nodes come after their parents).
 * Calls DST has no room for are counted in its dropped.  Lock held. */
static void
tg_agg_fold_tree(struct tg_agg_thread *dst, struct tg_agg_thread *src)
{
    uint32_t n = atomic_load_explicit(&src->n, memory_order_relaxed), i;
    uint32_t *map = malloc((size_t)n * sizeof(uint32_t));
    uint64_t lost = atomic_load_explicit(&src->dropped, memory_order_relaxed);

    if (map != NULL)
        map[0] = 0;  /* the thread's root */
    for (i = 1; i < n; i++) {
        struct tg_agg_node *s = tg_agg_node_at(src, i), *d;
        uint64_t c = atomic_load_explicit(&s->count, memory_order_relaxed);
        uint32_t m = map == NULL ? TG_AGG_NONE
                     : tg_agg_enter(dst, map[s->parent], s->func, s->line);
        if (map != NULL)
            map[i] = m;
        if (m == TG_AGG_NONE) {
            lost += c;
            continue;
        }
        if (c == 0)
            continue;
        d = tg_agg_node_at(dst, m);
#define TG_AGG_ADD(field, v) atomic_store_explicit(&d->field, atomic_load_explicit( \
            &d->field, memory_order_relaxed) + (v), memory_order_relaxed)
        if (atomic_load_explicit(&d->count, memory_order_relaxed) == 0
                || atomic_load_explicit(&s->max, memory_order_relaxed)
                   > atomic_load_explicit(&d->max, memory_order_relaxed))
            atomic_store_explicit(&d->max, atomic_load_explicit(&s->max, memory_order_relaxed),
                                  memory_order_relaxed);
        TG_AGG_ADD(count, c);
        TG_AGG_ADD(total, atomic_load_explicit(&s->total, memory_order_relaxed));
        TG_AGG_ADD(time_us, atomic_load_explicit(&s->time_us, memory_order_relaxed));
#undef TG_AGG_ADD
    }
    free(map);
    atomic_store_explicit(&dst->dropped, atomic_load_explicit(&dst->dropped,
                          memory_order_relaxed) + lost, memory_order_relaxed);
}

/* Whether AT's bucket I has a reading. */
static int
tg_agg_bucket_has(struct tg_agg_thread *at, uint32_t i)
{
    return atomic_load_explicit(&at->bmin[i], memory_order_relaxed)
           <= atomic_load_explicit(&at->bmax[i], memory_order_relaxed);
}

/* How far V lies from AT's bucket I's readings (0 inside them). */
static uint64_t
tg_agg_bucket_gap(struct tg_agg_thread *at, uint32_t i, int64_t v)
{
    int64_t lo = atomic_load_explicit(&at->bmin[i], memory_order_relaxed);
    int64_t hi = atomic_load_explicit(&at->bmax[i], memory_order_relaxed);
    if (v < lo)
        return (uint64_t)lo - (uint64_t)v;
    return v > hi ? (uint64_t)v - (uint64_t)hi : 0;
}

/* A walk over a curve's buckets in order, saying what its thread (or entry)
 * held in each: its readings where it has some; between two of them the level
 * of the bucket before, its reading nearer the next bucket's, ties the highest
 * (the level the commands hold there: src/lib/recsrc.c src_agg_high_first);
 * after its last bucket at->last, which a thread that ended still holds. */
struct tg_agg_walk {
    struct tg_agg_thread *at;
    uint32_t nb;                   /* the curve's buckets */
    uint32_t next;                 /* its next bucket with a reading (nb: none) */
    int started;                   /* a reading was passed */
    int64_t hold;                  /* the level after it */
};

static void
tg_agg_walk_init(struct tg_agg_walk *w, struct tg_agg_thread *at)
{
    w->at = at;
    w->nb = atomic_load_explicit(&at->nb, memory_order_relaxed);
    for (w->next = 0; w->next < w->nb && !tg_agg_bucket_has(at, w->next); w->next++)
        ;
    w->started = 0;
    w->hold = 0;
}

/* What W's curve held in bucket I (called for I = 0, 1, ...; the bucket read
 * before the caller changes it): 1, a reading, in *LO and *HI; 0, a level held
 * since one, in both; -1 nothing before its first reading. */
static int
tg_agg_walk_at(struct tg_agg_walk *w, uint32_t i, int64_t *lo, int64_t *hi)
{
    struct tg_agg_thread *at = w->at;
    uint32_t j;

    if (i != w->next || i >= w->nb) {
        *lo = *hi = w->hold;
        return w->started ? 0 : -1;
    }
    *lo = atomic_load_explicit(&at->bmin[i], memory_order_relaxed);
    *hi = atomic_load_explicit(&at->bmax[i], memory_order_relaxed);
    for (j = i + 1; j < w->nb && !tg_agg_bucket_has(at, j); j++)
        ;
    w->next = j;
    if (j < w->nb)
        w->hold = tg_agg_bucket_gap(at, j, *lo) < tg_agg_bucket_gap(at, j, *hi) ? *lo : *hi;
    else
        w->hold = at->last;
    w->started = 1;
    return 1;
}

/* Adds SRC's curve to DST's at the wider of their widths: with SUM
 * (memory=thread), in each bucket where either has a reading, what each held
 * there (tg_agg_walk: an ended thread its last level), lowest and highest
 * added, so that the range holds what the folded threads held together;
 * buckets where neither has a reading stay without one (the level before them
 * holds).  Otherwise, where SRC has a reading, the lowest and highest of both.
 * SRC's curve is merged in place (it is about to be freed).  Lock held. */
static void
tg_agg_fold_curve(struct tg_agg_thread *dst, struct tg_agg_thread *src, int sum)
{
    struct tg_agg_walk ws, wd;
    uint32_t nb, i;

    while (atomic_load_explicit(&src->width_us, memory_order_relaxed)
           < atomic_load_explicit(&dst->width_us, memory_order_relaxed))
        tg_agg_curve_merge(src);
    while (atomic_load_explicit(&dst->width_us, memory_order_relaxed)
           < atomic_load_explicit(&src->width_us, memory_order_relaxed))
        tg_agg_curve_merge(dst);
    nb = atomic_load_explicit(&src->nb, memory_order_relaxed);
    if (sum && atomic_load_explicit(&dst->nb, memory_order_relaxed) > nb)
        nb = atomic_load_explicit(&dst->nb, memory_order_relaxed);
    tg_agg_walk_init(&ws, src);
    tg_agg_walk_init(&wd, dst);
    for (i = 0; i < nb; i++) {
        int64_t lo, hi, dlo, dhi;
        int rs = tg_agg_walk_at(&ws, i, &lo, &hi), rd = tg_agg_walk_at(&wd, i, &dlo, &dhi);
        if (sum) {
            if (rs < 1 && rd < 1)
                continue;  /* no reading in either */
            dlo = (rs < 0 ? 0 : lo) + (rd < 0 ? 0 : dlo);
            dhi = (rs < 0 ? 0 : hi) + (rd < 0 ? 0 : dhi);
        } else if (rs < 1) {
            continue;
        } else if (rd < 1) {
            dlo = lo;
            dhi = hi;
        } else {
            dlo = lo < dlo ? lo : dlo;
            dhi = hi > dhi ? hi : dhi;
        }
        atomic_store_explicit(&dst->bmin[i], dlo, memory_order_relaxed);
        atomic_store_explicit(&dst->bmax[i], dhi, memory_order_relaxed);
    }
    if (sum)
        dst->last += src->last;  /* what the entry's threads hold after its curve */
    if (nb > atomic_load_explicit(&dst->nb, memory_order_relaxed))
        atomic_store_explicit(&dst->nb, nb, memory_order_relaxed);
}

int
tg_agg_thread_end(struct tg_agg *a, struct tg_agg_thread *at, uint64_t *folded_tag,
                  char *family)
{
    struct tg_agg_thread **pp, **oldest = NULL, *fam;
    int folded = 0;

    pthread_mutex_lock(&a->lock);
    at->ended = ++a->ends;
    a->n_ended++;
    if (a->n_ended <= TG_AGG_KEEP_ENDED)
        goto unlock;
    for (pp = &a->threads; *pp != NULL; pp = &(*pp)->next)
        if ((*pp)->ended != 0 && (oldest == NULL || (*pp)->ended < (*oldest)->ended))
            oldest = pp;
    if ((fam = tg_agg_family(a, (*oldest)->base)) == NULL)
        goto unlock;  /* out of memory: kept whole, folded at a later end */
    at = *oldest;
    tg_agg_fold_tree(fam, at);
    tg_agg_fold_curve(fam, at, strcmp(a->memory, "thread") == 0);
    fam->folded++;
    *oldest = at->next;
    a->n_ended--;
    *folded_tag = at->tag;
    if (family != NULL)
        snprintf(family, TG_AGG_FAMILY_CAP, "%s", fam->base);
    folded = 1;
    tg_agg_thread_free(at);
unlock:
    pthread_mutex_unlock(&a->lock);
    return folded;
}

/* Copies AT's curve (width, count, buckets) consistently; 0, or -1 when the
 * owner kept merging (then the file has no curve for it this time). */
static int
tg_agg_curve_copy(struct tg_agg_thread *at, int64_t *width, uint32_t *nb, int64_t *lo,
                  int64_t *hi)
{
    int tries;
    for (tries = 0; tries < 8; tries++) {
        uint32_t s1 = atomic_load_explicit(&at->seq, memory_order_acquire), s2, i;
        if (s1 & 1)
            continue;
        *width = atomic_load_explicit(&at->width_us, memory_order_relaxed);
        *nb = atomic_load_explicit(&at->nb, memory_order_acquire);
        for (i = 0; i < *nb && i < TG_AGG_BUCKETS; i++) {
            lo[i] = atomic_load_explicit(&at->bmin[i], memory_order_relaxed);
            hi[i] = atomic_load_explicit(&at->bmax[i], memory_order_relaxed);
        }
        atomic_thread_fence(memory_order_acquire);
        s2 = atomic_load_explicit(&at->seq, memory_order_relaxed);
        if (s1 == s2)
            return 0;
    }
    return -1;
}

/* Writes AT's section to F; 0 or -1 (out of memory). */
static int
tg_agg_write_thread(FILE *f, struct tg_agg_thread *at, int64_t *lo, int64_t *hi)
{
    uint32_t n = atomic_load_explicit(&at->n, memory_order_acquire), i, nb = 0;
    int64_t width = 0;

    fprintf(f, "t %lu %llu %s\n", at->native_id,
            (unsigned long long)atomic_load_explicit(&at->dropped, memory_order_relaxed),
            at->base);
    if (at->folded != 0)
        fprintf(f, "m %llu\n", (unsigned long long)at->folded);
    for (i = 1; i < n; i++) {
        struct tg_agg_node *nd = tg_agg_node_at(at, i);
        fprintf(f, "n %u %u %u %llu %lld %lld %lld\n", nd->parent, nd->func, nd->line,
                (unsigned long long)atomic_load_explicit(&nd->count, memory_order_relaxed),
                (long long)atomic_load_explicit(&nd->total, memory_order_relaxed),
                (long long)atomic_load_explicit(&nd->max, memory_order_relaxed),
                (long long)atomic_load_explicit(&nd->time_us, memory_order_relaxed));
    }
    if (tg_agg_curve_copy(at, &width, &nb, lo, hi) == 0) {
        fprintf(f, "c %lld\n", (long long)width);
        for (i = 0; i < nb; i++)
            if (lo[i] <= hi[i])
                fprintf(f, "b %u %lld %lld\n", i, (long long)lo[i], (long long)hi[i]);
    }
    return 0;
}

/* Writes LEN bytes of BUF to TMP, then renames it DST: 0 or an errno.  No
 * lock held: a slow or blocked disk stalls only the flusher. */
static int
tg_agg_write_file(const char *tmp, const char *dst, const char *buf, size_t len)
{
    FILE *f = fopen(tmp, "w");
    int e = 0;

    if (f == NULL)
        return errno;
    if (fwrite(buf, 1, len, f) != len || ferror(f))
        e = errno ? errno : EIO;
    if (fclose(f) != 0 && e == 0)
        e = errno ? errno : EIO;
    if (e == 0 && rename(tmp, dst) != 0)
        e = errno;
    if (e != 0)
        unlink(tmp);
    return e;
}

int
tg_agg_write(struct tg_agg *a, const char *outdir, int64_t end_us)
{
    size_t dl = strlen(outdir);
    char *tmp = malloc(dl + sizeof(TG_AGG_TMPNAME) + 1);
    char *dst = malloc(dl + sizeof(TG_AGG_FILENAME) + 1);
    int64_t *lo = malloc(TG_AGG_BUCKETS * sizeof(int64_t));
    int64_t *hi = malloc(TG_AGG_BUCKETS * sizeof(int64_t));
    struct tg_agg_thread *at;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = NULL;
    uint32_t i, nf;
    int e = 0;

    if (tmp == NULL || dst == NULL || lo == NULL || hi == NULL) {
        e = ENOMEM;
        goto out;
    }
    sprintf(tmp, "%s/%s", outdir, TG_AGG_TMPNAME);
    sprintf(dst, "%s/%s", outdir, TG_AGG_FILENAME);
    /* The file is made in memory under the lock, which thread starts and ends
     * take with the GIL held, and written after it is released: never I/O
     * under a lock the interpreter waits for. */
    pthread_mutex_lock(&a->lock);
    f = open_memstream(&buf, &len);
    if (f == NULL) {
        e = errno ? errno : ENOMEM;
        pthread_mutex_unlock(&a->lock);
        goto done;
    }
    fprintf(f, "%s\nstart_us %lld\nend_us %lld\nmemory %s\n", TG_AGG_MAGIC,
            (long long)a->start_us, (long long)end_us, a->memory);
    for (at = a->threads; at != NULL; at = at->next)
        tg_agg_write_thread(f, at, lo, hi);
    /* After the threads: every function their nodes name is published. */
    nf = atomic_load_explicit(&a->n_funcs, memory_order_acquire);
    for (i = 0; i < nf; i++) {
        struct tg_agg_func *fn = &a->fchunks[i / TG_AGG_CHUNK][i % TG_AGG_CHUNK];
        fprintf(f, "f %u %s %s\t%s\n", i + 1, fn->is_c ? "c" : "py", fn->file, fn->func);
    }
    fputs("end\n", f);
    if (ferror(f))
        e = ENOMEM;
    if (fclose(f) != 0 && e == 0)
        e = ENOMEM;
    pthread_mutex_unlock(&a->lock);
    if (e == 0)
        e = tg_agg_write_file(tmp, dst, buf, len);
done:
    pthread_mutex_lock(&a->lock);
    a->write_err = e;
    pthread_mutex_unlock(&a->lock);
out:
    free(buf);
    free(tmp);
    free(dst);
    free(lo);
    free(hi);
    return e;
}
