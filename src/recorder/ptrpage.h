/*
 * ptrpage.h - the GIL table's page map: the size word of each small block,
 * found by its address.
 *
 * A hash table scatters neighbouring blocks over the whole table: once the
 * table outgrows the caches, nearly every allocation and free of the profiled
 * program paid a cache miss for its entry (84% of the allocation hook's
 * samples on stdlib_mix sat on that one load).  Allocators hand out
 * neighbouring blocks one after the other (pymalloc fills a pool in order) and
 * programs free together what they allocated together, so the page map keeps
 * entries by address: one flat array of 16-bit entries, one per 16-byte
 * granule of the address space, reserved once (address space only, as
 * AddressSanitizer's shadow) and backed by memory only where entries are
 * written:
 *
 *   word1[p >> 4]       the block's word (0: none)
 *
 * so a lookup is one load at an address computed from P alone.  (Before, a
 * node array and entry pages of 256 entries: three dependent loads and two
 * tests a lookup, 19 of a sampled malloc's 55 instructions.)  The array is a
 * shadow of the address space in pages of 4 KiB of entries (TG_PP_SPAGE
 * granules, 32 KiB of heap); each has a count of its entries (NEG: minus the
 * count, so that the first entry's fill borrows and the last one's empty
 * carries, the one flag the fast paths test).  A shadow page that gets its
 * first entry is listed (touched); one whose last entry goes stays as it is
 * (idle): a program's heap pages empty and fill again all the time.  When a
 * page not listed gets its first entry while more listed pages are idle than
 * busy (and than TG_PP_IDLE_MIN), tg_ptrpage_trim gives the idle ones' memory
 * back (madvise MADV_DONTNEED: they read as zeros again, which is what they
 * hold), so the map's memory stays within twice what its entries' pages need:
 * 4 KiB per 32 KiB of address space that holds blocks, 12.5% of a dense
 * small-block heap.
 *
 * The reservation covers addresses below 2^TG_PP_ADDR_BITS (16 TiB of address
 * space for the entries, and 20 GiB for the counts and flags), none of it
 * committed (MAP_NORESERVE) nor dumped in a core (MADV_DONTDUMP).  Where a
 * tool caps one mapping's size it covers the largest range below that it can,
 * down to 2^TG_PP_MIN_BITS (valgrind allows 32 GiB, ThreadSanitizer 1 TiB);
 * under a limit of the process's address space (ulimit -v) or a kernel that
 * charges such mappings to its commit limit (vm.overcommit_memory 2) none is
 * taken (the program's own room first), and where none is had nothing is
 * entered: every block goes to the hash (exact, slower).  A block outside the
 * range covered is not entered either (tg_ptrpage_set fails).
 *
 * Only 16-aligned blocks below 2^47 whose word is 1 to TG_PP_WORD_MAX go
 * here (with accounting off, nearly every block of the mem and obj domains);
 * ptrtable.c keeps the rest in the GIL table's hash and keeps a pointer in at
 * most one of the two.  A block of such an address that the hash holds has
 * TG_PP_MARK here instead, so that the page map alone says where any of them
 * is (ptrtable_fast.h).
 *
 * Everything is guarded by the GIL (the mem and obj domains are called with
 * it); the map's own memory comes from mmap and malloc, never from the hooked
 * domains.
 */
#ifndef TG_PTRPAGE_H
#define TG_PTRPAGE_H

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

#define TG_PP_ADDR_BITS 47       /* addresses a map may cover: user space */
#define TG_PP_MIN_BITS 36        /* the smallest range worth a map */
#define TG_PP_SPAGE_SHIFT 11     /* granules per shadow page: 4 KiB of entries */
#define TG_PP_SPAGE_BYTES (UINT64_C(2) << TG_PP_SPAGE_SHIFT)
#define TG_PP_WORD_MAX 0xFFFEu   /* entries hold a word of 1 to this (0:
                                    none, so a word 0 goes to the hash) ... */
#define TG_PP_MARK 0xFFFFu       /* ... or this mark: the block's entry is in the
                                    GIL table's hash (ptrtable_fast.h) */
