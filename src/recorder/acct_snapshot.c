/*
 * acct_snapshot.c - heap snapshot files of allocation accounting (see
 * acct_snapshot.h); their format is tg_snapshot.h's.
 */
#include "acct_snapshot.h"
#include "acct_state.h"
#include "tls.h"
#include "names.h"
#include "thread.h"
#include "tg_snapshot.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

/* Output sink: stdio or gzip. */
struct tg_sink {
    FILE *f;
    gzFile gz;
    int err;
};

/* printf into S (at most 8 KiB per call); a failure is kept in S->err. */
static void
tg_sink_printf(struct tg_sink *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
tg_sink_printf(struct tg_sink *s, const char *fmt, ...)
{
    char buf[8192];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n < 0) {
        s->err = EINVAL;
        return;
    }
    if ((size_t)n >= sizeof(buf))
        n = sizeof(buf) - 1;
    if (s->gz != NULL) {
        if (n > 0 && gzwrite(s->gz, buf, (unsigned)n) != n)
            s->err = EIO;
    } else if (fwrite(buf, 1, (size_t)n, s->f) != (size_t)n) {
        s->err = errno ? errno : EIO;
    }
}

/* Write FILE or FUNC of an entry, escaped as the records are. */
static void
tg_sink_put_text(struct tg_sink *s, const char *txt, size_t len, int esc)
{
    char small[512], *buf = small;
    size_t n = esc ? tg_escaped_len(txt, len) : len;
    if (n + 1 > sizeof(small) && (buf = malloc(n + 1)) == NULL) {
        s->err = ENOMEM;
        return;
    }
    if (esc)
        tg_escape(buf, txt, len);
    else
        memcpy(buf, txt, len);
    buf[n] = '\0';
    if (s->gz != NULL) {
        if (n > 0 && gzwrite(s->gz, buf, (unsigned)n) != (int)n)
            s->err = EIO;
    } else if (fwrite(buf, 1, n, s->f) != n) {
        s->err = EIO;
    }
    if (buf != small)
        free(buf);
}

/* Write the CALL text of function FID: file:line:func, or the no-frame text. */
static void
tg_sink_put_func(struct tg_sink *s, uint32_t fid)
{
    struct tg_acct_func *f;
    if (fid == 0 || fid >= tg_acct.sites.nfuncs) {
        tg_sink_printf(s, "%s", TG_SNAP_CALL_NO_FRAME);
        return;
    }
    f = &tg_acct.sites.funcs[fid];
    tg_sink_put_text(s, f->file, f->file_len, f->esc);
    tg_sink_printf(s, ":%ld:", f->line);
    tg_sink_put_text(s, f->func, f->func_len, f->esc);
}

/* Base names of the run's threads by ix (into the log of TAB, the recorder's thread table, or "native-<tid>" in
 * NATIVE, which holds TG_BASENAME_CAP bytes per thread); N threads.  FOLDED[ix]
 * is set for an aggregate run's folded thread (named by its family). */
static void
tg_acct_thread_bases(struct tg_thread_table *tab, const char **names, char *native, size_t n,
                     uint8_t *folded)
{
    struct tg_acct_thread *t;
    struct tg_thread_logmap map = {NULL, 0, 0};
    size_t i;

    for (i = 0; i < n; i++)
        names[i] = NULL;
    pthread_mutex_lock(&tg_acct.lock);
    t = tg_acct.threads;
    pthread_mutex_unlock(&tg_acct.lock);
    /* The list only grows at its head: walking from a read head is safe. */
    if (tab != NULL) {
        pthread_mutex_lock(&tab->lock);
        (void)tg_thread_logmap_build(&map, tab);  /* none: the walk */
    }
    for (; t != NULL; t = t->next) {
        const struct tg_thread_log *e;
        if (t->ix >= n)
            continue;
        e = tab != NULL ? tg_thread_logmap_find(&map, tab, t->ident, t->native_id) : NULL;
        if (e != NULL) {
            names[t->ix] = e->base;
            folded[t->ix] = (uint8_t)e->folded;
        } else {
            char *buf = native + (size_t)t->ix * TG_BASENAME_CAP;
            snprintf(buf, TG_BASENAME_CAP, "native-%lu", t->native_id);
            names[t->ix] = buf;
        }
    }
    if (tab != NULL) {
        tg_thread_logmap_release(&map);
        pthread_mutex_unlock(&tab->lock);
    }
}

