/*
 * native.c - native memory hooks and the ELF relocation patcher (see native.h).
 *
 * Three parts:
 *  - the hooks: malloc, calloc, realloc, reallocarray, free, posix_memalign,
 *    aligned_alloc, memalign, valloc, mmap/mmap64, munmap, mremap, and
 *    dlopen/dlmopen (which re-patch after loading), and dlsym (x86-64), which
 *    hands out our hooks for the allocator functions (ctypes takes them so);
 *  - the mapping table: anonymous mappings as disjoint page ranges with their
 *    accounting site, in a balanced tree (nat_maps.c: O(log n) per mmap or
 *    munmap, however many are live), under one mutex held across the system
 *    call (mmap is a system call already, and holding the lock keeps an address
 *    that the kernel hands out again from being entered before its old range
 *    left the table);
 *  - the patcher: dl_iterate_phdr over the loaded objects, and in each the
 *    JUMP_SLOT, GLOB_DAT and absolute relocations naming one of our symbols
 *    (read once per object and kept, nat_objs.c: a dlopen's walk then costs a
 *    few slot checks per object already loaded).
 *
 * What is not seen (docs/api.md "Native memory"): allocations libc makes for
 * itself or on the program's behalf (strdup, fopen, getline: libc calls its own
 * malloc directly); static binaries and objects that reach the allocator through
 * a private table or raw system calls; the allocations of an object's
 * constructors that run inside dlopen before we patch it.  The hooks never call
 * Python, never take the GIL, and work in threads Python does not know.
 */
#define _GNU_SOURCE 1  /* as pyconfig.h defines it: no redefinition warning */
#include "native.h"
#include "hook_count.h"
#include "nat_maps.h"
#include "nat_objs.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__)
#define TG_NAT_R_JUMP R_X86_64_JUMP_SLOT
#define TG_NAT_R_GLOB R_X86_64_GLOB_DAT
#define TG_NAT_R_ABS R_X86_64_64
#define TG_NAT_R_RELATIVE R_X86_64_RELATIVE
#define TG_NAT_SUPPORTED 1
#elif defined(__aarch64__)
#define TG_NAT_R_JUMP R_AARCH64_JUMP_SLOT
#define TG_NAT_R_GLOB R_AARCH64_GLOB_DAT
#define TG_NAT_R_ABS R_AARCH64_ABS64
#define TG_NAT_R_RELATIVE R_AARCH64_RELATIVE
#define TG_NAT_SUPPORTED 1
#else
#define TG_NAT_SUPPORTED 0   /* tg_native_install refuses; the values are unused */
#define TG_NAT_R_JUMP 0xfffffffdul
#define TG_NAT_R_GLOB 0xfffffffeul
#define TG_NAT_R_ABS 0xffffffful
#define TG_NAT_R_RELATIVE 0xfffffffcul
#endif

#define TG_RELAXED memory_order_relaxed

/* Whether the hooks count; written with the GIL (install/uninstall), read by
 * the hooks in any thread (relaxed: a hook racing with the switch counts or not,
 * both safe because the real functions are always the ones called). */
static _Atomic int tg_nat_on;
/* Page size, set at the first install (GIL), then read-only. */
static size_t tg_nat_page;

/* --- the real functions ---------------------------------------------------- */

/* Resolved once at the first install (GIL), then read-only. */
static struct {
    void *(*malloc)(size_t);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void *(*reallocarray)(void *, size_t, size_t);
    void (*free)(void *);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*mmap)(void *, size_t, int, int, int, off_t);
    void *(*mmap64)(void *, size_t, int, int, int, off_t);
    int (*munmap)(void *, size_t);
    void *(*mremap)(void *, size_t, size_t, int, ...);
    void *(*dlopen)(const char *, int);
    void *(*dlmopen)(Lmid_t, const char *, int);
    void *(*dlsym)(void *, const char *);
} tg_real;

/* --- counting ---------------------------------------------------------------- */

/* Whether a hook passes the call through uncounted: the call comes from inside a
 * Python domain wrapper (already counted there), or counting is off. */
static inline int
tg_nat_skip(void)
{
    return (tg_tls.busy & TG_BUSY_HOOK) || !atomic_load_explicit(&tg_nat_on, TG_RELAXED);
}

/* A new block P of SIZE bytes (not NULL): entered and counted, unless the tracer
 * itself allocated it. */
static inline void
tg_nat_note_alloc(void *p, size_t size)
{
    if (tg_tls.busy & (TG_BUSY_TRACER | TG_BUSY_HOOK))
        return;
    tg_hook_entry_insert(&tg_ptrtable_raw, p, size, 0);
    tg_hook_account((int64_t)size, 0);
}

