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
#include "ptrtable_fast.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* The arrays' memory: anonymous mappings of their own, outside the C
 * library's heap.  From malloc, an array lands in the arena of whichever thread
 * grew it, among the program's blocks, and changes how glibc reuses and trims
 * that heap: with native=True, numpy_heavy's four threads took a median 195 K
 * page faults per run against 158 K with the arrays mapped (17 alternated
 * pairs, bench/RESULTS.md), where the unprofiled program takes about 100 K.
 * They are few and only grow by doubling, so the system calls are rare.
 * N elements of EACH bytes, zeroed; NULL when out of memory. */
static void *
tg_arr_map(size_t n, size_t each)
{
    void *p = mmap(NULL, n * each, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Release an array from tg_arr_map of BYTES bytes (P may be NULL). */
static void
tg_arr_unmap(void *p, size_t bytes)
{
    if (p != NULL)
        munmap(p, bytes);
}

/* The compact array of a shard that has none: one empty slot that is only ever
 * read, so that a remove needs no NULL test (an insert first grows, climit 0). */
static const uint64_t tg_c_none[1];
#define TG_C_NONE ((uint64_t *)tg_c_none)

#define TG_S { PTHREAD_MUTEX_INITIALIZER, TG_C_NONE, 0, 0, 0, NULL, 0, 0, { 0 } }
#define TG_SHARDS_INIT { TG_S, TG_S, TG_S, TG_S, TG_S, TG_S, TG_S, TG_S, \
                         TG_S, TG_S, TG_S, TG_S, TG_S, TG_S, TG_S, TG_S }
/* Raw domain: each shard's fields are guarded by its own lock. */
struct tg_ptrtable tg_ptrtable_raw = { 1, 0, { 0 }, TG_SHARDS_INIT };
/* Mem and obj domains: guarded by the GIL. */
struct tg_ptrtable tg_ptrtable_gil = { 0, 0, { 0 }, TG_SHARDS_INIT };
/* Its newest block (ptrtable_fast.h); the GIL. */
struct tg_gil_newest tg_gil_newest;
_Atomic uint64_t tg_gil_fast_key = TG_GIL_FAST_OFF;
#undef TG_S
#undef TG_SHARDS_INIT

/* ---- growth (cold, out of line: inlined, its registers and calls made every
 * insert pay a full prologue) ---- */

/* Grow S's compact array to twice its size (or the minimum); 0 or -1 (S
 * unchanged). */
static __attribute__((noinline, cold)) int
tg_compact_grow_unlocked(struct tg_shard *s)
{
    size_t old_cap = s->cslots != TG_C_NONE ? s->cmask + 1 : 0;
    size_t cap = old_cap ? old_cap * 2 : TG_C_MIN_CAP;
    uint64_t *slots = tg_arr_map(cap, sizeof(*slots));
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
        tg_arr_unmap(s->cslots, old_cap * sizeof(*s->cslots));
    s->cslots = slots;
    s->cmask = cap - 1;
    s->climit = cap / TG_C_LOAD_DEN * TG_C_LOAD_NUM;
    return 0;
}

/* Make room for one more compact entry in S; 0, or -1 when the array is full and
 * cannot grow (an empty slot must always remain, or probes would not end). */
__attribute__((noinline, cold)) int
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
    struct tg_slot *slots = tg_arr_map(cap, sizeof(*slots));
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
    tg_arr_unmap(s->wslots, old_cap * sizeof(*s->wslots));
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
    if (--s->wcount == 0)
        memset(s->wfilter, 0, sizeof s->wfilter);
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
        unsigned b = tg_wfilter_bit(h);
        slot->key = p;
        s->wcount++;
        s->wfilter[b >> 6] |= UINT64_C(1) << (b & 63);
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
 * or the wide array may hold a stale entry for P (its filter bit is set).  Out of line,
 * so that the common path stays a leaf without a stack frame. */
__attribute__((noinline)) void
tg_shard_insert_slow_unlocked(struct tg_shard *s, uintptr_t p, uint64_t h, size_t size)
{
    uint64_t kk = tg_compact_key(p);
    size_t stale;

    if (tg_compact_ok(kk) && (size >> TG_C_SIZE_BITS) == 0) {
        if (tg_wfilter_test(s, h))
            tg_wide_remove_unlocked(s, p, h, &stale);
        tg_compact_insert_unlocked(s, kk, h, size);
        return;
    }
    tg_shard_insert_wide_unlocked(s, p, h, size);
}

/* Remove when the wide array may hold P (its filter bit is set): from the
 * compact array if it has
 * entries and P there, else from the wide one (P is in at most one of them).
 * Out of line, see above. */
__attribute__((noinline)) int
tg_shard_remove_slow_unlocked(struct tg_shard *s, uintptr_t p, uint64_t h, size_t *size)
{
    if (s->ccount != 0 && tg_compact_remove_unlocked(s, tg_compact_key(p), h, size))
        return 1;
    return tg_wide_remove_unlocked(s, p, h, size);
}

/* ---- the GIL table's hash side (the page map holds the rest) ---- */

__attribute__((noinline)) void
tg_gil_hash_insert(uintptr_t p, size_t word, int wide)
{
    struct tg_shard *s = &tg_ptrtable_gil.shards[0];
    uint64_t h = tg_ptr_hash(p);
    unsigned b = tg_wfilter_bit(h);
    uint64_t g;

    if (tg_ptrpage_fits_addr(p)) {
        /* One entry per address: a word in the page map gives way to the mark
         * (a mark already there: the hash's insert replaces its entry).  The
         * set fails only where the map does not cover P, so no word is left. */
        if (!tg_ptrpage_find(&tg_ptrpage_gil, p, &g)
                || *tg_ptrpage_entry(&tg_ptrpage_gil, g) != TG_PP_MARK) {
            if (tg_ptrpage_set(&tg_ptrpage_gil, p, TG_PP_MARK) == 0) {
                tg_ptrpage_gil.marks++;
            } else {
                tg_ptrtable_gil.unmarked = 1;
                atomic_store_explicit(&tg_gil_fast_key, TG_GIL_FAST_OFF, memory_order_relaxed);
            }
        }
    }
    if (wide)
        tg_shard_insert_wide_unlocked(s, p, h, word);
    else
        tg_shard_insert_unlocked(s, p, h, word);
    tg_ptrtable_gil.hfilter[b >> 6] |= UINT64_C(1) << (b & 63);
}

__attribute__((noinline)) int
tg_gil_hash_remove(uintptr_t p, size_t *word)
{
    struct tg_shard *s = &tg_ptrtable_gil.shards[0];
    uint16_t *e;
    uint64_t g;
    int found;

    if (tg_ptrpage_fits_addr(p) && tg_ptrpage_find(&tg_ptrpage_gil, p, &g)
            && *(e = tg_ptrpage_entry(&tg_ptrpage_gil, g)) == TG_PP_MARK) {
        tg_ptrpage_gil.marks--;
        tg_ptrpage_empty(&tg_ptrpage_gil, e, g);
    }
    found = tg_shard_remove_unlocked(s, p, tg_ptr_hash(p), word);
    if (found && s->ccount == 0 && s->wcount == 0)
        memset(tg_ptrtable_gil.hfilter, 0, sizeof tg_ptrtable_gil.hfilter);
    return found;
}

/* Insert P with WORD in the GIL table when tg_ptrtable_gil_insert's common case
 * does not hold: P has an entry already (a word: replaced; a mark: the hash's
 * entry dropped), the map is not reserved yet or does not cover P, WORD or P
 * do not fit the page map, or some block went to the hash unmarked. */
__attribute__((noinline)) void
tg_gil_insert_slow(uintptr_t p, size_t word)
{
    uint64_t g;
    size_t stale;

    if (tg_ptrpage_fits(p, word)) {
        if ((tg_ptrpage_find(&tg_ptrpage_gil, p, &g)
                    && *tg_ptrpage_entry(&tg_ptrpage_gil, g) == TG_PP_MARK)
                || (tg_ptrtable_gil.unmarked && tg_gil_hash_maybe(p)))
            tg_gil_hash_remove(p, &stale);
        if (tg_ptrpage_set(&tg_ptrpage_gil, p, word) == 0)
            return;
    }
    tg_gil_hash_insert(p, word, 0);
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
    uint64_t h;
    struct tg_shard *s;

    if (t == &tg_ptrtable_gil) {
        if (__builtin_expect(size == SIZE_MAX, 0)) {
            /* Not in the newest slot, whose word + 1 tg_ptrtable_gil_take
             * returns (0 would say "not here"). */
            if (tg_gil_newest.p == p)
                tg_gil_newest.p = 0;
            tg_gil_insert_slow(p, size);
            return;
        }
        tg_ptrtable_gil_insert(ptr, size);
        return;
    }
    h = tg_ptr_hash(p);
    s = tg_shard_of(t, h);
    if (t->locked)
        tg_shard_insert_locked(s, p, h, size);
    else
        tg_shard_insert_unlocked(s, p, h, size);
}

void
tg_ptrtable_insert_wide(struct tg_ptrtable *t, void *ptr, size_t size)
{
    uintptr_t p = (uintptr_t)ptr;
    uint64_t h;
    struct tg_shard *s;

    if (t == &tg_ptrtable_gil) {
        if (tg_gil_newest.p == p)
            tg_gil_newest.p = 0;  /* one entry per address */
        tg_gil_hash_insert(p, size, 1);
        return;
    }
    h = tg_ptr_hash(p);
    s = tg_shard_of(t, h);
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
    uint64_t h;
    struct tg_shard *s;

    if (t == &tg_ptrtable_gil)
        return tg_ptrtable_gil_remove(ptr, size);
    h = tg_ptr_hash(p);
    s = tg_shard_of(t, h);
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
            tg_arr_unmap(s->cslots, (s->cmask + 1) * sizeof(*s->cslots));
        s->cslots = TG_C_NONE;
        s->cmask = 0;
        s->ccount = 0;
        s->climit = 0;
        tg_arr_unmap(s->wslots, s->wslots ? (s->wmask + 1) * sizeof(*s->wslots) : 0);
        s->wslots = NULL;
        s->wmask = 0;
        s->wcount = 0;
        memset(s->wfilter, 0, sizeof s->wfilter);
        pthread_mutex_unlock(&s->lock);
    }
}

