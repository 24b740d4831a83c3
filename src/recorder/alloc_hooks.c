/*
 * alloc_hooks.c - allocator wrappers for exact per-thread byte counts.
 *
 * tracemalloc's pattern: each domain's wrapper holds the previous allocator as its
 * context.  pymalloc hands large requests to PyMem_RawMalloc, which is hooked too,
 * so a wrapper marks the thread TG_BUSY_HOOK while it calls down and nested calls
 * pass through uncounted (no double count).  While the profile function itself
 * runs (TG_BUSY_TRACER), its allocations are neither counted nor entered in the
 * table, and its frees only remove entries.
 */
#include "alloc_hooks.h"
#include "arena_hook.h"
#include "hook_count.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

_Atomic int64_t tg_process_total;
int tg_hooks_count_total;
void (*tg_hooks_watch)(void);

/* TG_BUSY_WATCH is set: out of line, the hooks keep one test of a register. */
static __attribute__((noinline, cold)) void
tg_hook_watch(void)
{
    if (tg_hooks_watch != NULL)
        tg_hooks_watch();
}

struct tg_hook_domain {
    PyMemAllocatorDomain domain;
    PyMemAllocatorEx orig;       /* the allocator we wrap; set at install with the GIL */
    struct tg_ptrtable *table;   /* tg_ptrtable_raw, or tg_ptrtable_gil (mem, obj) */
    PyMemAllocatorEx ours;
};

/* Installed wrappers; written at install/uninstall with the GIL held. */
static struct tg_hook_domain tg_domains[3];
/* The GIL domains' indexes in tg_domains (tg_hooks_install's order). */
#define TG_DOM_MEM 1
#define TG_DOM_OBJ 2
/* Set while any of our wrappers may be in an allocator chain (GIL). */
static int tg_installed;
/* Bit 1 << domain: our wrapper of that domain saw a malloc made with
 * TG_BUSY_PROBE set.  Only tg_hooks_in_chain sets that bit, with the GIL, and
 * only on its own thread: written and read by that thread alone. */
static int tg_hooks_probe_seen;
/* Cleared when another allocator wrapped ours and we could not unhook: the
 * wrappers then pass through.  Relaxed atomic: read without the GIL (raw). */
static _Atomic int tg_tracking;
/* Set at install when the hooks only count the thread's bytes (no allocation
 * accounting, no process total: the default): the hooks then test this one
 * flag instead of tracking, accounting and the process total apart.  Cleared
 * at uninstall.  Accounting starts only before an enable (which installs the
 * hooks and computes this) and stops only after disable has uninstalled them
 * (which clears it), so it never goes stale.  Relaxed atomic. */
static _Atomic int tg_plain;
/* Plain mode's fast paths' key: 0 while tg_plain is set, -1 (busy bits all
 * 1, which no thread has) otherwise, so that one compare with the thread's
 * busy bits stands for "no busy bit and plain mode" (two loads and two tests
 * before).  Set and cleared with tg_plain.  Relaxed atomic. */
static _Atomic int tg_plain_key = -1;
/* Sampled mode's fast paths for the GIL domains (hook_count.h
 * tg_hook_gil_fast_alloc/free) may run when allocation accounting is on and
 * there is no process total (which they do not count): install then sets
 * tg_gil_fast_key (ptrtable_fast.h), which the hooks compare with the
 * thread's accounting generation, and uninstall clears it.  Once per
 * process, a fork handler clears it in the child (see the key). */
static pthread_once_t tg_hooks_fork_once = PTHREAD_ONCE_INIT;

static void
tg_hooks_fork_child(void)
{
    atomic_store_explicit(&tg_gil_fast_key, TG_GIL_FAST_OFF, memory_order_relaxed);
}

static void
tg_hooks_fork_init(void)
{
    (void)pthread_atfork(NULL, NULL, tg_hooks_fork_child);
}

/* The key of the fast paths for accounting generation GEN: the word
 * tg_tls.busy_gen holds on a thread with no busy bit whose fast_gen was set
 * for GEN (tg_hook_fast_refresh).  Never TG_GIL_FAST_OFF: its busy bits are
 * 0. */
static uint64_t
tg_hook_fast_word(uint64_t gen)
{
    struct tg_tls w;

    memset(&w, 0, sizeof(w));
    w.fast_gen = (uint32_t)gen | UINT32_C(0x80000000);
    return w.busy_gen;
}

/* Whether the calling thread may take sampled mode's fast paths in a GIL
 * domain: no busy bit (the program's own call) and its accounting state
 * current while they may run, in one compare: tg_tls.busy_gen against
 * tg_gil_fast_key, which is tg_hook_fast_word of accounting's light
 * generation or TG_GIL_FAST_OFF (busy bits all 1, which no thread has). */
static inline __attribute__((always_inline)) int
tg_hook_gil_fast_on(void)
{
    return tg_tls.busy_gen == atomic_load_explicit(&tg_gil_fast_key, memory_order_relaxed);
}

