/*
 * acct_recycle.c - an aggregate run's folded threads' calling-context nodes
 * recycled (see acct_recycle.h; docs/accounting.md "Thread churn").
 */
#include "acct_state.h"

#include <stdlib.h>
#include <string.h>

/* At most this many folded threads wait for their OS thread's exit; past it
 * the oldest is forgotten (its nodes then stay, as before recycling). */
#define TG_ACCT_FOLD_WAIT_MAX 1024

void
tg_acct_fold_reset(struct tg_acct_fold *f)
{
    size_t i;

    for (i = 0; i < f->n_fams; i++)
        free(f->fams[i].name);
    free(f->wait);
    memset(f, 0, sizeof(*f));
    f->off = getenv("THREADGRAPH_ACCT_NO_RECYCLE") != NULL;
}

size_t
tg_acct_nodes_in_use(void)
{
    size_t n = tg_acct.sites.nnodes;

    return n > 1 ? n - 1 - tg_acct.sites.nfree : 0;
}

/* FAMILY's index, added when new; TG_ACCT_FOLD_FAMS when there is no room. */
static size_t
tg_acct_fold_family(struct tg_acct_fold *f, const char *family)
{
    size_t i;

    for (i = 0; i < f->n_fams; i++)
        if (strcmp(f->fams[i].name, family) == 0)
            return i;
    if (f->n_fams == TG_ACCT_FOLD_FAMS || (f->fams[i].name = strdup(family)) == NULL)
        return TG_ACCT_FOLD_FAMS;
    f->fams[i].anchor = NULL;
    f->n_fams++;
    return i;
}

/* The node of anchor A for the path of T's node IDS[K] (LOC maps a node id to
 * its index in IDS + 1), found or made, with those of its ancestors, in TGT
 * (0: not yet; TG_SITE_FULL: none, the table being full).  WORK holds one
 * index per node of T.  GIL. */
static uint32_t
tg_acct_fold_target(struct tg_acct_thread *a, const uint32_t *ids, const uint32_t *loc,
                    uint32_t *tgt, uint32_t *work, uint32_t k)
{
    size_t n = 0;

    /* climb to a node whose target is known, or to the root */
    for (;;) {
        uint32_t p = tg_acct.sites.nodes[ids[k]].parent;
        if (tgt[k] != 0)
            break;
        work[n++] = k;
        if (p == 0)
            break;
        k = loc[p] - 1;
    }
    while (n > 0) {
        uint32_t j = work[--n];
        uint32_t p = tg_acct.sites.nodes[ids[j]].parent;
        uint32_t fid = tg_acct.sites.nodes[ids[j]].fid;
        if (p == 0) {
            tgt[j] = tg_acct_root(a);
        } else {
            uint32_t tp = tgt[loc[p] - 1];
            tgt[j] = tp == TG_SITE_FULL || tp == 0 ? TG_SITE_FULL
                     : tg_sites_node_intern(&tg_acct.sites, tp, fid);
        }
        if (tgt[j] == 0)
            tgt[j] = TG_SITE_FULL;
    }
    return tgt[k];
}

/* Add node N's counters, now and at the peak, to node M's and zero N's (the
 * hooks' spin lock held: they form one sequence with every hook's). */
static void
tg_acct_fold_counters_locked(struct tg_acct_site_ctr *n, struct tg_acct_site_ctr *m)
{
    int64_t now_n[4], now_m[4];
    int i;

    now_n[0] = TG_LOAD(n->alloc_bytes);
    now_n[1] = TG_LOAD(n->alloc_count);
    now_n[2] = TG_LOAD(n->free_bytes);
    now_n[3] = TG_LOAD(n->free_count);
    now_m[0] = TG_LOAD(m->alloc_bytes);
    now_m[1] = TG_LOAD(m->alloc_count);
    now_m[2] = TG_LOAD(m->free_bytes);
    now_m[3] = TG_LOAD(m->free_count);
    /* at the peak: the copy if stamped with the peak's number, else now */
    if (n->stamp == tg_acct.peak_seq || m->stamp == tg_acct.peak_seq) {
        for (i = 0; i < 4; i++)
            m->pk[i] = (m->stamp == tg_acct.peak_seq ? m->pk[i] : now_m[i])
                       + (n->stamp == tg_acct.peak_seq ? n->pk[i] : now_n[i]);
        m->stamp = tg_acct.peak_seq;
    }
    atomic_store_explicit(&m->alloc_bytes, now_m[0] + now_n[0], TG_RELAXED);
    atomic_store_explicit(&m->alloc_count, now_m[1] + now_n[1], TG_RELAXED);
    atomic_store_explicit(&m->free_bytes, now_m[2] + now_n[2], TG_RELAXED);
    atomic_store_explicit(&m->free_count, now_m[3] + now_n[3], TG_RELAXED);
    atomic_store_explicit(&n->alloc_bytes, 0, TG_RELAXED);
    atomic_store_explicit(&n->alloc_count, 0, TG_RELAXED);
    atomic_store_explicit(&n->free_bytes, 0, TG_RELAXED);
    atomic_store_explicit(&n->free_count, 0, TG_RELAXED);
    n->stamp = 0;  /* "unchanged since the peak", as a new node's */
    memset(n->pk, 0, sizeof(n->pk));
    n->tix1 = 0;
}

/* Recycle the nodes of T (its OS thread exited, the aggregate fold took it)
 * into those of anchor A.  GIL held. */
