/*
 * thread.c - the thread state and the thread table (see thread.h for a state's
 * life).  Plain C: no Python; the parts that need it are in thread_py.c.
 */
#include "thread.h"
#include "names.h"

#include <stdlib.h>
#include <string.h>

void
tg_thread_table_init(struct tg_thread_table *tt, void (*kick)(void *ctx), void *kick_ctx)
{
    memset(tt, 0, sizeof(*tt));
    pthread_mutex_init(&tt->lock, NULL);
    pthread_cond_init(&tt->unpinned, NULL);
    tt->kick = kick;
    tt->full_kick = kick;
    tt->kick_ctx = kick_ctx;
}

/* Free every state of LIST (unreachable by anyone else) and empty it. */
static void
tg_thread_free_list(struct tg_thread **list)
{
    struct tg_thread *t = *list, *next;

    for (; t != NULL; t = next) {
        next = t->next;
        tg_thread_free(t);
    }
    *list = NULL;
}

void
tg_thread_table_destroy(struct tg_thread_table *tt)
{
    tg_thread_free_list(&tt->retired);
    tg_thread_free_list(&tt->live);
    tg_thread_free_list(&tt->ended);
    tg_thread_free_list(&tt->closed);
    tg_thread_table_clear_log(tt);
    free(tt->pass);
    tt->pass = NULL;
    tt->pass_cap = 0;
    pthread_cond_destroy(&tt->unpinned);
    pthread_mutex_destroy(&tt->lock);
}

struct tg_thread *
tg_thread_new(struct tg_thread_table *tt, uint64_t gen, unsigned long ident,
              unsigned long native_id)
{
    struct tg_thread *t = calloc(1, sizeof(*t));

    if (t == NULL)
        return NULL;
    tg_writer_init(&t->mem);
    tg_writer_init(&t->stack);
    tg_writer_init(&t->capw);
    tg_writer_set_kick(&t->mem, tt->full_kick, tt->kick_ctx);
    tg_writer_set_kick(&t->stack, tt->full_kick, tt->kick_ctx);
    tg_writer_set_kick(&t->capw, tt->full_kick, tt->kick_ctx);
    t->gen = gen;
    t->ident = ident;
    t->native_id = native_id;
    return t;
}

void
tg_thread_free(struct tg_thread *t)
{
    tg_writer_release(&t->mem);
    tg_writer_release(&t->stack);
    tg_writer_release(&t->capw);
    tg_writer_destroy(&t->mem);
    tg_writer_destroy(&t->stack);
    tg_writer_destroy(&t->capw);
    free(t->frames);
    free(t->glets);
    free(t);
}

void
tg_thread_close_writers(struct tg_thread *t, void (*note)(void *ctx, struct tg_writer *w),
                        void *ctx)
{
    struct tg_writer *ws[3] = { &t->mem, &t->stack, &t->capw };
    int i;

    for (i = 0; i < 3; i++)
        tg_writer_flush(ws[i]);
    for (i = 0; i < 3; i++)
        if (note != NULL && atomic_load(&ws[i]->err))
            note(ctx, ws[i]);
    for (i = 0; i < 3; i++)
        tg_writer_release(ws[i]);
}

/* --- the log ----------------------------------------------------------------- */

