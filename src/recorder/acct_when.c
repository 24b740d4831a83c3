/*
 * acct_when.c - threshold snapshots (see acct_when.h).
 */
#include "acct_when.h"
#include "acct_snapshot.h"
#include "acct_state.h"
#include "tls.h"
#include "thread.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const tg_when_names[TG_WHEN_KINDS] = {"thread", "live", "rss"};

int
tg_acct_when_parse(const char *cond, enum tg_when_kind *kind, int64_t *limit)
{
    const char *gt = strchr(cond, '>'), *p;
    unsigned long long v = 0;
    int k, shift = 0, digits = 0;

    for (k = 0; gt != NULL && k < TG_WHEN_KINDS; k++)
        if ((size_t)(gt - cond) == strlen(tg_when_names[k])
                && strncmp(cond, tg_when_names[k], (size_t)(gt - cond)) == 0)
            break;
    if (gt == NULL || k == TG_WHEN_KINDS)
        goto bad;
    for (p = gt + 1; isdigit((unsigned char)*p); p++, digits++) {
        if (v > (UINT64_C(1) << 60))  /* v * 10 + 9 fits; 2^62 is checked below */
            goto bad;
        v = v * 10 + (unsigned)(*p - '0');
    }
    switch (toupper((unsigned char)*p)) {
    case 'K': shift = 10; p++; break;
    case 'M': shift = 20; p++; break;
    case 'G': shift = 30; p++; break;
    case 'T': shift = 40; p++; break;
    default: break;
    }
    if (shift && (*p == 'i' || *p == 'I') && (p[1] == 'B' || p[1] == 'b'))
        p += 2;
    else if (*p == 'B' || *p == 'b')
        p++;
    if (digits == 0 || *p != '\0' || v == 0 || v > (UINT64_C(1) << (62 - shift)))
        goto bad;
    *kind = (enum tg_when_kind)k;
    *limit = (int64_t)(v << shift);
    return 0;
bad:
    PyErr_Format(PyExc_ValueError,
                 "snapshot condition must be thread>SIZE, live>SIZE or rss>SIZE with SIZE "
                 "a positive whole number of bytes, or of K, M, G or T, at most 2^62 bytes "
                 "(e.g. thread>500M), not '%s'",
                 cond);
    return -1;
}

void
tg_acct_when_clear(void)
{
    int k;
    for (k = 0; k < TG_WHEN_KINDS; k++) {
        atomic_store(&tg_acct.when.limit[k], 0);
        tg_acct.when.text[k][0] = '\0';
    }
    atomic_store(&tg_acct.when.live_next, 0);
    atomic_store(&tg_acct.when.rss_next, 0);
    tg_acct.when.rss_read_at = 0;  /* no hook counts while conditions change */
}

int
tg_acct_when_set(PyObject *conds)
{
    int64_t limits[TG_WHEN_KINDS] = {0, 0, 0};
    char texts[TG_WHEN_KINDS][48];
    PyObject *seq = PySequence_Fast(conds, "snapshot conditions must be a sequence of str");
    Py_ssize_t i, n;
    int k;

    if (seq == NULL)
        return -1;
    n = PySequence_Fast_GET_SIZE(seq);
    for (i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        const char *c = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
        enum tg_when_kind kind;
        int64_t limit;
        if (c == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "a snapshot condition must be a str");
            goto fail;
        }
        if (tg_acct_when_parse(c, &kind, &limit) < 0)
            goto fail;
        if (limits[kind] != 0) {
            PyErr_Format(PyExc_ValueError, "two snapshot conditions on %s: give one",
                         tg_when_names[kind]);
            goto fail;
        }
        limits[kind] = limit;
        /* Labels say KIND-over-SIZE: no '>' for a shell to take in file names. */
        snprintf(texts[kind], sizeof(texts[kind]), "%s-over-%.30s", tg_when_names[kind],
                 strchr(c, '>') + 1);
    }
    Py_DECREF(seq);
    tg_acct_when_clear();
    for (k = 0; k < TG_WHEN_KINDS; k++) {
        if (limits[k] != 0)
            memcpy(tg_acct.when.text[k], texts[k], sizeof(texts[k]));
        atomic_store(&tg_acct.when.limit[k], limits[k]);
    }
    return 0;
fail:
    Py_DECREF(seq);
    return -1;
}

int
tg_acct_when_peak_locked(int64_t live)
{
    int64_t lim = TG_LOAD(tg_acct.when.limit[TG_WHEN_LIVE]), next;
    int mask = 0;

    if (lim != 0) {
        next = TG_LOAD(tg_acct.when.live_next);
        if (live > (next > lim ? next : lim))
            mask |= 1 << TG_WHEN_LIVE;
    }
    if (TG_LOAD(tg_acct.when.limit[TG_WHEN_RSS]) != 0 && live >= tg_acct.when.rss_read_at) {
        tg_acct.when.rss_read_at = live + TG_WHEN_RSS_EVERY;
        mask |= 1 << TG_WHEN_RSS;
    }
    return mask;
}

