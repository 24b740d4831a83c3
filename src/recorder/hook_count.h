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

/* TG_HOOK_OWN_ADD of 1 to HIST[tg_acct_bin_nz(SIZE)] (a histogram of
 * TG_ACCT_BINS bins, SIZE not 0): the bin is the bit scan's result + 1, and
 * the + 1 goes into the address's displacement (one instruction fewer). */
#define TG_HOOK_HIST_ADD(hist, size) \
    TG_HOOK_OWN_ADD((&(hist)[1])[63 - (size_t)__builtin_clzll((unsigned long long)(size))], 1)

/* The light limit's largest room above the requested bytes: one less than
 * the largest word a page map entry holds.  So an allocation the one compare
 * lets through is of at most TG_PP_WORD_MAX - 1 bytes (the requested bytes
 * only grow from where the limit was set), and the fast paths need no test of
 * the size's upper bound; one above it goes through
 * tg_acct_alloc_light_full, which takes no word the map cannot hold (the
 * general path's larger words go to tg_acct_alloc, counted the same).  The
 * full tests then run at least once per 64 KiB a thread allocates, a few
 * instructions a thousand small allocations. */
#define TG_LIGHT_ROOM_MAX ((int64_t)TG_PP_WORD_MAX - 1)

/* Sampled mode's common case, inline in the hooks (acct_state.h tracer_freed):
 * an allocation of SIZE bytes where no sample point falls and no threshold is
 * due counts on the calling thread's state alone (tg_acct_light_gen: in
 * sampled mode, accounting on and the thread's state current).  1 with the table word in
 * *WORD, or 0 when tg_acct_alloc must take it (any other case, which it counts
 * from the start: nothing is counted here then).
 *
 * The common case of the common case is one subtraction: the size from the
 * thread's light room (struct tg_acct_sampler), its light limit less its
 * requested bytes.  The limit is set where the full tests last ran to the
 * requested bytes plus the smaller of the bytes left before the next sample
 * point (less one: a point at the allocation's last byte samples it) and the
 * room below the thread's peak.  It holds until the requested bytes pass it,
 * whatever happens meanwhile: every allocation, here or in tg_acct_alloc,
 * adds its size to requested (and takes it from the room), which takes it
 * from the sampler's countdown (counted from synced: the common case writes
 * requested alone, one store fewer), and raises live bytes by no more than
 * that; a free only lowers them; a sample restarts the countdown only once
 * requested has passed the old point, hence the limit.  So no allocation
 * below the limit reaches a sample point or a new peak, and the thread's
 * figures stay exact.
 *
 * This is the full tests' part, for an allocation that took the room below 0:
 * REQ is the requested bytes with SIZE, which the caller has not counted (or
 * counted and taken back). */
static inline __attribute__((always_inline)) int
tg_acct_alloc_light_full(struct tg_acct_thread *t, int64_t req, size_t size, uint64_t *word)
{
    int64_t own, peak, room;
    int64_t left = t->sampler.left - (req - (int64_t)size - t->sampler.synced);

    if (left <= (int64_t)size || size > TG_PP_WORD_MAX || t->when_pending)
        return 0;
    own = req - TG_LOAD(t->freed);
    peak = TG_LOAD(t->peak);
    if (own > peak) {
        if (tg_acct_when_thread_due(t, own))
            return 0;
        atomic_store_explicit(&t->peak, own, memory_order_relaxed);
        peak = own;
    }
    left -= (int64_t)size;
    t->sampler.left = left;
    t->sampler.synced = req;
    room = left - 1 < peak - own ? left - 1 : peak - own;
    if (room > TG_LIGHT_ROOM_MAX)
        room = TG_LIGHT_ROOM_MAX;
    t->sampler.light_room = room;  /* the limit, req + room, less req */
    atomic_store_explicit(&t->requested, req, memory_order_relaxed);
    TG_HOOK_HIST_ADD(t->hist_alloc, size);
    *word = size;
    return 1;
}

/* Subtract V from X (an int64_t lvalue): whether the result is below 0.  On
 * x86-64 one subtraction from memory whose sign flag is the answer (GCC
 * otherwise loads, subtracts, stores and tests).  The owner thread's field
 * alone: not atomic. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
#define TG_SUB_BELOW_0(x, v) __extension__({ \
    unsigned char below_; \
    __asm__("subq %2, %0" : "+m"(x), "=@ccs"(below_) : "er"((int64_t)(v))); \
    below_; })
#else
#define TG_SUB_BELOW_0(x, v) (((x) -= (int64_t)(v)) < 0)
#endif

/* tg_acct_alloc_light_nz on a thread whose state its caller found current
 * in sampled mode (tg_tls.acct_gen equal to tg_acct_light_gen, or
 * alloc_hooks.c tg_hook_gil_fast_on, which implies it): the size added to
 * the requested bytes and taken from the light room, one instruction each;
 * both taken back for the full tests when the room goes below 0. */