/* The counters a snapshot writes for one node. */
struct tg_snap_row {
    int64_t ab, ac, fb, fc;   /* allocated bytes/count, freed bytes/count (counts fixed-point) */
};

/* What a snapshot reports, taken in one go under tg_acct.spin. */
struct tg_snap_view {
    struct tg_snap_row *rows;  /* [0]: TG_SITE_NOTHREAD (written as node 0),
                                * [1, nids): nodes, [nids]: TG_SITE_FULL */
    int64_t live, peak;        /* process live and peak bytes */
    int64_t peak_ns;           /* when the peak was reached (0: no allocation yet) */
};

/* Fill V->rows (NIDS + 1 of them, allocated by the caller: nothing allocates
 * under the lock) with each node's counters now, or AT_PEAK at the process peak,
 * and the process figures.  GIL held (no node is added meanwhile). */
static void
tg_acct_view_take(struct tg_snap_view *v, size_t nids, int at_peak)
{
    size_t i;

    /* Sampled mode: the live bytes are a sum over the threads, taken before
     * the lock (acct_state.h tracer_freed). */
    int64_t live = tg_acct_live_now();

    tg_acct_spin_lock();
    for (i = 0; i <= nids; i++) {
        uint32_t id = i == 0 ? TG_SITE_NOTHREAD : i < nids ? (uint32_t)i : TG_SITE_FULL;
        struct tg_acct_site_ctr *c = tg_sites_ctr(&tg_acct.sites, id);
        struct tg_snap_row *r = &v->rows[i];
        if (c == NULL) {
            memset(r, 0, sizeof(*r));
        } else if (at_peak && c->stamp == tg_acct.peak_seq) {
            r->ab = c->pk[0];
            r->ac = c->pk[1];
            r->fb = c->pk[2];
            r->fc = c->pk[3];
        } else {
            r->ab = TG_LOAD(c->alloc_bytes);
            r->ac = TG_LOAD(c->alloc_count);
            r->fb = TG_LOAD(c->free_bytes);
            r->fc = TG_LOAD(c->free_count);
        }
    }
    v->live = tg_acct.stack_site == NULL ? TG_LOAD(tg_acct.live) : live;
    v->peak = TG_LOAD(tg_acct.peak);
    v->peak_ns = tg_acct.peak_ns;
    tg_acct_spin_unlock();
}

/* A fixed-point count (TG_ACCT_CNT_ONE per block) rounded to blocks. */
static long long
tg_cnt_round(int64_t v)
{
    return v >= 0 ? (long long)((v + TG_ACCT_CNT_ONE / 2) >> TG_ACCT_CNT_SHIFT)
                  : -(long long)((-v + TG_ACCT_CNT_ONE / 2) >> TG_ACCT_CNT_SHIFT);
}

/* The order in which a snapshot takes the nodes [1, NIDS), parents first,
 * into ORDER (NIDS - 1 ids), and the id each is written as into OUTID (NIDS):
 * by id, unless recycled ids (acct_recycle.h) put a child below its parent:
 * then by depth, written as their rank (a snapshot's ids increase down the
 * file and a parent comes first, docs/formats.md).  WORK holds NIDS + 1.
 * GIL held. */
