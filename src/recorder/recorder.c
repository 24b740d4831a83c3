/*
 * recorder.c - the events layer: the hot path from an event to its records.
 *
 * Both event sources enter here: the profile function (tg_profile, installed
 * on every thread by lifecycle.c) and sys.monitoring's callbacks (monitor.c ->
 * tg_mon_entries).  Their entry points live in this file so that the whole
 * path (tg_event: the per-code-object cache, frame pairing, memory readings,
 * the .mem/.stack lines formatted by recfmt.h and the capture's records) is
 * inlined into each of them.  The thread state an event works on belongs to
 * thread.c / thread_py.c.
 *
 * The path runs for every call and return of every profiled thread with the
 * GIL held.  It never raises and never changes the exception in flight: on any
 * failure it simply does not record.  While it works, tg_tls.busy has
 * TG_BUSY_TRACER set so the allocator hooks ignore the tracer's own allocations.
 * No Python code runs per event; Python APIs are called only on a cache miss
 * (first sight of a code object) and when a thread is first seen.
 */
#include "recorder.h"
#include "greenlet.h"
#include "sleepwrap.h"
#include "alloc_hooks.h"
#include "accounting.h"
#include "names.h"
#include "capture_write.h"
#include "tg_format.h"
#include "recfmt.h"
#include "monitor.h"
#include "linetable.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct tg_recorder_object *tg_active;

/* --- per-code-object cache ---------------------------------------------- */

/*
 * From 3.12 the profile hook no longer sets the frame's line number, so
 * PyFrame_GetLineNumber decodes the line table on every call (about 500
 * instructions on 3.13, the largest single cost of a record).  The code info
 * then caches offset -> line; a miss computes it as CPython does,
 * PyCode_Addr2Line(code, lasti).  3.8-3.11 keep PyFrame_GetLineNumber, which
 * reads a line the interpreter already set.
 */
#if PY_VERSION_HEX >= 0x030C0000
#  define TG_LINE_CACHE 16
#else
#  define TG_LINE_CACHE 0
#endif

/* Misses of a code object's line cache after which its whole line table is
 * decoded (linetable.h): a code object whose events fall at more offsets than
 * the cache holds (a long function calling builtins all along) would
 * otherwise pay PyCode_Addr2Line's walk, thousands of instructions in a long
 * one, on most of them. */
#ifndef TG_LINE_TABLE_AFTER  /* -D: another count, for tests */
#  define TG_LINE_TABLE_AFTER 16
#endif

/* Stored in the code object's co_extra slot; freed with the code object. */
struct tg_code_info {
    uint64_t gen;       /* run generation the flags were computed for */
    int pass;           /* recorded under this run's filter */
    int excluded;       /* profiler plumbing (profiler.py): it and its callees are hidden */
    int trigger;        /* a Python sleep trigger in this run */
    int firstlineno;
    uint64_t cap_epoch; /* capture epoch cap_id belongs to (0: none) */
    uint32_t cap_id;    /* code id in that capture */
    uint64_t fast_key;  /* where the fast path may open this code's calls in
                         * one compare (gen current, not excluded, cap_id of
                         * the run's capture: all fixed for a run's capture
                         * once true), else 0; set by the default entries'
                         * first call of the code (tg_on_py_call).  3.12+ (the
                         * monitoring fast path): that run's generation;
                         * 3.8-3.11 (tg_profile_fast): that capture's epoch,
                         * unique to each capture opened, a forked child's too */
    uint64_t agg_epoch; /* aggregate run agg_id belongs to (0: none) */
    uint32_t agg_id;    /* function id in that run (aggregate.h) */
    size_t file_len;
    size_t func_len;
    char *file;         /* escaped UTF-8 co_filename (points into data) */
    char *func;         /* escaped UTF-8 co_name (points into data) */
#if TG_LINE_CACHE
    /* Instruction offset -> line, direct-mapped.  Written and read with the GIL
     * (the code object, and so this entry, is shared by every thread). */
    struct { int lasti; int line; } lines[TG_LINE_CACHE];
    int line_misses;     /* of the cache, up to TG_LINE_TABLE_AFTER */
    size_t line_units;   /* entries of line_table (0: none) */
    int32_t *line_table; /* the line at offset 2 * i (linetable.h), malloc'd, or NULL */
#endif
    char data[];
};

/* co_extra index; set once at module init with the GIL. */
static Py_ssize_t tg_code_index = -1;

static void
tg_code_info_free(void *p)
{
#if TG_LINE_CACHE
    if (p != NULL)
        free(((struct tg_code_info *)p)->line_table);
#endif
    free(p);
}

/* Escaped UTF-8 bytes of STR (a new bytes object), surrogates backslash-escaped. */
static PyObject *
tg_utf8_bytes(PyObject *str)
{
    if (str == NULL || !PyUnicode_Check(str))
        return PyBytes_FromString(TG_NONE_MODULE);
    return PyUnicode_AsEncodedString(str, "utf-8", "backslashreplace");
}

/* LINE, or 0 when CPython knows no line (-1: an instruction without a line,
 * as a generator expression's implicit return on 3.12, or a code object built
 * without a line table).  The dumps' LINE is a decimal >= 0 (docs/formats.md):
 * every line the recorder writes goes through here. */
static inline int
tg_known_line(int line)
{
    return line < 0 ? 0 : line;
}

/* Build and attach the cache entry of CODE.  GIL held; the caller saved the
 * exception in flight.  Returns NULL (no exception) on failure. */
static struct tg_code_info *
tg_code_info_build(PyCodeObject *code)
{
    PyObject *fb = tg_utf8_bytes(code->co_filename);
    PyObject *nb = tg_utf8_bytes(code->co_name);
    struct tg_code_info *info = NULL;
    size_t flen, nlen;
    char *end;

    if (fb == NULL || nb == NULL)
        goto cleanup;
    if (memchr(PyBytes_AS_STRING(nb), ':', (size_t)PyBytes_GET_SIZE(nb)) != NULL) {
        /* readers take FUNCTION after a record's last ':' (docs/formats.md): a
         * name's ':' is written \x3a, as a control byte would be */
        PyObject *esc = PyObject_CallMethod(nb, "replace", "y#y#", ":", (Py_ssize_t)1,
                                            "\\x3a", (Py_ssize_t)4);
        Py_DECREF(nb);
        nb = esc;
        if (nb == NULL)
            goto cleanup;
    }
    flen = tg_escaped_len(PyBytes_AS_STRING(fb), (size_t)PyBytes_GET_SIZE(fb));
    nlen = tg_escaped_len(PyBytes_AS_STRING(nb), (size_t)PyBytes_GET_SIZE(nb));
    info = malloc(sizeof(*info) + flen + nlen + 2);
    if (info == NULL)
        goto cleanup;
    info->gen = 0;
    info->pass = 0;
    info->excluded = 0;
    info->trigger = 0;
    info->firstlineno = tg_known_line(code->co_firstlineno);
    info->cap_epoch = 0;
    info->cap_id = 0;
    info->fast_key = 0;
    info->agg_epoch = 0;
    info->agg_id = 0;
#if TG_LINE_CACHE
    for (int i = 0; i < TG_LINE_CACHE; i++)
        info->lines[i].lasti = -1;  /* no valid offset is negative */
    info->line_misses = 0;
    info->line_units = 0;
    info->line_table = NULL;
#endif
    info->file = info->data;
    end = tg_escape(info->file, PyBytes_AS_STRING(fb), (size_t)PyBytes_GET_SIZE(fb));
    *end = '\0';
    info->file_len = flen;
    info->func = end + 1;
    end = tg_escape(info->func, PyBytes_AS_STRING(nb), (size_t)PyBytes_GET_SIZE(nb));
    *end = '\0';
    info->func_len = nlen;
    if (tg_code_set_extra((PyObject *)code, tg_code_index, info) < 0) {
        free(info);
        info = NULL;
    }
cleanup:
    Py_XDECREF(fb);
    Py_XDECREF(nb);
    PyErr_Clear();
    return info;
}

/* Recompute the run-dependent flags of INFO for R's configuration. */
static void
tg_code_info_refresh(struct tg_recorder *r, struct tg_code_info *info, PyCodeObject *code)
{
    size_t i;
    info->gen = r->gen;
    info->pass = 1;
    info->excluded = r->exclude_file != NULL && info->file_len == r->exclude_len
                     && memcmp(info->file, r->exclude_file, r->exclude_len) == 0;
    if (r->filter != NULL && (info->file_len < r->filter_len
            || memcmp(info->file, r->filter, r->filter_len) != 0))
        info->pass = 0;
    info->trigger = 0;
    for (i = 0; i < r->n_trig_codes; i++)
        if (r->trig_codes[i] == (PyObject *)code)
            info->trigger = 1;
}

/* The cache entry of CODE, built on first use.  NULL on failure. */
static inline struct tg_code_info *
tg_code_info_get(struct tg_recorder *r, PyCodeObject *code)
{
    struct tg_code_info *info = tg_code_extra_fast(code, tg_code_index);

    if (info == NULL) {
        tg_saved_exc saved;
        tg_exc_save(&saved);
        info = tg_code_info_build(code);
        tg_exc_restore(&saved);
        if (info == NULL)
            return NULL;
    }
    if (info->gen != r->gen)
        tg_code_info_refresh(r, info, code);
    return info;
}

#if TG_LINE_CACHE
/* Decode CODE's line table into INFO (left without one on failure: no
 * memory, or a table this reader does not know).  Reads the code object's
 * bytes in place: no Python object is made, nothing is allocated through
 * Python's allocators. */
static void
tg_line_table_build(struct tg_code_info *info, PyCodeObject *code)
{
    PyObject *lt = code->co_linetable;
    const uint8_t *tab;
    size_t len, units;
    int32_t *out;

    if (lt == NULL || !PyBytes_Check(lt))
        return;
    tab = (const uint8_t *)PyBytes_AS_STRING(lt);
    len = (size_t)PyBytes_GET_SIZE(lt);
    units = tg_line_table_units(tab, len);
    if (units == 0 || (out = malloc(units * sizeof(*out))) == NULL)
        return;
    if (tg_line_table_decode(tab, len, code->co_firstlineno, out, units) < 0) {
        free(out);
        return;
    }
#ifdef TG_LINE_TABLE_CHECK
    for (size_t i = 0; i < units; i++)
        if (out[i] != PyCode_Addr2Line(code, (int)(2 * i)))
            Py_FatalError("threadgraph: line table differs from PyCode_Addr2Line");
#endif
    info->line_table = out;
    info->line_units = units;
}

/* A miss of INFO's line cache at LASTI: the line from the decoded table, made
 * at the TG_LINE_TABLE_AFTER-th miss, else PyCode_Addr2Line's. */
static __attribute__((noinline)) int
tg_offset_line_miss(struct tg_code_info *info, PyCodeObject *code, int lasti)
{
    size_t unit = (size_t)lasti >> 1;
    if (info->line_table == NULL && info->line_misses < TG_LINE_TABLE_AFTER
            && ++info->line_misses == TG_LINE_TABLE_AFTER)
        tg_line_table_build(info, code);
    if (unit < info->line_units && info->line_table[unit] != TG_LINE_TABLE_NONE)
        return info->line_table[unit];
    return PyCode_Addr2Line(code, lasti);
}

/* The line of CODE (whose entry is INFO, not NULL) at instruction offset LASTI
 * (bytes, >= 0), through INFO's cache. */
static inline int
tg_offset_line(struct tg_code_info *info, PyCodeObject *code, int lasti)
{
    unsigned slot = ((unsigned)lasti >> 1) % TG_LINE_CACHE;  /* offsets are even */
    if (info->lines[slot].lasti != lasti) {
        info->lines[slot].line = tg_offset_line_miss(info, code, lasti);
        info->lines[slot].lasti = lasti;
    }
    return info->lines[slot].line;
}
#endif

/*
 * Where an event happened.  KEY identifies the running frame: a recorded call
 * is closed by the return with the same key (| 1 for a C call made from that
 * frame).  The line is computed only when a record needs it: from FRAME with
 * the setprofile backend, from CODE at offset LASTI with sys.monitoring.
 */
struct tg_at {
    uintptr_t key;
    PyCodeObject *code;    /* borrowed */
    PyFrameObject *frame;  /* borrowed; NULL under sys.monitoring */
    int lasti;             /* sys.monitoring: instruction offset in bytes */
};

/* The line AT's frame (running AT->code, whose entry is INFO) is executing:
 * the value PyFrame_GetLineNumber gives when no trace function set the line
 * (0 for none). */
