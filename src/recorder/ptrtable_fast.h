/*
 * ptrtable_fast.h - the pointer tables' layout and their common operations,
 * inline, for ptrtable.c and for the allocator hooks of the GIL domains.
 *
 * A block enters or leaves the GIL table on nearly every allocation of the
 * profiled program.  Through tg_ptrtable_insert/remove that was a call, a test
 * of the table's locking and a second hash of the shard; the hooks of the mem
 * and obj domains (alloc_hooks.c) instead use tg_ptrtable_gil_insert/remove
 * below, inlined, on the one table they can be given.  The growth and the wide
 * array stay out of line in ptrtable.c.  See ptrtable.h for the design.
 */
#ifndef TG_PTRTABLE_FAST_H
#define TG_PTRTABLE_FAST_H

#include "ptrtable.h"
#include "ptrpage.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

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

/* The wide array's filter: a large block (or, with accounting on, a block with
 * a site) must not send every other block's insert and remove to the wide
 * array too.  A block whose filter bit is clear is not there: its insert needs
 * no search for a stale wide entry and its remove looks in the compact array
 * only.  512 bits: one cache line. */
#define TG_WFILTER_BITS 512

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
    size_t wcount;         /* entries in wslots */
    uint64_t wfilter[TG_WFILTER_BITS / 64];  /* a bit per wide entry's filter hash
                              (tg_wfilter_bit): clear = not in the wide array;
                              all cleared when wcount drops to 0 */
} __attribute__((aligned(128)));  /* shards' locks on separate cache lines, and
                                     a shift, not a multiply, to index them */

struct tg_ptrtable {
    int locked;                        /* take the shard locks (raw domain); const */
    int unmarked;                      /* GIL table only (GIL): set when a block
                                          of a page-map address (tg_ptrpage_fits_addr)
                                          went to the hash without its mark: no
                                          map reserved, or one that does not
                                          cover the address (valgrind, TSan).  A
                                          page map miss then looks in the hash
                                          too.  An address a reserved map covers
                                          is always marked (its entry exists: the
                                          set cannot fail), so an entry the map
                                          finds empty is nowhere else, whatever
                                          this flag; cleared by clear */
    uint64_t hfilter[TG_WFILTER_BITS / 64];  /* GIL table only (GIL): a bit per
                                          entry of its hash (tg_wfilter_bit), all
                                          cleared when the hash empties; clear =
                                          the block is not in the hash */
    struct tg_shard shards[TG_SHARDS];
};

/* Hash of a pointer's 16-byte granule: the same for both arrays, so one hash
 * picks the shard and the home slot in each. */