/* Block P (not NULL) is about to be released: its entry leaves the table first
 * (afterwards another thread could get the same address and enter it). */
static inline void
tg_nat_note_free(void *p)
{
    int tracer = tg_tls.busy & TG_BUSY_TRACER;
    size_t word;

    if (!tg_ptrtable_remove(&tg_ptrtable_raw, p, &word))
        return;  /* allocated before enable, by libc itself, or by the tracer */
    word = tg_hook_entry_free(word, !tracer);
    if (!tracer)
        tg_hook_account(0, (int64_t)word);
}

/* --- malloc family ------------------------------------------------------------ */

/* Each hook has the contract of the function it replaces and calls the real one;
 * around it, the block is entered and counted (or removed and credited) unless
 * tg_nat_skip() says the call is not ours to count.  errno is the real call's. */

static void *
tg_nat_malloc(size_t size)
{
    void *p = tg_real.malloc(size);
    if (p != NULL && !tg_nat_skip())
        tg_nat_note_alloc(p, size);
    return p;
}

static void *
tg_nat_calloc(size_t n, size_t m)
{
    void *p = tg_real.calloc(n, m);
    /* The allocator checked n * m for overflow before succeeding. */
    if (p != NULL && !tg_nat_skip())
        tg_nat_note_alloc(p, n * m);
    return p;
}

static void
tg_nat_free(void *ptr)
{
    if (ptr != NULL && !tg_nat_skip())
        tg_nat_note_free(ptr);
    tg_real.free(ptr);
}

/* realloc (FN NULL) and reallocarray (FN the real one, called with N and M, whose
 * product SIZE did not overflow): the old block's entry leaves the table before
 * the call and comes back if the call fails; returns what the real call did. */
static void *
tg_nat_realloc_common(void *ptr, size_t size, void *(*fn)(void *, size_t, size_t),
                      size_t n, size_t m)
{
    int tracer = tg_tls.busy & TG_BUSY_TRACER;
    size_t old = 0;
    int known = 0;
    void *p;

    if (ptr != NULL)
        known = tg_ptrtable_remove(&tg_ptrtable_raw, ptr, &old);
    p = fn != NULL ? fn(ptr, n, m) : tg_real.realloc(ptr, size);
    if (p == NULL && !(ptr != NULL && size == 0)) {
        if (known)  /* failed: the old block is untouched */
            tg_ptrtable_insert(&tg_ptrtable_raw, ptr, old);
        return NULL;
    }
    /* The old block is gone (moved, resized, or freed by realloc(p, 0)); an
     * unknown one counts 0, like its free would. */
    if (known) {
        old = tg_hook_entry_free(old, !tracer);
        if (!tracer)
            tg_hook_account(0, (int64_t)old);
    }
    if (p != NULL)
        tg_nat_note_alloc(p, size);
    return p;
}

static void *
tg_nat_realloc(void *ptr, size_t size)
{
    if (tg_nat_skip())
        return tg_real.realloc(ptr, size);
    return tg_nat_realloc_common(ptr, size, NULL, 0, 0);
}

static void *
tg_nat_reallocarray(void *ptr, size_t n, size_t m)
{
    size_t size;
    if (tg_nat_skip() || __builtin_mul_overflow(n, m, &size))
        return tg_real.reallocarray(ptr, n, m);
    return tg_nat_realloc_common(ptr, size, tg_real.reallocarray, n, m);
}

static int
tg_nat_posix_memalign(void **out, size_t align, size_t size)
{
    int rc = tg_real.posix_memalign(out, align, size);
    if (rc == 0 && *out != NULL && !tg_nat_skip())
        tg_nat_note_alloc(*out, size);
    return rc;
}

static void *
tg_nat_aligned_alloc(size_t align, size_t size)
{
    void *p = tg_real.aligned_alloc(align, size);
    if (p != NULL && !tg_nat_skip())
        tg_nat_note_alloc(p, size);
    return p;
}

static void *
tg_nat_memalign(size_t align, size_t size)
{
    void *p = tg_real.memalign(align, size);
    if (p != NULL && !tg_nat_skip())
        tg_nat_note_alloc(p, size);
    return p;
}

static void *
tg_nat_valloc(size_t size)
{
    void *p = tg_real.valloc(size);
    if (p != NULL && !tg_nat_skip())
        tg_nat_note_alloc(p, size);
    return p;
}

/* --- the mapping table ------------------------------------------------------ */

/* Guards tg_maps; held across the mapping system calls.  Taken before fork()
 * and released after it in both processes (atfork handlers). */
