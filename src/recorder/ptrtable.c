/*
 * ptrtable.c - sharded open-addressing pointer -> size tables (see ptrtable.h).
 *
 * Each shard holds two arrays searched with the same hash:
 *   - the compact array, 8-byte words (key << TG_C_SIZE_BITS | size): every
 *     16-aligned block below 2^48 whose word is below 2^TG_C_SIZE_BITS, which with
 *     accounting off is every block under 1 MiB from pymalloc or glibc;
 *   - the wide array, 16-byte {pointer, word} slots, for the rest (unaligned or
 *     high pointers, large blocks, accounting's site ids).
 * A pointer is in at most one of them: an insert into one drops any stale entry
 * for the same pointer from the other, so that a free returns exactly the size the
 * last allocation at that address asked for.  The common insert (compact, wide
 * array empty) and remove (compact hit) stay leaf code without a stack frame;
 * the wide array and growth are out of line.
 */
#include "ptrtable.h"

#include <pthread.h>
#include <stdlib.h>

#define TG_SHARD_BITS 4
#define TG_SHARDS (1u << TG_SHARD_BITS)
#define TG_C_MIN_CAP 1024        /* compact slots of a shard's first array */
#define TG_W_MIN_CAP 64          /* wide slots: few blocks go there with accounting off */

/* Compact word: the pointer's bits 4..47 in the high TG_C_KEY_BITS bits, the
 * size word in the low TG_C_SIZE_BITS; 0 is an empty slot. */
#define TG_C_SIZE_BITS 20
#define TG_C_KEY_BITS (64 - TG_C_SIZE_BITS)
#define TG_C_SIZE_MASK ((UINT64_C(1) << TG_C_SIZE_BITS) - 1)
#define TG_C_KEY_MASK (~TG_C_SIZE_MASK)

/* Compact array: grown past 3/4 full.  Replaying the table operations of the
 * alloc_heavy and stdlib_mix benchmarks, a remove then reads 1.3-2.1 slots to
 * find its entry and 1.7 more to close the hole, against 1.1-1.6 and 1.3-1.4 at
 * 1/2 and 1.4-3.5 and 1.7-2.8 at 7/8; 3/4 took the fewest cycles (the arrays
 * are half the size of 1/2's at the same count, so fewer cache misses).  The
 * wide array keeps 1/2. */
#define TG_C_LOAD_NUM 3
#define TG_C_LOAD_DEN 4

/* Wide slot: key and word side by side, a lookup touches one cache line. */
struct tg_slot {
    uintptr_t key;         /* 0 = empty slot */
    size_t size;
};

struct tg_shard {
    pthread_mutex_t lock;  /* guards every field below (raw table only; the GIL
                              guards them in the GIL table) */
    uint64_t *cslots;      /* compact array; tg_c_none until the first insert */
    size_t cmask;          /* compact capacity - 1; capacity is a power of two */
    size_t ccount;         /* entries in cslots */
    size_t climit;         /* grow before ccount exceeds it; 0 for tg_c_none */
    struct tg_slot *wslots;/* wide array, NULL until the first wide insert */
    size_t wmask;          /* wide capacity - 1 */
    size_t wcount;         /* entries in wslots; 0 lets lookups skip the array */
} __attribute__((aligned(128)));  /* shards' locks on separate cache lines, and
                                     a shift, not a multiply, to index them */

struct tg_ptrtable {
    int locked;                        /* take the shard locks (raw domain); const */
    struct tg_shard shards[TG_SHARDS];
};

/* The compact array of a shard that has none: one empty slot that is only ever
 * read, so that a remove needs no NULL test (an insert first grows, climit 0). */
static const uint64_t tg_c_none[1];
#define TG_C_NONE ((uint64_t *)tg_c_none)