static void
tg_snap_order(const struct tg_acct_node *nodes, size_t nids, int recycled, uint32_t *order,
              uint32_t *outid, uint32_t *work)
{
    size_t i, n, maxd = 0;

    outid[0] = 0;
    if (!recycled) {
        for (i = 1; i < nids; i++) {
            order[i - 1] = (uint32_t)i;
            outid[i] = (uint32_t)i;
        }
        return;
    }
    /* depths into OUTID (UINT32_MAX: not yet), each node climbed once */
    for (i = 1; i < nids; i++)
        outid[i] = UINT32_MAX;
    for (i = 1; i < nids; i++) {
        uint32_t j = (uint32_t)i, d;
        n = 0;
        while (outid[j] == UINT32_MAX) {
            work[n++] = j;
            if (nodes[j].parent == 0)
                break;
            j = nodes[j].parent;
        }
        d = outid[j] == UINT32_MAX ? 0 : outid[j] + 1;
        while (n > 0) {
            j = work[--n];
            outid[j] = nodes[j].parent == 0 ? 0 : d;
            d = outid[j] + 1;
        }
    }
    /* a counting sort by depth: WORK counts, then starts */
    for (i = 1; i < nids; i++)
        if (outid[i] > maxd)
            maxd = outid[i];
    memset(work, 0, (maxd + 2) * sizeof(*work));
    for (i = 1; i < nids; i++)
        work[outid[i] + 1]++;
    for (i = 1; i <= maxd + 1; i++)
        work[i] += work[i - 1];
    for (i = 1; i < nids; i++)
        order[work[outid[i]]++] = (uint32_t)i;
    for (i = 0; i + 1 < nids; i++)
        outid[order[i]] = (uint32_t)i + 1;
}

/* An aggregate run's folded threads (thread_fold.c) merged by family, so that
 * a snapshot holds a family's calling-context tree once however many threads
 * it has: REP[ix] is the ix written for thread ix (the first folded thread of
 * its family, or itself; REP holds 2 NTHR, its second half a work area), CANON[node] the node that holds its counts (the
 * first one of the family with the same path, or itself), and the counts of
 * the others are added to it in ROWS.  SLOTS (MASK + 1 of them, zero, MASK + 1
 * a power of two above twice NIDS) is the path table.  Nodes are taken in
 * ORDER (tg_snap_order), parents first, so a parent's CANON is known first.
 * GIL held. */
static void
tg_snap_fold(const struct tg_acct_node *nodes, size_t nids, struct tg_snap_row *rows,
             const uint8_t *folded, const char **tnames, size_t nthr, uint32_t *canon,
             uint32_t *rep, uint32_t *slots, size_t mask, const uint32_t *order)
{
    size_t i, j, k, nreps = 0;

    /* the families' first threads, in REP's room past NTHR: a family's threads
     * are found among the families (at most TG_AGG_FAMILIES + 1 of them), not
     * among all the threads before them, which made a snapshot quadratic */
    for (i = 0; i < nthr; i++) {
        rep[i] = (uint32_t)i;
        if (!folded[i])
            continue;
        for (j = 0; j < nreps; j++)
            if (strcmp(tnames[rep[nthr + j]], tnames[i]) == 0) {
                rep[i] = rep[nthr + j];
                break;
            }
        if (j == nreps)
            rep[nthr + nreps++] = (uint32_t)i;
    }
    canon[0] = 0;
    for (i = 1; i < nids; i++)
        canon[i] = (uint32_t)i;
    for (k = 0; k + 1 < nids; k++) {
        const struct tg_acct_node *n;
        i = order[k];
        n = &nodes[i];
        /* a root's key is its family (parent 0, fid 0, rep ix); a node's, its
         * parent's merged node and its call */
        uint32_t p = n->parent != 0 ? canon[n->parent] : 0;
        uint32_t tix = n->tix < nthr ? rep[n->tix] : n->tix;
        size_t h;
        if (n->tix >= nthr || !folded[n->tix])
            continue;
        h = (size_t)((((uint64_t)p << 32 | n->fid) ^ (uint64_t)tix << 20)
                     * 0x9E3779B97F4A7C15ull >> 17) & mask;
        for (;; h = (h + 1) & mask) {
            uint32_t s = slots[h];
            if (s == 0) {
                slots[h] = (uint32_t)i;
                break;
            }
            if (nodes[s].fid == n->fid && rep[nodes[s].tix] == tix
                    && (nodes[s].parent != 0 ? canon[nodes[s].parent] : 0) == p) {
                canon[i] = s;
                rows[s].ab += rows[i].ab;
                rows[s].ac += rows[i].ac;
                rows[s].fb += rows[i].fb;
                rows[s].fc += rows[i].fc;
                memset(&rows[i], 0, sizeof(rows[i]));
                break;
            }
        }
    }
}

