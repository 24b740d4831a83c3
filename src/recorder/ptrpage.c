/*
 * ptrpage.c - the GIL table's page map (ptrpage.h): its growth, its empty
 * pages and its clearing, out of the hooks' inlined path.
 */
#include "ptrpage.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct tg_ptrpage tg_ptrpage_gil;

static __attribute__((noinline, cold)) struct tg_pp_node **
tg_ptrpage_map_nodes(void)
{
    /* Address space only: pages of it are touched as nodes are entered. */
    void *a = mmap(NULL, TG_PP_NODES * sizeof(struct tg_pp_node *), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return a == MAP_FAILED ? NULL : a;
}

/* Node N has no entry page left: out of the map, kept for reuse or freed. */
static void
tg_ptrpage_node_empty(struct tg_ptrpage *m, struct tg_pp_node *n)
{
    m->nodes[n->index] = NULL;
    if (n->prev != NULL)
        n->prev->next = n->next;
    else
        m->all = n->next;
    if (n->next != NULL)
        n->next->prev = n->prev;
    m->nnodes--;
    if (m->nspare_nodes < TG_PP_SPARE_NODES) {
        n->next = m->spare_nodes;
        n->prev = NULL;
        m->spare_nodes = n;
        m->nspare_nodes++;
    } else {
        free(n);
    }
}

int
tg_ptrpage_reserve(struct tg_ptrpage *m)
{
    if (m->nodes == NULL) {
        if (m->unmapped || (m->nodes = tg_ptrpage_map_nodes()) == NULL) {
            m->unmapped = 1;
            return -1;
        }
    }
    return 0;
}

__attribute__((noinline)) int
tg_ptrpage_set_slow(struct tg_ptrpage *m, uintptr_t p, size_t word)
{
    uint64_t ni = (uint64_t)p >> TG_PP_NODE_SHIFT;
    unsigned pi = (unsigned)(p >> TG_PP_PAGE_SHIFT) & (TG_PP_NODE_PAGES - 1);
    struct tg_pp_node *n;
    struct tg_pp_page *pg;

    if (m->idle > TG_PP_IDLE_MIN && m->idle > m->pages - m->idle)
        tg_ptrpage_trim(m);  /* before N is looked up: it may go */
    if (tg_ptrpage_reserve(m) < 0)  /* e.g. under ulimit -v: not tried per block */
        return -1;
    n = m->nodes[ni];
    if (n == NULL) {
        if (m->spare_nodes != NULL) {
            n = m->spare_nodes;  /* page[] all NULL already */
            m->spare_nodes = n->next;
            m->nspare_nodes--;
            n->prev = NULL;
        } else if ((n = calloc(1, sizeof(*n))) == NULL) {
            return -1;
        }
        n->index = ni;
        n->next = m->all;
        if (m->all != NULL)
            m->all->prev = n;
        m->all = n;
        m->nnodes++;
        m->nodes[ni] = n;
    }
    pg = n->page[pi];
    if (pg == NULL) {
        if (m->spare != NULL) {
            pg = m->spare;
            m->spare = pg->u.next;
            m->nspare--;
            pg->u.next = NULL;
        } else if ((pg = calloc(1, sizeof(*pg))) == NULL) {
            if (n->npages == 0)  /* the node made above: not left empty */
                tg_ptrpage_node_empty(m, n);
            return -1;
        }
        pg->u.live1 = -1;
        n->page[pi] = pg;
        n->npages++;
        m->pages++;
        m->idle++;  /* until tg_ptrpage_set's entry below */
    }
    return tg_ptrpage_set(m, p, word);
}

/* The entry page of node N's page PI has no entry: out of the map. */
static void
tg_ptrpage_page_out(struct tg_ptrpage *m, struct tg_pp_node *n, unsigned pi)
{
    struct tg_pp_page *pg = n->page[pi];

    n->page[pi] = NULL;
    m->pages--;
    m->idle--;
    if (m->nspare < TG_PP_SPARE_MAX) {
        /* word1 is all 0 (live1 was -1): ready for reuse as it is. */
        pg->u.next = m->spare;
        m->spare = pg;
        m->nspare++;
    } else {
        free(pg);
    }
    if (--n->npages == 0)
        tg_ptrpage_node_empty(m, n);
}

__attribute__((noinline, cold)) void
tg_ptrpage_trim(struct tg_ptrpage *m)
{
    struct tg_pp_node *n, *next;
    unsigned pi;

    for (n = m->all; n != NULL && m->idle > 0; n = next) {
        next = n->next;  /* N goes when its last page does */
        for (pi = 0; pi < TG_PP_NODE_PAGES; pi++) {
            if (n->page[pi] != NULL && n->page[pi]->u.live1 < 0) {
                int last = n->npages == 1;
                tg_ptrpage_page_out(m, n, pi);
                if (last)
                    break;
            }
        }
    }
}

void
tg_ptrpage_clear(struct tg_ptrpage *m)
{
    struct tg_pp_node *n, *next;
    struct tg_pp_page *pg, *pnext;
    unsigned pi;

    for (n = m->all; n != NULL; n = next) {
        next = n->next;
        for (pi = 0; pi < TG_PP_NODE_PAGES; pi++)
            free(n->page[pi]);
        free(n);
    }
    for (pg = m->spare; pg != NULL; pg = pnext) {
        pnext = pg->u.next;
        free(pg);
    }
    for (n = m->spare_nodes; n != NULL; n = next) {
        next = n->next;
        free(n);
    }
    if (m->nodes != NULL)
        munmap(m->nodes, TG_PP_NODES * sizeof(struct tg_pp_node *));
    memset(m, 0, sizeof(*m));
}

size_t
tg_ptrpage_entries(const struct tg_ptrpage *m)
{
    const struct tg_pp_node *n;
    size_t count = 0;
    unsigned pi;

    for (n = m->all; n != NULL; n = n->next)
        for (pi = 0; pi < TG_PP_NODE_PAGES; pi++)
            if (n->page[pi] != NULL)
                count += (size_t)(n->page[pi]->u.live1 + 1);
    return count;
}

size_t
tg_ptrpage_bytes(const struct tg_ptrpage *m)
{
    return (m->nnodes + m->nspare_nodes) * sizeof(struct tg_pp_node)
           + (m->pages + m->nspare) * sizeof(struct tg_pp_page);
}