static pthread_mutex_t tg_maps_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tg_nat_maps tg_maps = TG_NAT_MAPS_INIT;  /* guarded by tg_maps_lock */

static inline uintptr_t
tg_nat_page_up(size_t len)
{
    return ((uintptr_t)len + tg_nat_page - 1) & ~(uintptr_t)(tg_nat_page - 1);
}

/* Credit BYTES of a range of site SID as released; the thread too if *CTX (an
 * int, "count the thread") is non-zero. */
static void
tg_maps_credit(size_t bytes, uint32_t sid, void *ctx)
{
    int count_thread = *(const int *)ctx;

    if (atomic_load_explicit(&tg_acct_on, TG_RELAXED))
        tg_acct_free((uint64_t)bytes | ((uint64_t)sid << TG_ACCT_SIZE_BITS), count_thread);
    if (count_thread)
        tg_hook_account(0, (int64_t)bytes);
}

/* The pages [A, A + LEN rounded up) are no longer mapped: credit what of them
 * the table holds and cut them out of it (tg_maps_lock held).  Returns the bytes
 * credited. */
static size_t
tg_maps_release_unlocked(uintptr_t a, size_t len, int count_thread)
{
    return tg_nat_maps_release(&tg_maps, a, a + tg_nat_page_up(len), tg_maps_credit,
                               &count_thread);
}

/* A new anonymous mapping [P, P + LEN rounded up): counted and entered
 * (tg_maps_lock held; not for the tracer's own mappings).  Out of memory, the
 * range is not entered: its munmap will count 0. */
static void
tg_maps_add_unlocked(void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p, n = tg_nat_page_up(len);
    uint32_t sid = 0;

    tg_maps_release_unlocked(a, n, 1);  /* a stale range we missed the end of */
    if (atomic_load_explicit(&tg_acct_on, TG_RELAXED))
        sid = (uint32_t)(tg_acct_alloc(n) >> TG_ACCT_SIZE_BITS);
    tg_hook_account((int64_t)n, 0);
    (void)tg_nat_maps_insert(&tg_maps, a, a + n, sid);
}

/* Forget every range (GIL, at uninstall: the hooks no longer count). */
static void
tg_maps_clear(void)
{
    pthread_mutex_lock(&tg_maps_lock);
    tg_nat_maps_clear(&tg_maps);
    pthread_mutex_unlock(&tg_maps_lock);
}

/* --- mapping hooks ------------------------------------------------------------- */

/* mmap and mmap64 (the same function in glibc, two in a sanitizer's runtime):
 * FN is the real one to call. */
static inline void *
tg_nat_mmap_common(void *(*fn)(void *, size_t, int, int, int, off_t), void *addr, size_t len,
                   int prot, int flags, int fd, off_t off)
{
    int busy = tg_tls.busy;
    void *p;

    /* A file mapping placed by the kernel cannot cover a range of ours. */
    if (tg_nat_skip() || !(flags & (MAP_ANONYMOUS | MAP_FIXED)))
        return fn(addr, len, prot, flags, fd, off);
    pthread_mutex_lock(&tg_maps_lock);
    p = fn(addr, len, prot, flags, fd, off);
    if (p != MAP_FAILED) {
        if (flags & MAP_FIXED)  /* the pages it replaced are released */
            tg_maps_release_unlocked((uintptr_t)p, len, !(busy & TG_BUSY_TRACER));
        if ((flags & MAP_ANONYMOUS) && !busy)
            tg_maps_add_unlocked(p, len);
    }
    pthread_mutex_unlock(&tg_maps_lock);
    return p;
}

static void *
tg_nat_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return tg_nat_mmap_common(tg_real.mmap, addr, len, prot, flags, fd, off);
}

static void *
tg_nat_mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return tg_nat_mmap_common(tg_real.mmap64, addr, len, prot, flags, fd, off);
}

static int
tg_nat_munmap(void *addr, size_t len)
{
    int busy = tg_tls.busy, rc;

    if (tg_nat_skip())
        return tg_real.munmap(addr, len);
    pthread_mutex_lock(&tg_maps_lock);
    rc = tg_real.munmap(addr, len);
    if (rc == 0)
        tg_maps_release_unlocked((uintptr_t)addr, len, !(busy & TG_BUSY_TRACER));
    pthread_mutex_unlock(&tg_maps_lock);
    return rc;
}

