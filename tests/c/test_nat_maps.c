/*
 * test_nat_maps.c - the native hooks' mapping table (src/recorder/nat_maps.c)
 * against a model: one slot per page of a small address space holding the site
 * that maps it.  Random maps, partial unmaps (heads, tails, holes, spans over
 * several ranges) and moves (an mremap: release then insert), each followed by a
 * comparison of the whole table with the model; then 100,000 live ranges.
 */
#include "nat_maps.h"
#include "tg_test.h"

#include <stdint.h>
#include <stdlib.h>

#define PAGES 2048

static uint32_t model[PAGES];   /* site + 1 of the page's range, 0 = unmapped */
static uint32_t seen[PAGES];
static uintptr_t last_end;
static int order_ok;

static int
fill(uintptr_t start, uintptr_t end, uint32_t sid, void *ctx)
{
    (void)ctx;
    if (start >= end || start < last_end)
        order_ok = 0;
    last_end = end;
    for (uintptr_t p = start; p < end && p < PAGES; p++)
        seen[p] = sid + 1;
    return 0;
}

static int
same_as_model(const struct tg_nat_maps *m)
{
    memset(seen, 0, sizeof(seen));
    last_end = 0;
    order_ok = 1;
    tg_nat_maps_each(m, fill, NULL);
    return order_ok && memcmp(seen, model, sizeof(seen)) == 0;
}

static void
credit(size_t bytes, uint32_t sid, void *ctx)
{
    size_t *by_sid = ctx;
    by_sid[sid] += bytes;
}

/* Release [A, B) from both; checks the bytes credited per site. */
static void
release_both(struct tg_nat_maps *m, uintptr_t a, uintptr_t b)
{
    size_t got[64] = {0}, want[64] = {0}, total = 0;

    for (uintptr_t p = a; p < b; p++) {
        if (model[p] != 0) {
            want[model[p] - 1]++;
            total++;
            model[p] = 0;
        }
    }
    CHECK_INT(tg_nat_maps_release(m, a, b, credit, got), total);
    CHECK(memcmp(got, want, sizeof(got)) == 0);
}

static void
map_both(struct tg_nat_maps *m, uintptr_t a, uintptr_t b, uint32_t sid)
{
    release_both(m, a, b);
    CHECK_INT(tg_nat_maps_insert(m, a, b, sid), 0);
    for (uintptr_t p = a; p < b; p++)
        model[p] = sid + 1;
}

static void
test_known_shapes(void)
{
    struct tg_nat_maps m = TG_NAT_MAPS_INIT;
    size_t got[64] = {0};

    memset(model, 0, sizeof(model));
    map_both(&m, 100, 200, 1);
    map_both(&m, 300, 400, 2);
    CHECK_INT(m.count, 2);
    release_both(&m, 150, 160);           /* a hole: split */
    CHECK_INT(m.count, 3);
    release_both(&m, 100, 110);           /* a head */
    release_both(&m, 190, 200);           /* a tail */
    release_both(&m, 155, 350);           /* across three ranges */
    CHECK(same_as_model(&m));
    CHECK_INT(m.count, 2);                /* [110,150) and [350,400) */
    CHECK_INT(tg_nat_maps_release(&m, 0, 100, credit, got), 0);   /* nothing there */
    CHECK_INT(tg_nat_maps_release(&m, 150, 350, credit, got), 0);
    release_both(&m, 0, PAGES);
    CHECK_INT(m.count, 0);
    CHECK(same_as_model(&m));
    tg_nat_maps_clear(&m);
    CHECK(m.nodes == NULL && m.root == 0);
}

static void
test_random_against_model(void)
{
    struct tg_nat_maps m = TG_NAT_MAPS_INIT;
    int ok = 1;

    memset(model, 0, sizeof(model));
    srand(23);
    for (int i = 0; i < 20000; i++) {
        uintptr_t a = (uintptr_t)(rand() % PAGES);
        uintptr_t b = a + 1 + (uintptr_t)(rand() % 64);
        if (b > PAGES)
            b = PAGES;
        switch (rand() % 3) {
        case 0:
            map_both(&m, a, b, (uint32_t)(rand() % 64));
            break;
        case 1:
            release_both(&m, a, b);
            break;
        default: {   /* mremap: the old range released, the new one entered */
            uintptr_t c = (uintptr_t)(rand() % (PAGES - 64));
            release_both(&m, a, b);
            map_both(&m, c, c + (b - a), 7);
        }
        }
        if (i % 97 == 0 && !same_as_model(&m))
            ok = 0;
    }
    CHECK(ok);
    CHECK(same_as_model(&m));
    tg_nat_maps_clear(&m);
}

/* Many live ranges: every one found and removed, the slots reused. */
static void
test_many(void)
{
    struct tg_nat_maps m = TG_NAT_MAPS_INIT;
    const uintptr_t n = 100000, page = 4096;
    size_t got[64] = {0}, removed = 0;
    uint32_t cap;

    for (uintptr_t i = 0; i < n; i++)   /* every other page, out of order */
        CHECK_INT(tg_nat_maps_insert(&m, ((i * 7919) % n) * 2 * page,
                                     ((i * 7919) % n) * 2 * page + page, 1), 0);
    CHECK_INT(m.count, n);
    cap = m.cap;
    for (uintptr_t i = 0; i < n; i++) {
        removed += tg_nat_maps_release(&m, i * 2 * page, i * 2 * page + page, credit, got);
        CHECK_INT(tg_nat_maps_insert(&m, i * 2 * page, i * 2 * page + 1, 2), 0);
        removed += tg_nat_maps_release(&m, i * 2 * page, i * 2 * page + page, credit, got);
    }
    CHECK_INT(removed, n * page + n);
    CHECK_INT(m.count, 0);
    CHECK_INT(m.cap, cap);              /* freed slots are reused */
    tg_nat_maps_clear(&m);
}

int
main(void)
{
    test_known_shapes();
    test_random_against_model();
    test_many();
    TG_TEST_DONE();
}
