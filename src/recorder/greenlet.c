/*
 * greenlet.c - a stack per greenlet; see greenlet.h.
 *
 * greenlet calls its thread's trace function (greenlet.settrace) after each
 * switch, in the greenlet switched to, before that greenlet runs anything:
 * ("switch" or "throw", (origin, target)).  The recorder's makes TARGET's state
 * the thread's current one (tg_tls.thread): its stack, and its memory
 * counters, which the allocator hooks add to (tg_tls.allocated and freed are
 * swapped with the state's; the process and rss modes, whose readings are the
 * process's, give the others' growth meanwhile to its correction, as a sleep
 * does).  A greenlet's state is made at its first switch, named
 * "<thread>-greenlet-N" (or "<thread>-<name>" for a greenlet with a str name,
 * gevent's), and ended when a switch leaves it dead.  Its thread's own state,
 * the main greenlet's, lists them.  Everything here runs with the GIL, in the
 * thread the states belong to.
 */
#include "greenlet.h"
#include "tls.h"
#include "alloc_hooks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The switch hook (a builtin of this module), and "greenlet" as a module
 * name; set at init, never freed.  GIL. */
static PyObject *tg_glet_tracer;
static PyObject *tg_glet_modname;

/* The hook the recorder's replaced in this thread, called after it (strong;
 * NULL: none).  Only its own thread reads or writes it; kept across runs (the
 * recorder's hook stays installed, passing events on, when a run ends). */
static _Thread_local PyObject *tg_glet_prev;

/* Numbers of the greenlets named in a run (greenlet-N), and that run's
 * generation.  GIL. */
static uint64_t tg_glet_seq, tg_glet_seq_gen;

/* --- a thread's greenlets: open addressing by address ------------------- */

static size_t
tg_glet_hash(uintptr_t key)
{
    uint64_t k = (uint64_t)key;
    k ^= k >> 33;
    k *= UINT64_C(0xff51afd7ed558ccd);
    k ^= k >> 33;
    return (size_t)k;
}

static struct tg_thread *
tg_glet_find(const struct tg_thread *root, uintptr_t key)
{
    size_t j;

    if (root->glets == NULL)
        return NULL;
    for (j = tg_glet_hash(key) & root->glets_mask; root->glets[j].key != 0;
         j = (j + 1) & root->glets_mask)
        if (root->glets[j].key == key)
            return root->glets[j].t;
    return NULL;
}

/* Enter T under KEY (not present).  0, or -1 when out of memory. */
static int
tg_glet_insert(struct tg_thread *root, uintptr_t key, struct tg_thread *t)
{
    size_t j;

    if (root->glets == NULL || 2 * (root->n_glets + 1) > root->glets_mask + 1) {
        size_t cap = root->glets == NULL ? 16 : 2 * (root->glets_mask + 1), i;
        struct tg_glet_slot *s = calloc(cap, sizeof(*s));
        if (s == NULL)
            return -1;
        for (i = 0; root->glets != NULL && i <= root->glets_mask; i++) {
            if (root->glets[i].key == 0)
                continue;
            for (j = tg_glet_hash(root->glets[i].key) & (cap - 1); s[j].key != 0;
                 j = (j + 1) & (cap - 1))
                ;
            s[j] = root->glets[i];
        }
        free(root->glets);
        root->glets = s;
        root->glets_mask = cap - 1;
    }
    for (j = tg_glet_hash(key) & root->glets_mask; root->glets[j].key != 0;
         j = (j + 1) & root->glets_mask)
        ;
    root->glets[j].key = key;
    root->glets[j].t = t;
    root->n_glets++;
    return 0;
}

/* Remove KEY, shifting back the entries after it that its slot displaced. */
static void
tg_glet_remove(struct tg_thread *root, uintptr_t key)
{
    size_t mask = root->glets_mask, i, j, k;

    if (root->glets == NULL)
        return;
    for (i = tg_glet_hash(key) & mask; root->glets[i].key != key; i = (i + 1) & mask)
        if (root->glets[i].key == 0)
            return;
    for (j = i;;) {
        j = (j + 1) & mask;
        if (root->glets[j].key == 0)
            break;
        k = tg_glet_hash(root->glets[j].key) & mask;
        /* the entry at J stays if its home K lies cyclically in (I, J] */
        if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
            continue;
        root->glets[i] = root->glets[j];
        i = j;
    }
    root->glets[i].key = 0;
    root->glets[i].t = NULL;
    root->n_glets--;
}

/* --- the switch ---------------------------------------------------------- */

/* The memory reading of R's process and rss modes without any correction;
 * 0 in thread mode (its counters are swapped instead). */
static int64_t
tg_glet_raw(struct tg_recorder *r, struct tg_thread *t)
{
    if (r->memory_mode == TG_MEM_THREAD)
        return 0;
    return tg_memory_reading(r, t) + t->correction;
}