static void *
tg_nat_mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
    int busy = tg_tls.busy, save;
    void *new_addr = NULL, *p;
    size_t known;

    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        new_addr = va_arg(ap, void *);
        va_end(ap);
    }
    if (tg_nat_skip())
        return tg_real.mremap(old, old_len, new_len, flags, new_addr);
    pthread_mutex_lock(&tg_maps_lock);
    p = tg_real.mremap(old, old_len, new_len, flags, new_addr);
    save = errno;
    if (p != MAP_FAILED) {
        /* The old range is released; the new one is ours only if the old was
         * (a mapping from before enable stays unknown, however it moves). */
        known = tg_maps_release_unlocked((uintptr_t)old, old_len, !(busy & TG_BUSY_TRACER));
        if (flags & MREMAP_FIXED)
            tg_maps_release_unlocked((uintptr_t)p, new_len, !(busy & TG_BUSY_TRACER));
        if (known > 0 && !busy)
            tg_maps_add_unlocked(p, new_len);
    }
    pthread_mutex_unlock(&tg_maps_lock);
    errno = save;
    return p;
}

/* --- the patcher ----------------------------------------------------------------- */

static void *tg_nat_dlopen(const char *file, int flags);
static void *tg_nat_dlmopen(Lmid_t lmid, const char *file, int flags);
#if defined(__x86_64__)
void *tg_nat_dlsym_entry(void *handle, const char *name);
#define TG_NAT_DLSYM_HOOK ((void *)tg_nat_dlsym_entry)
#else
#define TG_NAT_DLSYM_HOOK NULL   /* not hooked: see tg_nat_dlsym_entry */
#endif

/* The symbols we bind: name, hook, and where the real function goes. */
struct tg_nat_sym {
    const char *name;
    void *hook;
    void **real;
};

static struct tg_nat_sym tg_nat_syms[] = {
    {"malloc", (void *)tg_nat_malloc, (void **)&tg_real.malloc},
    {"calloc", (void *)tg_nat_calloc, (void **)&tg_real.calloc},
    {"realloc", (void *)tg_nat_realloc, (void **)&tg_real.realloc},
    {"reallocarray", (void *)tg_nat_reallocarray, (void **)&tg_real.reallocarray},
    {"free", (void *)tg_nat_free, (void **)&tg_real.free},
    {"posix_memalign", (void *)tg_nat_posix_memalign, (void **)&tg_real.posix_memalign},
    {"aligned_alloc", (void *)tg_nat_aligned_alloc, (void **)&tg_real.aligned_alloc},
    {"memalign", (void *)tg_nat_memalign, (void **)&tg_real.memalign},
    {"valloc", (void *)tg_nat_valloc, (void **)&tg_real.valloc},
    {"mmap", (void *)tg_nat_mmap, (void **)&tg_real.mmap},
    {"mmap64", (void *)tg_nat_mmap64, (void **)&tg_real.mmap64},
    {"munmap", (void *)tg_nat_munmap, (void **)&tg_real.munmap},
    {"mremap", (void *)tg_nat_mremap, (void **)&tg_real.mremap},
    {"dlopen", (void *)tg_nat_dlopen, (void **)&tg_real.dlopen},
    {"dlmopen", (void *)tg_nat_dlmopen, (void **)&tg_real.dlmopen},
    {"dlsym", TG_NAT_DLSYM_HOOK, (void **)&tg_real.dlsym},
};
#define TG_NAT_NSYMS (sizeof(tg_nat_syms) / sizeof(tg_nat_syms[0]))

/* Guards the patching walks (install, uninstall, dlopen from any thread); taken
 * before fork() and released after it (atfork handlers). */
static pthread_mutex_t tg_nat_patch_lock = PTHREAD_MUTEX_INITIALIZER;

enum tg_nat_walk_mode { TG_NAT_PATCH, TG_NAT_RESTORE, TG_NAT_COUNT };

struct tg_nat_walk {
    enum tg_nat_walk_mode mode;
    long slots;            /* slots patched, restored or counted */
};

/* The entry of symbol NAME if we hook it (and its real function exists), else NULL.
 * Relocations name mostly other symbols: the first letter screens them out, and
 * the first two letters most of the rest (memcpy, free_..., pthread_...) before
 * any strcmp call (the install walk read every relocation name that way). */
static const struct tg_nat_sym *
tg_nat_sym_find(const char *name)
{
    size_t i;
    if (name[0] != 'm' && name[0] != 'c' && name[0] != 'r' && name[0] != 'f'
                && name[0] != 'p' && name[0] != 'a' && name[0] != 'v' && name[0] != 'd')
        return NULL;
    for (i = 0; i < TG_NAT_NSYMS; i++) {
        const char *n = tg_nat_syms[i].name;  /* at least two letters */
        if (n[0] == name[0] && n[1] == name[1] && strcmp(name + 2, n + 2) == 0
                && *tg_nat_syms[i].real != NULL && tg_nat_syms[i].hook != NULL)
            return &tg_nat_syms[i];
    }
    return NULL;
}

