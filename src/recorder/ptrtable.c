/*
 * ptrtable.c - sharded open-addressing pointer -> size tables (see ptrtable.h).
 */
#include "ptrtable.h"

#include <pthread.h>
#include <stdlib.h>

#define TG_SHARD_BITS 4
#define TG_SHARDS (1u << TG_SHARD_BITS)
#define TG_SHARD_MIN_CAP 1024

/* Key and size side by side: a lookup touches one cache line, not two. */
struct tg_slot {
    uintptr_t key;         /* 0 = empty slot */
    size_t size;
};

struct tg_shard {
    pthread_mutex_t lock;  /* guards every field below (raw table only) */
    struct tg_slot *slots;
    size_t mask;           /* capacity - 1; capacity is a power of two */
    size_t count;
    char pad[64];          /* keep shards' locks on separate cache lines */
};

struct tg_ptrtable {
    int locked;                        /* take the shard locks (raw domain) */
    struct tg_shard shards[TG_SHARDS];
};

#define TG_S { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, {0} }
#define TG_SHARDS_INIT { TG_S, TG_S, TG_S, TG_S, TG_S, TG_S, TG_S, TG_S, \
                         TG_S, TG_S, TG_S, TG_S, TG_S, TG_S, TG_S, TG_S }
/* Raw domain: each shard's fields are guarded by its own lock. */
struct tg_ptrtable tg_ptrtable_raw = { 1, TG_SHARDS_INIT };
/* Mem and obj domains: guarded by the GIL. */
struct tg_ptrtable tg_ptrtable_gil = { 0, TG_SHARDS_INIT };
#undef TG_S
#undef TG_SHARDS_INIT

