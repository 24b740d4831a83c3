/*
 * nat_maps.h - the native hooks' table of anonymous mappings: disjoint page
 * ranges keyed by start address, each with its accounting site.
 *
 * A treap (a binary search tree balanced by random priorities) over nodes held
 * in one array by index: insert, remove and "the first range ending after A" are
 * O(log n) expected, so a program with many live mappings pays no O(n) move per
 * mmap or munmap (the sorted array it replaces did).  Pure C, no locking: the
 * caller serialises every call (native.c holds tg_maps_lock).  Memory comes from
 * realloc/free of the caller's C library (native.c's own calls are not hooked).
 */
#ifndef TG_NAT_MAPS_H
#define TG_NAT_MAPS_H

#include <stddef.h>
#include <stdint.h>

struct tg_nat_node {
    uintptr_t start, end;   /* start < end; disjoint from every other node's */
    uint32_t sid;           /* accounting site */
    uint32_t prio;          /* heap order: a parent's is >= its children's */
    uint32_t left, right;   /* child indexes, 0 = none (also the free list's link) */
};

struct tg_nat_maps {
    struct tg_nat_node *nodes;  /* [0] unused: index 0 means "none" */
    uint32_t cap;               /* slots in nodes */
    uint32_t used;              /* slots ever handed out, [1, used) */
    uint32_t free_list;         /* recycled slots, linked by .left */
    uint32_t root;
    size_t count;               /* live ranges */
    uint32_t rng;               /* xorshift state for priorities */
};

#define TG_NAT_MAPS_INIT {NULL, 0, 0, 0, 0, 0, 2463534242u}

/* Called once per range (or part of one) that a release removes: BYTES of it,
 * of site SID. */
typedef void (*tg_nat_credit_fn)(size_t bytes, uint32_t sid, void *ctx);

/* Enter [START, END) of site SID; the caller has released any overlap first.
 * Returns 0, or -1 if out of memory (nothing entered). */
int tg_nat_maps_insert(struct tg_nat_maps *m, uintptr_t start, uintptr_t end, uint32_t sid);

/* Cut [A, B) out of the table: each range or part of one inside it is passed to
 * CREDIT (when not NULL) and removed; a range that strictly contains [A, B) is
 * split in two (if the tail cannot be entered, out of memory, it is forgotten).
 * Returns the bytes removed. */
size_t tg_nat_maps_release(struct tg_nat_maps *m, uintptr_t a, uintptr_t b,
                           tg_nat_credit_fn credit, void *ctx);

/* Forget every range and free the memory; M is then as TG_NAT_MAPS_INIT. */
void tg_nat_maps_clear(struct tg_nat_maps *m);

/* Visit the ranges in address order (tests); FN returns non-zero to stop. */
void tg_nat_maps_each(const struct tg_nat_maps *m,
                      int (*fn)(uintptr_t start, uintptr_t end, uint32_t sid, void *ctx),
                      void *ctx);

#endif
