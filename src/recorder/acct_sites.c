/*
 * acct_sites.c - interning of accounting's call sites and their counter
 * chunks (see acct_sites.h).  Pure C.
 */
#include "acct_sites.h"
#include "tg_fnv.h"

#include <stdlib.h>

int
tg_sites_chunk_ensure(struct tg_acct_sites *s, uint32_t sid)
{
    size_t k = sid >> TG_SITE_CHUNK_BITS;
    struct tg_acct_site_ctr *c;
    if (atomic_load_explicit(&s->chunks[k], memory_order_relaxed) != NULL)
        return 0;
    c = calloc(TG_SITE_CHUNK, sizeof(*c));
    if (c == NULL)
        return -1;
    atomic_store_explicit(&s->chunks[k], c, memory_order_release);
    return 0;
}

/* Double an open-addressing table of ids [1, N); REHASH(S, id) gives an id's
 * hash.  0 or -1 (out of memory, the table unchanged). */
static int
tg_idhash_grow(struct tg_acct_sites *s, uint32_t **tab, size_t *mask, size_t n,
               uint64_t (*rehash)(const struct tg_acct_sites *, uint32_t), int nodes)
{
    size_t cap = *tab ? (*mask + 1) * 2 : 1024, i;
    uint32_t *nt = calloc(cap, sizeof(*nt));
    if (nt == NULL)
        return -1;
    for (i = 1; i < n; i++) {
        size_t j;
        if (nodes && s->nodes[i].tix == TG_NODE_FREE)
            continue;  /* a recycled id: in no slot */
        j = rehash(s, (uint32_t)i) & (cap - 1);
        while (nt[j])
            j = (j + 1) & (cap - 1);
        nt[j] = (uint32_t)i;
    }
    free(*tab);
    *tab = nt;
    *mask = cap - 1;
    return 0;
}

static uint64_t
tg_func_rehash(const struct tg_acct_sites *s, uint32_t id)
{
    return s->funcs[id].hash;
}

/* A root's key cannot match a lookup (parent 0); salted with its thread so that
 * the roots of many threads do not pile up in one probe chain. */
static uint64_t
tg_node_rehash(const struct tg_acct_sites *s, uint32_t id)
{
    const struct tg_acct_node *n = &s->nodes[id];
    return n->parent ? tg_sites_node_key_hash(n->fid, n->parent)
                     : tg_sites_node_key_hash(UINT32_MAX, n->tix);
}

uint32_t
tg_sites_func_intern_slow(struct tg_acct_sites *s, const char *file, size_t file_len, long line,
                          const char *func, size_t func_len, int esc)
{
    uint64_t h = tg_fnv1a(TG_FNV_BASIS ^ (uint64_t)line, file, file_len);
    struct tg_acct_func *f;
    size_t j;
    char *mem;

    h = tg_fnv1a(h * 31 + (uint64_t)esc, func, func_len);
    if (s->func_hash != NULL) {
        for (j = h & s->func_hash_mask; s->func_hash[j]; j = (j + 1) & s->func_hash_mask) {
            f = &s->funcs[s->func_hash[j]];
            if (f->hash == h && f->line == line && f->esc == esc && f->file_len == file_len
                    && f->func_len == func_len && memcmp(f->file, file, file_len) == 0
                    && memcmp(f->func, func, func_len) == 0)
                return s->func_hash[j];
        }
    }
    if (s->nfuncs == 0)
        s->nfuncs = 1;  /* id 0 is "no frame" */
    if (s->nfuncs >= UINT32_MAX / 2)
        return 0;
    if (s->nfuncs >= s->funcs_cap) {
        size_t cap = s->funcs_cap ? s->funcs_cap * 2 : 1024;
        struct tg_acct_func *nf = realloc(s->funcs, cap * sizeof(*nf));
        if (nf == NULL)
            return 0;
        s->funcs = nf;
        s->funcs_cap = cap;
    }
    if (s->func_hash == NULL || (s->nfuncs + 1) * 2 > s->func_hash_mask + 1) {
        if (tg_idhash_grow(s, &s->func_hash, &s->func_hash_mask, s->nfuncs, tg_func_rehash, 0) < 0)
            return 0;
    }
    mem = malloc(file_len + func_len + 2);
    if (mem == NULL)
        return 0;
    f = &s->funcs[s->nfuncs];
    f->file = mem;
    memcpy(mem, file, file_len);
    mem[file_len] = '\0';
    f->func = mem + file_len + 1;
    memcpy(f->func, func, func_len);
    f->func[func_len] = '\0';
    f->file_len = file_len;
    f->func_len = func_len;
    f->line = line;
    f->esc = esc;
    f->hash = h;
    for (j = h & s->func_hash_mask; s->func_hash[j]; j = (j + 1) & s->func_hash_mask)
        ;
    s->func_hash[j] = (uint32_t)s->nfuncs;
    return (uint32_t)s->nfuncs++;
}