static inline uint64_t
tg_ptr_hash(uintptr_t p)
{
    uint64_t h = ((uint64_t)p >> 4) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

static inline struct tg_shard *
tg_shard_of(struct tg_ptrtable *t, uint64_t h)
{
    return &t->shards[h >> (64 - TG_SHARD_BITS)];
}

/* Grow S to twice its size (or the minimum); returns 0 or -1 (S unchanged).
 * Out of line and cold: inlined, its registers and calls made every insert pay
 * a full prologue. */
static __attribute__((noinline, cold)) int
tg_shard_grow_unlocked(struct tg_shard *s)
{
    size_t old_cap = s->slots ? s->mask + 1 : 0;
    size_t cap = old_cap ? old_cap * 2 : TG_SHARD_MIN_CAP;
    struct tg_slot *slots = calloc(cap, sizeof(*slots));
    size_t i;

    if (slots == NULL)
        return -1;
    for (i = 0; i < old_cap; i++) {
        uintptr_t k = s->slots[i].key;
        size_t j;
        if (k == 0)
            continue;
        j = tg_ptr_hash(k) & (cap - 1);
        while (slots[j].key != 0)
            j = (j + 1) & (cap - 1);
        slots[j] = s->slots[i];
    }
    free(s->slots);
    s->slots = slots;
    s->mask = cap - 1;
    return 0;
}

/* Make room for one more entry in S; 0, or -1 when S is full and cannot grow. */
static __attribute__((noinline, cold)) int
tg_shard_make_room_unlocked(struct tg_shard *s)
{
    if (tg_shard_grow_unlocked(s) < 0 && s->slots == NULL)
        return -1;
    if (s->count + 1 > s->mask)  /* full and could not grow */
        return -1;
    return 0;
}

static inline void
tg_shard_insert_unlocked(struct tg_shard *s, uintptr_t k, uint64_t h, size_t size)
{
    struct tg_slot *slot;
    size_t i;

    if (__builtin_expect(s->slots == NULL || (s->count + 1) * 2 > s->mask + 1, 0)
            && tg_shard_make_room_unlocked(s) < 0)
        return;
    i = h & s->mask;
    slot = &s->slots[i];
    while (slot->key != 0 && slot->key != k) {
        i = (i + 1) & s->mask;
        slot = &s->slots[i];
    }
    if (slot->key == 0) {
        slot->key = k;
        s->count++;
    }
    slot->size = size;
}

/* The raw table's path, apart so that the lock calls do not weigh on the GIL
 * table's (a leaf function without a stack frame). */
static __attribute__((noinline)) void
tg_shard_insert_locked(struct tg_shard *s, uintptr_t k, uint64_t h, size_t size)
{
    pthread_mutex_lock(&s->lock);
    tg_shard_insert_unlocked(s, k, h, size);
    pthread_mutex_unlock(&s->lock);
}

void
tg_ptrtable_insert(struct tg_ptrtable *t, void *ptr, size_t size)
{
    uintptr_t k = (uintptr_t)ptr;
    uint64_t h = tg_ptr_hash(k);
    struct tg_shard *s = tg_shard_of(t, h);

    if (t->locked)
        tg_shard_insert_locked(s, k, h, size);
    else
        tg_shard_insert_unlocked(s, k, h, size);
}

static inline int
tg_shard_remove_unlocked(struct tg_shard *s, uintptr_t k, uint64_t h, size_t *size)
{
    size_t i, j;

    if (s->slots == NULL)
        return 0;
    i = h & s->mask;
    while (s->slots[i].key != k) {
        if (s->slots[i].key == 0)
            return 0;
        i = (i + 1) & s->mask;
    }
    *size = s->slots[i].size;
    /* Backward-shift deletion: pull later members of the probe run into the hole
     * when their home slot does not lie cyclically in (hole, j]. */
    j = i;
    for (;;) {
        size_t home;
        j = (j + 1) & s->mask;
        if (s->slots[j].key == 0)
            break;
        home = tg_ptr_hash(s->slots[j].key) & s->mask;
        if ((i <= j) ? (home <= i || home > j) : (home <= i && home > j)) {
            s->slots[i] = s->slots[j];
            i = j;
        }
    }
    s->slots[i].key = 0;
    s->count--;
    return 1;
}

/* The raw table's path (see tg_shard_insert_locked). */
static __attribute__((noinline)) int
tg_shard_remove_locked(struct tg_shard *s, uintptr_t k, uint64_t h, size_t *size)
{
    int found;
    pthread_mutex_lock(&s->lock);
    found = tg_shard_remove_unlocked(s, k, h, size);
    pthread_mutex_unlock(&s->lock);
    return found;
}

int
tg_ptrtable_remove(struct tg_ptrtable *t, void *ptr, size_t *size)
{
    uintptr_t k = (uintptr_t)ptr;
    uint64_t h = tg_ptr_hash(k);
    struct tg_shard *s = tg_shard_of(t, h);

    if (t->locked)
        return tg_shard_remove_locked(s, k, h, size);
    return tg_shard_remove_unlocked(s, k, h, size);
}

static void
tg_table_clear(struct tg_ptrtable *t)
{
    unsigned n;
    for (n = 0; n < TG_SHARDS; n++) {
        struct tg_shard *s = &t->shards[n];
        pthread_mutex_lock(&s->lock);
        free(s->slots);
        s->slots = NULL;
        s->mask = 0;
        s->count = 0;
        pthread_mutex_unlock(&s->lock);
    }
}

void
tg_ptrtable_clear(void)
{
    tg_table_clear(&tg_ptrtable_raw);
    tg_table_clear(&tg_ptrtable_gil);
}

static size_t
tg_table_count(struct tg_ptrtable *t)
{
    size_t total = 0;
    unsigned n;
    for (n = 0; n < TG_SHARDS; n++) {
        pthread_mutex_lock(&t->shards[n].lock);
        total += t->shards[n].count;
        pthread_mutex_unlock(&t->shards[n].lock);
    }
    return total;
}

size_t
tg_ptrtable_count(void)
{
    return tg_table_count(&tg_ptrtable_raw) + tg_table_count(&tg_ptrtable_gil);
}

void
tg_ptrtable_lock_all(void)
{
    unsigned n;
    for (n = 0; n < TG_SHARDS; n++)
        pthread_mutex_lock(&tg_ptrtable_raw.shards[n].lock);
}

void
tg_ptrtable_unlock_all(void)
{
    unsigned n = TG_SHARDS;
    while (n-- > 0)
        pthread_mutex_unlock(&tg_ptrtable_raw.shards[n].lock);
}