/* On a call that tg_hook_gil_fast_on turned away: the thread's fast_gen
 * copy of its accounting generation, once its state is current in sampled
 * mode (tg_acct_light_gen: a thread's first counted allocation makes its
 * state, in the general path), so that its next calls take the fast paths.
 * A copy for an older run's generation does not match the new key. */
static inline __attribute__((always_inline)) void
tg_hook_fast_refresh(void)
{
    uint64_t g = atomic_load_explicit(&tg_acct_light_gen, memory_order_relaxed);

    if (tg_tls.acct_gen == g && g != TG_ACCT_NO_GEN && tg_tls.acct != NULL)
        tg_tls.fast_gen = (uint32_t)g | UINT32_C(0x80000000);
}

/* Count and enter in TABLE (its domain's) block P (NULL: a failed allocation)
 * of SIZE bytes that the allocator just returned to a thread whose busy bits
 * were SAVED; PLAIN is tg_plain as the hook read it. */
static inline __attribute__((always_inline)) void
tg_hook_malloc_record(struct tg_ptrtable *table, void *p, size_t size, int saved, int plain,
                      int gil)
{
    if (p != NULL && !(saved & TG_BUSY_TRACER)) {
        if (__builtin_expect(plain, 1)) {
            tg_hook_plain_insert(table, p, size, gil);
            tg_tls.allocated += (int64_t)size;
        } else {
            tg_hook_entry_insert(table, p, size, gil);
            tg_hook_account((int64_t)size, 0);
        }
        if (gil && __builtin_expect(saved & TG_BUSY_WATCH, 0))
            tg_hook_watch();
    }
}

static inline __attribute__((always_inline)) void *
tg_hook_malloc_body(void *ctx, size_t size, int gil)
{
    struct tg_hook_domain *d = ctx;
    int saved = tg_tls.busy;
    void *p;

    int plain;

    if (saved & (TG_BUSY_HOOK | TG_BUSY_PROBE)) {
        if (__builtin_expect(saved & TG_BUSY_PROBE, 0))
            tg_hooks_probe_seen |= 1 << d->domain;
        return d->orig.malloc(d->orig.ctx, size);
    }
    plain = atomic_load_explicit(&tg_plain, memory_order_relaxed);
    if (!plain && !atomic_load_explicit(&tg_tracking, memory_order_relaxed))
        return d->orig.malloc(d->orig.ctx, size);
    tg_tls.busy = saved | TG_BUSY_HOOK;
    p = d->orig.malloc(d->orig.ctx, size);
    tg_tls.busy = saved;
    tg_hook_malloc_record(d->table, p, size, saved, plain, gil);
    return p;
}

static inline __attribute__((always_inline)) void *
tg_hook_calloc_body(void *ctx, size_t nelem, size_t elsize, int gil)
{
    struct tg_hook_domain *d = ctx;
    int saved = tg_tls.busy;
    void *p;

    if ((saved & TG_BUSY_HOOK) || !atomic_load_explicit(&tg_tracking, memory_order_relaxed))
        return d->orig.calloc(d->orig.ctx, nelem, elsize);
    tg_tls.busy = saved | TG_BUSY_HOOK;
    p = d->orig.calloc(d->orig.ctx, nelem, elsize);
    tg_tls.busy = saved;
    /* The allocator checked nelem * elsize for overflow before succeeding. */
    if (p != NULL && !(saved & TG_BUSY_TRACER)) {
        tg_hook_entry_insert(d->table, p, nelem * elsize, gil);
        tg_hook_account((int64_t)(nelem * elsize), 0);
    }
    return p;
}

static inline __attribute__((always_inline)) void *
tg_hook_realloc_body(void *ctx, void *ptr, size_t size, int gil)
{
    struct tg_hook_domain *d = ctx;
    int saved = tg_tls.busy;
    size_t old = 0;
    int known = 0;
    void *p;

    if ((saved & TG_BUSY_HOOK) || !atomic_load_explicit(&tg_tracking, memory_order_relaxed))
        return d->orig.realloc(d->orig.ctx, ptr, size);
    /* Remove the old entry before the block is released: afterwards another
     * thread could get the same address and enter it. */
    if (ptr != NULL)
        known = tg_hook_entry_remove(d->table, ptr, &old, gil);
    tg_tls.busy = saved | TG_BUSY_HOOK;
    p = d->orig.realloc(d->orig.ctx, ptr, size);
    tg_tls.busy = saved;
    if (p == NULL) {
        if (known && atomic_load_explicit(&tg_acct_on, memory_order_relaxed))
            tg_ptrtable_insert_wide(d->table, ptr, old);  /* old block untouched */
        else if (known && gil)
            tg_ptrtable_gil_insert(ptr, old);
        else if (known)
            tg_ptrtable_insert(d->table, ptr, old);
        return NULL;
    }
    if (saved & TG_BUSY_TRACER) {
        if (known)
            tg_hook_entry_free(old, 0);
        return p;
    }
    /* An unknown old block (allocated before enable) counts as freeing 0 bytes,
     * like its free would; the new block is known from now on. */
    old = known ? tg_hook_entry_free(old, 1) : 0;
    tg_hook_entry_insert(d->table, p, size, gil);
    tg_hook_account((int64_t)size, known ? (int64_t)old : 0);
    return p;
}