#define TG_S { PTHREAD_MUTEX_INITIALIZER, TG_C_NONE, 0, 0, 0, NULL, 0, 0 }
#define TG_SHARDS_INIT { TG_S, TG_S, TG_S, TG_S, TG_S, TG_S, TG_S, TG_S, \
                         TG_S, TG_S, TG_S, TG_S, TG_S, TG_S, TG_S, TG_S }
/* Raw domain: each shard's fields are guarded by its own lock. */
struct tg_ptrtable tg_ptrtable_raw = { 1, TG_SHARDS_INIT };
/* Mem and obj domains: guarded by the GIL. */
struct tg_ptrtable tg_ptrtable_gil = { 0, TG_SHARDS_INIT };
#undef TG_S
#undef TG_SHARDS_INIT

/* Hash of a pointer's 16-byte granule: the same for both arrays, so one hash
 * picks the shard and the home slot in each. */
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

/* Compact key of pointer P: P rotated left by 16 bits.  For a 16-aligned P below
 * 2^48 that is exactly the key part of P's compact word (P >> 4 in the top 44
 * bits), and its low 20 bits are 0.  Any other P leaves some of the low 20 bits
 * set (its bits 0..3 land in bits 16..19, its bits 48..63 in bits 0..15), so it
 * matches no compact word: lookups need no separate test for which array P
 * belongs in.  (P is never NULL, whose key 0 would match an empty slot.) */
static inline uint64_t
tg_compact_key(uintptr_t p)
{
    return ((uint64_t)p << 16) | ((uint64_t)p >> 48);
}

/* Whether compact key KK stands for a pointer the compact array can hold. */
static inline int
tg_compact_ok(uint64_t kk)
{
    return (kk & TG_C_SIZE_MASK) == 0;
}

/* Hash of the block a compact word W stands for. */
static inline uint64_t
tg_compact_hash(uint64_t w)
{
    return tg_ptr_hash((uintptr_t)((w >> TG_C_SIZE_BITS) << 4));
}

/* ---- growth (cold, out of line: inlined, its registers and calls made every
 * insert pay a full prologue) ---- */

/* Grow S's compact array to twice its size (or the minimum); 0 or -1 (S
 * unchanged). */
static __attribute__((noinline, cold)) int
tg_compact_grow_unlocked(struct tg_shard *s)
{
    size_t old_cap = s->cslots != TG_C_NONE ? s->cmask + 1 : 0;
    size_t cap = old_cap ? old_cap * 2 : TG_C_MIN_CAP;
    uint64_t *slots = calloc(cap, sizeof(*slots));
    size_t i;

    if (slots == NULL)
        return -1;
    for (i = 0; i < old_cap; i++) {
        uint64_t w = s->cslots[i];
        size_t j;
        if (w == 0)
            continue;
        j = tg_compact_hash(w) & (cap - 1);
        while (slots[j] != 0)
            j = (j + 1) & (cap - 1);
        slots[j] = w;
    }
    if (old_cap)
        free(s->cslots);
    s->cslots = slots;
    s->cmask = cap - 1;
    s->climit = cap / TG_C_LOAD_DEN * TG_C_LOAD_NUM;
    return 0;
}

/* Make room for one more compact entry in S; 0, or -1 when the array is full and
 * cannot grow (an empty slot must always remain, or probes would not end). */
static __attribute__((noinline, cold)) int
tg_compact_make_room_unlocked(struct tg_shard *s)
{
    if (tg_compact_grow_unlocked(s) < 0 && s->cslots == TG_C_NONE)
        return -1;
    if (s->ccount + 1 > s->cmask)
        return -1;
    return 0;
}

