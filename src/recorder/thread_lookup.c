/*
 * thread_lookup.c - finding entries of the thread log (thread.h) without a
 * walk of the whole log per thread: by seq (the log is in seq order: entries
 * are appended with the next seq and only removed, never reordered), and by
 * (ident, native_id) through a map built once for a pass over many threads
 * (the accounting's snapshots and summary name every thread they hold: a walk
 * of the log per thread made them quadratic in a run's threads, which under
 * aggregate=True keeps the folded threads' entries for them).  Plain C.
 */
#include "thread.h"

#include <stdlib.h>

struct tg_thread_log *
tg_thread_table_log_seq_unlocked(struct tg_thread_table *tt, uint64_t seq)
{
    size_t lo = 0, hi = tt->n_log;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tt->log[mid].seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < tt->n_log && tt->log[lo].seq == seq ? &tt->log[lo] : NULL;
}

static size_t
tg_logmap_hash(unsigned long ident, unsigned long native_id)
{
    uint64_t h = ((uint64_t)ident ^ ((uint64_t)native_id << 32 | (uint64_t)native_id >> 32))
                 * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 29));
}

int
tg_thread_logmap_build(struct tg_thread_logmap *m, const struct tg_thread_table *tt)
{
    size_t cap = 16, i;

    m->slots = NULL;
    m->mask = 0;
    m->moves = tt->log_moves;
    while (cap < 2 * tt->n_log)
        cap *= 2;
    m->slots = calloc(cap, sizeof(*m->slots));
    if (m->slots == NULL)
        return -1;
    m->mask = cap - 1;
    /* in log order: a later entry of the same thread (a reused ident) wins */
    for (i = 0; i < tt->n_log; i++) {
        const struct tg_thread_log *e = &tt->log[i];
        size_t j;
        if (e->attaching || e->greenlet)
            continue;
        for (j = tg_logmap_hash(e->ident, e->native_id) & m->mask; m->slots[j] != 0;
             j = (j + 1) & m->mask) {
            const struct tg_thread_log *o = &tt->log[m->slots[j] - 1];
            if (o->ident == e->ident && o->native_id == e->native_id)
                break;
        }
        m->slots[j] = i + 1;
    }
    return 0;
}

const struct tg_thread_log *
tg_thread_logmap_find(const struct tg_thread_logmap *m, const struct tg_thread_table *tt,
                      unsigned long ident, unsigned long native_id)
{
    size_t i, j;

    if (m->slots == NULL || m->moves != tt->log_moves) {  /* no map, or an old one */
        for (i = tt->n_log; i-- > 0;)
            if (tt->log[i].ident == ident && tt->log[i].native_id == native_id
                    && !tt->log[i].attaching && !tt->log[i].greenlet)
                return &tt->log[i];
        return NULL;
    }
    for (j = tg_logmap_hash(ident, native_id) & m->mask; m->slots[j] != 0;
         j = (j + 1) & m->mask) {
        const struct tg_thread_log *e = &tt->log[m->slots[j] - 1];
        if (e->ident == ident && e->native_id == native_id)
            return e;
    }
    return NULL;
}

void
tg_thread_logmap_release(struct tg_thread_logmap *m)
{
    free(m->slots);
    m->slots = NULL;
    m->mask = 0;
}