/* The greenlet G's bool attribute NAME; 0 when it has none. */
static int
tg_glet_flag(PyObject *g, const char *name)
{
    PyObject *v = PyObject_GetAttrString(g, name);
    int res = v != NULL && PyObject_IsTrue(v) == 1;

    Py_XDECREF(v);
    PyErr_Clear();
    return res;
}

/* Whether G is its thread's main greenlet (it has no parent). */
static int
tg_glet_is_main(PyObject *g)
{
    PyObject *v = PyObject_GetAttrString(g, "parent");
    int res = v == Py_None;

    Py_XDECREF(v);
    PyErr_Clear();
    return res;
}

/* "<thread>-greenlet-N", or "<thread>-NAME" when G has a str name (gevent's
 * Greenlet.name), malloc'ed UTF-8; NULL when out of memory. */
static char *
tg_glet_name(struct tg_recorder *r, struct tg_thread *root, PyObject *g, size_t *len)
{
    const struct tg_thread_log *e;
    char *thread = NULL, *res = NULL, num[40];
    const char *own = NULL;
    size_t thread_len = 0;
    Py_ssize_t own_len = 0;
    PyObject *name = PyObject_GetAttrString(g, "name");

    if (name != NULL && PyUnicode_Check(name))
        own = PyUnicode_AsUTF8AndSize(name, &own_len);
    PyErr_Clear();
    if (own == NULL || own_len == 0) {
        if (tg_glet_seq_gen != r->gen) {
            tg_glet_seq_gen = r->gen;
            tg_glet_seq = 0;
        }
        own_len = snprintf(num, sizeof(num), "greenlet-%llu",
                           (unsigned long long)++tg_glet_seq);
        own = num;
    }
    pthread_mutex_lock(&r->table.lock);
    e = tg_thread_table_log_seq_unlocked(&r->table, root->log_idx);
    if (e != NULL && (thread = malloc(e->name_len + 1)) != NULL) {
        memcpy(thread, e->name, e->name_len);
        thread_len = e->name_len;
    }
    pthread_mutex_unlock(&r->table.lock);
    res = malloc(thread_len + 1 + (size_t)own_len + 1);
    if (res != NULL) {
        if (thread_len > 0)
            memcpy(res, thread, thread_len);
        res[thread_len] = '-';
        memcpy(res + thread_len + 1, own, (size_t)own_len);
        *len = thread_len + 1 + (size_t)own_len;
        res[*len] = '\0';
    }
    free(thread);
    Py_XDECREF(name);
    return res;
}

/* A state for greenlet G of ROOT's thread, or ROOT when it cannot have one
 * (TG_GLET_MAX of them already, out of memory, the run ended meanwhile).
 * It becomes tg_tls.thread. */
static struct tg_thread *
tg_glet_new(struct tg_recorder_object *self, struct tg_thread *root, PyObject *g)
{
    struct tg_recorder *r = &self->r;
    uint64_t gen = r->gen;
    struct tg_thread *t;
    char *name;
    size_t len = 0;

    if (root->n_glets >= TG_GLET_MAX)
        return root;
    name = tg_glet_name(r, root, g, &len);
    if (name == NULL)
        return root;
    t = tg_thread_attach_greenlet(self, name, len);
    free(name);
    if (t == NULL || !r->active || r->gen != gen)
        return root;  /* NULL, or a run ended by a stream_factory: retired */
    t->glet_root = root;
    t->glet_key = (uintptr_t)g;
    /* no LEVEL marks: the thread's counters are its greenlets' together */
    t->cap_level_on = root->cap_level_on = 0;
    t->curve_base = 0;  /* its counters start at 0 (tg_glet_switch) */
    t->glet_out = tg_glet_raw(r, t);
    if (tg_glet_insert(root, t->glet_key, t) < 0) {
        tg_thread_end_state(self, t);
        return root;
    }
    return t;
}

static void
tg_glet_switch(struct tg_recorder_object *self, PyObject *origin, PyObject *target)
{
    struct tg_recorder *r = &self->r;
    struct tg_thread *t = tg_tls.thread, *root, *ts, *dead = NULL;

    if (!r->active || r->sampled || t == NULL || tg_tls.gen != r->gen)
        return;
    root = t->glet_root != NULL ? t->glet_root : t;
    if (origin != target && tg_glet_flag(origin, "dead"))
        dead = tg_glet_find(root, (uintptr_t)origin);
    ts = tg_glet_is_main(target) ? root : tg_glet_find(root, (uintptr_t)target);
    if (ts != t) {
        /* T is switched out: what its thread's counters hold is its own */
        t->glet_allocated = tg_tls.allocated;
        t->glet_freed = tg_tls.freed;
        t->glet_out = tg_glet_raw(r, t);
        if (ts == NULL) {
            tg_tls.allocated = tg_tls.freed = 0;  /* a new state's counters */
            ts = tg_glet_new(self, root, target);
            if (ts == t) {  /* none made: T goes on (ROOT) */
                tg_tls.allocated = t->glet_allocated;
                tg_tls.freed = t->glet_freed;
            }
        }
        if (ts != t) {
            tg_tls.allocated = ts->glet_allocated;
            tg_tls.freed = ts->glet_freed;
            if (r->memory_mode != TG_MEM_THREAD)  /* the others' growth meanwhile */
                ts->correction += tg_glet_raw(r, ts) - ts->glet_out;
        }
        tg_tls.thread = ts;
        tg_tls.gen = r->gen;
    }
    if (dead != NULL && dead != ts) {
        tg_glet_remove(root, dead->glet_key);
        tg_thread_end_state(self, dead);
    }
}

