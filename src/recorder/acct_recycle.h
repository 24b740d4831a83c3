/*
 * acct_recycle.h - an aggregate run's ended threads folded out of the
 * accounting's memory: when aggregate=True folds an ended thread into its
 * name family (aggregate.h, thread_fold.c) and the thread's OS thread has
 * exited (acct_state.c tg_acct_thread_exit), the nodes of its
 * calling-context tree at which no block is live, nor below, have their
 * counters (and their copies at the peak) added to the same path's node of
 * the family's anchor (the first thread of the family folded so) and their
 * ids recycled (acct_sites.h tg_sites_node_free).  The snapshots fold a
 * family's threads by path (acct_snapshot.c) and a recycled node holds no
 * live block, so what the files say is unchanged; the recorder's nodes are
 * then bounded by the threads running or kept whole, the anchors' paths and
 * the nodes still holding live blocks (docs/accounting.md "Thread churn").
 *
 * Protection: struct tg_acct_fold is touched with the GIL only; the ended
 * states' list is tg_acct.lock's (acct_state.h); counters move under the
 * hooks' spin lock.
 */
#ifndef TG_ACCT_RECYCLE_H
#define TG_ACCT_RECYCLE_H

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

struct tg_acct_thread;

/* Families with an anchor: aggregate.h's TG_AGG_FAMILIES + 1 ("*"), and
 * room to spare. */
#define TG_ACCT_FOLD_FAMS 32

/* A thread the aggregate fold named whose OS thread had not exited yet. */
struct tg_acct_fold_wait {
    unsigned long ident, native_id;
    uint32_t fam;                      /* index in struct tg_acct_fold fams */
};

/* GIL (every field). */
struct tg_acct_fold {
    struct {
        char *name;                    /* the family's entry name; malloc'ed */
        struct tg_acct_thread *anchor; /* its nodes take the folded ones' counts */
    } fams[TG_ACCT_FOLD_FAMS];
    size_t n_fams;
    struct tg_acct_fold_wait *wait;    /* folded, OS thread still running */
    size_t n_wait, wait_cap;
    int off;                           /* THREADGRAPH_ACCT_NO_RECYCLE set at the
                                        * run's start: nothing recycled (tests
                                        * compare the files with and without) */
    uint64_t threads;                  /* threads whose nodes were recycled */
    uint64_t nodes;                    /* node ids recycled */
};

/* The aggregate fold took the ended thread (IDENT, NATIVE_ID) into FAMILY
 * (thread_py.c, after tg_thread_table_log_fold): recycle its nodes now if its
 * OS thread has exited, else when it has (at a later fold).  GIL held;
 * allocation failures leave the nodes as they are (harmless). */
void tg_acct_thread_folded(unsigned long ident, unsigned long native_id, const char *family);

/* Node ids in use now (allocated less recycled), for tests and bench
 * (ProcessProfile._acct_nodes_in_use).  GIL. */
size_t tg_acct_nodes_in_use(void);

/* Forget the fold's families and waits, and read THREADGRAPH_ACCT_NO_RECYCLE
 * (at a run's start, GIL). */
void tg_acct_fold_reset(struct tg_acct_fold *f);

#pragma GCC visibility pop

#endif /* TG_ACCT_RECYCLE_H */
