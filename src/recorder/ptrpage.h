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
 * entries by address: a 4 KiB page of the heap has a 512-byte page of 16-bit
 * entries, one per 16-byte granule, and the blocks of one cache line of
 * entries lie within 512 bytes of each other.
 *
 *   nodes[p >> 24]                 16 MiB of address space: a node, which holds
 *     ->page[(p >> 12) & 4095]     a 4 KiB page's entry page (NULL: none), which
 *       ->word1[(p >> 4) & 255]    holds the block's word + 1 (0: none)
 *
 * Only 16-aligned blocks below 2^47 whose word is at most TG_PP_WORD_MAX go
 * here (with accounting off, nearly every block of the mem and obj domains);
 * ptrtable.c keeps the rest in the GIL table's hash and keeps a pointer in at
 * most one of the two.  A block of such an address that the hash holds has
 * TG_PP_MARK here instead, so that the page map alone says where any of them
 * is (ptrtable_fast.h).  An entry page whose last entry goes stays in the
 * map (idle): a program's heap pages empty and fill again all the time, and
 * taking the page out at once and back at the next block made one allocation
 * in fourteen take the slow path (alloc_heavy), and gave the free hook a call
 * to make.  When a new entry page is needed and more are idle than busy
 * (and than TG_PP_IDLE_MIN), tg_ptrpage_trim takes the idle ones out (so the
 * map's memory stays within twice what its entries need, each idle page
 * pinning at most one node): each is kept for reuse
 * (TG_PP_SPARE_MAX) or freed, and a node (32 KiB per 16 MiB of address space
 * in use) whose last entry page goes is kept for reuse (TG_PP_SPARE_NODES) or
 * freed; the node array (64 MiB of
 * address space reserved, a page of it touched per 8 GiB in use) stays until
 * tg_ptrpage_clear.  Memory: 520 bytes per 4 KiB page that holds
 * blocks, 12.7% of the small-block heap, against 11-21 bytes per block in the
 * hash.
 *
 * Everything is guarded by the GIL (the mem and obj domains are called with
 * it); the map's own memory comes from malloc and mmap, never from the hooked
 * domains.
 */
#ifndef TG_PTRPAGE_H
#define TG_PTRPAGE_H

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

#define TG_PP_ADDR_BITS 47
#define TG_PP_NODE_SHIFT 24
#define TG_PP_PAGE_SHIFT 12
#define TG_PP_NODES (UINT64_C(1) << (TG_PP_ADDR_BITS - TG_PP_NODE_SHIFT))
#define TG_PP_NODE_PAGES (1u << (TG_PP_NODE_SHIFT - TG_PP_PAGE_SHIFT))
#define TG_PP_GRANULES (1u << (TG_PP_PAGE_SHIFT - 4))
#define TG_PP_WORD_MAX 0xFFFDu   /* entries hold word + 1 in 16 bits ... */
#define TG_PP_MARK 0xFFFFu       /* ... or this mark: the block's entry is in the
                                    GIL table's hash (ptrtable_fast.h) */
#define TG_PP_SPARE_MAX 1024     /* empty entry pages kept for reuse (520 KiB) */
#define TG_PP_IDLE_MIN 64        /* idle entry pages always allowed; above, at
                                    most as many as the busy ones */
