/*
 * testgate.h - a gate that tests close to hold the recorder's writes just
 * before their write(2), as a full pipe or a stalled NFS would: a
 * deterministic blocked sink (threadgraph._recorder._test_capture_gate for
 * the capture, capture_write.c; _test_text_gate for the text files, writer.c).
 *
 * Header only, plain C (pthreads): each writer module keeps one static gate
 * of its own (TG_TEST_GATE_INIT), so that writer.c and capture_write.c still
 * link alone in their C tests.  Open by default; while open, a write pays one
 * relaxed load (tg_test_gate_check).  All fields are under `lock` but
 * `armed`, which the write path peeks at (atomic, relaxed).
 */
#ifndef TG_TESTGATE_H
#define TG_TESTGATE_H

#include <pthread.h>
#include <stdatomic.h>

struct tg_test_gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    _Atomic int armed;  /* closed, or writers still inside; the write path peeks */
    int closed;         /* writers wait at the gate; lock */
    unsigned waiting;   /* writers waiting there now; lock */
};

#define TG_TEST_GATE_INIT {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0}

/* Close (CLOSED 1) or open G; opening lets every waiting writer go. */
static inline void
tg_test_gate_set(struct tg_test_gate *g, int closed)
{
    pthread_mutex_lock(&g->lock);
    g->closed = closed;
    if (closed)
        atomic_store_explicit(&g->armed, 1, memory_order_relaxed);
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

/* Wait until a writer waits at G, closed (returns at once if G is open). */
static inline void
tg_test_gate_wait_blocked(struct tg_test_gate *g)
{
    pthread_mutex_lock(&g->lock);
    while (g->closed && g->waiting == 0)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

/* A writer at G, before its write(2): waits while G is closed. */
static inline void
tg_test_gate_pass(struct tg_test_gate *g)
{
    pthread_mutex_lock(&g->lock);
    if (g->closed) {
        g->waiting++;
        pthread_cond_broadcast(&g->cond);  /* tg_test_gate_wait_blocked */
        while (g->closed)
            pthread_cond_wait(&g->cond, &g->lock);
        g->waiting--;
    }
    if (!g->closed && g->waiting == 0)
        atomic_store_explicit(&g->armed, 0, memory_order_relaxed);
    pthread_mutex_unlock(&g->lock);
}

/* The write path's test: pass G only when it is (or was just) closed. */
static inline void
tg_test_gate_check(struct tg_test_gate *g)
{
    if (__builtin_expect(atomic_load_explicit(&g->armed, memory_order_relaxed), 0))
        tg_test_gate_pass(g);
}

/* In a forked child: G made anew and open (its lock and condition may have
 * been in use by a thread the child does not have); the child's writes are
 * its own, never held by the parent's closed gate. */
static inline void
tg_test_gate_reset_in_child(struct tg_test_gate *g)
{
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cond, NULL);
    g->closed = 0;
    g->waiting = 0;
    atomic_store_explicit(&g->armed, 0, memory_order_relaxed);
}

#endif /* TG_TESTGATE_H */
