/*
 * hook_count.h - what every allocator hook does with a block it saw: the
 * thread's (and process's) byte counters and the pointer-table entry that
 * makes its free exact.  Shared by the Python-domain wrappers (alloc_hooks.c)
 * and the native hooks (native.c) so that both count a block the same way,
 * accounting and its sampling included.
 */
#ifndef TG_HOOK_COUNT_H
#define TG_HOOK_COUNT_H

#include "alloc_hooks.h"
#include "accounting.h"
#include "ptrtable.h"
#include "ptrtable_fast.h"

#pragma GCC visibility push(hidden)

/* Add ALLOC and FREED bytes to the calling thread's counters (thread-local) and,
 * in process mode, to the process total (relaxed atomic). */
static inline void
tg_hook_account(int64_t alloc, int64_t freed)
{
    tg_tls.allocated += alloc;
    tg_tls.freed += freed;
    if (tg_hooks_count_total)
        atomic_fetch_add_explicit(&tg_process_total, alloc - freed, memory_order_relaxed);
}

/* Enter a new block P of SIZE bytes in TABLE (tg_ptrtable_gil when GIL, whose
 * inline operations the mem and obj hooks use): its size alone (a compact
 * entry), or, when allocation accounting is on (which also counts the
 * allocation), the size and its call site, which take a wide entry
 * (ptrtable.h); a block that accounting's sampling left without a site keeps a
 * plain size word. */
static inline __attribute__((always_inline)) void
tg_hook_entry_insert(struct tg_ptrtable *table, void *p, size_t size, int gil)
{
    if (atomic_load_explicit(&tg_acct_on, memory_order_relaxed)) {
        uint64_t word = tg_acct_alloc(size);
        if (word > TG_ACCT_SIZE_MASK)
            tg_ptrtable_insert_wide(table, p, (size_t)word);
        else if (gil)
            tg_ptrtable_gil_insert(p, (size_t)word);
        else
            tg_ptrtable_insert(table, p, (size_t)word);
    } else if (gil) {
        tg_ptrtable_gil_insert(p, size);
    } else {
        tg_ptrtable_insert(table, p, size);
    }
}

/* tg_hook_entry_insert with accounting off: P's SIZE alone. */
static inline __attribute__((always_inline)) void
tg_hook_plain_insert(struct tg_ptrtable *table, void *p, size_t size, int gil)
{
    if (gil)
        tg_ptrtable_gil_insert(p, size);
    else
        tg_ptrtable_insert(table, p, size);
}

/* Remove P from TABLE (tg_ptrtable_gil when GIL): 1 and its word in *WORD, or 0. */
static inline __attribute__((always_inline)) int
tg_hook_entry_remove(struct tg_ptrtable *table, void *p, size_t *word, int gil)
{
    return gil ? tg_ptrtable_gil_remove(p, word) : tg_ptrtable_remove(table, p, word);
}

/* Size of a removed block from its table word; accounting credits its site
 * (and, if COUNT_THREAD, the freeing thread).  Masked even when accounting is
 * off: a forked child stops accounting but inherits the parent's entries. */
static inline size_t
tg_hook_entry_free(size_t word, int count_thread)
{
    if (atomic_load_explicit(&tg_acct_on, memory_order_relaxed))
        return tg_acct_free(word, count_thread);
    return TG_ACCT_ENTRY_SIZE(word);
}

#pragma GCC visibility pop

#endif /* TG_HOOK_COUNT_H */
