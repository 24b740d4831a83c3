/*
 * nat_maps.c - the table of anonymous mappings as a treap (see nat_maps.h).
 *
 * Nodes live in one array and refer to each other by index, so growing the
 * array (realloc) moves no pointer we hold: every function below keeps indexes,
 * never node pointers, across a call that may allocate.
 */
#include "nat_maps.h"

#include <stdlib.h>

#define N(i) (m->nodes[(i)])

static uint32_t
tg_nat_maps_rand(struct tg_nat_maps *m)
{
    uint32_t x = m->rng;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    m->rng = x;
    return x;
}

/* A free slot's index, or 0 if out of memory. */
static uint32_t
tg_nat_maps_slot(struct tg_nat_maps *m)
{
    uint32_t i = m->free_list;

    if (i != 0) {
        m->free_list = N(i).left;
        return i;
    }
    if (m->used == 0)
        m->used = 1;   /* slot 0 is "none" */
    if (m->used >= m->cap) {
        uint32_t cap = m->cap ? m->cap * 2 : 64;
        struct tg_nat_node *n;
        if (cap <= m->cap)
            return 0;
        n = realloc(m->nodes, (size_t)cap * sizeof(*n));
        if (n == NULL)
            return 0;
        m->nodes = n;
        m->cap = cap;
    }
    return m->used++;
}

/* Split tree T into the nodes with start < KEY (*L) and the others (*R). */
static void
tg_nat_maps_split(struct tg_nat_maps *m, uint32_t t, uintptr_t key, uint32_t *l, uint32_t *r)
{
    if (t == 0) {
        *l = *r = 0;
    } else if (N(t).start < key) {
        tg_nat_maps_split(m, N(t).right, key, &N(t).right, r);
        *l = t;
    } else {
        tg_nat_maps_split(m, N(t).left, key, l, &N(t).left);
        *r = t;
    }
}

/* Join L and R, every start in L below every start in R. */
static uint32_t
tg_nat_maps_merge(struct tg_nat_maps *m, uint32_t l, uint32_t r)
{
    if (l == 0)
        return r;
    if (r == 0)
        return l;
    if (N(l).prio >= N(r).prio) {
        N(l).right = tg_nat_maps_merge(m, N(l).right, r);
        return l;
    }
    N(r).left = tg_nat_maps_merge(m, l, N(r).left);
    return r;
}

/* Put node X into tree T; returns the new root of T. */
static uint32_t
tg_nat_maps_put(struct tg_nat_maps *m, uint32_t t, uint32_t x)
{
    if (t == 0)
        return x;
    if (N(x).prio > N(t).prio) {
        tg_nat_maps_split(m, t, N(x).start, &N(x).left, &N(x).right);
        return x;
    }
    if (N(x).start < N(t).start)
        N(t).left = tg_nat_maps_put(m, N(t).left, x);
    else
        N(t).right = tg_nat_maps_put(m, N(t).right, x);
    return t;
}

/* Take the node starting at KEY out of tree T (it is there); returns the new
 * root of T and its index in *GONE. */
static uint32_t
tg_nat_maps_take(struct tg_nat_maps *m, uint32_t t, uintptr_t key, uint32_t *gone)
{
    if (N(t).start == key) {
        *gone = t;
        return tg_nat_maps_merge(m, N(t).left, N(t).right);
    }
    if (key < N(t).start)
        N(t).left = tg_nat_maps_take(m, N(t).left, key, gone);
    else
        N(t).right = tg_nat_maps_take(m, N(t).right, key, gone);
    return t;
}

int
tg_nat_maps_insert(struct tg_nat_maps *m, uintptr_t start, uintptr_t end, uint32_t sid)
{
    uint32_t x = tg_nat_maps_slot(m);

    if (x == 0)
        return -1;
    N(x).start = start;
    N(x).end = end;
    N(x).sid = sid;
    N(x).prio = tg_nat_maps_rand(m);
    N(x).left = N(x).right = 0;
    m->root = tg_nat_maps_put(m, m->root, x);
    m->count++;
    return 0;
}

/* The range with the lowest start among those ending after A, or 0.  The
 * ranges are disjoint, so ends are in the order of starts. */
static uint32_t
tg_nat_maps_first_after(const struct tg_nat_maps *m, uintptr_t a)
{
    uint32_t t = m->root, best = 0;

    while (t != 0) {
        if (N(t).end > a) {
            best = t;
            t = N(t).left;
        } else {
            t = N(t).right;
        }
    }
    return best;
}

size_t
tg_nat_maps_release(struct tg_nat_maps *m, uintptr_t a, uintptr_t b,
                    tg_nat_credit_fn credit, void *ctx)
{
    size_t total = 0;

    for (;;) {
        uint32_t i = tg_nat_maps_first_after(m, a), gone;
        uintptr_t lo, hi, start, end;
        uint32_t sid;

        if (i == 0 || N(i).start >= b)
            break;
        start = N(i).start;
        end = N(i).end;
        sid = N(i).sid;
        lo = start > a ? start : a;
        hi = end < b ? end : b;
        if (credit != NULL)
            credit(hi - lo, sid, ctx);
        total += hi - lo;
        if (lo > start && hi < end) {   /* a hole: split in two */
            N(i).end = lo;
            (void)tg_nat_maps_insert(m, hi, end, sid);  /* else the tail is forgotten */
            break;
        } else if (lo > start) {        /* its tail: the next range is after it */
            N(i).end = lo;
        } else if (hi < end) {          /* its head: nothing further is inside */
            N(i).start = hi;
            break;
        } else {                        /* all of it */
            m->root = tg_nat_maps_take(m, m->root, start, &gone);
            N(gone).left = m->free_list;
            m->free_list = gone;
            m->count--;
        }
    }
    return total;
}

void
tg_nat_maps_clear(struct tg_nat_maps *m)
{
    free(m->nodes);
    m->nodes = NULL;
    m->cap = m->used = m->free_list = m->root = 0;
    m->count = 0;
}

static int
tg_nat_maps_walk(const struct tg_nat_maps *m, uint32_t t,
                 int (*fn)(uintptr_t, uintptr_t, uint32_t, void *), void *ctx)
{
    if (t == 0)
        return 0;
    if (tg_nat_maps_walk(m, N(t).left, fn, ctx))
        return 1;
    if (fn(N(t).start, N(t).end, N(t).sid, ctx))
        return 1;
    return tg_nat_maps_walk(m, N(t).right, fn, ctx);
}

void
tg_nat_maps_each(const struct tg_nat_maps *m,
                 int (*fn)(uintptr_t start, uintptr_t end, uint32_t sid, void *ctx), void *ctx)
{
    tg_nat_maps_walk(m, m->root, fn, ctx);
}