#define TG_PP_SPARE_NODES 32     /* empty nodes kept for reuse (1 MiB): a block
                                    moving between sparse regions (a growing
                                    list's buffer) made and freed a 32 KiB node,
                                    zeroed by calloc, at each move */

struct tg_pp_page {
    union {
        int32_t live1;             /* entries in word1 less one, -1 when it
                                      has none (in use): the hooks' fill and
                                      empty then test the flags of their add
                                      and subtract, for 0 and below 0 (two
                                      instructions each, the fill's post-
                                      increment and compare with 0 took five) */
        struct tg_pp_page *next;   /* the spare list (spare: word1 all 0) */
    } u;
    uint16_t word1[TG_PP_GRANULES];
};

struct tg_pp_node {
    struct tg_pp_page *page[TG_PP_NODE_PAGES];
    struct tg_pp_node *next, *prev;  /* every node, for clear */
    uint64_t index;                /* its slot in nodes */
    unsigned npages;               /* entry pages in page[]: freed at 0 */
};

struct tg_ptrpage {
    struct tg_pp_node **nodes;     /* TG_PP_NODES slots, mmap'd at the first set */
    struct tg_pp_node *all;        /* every node */
    struct tg_pp_page *spare;      /* empty entry pages for reuse */
    size_t nspare;
    struct tg_pp_node *spare_nodes;/* empty nodes (page[] all NULL), by next */
    size_t nspare_nodes;
    size_t marks;                  /* entries that are TG_PP_MARK */
    size_t pages;                  /* entry pages in the map (idle included) */
    size_t idle;                   /* entry pages in the map without an entry */
    size_t nnodes;
    int unmapped;                  /* the node array's mmap failed: no retry
                                      (every block goes to the hash) */
};

/* The GIL table's map (GIL). */
extern struct tg_ptrpage tg_ptrpage_gil;

/* Whether block P with WORD can be entered in a page map. */
static inline int
tg_ptrpage_fits(uintptr_t p, size_t word)
{
    return (((uint64_t)p & 15) | ((uint64_t)p >> TG_PP_ADDR_BITS)) == 0
           && word <= TG_PP_WORD_MAX;
}

/* Out of line: enter P when its node or entry page does not exist yet. */
int tg_ptrpage_set_slow(struct tg_ptrpage *m, uintptr_t p, size_t word);
/* Take every idle entry page out of M (out of line; done by
 * tg_ptrpage_set_slow when more are idle than busy). */
void tg_ptrpage_trim(struct tg_ptrpage *m);

/* Enter block P (tg_ptrpage_fits) with WORD in M, replacing an entry for P.
 * Returns 0, or -1 when memory for the map ran out (P is not entered). */
static inline int
tg_ptrpage_set(struct tg_ptrpage *m, uintptr_t p, size_t word)
{
    struct tg_pp_node *n;
    struct tg_pp_page *pg;
    unsigned gi;

    if (__builtin_expect(m->nodes == NULL, 0)
            || (n = m->nodes[p >> TG_PP_NODE_SHIFT]) == NULL
            || (pg = n->page[(p >> TG_PP_PAGE_SHIFT) & (TG_PP_NODE_PAGES - 1)]) == NULL)
        return tg_ptrpage_set_slow(m, p, word);
    gi = (unsigned)(p >> 4) & (TG_PP_GRANULES - 1);
    if (pg->word1[gi] == 0 && ++pg->u.live1 == 0)
        m->idle--;
    pg->word1[gi] = (uint16_t)(word + 1);
    return 0;
}

/* The entry page of block P in M, with P's granule in *GI; NULL when P has
 * none (no node or entry page there yet, or P cannot be in a page map).  For
 * the hooks' fast paths (hook_count.h), which then read and write the granule
 * themselves with tg_ptrpage_fill and tg_ptrpage_empty. */
static inline struct tg_pp_page *
tg_ptrpage_find(const struct tg_ptrpage *m, uintptr_t p, unsigned *gi)
{
    struct tg_pp_node *n;

    if ((((uint64_t)p & 15) | ((uint64_t)p >> TG_PP_ADDR_BITS)) != 0
            || m->nodes == NULL
            || (n = m->nodes[p >> TG_PP_NODE_SHIFT]) == NULL)
        return NULL;
    *gi = (unsigned)(p >> 4) & (TG_PP_GRANULES - 1);
    return n->page[(p >> TG_PP_PAGE_SHIFT) & (TG_PP_NODE_PAGES - 1)];
}

/* tg_ptrpage_find for a map whose node array is mapped (tg_ptrpage_reserve):
 * one test fewer.  P's granule number with P's low 4 bits rotated to the top
 * is below 2^(TG_PP_ADDR_BITS - 4) exactly when P fits the map, and gives the
 * node, page and granule by shifts alone (three instructions fewer than
 * testing the bits apart and shifting P for each). */
static inline struct tg_pp_page *
tg_ptrpage_find_mapped(const struct tg_ptrpage *m, uintptr_t p, unsigned *gi)
{
    uint64_t g = ((uint64_t)p >> 4) | ((uint64_t)p << 60);
    struct tg_pp_node *n;

    if ((g >> (TG_PP_ADDR_BITS - 4)) != 0
            || (n = m->nodes[g >> (TG_PP_NODE_SHIFT - 4)]) == NULL)
        return NULL;
    *gi = (unsigned)g & (TG_PP_GRANULES - 1);
    return n->page[(g >> (TG_PP_PAGE_SHIFT - 4)) & (TG_PP_NODE_PAGES - 1)];
}

/* Map M's node array now if it is not (address space only, as the first set
 * would): 0, or -1 when it cannot be.  It stays until tg_ptrpage_clear. */
int tg_ptrpage_reserve(struct tg_ptrpage *m);

/* Enter WORD (at most TG_PP_WORD_MAX) at granule GI of PG, P's entry page
 * (tg_ptrpage_find), whose granule held no entry. */
static inline void
tg_ptrpage_fill(struct tg_ptrpage *m, struct tg_pp_page *pg, unsigned gi, size_t word)
{
    if (__builtin_expect(++pg->u.live1 == 0, 0))
        m->idle--;
    pg->word1[gi] = (uint16_t)(word + 1);
}

/* Remove the entry at granule GI of PG (not empty).  No call: a page left
 * without an entry stays, idle. */
static inline void
tg_ptrpage_empty(struct tg_ptrpage *m, struct tg_pp_page *pg, unsigned gi)
{
    pg->word1[gi] = 0;
    if (__builtin_expect(--pg->u.live1 < 0, 0))
        m->idle++;
}

/* Entries in M, marks included: a walk of its entry pages (for statistics;
 * the hooks keep no count of their own). */
size_t tg_ptrpage_entries(const struct tg_ptrpage *m);
/* Drop every entry and free the map's memory. */
void tg_ptrpage_clear(struct tg_ptrpage *m);
/* Bytes of memory the map holds (nodes, entry pages, spares). */
size_t tg_ptrpage_bytes(const struct tg_ptrpage *m);

#pragma GCC visibility pop

#endif