/* Whether ADDR lies in one of the loadable segments of the object INFO. */
static int
tg_nat_contains(const struct dl_phdr_info *info, uintptr_t addr)
{
    int i;
    for (i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && addr >= lo && addr < lo + ph->p_memsz)
            return 1;
    }
    return 0;
}

/* Objects whose allocator calls are left alone: the loader, libc (its calls are
 * the allocator's own business), this extension, and whatever object defines
 * the malloc or mmap we call (an interposed allocator, a sanitizer runtime). */
static int
tg_nat_skip_object(const struct dl_phdr_info *info)
{
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (strncmp(base, "ld-linux", 8) == 0 || strncmp(base, "ld-musl", 7) == 0
            || strncmp(base, "ld64.so", 7) == 0 || strncmp(base, "libc.so", 7) == 0
            || strncmp(base, "libc-", 5) == 0 || strncmp(base, "linux-vdso", 10) == 0
            || strncmp(base, "linux-gate", 10) == 0)
        return 1;
    return tg_nat_contains(info, (uintptr_t)&tg_nat_skip_object)
           || tg_nat_contains(info, (uintptr_t)tg_real.malloc)
           || tg_nat_contains(info, (uintptr_t)tg_real.mmap);
}

/* A dynamic-section address: glibc relocates most of them in place, some
 * loaders and the vDSO do not. */
static inline uintptr_t
tg_nat_dyn_addr(uintptr_t base, uintptr_t v)
{
    return v < base ? base + v : v;
}

/* Store VAL into SLOT, lifting the read-only protection of RELRO pages for the
 * write ([RELRO_LO, RELRO_HI) is the object's RELRO range, page-rounded as the
 * loader protected it). */
static void
tg_nat_store(uintptr_t *slot, uintptr_t val, uintptr_t relro_lo, uintptr_t relro_hi)
{
    uintptr_t a = (uintptr_t)slot;
    if (a >= relro_lo && a < relro_hi) {
        void *page = (void *)(a & ~(uintptr_t)(tg_nat_page - 1));
        if (mprotect(page, tg_nat_page, PROT_READ | PROT_WRITE) != 0)
            return;
        __atomic_store_n(slot, val, __ATOMIC_RELEASE);
        mprotect(page, tg_nat_page, PROT_READ);
    } else {
        __atomic_store_n(slot, val, __ATOMIC_RELEASE);
    }
}

/* Patch, restore or count (W's mode) SLOT of the object INFO, which names the
 * hooked function S (JUMP: a JUMP_SLOT). */
static void
tg_nat_apply(struct tg_nat_walk *w, const struct dl_phdr_info *info, uintptr_t *slot,
             const struct tg_nat_sym *s, int jump, uintptr_t relro_lo, uintptr_t relro_hi)
{
    uintptr_t cur = __atomic_load_n(slot, __ATOMIC_RELAXED);
    uintptr_t real = (uintptr_t)*s->real;
    uintptr_t hook = (uintptr_t)s->hook;

    switch (w->mode) {
    case TG_NAT_PATCH:
        /* A slot is ours to take if it holds the real function or, for a
         * lazily bound JUMP_SLOT, its PLT stub (inside the object itself);
         * another tool's hook (memray's, say) stays in place. */
        if (cur != real && !(jump && tg_nat_contains(info, cur)))
            break;
        tg_nat_store(slot, hook, relro_lo, relro_hi);
        w->slots++;
        break;
    case TG_NAT_RESTORE:
        if (cur == hook) {
            tg_nat_store(slot, real, relro_lo, relro_hi);
            w->slots++;
        }
        break;
    case TG_NAT_COUNT:
        w->slots += cur == hook;
        break;
    }
}

/* The N relocations at REL of the object INFO, whose symbols and names are
 * SYMTAB and STRTAB: each that names a hooked function is appended to O, or,
 * when O is NULL, patched, restored or counted (W's mode) at once.  Returns 0,
 * or -1 when O could not grow (the slots found so far stay in O). */
