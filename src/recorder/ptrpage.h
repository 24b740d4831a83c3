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
 * most one of the two.  An entry page whose last entry goes stays in place
 * while it is among the TG_PP_PARKED pages that emptied last, then is kept for
 * reuse (TG_PP_SPARE_MAX) or freed, and a node (32 KiB per 16 MiB of address space
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
#define TG_PP_WORD_MAX 0xFFFEu   /* entries hold word + 1 in 16 bits */
#define TG_PP_SPARE_MAX 1024     /* empty entry pages kept for reuse (520 KiB) */
#define TG_PP_PARKED 16          /* entry pages left in place when they empty,
                                    the most recent ones: a page that one block
                                    keeps emptying and refilling (a frame
                                    object's, under a profile function) was
                                    detached and attached again each time */
#define TG_PP_PARKED_BIT 0x80000000u  /* in live: the page is in parked[] (its
                                    entry count is live's other bits) */
#define TG_PP_SPARE_NODES 32     /* empty nodes kept for reuse (1 MiB): a block
                                    moving between sparse regions (a growing
                                    list's buffer) made and freed a 32 KiB node,
                                    zeroed by calloc, at each move */

struct tg_pp_page {
    union {
        uint32_t live;             /* entries in word1 (in use) */
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
    struct {
        struct tg_pp_node *node;   /* NULL: a free slot */
        unsigned pi;
    } parked[TG_PP_PARKED];        /* pages that emptied lately, still attached,
                                      each once (TG_PP_PARKED_BIT): the oldest is
                                      detached, if still empty, as the next comes */
    unsigned park_next;            /* the slot the next one takes */
    size_t count;                  /* entries */
    size_t pages;                  /* entry pages in use */
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
/* Out of line: the entry page of node N's page PI has no entry left (and is
 * not parked): it is parked, and the oldest parked page detached if empty. */
void tg_ptrpage_page_empty(struct tg_ptrpage *m, struct tg_pp_node *n, unsigned pi);

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
    if (pg->word1[gi] == 0) {
        pg->u.live++;
        m->count++;
    }
    pg->word1[gi] = (uint16_t)(word + 1);
    return 0;
}

/* Remove block P from M: 1 and its word in *WORD, or 0 (P is not there; any
 * P, aligned or not). */
static inline int
tg_ptrpage_take(struct tg_ptrpage *m, uintptr_t p, size_t *word)
{
    struct tg_pp_node *n;
    struct tg_pp_page *pg;
    unsigned pi, gi, w;

    if ((((uint64_t)p & 15) | ((uint64_t)p >> TG_PP_ADDR_BITS)) != 0
            || m->nodes == NULL
            || (n = m->nodes[p >> TG_PP_NODE_SHIFT]) == NULL)
        return 0;
    pi = (unsigned)(p >> TG_PP_PAGE_SHIFT) & (TG_PP_NODE_PAGES - 1);
    pg = n->page[pi];
    if (pg == NULL)
        return 0;
    gi = (unsigned)(p >> 4) & (TG_PP_GRANULES - 1);
    w = pg->word1[gi];
    if (w == 0)
        return 0;
    pg->word1[gi] = 0;
    m->count--;
    if (--pg->u.live == 0)
        tg_ptrpage_page_empty(m, n, pi);
    *word = w - 1;
    return 1;
}

/* Drop every entry and free the map's memory. */
void tg_ptrpage_clear(struct tg_ptrpage *m);
/* Bytes of memory the map holds (nodes, entry pages, spares). */
size_t tg_ptrpage_bytes(const struct tg_ptrpage *m);

#pragma GCC visibility pop

#endif
