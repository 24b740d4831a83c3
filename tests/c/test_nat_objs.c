/*
 * test_nat_objs.c - the native patcher's table of loaded objects
 * (src/recorder/nat_objs.c): entries found by program-header address and load
 * address, slots appended in order, growth past the first array (1,000 objects,
 * every one found again with its slots after each growth), and clear.
 */
#include "nat_objs.h"
#include "tg_test.h"

#include <stdint.h>

#define OBJECTS 1000

static uintptr_t slots[8];

int
main(void)
{
    struct tg_nat_objs t = TG_NAT_OBJS_INIT;
    struct tg_nat_obj *o;
    int i, ok;

    CHECK(tg_nat_objs_find(&t, 0x1040, 0x1000) == NULL);   /* empty, no array yet */
    o = tg_nat_objs_add(&t, 0x1040, 0x1000);
    CHECK(o != NULL && o->n == 0 && o->complete == 0 && o->slots == NULL);
    for (i = 0; i < 8; i++)
        CHECK_INT(tg_nat_obj_push(o, &slots[i], (unsigned)i, i & 1), 0);
    CHECK(tg_nat_objs_find(&t, 0x1040, 0x1000) == o);
    CHECK(tg_nat_objs_find(&t, 0x1040, 0x2000) == NULL);   /* same headers, other base */
    CHECK_INT(o->n, 8);
    CHECK(o->slots[5].slot == &slots[5] && o->slots[5].sym == 5 && o->slots[5].jump == 1);
    CHECK(o->slots[6].jump == 0);

    /* Many objects: the array grows several times; every entry keeps its slots. */
    for (i = 1; i <= OBJECTS; i++) {
        o = tg_nat_objs_add(&t, 0x10000u * (uintptr_t)i + 0x40, 0x10000u * (uintptr_t)i);
        CHECK(o != NULL);
        if (o != NULL)
            tg_nat_obj_push(o, &slots[i % 8], (unsigned)i, 0);
    }
    CHECK_INT(t.count, OBJECTS + 1);
    ok = 1;
    for (i = 1; i <= OBJECTS; i++) {
        o = tg_nat_objs_find(&t, 0x10000u * (uintptr_t)i + 0x40, 0x10000u * (uintptr_t)i);
        ok &= o != NULL && o->n == 1 && o->slots[0].slot == &slots[i % 8]
              && o->slots[0].sym == (uint16_t)i;
    }
    CHECK(ok);
    o = tg_nat_objs_find(&t, 0x1040, 0x1000);
    CHECK(o != NULL && o->n == 8);

    tg_nat_objs_clear(&t);
    CHECK_INT(t.count, 0);
    CHECK(tg_nat_objs_find(&t, 0x1040, 0x1000) == NULL);
    o = tg_nat_objs_add(&t, 0x1040, 0x1000);   /* usable again */
    CHECK(o != NULL && o->n == 0);
    tg_nat_objs_clear(&t);
    TG_TEST_DONE();
}
