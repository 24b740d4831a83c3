/*
 * native.h - native memory (enable(..., native=True)): malloc and its family and
 * anonymous mmap/munmap/mremap, counted into the calling thread's counters, the
 * process total and allocation accounting exactly like the Python allocator
 * domains (alloc_hooks.h).
 *
 * Mechanism: the relocations (PLT/GOT slots) that bind the allocator symbols in
 * every loaded ELF object, except this extension, libc, the dynamic loader and
 * any object that defines the allocator itself (an interposed malloc, ASan), are
 * pointed at our hooks; dlopen/dlmopen are hooked the same way so that objects
 * loaded later are patched too.  Disable writes the real functions back.  The
 * hooks call the real functions resolved with dlsym(RTLD_DEFAULT), so a block is
 * always released by the allocator that made it, whatever the patch state.
 *
 * Sizes: a malloc-family block is entered in the raw-domain pointer table
 * (ptrtable.h) with its requested size, so that its free is credited exactly and a
 * free of a block the hooks did not see counts 0; anonymous mappings are kept as
 * page-rounded address ranges (native.c), so a partial munmap credits the pages
 * it removes.
 *
 * Double counting: the Python domain wrappers mark the thread TG_BUSY_HOOK while
 * they call down (raw domain, pymalloc's arenas), and the native hooks pass such
 * calls through; the tracer's own work (TG_BUSY_TRACER) is not counted either.
 */
#ifndef TG_NATIVE_H
#define TG_NATIVE_H

#include "tg_compat.h"

#pragma GCC visibility push(hidden)

/* Patch the loaded objects and start counting (GIL held, the Python domain hooks
 * installed).  Returns 0, or -1 with a Python exception set and nothing patched. */
int tg_native_install(void);
/* Stop counting and write the real functions back into every patched slot; the
 * address ranges of mappings are forgotten (GIL held).  A no-op when not
 * installed.  Blocks allocated through a hook stay valid: the hooks only ever
 * called the real allocator. */
void tg_native_uninstall(void);
/* Number of relocation slots that currently point at our hooks (GIL held); for
 * tests and diagnostics. */
long tg_native_patched_slots(void);

#pragma GCC visibility pop

#endif /* TG_NATIVE_H */
