/*
 * arena_hook.c - pymalloc's arena allocator, wrapped (arena_hook.h).
 *
 * The page map keeps no count of its entries per page (ptrpage.h): the
 * moment its shadow of some heap can go is the moment the heap goes.
 * pymalloc takes its small blocks from arenas (256 KiB on 3.8-3.9, 1 MiB
 * on 3.10+) and gives an arena back once every block in it is free: every
 * entry of its shadow is 0 again, and those pages of the map can go.  A new
 * arena's shadow is populated at once (tg_ptrpage_prefault): its blocks'
 * entries are about to be written.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "arena_hook.h"
#include "ptrpage.h"

/* The allocator found at install; written once with the GIL, before the
 * wrapper is set, then read-only. */
static PyObjectArenaAllocator tg_arena_orig;
static int tg_arena_installed;  /* GIL */

/* Called by pymalloc inside an allocation, so with the GIL. */
static void *
tg_arena_alloc(void *ctx, size_t size)
{
    void *p = tg_arena_orig.alloc(tg_arena_orig.ctx, size);

    (void)ctx;
    if (p != NULL)
        tg_ptrpage_prefault(&tg_ptrpage_gil, (uintptr_t)p, size);
    return p;
}

/* Called by pymalloc inside a free, so with the GIL, which guards the map. */
static void
tg_arena_free(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    if (ptr != NULL)
        tg_ptrpage_forget(&tg_ptrpage_gil, (uintptr_t)ptr, size);
    tg_arena_orig.free(tg_arena_orig.ctx, ptr, size);
}

void
tg_arena_hook_install(void)
{
    PyObjectArenaAllocator ours = { NULL, tg_arena_alloc, tg_arena_free };

    if (tg_arena_installed)
        return;
    PyObject_GetArenaAllocator(&tg_arena_orig);
    if (tg_arena_orig.alloc == NULL || tg_arena_orig.free == NULL)
        return;  /* none to wrap: not pymalloc's */
    PyObject_SetArenaAllocator(&ours);
    tg_arena_installed = 1;
}