void
tg_ptrtable_clear(void)
{
    tg_table_clear(&tg_ptrtable_raw);
    tg_gil_newest.p = 0;
    tg_table_clear(&tg_ptrtable_gil);
    memset(tg_ptrtable_gil.hfilter, 0, sizeof tg_ptrtable_gil.hfilter);
    atomic_store_explicit(&tg_gil_fast_key, TG_GIL_FAST_OFF, memory_order_relaxed);
    tg_ptrtable_gil.unmarked = 0;
    tg_ptrpage_clear(&tg_ptrpage_gil);
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
    st->compact = st->wide = st->paged = st->bytes = 0;
    if (t == &tg_ptrtable_gil)
        tg_gil_newest_flush();  /* counted where it belongs */
    tg_table_stats(t, st);
    if (t == &tg_ptrtable_gil) {
        size_t entries, bytes;

        if (tg_ptrpage_walk(&tg_ptrpage_gil, &entries, &bytes) == 0 && entries >= tg_ptrpage_gil.marks)
            st->paged = entries - tg_ptrpage_gil.marks;
        st->bytes += bytes;
    }
}

size_t
tg_ptrtable_count(void)
{
    struct tg_ptrtable_stats raw, gil;
    tg_ptrtable_stats(&tg_ptrtable_raw, &raw);
    tg_ptrtable_stats(&tg_ptrtable_gil, &gil);
    return raw.compact + raw.wide + gil.compact + gil.wide + gil.paged;
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