static inline int
tg_at_line(struct tg_code_info *info, const struct tg_at *at)
{
#if TG_LINE_CACHE
    int lasti = at->frame != NULL ? PyFrame_GetLasti(at->frame) : at->lasti;
    if (lasti < 0 || info == NULL)
        return tg_known_line(at->frame != NULL
                                 ? PyFrame_GetLineNumber(at->frame)
                                 : PyCode_Addr2Line(at->code, lasti < 0 ? 0 : lasti));
    return tg_known_line(tg_offset_line(info, at->code, lasti));
#else
    (void)info;
    return tg_known_line(tg_frame_line(at->frame));  /* no sys.monitoring before 3.12 */
#endif
}

/* The line AT's frame is executing, for C calls made from it (0 for none). */
static inline int
tg_caller_line(struct tg_recorder *r, const struct tg_at *at)
{
#if TG_LINE_CACHE
    return tg_at_line(tg_code_info_get(r, at->code), at);
#else
    (void)r;
    return tg_known_line(tg_frame_line(at->frame));
#endif
}

int
tg_frame_code_check(void)
{
#if PY_VERSION_HEX >= 0x03090000
    PyFrameObject *f = PyEval_GetFrame();  /* borrowed: the importing frame */
    if (f != NULL) {
        PyCodeObject *c = PyFrame_GetCode(f);
        int ok = c == tg_frame_code(f);
        Py_DECREF(c);
        if (!ok) {
            PyErr_SetString(PyExc_ImportError,
                            "threadgraph._recorder: this interpreter's frame layout is not "
                            "the one the recorder was built for (tg_compat.h tg_frame_code)");
            return -1;
        }
    }
#endif
    return tg_stack_codes_check();
}

int
tg_stack_codes_check(void)
{
#if PY_VERSION_HEX >= 0x03090000
    PyFrameObject *f = PyEval_GetFrame();  /* borrowed: the importing frame */
    PyCodeObject *codes[2];
    if (f != NULL) {
        PyCodeObject *c = PyFrame_GetCode(f);
        int n = tg_stack_codes(PyThreadState_Get(), codes, 2);
        int ok = n >= 1 && codes[0] == c;
        Py_DECREF(c);
        if (!ok) {
            PyErr_SetString(PyExc_ImportError,
                            "threadgraph._recorder: this interpreter's frame chain is not "
                            "the one the recorder was built for (tg_compat.h tg_stack_codes)");
            return -1;
        }
    }
#endif
    return 0;
}

int
tg_code_site(struct tg_recorder *r, PyCodeObject *code, const char **file, size_t *file_len,
             long *line, const char **func, size_t *func_len)
{
    struct tg_code_info *info = tg_code_info_get(r, code);
    if (info == NULL)
        return -2;
    if (info->excluded)
        return -1;
    if (!info->pass)
        return 0;
    *file = info->file;
    *file_len = info->file_len;
    *line = info->firstlineno;
    *func = info->func;
    *func_len = info->func_len;
    return 1;
}

int
tg_recorder_module_init_code_index(void)
{
    tg_code_index = tg_code_request_extra_index(tg_code_info_free);
    return tg_code_index < 0 ? -1 : 0;
}

/* --- memory readings ---------------------------------------------------- */

/* Resident set size in bytes from /proc/self/statm (kept open), or 0. */
static int64_t
tg_rss_bytes(struct tg_recorder *r)
{
    char buf[128];
    ssize_t n;
    const char *p;
    int64_t pages = 0;

    int fd = atomic_load_explicit(&r->statm_fd, memory_order_relaxed);

    if (fd < 0)
        return 0;
    n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    p = buf;
    while (*p && *p != ' ')  /* skip the total program size */
        p++;
    while (*p == ' ')
        p++;
    while (*p >= '0' && *p <= '9')
        pages = pages * 10 + (*p++ - '0');
    return pages * r->page_size;
}

/* Bytes the interpreter allocated to deliver T's current event: only the
 * sys.monitoring events (3.12+) have any. */
#if TG_HAVE_MONITORING
#  define TG_EVENT_BIAS(t) ((t)->event_bias)
#else
#  define TG_EVENT_BIAS(t) ((void)(t), (int64_t)0)
#endif

/* The calling thread's memory reading for R's mode (see docs/api.md); D: the
 * default configuration (tg_event_path_choose), whose mode is thread. */
static inline __attribute__((always_inline)) int64_t
tg_memory_now(struct tg_recorder *r, struct tg_thread *t, const int d)
{
    /* The default mode first: one compare instead of the switch's two. */
    if (d || __builtin_expect(r->memory_mode == TG_MEM_THREAD, 1))
        return tg_tls.allocated - tg_tls.freed - TG_EVENT_BIAS(t);
    switch (r->memory_mode) {
    case TG_MEM_PROCESS:
        return atomic_load_explicit(&tg_process_total, memory_order_relaxed) - t->correction
               - t->event_bias;
    case TG_MEM_RSS:
        return tg_rss_bytes(r) - t->correction;
    default:
        return tg_tls.allocated - tg_tls.freed - t->event_bias;
    }
}

int64_t
tg_memory_reading(struct tg_recorder *r, struct tg_thread *t)
{
    return tg_memory_now(r, t, 0);
}

/* --- records ------------------------------------------------------------ */

/* Owner-only addition of N to a counter other threads read: one add to
 * memory on x86-64 (TG_HOOK_OWN_ADD, acct_state.h), where the atomic load and
 * store took three instructions an event. */
static inline void
tg_count_n(_Atomic uint64_t *c, uint64_t n)
{
    TG_HOOK_OWN_ADD(*c, n);
}

/* Owner-only increment of a counter other threads read. */
static inline void
tg_count(_Atomic uint64_t *c)
{
    tg_count_n(c, 1);
}

/* Write "INDENT[TIME#]FILE:LINE:FUNCTION\n" to T's stack stream. */
static inline __attribute__((always_inline)) void
tg_write_stack_line(struct tg_recorder *r, struct tg_thread *t, size_t depth,
                    const char *file, size_t file_len, long line,
                    const char *func, size_t func_len, int esc, int64_t ns)
{
    size_t max = depth + TG_INDENT_BLOCK + TG_TIME_MAX + (file_len + func_len) * (esc ? 4 : 1)
                 + TG_INT_MAX + 3;
    char *start, *p;

    start = p = tg_writer_reserve(&t->stack, max);
    if (p == NULL) {
        tg_count(&t->dropped);
        return;
    }
    tg_put_indent(p, depth);
    p += depth;
    if (r->timestamps)
        p = tg_fmt_time_ns(p, ns, &t->clock);
    p = tg_put(p, file, file_len, esc);
    *p++ = TG_FIELD_SEP;
    p = tg_fmt_i64(p, line);
    *p++ = TG_FIELD_SEP;
    p = tg_put(p, func, func_len, esc);
    *p++ = '\n';
    tg_writer_commit(&t->stack, (size_t)(p - start));
    tg_count(&t->n_stack_records);
}

/* Write "[TIME#]FILE:LINE:FUNCTION=>DELTA\n" to T's mem stream. */
static inline __attribute__((always_inline)) void
tg_write_mem_line(struct tg_recorder *r, struct tg_thread *t,
                  const char *file, size_t file_len, long line,
                  const char *func, size_t func_len, int esc, int64_t delta, int64_t ns)
{
    size_t max = TG_TIME_MAX + (file_len + func_len) * (esc ? 4 : 1) + 2 * TG_INT_MAX + 5;
    char *start, *p;

    start = p = tg_writer_reserve(&t->mem, max);
    if (p == NULL) {
        tg_count(&t->dropped);
        return;
    }
    if (r->timestamps)
        p = tg_fmt_time_ns(p, ns, &t->clock);
    p = tg_put(p, file, file_len, esc);
    *p++ = TG_FIELD_SEP;
    p = tg_fmt_i64(p, line);
    *p++ = TG_FIELD_SEP;
    p = tg_put(p, func, func_len, esc);
    memcpy(p, TG_DELTA_SEP, TG_DELTA_SEP_LEN);
    p += TG_DELTA_SEP_LEN;
    p = tg_fmt_i64(p, delta);
    *p++ = '\n';
    tg_writer_commit(&t->mem, (size_t)(p - start));
    tg_count(&t->n_records);
}

/* The fast paths' clock read: with the beat (BEAT, a constant: the
 * TG_PATH_DEFAULT_BEAT copies) a beat's kept reading or the TSC, else the
 * TSC alone (clock.h). */
#define TG_FAST_CLOCK(us, beat) \
    ((beat) ? tg_clock_us_if_cached_beat(&tg_tls.clock, (us)) \
            : tg_clock_us_if_cached(&tg_tls.clock, (us)))

/* --- capture records (docs/formats.md "Binary capture") ------------------- */

/* A capture record of T could not be written: counted, and marked in the
 * stream before its next record (the writer's next reserve is diverted to the
 * slow path, tg_cap_reserve_slow, which writes the mark). */
static void
tg_cap_drop(struct tg_thread *t)
{
    t->cap_dropped++;
    t->cap_drop_pending++;
    tg_count(&t->dropped);
    tg_writer_divert(&t->capw);
}

/* The time of an event of T in ns: tg_clock_now_ns_mono(&T->clock.last_ns)
 * through the thread's clock cache (tg_tls.clock, clock.h), with R's beat if
 * it has one. */
static inline int64_t
tg_event_ns(struct tg_recorder *r, struct tg_thread *t)
{
    int64_t ns = r->time_beat ? tg_clock_now_ns_beat(&tg_tls.clock)
                              : tg_clock_now_ns_cached(&tg_tls.clock);
    if (ns < t->clock.last_ns)
        return t->clock.last_ns;
    t->clock.last_ns = ns;
    return ns;
}

/* A point of T's memory curve: BYTES now. */
static void
tg_curve_write(struct tg_recorder *r, struct tg_thread *t, int64_t bytes)
{
    tg_write_mem_line(r, t, TG_CURVE_FILE, sizeof(TG_CURVE_FILE) - 1, 0, TG_CURVE_FUNC,
                      sizeof(TG_CURVE_FUNC) - 1, 0, bytes, r->timestamps ? tg_event_ns(r, t) : 0);
    t->curve_points++;
    t->curve_last = bytes;
}

void
tg_sampled_curve_point(struct tg_recorder_object *obj, int64_t bytes)
{
    struct tg_recorder *r = &obj->r;
    struct tg_thread *t = tg_tls.thread;

    /* Only a thread attached already (the enabling one, or started through
     * threading): attaching calls Python, which an allocator hook must not. */
    if (!r->text_mem || t == NULL || tg_tls.gen != r->gen)
        return;
    tg_curve_write(r, t, bytes);
}

void
tg_sampled_curve_last(struct tg_recorder *r, struct tg_thread *t)
{
    int64_t bytes;

    /* Not when its figure did not move since its last point (0 before the
     * first).  A thread without a sample gets its one point here: a consumer
     * that frees what others made (and allocates too little to be sampled)
     * ends below 0, and the sum of the curves must see it. */
    if (!r->sampled || !r->text_mem
            || tg_acct_thread_own(t->ident, &bytes) < 0 || bytes == t->curve_last)
        return;
    tg_curve_write(r, t, bytes);
}

/* The time of an event in the default configuration (capture only), in
 * microseconds, the capture's unit: no clamp to the thread's last time, since
 * tg_cap_dt_us keeps a stream's times from going back. */
static inline int64_t
tg_event_us_capture(struct tg_recorder *r)
{
    return r->time_beat ? tg_clock_now_us_beat(&tg_tls.clock)
                        : tg_clock_now_us_cached(&tg_tls.clock);
}

/* The LEVEL mark of T at P (docs/formats.md): T's memory now and when each
 * of its open calls in the stream was made, counted from its stream's start
 * (cap_level0); at most tg_cap_level_room(T) bytes.  T's own thread. */
static size_t
tg_cap_level_room(const struct tg_thread *t)
{
    return TG_CAP_LEVEL_MAX + TG_CAP_VARINT_MAX * (t->depth + 1);
}

static unsigned char *
tg_cap_enc_level_of(unsigned char *p, const struct tg_thread *t)
{
    unsigned char *np;
    int64_t prev = 0;
    uint64_t n = 0;
    size_t k;

    p = tg_cap_enc_level(p, tg_tls.allocated - tg_tls.freed - t->cap_level0);
    for (k = 0; k < t->depth; k++)
        n += t->frames[k].cap_line != TG_CAP_NOT_WRITTEN;
    np = p = tg_cap_put_varint(p, n);
    for (k = 0; k < t->depth; k++) {
        int64_t start = t->frames[k].start - t->cap_level0;
        if (t->frames[k].cap_line == TG_CAP_NOT_WRITTEN)
            continue;
        np = tg_cap_put_varint(np, tg_cap_zz(start - prev));
        prev = start;
    }
    return np;
}