/* The same for the wide array. */
static __attribute__((noinline, cold)) int
tg_wide_grow_unlocked(struct tg_shard *s)
{
    size_t old_cap = s->wslots ? s->wmask + 1 : 0;
    size_t cap = old_cap ? old_cap * 2 : TG_W_MIN_CAP;
    struct tg_slot *slots = calloc(cap, sizeof(*slots));
    size_t i;

    if (slots == NULL)
        return -1;
    for (i = 0; i < old_cap; i++) {
        uintptr_t k = s->wslots[i].key;
        size_t j;
        if (k == 0)
            continue;
        j = tg_ptr_hash(k) & (cap - 1);
        while (slots[j].key != 0)
            j = (j + 1) & (cap - 1);
        slots[j] = s->wslots[i];
    }
    free(s->wslots);
    s->wslots = slots;
    s->wmask = cap - 1;
    return 0;
}

static __attribute__((noinline, cold)) int
tg_wide_make_room_unlocked(struct tg_shard *s)
{
    if (tg_wide_grow_unlocked(s) < 0 && s->wslots == NULL)
        return -1;
    if (s->wcount + 1 > s->wmask)
        return -1;
    return 0;
}

/* ---- the compact array ---- */

/* Enter compact key KK (home H) with SIZE (below 2^TG_C_SIZE_BITS) in S,
 * replacing an entry for the same key. */
static inline void
tg_compact_insert_unlocked(struct tg_shard *s, uint64_t kk, uint64_t h, size_t size)
{
    uint64_t *slots;
    size_t i, mask;

    if (__builtin_expect(s->ccount >= s->climit, 0)
            && tg_compact_make_room_unlocked(s) < 0)
        return;
    slots = s->cslots;
    mask = s->cmask;
    i = h & mask;
    while (slots[i] != 0 && (slots[i] & TG_C_KEY_MASK) != kk)
        i = (i + 1) & mask;
    if (slots[i] == 0)
        s->ccount++;
    slots[i] = kk | size;
}

/* Remove compact key KK (home H) from S; returns 1 and its size word in *SIZE, or
 * 0. */
static inline int
tg_compact_remove_unlocked(struct tg_shard *s, uint64_t kk, uint64_t h, size_t *size)
{
    uint64_t *slots = s->cslots;
    size_t mask = s->cmask;
    size_t i = h & mask, j;
    uint64_t w;

    for (;;) {
        w = slots[i];
        if ((w & TG_C_KEY_MASK) == kk)
            break;
        if (w == 0)
            return 0;
        i = (i + 1) & mask;
    }
    *size = (size_t)(w & TG_C_SIZE_MASK);
    /* Backward-shift deletion: pull later members of the probe run into the hole
     * when their home slot does not lie cyclically in (hole, j]. */
    j = i;
    for (;;) {
        size_t home;
        j = (j + 1) & mask;
        w = slots[j];
        if (w == 0)
            break;
        home = tg_compact_hash(w) & mask;
        if ((i <= j) ? (home <= i || home > j) : (home <= i && home > j)) {
            slots[i] = w;
            i = j;
        }
    }
    slots[i] = 0;
    s->ccount--;
    return 1;
}

/* ---- the wide array ---- */

/* Remove P (hash H) from S's wide array; 1 and its word in *SIZE, or 0. */
static inline int
tg_wide_remove_unlocked(struct tg_shard *s, uintptr_t p, uint64_t h, size_t *size)
{
    struct tg_slot *slots = s->wslots;
    size_t mask = s->wmask;
    size_t i, j;

    if (slots == NULL)
        return 0;
    i = h & mask;
    while (slots[i].key != p) {
        if (slots[i].key == 0)
            return 0;
        i = (i + 1) & mask;
    }
    *size = slots[i].size;
    j = i;
    for (;;) {
        size_t home;
        j = (j + 1) & mask;
        if (slots[j].key == 0)
            break;
        home = tg_ptr_hash(slots[j].key) & mask;
        if ((i <= j) ? (home <= i || home > j) : (home <= i && home > j)) {
            slots[i] = slots[j];
            i = j;
        }
    }
    slots[i].key = 0;
    s->wcount--;
    return 1;
}