long
tg_thread_table_log_add(struct tg_thread_table *tt, char *name, size_t name_len,
                        unsigned long ident, unsigned long native_id, int has_mem,
                        int has_stack, int custom)
{
    char base[TG_BASENAME_CAP];
    struct tg_thread_log *e;
    long ret = -1;

    pthread_mutex_lock(&tt->lock);
    if (tt->n_log == tt->log_cap) {
        size_t cap = tt->log_cap ? tt->log_cap * 2 : 16;
        struct tg_thread_log *nl = realloc(tt->log, cap * sizeof(*nl));
        if (nl == NULL)
            goto unlock;
        tt->log = nl;
        tt->log_cap = cap;
    }
    if (tt->names == NULL && (tt->names = tg_nameset_new()) == NULL)
        goto unlock;
    tg_safe_basename(name, name_len, base);
    if (tg_nameset_claim(tt->names, base) < 0)
        goto unlock;
    e = &tt->log[tt->n_log];
    e->seq = tt->n_seen++;
    e->base = strdup(base);
    if (e->base == NULL)
        goto unlock;  /* the name stays claimed: a later one gets "~2", harmless */
    e->name = name;
    e->name_len = name_len;
    e->ident = ident;
    e->native_id = native_id;
    e->has_mem = has_mem;
    e->has_stack = has_stack;
    e->custom = custom;
    e->attaching = 1;
    e->noted = 0;
    e->folded = 0;
    e->greenlet = 0;
    tt->log_moves++;
    ret = (long)tt->n_log++;
unlock:
    pthread_mutex_unlock(&tt->lock);
    return ret;
}

void
tg_thread_table_log_joined(struct tg_thread_table *tt, size_t idx)
{
    pthread_mutex_lock(&tt->lock);
    if (idx < tt->n_log)
        tt->log[idx].attaching = 0;
    pthread_mutex_unlock(&tt->lock);
}

void
tg_thread_table_log_greenlet(struct tg_thread_table *tt, size_t idx)
{
    pthread_mutex_lock(&tt->lock);
    if (idx < tt->n_log)
        tt->log[idx].greenlet = 1;
    pthread_mutex_unlock(&tt->lock);
}

const struct tg_thread_log *
tg_thread_table_log_find(const struct tg_thread_table *tt, unsigned long ident)
{
    size_t i;

    for (i = tt->n_log; i-- > 0;)
        if (tt->log[i].ident == ident && !tt->log[i].greenlet)
            return &tt->log[i];
    return NULL;
}

void
tg_thread_table_clear_log(struct tg_thread_table *tt)
{
    size_t i;

    for (i = 0; i < tt->n_log; i++) {
        free(tt->log[i].name);
        free(tt->log[i].base);
    }
    free(tt->log);
    tt->log = NULL;
    tt->n_log = tt->log_cap = 0;
    tt->log_moves++;
    tt->n_seen = 0;
    for (i = 0; i < tt->n_families; i++)
        free(tt->families[i].base);
    free(tt->families);
    tt->families = NULL;
    tt->n_families = 0;
    free(tt->noted);
    tt->noted = NULL;
    tt->n_noted = tt->noted_cap = 0;
    tg_nameset_free(tt->names);
    tt->names = NULL;
    tt->done_records = tt->done_stack_records = tt->done_dropped = 0;
    tt->done_unwound = tt->done_displaced = 0;
}

/* --- live and retired states ----------------------------------------------------- */

void
tg_thread_table_add(struct tg_thread_table *tt, struct tg_thread *t)
{
    pthread_mutex_lock(&tt->lock);
    t->next = tt->live;
    tt->live = t;
    pthread_mutex_unlock(&tt->lock);
}

int
tg_thread_table_remove(struct tg_thread_table *tt, struct tg_thread *t)
{
    struct tg_thread **pp;
    int found = 0;

    pthread_mutex_lock(&tt->lock);
    for (pp = &tt->live; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == t) {
            *pp = t->next;
            t->next = NULL;
            found = 1;
            break;
        }
    }
    while (t->pins > 0)  /* a flusher call on it: its write ends first */
        pthread_cond_wait(&tt->unpinned, &tt->lock);
    pthread_mutex_unlock(&tt->lock);
    return found;
}

/* Wait until no state of LIST is pinned.  lock held. */
static void
tg_thread_table_wait_unpinned_locked(struct tg_thread_table *tt, struct tg_thread *list)
{
    for (;;) {
        struct tg_thread *t;
        for (t = list; t != NULL && t->pins == 0; t = t->next)
            ;
        if (t == NULL)
            break;
        pthread_cond_wait(&tt->unpinned, &tt->lock);
    }
}