/* tg_cap_reserve's slow path: the writer's (a full or empty buffer, a
 * stopped stream), and the pending "dropped" mark, which diverted the
 * reserve here (tg_cap_drop).  Out of line: the event path keeps only the
 * writer's one compare. */
static __attribute__((noinline, cold)) unsigned char *
tg_cap_reserve_slow(struct tg_thread *t)
{
    int mark = t->cap_level_on && tg_tls.thread == t;
    unsigned char *p = (unsigned char *)tg_writer_reserve_slow(&t->capw, TG_CAP_RECORD_MAX);
    if (p == NULL) {
        tg_cap_drop(t);
        return NULL;
    }
    if (t->cap_drop_pending != 0) {
        p = tg_cap_enc_dropped(p, t->cap_drop_pending);
        t->cap_drop_pending = 0;
        if (t->cap_unwind_pending != 0) {  /* after the mark: see tg_cap_unwound */
            p = tg_cap_enc_unwound(p, t->cap_unwind_pending);
            t->cap_unwind_pending = 0;
        }
    }
    /* Here once a buffer (a full one, or one the flusher wrote out and
     * diverted: tg_flusher_main), so a LEVEL mark at least every 64 KiB of
     * records and every flush period of a thread that records: written after
     * this record (tg_event's end), when the open calls are the stream's
     * again (a RETURN's call is off T's stack already). */
    t->level_due |= mark;
    return p;
}

/* Whether one record fits in T's capture buffer at once, at offset *LEN: the
 * writer's fast path (tg_writer_reserve).  While a "dropped" mark is pending
 * it never does (tg_cap_drop diverts the writer), so the records' fast paths
 * below need no test of their own, nor one for a NULL pointer: what does not
 * fit is written by their out-of-line copies, through tg_cap_reserve_slow. */
static inline __attribute__((always_inline)) int
tg_cap_fits(struct tg_thread *t, size_t *len)
{
    *len = atomic_load_explicit(&t->capw.len, memory_order_relaxed);
    return __builtin_expect(*len + TG_CAP_RECORD_MAX
                            <= atomic_load_explicit(&t->capw.lim, memory_order_relaxed), 1);
}

/* The start of T's capture buffer, where tg_cap_fits found room at LEN. */
static inline unsigned char *
tg_cap_at(struct tg_thread *t, size_t len)
{
    return (unsigned char *)atomic_load_explicit(&t->capw.buf, memory_order_relaxed) + len;
}

/* Space for one record in T's capture stream (after the pending "dropped"
 * mark), or NULL (the record is counted as dropped).  Follow with
 * tg_cap_commit.  The event path's records use tg_cap_fits instead. */
static unsigned char *
tg_cap_reserve(struct tg_thread *t)
{
    size_t len;
    if (tg_cap_fits(t, &len))
        return tg_cap_at(t, len);
    return tg_cap_reserve_slow(t);
}

/* Publish T's capture record, written up to END. */
static inline void
tg_cap_commit(struct tg_thread *t, const unsigned char *end)
{
    tg_writer_commit_end(&t->capw, (const char *)end);
}

/* The capture's UNWOUND event: the N innermost open calls of T's stream end
 * without RETURN records.  When it cannot be written now it is kept pending
 * behind a DROPPED mark (one record counted lost), so that the stream's next
 * record, whichever it is, is preceded by it and pairs as it should. */
static void
tg_cap_unwound(struct tg_thread *t, uint64_t n)
{
    unsigned char *p;

    p = tg_cap_reserve(t);  /* writes a pending mark first */
    if (p == NULL) {  /* counted and marked pending by tg_cap_reserve */
        t->cap_unwind_pending += n;
        return;
    }
    p = tg_cap_enc_unwound(p, n);
    tg_cap_commit(t, p);
}

/* NS / 1000 (NS >= 0 is a time since the epoch; a negative one takes the
 * division).  Spelled as the multiply a compiler makes of a division by a
 * constant, because GCC at -O2 emitted a real `idiv` (tens of cycles) in the
 * copy of the division inlined into the CALL path, which it laid out as cold. */
static inline int64_t
tg_ns_to_us(int64_t ns)
{
    if (__builtin_expect(ns < 0, 0))
        return ns / 1000;
    return (int64_t)((((unsigned __int128)((uint64_t)ns >> 3)
                       * UINT64_C(0x20C49BA5E353F7CF)) >> 64) >> 4);
}

/* Microseconds since T's previous timed record for the time US, and advance
 * the stream time. */
static inline uint64_t
tg_cap_dt_us(struct tg_thread *t, int64_t us)
{
    uint64_t dt = us > t->cap_us ? (uint64_t)(us - t->cap_us) : 0;
    if (us > t->cap_us)
        t->cap_us = us;
    return dt;
}

/* tg_cap_dt_us for the time NS (read once for the event, shared with the text
 * line). */
static inline uint64_t
tg_cap_dt(struct tg_thread *t, int64_t ns)
{
    return tg_cap_dt_us(t, tg_ns_to_us(ns));
}

/* The time field of T's next capture record for the time NS (microseconds
 * when D), advancing the stream time: only for a record that is written. */
static inline __attribute__((always_inline)) uint64_t
tg_cap_dt_of(struct tg_recorder *r, struct tg_thread *t, int64_t ns, const int d)
{
    return d ? tg_cap_dt_us(t, ns) : r->timestamps ? tg_cap_dt(t, ns) : 0;
}

/* tg_cap_call's record when it does not fit at once: 1, or 0 when it is lost
 * (counted by tg_cap_reserve_slow). */
static __attribute__((noinline, cold)) int
tg_cap_call_slow(struct tg_recorder *r, struct tg_thread *t, uint32_t id, int is_c, long line,
                 int64_t ns, int d)
{
    unsigned char *p = tg_cap_reserve_slow(t);
    if (p == NULL)
        return 0;
    p = tg_cap_enc_call(p, id, d || r->timestamps, tg_cap_dt_of(r, t, ns, d), is_c, line);
    tg_cap_commit(t, p);
    return 1;
}

/* CALL of code ID (0: could not be defined) at time NS (in microseconds when
 * D); LINE for C functions (IS_C).  Returns the RETURN's reference line, or
 * TG_CAP_NOT_WRITTEN. */
static inline __attribute__((always_inline)) int64_t
tg_cap_call(struct tg_recorder *r, struct tg_thread *t, uint32_t id, int is_c, long line,
            int64_t ns, const int d)
{
    size_t len;
    if (__builtin_expect(id == 0, 0)) {
        tg_cap_drop(t);
        return TG_CAP_NOT_WRITTEN;
    }
    if (tg_cap_fits(t, &len))
        tg_cap_commit(t, tg_cap_enc_call(tg_cap_at(t, len), id, d || r->timestamps,
                                         tg_cap_dt_of(r, t, ns, d), is_c, line));
    else if (!tg_cap_call_slow(r, t, id, is_c, line, ns, d))
        return TG_CAP_NOT_WRITTEN;
    t->cap_calls++;
    if (d || r->cap_counts_stack)
        tg_count(&t->n_stack_records);
    return line;
}

/* tg_cap_return's record when it does not fit at once: 1, or 0 when it is
 * lost (counted by tg_cap_reserve_slow). */
static __attribute__((noinline, cold)) int
tg_cap_return_slow(struct tg_recorder *r, struct tg_thread *t, int64_t ref, long line,
                   int64_t ns, int64_t delta, int d)
{
    unsigned char *p = tg_cap_reserve_slow(t);
    if (p == NULL)
        return 0;
    p = tg_cap_enc_return(p, (int64_t)line - ref, d || r->timestamps,
                          tg_cap_dt_of(r, t, ns, d), d || r->track_memory, delta);
    tg_cap_commit(t, p);
    return 1;
}

/* RETURN of the call whose CALL gave REF, at LINE, time NS (microseconds when
 * D), memory DELTA. */
static inline __attribute__((always_inline)) void
tg_cap_return(struct tg_recorder *r, struct tg_thread *t, int64_t ref, long line, int64_t ns,
              int64_t delta, const int d)
{
    size_t len;
    if (__builtin_expect(ref == TG_CAP_NOT_WRITTEN, 0)) {
        tg_cap_drop(t);  /* its CALL is not in the stream: neither is it */
        return;
    }
    if (tg_cap_fits(t, &len))
        tg_cap_commit(t, tg_cap_enc_return(tg_cap_at(t, len), (int64_t)line - ref,
                                           d || r->timestamps, tg_cap_dt_of(r, t, ns, d),
                                           d || r->track_memory, delta));
    else if (!tg_cap_return_slow(r, t, ref, line, ns, delta, d))
        return;
    t->cap_returns++;
    if (d || r->cap_counts_mem)
        tg_count(&t->n_records);
}

/* Python streams are flushed only by their thread, with the GIL: here, once
 * their oldest line is more than a second old. */
static void
tg_flush_py_if_old(struct tg_thread *t)
{
    int64_t now = tg_monotonic_ns();
    if (t->mem.pyfile && atomic_load_explicit(&t->mem.len, memory_order_relaxed)
            && now - t->mem.first_ns > 1000000000)
        tg_writer_flush(&t->mem);
    if (t->stack.pyfile && atomic_load_explicit(&t->stack.len, memory_order_relaxed)
            && now - t->stack.first_ns > 1000000000)
        tg_writer_flush(&t->stack);
}

/* A C function as the profile events name it: its method definition and its
 * owner, which names it in the records (FILE) and keys the capture's table:
 * the function's module (a str, as the original wrote it), else the type of
 * the object it is bound to (a method of a module-less object: `list.append`,
 * a file's `flush`), the type itself for a class method, or NULL. */
struct tg_cfunc {
    PyMethodDef *ml;
    PyObject *owner;  /* borrowed */
};

/* The owner of a C function bound to SELF without a module: SELF's type, or
 * SELF for a class method; NULL for none or a module. */
static inline PyObject *
tg_cfunc_owner_of_self(PyObject *self)
{
    if (self == NULL || PyModule_CheckExact(self))
        return NULL;
    return PyType_Check(self) ? self : (PyObject *)Py_TYPE(self);
}

/* Whether CALLABLE, called with first argument ARG0 (NULL: unknown, or none
 * when MISSING), is a C function for the profile events, and which: a builtin
 * function or method, or (sys.monitoring) a method descriptor called with its
 * self, which the setprofile events report as the bound builtin method (both
 * get the same owner, the type of self). */
static inline int
tg_cfunc_of_builtin(PyObject *callable, struct tg_cfunc *cf)
{
    PyCFunctionObject *f = (PyCFunctionObject *)callable;
    cf->ml = f->m_ml;
    cf->owner = f->m_module != NULL ? f->m_module : tg_cfunc_owner_of_self(f->m_self);
    return 1;
}

static inline int
tg_cfunc_of_descr(PyObject *callable, PyObject *arg0, PyObject *missing, struct tg_cfunc *cf)
{
    if (arg0 == NULL || arg0 == missing)
        return 0;
    cf->ml = ((PyMethodDescrObject *)callable)->d_method;
    cf->owner = tg_cfunc_owner_of_self(arg0);
    return 1;
}

static inline int
tg_cfunc_of(PyObject *callable, PyObject *arg0, PyObject *missing, struct tg_cfunc *cf)
{
    if (PyCFunction_Check(callable))
        return tg_cfunc_of_builtin(callable, cf);
    if (Py_TYPE(callable) == &PyMethodDescr_Type)
        return tg_cfunc_of_descr(callable, arg0, missing, cf);
    return 0;
}

/* UTF-8 view of a C function's FILE (its owner: the module's name, the
 * type's tp_name, or TG_NO_OWNER) and name.  Never disturbs the exception in
 * flight.  Reads no attribute and allocates nothing (it runs on every C call
 * of a text dump); the capture reads it once per (function, owner). */
