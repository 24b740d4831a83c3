/*
 * acct_sites.h - allocation accounting's call sites: interning of the recorded
 * calls (functions) and of the nodes of each thread's calling-context tree, and
 * the per-node counters the allocator hooks update (docs/accounting.md).
 *
 * A site is a node of its thread's calling-context tree: node = parent node +
 * recorded call; a thread's root node stands for "no python frame" (fid 0,
 * parent 0, found through the thread's state, not in the hash); every other node
 * has a real parent, which makes (parent, fid) its key and gives it its parent's
 * thread.  A parent has a smaller id, unless ids were recycled (RECYCLED in
 * struct tg_acct_sites: a reused id may be smaller than its parent's).
 *
 * Pure C, no Python: tests/c/test_acct_sites.c links acct_sites.c alone.
 *
 * Who touches what (struct tg_acct_sites):
 *  - functions, nodes, their hashes, the function cache and the free list of
 *    recycled node ids: one thread at a time (the recorder holds the GIL when
 *    it interns, recycles (acct_recycle.h) and writes snapshots);
 *  - counter chunks: published with a release store before any id in them is
 *    handed out, then read by the allocator hooks on any thread (acquire) and
 *    never moved or freed until tg_sites_reset;
 *  - counters: written under the hooks' spin lock (acct_state.h), read relaxed.
 */
#ifndef TG_ACCT_SITES_H
#define TG_ACCT_SITES_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#pragma GCC visibility push(hidden)

/* Packing of the site id next to the size in a pointer-table entry: the low
 * TG_ACCT_SIZE_BITS bits are the size, the rest the site id (0 when accounting
 * is off, so the word is then the plain size). */
#define TG_ACCT_SIZE_BITS 44
#define TG_ACCT_SIZE_MASK ((UINT64_C(1) << TG_ACCT_SIZE_BITS) - 1)
#define TG_ACCT_MAX_SITES (1u << (64 - TG_ACCT_SIZE_BITS))
#define TG_ACCT_ENTRY_SIZE(v) ((size_t)((uint64_t)(v) & TG_ACCT_SIZE_MASK))

#define TG_SITE_CHUNK_BITS 12
#define TG_SITE_CHUNK (1u << TG_SITE_CHUNK_BITS)
#define TG_SITE_NCHUNKS (TG_ACCT_MAX_SITES / TG_SITE_CHUNK)
/* Id 0: no site ("unattributed": an allocation sampling skipped, or a block of
 * a time accounting was off); it has no counters.  TG_SITE_NOTHREAD:
 * allocations outside any recorded call by a thread that has not yet made one
 * (its thread is unknown), written as node 0 in snapshots.  The last id collects
 * the nodes that do not fit once the table is full. */
#define TG_SITE_NONE 0u
#define TG_SITE_NOTHREAD (TG_ACCT_MAX_SITES - 2)
#define TG_SITE_FULL (TG_ACCT_MAX_SITES - 1)

/* A node's counters. */
struct tg_acct_site_ctr {
    /* Now: written under the hooks' spin lock (load + store), read relaxed
     * anywhere.  Counts are fixed-point (TG_ACCT_CNT_ONE per block; sampled
     * weights are fractions). */
    _Atomic int64_t alloc_bytes, alloc_count;
    _Atomic int64_t free_bytes, free_count;
    /* The four above at the process peak, valid when stamp is the peak's
     * sequence number (otherwise the site has not changed since the peak).
     * The hooks' spin lock. */
    uint64_t stamp;
    int64_t pk[4];
    /* The node's thread ix + 1 (0: no thread, TG_SITE_NOTHREAD and
     * TG_SITE_FULL), so that a free knows the block's allocating thread
     * (cross-thread frees, acct_state.h).  Written with the GIL when the node is
     * made, before its id is handed out; then read-only until tg_sites_reset. */
    uint32_t tix1;
};

/* A function entry: what the recorder writes for a call. */
struct tg_acct_func {
    char *file, *func;     /* as the recorder passed them (one malloc: file) */
    size_t file_len, func_len;
    long line;
    int esc;               /* file and func still need escaping on output */
    uint64_t hash;
};

/* A calling-context tree node (see the top of the file). */
struct tg_acct_node {
    uint32_t parent;   /* enclosing node, 0 for a root */
    uint32_t fid;      /* the recorded call, 0 for a root */
    uint32_t tix;      /* owner thread's ix; TG_NODE_FREE: a recycled id, on the
                        * free list (tg_sites_node_free) */
};

/* The tix of a node id on the free list: in no thread, in no hash slot. */
#define TG_NODE_FREE UINT32_MAX

/* Direct-mapped cache in front of the function table, keyed by the addresses
 * of the strings the recorder passes (they live in the code object's cache
 * entry or the C function's definition, so they repeat call after call).  A hit
 * is confirmed by comparing the text: a freed code object's address may be
 * reused. */
#define TG_FCACHE_SIZE 4096
struct tg_acct_fcache_entry {
    const char *file, *func;
    long line;
    uint32_t fid;
};

/* The interning tables and the counters of one run.  All zero is the empty
 * state (a static or calloc'd struct is ready to use).  fid 0 and node 0 are
 * "no frame". */