static inline __attribute__((always_inline)) int
tg_acct_alloc_light_cur(size_t size, uint64_t *word)
{
    struct tg_acct_thread *t = tg_tls.acct;

    TG_HOOK_OWN_ADD(t->requested, (int64_t)size);
    if (__builtin_expect(TG_SUB_BELOW_0(t->sampler.light_room, size), 0)) {
        t->sampler.light_room += (int64_t)size;
        TG_HOOK_OWN_ADD(t->requested, -(int64_t)size);
        return tg_acct_alloc_light_full(t, TG_LOAD(t->requested) + (int64_t)size, size, word);
    }
    TG_HOOK_HIST_ADD(t->hist_alloc, size);
    *word = size;
    return 1;
}

static inline __attribute__((always_inline)) int
tg_acct_alloc_light_nz(size_t size, uint64_t *word)
{
    if (tg_tls.acct_gen != atomic_load_explicit(&tg_acct_light_gen, memory_order_relaxed))
        return 0;
    return tg_acct_alloc_light_cur(size, word);
}

/* tg_acct_alloc_light_nz above is the light case for a SIZE of 1 to
 * TG_ACCT_SIZE_MASK bytes (tg_acct_bin_nz), which its callers may have
 * tested already; this tests it. */
static inline __attribute__((always_inline)) int
tg_acct_alloc_light(size_t size, uint64_t *word)
{
    if (size - 1 >= TG_ACCT_SIZE_MASK)  /* 0 too */
        return 0;
    return tg_acct_alloc_light_nz(size, word);
}

/* Sampled mode's common free, inline: a block without a site (WORD is its
 * size) freed by the program counts on the calling thread's state alone.  1
 * with its size in *SIZE, or 0 when tg_acct_free must take it. */
static inline __attribute__((always_inline)) int
tg_acct_free_light(size_t word, int count_thread, size_t *size)
{
    struct tg_acct_thread *t = tg_tls.acct;

    if (!count_thread || word - 1 >= TG_ACCT_SIZE_MASK  /* 0 too */
            || tg_tls.acct_gen != atomic_load_explicit(&tg_acct_light_gen, memory_order_relaxed))
        return 0;
    TG_HOOK_OWN_ADD(t->freed, (int64_t)word);
    TG_HOOK_HIST_ADD(t->hist_free, word);
    *size = word;
    return 1;
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
        uint64_t word;
        if (!tg_acct_alloc_light(size, &word))
            word = tg_acct_alloc(size);
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
    if (atomic_load_explicit(&tg_acct_on, memory_order_relaxed)) {
        size_t size;
        if (tg_acct_free_light(word, count_thread, &size))
            return size;
        return tg_acct_free(word, count_thread);
    }
    return TG_ACCT_ENTRY_SIZE(word);
}

/* ---- sampled mode's fast paths for the GIL domains (alloc_hooks.c) ----
 * The general hooks test tracking, plain, accounting and the process total
 * one by one and keep the thread's busy bits across the call down, and all
 * their paths made the compiler save six registers on every call: a
 * pass-through hook cost 31-33 instructions, an allocation with its table
 * entry and accounting 133, a free 114 (callgrind, alloc_heavy).  These do
 * the common case alone; anything else they leave untouched for the general
 * path. */

/* Largest request pymalloc serves itself (its SMALL_REQUEST_THRESHOLD, 512 in
 * every supported version): the free of such a block calls down into no
 * hooked allocator, so the free hook needs no TG_BUSY_HOOK around it.  (Were
 * it wrong for some allocator, e.g. the debug hooks, a nested raw free would
 * look its block up in the raw table, not find it and count nothing: exact
 * still, only slower.) */
#define TG_HOOK_SMALL_MAX 512