static void
tg_cfunc_names(const struct tg_cfunc *cf, const char **mod, size_t *mod_len,
               const char **name, size_t *name_len)
{
    PyObject *m = cf->owner;

    *mod = TG_NO_OWNER;
    *mod_len = sizeof(TG_NO_OWNER) - 1;
    if (m != NULL && PyUnicode_Check(m)) {
        if (PyUnicode_IS_COMPACT_ASCII(m)) {
            *mod = (const char *)PyUnicode_DATA(m);
            *mod_len = (size_t)PyUnicode_GET_LENGTH(m);
        } else {
            tg_saved_exc saved;
            Py_ssize_t n;
            const char *s;
            tg_exc_save(&saved);
            s = PyUnicode_AsUTF8AndSize(m, &n);
            if (s != NULL) {
                *mod = s;
                *mod_len = (size_t)n;
            }
            PyErr_Clear();
            tg_exc_restore(&saved);
        }
    } else if (m != NULL && PyType_Check(m) && ((PyTypeObject *)m)->tp_name != NULL
               && ((PyTypeObject *)m)->tp_name[0] != '\0') {
        *mod = ((PyTypeObject *)m)->tp_name;
        *mod_len = strlen(*mod);
    }
    *name = cf->ml->ml_name;
    *name_len = strlen(*name);
}

/* The capture's code id of INFO's code, defined on first use (0 on failure). */
static __attribute__((noinline, cold)) uint32_t
tg_cap_define_python(struct tg_recorder *r, struct tg_code_info *info)
{
    uint32_t id = tg_cap_new_code_id(&r->cap);
    if (id == 0 || tg_cap_define(&r->cap, id, TG_CAP_CODE_PYTHON,
                                 (uint32_t)(info->firstlineno < 0 ? 0 : info->firstlineno),
                                 info->file, info->file_len, info->func, info->func_len) < 0)
        return 0;
    info->cap_epoch = r->cap.epoch;
    info->cap_id = id;
    return id;
}

static inline uint32_t
tg_cap_python_id(struct tg_recorder *r, struct tg_code_info *info)
{
    if (__builtin_expect(info->cap_epoch == r->cap.epoch, 1))
        return info->cap_id;
    return tg_cap_define_python(r, info);
}

/* CF's module and name, escaped as the dumps write them, one after the other
 * in a malloc'd buffer (the caller frees it): the module's FE bytes, then the
 * name's NE.  NULL when out of memory. */
static char *
tg_cfunc_escaped_names(const struct tg_cfunc *cf, size_t *fe, size_t *ne)
{
    const char *mod, *name;
    size_t mod_len, name_len;
    char *buf;

    tg_cfunc_names(cf, &mod, &mod_len, &name, &name_len);
    *fe = tg_escaped_len(mod, mod_len);
    *ne = tg_escaped_len(name, name_len);
    buf = malloc(*fe + *ne + 1);
    if (buf == NULL)
        return NULL;
    tg_escape(buf, mod, mod_len);
    tg_escape(buf + *fe, name, name_len);
    return buf;
}

/* The capture's code id of the C function CF, defined on first use (0 on
 * failure).  The table holds a reference to the owner, so that its address
 * names the same owner as long as the entry lives. */
static __attribute__((noinline, cold)) uint32_t
tg_cap_define_c(struct tg_recorder *r, const struct tg_cfunc *cf)
{
    size_t fe, ne;
    char *buf;
    uint32_t id = tg_cap_new_code_id(&r->cap);

    if (id == 0 || (buf = tg_cfunc_escaped_names(cf, &fe, &ne)) == NULL)
        return 0;
    if (tg_cap_define(&r->cap, id, TG_CAP_CODE_C, 0, buf, fe, buf + fe, ne) < 0
            || tg_cap_idtab_put(&r->cfunc_ids, (uintptr_t)cf->ml, (uintptr_t)cf->owner,
                                id) < 0)
        id = 0;  /* a definition without an entry is only a few wasted bytes */
    else
        Py_XINCREF(cf->owner);
    free(buf);
    return id;
}

/* aggregate=True: the function id of INFO's code in this run, interned on
 * first use (0 on failure: its calls are not counted). */
static __attribute__((noinline, cold)) uint32_t
tg_agg_define_python(struct tg_recorder *r, struct tg_code_info *info)
{
    uint32_t id = tg_agg_func_add(&r->agg, 0, info->file, info->file_len, info->func,
                                  info->func_len);
    if (id != 0) {
        info->agg_epoch = r->agg.epoch;
        info->agg_id = id;
    }
    return id;
}

static inline uint32_t
tg_agg_python_id(struct tg_recorder *r, struct tg_code_info *info)
{
    if (__builtin_expect(info->agg_epoch == r->agg.epoch, 1))
        return info->agg_id;
    return tg_agg_define_python(r, info);
}

/* aggregate=True: the function id of the C function CF (0 on failure); the
 * table holds a reference to the owner, as cfunc_ids does. */
static __attribute__((noinline, cold)) uint32_t
tg_agg_define_c(struct tg_recorder *r, const struct tg_cfunc *cf)
{
    size_t fe, ne;
    char *buf = tg_cfunc_escaped_names(cf, &fe, &ne);
    uint32_t id;

    if (buf == NULL)
        return 0;
    id = tg_agg_func_add(&r->agg, 1, buf, fe, buf + fe, ne);
    free(buf);
    if (id != 0 && tg_cap_idtab_put(&r->agg_cfunc_ids, (uintptr_t)cf->ml,
                                    (uintptr_t)cf->owner, id) == 0)
        Py_XINCREF(cf->owner);
    return id;
}

static inline uint32_t
tg_agg_c_id(struct tg_recorder *r, const struct tg_cfunc *cf)
{
    uint32_t id = tg_cap_idtab_get(&r->agg_cfunc_ids, (uintptr_t)cf->ml, (uintptr_t)cf->owner);
    return id != 0 ? id : tg_agg_define_c(r, cf);
}

/* Inline, with the definition out of line: GCC had merged the two into one
 * function whose register saves every C call paid. */
static inline __attribute__((always_inline)) uint32_t
tg_cap_c_id(struct tg_recorder *r, const struct tg_cfunc *cf)
{
    uint32_t id = tg_cap_idtab_get(&r->cfunc_ids, (uintptr_t)cf->ml, (uintptr_t)cf->owner);
    return id != 0 ? id : tg_cap_define_c(r, cf);
}

/* Whether ML is a configured C sleep trigger. */
static inline int
tg_is_trigger_def(struct tg_recorder *r, PyMethodDef *ml)
{
    size_t i;
    for (i = 0; i < r->n_trig_defs; i++)
        if (r->trig_defs[i] == ml)
            return 1;
    return 0;
}

/* The Recorder type's method table (module.c gives it at import): calls into
 * it are plumbing, never recorded.  Written once before any event. */
static PyMethodDef *tg_own_methods;
static size_t tg_n_own_methods;

void
tg_recorder_ignore_methods(PyMethodDef *defs, size_t len)
{
    tg_own_methods = defs;
    tg_n_own_methods = len;
}

/* Whether ML is one of the Recorder type's own methods. */
static inline int
tg_is_own_def(PyMethodDef *ml)
{
    return ml >= tg_own_methods && ml < tg_own_methods + tg_n_own_methods;
}

static int
tg_frames_grow(struct tg_thread *t)
{
    size_t cap = t->frames_cap ? t->frames_cap * 2 : 64;
    struct tg_frame_entry *f = realloc(t->frames, cap * sizeof(*f));
    if (f == NULL)
        return -1;
    t->frames = f;
    t->frames_cap = cap;
    return 0;
}

/* Open a recorded call KEY (stack line already described by the fields; ESC
 * for C functions); CAP_ID is its capture code id when the capture is on. */
static inline __attribute__((always_inline)) void
tg_open_call(struct tg_recorder *r, struct tg_thread *t, uintptr_t key,
             const char *file, size_t file_len, long line,
             const char *func, size_t func_len, int esc, uint32_t cap_id, const int d)
{
    int64_t ns = 0;
    if (__builtin_expect(t->depth == t->frames_cap, 0) && tg_frames_grow(t) < 0) {
        tg_count(&t->dropped);
        return;  /* out of memory: neither line is written, pairing holds */
    }
    if (d)
        ns = tg_event_us_capture(r);  /* microseconds: only the capture uses it */
    else if (r->time_calls)
        ns = tg_event_ns(r, t);  /* once for both formats */
    if (!d && r->text_stack)
        tg_write_stack_line(r, t, t->depth, file, file_len, line, func, func_len, esc, ns);
    t->frames[t->depth].cap_line = d || r->fmt_binary
                                   ? tg_cap_call(r, t, cap_id, esc, line, ns, d) : 0;
    t->frames[t->depth].key = key;
    t->frames[t->depth].start = d || r->track_memory ? tg_memory_now(r, t, d) : 0;
    if (!d && r->aggregate) {
        /* aggregate=True: CAP_ID is the function's id; the node of this path. */
        struct tg_agg_thread *at = t->agg;
        uint32_t parent = t->depth > 0 ? (uint32_t)t->frames[t->depth - 1].cap_line : 0;
        t->frames[t->depth].cap_line = at != NULL
            ? tg_agg_enter(at, parent, cap_id, line > 0 ? (uint32_t)line : 0) : TG_AGG_NONE;
        t->frames[t->depth].agg_us = ns / 1000;
        if (at != NULL)  /* from 0 at the attach (tg_thread.curve_base) */
            tg_agg_curve(at, ns / 1000, t->frames[t->depth].start - t->curve_base);
    }
    t->depth++;
    if (!d && atomic_load_explicit(&tg_acct_on, memory_order_relaxed))
        tg_acct_push(file, file_len, line, func, func_len, esc);
}

/* Close T's calls from depth I up without records, counted in T->unwound
 * (and marked in the capture stream so that its pairing holds). */
static void
tg_unwind_from(struct tg_recorder *r, struct tg_thread *t, size_t i, int d)
{
    size_t j;
    uint64_t in_stream = 0;

    for (j = i; j < t->depth; j++) {
        in_stream += t->frames[j].cap_line != TG_CAP_NOT_WRITTEN;
        if (!d && atomic_load_explicit(&tg_acct_on, memory_order_relaxed))
            tg_acct_pop();
    }
    if ((d || r->fmt_binary) && in_stream != 0)
        tg_cap_unwound(t, in_stream);
    atomic_store_explicit(&t->unwound,
                          atomic_load_explicit(&t->unwound, memory_order_relaxed)
                          + (t->depth - i), memory_order_relaxed);
    t->depth = i;
}

/* A return of KEY that is not the innermost open call's.  If KEY is open
 * further down, the calls above it returned without their return being seen
 * (a greenlet switched away from them, another profiler held the hook, a
 * frame unwound by C code): they are closed as unwound (tg_unwind_from) and
 * 1 is returned: KEY is now innermost.  0 when KEY is not open at all (a
 * frame running since before enable(), or a filtered one).  Out of line: the
 * event path pays only the compare that brings it here. */
static __attribute__((noinline, cold)) int
tg_unwind_to(struct tg_recorder *r, struct tg_thread *t, uintptr_t key, int d)
{
    size_t i = t->depth;

    while (i > 0 && t->frames[i - 1].key != key)
        i--;
    if (i == 0)
        return 0;
    tg_glet_unwound(t);  /* a greenlet switch unseen: the hook for the next ones */
    tg_unwind_from(r, t, i, d);
    return 1;
}

void
tg_unwind_handoff(struct tg_recorder *r, struct tg_thread *t)
{
    size_t hd = t->handoff_depth;

    t->handoff_depth = 0;
    if (hd != 0 && hd <= t->depth && t->frames[hd - 1].key == t->handoff_key)
        tg_unwind_from(r, t, hd - 1, 0);
}

/* Close the recorded call KEY (innermost, or made so by tg_unwind_to); returns
 * the delta through *DELTA and the call's capture reference line through *REF,
 * and 1, or 0 when the return has no recorded call (a frame running since
 * before enable(), or a filtered one). */
static inline __attribute__((always_inline)) int
tg_close_call(struct tg_recorder *r, struct tg_thread *t, uintptr_t key, int64_t *delta,
              int64_t *ref, const int d)
{
    if (__builtin_expect(t->depth == 0 || t->frames[t->depth - 1].key != key, 0)
            && (t->depth == 0 || !tg_unwind_to(r, t, key, d)))
        return 0;
    t->depth--;
    if (!d && atomic_load_explicit(&tg_acct_on, memory_order_relaxed))
        tg_acct_pop();
    *delta = d || r->track_memory ? tg_memory_now(r, t, d) - t->frames[t->depth].start : 0;
    *ref = t->frames[t->depth].cap_line;
    return 1;
}

/* Write the records of a closed call: the .mem line (FILE, FUNCTION escaped
 * when ESC) and the capture RETURN (REF from tg_close_call), from one clock
 * reading. */
