/*
 * nat_objs.c - the native patcher's table of loaded objects and their slots
 * (see nat_objs.h).  Open addressing with linear probing, grown past half
 * full; entries are only ever added or all cleared, so no deletion.
 */
#include "nat_objs.h"

#include <stdlib.h>
#include <string.h>

#define TG_NAT_OBJS_MIN_CAP 64

static size_t
tg_nat_objs_home(uintptr_t key, size_t mask)
{
    uint64_t h = ((uint64_t)key >> 4) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 29)) & mask;
}

struct tg_nat_obj *
tg_nat_objs_find(struct tg_nat_objs *t, uintptr_t key, uintptr_t base)
{
    size_t i;

    if (t->tab == NULL)
        return NULL;
    for (i = tg_nat_objs_home(key, t->mask); t->tab[i].key != 0; i = (i + 1) & t->mask)
        if (t->tab[i].key == key && t->tab[i].base == base)
            return &t->tab[i];
    return NULL;
}

/* Double T's capacity (or allocate the first array); 0 or -1 (T unchanged). */
static int
tg_nat_objs_grow(struct tg_nat_objs *t)
{
    size_t cap = t->tab ? (t->mask + 1) * 2 : TG_NAT_OBJS_MIN_CAP, i;
    struct tg_nat_obj *tab = calloc(cap, sizeof(*tab));

    if (tab == NULL)
        return -1;
    for (i = 0; t->tab != NULL && i <= t->mask; i++) {
        size_t j;
        if (t->tab[i].key == 0)
            continue;
        for (j = tg_nat_objs_home(t->tab[i].key, cap - 1); tab[j].key != 0; j = (j + 1) & (cap - 1))
            ;
        tab[j] = t->tab[i];
    }
    free(t->tab);
    t->tab = tab;
    t->mask = cap - 1;
    return 0;
}

struct tg_nat_obj *
tg_nat_objs_add(struct tg_nat_objs *t, uintptr_t key, uintptr_t base)
{
    size_t i;

    if ((t->tab == NULL || (t->count + 1) * 2 > t->mask + 1) && tg_nat_objs_grow(t) < 0)
        return NULL;
    for (i = tg_nat_objs_home(key, t->mask); t->tab[i].key != 0; i = (i + 1) & t->mask)
        ;
    memset(&t->tab[i], 0, sizeof(t->tab[i]));
    t->tab[i].key = key;
    t->tab[i].base = base;
    t->count++;
    return &t->tab[i];
}

int
tg_nat_obj_push(struct tg_nat_obj *o, uintptr_t *slot, unsigned sym, int jump)
{
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 4;
        struct tg_nat_slot *s = realloc(o->slots, cap * sizeof(*s));
        if (s == NULL)
            return -1;
        o->slots = s;
        o->cap = cap;
    }
    o->slots[o->n].slot = slot;
    o->slots[o->n].sym = (uint16_t)sym;
    o->slots[o->n].jump = (uint16_t)(jump != 0);
    o->n++;
    return 0;
}

void
tg_nat_objs_clear(struct tg_nat_objs *t)
{
    size_t i;

    for (i = 0; t->tab != NULL && i <= t->mask; i++)
        free(t->tab[i].slots);
    free(t->tab);
    t->tab = NULL;
    t->mask = 0;
    t->count = 0;
}
