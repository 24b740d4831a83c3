/*
 * sampled.c - the event source of mode="sampled" (see sampled.h): a sampled
 * allocation's call site from the thread's frames.
 *
 * Called from inside an allocator hook, after the block was allocated and
 * counted: the walk may build a code object's cache entry (Python allocates
 * it), so the thread is marked TG_BUSY_TRACER meanwhile (the hooks neither
 * count nor enter what it allocates) and the exception in flight is saved
 * around it.  Interning needs the GIL (acct_sites.h): without it the sample
 * goes to the thread's root, which exists from the thread's first sample made
 * with the GIL.
 */
#include "sampled.h"
#include "accounting.h"
#include "tls.h"
#include "recorder.h"

#include <stdlib.h>
#include <string.h>

/* The enabling thread's frames at enable, outermost first (strong references),
 * and that thread's ident: written with the GIL at enable and disable, read
 * with the GIL by the walk. */
static PyCodeObject **tg_sampled_prefix;
static int tg_sampled_nprefix;
static unsigned long tg_sampled_prefix_ident;

int
tg_sampled_start(void)
{
    PyCodeObject *codes[TG_SAMPLED_MAX_FRAMES];
    int n, i;

    tg_sampled_stop();
    n = tg_stack_codes(PyThreadState_Get(), codes, TG_SAMPLED_MAX_FRAMES);
    if (n == 0)
        return 0;
    tg_sampled_prefix = malloc((size_t)n * sizeof(*tg_sampled_prefix));
    if (tg_sampled_prefix == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (i = 0; i < n; i++) {
        tg_sampled_prefix[i] = codes[n - 1 - i];
        Py_INCREF(tg_sampled_prefix[i]);
    }
    tg_sampled_nprefix = n;
    tg_sampled_prefix_ident = PyThread_get_thread_ident();
    return 0;
}

void
tg_sampled_stop(void)
{
    int i;
    for (i = 0; i < tg_sampled_nprefix; i++)
        Py_DECREF(tg_sampled_prefix[i]);
    free(tg_sampled_prefix);
    tg_sampled_prefix = NULL;
    tg_sampled_nprefix = 0;
}

/* T's node for the frames CODES[0..N) (innermost first), interned from its
 * root outwards in.  GIL held, TG_BUSY_TRACER set, the exception saved. */
static uint32_t
tg_sampled_intern(struct tg_recorder *r, struct tg_acct_thread *t, PyCodeObject **codes, int n)
{
    uint32_t node = tg_acct_root(t);
    int i = n, j = 0;

    /* The enabling thread's frames that were running at enable (and still
     * are: the same code at the same depth from the root) are no call of the
     * run's. */
    if (t->ident == tg_sampled_prefix_ident)
        while (j < tg_sampled_nprefix && i > 0 && codes[i - 1] == tg_sampled_prefix[j]) {
            i--;
            j++;
        }
    while (i-- > 0 && node != TG_SITE_FULL) {
        const char *file, *func;
        size_t file_len, func_len;
        long line;
        uint32_t fid;
        int k = tg_code_site(r, codes[i], &file, &file_len, &line, &func, &func_len);

        if (k == -1)
            break;      /* profiler plumbing: it and its callees are hidden */
        if (k < 1)
            continue;   /* filtered out (or no entry): its callees nest in its caller */
        fid = tg_sites_func_intern(&tg_acct.sites, file, file_len, line, func, func_len, 0);
        node = fid ? tg_sites_node_intern(&tg_acct.sites, node, fid) : TG_SITE_FULL;
    }
    return node;
}

uint32_t
tg_sampled_site(struct tg_acct_thread *t)
{
    PyCodeObject *codes[TG_SAMPLED_MAX_FRAMES];
    struct tg_recorder_object *a;
    PyThreadState *ts;
    tg_saved_exc saved;
    uint32_t node;
    int busy, n;

    if ((tg_tls.busy & TG_BUSY_TRACER) || (ts = tg_tstate_if_gil()) == NULL)
        return t->root ? t->root : TG_SITE_NOTHREAD;
    a = tg_active;  /* GIL held: stable while we run */
    if (a == NULL || !a->r.active)
        return t->root ? t->root : TG_SITE_NOTHREAD;
    busy = tg_tls.busy;
    tg_tls.busy |= TG_BUSY_TRACER;
    tg_exc_save(&saved);
    n = tg_stack_codes(ts, codes, TG_SAMPLED_MAX_FRAMES);
    node = tg_sampled_intern(&a->r, t, codes, n);
    tg_sampled_curve_point(a, TG_LOAD(t->requested) - TG_LOAD(t->freed));
    tg_exc_restore(&saved);
    tg_tls.busy = busy;
    return node;
}
