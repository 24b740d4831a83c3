/*
 * arena_hook.h - pymalloc's arena allocator, wrapped so that the page map
 * (ptrpage.h) gives back its memory for an arena pymalloc gives back.
 */
#ifndef TG_ARENA_HOOK_H
#define TG_ARENA_HOOK_H

#pragma GCC visibility push(hidden)

/* Put the wrapper in the obj allocator's arena chain, once a process (GIL
 * held).  It stays for the process's life: it passes arenas through to the
 * allocator it found, and only populates the page map's shadow of a new one
 * and forgets that of a freed one (nothing when no map is reserved), so a
 * tool that wraps the arena allocator after it is never taken out of the
 * chain. */
void tg_arena_hook_install(void);

#pragma GCC visibility pop

#endif