static int
tg_nat_relocs(struct tg_nat_walk *w, const struct dl_phdr_info *info, const ElfW(Rela) *rel,
              size_t n, const ElfW(Sym) *symtab, const char *strtab, uintptr_t relro_lo,
              uintptr_t relro_hi, struct tg_nat_obj *o)
{
    uintptr_t base = info->dlpi_addr;
    size_t i;
    for (i = 0; i < n; i++) {
        unsigned long type = ELF64_R_TYPE(rel[i].r_info);
        unsigned long symi = ELF64_R_SYM(rel[i].r_info);
        const struct tg_nat_sym *s;
        uintptr_t *slot;

        if (symi == 0 || (type != TG_NAT_R_JUMP && type != TG_NAT_R_GLOB && type != TG_NAT_R_ABS))
            continue;
        if (type != TG_NAT_R_JUMP && rel[i].r_addend != 0)
            continue;
        s = tg_nat_sym_find(strtab + symtab[symi].st_name);
        if (s == NULL)
            continue;
        slot = (uintptr_t *)(base + rel[i].r_offset);
        if (o == NULL)
            tg_nat_apply(w, info, slot, s, type == TG_NAT_R_JUMP, relro_lo, relro_hi);
        else if (tg_nat_obj_push(o, slot, (unsigned)(s - tg_nat_syms), type == TG_NAT_R_JUMP) < 0)
            return -1;
    }
    return 0;
}

/* How many of the N relocations at REL to skip: the leading RELATIVE ones, which
 * name no symbol.  The static linker sorts them first and gives their number as
 * DT_RELACOUNT (COUNT, 0 when absent), and they are most of an object's RELA
 * table (NumPy's _multiarray_umath: 4,497 of 4,761; its OpenBLAS: 6,691 of
 * 7,561), so a first walk no longer reads them one by one.  glibc's loader
 * applies that many as RELATIVE without reading their types; COUNT is used
 * when it fits the table and the last relocation it covers is RELATIVE. */
static size_t
tg_nat_relative_prefix(const ElfW(Rela) *rel, size_t n, size_t count)
{
    if (count == 0 || count > n || ELF64_R_TYPE(rel[count - 1].r_info) != TG_NAT_R_RELATIVE)
        return 0;
    return count;
}

/* Guarded by tg_nat_patch_lock: the slots of the objects walks have read since
 * the last unload (nat_objs.h). */
static struct tg_nat_objs tg_nat_objs = TG_NAT_OBJS_INIT;

/* The entry of INFO's object in tg_nat_objs, added (empty) if it has none: NULL
 * when its slots are not known (the C library gives no unload count, SIZE, or
 * out of memory) and must be read from its relocations (*FRESH 0), else the
 * entry, *FRESH 1 when it is new and the caller fills it (tg_nat_patch_lock
 * held). */
static struct tg_nat_obj *
tg_nat_obj_of(const struct dl_phdr_info *info, size_t size, int *fresh)
{
    uintptr_t key = (uintptr_t)info->dlpi_phdr;
    struct tg_nat_obj *o;

    *fresh = 0;
    if (size < offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs) || key == 0)
        return NULL;
    if (info->dlpi_subs != tg_nat_objs.subs) {  /* an object may have been unloaded */
        tg_nat_objs_clear(&tg_nat_objs);
        tg_nat_objs.subs = info->dlpi_subs;
    }
    o = tg_nat_objs_find(&tg_nat_objs, key, info->dlpi_addr);
    if (o != NULL)
        return o->complete ? o : NULL;
    o = tg_nat_objs_add(&tg_nat_objs, key, info->dlpi_addr);
    *fresh = o != NULL;
    return o;
}

/* dl_iterate_phdr callback: walk the relocation slots of one object (ARG is the
 * struct tg_nat_walk); always 0, so that the walk goes on.  An object's
 * relocations are read at its first walk; later walks visit the slots found
 * then (tg_nat_objs), checking each again. */