static inline __attribute__((always_inline)) void
tg_write_return(struct tg_recorder *r, struct tg_thread *t, const char *file, size_t file_len,
                long line, const char *func, size_t func_len, int esc, int64_t delta,
                int64_t ref, const int d)
{
    int64_t ns = 0;
    if (d)
        ns = tg_event_us_capture(r);  /* microseconds: only the capture uses it */
    else if (r->time_returns)
        ns = tg_event_ns(r, t);
    if (!d && r->text_mem)
        tg_write_mem_line(r, t, file, file_len, line, func, func_len, esc, delta, ns);
    if (d || r->fmt_binary)
        tg_cap_return(r, t, ref, line, ns, delta, d);
    if (!d && r->aggregate && t->agg != NULL) {
        /* the entry tg_close_call just closed: its start and time still there */
        const struct tg_frame_entry *fe = &t->frames[t->depth];
        tg_agg_leave(t->agg, (uint32_t)ref, delta, ns / 1000 - fe->agg_us);
        tg_agg_curve(t->agg, ns / 1000, fe->start + delta - t->curve_base);
    }
}

/* The LEVEL mark of the calling thread (docs/formats.md): its memory since
 * its stream began, between its stream's last record and its next one.  Only
 * where it needs no buffer of its own: with no room (or a DROPPED mark
 * pending, which takes the room away) there is no mark, and nothing lost. */
static void
tg_level_mark_of(struct tg_thread *t)
{
    size_t len = atomic_load_explicit(&t->capw.len, memory_order_relaxed);

    t->level_due = 0;
    if (len + tg_cap_level_room(t) > atomic_load_explicit(&t->capw.lim, memory_order_relaxed))
        return;  /* the next buffer's start has one */
    tg_cap_commit(t, tg_cap_enc_level_of(tg_cap_at(t, len), t));
}

static void
tg_level_mark(struct tg_recorder *r)
{
    struct tg_thread *t = tg_tls.thread;

    if (t != NULL && tg_tls.gen == r->gen && t->cap_level_on)
        tg_level_mark_of(t);
}

/* The countdown reached 0, at the nearer of a process.mem request and a
 * LEVEL mark (tg_countdowns_start): ask the flusher for a sample when one is
 * due (it reads /proc/self/statm and writes one line per request:
 * tg_process_sample), write the calling thread's mark when one is due, and
 * restart the countdown at the next of the two.  No system call: a relaxed
 * load and store of the request count (every event holds the GIL).  Out of
 * line: one event in min(sample_every, TG_LEVEL_EVENTS).  With neither (no
 * sampling, no marks) the countdown starts at 0 and wraps, so it comes back
 * here once in 2^64 events, to be parked again: the event path tests the
 * countdown alone. */
static __attribute__((noinline, cold)) void
tg_sample_request(struct tg_recorder *r)
{
    unsigned long ran = r->countdown_set;  /* the events the countdown counted */

    if (r->level_marks) {
        if (r->level_left <= ran) {
            r->level_left = TG_LEVEL_EVENTS;
            tg_level_mark(r);
        } else {
            r->level_left -= ran;
        }
    }
    if (r->sample_every <= 0) {
        r->countdown_set = r->sample_countdown = r->level_marks ? r->level_left : 0;
        return;
    }
    if (r->sample_left <= ran) {
        r->sample_left = (unsigned long)r->sample_every;
        atomic_store_explicit(&r->sample_requests,
                              atomic_load_explicit(&r->sample_requests, memory_order_relaxed)
                              + 1, memory_order_relaxed);
    } else {
        r->sample_left -= ran;
    }
    /* the nearer of the next request and the next mark */
    r->countdown_set = r->sample_countdown = r->level_marks && r->level_left < r->sample_left
                                             ? r->level_left : r->sample_left;
}

uint64_t
tg_process_sample_wanted(struct tg_recorder *r)
{
    uint64_t made = atomic_load_explicit(&r->sample_requests, memory_order_relaxed);
    uint64_t n = made - r->sample_requests_taken;

    r->sample_requests_taken = made;
    return n;
}

void
tg_process_sample(struct tg_recorder *r, uint64_t n)
{
    char line[TG_TIME_MAX + TG_INT_MAX + 2], *p = line;
    size_t len;
    int64_t ns = 0, bytes;
    uint64_t i;

    if (r->timestamps)
        ns = tg_clock_now_ns_mono(&r->process_clock.last_ns);  /* once for both */
    bytes = tg_rss_bytes(r);
    if (r->fmt_text) {
        if (r->timestamps)
            p = tg_fmt_time_ns(p, ns, &r->process_clock);
        p = tg_fmt_i64(p, bytes);
        *p++ = '\n';
        len = (size_t)(p - line);
        for (i = 0; i < n; i++) {
            char *w = tg_writer_reserve(&r->process_w, len);
            if (w == NULL) {
                tg_count_n(&r->samples_dropped, n - i);
                break;
            }
            memcpy(w, line, len);
            tg_writer_commit(&r->process_w, len);
        }
    }
    if (r->fmt_binary) {
        for (i = 0; i < n; i++) {
            unsigned char *cs = (unsigned char *)tg_writer_reserve(&r->process_cap,
                                                                   TG_CAP_RECORD_MAX), *cp;
            uint64_t dt = 0;
            int64_t us = tg_ns_to_us(ns);
            if (cs == NULL) {
                tg_count_n(&r->samples_dropped, n - i);
                break;
            }
            if (r->timestamps && us > r->process_cap_us) {
                dt = (uint64_t)(us - r->process_cap_us);
                r->process_cap_us = us;
            }
            cp = tg_cap_enc_sample(cs, r->timestamps, dt, bytes - r->process_cap_bytes);
            r->process_cap_bytes = bytes;
            tg_writer_commit(&r->process_cap, (size_t)(cp - cs));
        }
    }
    tg_count_n(&r->samples_taken, n);
}

/* Sampling of process.mem: a request every sample_every events of the process.
 * A test for zero, not <= 0: the decrement's own flags decide, one `sub` to
 * memory and a branch (the signed test took a load, sub, store and test). */
static inline void
tg_maybe_sample(struct tg_recorder *r)
{
    if (__builtin_expect(--r->sample_countdown == 0, 0))
        tg_sample_request(r);
}

static inline int
tg_sleep_correction_on(struct tg_recorder *r)
{
    return r->track_sleeps && r->memory_mode != TG_MEM_THREAD;
}

/* The calling thread's own traced bytes (allocated - freed), all modes. */
static inline int64_t
tg_own_bytes(void)
{
    return tg_tls.allocated - tg_tls.freed;
}

/* A sleep trigger call KEY starts: remember the readings. */
static inline void
tg_trig_arm(struct tg_recorder *r, struct tg_thread *t, uintptr_t key)
{
    t->trig_key = key;
    t->trig_before = tg_memory_now(r, t, 0);
    t->trig_own_before = tg_own_bytes();
}

/* The pending trigger call returns: what the memory reading moved by while it
 * ran, less what this thread itself allocated in it (the bytes a recv() or
 * read() returns are the thread's), goes to the correction. */
static inline void
tg_trig_settle(struct tg_recorder *r, struct tg_thread *t)
{
    int64_t own = tg_own_bytes() - t->trig_own_before;
    t->correction += tg_memory_now(r, t, 0) - t->trig_before - own;
    t->trig_key = 0;
}

/* PyTrace_CALL: a Python frame starts or resumes.  Starts hiding the profiler's
 * own frames, arms a Python sleep trigger, and opens a recorded call if the
 * frame passes the filter. */
static inline __attribute__((always_inline)) void
tg_on_py_call(struct tg_recorder *r, struct tg_thread *t, const struct tg_at *at, const int d)
{
    struct tg_code_info *info = tg_code_info_get(r, at->code);

    if (__builtin_expect(info == NULL, 0))
        return;
    if (__builtin_expect(info->excluded, 0)) {
        t->suppress_key = at->key;
        /* the fast path (tg_profile_fast) tests the capture's room alone:
         * none until a record is written again, after the plumbing */
        tg_writer_divert(&t->capw);
        return;
    }
    if (!d) {
        if (atomic_load_explicit(&tg_acct_on, memory_order_relaxed))
            tg_acct_on_call((PyObject *)at->code);
        if (info->trigger && t->trig_key == 0 && tg_sleep_correction_on(r))
            tg_trig_arm(r, t, at->key);
        if (!r->record_python || !info->pass)
            return;
    }
    tg_open_call(r, t, at->key, info->file, info->file_len,
                 info->firstlineno, info->func, info->func_len, 0,
                 d || r->fmt_binary ? tg_cap_python_id(r, info)
                 : r->aggregate ? tg_agg_python_id(r, info) : 0, d);
    /* The fast paths' one test of the code (tg_mon_fast_py_call,
     * tg_profile_fast): info->gen is r->gen here (tg_code_info_get), and
     * excluded codes left above; a capture id of this run's capture is the
     * last condition. */
    if (d && info->cap_epoch == r->cap.epoch && info->cap_id != 0)
#if TG_HAVE_MONITORING
        info->fast_key = r->gen;
#else
        info->fast_key = r->cap.epoch;
#endif
}

/* PyTrace_RETURN (return, exception or yield): settles a pending Python sleep
 * trigger and closes the frame's recorded call, writing its .mem line. */
static inline __attribute__((always_inline)) void
tg_on_py_return(struct tg_recorder *r, struct tg_thread *t, const struct tg_at *at, const int d)
{
    int64_t delta, ref;
    if (!d && t->trig_key == at->key)
        tg_trig_settle(r, t);
    if (!tg_close_call(r, t, at->key, &delta, &ref, d)
            || !(d || r->text_mem || r->fmt_binary || r->aggregate))
        return;
    if (d && !TG_LINE_CACHE) {
        /* The default configuration writes the capture's RETURN alone, which
         * names no code (its CALL did) and takes the line from the frame: no
         * code info lookup (about 12 instructions a return). */
        tg_write_return(r, t, NULL, 0, tg_at_line(NULL, at), NULL, 0, 0, delta, ref, d);
        return;
    }
    {
        struct tg_code_info *info = tg_code_info_get(r, at->code);
        if (info == NULL) {
            tg_count(&t->dropped);
            return;
        }
        tg_write_return(r, t, info->file, info->file_len, tg_at_line(info, at),
                        info->func, info->func_len, 0, delta, ref, d);
    }
}

/* Whether a C call made from AT's frame passes the filter (its caller's file). */
static inline int
tg_c_call_passes(struct tg_recorder *r, const struct tg_at *at)
{
    struct tg_code_info *info;
    if (r->filter == NULL)
        return 1;
    info = tg_code_info_get(r, at->code);
    return info != NULL && info->pass;
}

/* PyTrace_C_CALL of CF: arms a C sleep trigger (even when C calls are not
 * recorded) and opens a recorded C call keyed by the calling frame. */
static inline __attribute__((always_inline)) void
tg_on_c_call(struct tg_recorder *r, struct tg_thread *t, const struct tg_at *at,
             const struct tg_cfunc *cf, const int d)
{
    const char *mod, *name;
    size_t mod_len, name_len;

    if (!d && t->trig_key == 0 && tg_sleep_correction_on(r) && tg_is_trigger_def(r, cf->ml))
        tg_trig_arm(r, t, at->key);
    if (tg_is_own_def(cf->ml) || (!d && (!r->record_c || !tg_c_call_passes(r, at))))
        return;
    /* The names go to the .stack line and to accounting; the capture names a
     * C function by its id (tg_cap_c_id reads them once, at its definition). */
    if (!d && (r->text_stack || atomic_load_explicit(&tg_acct_on, memory_order_relaxed)))
        tg_cfunc_names(cf, &mod, &mod_len, &name, &name_len);
    else
        mod = name = NULL, mod_len = name_len = 0;
    tg_open_call(r, t, at->key, mod, mod_len, tg_caller_line(r, at), name, name_len, 1,
                 d || r->fmt_binary ? tg_cap_c_id(r, cf)
                 : r->aggregate ? tg_agg_c_id(r, cf) : 0, d);
}

/* PyTrace_C_RETURN / PyTrace_C_EXCEPTION of CF: settles a pending C sleep
 * trigger (its memory change goes to the thread's correction) and closes the
 * call. */