static void
tg_acct_fold_thread(struct tg_acct_thread *t, struct tg_acct_thread *a)
{
    struct tg_acct_sites *s = &tg_acct.sites;
    size_t nn = s->nnodes, cnt = 0, i, freed = 0;
    uint32_t *ids = NULL, *loc = NULL, *tgt = NULL, *work = NULL;
    uint8_t *keep = NULL;

    for (i = 1; i < nn; i++)
        if (s->nodes[i].tix == t->ix)
            cnt++;
    if (cnt == 0)
        goto done;
    ids = malloc(cnt * sizeof(*ids));
    loc = calloc(nn, sizeof(*loc));
    tgt = calloc(cnt, sizeof(*tgt));
    work = malloc(cnt * sizeof(*work));
    keep = calloc(cnt, 1);
    if (ids == NULL || loc == NULL || tgt == NULL || work == NULL || keep == NULL
            || tg_sites_free_reserve(s, cnt) < 0)
        goto out;
    cnt = 0;
    for (i = 1; i < nn; i++)
        if (s->nodes[i].tix == t->ix) {
            loc[i] = (uint32_t)cnt + 1;
            ids[cnt++] = (uint32_t)i;
        }
    /* A node at which a block is live stays, and its ancestors: a free of the
     * block (from any thread) credits the id in its pointer-table word.  T
     * allocates no more (its exit took its state away), so a node found
     * without live blocks here stays without. */
    tg_acct_spin_lock();
    for (i = 0; i < cnt; i++) {
        struct tg_acct_site_ctr *c = tg_sites_ctr(s, ids[i]);
        keep[i] = c == NULL || TG_LOAD(c->alloc_count) != TG_LOAD(c->free_count);
    }
    tg_acct_spin_unlock();
    for (i = 0; i < cnt; i++) {
        uint32_t j, p;
        if (keep[i] != 1)
            continue;
        for (j = (uint32_t)i; (p = s->nodes[ids[j]].parent) != 0; j = loc[p] - 1) {
            if (keep[loc[p] - 1])
                break;
            keep[loc[p] - 1] = 2;  /* an ancestor of a live one */
        }
    }
    /* the anchor's nodes for the paths (allocates: not under the spin lock) */
    for (i = 0; i < cnt; i++)
        if (!keep[i])
            (void)tg_acct_fold_target(a, ids, loc, tgt, work, (uint32_t)i);
    tg_acct_spin_lock();
    for (i = 0; i < cnt; i++) {
        struct tg_acct_site_ctr *c, *m;
        if (keep[i] || tgt[i] == TG_SITE_FULL)
            continue;
        c = tg_sites_ctr(s, ids[i]);
        m = tg_sites_ctr(s, tgt[i]);
        if (c == NULL || m == NULL) {  /* both published when made: cannot be */
            tgt[i] = TG_SITE_FULL;
            continue;
        }
        tg_acct_fold_counters_locked(c, m);
    }
    tg_acct_spin_unlock();
    for (i = 0; i < cnt; i++) {
        if (keep[i] || tgt[i] == TG_SITE_FULL)
            continue;
        if (ids[i] == t->root)
            t->root = 0;
        tg_sites_node_free(s, ids[i]);
        freed++;
    }
    t->cur_site = t->root ? t->root : TG_SITE_NOTHREAD;
    tg_acct.fold.nodes += freed;
done:
    tg_acct.fold.threads++;
out:
    free(ids);
    free(loc);
    free(tgt);
    free(work);
    free(keep);
}

void
tg_acct_thread_folded(unsigned long ident, unsigned long native_id, const char *family)
{
    struct tg_acct_fold *f = &tg_acct.fold;
    struct tg_acct_thread *found[16], **pp, *t;
    uint32_t fams[16];
    size_t fam = tg_acct_fold_family(f, family), i, n = 0;

    if (fam == TG_ACCT_FOLD_FAMS || f->off)
        return;
    if (f->n_wait == TG_ACCT_FOLD_WAIT_MAX) {
        memmove(f->wait, f->wait + 1, (f->n_wait - 1) * sizeof(*f->wait));
        f->n_wait--;
    }
    if (f->n_wait == f->wait_cap) {
        size_t cap = f->wait_cap ? f->wait_cap * 2 : 16;
        struct tg_acct_fold_wait *w = realloc(f->wait, cap * sizeof(*w));
        if (w == NULL)
            return;
        f->wait = w;
        f->wait_cap = cap;
    }
    f->wait[f->n_wait].ident = ident;
    f->wait[f->n_wait].native_id = native_id;
    f->wait[f->n_wait].fam = (uint32_t)fam;
    f->n_wait++;
    /* the waiting threads whose OS thread exited, taken off the ended list */
    pthread_mutex_lock(&tg_acct.lock);
    for (i = 0; i < f->n_wait && n < 16;) {
        for (pp = &tg_acct.ended; (t = *pp) != NULL; pp = &t->ended_next)
            if (t->ident == f->wait[i].ident && t->native_id == f->wait[i].native_id)
                break;
        if (t == NULL) {
            i++;
            continue;
        }
        *pp = t->ended_next;
        t->ended_next = NULL;
        t->in_ended = 0;
        found[n] = t;
        fams[n++] = f->wait[i].fam;
        f->wait[i] = f->wait[--f->n_wait];
    }
    pthread_mutex_unlock(&tg_acct.lock);
    for (i = 0; i < n; i++) {
        /* its thread is gone: nothing reads its stack again (256 bytes at
         * least, the state's largest part after its histograms) */
        free(found[i]->stack);
        found[i]->stack = NULL;
        found[i]->depth = found[i]->cap = 0;
        if (f->fams[fams[i]].anchor == NULL) {
            f->fams[fams[i]].anchor = found[i];  /* its nodes take the others' */
            continue;
        }
        tg_acct_fold_thread(found[i], f->fams[fams[i]].anchor);
    }
}