static int
tg_nat_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct tg_nat_walk *w = arg;
    uintptr_t base = info->dlpi_addr, relro_lo = 0, relro_hi = 0;
    const ElfW(Dyn) *dyn = NULL, *d;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const ElfW(Rela) *jmprel = NULL, *rela = NULL;
    size_t jmprel_sz = 0, rela_sz = 0, rela_n, relative = 0, k;
    int i, pltrel = DT_RELA, fresh;
    struct tg_nat_obj *o;

    o = tg_nat_obj_of(info, size, &fresh);
    if (o != NULL && !fresh) {
        for (k = 0; k < o->n; k++)
            tg_nat_apply(w, info, o->slots[k].slot, &tg_nat_syms[o->slots[k].sym],
                         o->slots[k].jump, o->relro_lo, o->relro_hi);
        return 0;
    }
    /* Decided once per object: an object left alone is kept with no slots. */
    if (tg_nat_skip_object(info)) {
        if (o != NULL)
            o->complete = 1;
        return 0;
    }
    for (i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(base + ph->p_vaddr);
        else if (ph->p_type == PT_GNU_RELRO) {
            relro_lo = (base + ph->p_vaddr) & ~(uintptr_t)(tg_nat_page - 1);
            relro_hi = (base + ph->p_vaddr + ph->p_memsz) & ~(uintptr_t)(tg_nat_page - 1);
        }
    }
    if (o != NULL) {
        o->relro_lo = relro_lo;
        o->relro_hi = relro_hi;
        o->complete = 1;  /* until a push fails below */
    }
    if (dyn == NULL)
        return 0;
    for (d = dyn; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB: symtab = (const void *)tg_nat_dyn_addr(base, d->d_un.d_ptr); break;
        case DT_STRTAB: strtab = (const void *)tg_nat_dyn_addr(base, d->d_un.d_ptr); break;
        case DT_JMPREL: jmprel = (const void *)tg_nat_dyn_addr(base, d->d_un.d_ptr); break;
        case DT_PLTRELSZ: jmprel_sz = d->d_un.d_val; break;
        case DT_PLTREL: pltrel = (int)d->d_un.d_val; break;
        case DT_RELA: rela = (const void *)tg_nat_dyn_addr(base, d->d_un.d_ptr); break;
        case DT_RELASZ: rela_sz = d->d_un.d_val; break;
        case DT_RELACOUNT: relative = d->d_un.d_val; break;
        default: break;
        }
    }
    if (symtab == NULL || strtab == NULL)
        return 0;
    rela_n = rela_sz / sizeof(*rela);
    if (rela != NULL) {
        relative = tg_nat_relative_prefix(rela, rela_n, relative);
        rela += relative;
        rela_n -= relative;
    }
    if (o != NULL) {
        if ((jmprel != NULL && pltrel == DT_RELA
                    && tg_nat_relocs(w, info, jmprel, jmprel_sz / sizeof(*jmprel), symtab,
                                     strtab, relro_lo, relro_hi, o) < 0)
                || (rela != NULL
                    && tg_nat_relocs(w, info, rela, rela_n, symtab, strtab, relro_lo, relro_hi,
                                     o) < 0)) {
            o->complete = 0;  /* out of memory: read the relocations every walk */
            o = NULL;
        } else {
            for (k = 0; k < o->n; k++)
                tg_nat_apply(w, info, o->slots[k].slot, &tg_nat_syms[o->slots[k].sym],
                             o->slots[k].jump, relro_lo, relro_hi);
            return 0;
        }
    }
    if (jmprel != NULL && pltrel == DT_RELA)
        tg_nat_relocs(w, info, jmprel, jmprel_sz / sizeof(*jmprel), symtab, strtab,
                      relro_lo, relro_hi, NULL);
    if (rela != NULL)
        tg_nat_relocs(w, info, rela, rela_n, symtab, strtab, relro_lo, relro_hi, NULL);
    return 0;
}

/* Walk every loaded object in MODE; returns the slots touched. */
static long
tg_nat_walk_all(enum tg_nat_walk_mode mode)
{
    struct tg_nat_walk w = { mode, 0 };
    pthread_mutex_lock(&tg_nat_patch_lock);
    /* A dlopen racing with uninstall must not patch after the restore walk. */
    if (mode != TG_NAT_PATCH || atomic_load_explicit(&tg_nat_on, TG_RELAXED))
        dl_iterate_phdr(tg_nat_object, &w);
    pthread_mutex_unlock(&tg_nat_patch_lock);
    return w.slots;
}

/* dlopen and dlmopen: load, then patch whatever the load brought in. */
static void *
tg_nat_dlopen(const char *file, int flags)
{
    void *h = tg_real.dlopen(file, flags);
    if (h != NULL && atomic_load_explicit(&tg_nat_on, TG_RELAXED))
        tg_nat_walk_all(TG_NAT_PATCH);
    return h;
}

static void *
tg_nat_dlmopen(Lmid_t lmid, const char *file, int flags)
{
    void *h = tg_real.dlmopen(lmid, file, flags);
    if (h != NULL && atomic_load_explicit(&tg_nat_on, TG_RELAXED))
        tg_nat_walk_all(TG_NAT_PATCH);
    return h;
}

/* dlsym: a function pointer taken with dlsym (ctypes.CDLL(None).malloc) would call
 * the allocator directly, so for the functions we hook the caller gets our hook.
 * dlsym(RTLD_NEXT, ...) searches after the *caller's* object, which glibc finds
 * from the return address: the entry below jumps (never calls) to the real dlsym
 * for RTLD_NEXT, so that the return address is still the caller's, and to
 * tg_nat_dlsym for every other handle, whose lookup does not depend on it.
 * x86-64 only (elsewhere dlsym is not hooked, docs/api.md). */