static inline __attribute__((always_inline)) void
tg_hook_free_body(void *ctx, void *ptr, int gil)
{
    struct tg_hook_domain *d = ctx;
    int saved = tg_tls.busy;
    size_t size;

    int plain;

    if (ptr == NULL || (saved & TG_BUSY_HOOK))
        goto pass;
    plain = atomic_load_explicit(&tg_plain, memory_order_relaxed);
    if (!plain && !atomic_load_explicit(&tg_tracking, memory_order_relaxed))
        goto pass;
    if (tg_hook_entry_remove(d->table, ptr, &size, gil)) {
        if (__builtin_expect(plain, 1)) {
            if (!(saved & TG_BUSY_TRACER))
                tg_tls.freed += (int64_t)TG_ACCT_ENTRY_SIZE(size);
        } else {
            size = tg_hook_entry_free(size, !(saved & TG_BUSY_TRACER));
            if (!(saved & TG_BUSY_TRACER))
                tg_hook_account(0, (int64_t)size);
        }
    }
    tg_tls.busy = saved | TG_BUSY_HOOK;
    d->orig.free(d->orig.ctx, ptr);
    tg_tls.busy = saved;
    return;
pass:
    d->orig.free(d->orig.ctx, ptr);
}

/* The raw domain's hooks (tg_ptrtable_raw, locked). */
static void *tg_hook_malloc_raw(void *ctx, size_t size)
{ return tg_hook_malloc_body(ctx, size, 0); }
static void *tg_hook_calloc_raw(void *ctx, size_t nelem, size_t elsize)
{ return tg_hook_calloc_body(ctx, nelem, elsize, 0); }
static void *tg_hook_realloc_raw(void *ctx, void *ptr, size_t size)
{ return tg_hook_realloc_body(ctx, ptr, size, 0); }
static void tg_hook_free_raw(void *ctx, void *ptr)
{ tg_hook_free_body(ctx, ptr, 0); }

/* The mem and obj domains' hooks (tg_ptrtable_gil, whose operations are
 * inlined).  malloc and free first try sampled mode's fast paths
 * (hook_count.h): while tg_hook_gil_fast_on, a thread with no busy bit (the
 * program's own calls) needs none of the general path's other tests, and the
 * general path, out of line, no longer makes every call save its registers. */
static __attribute__((noinline)) void *
tg_hook_malloc_gil_general(void *ctx, size_t size)
{
    return tg_hook_malloc_body(ctx, size, 1);
}

/* The fast path's other cases (the GIL domains' table is tg_ptrtable_gil):
 * the block and its size are in tg_tls.hook_p and hook_size.  Returns the
 * block, so that the fast path calls it last. */
static __attribute__((noinline)) void *
tg_hook_malloc_gil_record(void)
{
    void *p = tg_tls.hook_p;

    tg_hook_malloc_record(&tg_ptrtable_gil, p, tg_tls.hook_size, 0, 0, 1);
    return p;
}

/* The end of sampled mode's allocations in a GIL domain: block P of SIZE
 * bytes through tg_hook_gil_fast_alloc, or the general path's record; P
 * returned, by tail calls where there is more to do.  P goes to the record
 * through the thread-local block, not as an argument: it then stays in the
 * register the call down returned it in and the fast path returns it from
 * (as an argument it took a move there and one back on the common path). */
static inline __attribute__((always_inline)) void *
tg_hook_gil_fast_done(void *p, size_t size)
{
    if (__builtin_expect(tg_hook_gil_fast_alloc(p, size), 1))  /* 0 when P is NULL */
        return p;
    tg_tls.hook_p = p;
    tg_tls.hook_size = size;  /* malloc's is there already; calloc's, realloc's not */
    return tg_hook_malloc_gil_record();
}

/* The fast path proper.  Only P and SIZE live across the call down (not D:
 * the GIL domains share one table), so it saves two registers, not four; in
 * the same function as the test that picks it (a separate function, as the
 * free's, cost a jump and the moves of its arguments, about 5 instructions per
 * call on alloc_heavy, more than the two pushes the general path, rare in
 * sampled mode, now makes before its tail call). */
static inline __attribute__((always_inline)) void *
tg_hook_malloc_gil_fast(struct tg_hook_domain *d, size_t size)
{
    void *p;

    tg_tls.hook_size = size;
    tg_tls.busy = TG_BUSY_HOOK;
    p = d->orig.malloc(d->orig.ctx, size);
    tg_tls.busy = 0;
    size = tg_tls.hook_size;
    return tg_hook_gil_fast_done(p, size);
}

/* Sampled mode's malloc turned away from the fast path. */
static __attribute__((noinline)) void *
tg_hook_malloc_gil_miss(void *ctx, size_t size)
{
    tg_hook_fast_refresh();
    return tg_hook_malloc_gil_general(ctx, size);
}

