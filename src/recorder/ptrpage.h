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
 * tests a lookup, 19 of a sampled malloc's 55 instructions.)  The array is
 * backed by memory only where entries were written: 4 KiB of entries per
 * 32 KiB of heap (12.5% of a dense small-block heap).
 *
 * The hooks keep no count of entries per page: a count taken and tested on
 * each fill and each empty was 8 of the pair's ~69 instructions in sampled
 * mode, about 1.7 points of its cost on allocation-heavy code.  The map's
 * memory goes back instead where the heap's does (tg_ptrpage_forget): when
 * pymalloc gives an arena back (arena_hook.c, the obj allocator's arena
 * hook), the shadow of that arena is dropped (madvise MADV_DONTNEED: it reads
 * as zeros again, which is what it holds once the arena's blocks are all
 * freed).  Blocks of the C heap (above pymalloc's 512 bytes, or every block
 * under PYTHONMALLOC=malloc) keep their shadow pages until the map is
 * cleared: glibc reuses its heaps' addresses, so that part is bounded by an
 * eighth of the C heap's largest extent.
 *
 * The reservation covers addresses below 2^TG_PP_ADDR_BITS (16 TiB of address
 * space for the entries), none of it committed (MAP_NORESERVE) nor dumped in a core (MADV_DONTDUMP).  Where a
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
 * it); the map's own memory comes from mmap, never from the hooked
 * domains.
 */
#ifndef TG_PTRPAGE_H
#define TG_PTRPAGE_H

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

#define TG_PP_ADDR_BITS 47       /* addresses a map may cover: user space */
#define TG_PP_MIN_BITS 36        /* the smallest range worth a map */
#define TG_PP_WORD_MAX 0xFFFEu   /* entries hold a word of 1 to this (0:
                                    none, so a word 0 goes to the hash) ... */
#define TG_PP_MARK 0xFFFFu       /* ... or this mark: the block's entry is in the
                                    GIL table's hash (ptrtable_fast.h) */

struct tg_ptrpage {
    uint16_t *word1;               /* the entries, glimit of them; NULL until
                                      tg_ptrpage_reserve */
    uint64_t glimit;               /* granules covered (2^(bits - 4)); 0 while
                                      nothing is reserved, so that every lookup
                                      misses */
    size_t span;                   /* bytes reserved at word1 */
    size_t marks;                  /* entries that are TG_PP_MARK */
    size_t forgets;                /* tg_ptrpage_forget calls that gave pages back */
    size_t forgot;                 /* bytes of the map they gave back */
    size_t prefaults;              /* tg_ptrpage_prefault calls that populated pages */
    size_t prefaulted;             /* bytes of the map they populated */
    int unmapped;                  /* no reservation could be had: no retry
                                      (every block goes to the hash) */
    int populate_off;              /* MADV_POPULATE_WRITE refused (EINVAL): the
                                      hooks fault the map's pages in instead */
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

/* Enter WORD (1 to TG_PP_WORD_MAX) at E, the entry of granule G in M
 * (tg_ptrpage_find), which held none. */
static inline __attribute__((always_inline)) void
tg_ptrpage_fill(struct tg_ptrpage *m, uint16_t *e, uint64_t g, size_t word)
{
    (void)m;
    (void)g;
    *e = (uint16_t)word;
}

/* Remove the entry at E, granule G's in M (not empty). */
static inline __attribute__((always_inline)) void
tg_ptrpage_empty(struct tg_ptrpage *m, uint16_t *e, uint64_t g)
{
    (void)m;
    (void)g;
    *e = 0;
}

/* tg_ptrpage_empty of an entry E known to hold WORD, in one instruction on
 * x86-64: WORD subtracted from it (a store of 0 takes two there, GCC
 * zeroing a register first to avoid a 16-bit immediate).  The hooks' fast
 * frees, which have the word in a register anyway. */
static inline __attribute__((always_inline)) void
tg_ptrpage_empty_of(struct tg_ptrpage *m, uint16_t *e, uint64_t g, unsigned word)
{
#if defined(__x86_64__) && defined(__GNUC__)
    (void)m;
    (void)g;
    __asm__("subw %w1, %0" : "+m"(*e) : "r"(word) : "cc");
#else
    (void)word;
    tg_ptrpage_empty(m, e, g);
#endif
}

/* Enter block P (tg_ptrpage_fits) with WORD in M, replacing an entry for P,
 * reserving M's arrays first if need be.  Returns 0, or -1 when P is not
 * entered: M has no reservation, or P lies outside the range it covers. */
int tg_ptrpage_set(struct tg_ptrpage *m, uintptr_t p, size_t word);

/* The heap's pages [ADDR, ADDR + LEN) were given back (an arena pymalloc
 * unmapped): no block lies there, so the memory of every page of M's entries
 * that shadows nothing else goes back too.  Cold; GIL held, as every writer
 * of the map (pymalloc gives an arena back inside a free). */
void tg_ptrpage_forget(struct tg_ptrpage *m, uintptr_t addr, size_t len);

/* The heap's pages [ADDR, ADDR + LEN) were just mapped (an arena pymalloc
 * took): the map's pages that shadow them are made writable memory now, in
 * one madvise(MADV_POPULATE_WRITE) (Linux 5.14; elsewhere nothing is done).
 * Left to the hooks, each such page is faulted twice, a read of an entry
 * (the zero page mapped) then its fill (the page copied): on stdlib_mix
 * 10-11 K faults of ~1.8 us each in a 0.57 s run (bench/RESULTS.md, "The
 * shadow of a new arena").  Cold; GIL held. */
void tg_ptrpage_prefault(struct tg_ptrpage *m, uintptr_t addr, size_t len);

/* A walk of M for statistics (cold): its entries, marks included, and the
 * bytes of its pages in memory, over the shadow of the address ranges the
 * process has mapped now (/proc/self/maps), for the hooks keep no count.
 * Shadow pages of ranges unmapped since are not seen (nothing lies there).
 * -1 when the mappings cannot be read. */
int tg_ptrpage_walk(const struct tg_ptrpage *m, size_t *entries, size_t *bytes);
/* The mappings the walk reads, in /proc/self/maps's format: that file, or
 * one a C test writes for the addresses it makes up.  Set before any walk. */
extern const char *tg_ptrpage_maps_path;
/* Drop every entry and give the reservation back. */
void tg_ptrpage_clear(struct tg_ptrpage *m);

#pragma GCC visibility pop

#endif