/* Enter P (hash H) with SIZE in S's wide array. */
static inline void
tg_wide_insert_unlocked(struct tg_shard *s, uintptr_t p, uint64_t h, size_t size)
{
    struct tg_slot *slot;
    size_t i;

    if ((s->wslots == NULL || (s->wcount + 1) * 2 > s->wmask + 1)
            && tg_wide_make_room_unlocked(s) < 0)
        return;
    i = h & s->wmask;
    slot = &s->wslots[i];
    while (slot->key != 0 && slot->key != p) {
        i = (i + 1) & s->wmask;
        slot = &s->wslots[i];
    }
    if (slot->key == 0) {
        slot->key = p;
        s->wcount++;
    }
    slot->size = size;
}

/* ---- the shard: pick the array ---- */

/* Enter P in S's wide array, dropping a stale compact entry for it first. */
static inline void
tg_shard_insert_wide_unlocked(struct tg_shard *s, uintptr_t p, uint64_t h, size_t size)
{
    uint64_t kk = tg_compact_key(p);
    size_t stale;

    if (s->ccount != 0 && tg_compact_ok(kk))
        tg_compact_remove_unlocked(s, kk, h, &stale);
    tg_wide_insert_unlocked(s, p, h, size);
}

/* Insert when the wide array is involved: P or SIZE does not fit a compact word,
 * or the wide array is not empty and may hold a stale entry for P.  Out of line,
 * so that the common path stays a leaf without a stack frame. */
static __attribute__((noinline)) void
tg_shard_insert_slow_unlocked(struct tg_shard *s, uintptr_t p, uint64_t h, size_t size)
{
    uint64_t kk = tg_compact_key(p);
    size_t stale;

    if (tg_compact_ok(kk) && (size >> TG_C_SIZE_BITS) == 0) {
        if (s->wcount != 0)
            tg_wide_remove_unlocked(s, p, h, &stale);
        tg_compact_insert_unlocked(s, kk, h, size);
        return;
    }
    tg_shard_insert_wide_unlocked(s, p, h, size);
}

/* Remove when the wide array is not empty: from the compact array if it has
 * entries and P there, else from the wide one (P is in at most one of them).
 * Out of line, see above. */
static __attribute__((noinline)) int
tg_shard_remove_slow_unlocked(struct tg_shard *s, uintptr_t p, uint64_t h, size_t *size)
{
    if (s->ccount != 0 && tg_compact_remove_unlocked(s, tg_compact_key(p), h, size))
        return 1;
    return tg_wide_remove_unlocked(s, p, h, size);
}

static inline void
tg_shard_insert_unlocked(struct tg_shard *s, uintptr_t p, uint64_t h, size_t size)
{
    uint64_t kk = tg_compact_key(p);

    /* Compact unless P is not 16-aligned below 2^48, SIZE does not fit the low
     * bits, or the wide array might hold P. */
    if (__builtin_expect(((kk & TG_C_SIZE_MASK) | (size >> TG_C_SIZE_BITS)
                          | s->wcount) != 0, 0)) {
        tg_shard_insert_slow_unlocked(s, p, h, size);
        return;
    }
    tg_compact_insert_unlocked(s, kk, h, size);
}

static inline int
tg_shard_remove_unlocked(struct tg_shard *s, uintptr_t p, uint64_t h, size_t *size)
{
    /* With accounting off nearly every block is compact and the wide array is
     * empty: one probe, also for a miss (a block from before enable()).  A
     * pointer the compact array cannot hold just misses there (tg_compact_key). */
    if (__builtin_expect(s->wcount != 0, 0))
        return tg_shard_remove_slow_unlocked(s, p, h, size);
    return tg_compact_remove_unlocked(s, tg_compact_key(p), h, size);
}

/* ---- the public functions ---- */

/* The raw table's path, apart so that the lock calls do not weigh on the GIL
 * table's (a leaf function without a stack frame). */