/* Sampled mode's malloc for the domain whose wrapper is tg_domains[I]: one
 * function per GIL domain, so that the allocator below and its context are
 * read at fixed addresses (one move fewer than through CTX, which is that
 * same wrapper). */
static inline __attribute__((always_inline)) void *
tg_hook_malloc_gil_of(int i, void *ctx, size_t size)
{
    if (__builtin_expect(!tg_hook_gil_fast_on(), 0))
        return tg_hook_malloc_gil_miss(ctx, size);
    return tg_hook_malloc_gil_fast(&tg_domains[i], size);
}

/* Whether the fast paths of plain mode (SAMPLED 0) or of sampled mode
 * (SAMPLED 1) may take the calling thread's call in a GIL domain: a thread
 * with no busy bit (the program's own calls) while that mode's hooks count. */
static inline __attribute__((always_inline)) int
tg_hook_gil_fast_ok(int sampled)
{
    if (sampled)
        return tg_hook_gil_fast_on();
    return __builtin_expect(tg_tls.busy == atomic_load_explicit(&tg_plain_key,
                                                                memory_order_relaxed), 1);
}

/* The rest of plain mode's malloc of block P when the previous newest block
 * Q (word QW) did not go into the page map by the common case: Q goes
 * wherever it goes.  Returns P, for a tail call. */
static __attribute__((noinline)) void *
tg_hook_malloc_gil_plain_rest(void *p, uintptr_t q, size_t qw)
{
    tg_gil_insert_slow(q, qw);
    return p;
}

/* GCC 12 at -O2 pairs the newest slot's two stores into one vector store,
 * which takes four instructions to build instead of two plain stores. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#define TG_NO_SLP __attribute__((optimize("no-tree-slp-vectorize")))
#else
#define TG_NO_SLP
#endif

/* Plain mode's malloc for the GIL domains (tg_plain: the thread's bytes only,
 * the default and the tutorial's configuration): a thread with no busy bit
 * (the program's own calls) counts the block and enters its size, as the
 * general path does for it, with no other test; anything else goes to the
 * general path.  Only the thread-local block's address lives in a register
 * across the call down (the size waits in that block): one register saved
 * instead of the general path's six. */
static inline __attribute__((always_inline)) void *
tg_hook_malloc_gil_plain_of(int i, void *ctx, size_t size)
{
    struct tg_hook_domain *d = &tg_domains[i];  /* CTX, at a fixed address */
    uintptr_t q;
    size_t qw;
    void *p;

    if (__builtin_expect(!tg_hook_gil_fast_ok(0), 0))
        return tg_hook_malloc_gil_general(ctx, size);
    /* SIZE kept in the thread-local block across the call down, as sampled
     * mode's malloc keeps it: one register saved, no stack adjustment. */
    tg_tls.hook_size = size;
    tg_tls.busy = TG_BUSY_HOOK;
    p = d->orig.malloc(d->orig.ctx, size);
    tg_tls.busy = 0;
    if (__builtin_expect(p == NULL, 0))
        return NULL;
    size = tg_tls.hook_size;
    /* tg_ptrtable_gil_insert, with what may need a call last, as a tail
     * call: P need not be kept in a saved register for after it. */
    tg_tls.allocated += (int64_t)size;
    q = tg_gil_newest.p;
    qw = tg_gil_newest.word;
    tg_gil_newest.p = (uintptr_t)p;
    tg_gil_newest.word = size;
    if (q == 0 || q == (uintptr_t)p)
        return p;
    if (__builtin_expect(tg_ptrtable_gil_enter_fast(q, qw), 1))
        return p;
    return tg_hook_malloc_gil_plain_rest(p, q, qw);
}

static __attribute__((noinline)) void *
tg_hook_calloc_gil_general(void *ctx, size_t nelem, size_t elsize)
{
    return tg_hook_calloc_body(ctx, nelem, elsize, 1);
}

static __attribute__((noinline)) void *
tg_hook_realloc_gil_general(void *ctx, void *ptr, size_t size)
{
    return tg_hook_realloc_body(ctx, ptr, size, 1);
}

/* calloc's fast path in a GIL domain, for plain mode (SAMPLED 0) or sampled
 * mode (SAMPLED 1): what the general path does for the program's own call in
 * that mode, without its other tests (a calloc took ~120 instructions there). */
static inline __attribute__((always_inline)) void *
tg_hook_calloc_gil_fast(void *ctx, size_t nelem, size_t elsize, int sampled)
{
    struct tg_hook_domain *d = ctx;
    size_t size;
    void *p;

    if (!tg_hook_gil_fast_ok(sampled))
        return tg_hook_calloc_gil_general(ctx, nelem, elsize);
    tg_tls.busy = TG_BUSY_HOOK;
    p = d->orig.calloc(d->orig.ctx, nelem, elsize);
    tg_tls.busy = 0;
    size = nelem * elsize;  /* the allocator checked it for overflow before succeeding */
    if (sampled)
        return tg_hook_gil_fast_done(p, size);
    if (__builtin_expect(p != NULL, 1)) {
        tg_ptrtable_gil_insert(p, size);
        tg_tls.allocated += (int64_t)size;
    }
    return p;
}

