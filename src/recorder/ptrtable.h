/*
 * ptrtable.h - the pointer -> size tables behind exact frees.
 *
 * Every block allocated through a hooked domain while the recorder is enabled is
 * entered here with its requested size, so that its free can be credited with
 * exactly that size.  Open addressing with linear probing and backward-shift
 * deletion, split into 16 shards by pointer hash (the raw table; the GIL table,
 * which needs no locks, keeps all in its first shard).  Each shard keeps two arrays:
 *   - compact 8-byte entries, the pointer >> 4 in the high 44 bits and the size
 *     in the low 20: any 16-aligned block below 2^48 whose size word is below
 *     1 MiB, i.e. with accounting off nearly every block pymalloc or glibc hands
 *     out; grown past 3/4 full, so a live block costs 11-21 bytes of table;
 *   - wide 16-byte {pointer, size word} entries for everything else (unaligned or
 *     high pointers, blocks of 1 MiB or more, and size words carrying an
 *     accounting site id, accounting.h); grown past 1/2 full.
 * A pointer lives in at most one of the two.  A 512-bit filter per shard has
 * a bit set for every wide entry's hash (cleared when the wide array empties):
 * a block whose bit is clear (with accounting off, nearly all, even while some
 * large blocks are live) is inserted and removed in the compact array alone,
 * so a free of an unknown block (allocated before enable()) costs one short
 * probe; otherwise a remove searches the compact array only when it has
 * entries, then the wide one.
 * The GIL table keeps most blocks elsewhere: its newest block in a slot of
 * its own (freed first, often: ptrtable_fast.h), the others in a page map by
 * address (ptrpage.h), for locality; its hash holds the rest (large words,
 * unaligned or high pointers), each marked in the page map where its address
 * could be there, so that the page map alone answers for those addresses; a
 * 512-bit filter of the hash's entries serves the others.
 * Two tables, because each domain frees only its own blocks:
 *   - tg_ptrtable_raw, for PYMEM_DOMAIN_RAW, which is called without the GIL from
 *     any thread: one mutex per shard;
 *   - tg_ptrtable_gil, for PYMEM_DOMAIN_MEM and PYMEM_DOMAIN_OBJ, which CPython
 *     only calls with the GIL held: the GIL protects it and it takes no lock
 *     (those locks were most of the recorder's cost).
 * The arrays are anonymous mappings of their own (ptrtable.c), never from the
 * hooked allocators nor the program's heap.
 */
#ifndef TG_PTRTABLE_H
#define TG_PTRTABLE_H

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

struct tg_ptrtable;

extern struct tg_ptrtable tg_ptrtable_raw;
extern struct tg_ptrtable tg_ptrtable_gil;

/* Record PTR (not NULL) with SIZE, any 64-bit word, in T, replacing a stale entry
 * for the same address (in the GIL table, when PTR leaves its newest slot,
 * ptrtable_fast.h: the mem and obj hooks see every free of the blocks they
 * enter, so a block they insert is never in it).  When the table cannot grow
 * the entry is dropped and its free will count 0. */
void tg_ptrtable_insert(struct tg_ptrtable *t, void *ptr, size_t size);
/* The same, always in a wide entry: for callers whose words mostly do not fit a
 * compact one (allocation accounting's site ids), so that the compact array stays
 * empty and lookups skip it. */
void tg_ptrtable_insert_wide(struct tg_ptrtable *t, void *ptr, size_t size);
/* Remove PTR (not NULL) from T; returns 1 and its size in *SIZE if it was known,
 * else 0. */
int tg_ptrtable_remove(struct tg_ptrtable *t, void *ptr, size_t *size);
/* Drop every entry of both tables and free the arrays (at disable, after
 * unhooking; GIL held). */
void tg_ptrtable_clear(void);
/* Number of entries in both tables (GIL held). */
size_t tg_ptrtable_count(void);

/* Occupancy of one table, for tests and measurements. */
struct tg_ptrtable_stats {
    size_t compact;   /* entries in the compact arrays */
    size_t wide;      /* entries in the wide arrays */
    size_t paged;     /* entries in the page map (GIL table, ptrpage.h) */
    size_t bytes;     /* bytes of arrays allocated */
};
/* Fill *ST for T (takes T's shard locks; GIL held). */
void tg_ptrtable_stats(struct tg_ptrtable *t, struct tg_ptrtable_stats *st);
/* fork(): take every lock of the raw table before, release them after (parent
 * and child).  The GIL table needs nothing: the forking thread holds the GIL. */
void tg_ptrtable_lock_all(void);
void tg_ptrtable_unlock_all(void);

#pragma GCC visibility pop

#endif /* TG_PTRTABLE_H */