static inline __attribute__((always_inline)) void
tg_on_c_return(struct tg_recorder *r, struct tg_thread *t, const struct tg_at *at,
               const struct tg_cfunc *cf, const int d)
{
    const char *mod, *name;
    size_t mod_len, name_len;
    int64_t delta, ref;

    if (!d && t->trig_key == at->key)
        tg_trig_settle(r, t);
    if (!tg_close_call(r, t, at->key, &delta, &ref, d)
            || !(d || r->text_mem || r->fmt_binary || r->aggregate))
        return;
    if (!d && r->text_mem)
        tg_cfunc_names(cf, &mod, &mod_len, &name, &name_len);
    else
        mod = name = NULL, mod_len = name_len = 0;
    tg_write_return(r, t, mod, mod_len, tg_caller_line(r, at), name, name_len, 1, delta, ref,
                    d);
}

/* Key of a sleep trigger armed without a call event (sleepwrap.c): never a
 * frame address, which is aligned. */
#define TG_TRIG_DIRECT ((uintptr_t)3)

int
tg_trigger_arm_direct(void)
{
    struct tg_recorder_object *a = tg_active;
    struct tg_thread *t = tg_tls.thread;

    if (a == NULL || !a->r.active || t == NULL || tg_tls.gen != a->r.gen
        || t->trig_key != 0 || !tg_sleep_correction_on(&a->r))
        return 0;
    tg_trig_arm(&a->r, t, TG_TRIG_DIRECT);
    return 1;
}

void
tg_trigger_settle_direct(void)
{
    struct tg_recorder_object *a = tg_active;
    struct tg_thread *t = tg_tls.thread;

    /* The run may have ended (or another begun) while the call blocked. */
    if (a == NULL || !a->r.active || t == NULL || tg_tls.gen != a->r.gen
        || t->trig_key != TG_TRIG_DIRECT)
        return;
    tg_trig_settle(&a->r, t);
}

/* The calling thread's state for R, attached on first sight; NULL when the
 * thread ended under our thread wrapper (its late events are not recorded) or
 * cannot be attached. */
static inline struct tg_thread *
tg_thread_for_event(struct tg_recorder_object *obj)
{
    struct tg_thread *t = tg_tls.thread;
    if (__builtin_expect(t == NULL || tg_tls.gen != obj->r.gen, 0)) {
        if (t == NULL && tg_tls.gen == obj->r.gen)
            return NULL;  /* detached: see tg_thread_detach */
        t = tg_thread_attach(obj, NULL, 0);
    }
    return t;
}

/* One event WHAT (a PyTrace_* value) at AT; for C events CF is the function.
 * TG_BUSY_TRACER is set by the caller.  D (a constant in each copy): R has the
 * default configuration (tg_event_path_choose), so every test of the
 * configuration it fixes is left out. */
static inline __attribute__((always_inline)) void
tg_event(struct tg_recorder *r, struct tg_thread *t, int what, const struct tg_at *at,
         const struct tg_cfunc *cf, const int d)
{
    tg_maybe_sample(r);
    if (t->suppress_key != 0) {
        /* Inside profiler plumbing: record nothing until its frame returns. */
        if (what == PyTrace_RETURN && t->suppress_key == at->key)
            t->suppress_key = 0;
        return;
    }
    switch (what) {
    case PyTrace_CALL:
        tg_on_py_call(r, t, at, d);
        break;
    case PyTrace_RETURN:
        tg_on_py_return(r, t, at, d);
        break;
    case PyTrace_C_CALL:
        tg_on_c_call(r, t, at, cf, d);
        break;
    case PyTrace_C_RETURN:
    case PyTrace_C_EXCEPTION:
        tg_on_c_return(r, t, at, cf, d);
        break;
    default:
        break;
    }
    if (__builtin_expect(t->level_due, 0))  /* a buffer began: tg_cap_reserve_slow */
        tg_level_mark_of(t);
    if (!d && r->stream_factory != NULL)
        tg_flush_py_if_old(t);
}

void
tg_event_path_choose(struct tg_recorder *r)
{
    int dflt = r->memory_mode == TG_MEM_THREAD && r->track_memory && r->track_stack
               && r->record_python && r->record_c && r->timestamps
               && r->fmt_binary && !r->fmt_text && r->filter == NULL
               && r->stream_factory == NULL && !tg_sleep_correction_on(r)
               && !atomic_load_explicit(&tg_acct_on, memory_order_relaxed);

    r->default_path = !dflt ? TG_PATH_GENERAL
                      : r->time_beat ? TG_PATH_DEFAULT_BEAT : TG_PATH_DEFAULT;
}

/* The profile function's body; D as tg_event's. */
static inline __attribute__((always_inline)) int
tg_profile_body(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg, const int d)
{
    struct tg_recorder *r = &((struct tg_recorder_object *)obj)->r;
    struct tg_thread *t;
    struct tg_at at;
    struct tg_cfunc cf;

    if (!r->active || (tg_tls.busy & TG_BUSY_TRACER) || frame == NULL)
        return 0;
    t = tg_thread_for_event((struct tg_recorder_object *)obj);
    if (t == NULL)
        return 0;
    at.key = (uintptr_t)frame;
    at.frame = frame;
    at.lasti = 0;
    if (what >= PyTrace_C_CALL) {
        /* C events: the function is ARG, a builtin (anything else is not
         * recorded: the interpreters report only builtins). */
        if (arg == NULL || !tg_cfunc_of(arg, NULL, NULL, &cf))
            return 0;
        at.key |= 1;
    }
    at.code = tg_frame_code(frame);
    tg_tls.busy |= TG_BUSY_TRACER;
#if TG_HAVE_MONITORING
    /* 3.12+ derives these events from sys.monitoring's, which passes the
     * instruction offset as an int (see tg_mon_event): the frame's. */
    t->event_bias = PyFrame_GetLasti(frame) > TG_SMALL_INT_MAX ? r->offset_int_size : 0;
#endif
    tg_event(r, t, what, &at, &cf, d);
#if TG_HAVE_MONITORING
    t->event_bias = 0;
#endif
    tg_tls.busy &= ~TG_BUSY_TRACER;
    return 0;
}

static __attribute__((noinline)) int
tg_profile_default(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    return tg_profile_body(obj, frame, what, arg, 1);
}

static __attribute__((noinline)) int
tg_profile_general(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    return tg_profile_body(obj, frame, what, arg, 0);
}

/* The fast paths' records (3.8-3.11's profile function, 3.12+'s monitoring
 * callbacks), written in the order that keeps the fewest values live (the
 * registers a call would have to save): the stack, the counters, the time,
 * then the record.  What they write is tg_event's with D 1.
 *
 * tg_fast_open: open a call KEY on T's stack at DEPTH (room checked), its
 * memory counted from START, and write its CALL of code ID (C: IS_C, with
 * LINE) at LEN, time US. */
static inline __attribute__((always_inline)) void
tg_fast_open(struct tg_thread *t, size_t depth, uintptr_t key, int64_t line, uint32_t id,
             int is_c, size_t len, int64_t us, int64_t start)
{
    struct tg_frame_entry *e = &t->frames[depth];
    uint64_t dt;
    e->key = key;
    e->start = start;
    e->cap_line = line;
    t->depth = depth + 1;
    t->cap_calls++;
    tg_count(&t->n_stack_records);
    dt = tg_cap_dt_us(t, us);
    tg_cap_commit(t, tg_cap_enc_call(tg_cap_at(t, len), id, 1, dt, is_c, line));
}

/* tg_fast_close: close E, the call at the top of T's stack (DEPTH entries),
 * and write its RETURN at LEN: at LINE, time US, memory DELTA. */
static inline __attribute__((always_inline)) void
tg_fast_close(struct tg_thread *t, const struct tg_frame_entry *e, size_t depth, size_t len,
              int64_t line, int64_t us, int64_t delta)
{
    int64_t line_off = line - e->cap_line;
    uint64_t dt;
    t->depth = depth - 1;
    t->cap_returns++;
    tg_count(&t->n_records);
    dt = tg_cap_dt_us(t, us);
    tg_cap_commit(t, tg_cap_enc_return(tg_cap_at(t, len), line_off, 1, dt, 1, delta));
}

/*
 * The profile function's fast path in the default configuration (3.8-3.11,
 * with the TSC clock): the events that need nothing but reading and writing
 * memory -- a Python call or return, a builtin's call or return, all of them
 * recorded, in a thread already attached, with the code's id known, room in
 * the capture buffer, a clock cache that holds, and no process sample due.
 * It makes every test first and changes nothing until all have passed, so
 * that anything else goes, untouched, to tg_profile_default (a tail call),
 * which does the same work and the rest.  It calls nothing (on 3.11; before,
 * the line of a return or a C call is PyFrame_GetLineNumber's), allocates
 * nothing and runs no Python, so it needs neither TG_BUSY_TRACER nor a
 * stack frame: its prologue, made after the first tests (GCC 12, -O2), saves
 * the 5 registers its record encoding needs beside the 9 a call may clobber
 * (tg_profile_default's saves 6 and makes a frame), about 20 instructions an
 * event fewer in all.  (Computing a return's delta and line before its clock
 * read, so that fewer values live across it, still saved 5: 2026-11-29.)
 * What it writes is exactly what tg_profile_default writes for the same
 * event (tg_event with D 1); a change to one is a change to both.
 */
#define TG_PROFILE_FAST (!TG_HAVE_MONITORING && TG_CLOCK_HAVE_TSC)

#if TG_PROFILE_FAST
/* The line of a return or of a C call made from FRAME (tg_known_line's
 * value) when it is > 0, else 0 or less: tg_profile_default works it out.
 * On 3.11 without a call (the frame holds it); before, PyFrame_GetLineNumber
 * decodes it. */
static inline int
tg_fast_line(PyFrameObject *frame)
{
#if PY_VERSION_HEX >= 0x030B0000
    return tg_frame_line_set(frame);
#else
    return tg_frame_line(frame);
#endif
}

/* The countdown reached 0 on the fast path: tg_sample_request, then the
 * profile function's 0, so that the fast path ends with a jump here. */
static __attribute__((noinline, cold)) int
tg_fast_sample(PyObject *obj)
{
    tg_sample_request(&((struct tg_recorder_object *)obj)->r);
    return 0;
}

/* The fast path's end of every event: the process.mem countdown (the
 * event's records are already written: the request's order relative to them
 * is not seen, the flusher takes the sample later anyway). */
static inline __attribute__((always_inline)) int
tg_fast_done(PyObject *obj)
{
    if (__builtin_expect(--((struct tg_recorder_object *)obj)->r.sample_countdown == 0, 0))
        return tg_fast_sample(obj);
    return 0;
}

/* A return (C: C_BIT 1, a C_RETURN or C_EXCEPTION of a builtin, keyed by
 * the frame | 1) on the fast path; WHAT is what tg_profile_default gets if
 * it is not for the fast path (ARG only matters for a C event). */
static inline __attribute__((always_inline)) int
tg_fast_return(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg,
               struct tg_thread *t, size_t len, const int c_bit, const int beat)
{
    size_t depth = t->depth;
    struct tg_frame_entry *e;
    int64_t us, line;

    if (__builtin_expect(depth == 0, 0))
        return tg_profile_default(obj, frame, what, arg);
    e = &t->frames[depth - 1];
    /* cap_line < 0: TG_CAP_NOT_WRITTEN, the only negative one in the default
     * configuration (lines are >= 0), in one instruction fewer */
    if (__builtin_expect(e->key != ((uintptr_t)frame | c_bit) || e->cap_line < 0, 0)
            || (line = tg_fast_line(frame)) <= 0
            || !TG_FAST_CLOCK(&us, beat))
        return tg_profile_default(obj, frame, what, arg);
    tg_fast_close(t, e, depth, len, line, us, tg_tls.allocated - tg_tls.freed - e->start);
    return tg_fast_done(obj);
}

/* A C_CALL of the builtin ARG (its type checked) on the fast path.  (Out of
 * line, in a function of its own, it saved a register push in the Python
 * events' copy but cost the C calls more: 0.3 M instructions more on
 * generator_heavy.) */
static inline __attribute__((always_inline)) int
tg_fast_c_call(PyObject *obj, PyFrameObject *frame, PyObject *arg, struct tg_thread *t,
               size_t len, const int beat)
{
    struct tg_recorder *r = &((struct tg_recorder_object *)obj)->r;
    PyCFunctionObject *f = (PyCFunctionObject *)arg;
    PyObject *owner = f->m_module != NULL ? f->m_module : tg_cfunc_owner_of_self(f->m_self);
    size_t depth = t->depth;
    int64_t us, line;
    uint32_t id;

    if (__builtin_expect(tg_is_own_def(f->m_ml) || depth == t->frames_cap, 0)
            || (id = tg_cap_idtab_get(&r->cfunc_ids, (uintptr_t)f->m_ml,
                                      (uintptr_t)owner)) == 0
            || (line = tg_fast_line(frame)) <= 0
            || !TG_FAST_CLOCK(&us, beat))
        return tg_profile_default(obj, frame, PyTrace_C_CALL, arg);
    tg_fast_open(t, depth, (uintptr_t)frame | 1, line, id, 1, len, us,
                 tg_tls.allocated - tg_tls.freed);
    return tg_fast_done(obj);
}