/* Plain mode's realloc in a GIL domain: the program's own realloc of a
 * block that is the newest one or has its word in the page map
 * (tg_ptrtable_gil_take), or of NULL.  As the general path (~190
 * instructions a call there): the old entry is taken before the block can be
 * released, put back if the allocator fails, and counted as freed only once
 * the new block exists; any other block (in the hash, or from before enable)
 * goes to the general path untouched.  (Sampled mode's is
 * tg_hook_realloc_gil_sampled below.) */
static void *
tg_hook_realloc_gil_plain(void *ctx, void *ptr, size_t size)
{
    struct tg_hook_domain *d = ctx;
    size_t w1 = 0;  /* the old block's word + 1; 0: PTR is NULL */
    void *p;

    if (!tg_hook_gil_fast_ok(0)
            || (ptr != NULL && (w1 = tg_ptrtable_gil_take((uintptr_t)ptr, NULL)) == 0))
        return tg_hook_realloc_gil_general(ctx, ptr, size);
    tg_tls.busy = TG_BUSY_HOOK;
    p = d->orig.realloc(d->orig.ctx, ptr, size);
    tg_tls.busy = 0;
    if (__builtin_expect(p == NULL, 0)) {
        if (w1 != 0)
            tg_ptrtable_gil_insert(ptr, w1 - 1);  /* the old block is untouched */
        return NULL;
    }
    if (w1 != 0)
        tg_tls.freed += (int64_t)TG_ACCT_ENTRY_SIZE(w1 - 1);
    tg_ptrtable_gil_insert(p, size);
    tg_tls.allocated += (int64_t)size;
    return p;
}

static void *
tg_hook_calloc_gil_plain(void *ctx, size_t nelem, size_t elsize)
{ return tg_hook_calloc_gil_fast(ctx, nelem, elsize, 0); }
static void *
tg_hook_calloc_gil_sampled(void *ctx, size_t nelem, size_t elsize)
{ return tg_hook_calloc_gil_fast(ctx, nelem, elsize, 1); }

/* Sampled mode's realloc in a GIL domain.  On the fast paths' key (see
 * tg_hook_malloc_gil_of), the program's realloc of NULL or of a block whose
 * plain size word (1 to TG_PP_WORD_MAX: no site) is in the page map or the
 * newest slot (ptrtable_fast.h): the
 * entry is taken before the block can be released (and put back if the
 * allocator fails), the old block counted as freed by the calling thread as
 * tg_hook_gil_fast_free counts it once the new block exists, and the new one
 * counted and entered as tg_hook_malloc_gil_of's fast path does.  Any other
 * block (in the hash, from before enable, with a site) goes to
 * the general path untouched.  Through the fast path it shared with plain
 * mode (the
 * newest-block test, the page map's lookup for an unmapped node array,
 * accounting's tests one by one, six saved registers) a call took about 133
 * instructions on alloc_heavy. */
static void *
tg_hook_realloc_gil_sampled(void *ctx, void *ptr, size_t size)
{
    struct tg_hook_domain *d = ctx;
    struct tg_acct_thread *t;
    uint16_t *e;
    uint64_t g;
    size_t old = 0;
    void *p;

    if (__builtin_expect(!tg_hook_gil_fast_on(), 0)) {
        tg_hook_fast_refresh();
        return tg_hook_realloc_gil_general(ctx, ptr, size);
    }
    if (ptr == NULL) {
        /* realloc(NULL, SIZE): nothing to take */
    } else if ((uintptr_t)ptr == tg_gil_newest.p) {
        /* Entered by the general path (e.g. an allocation over the light
         * limit, tg_hook_malloc_gil_record): a word with a site is too
         * large and goes to the general path. */
        old = tg_gil_newest.word;
        if (old - 1 >= TG_PP_WORD_MAX)
            return tg_hook_realloc_gil_general(ctx, ptr, size);
        tg_gil_newest.p = 0;
    } else {
        if (!tg_ptrpage_find(&tg_ptrpage_gil, (uintptr_t)ptr, &g))
            return tg_hook_realloc_gil_general(ctx, ptr, size);
        e = tg_ptrpage_entry(&tg_ptrpage_gil, g);
        old = *e;
        if (old - 1 >= TG_PP_WORD_MAX) /* no entry (0) or a mark too */
            return tg_hook_realloc_gil_general(ctx, ptr, size);
        tg_ptrpage_empty(&tg_ptrpage_gil, e, g);
    }
    tg_tls.busy = TG_BUSY_HOOK;
    p = d->orig.realloc(d->orig.ctx, ptr, size);
    tg_tls.busy = 0;
    if (__builtin_expect(p == NULL, 0)) {
        if (old != 0)
            tg_ptrtable_gil_insert(ptr, old);  /* the old block is untouched */
        return NULL;
    }
    if (old != 0) {
        t = tg_tls.acct;
        TG_HOOK_OWN_ADD(t->freed, (int64_t)old);
        TG_HOOK_HIST_ADD(t->hist_free, old);
    }
    return tg_hook_gil_fast_done(p, size);
}