struct tg_thread *
tg_thread_table_take_live(struct tg_thread_table *tt)
{
    struct tg_thread *list;

    pthread_mutex_lock(&tt->lock);
    list = tt->live;
    tt->live = NULL;
    tg_thread_table_wait_unpinned_locked(tt, list);
    pthread_mutex_unlock(&tt->lock);
    return list;
}

/* Add T's counts to the done counts.  lock held. */
static void
tg_thread_table_settle_locked(struct tg_thread_table *tt, struct tg_thread *t)
{
    tt->done_records += atomic_load(&t->n_records);
    tt->done_stack_records += atomic_load(&t->n_stack_records);
    tt->done_dropped += atomic_load(&t->dropped);
    tt->done_unwound += atomic_load(&t->unwound);
    tt->done_displaced += atomic_load(&t->displaced);
}

void
tg_thread_table_end(struct tg_thread_table *tt, struct tg_thread *t)
{
    struct tg_thread **pp;

    pthread_mutex_lock(&tt->lock);
    for (pp = &tt->live; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    }
    /* Pinned or not: a pass holding T ends with it before the flusher takes
     * the ended list, so T is never closed under a pass's write. */
    tg_thread_table_settle_locked(tt, t);
    t->next = tt->ended;
    tt->ended = t;
    tt->n_ending++;
    pthread_mutex_unlock(&tt->lock);
    if (tt->kick != NULL)
        tt->kick(tt->kick_ctx);
}

struct tg_thread *
tg_thread_table_take_ended(struct tg_thread_table *tt)
{
    struct tg_thread *list;

    pthread_mutex_lock(&tt->lock);
    list = tt->ended;
    tt->ended = NULL;
    tg_thread_table_wait_unpinned_locked(tt, list);
    pthread_mutex_unlock(&tt->lock);
    return list;
}

void
tg_thread_table_closed_add(struct tg_thread_table *tt, struct tg_thread *list)
{
    struct tg_thread *last;
    size_t n = 1;

    if (list == NULL)
        return;
    for (last = list; last->next != NULL; last = last->next)
        n++;
    pthread_mutex_lock(&tt->lock);
    last->next = tt->closed;
    tt->closed = list;
    tt->n_ending = tt->n_ending >= n ? tt->n_ending - n : 0;
    if (tt->n_ending == 0)
        pthread_cond_broadcast(&tt->unpinned);
    pthread_mutex_unlock(&tt->lock);
}

void
tg_thread_table_wait_ended(struct tg_thread_table *tt)
{
    pthread_mutex_lock(&tt->lock);
    while (tt->n_ending > 0)
        pthread_cond_wait(&tt->unpinned, &tt->lock);
    pthread_mutex_unlock(&tt->lock);
}

struct tg_thread *
tg_thread_table_take_closed(struct tg_thread_table *tt)
{
    struct tg_thread *list;

    pthread_mutex_lock(&tt->lock);
    list = tt->closed;
    tt->closed = NULL;
    pthread_mutex_unlock(&tt->lock);
    return list;
}

int
tg_thread_table_each(struct tg_thread_table *tt,
                     void (*fn)(struct tg_thread *t, void *ctx), void *ctx)
{
    struct tg_thread *t;
    size_t n = 0, i;

    pthread_mutex_lock(&tt->lock);
    for (t = tt->live; t != NULL; t = t->next)
        n++;
    if (n > tt->pass_cap) {
        /* memory, no I/O: fine under the lock */
        size_t cap = n * 2;
        struct tg_thread **np = realloc(tt->pass, cap * sizeof(*np));
        if (np == NULL) {
            pthread_mutex_unlock(&tt->lock);
            return -1;
        }
        tt->pass = np;
        tt->pass_cap = cap;
    }
    for (t = tt->live, i = 0; t != NULL; t = t->next, i++) {
        t->pins++;
        tt->pass[i] = t;
    }
    pthread_mutex_unlock(&tt->lock);
    for (i = 0; i < n; i++) {
        t = tt->pass[i];
        fn(t, ctx);
        pthread_mutex_lock(&tt->lock);
        if (--t->pins == 0)
            pthread_cond_broadcast(&tt->unpinned);
        pthread_mutex_unlock(&tt->lock);
    }
    return 0;
}