/* The resident set size in bytes, or -1. */
static int64_t
tg_when_rss(void)
{
    char buf[128];
    long pages = 0, rss = 0;
    ssize_t n;
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return -1;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    if (sscanf(buf, "%ld %ld", &pages, &rss) != 2)
        return -1;
    return (int64_t)rss * sysconf(_SC_PAGESIZE);
}

/* The level above which the next snapshot of a condition is due, after one at
 * LEVEL (LEVEL >= the condition's limit). */
static int64_t
tg_when_next(int64_t level)
{
    int64_t step = level / TG_WHEN_STEP_DIV;
    return level + (step > TG_WHEN_STEP_MIN ? step : TG_WHEN_STEP_MIN);
}

/* Thread T's file base name into BASE (TG_BASENAME_CAP bytes): its name in the
 * recorder's log, else native-<tid>. */
static void
tg_when_thread_base(struct tg_acct_thread *t, char *base)
{
    struct tg_thread_table *tab = tg_acct.thread_table;
    size_t i;

    snprintf(base, TG_BASENAME_CAP, "native-%lu", t->native_id);
    if (tab == NULL)
        return;
    pthread_mutex_lock(&tab->lock);
    for (i = tab->n_log; i-- > 0;) {
        struct tg_thread_log *e = &tab->log[i];
        if (e->ident == t->ident && e->native_id == t->native_id && !e->attaching) {
            snprintf(base, TG_BASENAME_CAP, "%s", e->base);
            break;
        }
    }
    pthread_mutex_unlock(&tab->lock);
}

void
tg_acct_when_fire(struct tg_acct_thread *t, int64_t own, int mask)
{
    char label[TG_BASENAME_CAP + 128], base[TG_BASENAME_CAP];
    tg_saved_exc saved;
    int busy = tg_tls.busy;
    int64_t lim, v;

    /* Snapshots need the GIL (the site tables); without it the level stays,
     * and the next new high made with it writes the snapshot. */
    if ((busy & TG_BUSY_TRACER) || !atomic_load_explicit(&tg_acct_on, TG_RELAXED)
            || tg_tstate_if_gil() == NULL) {
        int process = mask & ((1 << TG_WHEN_LIVE) | (1 << TG_WHEN_RSS));
        if ((mask & (1 << TG_WHEN_RSS)) && !(t != NULL && (t->when_pending & (1 << TG_WHEN_RSS)))) {
            /* The rss read was due at this peak (tg_acct_when_peak_locked
             * moved rss_read_at past it): not done, so the next new peak,
             * which may hold the GIL, reads it instead. */
            tg_acct_spin_lock();
            tg_acct.when.rss_read_at = 0;
            tg_acct_spin_unlock();
        }
        /* live and rss are also tried again at this thread's next allocation
         * (if it is a Python thread, which takes the GIL again): a sampled
         * run sees the process's new peaks only at its samples, so the next
         * new high made with the GIL may never be seen.  Its light path
         * (hook_count.h) hands that allocation to tg_acct_alloc. */
        if (process && t != NULL && !(busy & TG_BUSY_TRACER)
                && PyGILState_GetThisThreadState() != NULL) {
            t->when_pending |= process;
            t->sampler.light_room = 0;
        }
        return;
    }
    if (t != NULL)
        t->when_pending = 0;
    tg_tls.busy |= TG_BUSY_TRACER;
    tg_exc_save(&saved);
    if (mask & (1 << TG_WHEN_THREAD)) {
        tg_when_thread_base(t, base);
        snprintf(label, sizeof(label), "%s-%s-at-%lld", tg_acct.when.text[TG_WHEN_THREAD], base,
                 (long long)own);
        t->when_next = tg_when_next(own);
        tg_acct_snapshot_noted("threshold", label, 1);  /* its base name is escaped */
    }
    if (mask & (1 << TG_WHEN_LIVE)) {
        /* checked again: a retry (when_pending) comes at any allocation */
        int64_t next = TG_LOAD(tg_acct.when.live_next);
        lim = TG_LOAD(tg_acct.when.limit[TG_WHEN_LIVE]);
        v = tg_acct_live_now();
        if (lim != 0 && v > lim && v > next) {
            snprintf(label, sizeof(label), "%s-at-%lld", tg_acct.when.text[TG_WHEN_LIVE],
                     (long long)v);
            atomic_store_explicit(&tg_acct.when.live_next, tg_when_next(v), TG_RELAXED);
            tg_acct_snapshot_noted("threshold", label, 0);
        }
    }
    if (mask & (1 << TG_WHEN_RSS)) {
        lim = TG_LOAD(tg_acct.when.limit[TG_WHEN_RSS]);
        v = tg_when_rss();
        if (lim != 0 && v > lim && v > TG_LOAD(tg_acct.when.rss_next)) {
            snprintf(label, sizeof(label), "%s-at-%lld", tg_acct.when.text[TG_WHEN_RSS],
                     (long long)v);
            atomic_store_explicit(&tg_acct.when.rss_next, tg_when_next(v), TG_RELAXED);
            tg_acct_snapshot_noted("threshold", label, 0);
        }
    }
    tg_exc_restore(&saved);
    tg_tls.busy = busy;
}