struct tg_acct_sites {
    /* Counter chunks (see the top of the file).  First: the hooks index it
     * from the struct's address with no added offset. */
    struct tg_acct_site_ctr *_Atomic chunks[TG_SITE_NCHUNKS];
    struct tg_acct_func *funcs;           /* [1, nfuncs) */
    size_t nfuncs, funcs_cap;
    uint32_t *func_hash;                  /* open addressing: fid or 0 */
    size_t func_hash_mask;
    struct tg_acct_node *nodes;           /* [1, nnodes) */
    size_t nnodes, nodes_cap;
    uint32_t *node_hash;                  /* open addressing: node id or 0 */
    size_t node_hash_mask;
    /* Recycled node ids (tg_sites_node_free), reused by tg_sites_node_add
     * before a new one; RECYCLED is set once any id was freed: a reused id may
     * then be lower than its parent's (the snapshot orders nodes by depth). */
    uint32_t *free_ids;
    size_t nfree, free_cap;
    int recycled;
    struct tg_acct_fcache_entry fcache[TG_FCACHE_SIZE];
};

/* Counters of node SID, or NULL when none were published (any thread). */
static inline struct tg_acct_site_ctr *
tg_sites_ctr(struct tg_acct_sites *s, uint32_t sid)
{
    struct tg_acct_site_ctr *c =
        atomic_load_explicit(&s->chunks[sid >> TG_SITE_CHUNK_BITS], memory_order_acquire);
    return c ? &c[sid & (TG_SITE_CHUNK - 1)] : NULL;
}

/* Publish counters for SID (allocating its chunk); 0 or -1 (out of memory). */
int tg_sites_chunk_ensure(struct tg_acct_sites *s, uint32_t sid);

/* Free everything S holds and make it empty again.  No hook may be reading its
 * counters (the caller ensures the run is over). */
void tg_sites_reset(struct tg_acct_sites *s);

/* Function id of (FILE, LINE, FUNC) as the recorder passed them (raw bytes;
 * ESC: they still need escaping on output), interned on first sight; 0 when out
 * of memory.  Equal texts give equal ids whatever their addresses. */
uint32_t tg_sites_func_intern_slow(struct tg_acct_sites *s, const char *file, size_t file_len,
                                   long line, const char *func, size_t func_len, int esc);

static inline uint32_t
tg_sites_func_intern(struct tg_acct_sites *s, const char *file, size_t file_len, long line,
                     const char *func, size_t func_len, int esc)
{
    uint64_t h = ((uint64_t)(uintptr_t)file ^ ((uint64_t)(uintptr_t)func * 31)
                  ^ (uint64_t)line) * 0x9E3779B97F4A7C15ull;
    size_t k = (size_t)(h >> 52) & (TG_FCACHE_SIZE - 1);
    struct tg_acct_fcache_entry *e = &s->fcache[k];
    uint32_t fid = e->fid;

    if (fid != 0 && fid < s->nfuncs && e->file == file && e->func == func && e->line == line) {
        struct tg_acct_func *f = &s->funcs[fid];
        if (f->esc == esc && f->file_len == file_len && f->func_len == func_len
                && memcmp(f->file, file, file_len) == 0 && memcmp(f->func, func, func_len) == 0)
            return fid;
    }
    fid = tg_sites_func_intern_slow(s, file, file_len, line, func, func_len, esc);
    if (fid != 0) {
        e->file = file;
        e->func = func;
        e->line = line;
        e->fid = fid;
    }
    return fid;
}

/* Hash of the node key (FID, PARENT). */
static inline uint64_t
tg_sites_node_key_hash(uint32_t fid, uint32_t parent)
{
    uint64_t h = ((uint64_t)fid << 32 | parent) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 31);
}

/* A new node (PARENT, FID) of thread TIX, whose key hashes to H and is not yet
 * in the table, with its counters published; its id, or TG_SITE_FULL when the
 * table is full or memory runs out. */
uint32_t tg_sites_node_add(struct tg_acct_sites *s, uint32_t parent, uint32_t fid, uint32_t tix,
                           uint64_t h);

/* Make room on S's free list for N more ids: 0 or -1 (out of memory). */
int tg_sites_free_reserve(struct tg_acct_sites *s, size_t n);

/* Recycle node ID: out of the hash, marked TG_NODE_FREE and put on the free
 * list (room reserved with tg_sites_free_reserve), for tg_sites_node_add to
 * reuse.  The caller ensures that no block is live at it and none will be
 * (its thread ended), that no node of the tree names it as parent any more
 * (its children are freed too) and that its counters are zero (the hooks'
 * spin lock, acct_recycle.c); with the GIL, as every interning. */
void tg_sites_node_free(struct tg_acct_sites *s, uint32_t id);

/* A new root node for thread TIX; its id or TG_SITE_FULL. */
static inline uint32_t
tg_sites_root_add(struct tg_acct_sites *s, uint32_t tix)
{
    return tg_sites_node_add(s, 0, 0, tix, tg_sites_node_key_hash(UINT32_MAX, tix));
}

/* The child of node PARENT (a real node, not 0 nor TG_SITE_FULL) for the call
 * FID, interned on first sight (it inherits PARENT's thread); TG_SITE_FULL when
 * the table is full. */
static inline uint32_t
tg_sites_node_intern(struct tg_acct_sites *s, uint32_t parent, uint32_t fid)
{
    uint64_t h = tg_sites_node_key_hash(fid, parent);
    size_t j;

    if (s->node_hash != NULL) {
        for (j = h & s->node_hash_mask; s->node_hash[j]; j = (j + 1) & s->node_hash_mask) {
            struct tg_acct_node *n = &s->nodes[s->node_hash[j]];
            if (n->fid == fid && n->parent == parent)
                return s->node_hash[j];
        }
    }
    return tg_sites_node_add(s, parent, fid, s->nodes[parent].tix, h);
}

#pragma GCC visibility pop

#endif /* TG_ACCT_SITES_H */