/* Write the snapshot file PATH (tmp + rename): the nodes that hold counts and
 * their ancestors, parents first (docs/formats.md).  AT_PEAK: the counters at
 * the process peak, with the peak's time and the peak as the process live
 * bytes.  0 or -errno. */
static int
tg_acct_write_snapshot(const char *path, const char *label, unsigned number, int at_peak)
{
    const struct tg_acct_node *nodes = tg_acct.sites.nodes;
    size_t nids = tg_acct.sites.nnodes > 0 ? tg_acct.sites.nnodes : 1, nthr, i, k;
    uint8_t *keep = NULL, *tused = NULL, *folded = NULL;
    uint32_t *canon = NULL, *rep = NULL, *slots = NULL, *order = NULL, *outid = NULL;
    uint32_t *work = NULL;
    size_t mask = 15;
    const char **tnames = NULL;
    char *native = NULL;
    int64_t sums[4] = {0, 0, 0, 0}, mean = atomic_load(&tg_acct.sample);
    struct tg_snap_view v = {NULL, 0, 0, 0};
    char *tmp;
    struct tg_sink s = {NULL, NULL, 0};
    struct timespec now;
    long long tsec;
    long tusec;
    int ret = 0;

    pthread_mutex_lock(&tg_acct.lock);
    nthr = tg_acct.nthreads;
    pthread_mutex_unlock(&tg_acct.lock);
    tmp = malloc(strlen(path) + 8);
    keep = calloc(nids + 1, 1);   /* [nids]: the overflow node */
    tused = calloc(nthr + 1, 1);
    tnames = calloc(nthr + 1, sizeof(*tnames));
    native = malloc((nthr + 1) * TG_BASENAME_CAP);
    v.rows = malloc((nids + 1) * sizeof(*v.rows));
    folded = calloc(nthr + 1, 1);
    canon = malloc((nids + 1) * sizeof(*canon));
    rep = malloc((2 * nthr + 1) * sizeof(*rep));  /* [nthr, 2 nthr): the families */
    order = malloc((nids + 1) * sizeof(*order));
    outid = malloc((nids + 1) * sizeof(*outid));
    work = malloc((nids + 2) * sizeof(*work));
    while (mask + 1 < 2 * nids)
        mask = mask * 2 + 1;
    slots = calloc(mask + 1, sizeof(*slots));
    if (tmp == NULL || keep == NULL || tused == NULL || tnames == NULL || native == NULL
            || v.rows == NULL || folded == NULL || canon == NULL || rep == NULL
            || slots == NULL || order == NULL || outid == NULL || work == NULL) {
        ret = -ENOMEM;
        goto out_free;
    }
    clock_gettime(CLOCK_REALTIME, &now);
    tg_acct_view_take(&v, nids, at_peak);
    tg_acct_thread_bases(tg_acct.thread_table, tnames, native, nthr, folded);
    tg_snap_order(nodes, nids, tg_acct.sites.recycled, order, outid, work);
    tg_snap_fold(nodes, nids, v.rows, folded, tnames, nthr, canon, rep, slots, mask, order);
    /* Nodes with counts, then their ancestors up to (not including) the thread's
     * root: a child of a root is written as a root itself.  Each node is marked
     * once, so this is O(nodes). */
    for (i = 0; i <= nids; i++) {
        const struct tg_snap_row *r = &v.rows[i];
        uint32_t p;
        if (r->ac == 0 && r->fc == 0)
            continue;
        sums[0] += r->ab - r->fb;
        sums[1] += r->ac - r->fc;
        sums[2] += r->ab;
        sums[3] += r->ac;
        keep[i] = 1;
        if (i == 0 || i == nids)
            continue;
        for (p = canon[nodes[i].parent]; p != 0 && nodes[p].parent != 0 && !keep[p];
             p = canon[nodes[p].parent])
            keep[p] = 1;
    }
    for (i = 1; i < nids; i++)
        if (keep[i] && nodes[i].tix < nthr)
            tused[rep[nodes[i].tix]] = 1;
    sprintf(tmp, "%s.tmp", path);
    if (tg_acct.compress) {
        s.gz = gzopen(tmp, "wb6");
        if (s.gz == NULL) {
            ret = errno ? -errno : -EIO;
            goto out_free;
        }
    } else {
        s.f = fopen(tmp, "w");
        if (s.f == NULL) {
            ret = -errno;
            goto out_free;
        }
    }
    tsec = (long long)now.tv_sec;
    tusec = now.tv_nsec / 1000;
    if (at_peak) {
        /* When the peak was reached (the start of the run if nothing was). */
        int64_t ns = v.peak_ns > 0 ? v.peak_ns
                     : (int64_t)tg_acct.t0.tv_sec * 1000000000 + tg_acct.t0.tv_nsec;
        tsec = (long long)(ns / 1000000000);
        tusec = (long)(ns % 1000000000 / 1000);
        v.live = v.peak;
    }
    tg_sink_printf(&s, TG_SNAP_MAGIC TG_SNAP_VERSION_STR "\n"
                   TG_SNAP_HDR(TG_SNAP_KEY_LABEL) "%s\n"
                   TG_SNAP_HDR(TG_SNAP_KEY_NUMBER) "%u\n"
                   TG_SNAP_HDR(TG_SNAP_KEY_TIME) "%lld.%06ld\n"
                   TG_SNAP_HDR(TG_SNAP_KEY_PID) "%ld\n"
                   TG_SNAP_HDR(TG_SNAP_KEY_RUN_START) "%lld.%06ld\n"
                   TG_SNAP_HDR(TG_SNAP_KEY_LIVE_BYTES) "%lld\n"
                   TG_SNAP_HDR(TG_SNAP_KEY_LIVE_COUNT) "%lld\n"
                   TG_SNAP_HDR(TG_SNAP_KEY_TOTAL_BYTES) "%lld\n"
                   TG_SNAP_HDR(TG_SNAP_KEY_TOTAL_COUNT) "%lld\n"
                   TG_SNAP_HDR(TG_SNAP_KEY_PROCESS_LIVE) "%lld\n"
                   TG_SNAP_HDR(TG_SNAP_KEY_PROCESS_PEAK) "%lld\n",
                   label, number, tsec, tusec, (long)getpid(),
                   (long long)tg_acct.t0.tv_sec, tg_acct.t0.tv_nsec / 1000,
                   (long long)sums[0], tg_cnt_round(sums[1]), (long long)sums[2],
                   tg_cnt_round(sums[3]), (long long)v.live, (long long)v.peak);
    if (mean > 0)
        tg_sink_printf(&s, TG_SNAP_HDR(TG_SNAP_KEY_SAMPLED) "%lld\n", (long long)mean);
    for (i = 0; i < nthr; i++)
        if (tused[i])
            tg_sink_printf(&s, TG_SNAP_HDR(TG_SNAP_KEY_THREAD) "%zu %s\n", i, tnames[i]);
    tg_sink_printf(&s, TG_SNAP_COLUMNS "\n");
    /* row 0 (TG_SITE_NOTHREAD), the nodes in ORDER, the overflow row */
    for (k = 0; k <= nids && !s.err; k++) {
        size_t i = k == 0 || k == nids ? k : order[k - 1];
        uint32_t id = i < nids ? (uint32_t)i : TG_SITE_FULL;
        const struct tg_snap_row *r = &v.rows[i];
        const struct tg_acct_node *n = id != 0 && id != TG_SITE_FULL ? &nodes[id] : NULL;
        if (!keep[i])
            continue;
        tg_sink_printf(&s, "%lu ", (unsigned long)(n != NULL ? outid[id] : id));
        if (n != NULL && n->parent != 0 && nodes[n->parent].parent != 0)
            tg_sink_printf(&s, "%lu ", (unsigned long)outid[canon[n->parent]]);
        else
            tg_sink_printf(&s, TG_SNAP_NONE_REF " ");
        if (n != NULL && n->tix < nthr)
            tg_sink_printf(&s, "%lu ", (unsigned long)rep[n->tix]);
        else
            tg_sink_printf(&s, TG_SNAP_NONE_REF " ");
        tg_sink_printf(&s, "%lld %lld %lld %lld ", (long long)(r->ab - r->fb),
                       tg_cnt_round(r->ac - r->fc), (long long)r->ab, tg_cnt_round(r->ac));
        if (id == TG_SITE_FULL)
            tg_sink_printf(&s, "%s", TG_SNAP_CALL_TABLE_FULL);
        else
            tg_sink_put_func(&s, n != NULL ? n->fid : 0);
        tg_sink_printf(&s, "\n");
    }
    if (s.gz != NULL) {
        if (gzclose(s.gz) != Z_OK && !s.err)
            s.err = EIO;
    } else if (fclose(s.f) != 0 && !s.err) {
        s.err = errno ? errno : EIO;
    }
    if (s.err) {
        unlink(tmp);
        ret = -s.err;
    } else if (rename(tmp, path) != 0) {
        ret = -errno;
        unlink(tmp);
    }
out_free:
    free(v.rows);
    free(keep);
    free(tused);
    free(folded);
    free(canon);
    free(rep);
    free(slots);
    free(order);
    free(outid);
    free(work);
    free(tnames);
    free(native);
    free(tmp);
    return ret;
}