#define TG_PP_IDLE_MIN 64        /* idle shadow pages always allowed (256 KiB);
                                    above, at most as many as the busy ones */

struct tg_ptrpage {
    uint16_t *word1;               /* the entries, glimit of them; NULL until
                                      tg_ptrpage_reserve */
    uint64_t glimit;               /* granules covered (2^(bits - 4)); 0 while
                                      nothing is reserved, so that every lookup
                                      misses */
    uint32_t *neg;                 /* per shadow page: minus its entries
                                      (mod 2^32; marks included) */
    uint8_t *listed;               /* per shadow page: 1 when in touched */
    uint32_t *touched;             /* the listed shadow pages, by index: pages
                                      of them */
    size_t touched_cap;
    size_t span;                   /* bytes reserved at word1 (all three arrays) */
    size_t marks;                  /* entries that are TG_PP_MARK */
    size_t pages;                  /* listed shadow pages (idle included): the
                                      length of touched */
    size_t idle;                   /* listed shadow pages without an entry */
    size_t trims;                  /* tg_ptrpage_trim runs that gave pages back */
    int unmapped;                  /* no reservation could be had: no retry
                                      (every block goes to the hash) */
    int keep;                      /* no trim: the system's pages are not 4 KiB */
};

/* The GIL table's map (GIL). */
extern struct tg_ptrpage tg_ptrpage_gil;

/* Whether a page map may hold an entry (a word or a mark) for block P:
 * 16-aligned, below 2^TG_PP_ADDR_BITS (the range a map covers may be smaller:
 * tg_ptrpage_set then fails). */
static inline int
tg_ptrpage_fits_addr(uintptr_t p)
{
    return (((uint64_t)p & 15) | ((uint64_t)p >> TG_PP_ADDR_BITS)) == 0;
}

/* Whether block P with WORD can be entered in a page map. */
static inline int
tg_ptrpage_fits(uintptr_t p, size_t word)
{
    return tg_ptrpage_fits_addr(p) && word - 1 < TG_PP_WORD_MAX;
}

/* Reserve M's arrays now if they are not: 0, or -1 when no range can be had
 * (not retried).  They stay until tg_ptrpage_clear. */
int tg_ptrpage_reserve(struct tg_ptrpage *m);
/* Out of line, the rarest side of a fill: shadow page SP, not listed, got
 * its first entry (listed; may trim first). */
void tg_ptrpage_list(struct tg_ptrpage *m, uint64_t sp);

/* The rare side of a fill: shadow page SP got its first entry.  A listed
 * page (the common case: a heap page that emptied and fills again) is one
 * idle page fewer, inline (a call to do that cost a fill about 20
 * instructions more on each such turn, 0.86 M a step of alloc_heavy on
 * 3.12); else tg_ptrpage_list. */
static inline void
tg_ptrpage_busy(struct tg_ptrpage *m, uint64_t sp)
{
    if (__builtin_expect(m->listed[sp], 1)) {
        m->idle--;
        return;
    }
    tg_ptrpage_list(m, sp);
}

/* Give the memory of every idle shadow page back (out of line; done by
 * tg_ptrpage_list when more are idle than busy). */
void tg_ptrpage_trim(struct tg_ptrpage *m);

/* Whether M has an entry for block P, with P's granule number in *G (its
 * entry: tg_ptrpage_entry); 0 when M reserves nothing (yet), or P lies
 * outside what it covers or is not 16-aligned.  P's granule number with P's
 * low 4 bits rotated to the top is below the granules covered exactly when P
 * fits: one compare for the alignment and the range.  (A test, not a NULL
 * pointer: the callers then test no pointer the compiler cannot prove
 * non-NULL.) */
static inline int
tg_ptrpage_find(const struct tg_ptrpage *m, uintptr_t p, uint64_t *g)
{
    *g = ((uint64_t)p >> 4) | ((uint64_t)p << 60);
    return *g < m->glimit;
}

/* The entry of granule G, which tg_ptrpage_find found in M. */
static inline uint16_t *
tg_ptrpage_entry(const struct tg_ptrpage *m, uint64_t g)
{
    return &m->word1[g];
}

