/*
 * acct_py.c - allocation accounting's figures as Python objects (see
 * acct_py.h): the binding's side of the engine.
 */
#include "acct_py.h"
#include "acct_state.h"
#include "tls.h"
#include "thread.h"

#include <stdlib.h>
#include <string.h>

/* d[key] = v, stealing V (which may be NULL after a failed constructor). */
static int
tg_dict_set_steal(PyObject *d, const char *key, PyObject *v)
{
    int r;
    if (v == NULL)
        return -1;
    r = PyDict_SetItemString(d, key, v);
    Py_DECREF(v);
    return r;
}

/* A histogram H (TG_ACCT_BINS counters) as a new list of ints, or NULL. */
static PyObject *
tg_hist_list(_Atomic int64_t *h)
{
    PyObject *l = PyList_New(TG_ACCT_BINS);
    int i;
    if (l == NULL)
        return NULL;
    for (i = 0; i < TG_ACCT_BINS; i++) {
        PyObject *v = PyLong_FromLongLong((long long)TG_LOAD(h[i]));
        if (v == NULL) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, i, v);
    }
    return l;
}

/* Figures F with PEAK as a new dict (the keys of summary.json), or NULL. */
static PyObject *
tg_figs_dict(const struct tg_acct_figs *f, int64_t peak)
{
    return Py_BuildValue("{s:L,s:L,s:L,s:L,s:L,s:L}",
                         "total_requested_bytes", (long long)f->requested,
                         "freed_bytes", (long long)f->freed,
                         "alloc_calls", (long long)f->alloc_calls,
                         "free_calls", (long long)f->free_calls,
                         "live_bytes", (long long)f->live,
                         "peak_bytes", (long long)peak);
}

/* Name of thread T from the log of the recorder's thread table TAB (new str), or "native-<id>"; an
 * aggregate run's folded thread goes by its family's name (its base, thread.h),
 * and *FOLDED (may be NULL) says so; *LOGGED (may be NULL): whether the log
 * has it (not: a thread that never ran Python code, whose blocks go to the
 * thread-less sites).  MAP: TAB's log by thread, built for the
 * pass (thread.h tg_thread_logmap; a walk of the log per thread made the
 * summary of a run of many threads quadratic). */
static PyObject *
tg_thread_name(struct tg_thread_table *tab, const struct tg_thread_logmap *map,
               struct tg_acct_thread *t, PyObject **base, int *folded, int *logged)
{
    const struct tg_thread_log *e;
    *base = NULL;
    if (folded != NULL)
        *folded = 0;
    if (logged != NULL)
        *logged = 0;
    if (tab != NULL) {
        pthread_mutex_lock(&tab->lock);
        e = tg_thread_logmap_find(map, tab, t->ident, t->native_id);
        if (e != NULL) {
            PyObject *n = e->folded
                ? PyUnicode_FromString(e->base)
                : PyUnicode_DecodeUTF8(e->name, (Py_ssize_t)e->name_len, "surrogateescape");
            if (folded != NULL)
                *folded = e->folded;
            if (logged != NULL)
                *logged = 1;
            *base = PyUnicode_FromString(e->base);
            pthread_mutex_unlock(&tab->lock);
            return n;
        }
        pthread_mutex_unlock(&tab->lock);
    }
    *base = PyUnicode_FromFormat("native-%lu", t->native_id);
    return PyUnicode_FromFormat("native-%lu", t->native_id);
}

/* A fixed-point block count (TG_ACCT_CNT_ONE per block) rounded to blocks. */
static long long
tg_py_cnt_round(int64_t v)
{
    return v >= 0 ? (long long)((v + TG_ACCT_CNT_ONE / 2) >> TG_ACCT_CNT_SHIFT)
                  : -(long long)((-v + TG_ACCT_CNT_ONE / 2) >> TG_ACCT_CNT_SHIFT);
}

/* Each thread's live bytes at its own sites (what it allocated that is still
 * live), by thread ix, into a new array of N (GIL: the nodes' table); NULL if
 * out of memory. */
static int64_t *
tg_acct_own_live(uint32_t n)
{
    int64_t *v = calloc(n ? n : 1, sizeof(*v));
    size_t i;

    if (v == NULL)
        return NULL;
    for (i = 1; i < tg_acct.sites.nnodes; i++) {
        struct tg_acct_site_ctr *c = tg_sites_ctr(&tg_acct.sites, (uint32_t)i);
        if (c != NULL && c->tix1 != 0 && c->tix1 <= n)
            v[c->tix1 - 1] += TG_LOAD(c->alloc_bytes) - TG_LOAD(c->free_bytes);
    }
    return v;
}