/* snapshot-<N>-<LABEL>[.gz]: now, or AT_PEAK at the process peak.  LABEL is
 * made safe for a file name (names.h), unless SAFE says it is already (made of
 * safe parts: a thread's base name is escaped once, not twice) and it fits. */
static PyObject *
tg_acct_snapshot_write(const char *label, int at_peak, int safe)
{
    char base[TG_BASENAME_CAP];
    char *path;
    size_t n;
    int busy = tg_tls.busy, ret;
    PyObject *res = NULL;

    if (tg_acct.outdir == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "allocation accounting is not on");
        return NULL;
    }
    tg_tls.busy |= TG_BUSY_TRACER;  /* our own buffers are not the program's */
    if (safe && strlen(label) <= TG_NAME_MAX)
        strcpy(base, label);
    else
        tg_safe_basename(label, strlen(label), base);
    n = strlen(tg_acct.outdir) + strlen(base) + 40 + TG_LIT_LEN(TG_SNAP_FILE_PREFIX);
    path = malloc(n);
    if (path == NULL) {
        tg_tls.busy = busy;
        return PyErr_NoMemory();
    }
    tg_acct.nsnap++;
    snprintf(path, n, "%s/" TG_SNAP_FILE_PREFIX "%u-%s%s", tg_acct.outdir, tg_acct.nsnap, base,
             tg_acct.compress ? ".gz" : "");
    ret = tg_acct_write_snapshot(path, label, tg_acct.nsnap, at_peak);
    tg_tls.busy = busy;
    if (ret < 0) {
        errno = -ret;
        PyErr_SetFromErrnoWithFilename(PyExc_OSError, path);
    } else {
        res = PyUnicode_DecodeFSDefault(path);
    }
    free(path);
    return res;
}

PyObject *
tg_acct_snapshot(const char *label)
{
    return tg_acct_snapshot_write(label, 0, 0);
}

void
tg_acct_snapshot_noted(const char *what, const char *label, int safe)
{
    PyObject *p = tg_acct_snapshot_write(label, 0, safe);

    if (p == NULL && tg_acct.sched_err[0] == '\0') {
        PyObject *t, *v, *tb, *msg;
        PyErr_Fetch(&t, &v, &tb);
        msg = v != NULL ? PyObject_Str(v) : NULL;
        snprintf(tg_acct.sched_err, sizeof(tg_acct.sched_err), "%s snapshot %s failed: %s",
                 what, label, msg != NULL && PyUnicode_Check(msg) ? PyUnicode_AsUTF8(msg) : "?");
        Py_XDECREF(msg);
        Py_XDECREF(t);
        Py_XDECREF(v);
        Py_XDECREF(tb);
    }
    Py_XDECREF(p);
    PyErr_Clear();
}

PyObject *
tg_acct_snapshot_peak(void)
{
    return tg_acct_snapshot_write(TG_SNAP_PEAK_LABEL, 1, 0);
}