static __attribute__((noinline)) void
tg_shard_insert_locked(struct tg_shard *s, uintptr_t p, uint64_t h, size_t size)
{
    pthread_mutex_lock(&s->lock);
    tg_shard_insert_unlocked(s, p, h, size);
    pthread_mutex_unlock(&s->lock);
}

void
tg_ptrtable_insert(struct tg_ptrtable *t, void *ptr, size_t size)
{
    uintptr_t p = (uintptr_t)ptr;
    uint64_t h = tg_ptr_hash(p);
    struct tg_shard *s = tg_shard_of(t, h);

    if (t->locked)
        tg_shard_insert_locked(s, p, h, size);
    else
        tg_shard_insert_unlocked(s, p, h, size);
}

void
tg_ptrtable_insert_wide(struct tg_ptrtable *t, void *ptr, size_t size)
{
    uintptr_t p = (uintptr_t)ptr;
    uint64_t h = tg_ptr_hash(p);
    struct tg_shard *s = tg_shard_of(t, h);

    if (t->locked)
        pthread_mutex_lock(&s->lock);
    tg_shard_insert_wide_unlocked(s, p, h, size);
    if (t->locked)
        pthread_mutex_unlock(&s->lock);
}

/* The raw table's path (see tg_shard_insert_locked). */
static __attribute__((noinline)) int
tg_shard_remove_locked(struct tg_shard *s, uintptr_t p, uint64_t h, size_t *size)
{
    int found;
    pthread_mutex_lock(&s->lock);
    found = tg_shard_remove_unlocked(s, p, h, size);
    pthread_mutex_unlock(&s->lock);
    return found;
}

int
tg_ptrtable_remove(struct tg_ptrtable *t, void *ptr, size_t *size)
{
    uintptr_t p = (uintptr_t)ptr;
    uint64_t h = tg_ptr_hash(p);
    struct tg_shard *s = tg_shard_of(t, h);

    if (t->locked)
        return tg_shard_remove_locked(s, p, h, size);
    return tg_shard_remove_unlocked(s, p, h, size);
}

static void
tg_table_clear(struct tg_ptrtable *t)
{
    unsigned n;
    for (n = 0; n < TG_SHARDS; n++) {
        struct tg_shard *s = &t->shards[n];
        pthread_mutex_lock(&s->lock);
        if (s->cslots != TG_C_NONE)
            free(s->cslots);
        s->cslots = TG_C_NONE;
        s->cmask = 0;
        s->ccount = 0;
        s->climit = 0;
        free(s->wslots);
        s->wslots = NULL;
        s->wmask = 0;
        s->wcount = 0;
        pthread_mutex_unlock(&s->lock);
    }
}

void
tg_ptrtable_clear(void)
{
    tg_table_clear(&tg_ptrtable_raw);
    tg_table_clear(&tg_ptrtable_gil);
}

static void
tg_table_stats(struct tg_ptrtable *t, struct tg_ptrtable_stats *st)
{
    unsigned n;
    for (n = 0; n < TG_SHARDS; n++) {
        struct tg_shard *s = &t->shards[n];
        pthread_mutex_lock(&s->lock);
        st->compact += s->ccount;
        st->wide += s->wcount;
        st->bytes += (s->cslots != TG_C_NONE ? (s->cmask + 1) * sizeof(*s->cslots) : 0)
                     + (s->wslots ? (s->wmask + 1) * sizeof(*s->wslots) : 0);
        pthread_mutex_unlock(&s->lock);
    }
}

void
tg_ptrtable_stats(struct tg_ptrtable *t, struct tg_ptrtable_stats *st)
{
    st->compact = st->wide = st->bytes = 0;
    tg_table_stats(t, st);
}

size_t
tg_ptrtable_count(void)
{
    struct tg_ptrtable_stats raw, gil;
    tg_ptrtable_stats(&tg_ptrtable_raw, &raw);
    tg_ptrtable_stats(&tg_ptrtable_gil, &gil);
    return raw.compact + raw.wide + gil.compact + gil.wide;
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