static inline __attribute__((always_inline)) int
tg_profile_fast(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg, const int beat)
{
    struct tg_recorder *r = &((struct tg_recorder_object *)obj)->r;
    struct tg_thread *t = tg_tls.thread;
    size_t len, depth;
    int64_t us;

    /* Neither r->active (default_path is cleared with it) nor t->suppress_key
     * (setting it diverts the capture writer, so tg_cap_fits fails until a
     * record is written after it is cleared) need a test of their own. */
    if (__builtin_expect((tg_tls.busy & TG_BUSY_TRACER) || frame == NULL || t == NULL
                         || tg_tls.gen != r->gen, 0)
            || !tg_cap_fits(t, &len))
        return tg_profile_default(obj, frame, what, arg);
    /* In each case below, WHAT and (for Python events) ARG given to
     * tg_profile_default are constants it treats the same as the real ones
     * (it reads ARG only for C events, and C_EXCEPTION as C_RETURN): fewer
     * values kept live, fewer registers. */
    if (what == PyTrace_RETURN)
        return tg_fast_return(obj, frame, PyTrace_RETURN, NULL, t, len, 0, beat);
    if (what == PyTrace_CALL) {
        struct tg_code_info *info = tg_code_extra_fast(tg_frame_code(frame), tg_code_index);
        depth = t->depth;
        if (__builtin_expect(info == NULL || info->fast_key != r->cap.epoch
                             || depth == t->frames_cap, 0)
                || !TG_FAST_CLOCK(&us, beat))
            return tg_profile_default(obj, frame, PyTrace_CALL, NULL);
        tg_fast_open(t, depth, (uintptr_t)frame, info->firstlineno, info->cap_id, 0, len, us,
                     tg_tls.allocated - tg_tls.freed);
        return tg_fast_done(obj);
    }
    if (arg == NULL || Py_TYPE(arg) != &PyCFunction_Type)
        return tg_profile_default(obj, frame, what, arg);
    if (what == PyTrace_C_CALL)
        return tg_fast_c_call(obj, frame, arg, t, len, beat);
    if (what == PyTrace_C_RETURN || what == PyTrace_C_EXCEPTION)
        return tg_fast_return(obj, frame, PyTrace_C_RETURN, arg, t, len, 1, beat);
    return tg_profile_default(obj, frame, what, arg);
}

/* The fast path of the default configuration with the clock's beat
 * (TG_PATH_DEFAULT_BEAT): out of line, so that the default's copy, inlined
 * in tg_profile, stays as it was. */
static __attribute__((noinline)) int
tg_profile_fast_beat(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    return tg_profile_fast(obj, frame, what, arg, 1);
}
#endif

int
tg_profile(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    int path = ((struct tg_recorder_object *)obj)->r.default_path;

    /* A tail call into the copy for this run's configuration. */
    if (__builtin_expect(path != TG_PATH_DEFAULT, 0)) {
        if (path == TG_PATH_GENERAL)
            return tg_profile_general(obj, frame, what, arg);
#if TG_PROFILE_FAST
        return tg_profile_fast_beat(obj, frame, what, arg);
#else
        return tg_profile_default(obj, frame, what, arg);
#endif
    }
#if TG_PROFILE_FAST
    return tg_profile_fast(obj, frame, what, arg, 0);
#else
    return tg_profile_default(obj, frame, what, arg);
#endif
}

#if TG_HAVE_MONITORING
/* Read a sys.monitoring instruction offset O (an int) as tg_offset_long does,
 * with a shorter common case: an offset is never negative, so a compact int
 * of at most one digit that is not negative (lv_tag: digits << 3 | sign, sign
 * 0 positive, 1 zero) is its first digit (0 for zero).  -1 on failure, with
 * no exception set. */
static inline long
tg_mon_offset(PyObject *o)
{
    long v;
    if (__builtin_expect(Py_IS_TYPE(o, &PyLong_Type)
                         && ((PyLongObject *)o)->long_value.lv_tag <= (1 << 3), 1))
        return (long)((PyLongObject *)o)->long_value.ob_digit[0];
    v = tg_offset_long(o);
    if (v < 0) {
        PyErr_Clear();
        v = -1;
    }
    return v;
}

/* Whether a C event's callable ARGS[2], called with ARGS[3] as its first
 * argument, is a C function for the event path, and which (tg_cfunc_of): the
 * exact types first, so that a method descriptor is taken without
 * PyCFunction_Check's walk of its type's MRO (PyType_IsSubtype). */
static inline int
tg_mon_cfunc(struct tg_recorder_object *obj, PyObject *const *args, struct tg_cfunc *cf)
{
    PyObject *callable = args[2];
    PyTypeObject *tp = Py_TYPE(callable);

    if (tp == &PyCFunction_Type)
        return tg_cfunc_of_builtin(callable, cf);
    if (tp == &PyMethodDescr_Type)
        return tg_cfunc_of_descr(callable, args[3], obj->r.mon_missing, cf);
    return tg_cfunc_of(callable, args[3], obj->r.mon_missing, cf);
}

/* The event WHAT (PyTrace_*, a constant in each entry) that sys.monitoring
 * reports to the callback SELF (a struct tg_mon_cb) with ARGS: code, offset,
 * and for C events the callable and its first argument, whose C function the
 * caller found (CF, tg_mon_cfunc; else NULL).  D as tg_event's. */
static inline __attribute__((always_inline)) void
tg_mon_event(PyObject *self, PyObject *const *args, const struct tg_cfunc *cf,
             const int what, const int d)
{
    struct tg_recorder_object *obj = ((struct tg_mon_cb *)self)->rec;
    struct tg_recorder *r = &obj->r;
    PyObject *code = args[0];
    struct tg_thread *t;
    struct tg_at at;
    long lasti;

    if (!r->active || (tg_tls.busy & TG_BUSY_TRACER) || !PyCode_Check(code))
        return;
    t = tg_thread_for_event(obj);
    if (t == NULL)
        return;
    at.key = tg_mon_frame(code) | (what >= PyTrace_C_CALL);
    tg_tls.busy |= TG_BUSY_TRACER;
    lasti = tg_mon_offset(args[1]);
    /* The interpreter allocated the offset int to call us unless it is one of
     * the small ints: that is not the program's memory. */
    t->event_bias = lasti > TG_SMALL_INT_MAX ? r->offset_int_size : 0;
    at.code = (PyCodeObject *)code;
    at.frame = NULL;
    at.lasti = lasti < 0 ? 0 : (int)lasti;
    tg_event(r, t, what, &at, cf, d);
    t->event_bias = 0;
    tg_tls.busy &= ~TG_BUSY_TRACER;
}

/* The callbacks' vectorcall functions, one per kind of event (monitor.h
 * TG_MON_*) and copy of the event path: the interpreter calls straight into
 * the path, the event's kind and the configuration's copy (tg_profile's
 * default_path, fixed at enable) chosen when the callbacks were made
 * (monitor.c), not per event. */
#define TG_MON_PY_ENTRY(fname, what, d)                                               \
    static PyObject *                                                                 \
    fname(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)    \
    {                                                                                 \
        (void)kwnames;                                                                \
        if (__builtin_expect(PyVectorcall_NARGS(nargsf) >= 2, 1))                     \
            tg_mon_event(self, args, NULL, what, d);                                  \
        Py_RETURN_NONE;                                                               \
    }

/* C events: CALL comes for every callable, and the Python functions and bound
 * methods that most CALL events carry (on 3.12 call-heavy code, 45% of the
 * callbacks; their calls are PY_START's), and classes (`str(i)`: CALL and
 * C_RETURN, never a C function for tg_mon_cfunc), are left at once, by exact
 * type, without a stack frame; the rest goes on out of line. */
#define TG_MON_C_ENTRY(fname, what, d)                                                \
    static __attribute__((noinline)) PyObject *                                       \
    fname##_event(PyObject *self, PyObject *const *args)                              \
    {                                                                                 \
        struct tg_cfunc cf;                                                           \
        if (tg_mon_cfunc(((struct tg_mon_cb *)self)->rec, args, &cf))                 \
            tg_mon_event(self, args, &cf, what, d);                                   \
        Py_RETURN_NONE;                                                               \
    }                                                                                 \
    static PyObject *                                                                 \
    fname(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)    \
    {                                                                                 \
        PyTypeObject *tp;                                                             \
        (void)kwnames;                                                                \
        if (__builtin_expect(PyVectorcall_NARGS(nargsf) < 4, 0))                      \
            Py_RETURN_NONE;                                                           \
        tp = Py_TYPE(args[2]);                                                        \
        if (tp == &PyFunction_Type || tp == &PyMethod_Type || tp == &PyType_Type)     \
            Py_RETURN_NONE;                                                           \
        return fname##_event(self, args);                                             \
    }

TG_MON_PY_ENTRY(tg_mon_py_call_d, PyTrace_CALL, 1)
TG_MON_PY_ENTRY(tg_mon_py_return_d, PyTrace_RETURN, 1)
TG_MON_C_ENTRY(tg_mon_c_call_d, PyTrace_C_CALL, 1)
TG_MON_C_ENTRY(tg_mon_c_return_d, PyTrace_C_RETURN, 1)
TG_MON_PY_ENTRY(tg_mon_py_call_g, PyTrace_CALL, 0)
TG_MON_PY_ENTRY(tg_mon_py_return_g, PyTrace_RETURN, 0)
TG_MON_C_ENTRY(tg_mon_c_call_g, PyTrace_C_CALL, 0)
TG_MON_C_ENTRY(tg_mon_c_return_g, PyTrace_C_RETURN, 0)

/*
 * The callbacks' fast path in the default configuration (with the TSC
 * clock), as tg_profile_fast is the profile function's: the events that need
 * nothing but reading and writing memory -- a Python call or return, a
 * builtin's call or return, all recorded, in a thread already attached whose
 * cached thread state holds, the code's id (a C function's: in the table)
 * and the line of the event's offset (in the code's line cache) known, room
 * in the capture buffer, a clock cache that holds.  Every test comes first and
 * nothing changes until all have passed, so that anything else goes,
 * untouched, to the default entry above (a tail call), which does the same
 * work and the rest.  It calls nothing, allocates nothing and runs no Python:
 * no TG_BUSY_TRACER, and the offset int's bias is taken into the memory
 * reading rather than stored in the thread.  What it writes is exactly what
 * the default entries write for the same event (tg_event with D 1); a change
 * to one is a change to both.
 */
#ifndef TG_MON_FAST  /* -DTG_MON_FAST=0: without it, to compare what both write */
#  define TG_MON_FAST TG_CLOCK_HAVE_TSC
#endif

#if TG_MON_FAST
/* None, the callbacks' result: immortal from 3.12 (PEP 683), so returned
 * without a reference taken (Py_RETURN_NONE's increment tests for that). */
#define TG_MON_NONE Py_None

/* The countdown reached 0: tg_sample_request, then None. */
static __attribute__((noinline, cold)) PyObject *
tg_mon_fast_sample(struct tg_recorder *r)
{
    tg_sample_request(r);
    return TG_MON_NONE;
}

/* Every fast event's end: the process.mem countdown (tg_fast_done's). */
static inline __attribute__((always_inline)) PyObject *
tg_mon_fast_done(struct tg_recorder *r)
{
    if (__builtin_expect(--r->sample_countdown == 0, 0))
        return tg_mon_fast_sample(r);
    return TG_MON_NONE;
}

/* Whether the fast path may take an event of R in the calling thread T with
 * room at *LEN in its capture buffer.  R->active is tested with the thread's
 * generation, in one compare: mon_gen is R->gen while active, 0 otherwise (the
 * callbacks are installed before active is set and removed after it is
 * cleared, by calls that fire events); T->suppress_key needs no test
 * (tg_profile_fast's: the plumbing diverts the capture writer). */
#define TG_MON_FAST_READY(r, t, len)                                                \
    (!__builtin_expect((tg_tls.busy & TG_BUSY_TRACER) || (t) == NULL                \
                       || tg_tls.gen != (r)->mon_gen, 0)                             \
     && tg_cap_fits((t), (len)))