uint32_t
tg_sites_node_add(struct tg_acct_sites *s, uint32_t parent, uint32_t fid, uint32_t tix,
                  uint64_t h)
{
    size_t j;
    uint32_t id;

    if (s->nfree > 0) {
        /* a recycled id: its counters were zeroed and its chunk published
         * when it was first handed out; its hash slot was emptied */
        id = s->free_ids[--s->nfree];
        s->nodes[id].parent = parent;
        s->nodes[id].fid = fid;
        s->nodes[id].tix = tix;
        tg_sites_ctr(s, id)->tix1 = tix + 1;
        for (j = h & s->node_hash_mask; s->node_hash[j]; j = (j + 1) & s->node_hash_mask)
            ;
        s->node_hash[j] = id;
        return id;
    }
    if (s->nnodes == 0)
        s->nnodes = 1;
    if (s->nnodes >= TG_SITE_NOTHREAD)
        return TG_SITE_FULL;
    if (s->nnodes >= s->nodes_cap) {
        size_t cap = s->nodes_cap ? s->nodes_cap * 2 : 1024;
        struct tg_acct_node *ns = realloc(s->nodes, cap * sizeof(*ns));
        if (ns == NULL)
            return TG_SITE_FULL;
        s->nodes = ns;
        s->nodes_cap = cap;
    }
    if (s->node_hash == NULL || (s->nnodes + 1) * 2 > s->node_hash_mask + 1) {
        if (tg_idhash_grow(s, &s->node_hash, &s->node_hash_mask, s->nnodes, tg_node_rehash, 1) < 0)
            return TG_SITE_FULL;
    }
    if (tg_sites_chunk_ensure(s, (uint32_t)s->nnodes) < 0)
        return TG_SITE_FULL;
    s->nodes[s->nnodes].parent = parent;
    s->nodes[s->nnodes].fid = fid;
    s->nodes[s->nnodes].tix = tix;
    tg_sites_ctr(s, (uint32_t)s->nnodes)->tix1 = tix + 1;
    for (j = h & s->node_hash_mask; s->node_hash[j]; j = (j + 1) & s->node_hash_mask)
        ;
    s->node_hash[j] = (uint32_t)s->nnodes;
    return (uint32_t)s->nnodes++;
}

int
tg_sites_free_reserve(struct tg_acct_sites *s, size_t n)
{
    size_t cap = s->free_cap ? s->free_cap : 64;
    uint32_t *nf;

    while (cap < s->nfree + n)
        cap *= 2;
    if (cap == s->free_cap)
        return 0;
    nf = realloc(s->free_ids, cap * sizeof(*nf));
    if (nf == NULL)
        return -1;
    s->free_ids = nf;
    s->free_cap = cap;
    return 0;
}

void
tg_sites_node_free(struct tg_acct_sites *s, uint32_t id)
{
    size_t mask = s->node_hash_mask, j, k;

    if (s->node_hash == NULL || id == 0 || id >= s->nnodes || s->nodes[id].tix == TG_NODE_FREE
            || s->nfree >= s->free_cap)
        return;
    for (j = tg_node_rehash(s, id) & mask; s->node_hash[j] != id; j = (j + 1) & mask)
        if (s->node_hash[j] == 0)
            return;  /* not in the table: cannot happen, leave it be */
    /* Backward-shift deletion (linear probing, no tombstones): each later
     * entry of the run moves into the hole unless its home slot lies
     * cyclically in (hole, its slot]. */
    for (k = j;;) {
        size_t home;
        k = (k + 1) & mask;
        if (s->node_hash[k] == 0)
            break;
        home = tg_node_rehash(s, s->node_hash[k]) & mask;
        if (((k - home) & mask) >= ((k - j) & mask)) {
            s->node_hash[j] = s->node_hash[k];
            j = k;
        }
    }
    s->node_hash[j] = 0;
    s->nodes[id].parent = 0;
    s->nodes[id].fid = 0;
    s->nodes[id].tix = TG_NODE_FREE;
    s->free_ids[s->nfree++] = id;
    s->recycled = 1;
}

void
tg_sites_reset(struct tg_acct_sites *s)
{
    size_t i;

    for (i = 1; i < s->nfuncs; i++)
        free(s->funcs[i].file);
    free(s->funcs);
    free(s->func_hash);
    free(s->nodes);
    free(s->node_hash);
    free(s->free_ids);
    s->free_ids = NULL;
    s->nfree = s->free_cap = 0;
    s->recycled = 0;
    s->funcs = NULL;
    s->func_hash = NULL;
    s->nodes = NULL;
    s->node_hash = NULL;
    s->nfuncs = s->funcs_cap = s->nnodes = s->nodes_cap = 0;
    memset(s->fcache, 0, sizeof(s->fcache));
    s->func_hash_mask = s->node_hash_mask = 0;
    for (i = 0; i < TG_SITE_NCHUNKS; i++) {
        free(atomic_load(&s->chunks[i]));
        atomic_store(&s->chunks[i], NULL);
    }
}
