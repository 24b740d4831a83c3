/*
 * thread_fold.c - an aggregate run's ended threads folded out of the thread
 * table's log (thread.h tg_thread_table_log_fold), so that a program starting
 * a thread per request keeps the log, its base names and runinfo.json bounded
 * by the threads kept whole (docs/formats.md "runinfo.json").  Plain C.
 */
#include "thread.h"
#include "names.h"

#include <stdlib.h>
#include <string.h>

/* FAMILY's entry, added when new; NULL when out of memory.  Lock held. */
static struct tg_thread_family *
tg_thread_family_unlocked(struct tg_thread_table *tt, const char *family)
{
    struct tg_thread_family *f;
    size_t i;

    for (i = 0; i < tt->n_families; i++)
        if (strcmp(tt->families[i].base, family) == 0)
            return &tt->families[i];
    /* a handful (aggregate.h TG_AGG_FAMILIES + 1): grown one at a time */
    f = realloc(tt->families, (tt->n_families + 1) * sizeof(*f));
    if (f == NULL)
        return NULL;
    tt->families = f;
    f = &tt->families[tt->n_families];
    if ((f->base = strdup(family)) == NULL)
        return NULL;
    f->threads = 0;
    tt->n_families++;
    return f;
}

/* Keep the family FAMILY of the noted thread SEQ, folded away (out of memory:
 * not kept, its runs and marks then name no thread).  Lock held. */
static void
tg_thread_noted_add_unlocked(struct tg_thread_table *tt, uint64_t seq, size_t family)
{
    if (tt->n_noted == tt->noted_cap) {
        size_t cap = tt->noted_cap ? tt->noted_cap * 2 : 16;
        struct tg_thread_noted *nn = realloc(tt->noted, cap * sizeof(*nn));
        if (nn == NULL)
            return;
        tt->noted = nn;
        tt->noted_cap = cap;
    }
    /* threads fold in the order they ended, mostly that of their seqs */
    if (tt->n_noted > 0 && tt->noted[tt->n_noted - 1].seq > seq)
        tt->noted_sorted = 0;
    else if (tt->n_noted == 0)
        tt->noted_sorted = 1;
    tt->noted[tt->n_noted].seq = seq;
    tt->noted[tt->n_noted].family = family;
    tt->n_noted++;
}

static int
tg_thread_noted_cmp(const void *a, const void *b)
{
    uint64_t x = ((const struct tg_thread_noted *)a)->seq;
    uint64_t y = ((const struct tg_thread_noted *)b)->seq;
    return x < y ? -1 : x > y;
}

void
tg_thread_table_log_note(struct tg_thread_table *tt, uint64_t seq)
{
    struct tg_thread_log *e;

    pthread_mutex_lock(&tt->lock);
    e = tg_thread_table_log_seq_unlocked(tt, seq);
    if (e != NULL)
        e->noted = 1;
    pthread_mutex_unlock(&tt->lock);
}

const char *
tg_thread_table_family_of_unlocked(struct tg_thread_table *tt, uint64_t seq)
{
    const struct tg_thread_log *e = tg_thread_table_log_seq_unlocked(tt, seq);
    size_t lo = 0, hi = tt->n_noted;

    if (e != NULL)  /* listed, or folded and kept for the accounting */
        return e->folded ? e->base : NULL;
    if (tt->n_noted == 0)  /* none (noted may be NULL: no qsort of it) */
        return NULL;
    if (!tt->noted_sorted) {
        qsort(tt->noted, tt->n_noted, sizeof(*tt->noted), tg_thread_noted_cmp);
        tt->noted_sorted = 1;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tt->noted[mid].seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < tt->n_noted && tt->noted[lo].seq == seq && tt->noted[lo].family < tt->n_families)
        return tt->families[tt->noted[lo].family].base;
    return NULL;
}

int
tg_thread_table_log_fold(struct tg_thread_table *tt, uint64_t seq, const char *family,
                         int keep, unsigned long *ident, unsigned long *native_id)
{
    struct tg_thread_family *f;
    struct tg_thread_log *e;
    size_t i;
    int ret = -1;

    pthread_mutex_lock(&tt->lock);
    /* a binary search: with the accounting on, the folded entries stay, and a
     * walk from the start made a thread per request quadratic */
    e = tg_thread_table_log_seq_unlocked(tt, seq);
    if (e == NULL || e->folded || (f = tg_thread_family_unlocked(tt, family)) == NULL)
        goto unlock;
    i = (size_t)(e - tt->log);
    if (ident != NULL)
        *ident = e->ident;
    if (native_id != NULL)
        *native_id = e->native_id;
    if (keep) {
        /* the accounting's files name it by its family (its own base name
         * stays taken in the set: the names of a run's files stay distinct) */
        char *fb = strdup(family);
        if (fb == NULL)
            goto unlock;
        free(e->base);
        e->base = fb;
        e->folded = 1;
        f->threads++;
        ret = 0;
        goto unlock;
    }
    f->threads++;
    if (e->noted)
        tg_thread_noted_add_unlocked(tt, e->seq, (size_t)(f - tt->families));
    if (tt->names != NULL)
        tg_nameset_release(tt->names, e->base);
    free(e->name);
    free(e->base);
    memmove(e, e + 1, (tt->n_log - i - 1) * sizeof(*e));
    tt->n_log--;
    tt->log_moves++;
    /* give back what a burst of threads took (the array only grows in log_add) */
    if (tt->log_cap > 64 && tt->n_log < tt->log_cap / 4) {
        struct tg_thread_log *nl = realloc(tt->log, tt->log_cap / 2 * sizeof(*nl));
        if (nl != NULL) {
            tt->log = nl;
            tt->log_cap /= 2;
        }
    }
    ret = 0;
unlock:
    pthread_mutex_unlock(&tt->lock);
    return ret;
}