#if defined(__x86_64__)
/* The real dlsym for the entry's RTLD_NEXT jump (a plain symbol the assembly can
 * name); set with tg_real.dlsym. */
__attribute__((visibility("hidden"))) void *(*tg_nat_real_dlsym)(void *, const char *);

__attribute__((visibility("hidden"), used)) void *tg_nat_dlsym(void *handle, const char *name);

/* dlsym for any handle but RTLD_NEXT: the real lookup, with our hook in place
 * of a hooked allocator function while counting is on. */
void *
tg_nat_dlsym(void *handle, const char *name)
{
    void *f = tg_real.dlsym(handle, name);
    size_t i;

    if (f == NULL || !atomic_load_explicit(&tg_nat_on, TG_RELAXED))
        return f;
    for (i = 0; i < TG_NAT_NSYMS; i++)
        if (f == *tg_nat_syms[i].real && tg_nat_syms[i].hook != NULL
                && tg_nat_syms[i].hook != TG_NAT_DLSYM_HOOK)
            return tg_nat_syms[i].hook;
    return f;
}

__asm__(".text\n"
        ".p2align 4\n"
        ".globl tg_nat_dlsym_entry\n"
        ".hidden tg_nat_dlsym_entry\n"
        ".type tg_nat_dlsym_entry, @function\n"
        "tg_nat_dlsym_entry:\n"
        "    cmpq $-1, %rdi\n"                      /* RTLD_NEXT */
        "    je 1f\n"
        "    jmp tg_nat_dlsym\n"
        "1:  jmpq *tg_nat_real_dlsym(%rip)\n"
        ".size tg_nat_dlsym_entry, .-tg_nat_dlsym_entry\n");
#endif

/* --- fork ----------------------------------------------------------------------- */

/* Both locks are held across fork() so that the child never inherits a walk or a
 * table update in progress; the child keeps the patches and the counting state
 * (what it does next is lifecycle.c's: keep counting or uninstall). */
static void
tg_nat_atfork_prepare(void)
{
    pthread_mutex_lock(&tg_nat_patch_lock);
    pthread_mutex_lock(&tg_maps_lock);
}

static void
tg_nat_atfork_release(void)
{
    pthread_mutex_unlock(&tg_maps_lock);
    pthread_mutex_unlock(&tg_nat_patch_lock);
}

/* --- install / uninstall ----------------------------------------------------------- */

/* Resolve the real functions and register the atfork handlers, once.  Returns 0
 * or -1 with an exception. */
static int
tg_nat_init_once(void)
{
    static int done;
    size_t i;

    if (done)
        return 0;
    tg_nat_page = (size_t)sysconf(_SC_PAGESIZE);
    for (i = 0; i < TG_NAT_NSYMS; i++)
        *tg_nat_syms[i].real = dlsym(RTLD_DEFAULT, tg_nat_syms[i].name);
    if (tg_real.malloc == NULL || tg_real.free == NULL || tg_real.calloc == NULL
            || tg_real.realloc == NULL || tg_real.mmap == NULL || tg_real.munmap == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "native=True: cannot find the C library's malloc/free/mmap with dlsym");
        return -1;
    }
#if defined(__x86_64__)
    tg_nat_real_dlsym = tg_real.dlsym;
#endif
    if (pthread_atfork(tg_nat_atfork_prepare, tg_nat_atfork_release, tg_nat_atfork_release) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "native=True: pthread_atfork failed");
        return -1;
    }
    done = 1;
    return 0;
}

int
tg_native_install(void)
{
    if (!TG_NAT_SUPPORTED) {
        PyErr_SetString(PyExc_RuntimeError,
                        "native=True is only supported on x86-64 and aarch64 Linux (ELF)");
        return -1;
    }
    if (tg_nat_init_once() < 0)
        return -1;
    atomic_store(&tg_nat_on, 1);
    tg_nat_walk_all(TG_NAT_PATCH);
    return 0;
}

void
tg_native_uninstall(void)
{
    if (!atomic_load(&tg_nat_on))
        return;
    atomic_store(&tg_nat_on, 0);
    tg_nat_walk_all(TG_NAT_RESTORE);
    pthread_mutex_lock(&tg_nat_patch_lock);
    tg_nat_objs_clear(&tg_nat_objs);
    pthread_mutex_unlock(&tg_nat_patch_lock);
    tg_maps_clear();
}

long
tg_native_patched_slots(void)
{
    if (tg_nat_page == 0)
        return 0;
    return tg_nat_walk_all(TG_NAT_COUNT);
}