void
tg_thread_table_each_locked(struct tg_thread_table *tt,
                            void (*fn)(struct tg_thread *t, void *ctx), void *ctx)
{
    struct tg_thread *t;

    pthread_mutex_lock(&tt->lock);
    for (t = tt->live; t != NULL; t = t->next)
        fn(t, ctx);
    pthread_mutex_unlock(&tt->lock);
}

void
tg_thread_table_settle(struct tg_thread_table *tt, struct tg_thread *t)
{
    pthread_mutex_lock(&tt->lock);
    tg_thread_table_settle_locked(tt, t);
    pthread_mutex_unlock(&tt->lock);
}

void
tg_thread_table_retire(struct tg_thread_table *tt, struct tg_thread *t)
{
    t->next = tt->retired;
    tt->retired = t;
}

void
tg_thread_table_free_retired(struct tg_thread_table *tt)
{
    tg_thread_free_list(&tt->retired);
}

struct tg_thread *
tg_thread_table_reap_child(struct tg_thread_table *tt, struct tg_thread *me)
{
    struct tg_thread *t = tt->live, *next, *found = NULL;

    /* Only this thread exists in the child (the atfork handler released the
     * lock): nobody else can reach the lists.  The parent's flusher may have
     * had states pinned: none is now, and its condition starts afresh. */
    tt->live = NULL;
    pthread_cond_init(&tt->unpinned, NULL);
    for (; t != NULL; t = next) {
        next = t->next;
        if (t == me)
            found = me;
        else
            tg_thread_free(t);
    }
    tg_thread_free_list(&tt->retired);
    tg_thread_free_list(&tt->ended);
    tg_thread_free_list(&tt->closed);
    tt->n_ending = 0;
    if (found != NULL) {
        found->next = NULL;
        found->pins = 0;
        /* its greenlets' states, or its thread's, are freed: it stands alone */
        free(found->glets);
        found->glets = NULL;
        found->glets_mask = found->n_glets = 0;
        found->glet_root = NULL;
        found->glet_key = 0;
    }
    return found;
}

void
tg_thread_table_totals(struct tg_thread_table *tt, uint64_t *records, uint64_t *stack_records,
                       uint64_t *dropped, size_t *threads)
{
    struct tg_thread *t;

    pthread_mutex_lock(&tt->lock);
    *records = tt->done_records;
    *stack_records = tt->done_stack_records;
    *dropped = tt->done_dropped;
    *threads = 0;
    for (size_t i = 0; i < tt->n_log; i++)
        *threads += !tt->log[i].attaching && !tt->log[i].folded;  /* runinfo.json's */
    for (size_t i = 0; i < tt->n_families; i++)
        *threads += tt->families[i].threads;
    for (t = tt->live; t != NULL; t = t->next) {
        *records += atomic_load_explicit(&t->n_records, memory_order_relaxed);
        *stack_records += atomic_load_explicit(&t->n_stack_records, memory_order_relaxed);
        *dropped += atomic_load_explicit(&t->dropped, memory_order_relaxed);
    }
    pthread_mutex_unlock(&tt->lock);
}

void
tg_thread_table_losses(struct tg_thread_table *tt, uint64_t *unwound, uint64_t *displaced)
{
    struct tg_thread *t;

    pthread_mutex_lock(&tt->lock);
    *unwound = tt->done_unwound;
    *displaced = tt->done_displaced;
    for (t = tt->live; t != NULL; t = t->next) {
        *unwound += atomic_load_explicit(&t->unwound, memory_order_relaxed);
        *displaced += atomic_load_explicit(&t->displaced, memory_order_relaxed);
    }
    pthread_mutex_unlock(&tt->lock);
}