static __attribute__((noinline)) void
tg_hook_free_gil_general(void *ctx, void *ptr)
{
    tg_hook_free_body(ctx, ptr, 1);
}

/* The free of a block larger than TG_HOOK_SMALL_MAX, counted already (plain
 * mode's, and sampled mode's fast path): freed with the busy bit (the
 * allocator may call down into a hooked one).  Apart, so that the common free
 * keeps no register for after a call. */
static __attribute__((noinline)) void
tg_hook_free_gil_plain_large(int i, void *ptr)
{
    struct tg_hook_domain *d = &tg_domains[i];

    tg_tls.busy = TG_BUSY_HOOK;
    d->orig.free(d->orig.ctx, ptr);
    tg_tls.busy = 0;
}

/* Plain mode's free for the GIL domains (see tg_hook_malloc_gil_plain_of): a
 * block the program frees, entered with at most TG_HOOK_SMALL_MAX bytes, is
 * counted and freed by a tail call without the busy bit (as
 * tg_hook_free_gil_fast does), a larger one with it; anything else goes to
 * the general path.  The word taken is the block's size as the plain hooks
 * entered it: no accounting bits to mask (plain mode runs without accounting,
 * and the table is cleared at every uninstall). */
static inline __attribute__((always_inline)) void
tg_hook_free_gil_plain_of(int i, void *ctx, void *ptr)
{
    struct tg_hook_domain *d = &tg_domains[i];  /* CTX, at a fixed address */
    size_t w1, size;

    if (__builtin_expect(!tg_hook_gil_fast_ok(0), 0) || ptr == NULL
            || (w1 = tg_ptrtable_gil_take((uintptr_t)ptr, NULL)) == 0) {
        tg_hook_free_gil_general(ctx, ptr);
        return;
    }
    size = w1 - 1;
    tg_tls.freed += (int64_t)size;
    if (__builtin_expect(size <= TG_HOOK_SMALL_MAX, 1)) {
        d->orig.free(d->orig.ctx, ptr);
        return;
    }
    tg_hook_free_gil_plain_large(i, ptr);
}

/* The free's fast path is a leaf with tail calls, which saves no register:
 * it shares one function with the test that picks it (no jump between them,
 * one read of the thread-local block's address). */
static inline __attribute__((always_inline)) void
tg_hook_free_gil_of(int i, void *ctx, void *ptr)
{
    struct tg_hook_domain *d = &tg_domains[i];  /* CTX, at a fixed address */

    if (__builtin_expect(!tg_hook_gil_fast_on(), 0)) {
        tg_hook_fast_refresh();
        tg_hook_free_gil_general(ctx, ptr);
        return;
    }
    switch (tg_hook_gil_fast_free(ptr)) {  /* 0 when PTR is NULL */
    case 1:
        /* A block pymalloc serves itself (TG_HOOK_SMALL_MAX): no nested
         * hooked call to keep from counting, so no busy bit, and a tail call
         * through the fixed address. */
        d->orig.free(d->orig.ctx, ptr);
        return;
    case 2:  /* a larger one: with the busy bit, as plain mode's */
        tg_hook_free_gil_plain_large(i, ptr);
        return;
    default:
        tg_hook_free_gil_general(ctx, ptr);
    }
}

/* The malloc and free of both modes for the GIL domain whose wrapper is
 * tg_domains[I], as functions of their own (see tg_hook_malloc_gil_of), and
 * the table tg_hooks_install picks them from. */
struct tg_gil_dom_hooks {
    void *(*sampled_malloc)(void *, size_t);
    void (*sampled_free)(void *, void *);
    void *(*plain_malloc)(void *, size_t);
    void (*plain_free)(void *, void *);
};

#define TG_GIL_DOM_HOOKS(NAME, I, ATTR) \
    static ATTR void *tg_hook_malloc_gil_##NAME(void *ctx, size_t size) \
    { return tg_hook_malloc_gil_of(I, ctx, size); } \
    static ATTR void tg_hook_free_gil_##NAME(void *ctx, void *ptr) \
    { tg_hook_free_gil_of(I, ctx, ptr); } \
    static ATTR TG_NO_SLP void *tg_hook_malloc_gil_plain_##NAME(void *ctx, size_t size) \
    { return tg_hook_malloc_gil_plain_of(I, ctx, size); } \
    static ATTR void tg_hook_free_gil_plain_##NAME(void *ctx, void *ptr) \
    { tg_hook_free_gil_plain_of(I, ctx, ptr); }