/* The "freed_by" list: {"allocated_in", "freed_in", "bytes", "blocks"} per
 * pair of threads (names by ix in NAMES, a list of N), largest first; a new
 * list or NULL.  *LOST gets the bytes of pairs that did not fit. */
static PyObject *
tg_acct_freed_by(PyObject *names, uint32_t n, int64_t *lost)
{
    struct tg_acct_pair *v = malloc(TG_ACCT_PAIRS * sizeof(*v));
    PyObject *l = NULL;
    int64_t lost_count;
    size_t i, j;

    if (v == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    tg_acct_pairs_copy(v, lost, &lost_count);
    /* largest first: compact the used slots, then insertion sort (few pairs) */
    for (i = j = 0; i < TG_ACCT_PAIRS; i++)
        if (v[i].a1 != 0 && v[i].a1 <= n && v[i].f < n)
            v[j++] = v[i];
    for (i = 1; i < j; i++) {
        struct tg_acct_pair x = v[i];
        size_t k = i;
        for (; k > 0 && v[k - 1].bytes < x.bytes; k--)
            v[k] = v[k - 1];
        v[k] = x;
    }
    l = PyList_New(0);
    for (i = 0; l != NULL && i < j; i++) {
        PyObject *d = Py_BuildValue("{s:O,s:O,s:L,s:L}",
                                    "allocated_in", PyList_GET_ITEM(names, v[i].a1 - 1),
                                    "freed_in", PyList_GET_ITEM(names, v[i].f),
                                    "bytes", (long long)v[i].bytes,
                                    "blocks", tg_py_cnt_round(v[i].count));
        if (d == NULL || PyList_Append(l, d) < 0)
            Py_CLEAR(l);
        Py_XDECREF(d);
    }
    free(v);
    return l;
}

/* An aggregate run's folded threads (thread_fold.c) added up by family, so
 * that the summary has one entry per family however many threads it holds. */
struct tg_acct_family {
    PyObject *name;                    /* the family's name; owned */
    struct tg_acct_figs f;             /* sums */
    int64_t peak;                      /* the highest of the threads' peaks */
    int64_t own;                       /* live_at_end_bytes, summed */
    _Atomic int64_t ha[TG_ACCT_BINS], hf[TG_ACCT_BINS];  /* summed (tg_hist_list) */
    unsigned long long threads;
};

/* Add thread T (figures F, OWN live at end) to the family NAME of *FAMS (grown
 * when new).  0, or -1 with a Python exception. */
static int
tg_acct_family_add(struct tg_acct_family **fams, size_t *n, PyObject *name,
                   struct tg_acct_thread *t, const struct tg_acct_figs *f, int64_t own)
{
    struct tg_acct_family *fam = NULL;
    size_t i;
    int b;

    for (i = 0; i < *n && fam == NULL; i++) {
        int c = PyUnicode_Compare((*fams)[i].name, name);
        if (c == -1 && PyErr_Occurred())
            return -1;
        if (c == 0)
            fam = &(*fams)[i];
    }
    if (fam == NULL) {
        struct tg_acct_family *g = realloc(*fams, (*n + 1) * sizeof(*g));
        if (g == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        *fams = g;
        fam = &g[(*n)++];
        memset(fam, 0, sizeof(*fam));
        Py_INCREF(name);
        fam->name = name;
        fam->peak = INT64_MIN;
    }
    fam->f.alloc_calls += f->alloc_calls;
    fam->f.free_calls += f->free_calls;
    fam->f.requested += f->requested;
    fam->f.freed += f->freed;
    fam->f.live += f->live;
    if (TG_LOAD(t->peak) > fam->peak)
        fam->peak = TG_LOAD(t->peak);
    fam->own += own;
    for (b = 0; b < TG_ACCT_BINS; b++) {
        TG_OWN_ADD(fam->ha[b], TG_LOAD(t->hist_alloc[b]));
        TG_OWN_ADD(fam->hf[b], TG_LOAD(t->hist_free[b]));
    }
    fam->threads++;
    return 0;
}

/* Append one dict per family of FAMS (N) to THREADS, as a thread's, with
 * "folded_threads".  0, or -1 with a Python exception. */
static int
tg_acct_families_list(struct tg_acct_family *fams, size_t n, PyObject *threads)
{
    size_t i;
    for (i = 0; i < n; i++) {
        PyObject *d = tg_figs_dict(&fams[i].f, fams[i].peak);
        if (d == NULL
                || PyDict_SetItemString(d, "name", fams[i].name) < 0
                || PyDict_SetItemString(d, "base", fams[i].name) < 0
                || tg_dict_set_steal(d, "native_id", PyLong_FromLong(0)) < 0
                || tg_dict_set_steal(d, "hist_alloc", tg_hist_list(fams[i].ha)) < 0
                || tg_dict_set_steal(d, "hist_free", tg_hist_list(fams[i].hf)) < 0
                || tg_dict_set_steal(d, "live_at_end_bytes",
                                     PyLong_FromLongLong((long long)fams[i].own)) < 0
                || tg_dict_set_steal(d, "folded_threads",
                                     PyLong_FromUnsignedLongLong(fams[i].threads)) < 0
                || PyList_Append(threads, d) < 0) {
            Py_XDECREF(d);
            return -1;
        }
        Py_DECREF(d);
    }
    return 0;
}

static void
tg_acct_families_free(struct tg_acct_family *fams, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        Py_DECREF(fams[i].name);
    free(fams);
}

/* tg_acct_figures without the tracer mark (acct_py.h). */
static PyObject *
tg_acct_figures_impl(struct tg_thread_table *tab)
{
    struct tg_acct_figs pf;
    struct tg_acct_thread *t;
    PyObject *res = NULL, *proc = NULL, *threads = NULL, *ha = NULL, *hf = NULL;
    PyObject *names = NULL, *freed_by = NULL;
    int64_t pha[TG_ACCT_BINS], phf[TG_ACCT_BINS], *own = NULL, lost = 0;
    struct tg_acct_family *fams = NULL;
    size_t nfams = 0;
    uint32_t nthreads;
    int i, folded, logged;
    struct tg_thread_logmap map = {NULL, 0, 0};

    memset(pha, 0, sizeof(pha));
    memset(phf, 0, sizeof(phf));
    tg_acct_process_figs(&pf);
    threads = PyList_New(0);
    if (threads == NULL)
        goto done;
    pthread_mutex_lock(&tg_acct.lock);
    t = tg_acct.threads;
    nthreads = tg_acct.nthreads;
    pthread_mutex_unlock(&tg_acct.lock);
    if (tab != NULL) {
        pthread_mutex_lock(&tab->lock);
        (void)tg_thread_logmap_build(&map, tab);  /* none: tg_thread_name walks */
        pthread_mutex_unlock(&tab->lock);
    }
    /* names by ix, for the pairs (a thread made after the read head has none) */
    names = PyList_New(nthreads);
    own = tg_acct_own_live(nthreads);
    if (names == NULL || own == NULL)
        goto done;
    for (i = 0; i < (int)nthreads; i++) {
        Py_INCREF(Py_None);
        PyList_SET_ITEM(names, i, Py_None);
    }
    /* The list only grows at its head: walking from a read head is safe. */
    for (; t != NULL; t = t->next) {
        struct tg_acct_figs f;
        PyObject *d, *name, *base, *a, *b;
        tg_acct_thread_figs(t, &f);
        if (t->ix < nthreads) {
            PyObject *nm = tg_thread_name(tab, &map, t, &base, NULL, NULL);
            Py_XDECREF(base);
            if (nm == NULL)
                goto done;
            PyList_SetItem(names, t->ix, nm);  /* steals nm */
        }
        for (i = 0; i < TG_ACCT_BINS; i++) {
            pha[i] += TG_LOAD(t->hist_alloc[i]);
            phf[i] += TG_LOAD(t->hist_free[i]);
        }
        if (f.alloc_calls == 0 && f.free_calls == 0)
            continue;
        name = tg_thread_name(tab, &map, t, &base, &folded, &logged);
        if (name != NULL && folded) {
            Py_XDECREF(base);
            i = tg_acct_family_add(&fams, &nfams, name, t, &f,
                                   t->ix < nthreads ? own[t->ix] : 0);
            Py_DECREF(name);
            if (i < 0)
                goto done;
            continue;
        }
        d = tg_figs_dict(&f, TG_LOAD(t->peak));
        a = tg_hist_list(t->hist_alloc);
        b = tg_hist_list(t->hist_free);
        if (d == NULL || name == NULL || base == NULL || a == NULL || b == NULL
                || PyDict_SetItemString(d, "name", name) < 0
                || PyDict_SetItemString(d, "base", base) < 0
                || tg_dict_set_steal(d, "native_id", PyLong_FromUnsignedLong(t->native_id)) < 0
                || PyDict_SetItemString(d, "hist_alloc", a) < 0
                || PyDict_SetItemString(d, "hist_free", b) < 0
                /* unknown (None) for a thread outside the log: it has no
                 * sites of its own to sum (docs/accounting.md) */
                || tg_dict_set_steal(d, "live_at_end_bytes", !logged ? (Py_INCREF(Py_None), Py_None)
                       : PyLong_FromLongLong((long long)(t->ix < nthreads ? own[t->ix] : 0))) < 0
                || PyList_Append(threads, d) < 0) {
            Py_XDECREF(d);
            Py_XDECREF(name);
            Py_XDECREF(base);
            Py_XDECREF(a);
            Py_XDECREF(b);
            goto done;
        }
        Py_DECREF(d);
        Py_DECREF(name);
        Py_DECREF(base);
        Py_DECREF(a);
        Py_DECREF(b);
    }
    if (tg_acct_families_list(fams, nfams, threads) < 0)
        goto done;
    proc = tg_figs_dict(&pf, TG_LOAD(tg_acct.peak));
    if (proc == NULL)
        goto done;
    ha = PyList_New(TG_ACCT_BINS);
    hf = PyList_New(TG_ACCT_BINS);
    if (ha == NULL || hf == NULL)
        goto done;
    for (i = 0; i < TG_ACCT_BINS; i++) {
        PyList_SET_ITEM(ha, i, PyLong_FromLongLong((long long)pha[i]));
        PyList_SET_ITEM(hf, i, PyLong_FromLongLong((long long)phf[i]));
    }
    if (PyDict_SetItemString(proc, "hist_alloc", ha) < 0
            || PyDict_SetItemString(proc, "hist_free", hf) < 0)
        goto done;
    if ((freed_by = tg_acct_freed_by(names, nthreads, &lost)) == NULL)
        goto done;
    res = Py_BuildValue("{s:O,s:O,s:O,s:I,s:L,s:O,s:L}", "process", proc, "threads", threads,
                        "windows", tg_acct.closed_windows ? tg_acct.closed_windows : Py_None,
                        "snapshots", tg_acct.nsnap,
                        "sample_bytes", (long long)atomic_load(&tg_acct.sample),
                        "freed_by", freed_by, "freed_by_lost_bytes", (long long)lost);
done:
    tg_thread_logmap_release(&map);
    tg_acct_families_free(fams, nfams);
    Py_XDECREF(names);
    Py_XDECREF(freed_by);
    free(own);
    Py_XDECREF(proc);
    Py_XDECREF(threads);
    Py_XDECREF(ha);
    Py_XDECREF(hf);
    return res;
}

PyObject *
tg_acct_window_dict(const char *name, double seconds, const struct tg_acct_figs *pd,
                    int64_t peak, int64_t live0, const struct tg_acct_figs *td)
{
    PyObject *d = NULL, *pdict, *tdict;

    pdict = tg_figs_dict(pd, peak);
    tdict = tg_figs_dict(td, 0);
    if (pdict == NULL || tdict == NULL)
        goto done;
    if (tg_dict_set_steal(pdict, "live_bytes_at_start", PyLong_FromLongLong(live0)) < 0
            || tg_dict_set_steal(pdict, "peak_above_start_bytes",
                                 PyLong_FromLongLong(peak - live0)) < 0)
        goto done;
    PyDict_DelItemString(tdict, "peak_bytes");
    d = Py_BuildValue("{s:s,s:d,s:O,s:O}", "name", name, "seconds", seconds, "process", pdict,
                      "thread", tdict);
done:
    Py_XDECREF(pdict);
    Py_XDECREF(tdict);
    return d;
}

PyObject *
tg_acct_figures(struct tg_thread_table *tab)
{
    /* What we allocate to report is the tracer's, not the program's. */
    int busy = tg_tls.busy;
    PyObject *res;
    tg_tls.busy |= TG_BUSY_TRACER;
    res = tg_acct_figures_impl(tab);
    tg_tls.busy = busy;
    return res;
}