static inline uint64_t
tg_ptr_hash(uintptr_t p)
{
    uint64_t h = ((uint64_t)p >> 4) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

/* The filter bit of hash H: bits 40..48, apart from those that pick the shard
 * (the top 4) and the home slot (the low ones). */
static inline unsigned
tg_wfilter_bit(uint64_t h)
{
    return (unsigned)(h >> 40) & (TG_WFILTER_BITS - 1);
}

/* Whether the wide array of S might hold the block of hash H. */
static inline int
tg_wfilter_test(const struct tg_shard *s, uint64_t h)
{
    unsigned b = tg_wfilter_bit(h);
    return (int)((s->wfilter[b >> 6] >> (b & 63)) & 1);
}

/* The shard of hash H in T.  The shards spread the raw table's locks; the GIL
 * table takes no lock, so it keeps everything in its first shard: the hooks
 * then find it at a fixed address (a shard lookup was a tenth of a hook's
 * table work). */
static inline struct tg_shard *
tg_shard_of(struct tg_ptrtable *t, uint64_t h)
{
    if (t == &tg_ptrtable_gil)
        return &t->shards[0];
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

/* Out of line (ptrtable.c): make room for one more compact entry in S (0, or -1
 * when the array is full and cannot grow); insert or remove when the wide array
 * is involved. */
int tg_compact_make_room_unlocked(struct tg_shard *s);
void tg_shard_insert_slow_unlocked(struct tg_shard *s, uintptr_t p, uint64_t h, size_t size);
int tg_shard_remove_slow_unlocked(struct tg_shard *s, uintptr_t p, uint64_t h, size_t *size);

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
     * when their home slot does not lie cyclically in (hole, j], i.e. when they
     * are at least as far from home as from the hole (two masked differences,
     * fewer instructions than testing the wrap-around case apart). */
    j = i;
    for (;;) {
        size_t home;
        j = (j + 1) & mask;
        w = slots[j];
        if (w == 0)
            break;
        home = tg_compact_hash(w) & mask;
        if (((j - home) & mask) >= ((j - i) & mask)) {
            slots[i] = w;
            i = j;
        }
    }
    slots[i] = 0;
    s->ccount--;
    return 1;
}

static inline void
tg_shard_insert_unlocked(struct tg_shard *s, uintptr_t p, uint64_t h, size_t size)
{
    uint64_t kk = tg_compact_key(p);

    /* Compact unless P is not 16-aligned below 2^48, SIZE does not fit the low
     * bits, or the wide array might hold P. */
    if (__builtin_expect(((kk & TG_C_SIZE_MASK) | (size >> TG_C_SIZE_BITS)
                          | (uint64_t)tg_wfilter_test(s, h)) != 0, 0)) {
        tg_shard_insert_slow_unlocked(s, p, h, size);
        return;
    }
    tg_compact_insert_unlocked(s, kk, h, size);
}

static inline int
tg_shard_remove_unlocked(struct tg_shard *s, uintptr_t p, uint64_t h, size_t *size)
{
    /* With accounting off nearly every block is compact and its filter bit is
     * clear: one probe, also for a miss (a block from before enable()).  A
     * pointer the compact array cannot hold just misses there (tg_compact_key). */
    if (__builtin_expect(tg_wfilter_test(s, h), 0))
        return tg_shard_remove_slow_unlocked(s, p, h, size);
    return tg_compact_remove_unlocked(s, tg_compact_key(p), h, size);
}

/* ---- the GIL table: the page map first (ptrpage.h), the hash for the rest ----
 * Where a block's address fits the page map (16-aligned, below 2^47) the page
 * map says where its entry is: its word, TG_PP_MARK when the hash holds it (a
 * word too large for the map, or accounting's wide words), or nothing.  So the
 * common insert and remove never compute a hash nor test a filter (with
 * sampled mode's wide entries live, the filter's 512 bits sent one
 * allocation in seven to a useless hash probe).  Other addresses, and every
 * address once a mark could not be set (tg_ptrtable_gil.unmarked), go by the
 * hash's filter as before. */

/* Sampled mode's fast paths in the GIL domains (hook_count.h
 * tg_hook_gil_fast_alloc and _free, alloc_hooks.c) run on a thread whose
 * busy bits and copy of its accounting state's generation (tg_tls.busy_gen)
 * equal this key: set by tg_hooks_install from accounting's
 * tg_acct_light_gen (alloc_hooks.c tg_hook_fast_word) once the page map's
 * arrays are reserved (tg_ptrpage_reserve), while no block went to the hash
 * unmarked; TG_GIL_FAST_OFF (busy bits all 1: no thread) otherwise: at uninstall, by
 * tg_ptrtable_clear, when a block goes to the hash unmarked (the malloc's
 * fast path does not look there), and in a forked child (accounting stops
 * there).  So one compare stands for the busy bits, the hooks' mode,
 * accounting's sampled mode, the thread's state being current, the map's
 * reservation and the unmarked flag (six tests per call before).  Written and read with the GIL (the
 * child's handler runs before any other thread exists); relaxed atomic. */
#define TG_GIL_FAST_OFF UINT64_MAX
extern _Atomic uint64_t tg_gil_fast_key;

/* Out of line (ptrtable.c): enter P with WORD in the GIL table's hash (in a wide
 * entry if WIDE), marking it in the page map and dropping a page map entry for
 * it; insert P with WORD wherever it goes; remove P from the hash (and its
 * mark), 1 and its word in *WORD or 0. */
void tg_gil_hash_insert(uintptr_t p, size_t word, int wide);
void tg_gil_insert_slow(uintptr_t p, size_t word);
int tg_gil_hash_remove(uintptr_t p, size_t *word);

/* Whether the GIL table's hash might hold P. */
static inline int
tg_gil_hash_maybe(uintptr_t p)
{
    unsigned b = tg_wfilter_bit(tg_ptr_hash(p));
    return (int)((tg_ptrtable_gil.hfilter[b >> 6] >> (b & 63)) & 1);
}

/*
 * The GIL table's newest block, held apart from the page map and the hash.
 * Under a profile function (3.8-3.11) the interpreter makes a frame object for
 * every call it reports and frees it when the call returns; a call that makes
 * nothing itself (a leaf) frees it before anything else is allocated, and so
 * do the many temporaries a program frees at once.  Their entries then never
 * reach the map: an insert only moves the previous newest block into the map,
 * and a remove of the newest block is one compare (the map's three dependent
 * loads, and the churn of an entry page emptied and refilled by one frame
 * object, were half of the allocator hooks' instructions on call_heavy).  P is
 * 0 when empty; a block is in at most one of the newest slot, the map and the
 * hash.  Guarded by the GIL.
 */
struct tg_gil_newest {
    uintptr_t p;    /* the block, or 0 */
    size_t word;    /* its word, as given to tg_ptrtable_gil_insert: never
                       SIZE_MAX (tg_ptrtable_insert sends that word to the
                       hash; the hooks' sizes are at most PY_SSIZE_T_MAX) */
};
extern struct tg_gil_newest tg_gil_newest;

/* The common case of entering P with WORD (GIL held): 1 when P is entered
 * in the page map, 0 having done nothing (P goes to tg_gil_insert_slow).  An
 * empty entry that the map covers means P is in neither the map nor the hash
 * (struct tg_ptrtable's unmarked): no other test.  Apart from tg_ptrtable_gil_enter for a hook
 * that makes the rest a tail call (alloc_hooks.c tg_hook_malloc_gil_plain_of). */
static inline __attribute__((always_inline)) int
tg_ptrtable_gil_enter_fast(uintptr_t p, size_t size)
{
    uint16_t *e;
    uint64_t g;

    if (__builtin_expect(size - 1 < TG_PP_WORD_MAX, 1)
            && tg_ptrpage_find(&tg_ptrpage_gil, p, &g)
            && __builtin_expect(*(e = tg_ptrpage_entry(&tg_ptrpage_gil, g)) == 0, 1)) {
        tg_ptrpage_fill(&tg_ptrpage_gil, e, g, size);
        return 1;
    }
    return 0;
}

/* Enter P with WORD in the page map, or the hash if it does not fit there (GIL
 * held): inline, the common case, a block whose address the map covers with
 * no entry there. */
static inline __attribute__((always_inline)) void
tg_ptrtable_gil_enter(uintptr_t p, size_t size)
{
    if (__builtin_expect(!tg_ptrtable_gil_enter_fast(p, size), 0))
        tg_gil_insert_slow(p, size);
}

/* Move the newest block, if any, into the map or the hash (GIL held): before
 * the table is read as a whole (stats) or a block is entered elsewhere. */
static inline void
tg_gil_newest_flush(void)
{
    uintptr_t q = tg_gil_newest.p;
    if (q != 0) {
        tg_gil_newest.p = 0;
        tg_ptrtable_gil_enter(q, tg_gil_newest.word);
    }
}

/* tg_ptrtable_insert(&tg_ptrtable_gil, PTR, SIZE), inline (GIL held): PTR
 * becomes the newest block, the previous one goes to the map.  A newest
 * block at PTR already (its free was not seen) is replaced, as the map would
 * replace it; a stale map entry for PTR is replaced when PTR moves there. */
static inline __attribute__((always_inline)) void
tg_ptrtable_gil_insert(void *ptr, size_t size)
{
    uintptr_t p = (uintptr_t)ptr;
    uintptr_t q = tg_gil_newest.p;
    size_t qw = tg_gil_newest.word;

    tg_gil_newest.p = p;
    tg_gil_newest.word = size;
    if (q != 0 && q != p)
        tg_ptrtable_gil_enter(q, qw);
}

/* The GIL table's common removes, inline (GIL held): block P is the newest
 * one or has its word in the page map: its entry is removed and its word + 1
 * returned.  0 having done nothing: P is in the hash (and *MARKED, when MARKED
 * is not NULL, set to 1 if the page map marks it so) or nowhere.  The word
 * comes back as the value, so that a caller that needs nothing else (plain
 * mode's free hook, alloc_hooks.c) keeps no local's address and can end in a
 * tail call; tg_ptrtable_gil_remove below is this plus the hash. */
static inline __attribute__((always_inline)) size_t
tg_ptrtable_gil_take(uintptr_t p, int *marked)
{
    uint16_t *e;
    uint64_t g;
    unsigned w;

    if (p == tg_gil_newest.p) {  /* its word is never SIZE_MAX: + 1 is not 0 */
        tg_gil_newest.p = 0;
        return tg_gil_newest.word + 1;
    }
    if (__builtin_expect(!tg_ptrpage_find(&tg_ptrpage_gil, p, &g), 0))
        return 0;
    e = tg_ptrpage_entry(&tg_ptrpage_gil, g);
    w = *e;
    if (__builtin_expect(w - 1u >= TG_PP_MARK - 1u, 0)) {  /* no entry, or a mark */
        if (marked != NULL)
            *marked = w == TG_PP_MARK;
        return 0;
    }
    tg_ptrpage_empty_of(&tg_ptrpage_gil, e, g, w);
    return (size_t)w + 1;  /* the callers' - 1 folds into it */
}

/* tg_ptrtable_remove(&tg_ptrtable_gil, PTR, SIZE), inline (GIL held). */
static inline __attribute__((always_inline)) int
tg_ptrtable_gil_remove(void *ptr, size_t *size)
{
    uintptr_t p = (uintptr_t)ptr;
    int marked = 0;
    size_t w1 = tg_ptrtable_gil_take(p, &marked);

    if (__builtin_expect(w1 != 0, 1)) {
        *size = w1 - 1;
        return 1;
    }
    if (marked)
        return tg_gil_hash_remove(p, size);
    /* Not in the page map: in the hash only if P cannot be marked there. */
    if ((!tg_ptrpage_fits_addr(p) || tg_ptrtable_gil.unmarked) && tg_gil_hash_maybe(p))
        return tg_gil_hash_remove(p, size);
    return 0;
}

#pragma GCC visibility pop

#endif /* TG_PTRTABLE_FAST_H */