/* Take 1 from the count at C: 1 when it was 0 (the borrow: its shadow page's
 * first entry).  On x86-64 a subtract from memory and a jump on carry (C's
 * own spelling of the test took a load, a subtract, a store and the jump);
 * elsewhere, and under ThreadSanitizer (which does not see into asm), C. */
static inline __attribute__((always_inline)) int
tg_ptrpage_dec(uint32_t *c)
{
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__) \
    && ((defined(__clang__) && __clang_major__ >= 11) || (!defined(__clang__) && __GNUC__ >= 11))
    __asm__ goto("subl $1, %0\n\tjc %l[borrow]" : "+m"(*c) : : "cc" : borrow);
    return 0;
borrow:
    return 1;
#else
    return (*c)-- == 0;
#endif
}

/* Enter WORD (1 to TG_PP_WORD_MAX) at E, the entry of granule G in M
 * (tg_ptrpage_find), which held none.  1 when its shadow page got its first
 * entry: the caller then calls tg_ptrpage_busy(M, G >> TG_PP_SPAGE_SHIFT)
 * (apart, so that a hook can make it a tail call and keep no register for
 * after it). */
static inline __attribute__((always_inline)) int
tg_ptrpage_fill_first(struct tg_ptrpage *m, uint16_t *e, uint64_t g, size_t word)
{
    *e = (uint16_t)word;
    return __builtin_expect(tg_ptrpage_dec(&m->neg[g >> TG_PP_SPAGE_SHIFT]), 0);
}

/* tg_ptrpage_fill_first and the call it may ask for. */
static inline __attribute__((always_inline)) void
tg_ptrpage_fill(struct tg_ptrpage *m, uint16_t *e, uint64_t g, size_t word)
{
    if (tg_ptrpage_fill_first(m, e, g, word))
        tg_ptrpage_busy(m, g >> TG_PP_SPAGE_SHIFT);
}

/* Add 1 to the count at C: 1 when it becomes 0 (the carry: its shadow
 * page's last entry went).  As tg_ptrpage_dec: on x86-64 an add to memory
 * and a jump (C's spelling made GCC compute the count's address into a
 * register first); elsewhere, and under ThreadSanitizer, C. */
static inline __attribute__((always_inline)) int
tg_ptrpage_inc(uint32_t *c)
{
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__) \
    && ((defined(__clang__) && __clang_major__ >= 11) || (!defined(__clang__) && __GNUC__ >= 11))
    __asm__ goto("addl $1, %0\n\tjc %l[carry]" : "+m"(*c) : : "cc" : carry);
    return 0;
carry:
    return 1;
#else
    return ++*c == 0;
#endif
}

/* Remove the entry at E, granule G's in M (not empty).  No call: a shadow
 * page left without an entry stays, idle (a listed one counted so; a call
 * would make the free hook, a leaf, save registers on every call). */
static inline __attribute__((always_inline)) void
tg_ptrpage_empty(struct tg_ptrpage *m, uint16_t *e, uint64_t g)
{
    *e = 0;
    if (__builtin_expect(tg_ptrpage_inc(&m->neg[g >> TG_PP_SPAGE_SHIFT]), 0))
        m->idle += m->listed[g >> TG_PP_SPAGE_SHIFT];
}

/* Enter block P (tg_ptrpage_fits) with WORD in M, replacing an entry for P,
 * reserving M's arrays first if need be.  Returns 0, or -1 when P is not
 * entered: M has no reservation, or P lies outside the range it covers. */
int tg_ptrpage_set(struct tg_ptrpage *m, uintptr_t p, size_t word);

/* Entries in M, marks included: a walk of its listed pages' counts (for
 * statistics; the hooks keep no total of their own). */
size_t tg_ptrpage_entries(const struct tg_ptrpage *m);
/* Drop every entry and give the reservation back. */
void tg_ptrpage_clear(struct tg_ptrpage *m);
/* Bytes of memory the map holds: its listed shadow pages, their counts and
 * the list. */
size_t tg_ptrpage_bytes(const struct tg_ptrpage *m);

#pragma GCC visibility pop

#endif