/* Whether CODE, the event's code object as the callback got it, may be read
 * as one once tg_mon_frame_cached(CODE) found the running frame to run it:
 * on 3.12 a frame's f_code is always a code object, so the test is left out
 * (tested after the frame, it is implied); 3.13's f_executable may be
 * another object (None in an entry frame), so it is made. */
#if PY_VERSION_HEX >= 0x030D0000
#  define TG_MON_FAST_IS_CODE(code) PyCode_Check(code)
#else
#  define TG_MON_FAST_IS_CODE(code) 1
#endif

/* Whether the callback was given fewer than N arguments (NARGSF as
 * vectorcall passes it), in one compare of its low 32 bits:
 * PY_VECTORCALL_ARGUMENTS_OFFSET is the top bit, so fewer than N arguments
 * always shows there; a count of 2^32 or more that looks small there only
 * sends the event to the default entry, which counts exactly
 * (PyVectorcall_NARGS masks with a 64-bit constant: one instruction more). */
#define TG_MON_FAST_FEWER(nargsf, n) ((uint32_t)(nargsf) < (uint32_t)(n))

/* The instruction offset O (the callback's second argument) when it is a
 * compact int of at most one digit that is not negative (every offset below
 * 2^30: tg_mon_offset's common case), else -1. */
static inline long
tg_mon_fast_offset(PyObject *o)
{
    if (__builtin_expect(Py_IS_TYPE(o, &PyLong_Type)
                         && ((PyLongObject *)o)->long_value.lv_tag <= (1 << 3), 1))
        return (long)((PyLongObject *)o)->long_value.ob_digit[0];
    return -1;
}

/* The bytes the interpreter allocated for the offset int LASTI (tg_mon_event's
 * event_bias). */
static inline int64_t
tg_mon_fast_bias(struct tg_recorder *r, long lasti)
{
    return lasti > TG_SMALL_INT_MAX ? r->offset_int_size : 0;
}

/* The line of INFO's code at offset LASTI (>= 0) from its cache (as
 * tg_at_line gives it: tg_known_line's), or -1 when the cache does not hold
 * it (the default entry computes and caches it). */
static inline int
tg_mon_fast_line(const struct tg_code_info *info, long lasti)
{
    unsigned slot = ((unsigned)lasti >> 1) % TG_LINE_CACHE;
    if (__builtin_expect(info->lines[slot].lasti != lasti, 0))
        return -1;
    return tg_known_line(info->lines[slot].line);
}

/* PY_START, PY_RESUME, PY_THROW.  BEAT: the TG_PATH_DEFAULT_BEAT copy
 * (TG_FAST_CLOCK), as for each fast callback below. */
static inline __attribute__((always_inline)) PyObject *
tg_mon_fast_py_call_of(PyObject *self, PyObject *const *args, size_t nargsf,
                       PyObject *kwnames, const int beat)
{
    struct tg_recorder *r = &((struct tg_mon_cb *)self)->rec->r;
    struct tg_thread *t = tg_tls.thread;
    struct tg_code_info *info;
    PyObject *code;
    uintptr_t key;
    size_t len, depth;
    int64_t us;
    long lasti;

    if (__builtin_expect(TG_MON_FAST_FEWER(nargsf, 2), 0) || !TG_MON_FAST_READY(r, t, &len))
        return tg_mon_py_call_d(self, args, nargsf, kwnames);
    code = args[0];
    depth = t->depth;
    if (__builtin_expect((key = tg_mon_frame_cached(code)) == 0 || !TG_MON_FAST_IS_CODE(code)
                         || (info = tg_code_extra_fast((PyCodeObject *)code,
                                                       tg_code_index)) == NULL
                         || info->fast_key != r->mon_gen || depth == t->frames_cap, 0)
            || (lasti = tg_mon_fast_offset(args[1])) < 0
            || !TG_FAST_CLOCK(&us, beat))
        return tg_mon_py_call_d(self, args, nargsf, kwnames);
    tg_fast_open(t, depth, key, info->firstlineno, info->cap_id, 0, len, us,
                 tg_tls.allocated - tg_tls.freed - tg_mon_fast_bias(r, lasti));
    return tg_mon_fast_done(r);
}

/* A return (C_BIT 1: of a builtin, keyed by the frame | 1) on the fast path;
 * SLOW is the default entry of its kind. */
static inline __attribute__((always_inline)) PyObject *
tg_mon_fast_return(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames,
                   vectorcallfunc slow, const int c_bit, const int beat)
{
    struct tg_recorder *r = &((struct tg_mon_cb *)self)->rec->r;
    struct tg_thread *t = tg_tls.thread;
    struct tg_code_info *info;
    struct tg_frame_entry *e;
    PyObject *code;
    size_t len, depth;
    int64_t us, line;
    long lasti;

    if (__builtin_expect(TG_MON_FAST_FEWER(nargsf, c_bit ? 4 : 2), 0)
            || !TG_MON_FAST_READY(r, t, &len))
        return slow(self, args, nargsf, kwnames);
    code = args[0];
    depth = t->depth;
    if (c_bit) {
        /* a return of what tg_mon_cfunc takes for a C function (the default
         * entry ignores any other, a class at once), by exact type */
        PyTypeObject *tp = Py_TYPE(args[2]);
        if (tp != &PyCFunction_Type
                && (tp != &PyMethodDescr_Type || args[3] == NULL || args[3] == r->mon_missing))
            return tp == &PyType_Type ? TG_MON_NONE : slow(self, args, nargsf, kwnames);
    }
    if (__builtin_expect(depth == 0, 0))
        return slow(self, args, nargsf, kwnames);
    e = &t->frames[depth - 1];
    /* cap_line < 0: TG_CAP_NOT_WRITTEN (lines are >= 0) */
    if (__builtin_expect(e->key != (tg_mon_frame_cached(code) | c_bit)
                         || !TG_MON_FAST_IS_CODE(code)
                         || (info = tg_code_extra_fast((PyCodeObject *)code,
                                                       tg_code_index)) == NULL
                         || e->cap_line < 0, 0)
            || (lasti = tg_mon_fast_offset(args[1])) < 0
            || (line = tg_mon_fast_line(info, lasti)) < 0
            || !TG_FAST_CLOCK(&us, beat))
        return slow(self, args, nargsf, kwnames);
    tg_fast_close(t, e, depth, len, line, us,
                  tg_tls.allocated - tg_tls.freed - tg_mon_fast_bias(r, lasti) - e->start);
    return tg_mon_fast_done(r);
}

/* CALL: the Python functions, bound methods and classes left at once, as
 * TG_MON_C_ENTRY does; a builtin or a method descriptor called with its self
 * (tg_mon_cfunc's exact types) on the fast path. */
static inline __attribute__((always_inline)) PyObject *
tg_mon_fast_c_call_of(PyObject *self, PyObject *const *args, size_t nargsf,
                      PyObject *kwnames, const int beat)
{
    struct tg_recorder *r = &((struct tg_mon_cb *)self)->rec->r;
    struct tg_thread *t;
    struct tg_code_info *info;
    struct tg_cfunc cf;
    PyTypeObject *tp;
    PyObject *code;
    uintptr_t key;
    size_t len, depth;
    int64_t us, line;
    uint32_t id;
    long lasti;

    if (__builtin_expect(TG_MON_FAST_FEWER(nargsf, 4), 0))
        return tg_mon_c_call_d(self, args, nargsf, kwnames);
    tp = Py_TYPE(args[2]);
    if (tp == &PyFunction_Type || tp == &PyMethod_Type || tp == &PyType_Type)
        return TG_MON_NONE;
    t = tg_tls.thread;
    if (!TG_MON_FAST_READY(r, t, &len))
        return tg_mon_c_call_d(self, args, nargsf, kwnames);
    if (tp == &PyCFunction_Type)
        tg_cfunc_of_builtin(args[2], &cf);
    else if (tp != &PyMethodDescr_Type
             || !tg_cfunc_of_descr(args[2], args[3], r->mon_missing, &cf))
        return tg_mon_c_call_d(self, args, nargsf, kwnames);
    code = args[0];
    depth = t->depth;
    if (__builtin_expect(tg_is_own_def(cf.ml) || depth == t->frames_cap || !PyCode_Check(code)
                         || (info = tg_code_extra_fast((PyCodeObject *)code,
                                                       tg_code_index)) == NULL, 0)
            || (lasti = tg_mon_fast_offset(args[1])) < 0
            || (line = tg_mon_fast_line(info, lasti)) < 0
            || (id = tg_cap_idtab_get(&r->cfunc_ids, (uintptr_t)cf.ml,
                                      (uintptr_t)cf.owner)) == 0
            || (key = tg_mon_frame_cached(code)) == 0
            || !TG_FAST_CLOCK(&us, beat))
        return tg_mon_c_call_d(self, args, nargsf, kwnames);
    tg_fast_open(t, depth, key | 1, line, id, 1, len, us,
                 tg_tls.allocated - tg_tls.freed - tg_mon_fast_bias(r, lasti));
    return tg_mon_fast_done(r);
}

/* The fast callbacks, each kind in a copy without the beat (NAME) and one
 * with it (NAME_beat): PY_START, PY_RESUME, PY_THROW; PY_RETURN, PY_YIELD,
 * PY_UNWIND; C_RETURN, C_RAISE; CALL (the Python functions, bound methods
 * and classes left at once, as TG_MON_C_ENTRY does; a builtin or a method
 * descriptor called with its self, tg_mon_cfunc's exact types, on the fast
 * path). */
#define TG_MON_FAST_COPIES(name, call)                                                \
    static PyObject *                                                                 \
    name(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)     \
    {                                                                                 \
        return call(0);                                                               \
    }                                                                                 \
    static PyObject *                                                                 \
    name##_beat(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) \
    {                                                                                 \
        return call(1);                                                               \
    }
#define TG_MON_PY_CALL_OF(beat) tg_mon_fast_py_call_of(self, args, nargsf, kwnames, beat)
#define TG_MON_PY_RETURN_OF(beat) \
    tg_mon_fast_return(self, args, nargsf, kwnames, tg_mon_py_return_d, 0, beat)
#define TG_MON_C_RETURN_OF(beat) \
    tg_mon_fast_return(self, args, nargsf, kwnames, tg_mon_c_return_d, 1, beat)
#define TG_MON_C_CALL_OF(beat) tg_mon_fast_c_call_of(self, args, nargsf, kwnames, beat)
TG_MON_FAST_COPIES(tg_mon_fast_py_call, TG_MON_PY_CALL_OF)
TG_MON_FAST_COPIES(tg_mon_fast_py_return, TG_MON_PY_RETURN_OF)
TG_MON_FAST_COPIES(tg_mon_fast_c_return, TG_MON_C_RETURN_OF)
TG_MON_FAST_COPIES(tg_mon_fast_c_call, TG_MON_C_CALL_OF)
#endif

/* A row of tg_mon_entries for the default configuration: the fast callbacks
 * of SUFFIX (empty, or _beat), or the default entries where there are none. */
#if TG_MON_FAST
#define TG_MON_DEFAULT_ROW(suffix) {                         \
        [TG_MON_PY_CALL] = tg_mon_fast_py_call##suffix,     \
        [TG_MON_PY_RETURN] = tg_mon_fast_py_return##suffix, \
        [TG_MON_C_CALL] = tg_mon_fast_c_call##suffix,       \
        [TG_MON_C_RETURN] = tg_mon_fast_c_return##suffix,   \
    }
#else
#define TG_MON_DEFAULT_ROW(suffix) {                 \
        [TG_MON_PY_CALL] = tg_mon_py_call_d,        \
        [TG_MON_PY_RETURN] = tg_mon_py_return_d,    \
        [TG_MON_C_CALL] = tg_mon_c_call_d,          \
        [TG_MON_C_RETURN] = tg_mon_c_return_d,      \
    }
#endif

const vectorcallfunc tg_mon_entries[3][TG_MON_N_KINDS] = {
    [TG_PATH_GENERAL] = {
        [TG_MON_PY_CALL] = tg_mon_py_call_g,
        [TG_MON_PY_RETURN] = tg_mon_py_return_g,
        [TG_MON_C_CALL] = tg_mon_c_call_g,
        [TG_MON_C_RETURN] = tg_mon_c_return_g,
    },
    [TG_PATH_DEFAULT] = TG_MON_DEFAULT_ROW(),
    [TG_PATH_DEFAULT_BEAT] = TG_MON_DEFAULT_ROW(_beat),
};
#endif