#define TG_GIL_DOM_HOOKS_ENTRY(NAME) \
    { tg_hook_malloc_gil_##NAME, tg_hook_free_gil_##NAME, \
      tg_hook_malloc_gil_plain_##NAME, tg_hook_free_gil_plain_##NAME }

TG_GIL_DOM_HOOKS(mem, TG_DOM_MEM, )
TG_GIL_DOM_HOOKS(obj, TG_DOM_OBJ, )

static const struct tg_gil_dom_hooks tg_gil_dom_hooks[3] = {
    [TG_DOM_MEM] = TG_GIL_DOM_HOOKS_ENTRY(mem),
    [TG_DOM_OBJ] = TG_GIL_DOM_HOOKS_ENTRY(obj),
};

/* The same hooks compiled for processors with BMI2 (x86-64 since 2013), picked
 * at install when the processor has it (tg_gil_dom_hooks_for): the page
 * map's key, the block's address rotated, is one rorx into another register
 * where the baseline copies the address first and rotates the copy, one
 * instruction in each malloc and free (sampled mode's common paths: 30 and
 * 21 instructions become 29 and 20).  The rest of the module stays baseline
 * x86-64. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__BMI2__)
#define TG_HOOKS_BMI2 1
#define TG_TARGET_BMI2 __attribute__((target("bmi2")))
TG_GIL_DOM_HOOKS(mem_bmi2, TG_DOM_MEM, TG_TARGET_BMI2)
TG_GIL_DOM_HOOKS(obj_bmi2, TG_DOM_OBJ, TG_TARGET_BMI2)

static const struct tg_gil_dom_hooks tg_gil_dom_hooks_bmi2[3] = {
    [TG_DOM_MEM] = TG_GIL_DOM_HOOKS_ENTRY(mem_bmi2),
    [TG_DOM_OBJ] = TG_GIL_DOM_HOOKS_ENTRY(obj_bmi2),
};
#endif

/* Whether the BMI2 copies are taken: THREADGRAPH_NO_BMI2 set in the
 * environment (not empty) keeps the baseline ones, for tests and
 * comparisons.  Decided once: the environment at the first install counts
 * (a forked child's hooks are its parent's).  GIL held. */
static int
tg_hooks_use_bmi2(void)
{
#ifdef TG_HOOKS_BMI2
    static int bmi2 = -1;  /* GIL held */
    if (bmi2 < 0) {
        const char *off = getenv("THREADGRAPH_NO_BMI2");
        __builtin_cpu_init();
        bmi2 = (off == NULL || off[0] == '\0') && __builtin_cpu_supports("bmi2");
    }
    return bmi2;
#else
    return 0;
#endif
}

const char *
tg_hooks_gil_copies(void)
{
    return tg_hooks_use_bmi2() ? "bmi2" : "baseline";
}

/* The GIL domain I's hooks for this processor. */
static const struct tg_gil_dom_hooks *
tg_gil_dom_hooks_for(int i)
{
#ifdef TG_HOOKS_BMI2
    if (tg_hooks_use_bmi2())
        return &tg_gil_dom_hooks_bmi2[i];
#endif
    return &tg_gil_dom_hooks[i];
}

/* Whether D's wrapper is in its domain's allocator chain, on top or wrapped
 * by another tool (tracemalloc started after enable): a one-byte allocation
 * through the domain's entry point with TG_BUSY_PROBE set, which the
 * wrapper notes and passes through uncounted, freed with TG_BUSY_HOOK (passed
 * through as well).  GIL held. */
static int
tg_hooks_in_chain(const struct tg_hook_domain *d)
{
    int saved = tg_tls.busy, seen;
    void *p;

    tg_hooks_probe_seen = 0;
    tg_tls.busy = saved | TG_BUSY_PROBE;
    p = d->domain == PYMEM_DOMAIN_RAW ? PyMem_RawMalloc(1)
        : d->domain == PYMEM_DOMAIN_MEM ? PyMem_Malloc(1) : PyObject_Malloc(1);
    seen = (tg_hooks_probe_seen >> d->domain) & 1;
    tg_tls.busy = saved | TG_BUSY_HOOK;
    if (d->domain == PYMEM_DOMAIN_RAW)
        PyMem_RawFree(p);
    else if (d->domain == PYMEM_DOMAIN_MEM)
        PyMem_Free(p);
    else
        PyObject_Free(p);
    tg_tls.busy = saved;
    return seen;
}

/* Put D's wrapper on top of its domain's current allocator, which it then
 * calls down to.  GIL held. */
static void
tg_hooks_push(struct tg_hook_domain *d)
{
    PyMem_GetAllocator(d->domain, &d->orig);
    PyMem_SetAllocator(d->domain, &d->ours);
}

int
tg_hooks_lift(void)
{
    int i;

    if (!tg_installed || !atomic_load(&tg_tracking))
        return 0;
    for (i = 0; i < 3; i++) {
        PyMemAllocatorEx cur;
        PyMem_GetAllocator(tg_domains[i].domain, &cur);
        if (cur.malloc != tg_domains[i].ours.malloc || cur.ctx != &tg_domains[i])
            return 0;
    }
    for (i = 0; i < 3; i++)
        PyMem_SetAllocator(tg_domains[i].domain, &tg_domains[i].orig);
    return 1;
}

int
tg_hooks_rehook(void)
{
    int i, n = 0;

    if (!tg_installed || !atomic_load(&tg_tracking))
        return 0;
    for (i = 0; i < 3; i++) {
        if (!tg_hooks_in_chain(&tg_domains[i])) {
            tg_hooks_push(&tg_domains[i]);
            n++;
        }
    }
    return n;
}

int
tg_hooks_install(int count_total)
{
    static const PyMemAllocatorDomain domains[3] = {
        PYMEM_DOMAIN_RAW, PYMEM_DOMAIN_MEM, PYMEM_DOMAIN_OBJ
    };
    int i, fast = !count_total && atomic_load(&tg_acct_on);

    tg_hooks_count_total = count_total;
    atomic_store(&tg_process_total, 0);
    atomic_store(&tg_tracking, 1);
    atomic_store(&tg_plain, !count_total && !atomic_load(&tg_acct_on));
    atomic_store(&tg_plain_key, atomic_load(&tg_plain) ? 0 : -1);
    (void)pthread_once(&tg_hooks_fork_once, tg_hooks_fork_init);
    tg_arena_hook_install();  /* the map's memory goes back with the arenas */
    /* The key last: what the fast paths read is set.  Accounting's light
     * generation is not that of any state unless sampled mode runs. */
    if (fast && tg_ptrpage_reserve(&tg_ptrpage_gil) == 0 && !tg_ptrtable_gil.unmarked)
        atomic_store(&tg_gil_fast_key, tg_hook_fast_word(atomic_load(&tg_acct_light_gen)));
    else
        atomic_store(&tg_gil_fast_key, TG_GIL_FAST_OFF);
    for (i = 0; i < 3; i++) {
        struct tg_hook_domain *d = &tg_domains[i];
        /* Still in another allocator's chain since last time (tracemalloc
         * started while we recorded, not stopped yet): kept, and passes
         * through no more.  A wrapper that tool took out of the chain with
         * it (tracemalloc started before that run) is put back. */
        d->domain = domains[i];
        if (tg_installed && tg_hooks_in_chain(d))
            continue;
        d->table = d->domain == PYMEM_DOMAIN_RAW ? &tg_ptrtable_raw : &tg_ptrtable_gil;
        PyMem_GetAllocator(d->domain, &d->orig);
        d->ours.ctx = d;
        if (d->domain == PYMEM_DOMAIN_RAW) {
            d->ours.malloc = tg_hook_malloc_raw;
            d->ours.calloc = tg_hook_calloc_raw;
            d->ours.realloc = tg_hook_realloc_raw;
            d->ours.free = tg_hook_free_raw;
        } else {
            /* Plain mode's hooks, or sampled mode's fast paths; without
             * either (full mode), the general hooks directly: no test that
             * would fail on every call.  (Hooks that stay in the
             * chain from an earlier run, see above, keep their functions:
             * either kind counts every mode exactly.) */
            int plain = atomic_load(&tg_plain);
            const struct tg_gil_dom_hooks *h = tg_gil_dom_hooks_for(i);
            d->ours.malloc = plain ? h->plain_malloc
                             : fast ? h->sampled_malloc : tg_hook_malloc_gil_general;
            d->ours.calloc = plain ? tg_hook_calloc_gil_plain
                             : fast ? tg_hook_calloc_gil_sampled : tg_hook_calloc_gil_general;
            d->ours.realloc = plain ? tg_hook_realloc_gil_plain
                              : fast ? tg_hook_realloc_gil_sampled : tg_hook_realloc_gil_general;
            d->ours.free = plain ? h->plain_free
                           : fast ? h->sampled_free : tg_hook_free_gil_general;
        }
        tg_hooks_push(d);
    }
    tg_installed = 1;
    return 0;
}

void
tg_hooks_uninstall(void)
{
    int i, all_ours = 1;

    if (!tg_installed)
        return;
    for (i = 0; i < 3; i++) {
        PyMemAllocatorEx cur;
        PyMem_GetAllocator(tg_domains[i].domain, &cur);
        if (cur.malloc != tg_domains[i].ours.malloc || cur.ctx != &tg_domains[i])
            all_ours = 0;
    }
    if (all_ours) {
        for (i = 0; i < 3; i++)
            PyMem_SetAllocator(tg_domains[i].domain, &tg_domains[i].orig);
        tg_installed = 0;
    }
    /* Otherwise something (tracemalloc) wrapped our wrappers: they must stay in
     * the chain, and pass through from now on. */
    atomic_store(&tg_plain_key, -1);
    atomic_store(&tg_plain, 0);
    atomic_store(&tg_gil_fast_key, TG_GIL_FAST_OFF);
    atomic_store(&tg_tracking, 0);
    tg_hooks_count_total = 0;
    tg_ptrtable_clear();
}