/* Sampled mode's common allocation in a GIL domain, by a thread that its
 * caller found on the fast paths' key (alloc_hooks.c tg_hook_gil_fast_on,
 * ptrtable_fast.h tg_gil_fast_key: not busy, its state current in sampled
 * mode, the page map's node array mapped, no block in the hash unmarked): block P of SIZE bytes whose page
 * map entry page exists, with no entry for P there (nor a mark: nor in the
 * GIL table's hash, ptrtable_fast.h), that tg_acct_alloc_light_cur counts:
 * counted on the thread's accounting state (not on tg_tls's counters: see
 * tg_hook_thread_counters) and entered in the page map.  1 when
 * done; 0 having done nothing (the general path then does everything). */
static inline __attribute__((always_inline)) int
tg_hook_gil_fast_alloc(void *p, size_t size)
{
    uintptr_t a = (uintptr_t)p;
    uint16_t *e;
    uint64_t g, word;

    /* Size 0 is the general path's (its histogram bin); a SIZE too large
     * for a map entry fails tg_acct_alloc_light_cur (TG_LIGHT_ROOM_MAX).  P
     * may be NULL (a failed allocation): granule 0 holds a mark from the
     * reservation on (tg_ptrpage_reserve), so it is never taken for a free
     * entry. */
    if (size == 0
            || !tg_ptrpage_find(&tg_ptrpage_gil, a, &g)
            || *(e = tg_ptrpage_entry(&tg_ptrpage_gil, g)) != 0
            || !tg_acct_alloc_light_cur(size, &word))
        return 0;
    tg_ptrpage_fill(&tg_ptrpage_gil, e, g, (size_t)word);
    return 1;
}

/* Block P's entry E (granule G) of SIZE bytes emptied and counted as freed
 * by the calling thread T. */
static inline __attribute__((always_inline)) void
tg_hook_gil_fast_freed(struct tg_acct_thread *t, uint16_t *e, uint64_t g, size_t size)
{
    tg_ptrpage_empty_of(&tg_ptrpage_gil, e, g, (unsigned)size);
    TG_HOOK_OWN_ADD(t->freed, (int64_t)size);
    TG_HOOK_HIST_ADD(t->hist_free, size);
}

/* Sampled mode's common free in a GIL domain, by the program (the thread not
 * busy) on a thread that its caller found on the fast paths' key (see
 * tg_hook_gil_fast_alloc; accounting on, too: a forked
 * child that goes on recording stops it with the hooks installed, and turns
 * the key off): block P in the page map with a plain size word, removed and
 * counted as freed by the calling thread.  1 when done for a block of 1 to
 * TG_HOOK_SMALL_MAX bytes, which the caller frees without the busy bit; 2 when
 * done for a larger one, which it frees with it; 0 having done nothing, as for
 * a NULL P (granule 0 holds a mark: see tg_ptrpage_reserve). */
static inline __attribute__((always_inline)) int
tg_hook_gil_fast_free(void *p)
{
    uintptr_t a = (uintptr_t)p;
    struct tg_acct_thread *t = tg_tls.acct;
    uint16_t *e;
    uint64_t g;
    size_t size;

    if (!tg_ptrpage_find(&tg_ptrpage_gil, a, &g))
        return 0;
    e = tg_ptrpage_entry(&tg_ptrpage_gil, g);
    size = *e;
    if (__builtin_expect(size - 1 >= TG_HOOK_SMALL_MAX, 0)) {
        if (size - 1 >= TG_PP_WORD_MAX)  /* no entry (0) or a mark */
            return 0;
        tg_hook_gil_fast_freed(t, e, g, size);
        return 2;
    }
    tg_hook_gil_fast_freed(t, e, g, size);
    return 1;
}

/* The calling thread's allocated and freed bytes while hooked
 * (_recorder.thread_counters): tg_tls's, or, while its accounting state is
 * current in sampled mode, the state's requested and freed bytes.  Sampled
 * mode's fast paths above count there alone: tg_tls's counters are the full
 * mode's (its per-call deltas), and nothing reads them in sampled mode. */
static inline void
tg_hook_thread_counters(int64_t *allocated, int64_t *freed)
{
    uint64_t g = atomic_load_explicit(&tg_acct_light_gen, memory_order_relaxed);

    if (g != TG_ACCT_NO_GEN && tg_tls.acct_gen == g && tg_tls.acct != NULL) {
        *allocated = TG_LOAD(tg_tls.acct->requested);
        *freed = TG_LOAD(tg_tls.acct->freed);
        return;
    }
    *allocated = tg_tls.allocated;
    *freed = tg_tls.freed;
}

#pragma GCC visibility pop

#endif /* TG_HOOK_COUNT_H */
