/*
 * ptrtable.h - the pointer -> size table behind exact frees.
 *
 * Every block allocated through a hooked domain while the recorder is enabled is
 * entered here with its requested size, so that its free can be credited with
 * exactly that size.  Open addressing with linear probing and backward-shift
 * deletion, split into shards by pointer hash with one mutex per shard: the raw
 * domain is called without the GIL, from any thread.  The arrays come from
 * malloc(), never from the hooked allocators.
 */
#ifndef TG_PTRTABLE_H
#define TG_PTRTABLE_H

#include <stddef.h>
#include <stdint.h>

/* Record PTR with SIZE (replacing a stale entry for the same address).  When the
 * table cannot grow the entry is dropped and its free will count 0. */
void tg_ptrtable_insert(void *ptr, size_t size);
/* Remove PTR; returns 1 and its size in *SIZE if it was known, else 0. */
int tg_ptrtable_remove(void *ptr, size_t *size);
/* Drop every entry and free the arrays (at disable, after unhooking). */
void tg_ptrtable_clear(void);
/* Number of entries (tests and stats; takes every lock). */
size_t tg_ptrtable_count(void);
/* fork(): take every shard lock before, release them after (parent and child). */
void tg_ptrtable_lock_all(void);
void tg_ptrtable_unlock_all(void);

#endif /* TG_PTRTABLE_H */