/* greenlet.settrace's function: ("switch" | "throw", (origin, target)). */
static PyObject *
tg_glet_trace(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    struct tg_recorder_object *a = tg_active;
    PyObject *prev = tg_glet_prev, *res;

    (void)mod;
    if (a != NULL && nargs == 2 && PyTuple_Check(args[1]) && PyTuple_GET_SIZE(args[1]) == 2) {
        int busy = tg_tls.busy;
        tg_saved_exc saved;
        tg_tls.busy |= TG_BUSY_TRACER;
        tg_exc_save(&saved);
        tg_glet_switch(a, PyTuple_GET_ITEM(args[1], 0), PyTuple_GET_ITEM(args[1], 1));
        tg_exc_restore(&saved);
        tg_tls.busy = busy;
    }
    if (prev == NULL)
        Py_RETURN_NONE;
    Py_INCREF(prev);
    res = nargs == 2 ? PyObject_CallFunctionObjArgs(prev, args[0], args[1], NULL)
                     : PyObject_CallObject(prev, NULL);
    Py_DECREF(prev);
    return res;
}

static PyMethodDef tg_glet_trace_def = {
    "_greenlet_trace", (PyCFunction)(void (*)(void))tg_glet_trace, METH_FASTCALL,
    "greenlet.settrace's function while threadgraph records: a stack per greenlet."
};

int
tg_glet_init(PyObject *module)
{
    if (tg_glet_modname == NULL
            && (tg_glet_modname = PyUnicode_InternFromString("greenlet")) == NULL)
        return -1;
    if (tg_glet_tracer == NULL
            && (tg_glet_tracer = PyCFunction_NewEx(&tg_glet_trace_def, NULL, NULL)) == NULL)
        return -1;
    Py_INCREF(tg_glet_tracer);
    return PyModule_AddObject(module, "_greenlet_trace", tg_glet_tracer) < 0 ? -1 : 0;
}

/* Make the recorder's hook this thread's if greenlet is imported; 1 if it is
 * now.  Exceptions cleared. */
static int
tg_glet_install(void)
{
    PyObject *mod, *old;

    if (tg_glet_tracer == NULL)
        return 0;
    mod = PyImport_GetModule(tg_glet_modname);
    if (mod == NULL) {
        PyErr_Clear();
        return 0;
    }
    old = PyObject_CallMethod(mod, "settrace", "O", tg_glet_tracer);
    Py_DECREF(mod);
    if (old == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (old == tg_glet_tracer) {  /* already ours: the one before stays next */
        Py_DECREF(old);
    } else {
        PyObject *p = tg_glet_prev;
        if (old == Py_None) {
            Py_DECREF(old);
            old = NULL;
        }
        tg_glet_prev = old;
        Py_XDECREF(p);
    }
    return 1;
}

void
tg_glet_thread_attached(struct tg_recorder_object *self, struct tg_thread *t)
{
    if (self->r.sampled || t->glet_traced)
        return;
    t->glet_traced = tg_glet_install();
}

void
tg_glet_unwound(struct tg_thread *t)
{
    struct tg_recorder_object *a = tg_active;
    struct tg_thread *root = t->glet_root != NULL ? t->glet_root : t;
    tg_saved_exc saved;

    if (a == NULL || root->glet_traced)
        return;
    tg_exc_save(&saved);
    tg_glet_thread_attached(a, root);
    tg_exc_restore(&saved);
}

void
tg_glet_end_all(struct tg_recorder_object *self, struct tg_thread *root)
{
    size_t i;

    for (i = 0; root->glets != NULL && i <= root->glets_mask; i++)
        if (root->glets[i].key != 0)
            tg_thread_end_state(self, root->glets[i].t);
    free(root->glets);
    root->glets = NULL;
    root->glets_mask = root->n_glets = 0;
}

PyObject *
tg_mod_greenlet_watch(PyObject *mod, PyObject *noargs)
{
    struct tg_recorder_object *a = tg_active;
    struct tg_thread *t = tg_tls.thread;
    int busy = tg_tls.busy;

    (void)mod;
    (void)noargs;
    if (a == NULL || !a->r.active || t == NULL || tg_tls.gen != a->r.gen)
        Py_RETURN_FALSE;
    if (t->glet_root != NULL)
        t = t->glet_root;
    tg_tls.busy |= TG_BUSY_TRACER;
    tg_glet_thread_attached(a, t);
    tg_tls.busy = busy;
    return PyBool_FromLong(t->glet_traced);
}
