/*
 * nat_objs.h - the native patcher's memory of the loaded objects: for each ELF
 * object a walk has read, the relocation slots that name one of the hooked
 * functions.
 *
 * Finding those slots means reading every relocation of the object and comparing
 * its symbol's name; the slots themselves are few (0-16 per object).  An object
 * the patcher leaves alone (the loader, libc, the recorder) is kept with none, so
 * that the decision too is made once.  Every
 * dlopen walks all loaded objects again (a walk must also look at the slots of
 * objects whose load was still in progress during an earlier walk), so without
 * this table importing a package with many extension modules (NumPy: ~20) read
 * every relocation of every object once per module.  With it an object's
 * relocations are read once and later walks look only at its slots.
 *
 * Keyed by the address of the object's program headers (dl_phdr_info.dlpi_phdr,
 * inside its mapping, so unique among loaded objects) and its load address; the
 * caller clears the table whenever an object may have been unloaded
 * (dlpi_subs changed), so that a key is never reused for another object.
 * Pure C, no locking: the caller serialises every call (native.c holds
 * tg_nat_patch_lock).  Memory comes from the caller's C library (native.c's own
 * calls are not hooked).
 */
#ifndef TG_NAT_OBJS_H
#define TG_NAT_OBJS_H

#include <stddef.h>
#include <stdint.h>

/* One relocation slot naming a hooked function. */
struct tg_nat_slot {
    uintptr_t *slot;        /* where the loader stores the function's address */
    uint16_t sym;           /* index of the function in native.c's table */
    uint16_t jump;          /* a JUMP_SLOT (may hold the object's own PLT stub) */
};

struct tg_nat_obj {
    uintptr_t key;          /* dlpi_phdr; 0 = empty table entry */
    uintptr_t base;         /* dlpi_addr */
    uintptr_t relro_lo, relro_hi;  /* the object's RELRO pages, [lo, hi) */
    int complete;           /* slots holds all of the object's (0 while it is being
                               filled, or for good after running out of memory) */
    size_t n;               /* slots */
    size_t cap;             /* room in slots */
    struct tg_nat_slot *slots;  /* NULL while cap is 0 */
};

struct tg_nat_objs {
    struct tg_nat_obj *tab; /* open addressing, NULL until the first add */
    size_t mask;            /* capacity - 1 (a power of two) */
    size_t count;           /* objects entered */
    unsigned long long subs;/* dlpi_subs the entries are valid for */
};

#define TG_NAT_OBJS_INIT {NULL, 0, 0, 0}

/* The entry of the object with program headers at KEY loaded at BASE, or NULL. */
struct tg_nat_obj *tg_nat_objs_find(struct tg_nat_objs *t, uintptr_t key, uintptr_t base);

/* A new, empty entry for KEY (not 0, not in T) at BASE; NULL when out of memory
 * (T unchanged).  Entries returned earlier may move: use this one only until the
 * next add. */
struct tg_nat_obj *tg_nat_objs_add(struct tg_nat_objs *t, uintptr_t key, uintptr_t base);

/* Append a slot to O; 0, or -1 when out of memory (O unchanged). */
int tg_nat_obj_push(struct tg_nat_obj *o, uintptr_t *slot, unsigned sym, int jump);

/* Forget every object and free the memory (T stays usable). */
void tg_nat_objs_clear(struct tg_nat_objs *t);

#endif /* TG_NAT_OBJS_H */
