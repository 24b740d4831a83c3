/*
 * recorder.h - the recording engine: per-thread state, the profile function,
 * enable/disable, the background flusher and fork handling.
 *
 * One struct tg_recorder lives inside each Python Recorder object (module.c); at
 * most one is active per process (tg_active).  Per-thread state (struct
 * tg_thread) is created by the thread itself, reached through the thread-local
 * tg_tls.thread, and listed in the recorder's registry so that disable(), the
 * flusher and fork can reach every thread's buffers.
 */
#ifndef TG_RECORDER_H
#define TG_RECORDER_H

#include "tg_compat.h"
#include "clock.h"
#include "writer.h"
#include "capture.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* Our symbols are internal to the extension (only PyInit__recorder is exported):
 * hidden, calls between our files are direct instead of through the PLT and
 * globals are not read through the GOT on the hot path. */
#pragma GCC visibility push(hidden)

enum tg_memory_mode { TG_MEM_THREAD = 0, TG_MEM_PROCESS = 1, TG_MEM_RSS = 2 };

/* Where events come from (docs/api.md "backend"). */
enum tg_backend { TG_BACKEND_SETPROFILE = 0, TG_BACKEND_MONITORING = 1 };

/* The "SECONDS." part of the last timestamp formatted, reused while the second
 * stays the same (formats.md TIME: only the microseconds change). */
struct tg_time_cache {
    int64_t sec;       /* the second TEXT holds; valid iff len != 0 */
    size_t len;        /* bytes of TEXT used, the '.' included */
    char text[24];     /* up to 20 digits and '.' */
    int64_t last_ns;   /* last time given, ns: lines never go back (clock.h) */
};

/* One open recorded call. */
struct tg_frame_entry {
    uintptr_t key;   /* frame address; | 1 for a C call made from that frame */
    int64_t start;   /* memory reading at the call */
    int64_t cap_line;  /* capture: the CALL's line (the RETURN's reference), or
                        * TG_CAP_NOT_WRITTEN when the CALL was dropped */
};

/* tg_frame_entry.cap_line of a call whose CALL record is not in the capture. */
#define TG_CAP_NOT_WRITTEN INT64_MIN

/*
 * A profiled thread.  Created by its own thread (tg_thread_attach), owned by the
 * recorder's registry; freed by its thread when it ends through our thread
 * wrapper, otherwise put on the retired list by disable() and freed at the next
 * enable() (a raw-domain hook racing with disable never touches it: the hooks
 * only use thread-locals, but the callback might still hold it).
 */
struct tg_thread {
    struct tg_thread *next;        /* registry link; recorder reg_lock */
    uint64_t gen;                  /* run generation; immutable */
    struct tg_writer mem;          /* producer: this thread; see writer.h */
    struct tg_writer stack;        /* producer: this thread; see writer.h */
    struct tg_writer capw;         /* capture events (chunk mode); as mem */
    uint32_t stream;               /* capture stream id; immutable */
    int64_t cap_us;                /* time of the stream's last timed record (us);
                                    * owner only */
    uint64_t cap_calls, cap_returns;  /* capture records written; owner only */
    uint64_t cap_dropped;          /* capture records lost; owner only */
    uint64_t cap_drop_pending;     /* of those, not yet marked in the stream; owner */
    _Atomic uint64_t dropped;      /* records lost (text lines and capture records):
                                    * owner stores, others read (as n_records) */
    _Atomic uint64_t n_records;    /* .mem lines written; owner stores, others read
                                    * (relaxed: a plain load/store, no lock prefix) */
    _Atomic uint64_t n_stack_records;  /* .stack lines written; as n_records */
    struct tg_frame_entry *frames; /* open recorded calls; owner only (GIL) */
    size_t depth;                  /* used entries of frames; owner only */
    size_t frames_cap;             /* owner only */
    int64_t correction;            /* bytes not charged (sleep/lock); owner only */
    int64_t event_bias;            /* bytes the interpreter allocated to deliver the
                                    * current event (sys.monitoring's offset int):
                                    * left out of memory readings; owner only */
    struct tg_time_cache clock;    /* timestamps of this thread's lines; owner only */
    uintptr_t suppress_key;        /* frame of profiler plumbing running now: nothing
                                    * is recorded until it returns (0 = none); owner */
    uintptr_t trig_key;            /* pending sleep trigger call (0 = none); owner */
    int64_t trig_before;           /* memory reading at its call; owner */
    int64_t trig_own_before;       /* own traced bytes at its call; owner */
    unsigned long ident;           /* threading ident; immutable */
    unsigned long native_id;       /* OS thread id; immutable */
};

/* A thread as listed in runinfo.json; the log lives for the whole run. */
struct tg_thread_log {
    char *name;        /* thread name, UTF-8 (may contain NUL) */
    size_t name_len;
    char *base;        /* file base name, unique in the run */
    unsigned long ident;
    unsigned long native_id;
    int has_mem, has_stack, custom;  /* custom: stream_factory files */
};

struct tg_recorder {
    /* --- configuration: written by enable() with the GIL, then read-only --- */
    int active;                /* GIL */
    uint64_t gen;              /* run generation; GIL */
    int record_python;         /* record Python calls */
    int record_c;              /* record C calls */
    int track_memory;          /* write .mem */
    int track_stack;           /* write .stack */
    int track_sleeps;          /* sleep/lock correction (process, rss modes) */
    int timestamps;            /* TIME# prefixes */
    int fmt_text;              /* write the text files (.mem, .stack, process.mem) */
    int fmt_binary;            /* write capture.tg */
    int cap_compress;          /* zstd-compress its chunks (compress=True) */
    int text_mem, text_stack;  /* fmt_text && track_memory / track_stack */
    int cap_counts_mem, cap_counts_stack;  /* !fmt_text && track_memory / track_stack:
                                            * capture records count as .mem / .stack
                                            * lines in stats() */
    int default_path;          /* the default configuration: tg_profile runs its
                                * copy without configuration tests (recorder.c,
                                * tg_event_path_choose) */
    int time_calls;            /* read the clock at recorded calls */
    int time_returns;          /* read the clock at recorded returns */
    int memory_mode;           /* enum tg_memory_mode */
    int backend;               /* enum tg_backend, as resolved by enable() */
    int backend_auto;          /* backend chosen by default: may fall back */
    int mon_tool;              /* sys.monitoring tool id in use, or -1; GIL */
    PyObject *mon_missing;     /* sys.monitoring.MISSING (strong) or NULL; GIL */
    int64_t offset_int_size;   /* 3.12+: bytes of the int the interpreter allocates
                                * for an instruction offset above the small ints to
                                * deliver an event (measured at enable) */
    long sample_every;         /* process.mem every N events; 0 = off */
    char *filter;              /* escaped co_filename prefix, or NULL */
    size_t filter_len;
    char *exclude_file;        /* escaped file name of profiler.py: never recorded */
    size_t exclude_len;
    char *outdir;              /* output directory */
    PyObject *stream_factory;  /* or NULL; GIL */
    PyMethodDef **trig_defs;   /* sleep triggers that are C functions */
    size_t n_trig_defs;
    PyObject **trig_codes;     /* sleep triggers that are Python code (strong refs) */
    size_t n_trig_codes;
    PyObject *wrapped;         /* list of (module, attr, original, wrapper); GIL */
    _Atomic int statm_fd;      /* /proc/self/statm, or -1; the flusher resets it to
                                * -1 if the program closed it (relaxed atomic) */
    dev_t statm_dev;           /* its identity (see tg_fd_is_ours) */
    ino_t statm_ino;
    long page_size;

    /* --- threads --- */
    pthread_mutex_t reg_lock;          /* guards threads, log*, done_* */
    struct tg_thread *threads;         /* live states of this run */
    struct tg_thread *retired;         /* states of past runs, freed at enable; GIL */
    struct tg_thread_log *log;
    size_t n_log, log_cap;
    struct tg_nameset *names;          /* the log's base names (names.h) */
    uint64_t done_records, done_stack_records;  /* from freed states */
    uint64_t done_dropped;             /* from freed states (and process samples) */
    unsigned long dummy_counter;       /* for Dummy-N; GIL */
    PyObject *errors;                  /* list of str: stopped streams; GIL */

    /* --- process.mem --- */
    struct tg_writer process_w;        /* producers: any thread with the GIL */
    struct tg_time_cache process_clock;  /* process_w's timestamps; GIL */
    long sample_countdown;             /* profile events until the next process.mem
                                        * sample; GIL (every event holds it, so a
                                        * plain counter: a locked add here cost more
                                        * than the rest of the profile function) */

    /* --- capture.tg (fmt_binary) --- */
    struct tg_cap cap;                 /* the file; see capture.h */
    struct tg_cap_idtab cfunc_ids;     /* (PyMethodDef, module) -> code id, each
                                        * module referenced; GIL */
    struct tg_writer process_cap;      /* process samples (chunk mode); as process_w */
    int64_t process_cap_us;            /* last sample's time (us); GIL */
    int64_t process_cap_bytes;         /* last sample's bytes; GIL */

    /* --- background flusher (a pthread, not a Python thread) --- */
    pthread_mutex_t flusher_lock;      /* guards flusher_stop, flusher_kicked */
    pthread_cond_t flusher_cond;
    int flusher_stop;
    int flusher_kicked;                /* a writer handed off a full buffer */
    int flusher_running;               /* GIL */
    pthread_t flusher;

    int fork_child_pending;            /* set by the atfork child handler */
};

struct tg_recorder_object {
    PyObject_HEAD
    struct tg_recorder r;
};

/* The active recorder object, or NULL; GIL (read by the atfork handlers, which
 * run in the forking thread while it holds the GIL). */
extern struct tg_recorder_object *tg_active;

/* Method table of the Recorder type: calls into it are never recorded. */
extern PyMethodDef tg_recorder_methods[];
extern size_t tg_recorder_n_methods;

/* One-time set up at module import (code extra index, pthread_atfork). */
int tg_recorder_module_init(void);

void tg_recorder_init(struct tg_recorder *r);
void tg_recorder_dealloc(struct tg_recorder *r);
void tg_recorder_clear_config(struct tg_recorder *r);

/* Start recording into OUTDIR with the configuration already stored in R.
 * Returns 0, or -1 with a Python exception set and nothing installed. */
int tg_recorder_enable(struct tg_recorder_object *self);
/* Stop: uninstall everything, flush and close all files.  Returns 0, or -1 with
 * an exception.  Stopped streams are appended to r->errors. */
int tg_recorder_disable(struct tg_recorder_object *self);

/* Decide r->default_path from R's configuration (enable, after the derived
 * fields and accounting are set). */
void tg_event_path_choose(struct tg_recorder *r);

/* Profile function (PyEval_SetProfile); OBJ is the recorder object. */
int tg_profile(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg);

#if TG_HAVE_MONITORING
/* sys.monitoring event WHAT (a PyTrace_* value) in CODE at OFFSET (an int);
 * CALLABLE and ARG0 for C events, else NULL.  Never raises. */
int tg_monitor_event(struct tg_recorder_object *obj, int what, PyObject *code,
                     PyObject *offset, PyObject *callable, PyObject *arg0);
/* Bytes the allocator is asked for by PyLong_FromSsize_t(1000), as the hooks
 * will see it (0 if none).  GIL held, hooks not installed yet. */
int64_t tg_offset_int_size(void);
#endif
/* Start or stop delivering sys.monitoring events to the recorder (monitor.c);
 * install returns 0, or -1 with an exception (nothing installed). */
int tg_monitor_install(struct tg_recorder_object *self);
void tg_monitor_uninstall(struct tg_recorder_object *self);

/* Create the calling thread's state, named NAME (NAME_LEN bytes of UTF-8) or,
 * if NAME is NULL, after threading._active.  Needs the GIL.  Returns NULL on
 * failure (no exception). */
struct tg_thread *tg_thread_attach(struct tg_recorder_object *self, const char *name,
                                   size_t name_len);
/* The calling thread ends: flush, close and free its state.  GIL held. */
void tg_thread_detach(struct tg_recorder_object *self);

/* Internal helpers shared by recorder.c and lifecycle.c (GIL held). */
int tg_recorder_module_init_code_index(void);
/* Whether tg_frame_code reads the calling frame's code as PyFrame_GetCode
 * does: 0, or -1 with ImportError set. */
int tg_frame_code_check(void);
void tg_note_writer_error(struct tg_recorder *r, struct tg_writer *w);
int tg_thread_open_files(struct tg_recorder *r, struct tg_thread *t, struct tg_thread_log *log);
void tg_thread_close(struct tg_recorder *r, struct tg_thread *t);
void tg_thread_free(struct tg_thread *t);

/* Install/remove the thread-start wrappers (threads.c). */
int tg_threads_module_init(void);
int tg_threads_wrap(struct tg_recorder_object *self);
void tg_threads_unwrap(struct tg_recorder_object *self);

/* Install the profile function on every existing thread, or remove it. */
void tg_profile_all_threads(struct tg_recorder_object *self, int install);

/* Flusher thread. */
int tg_flusher_start(struct tg_recorder *r);
void tg_flusher_stop(struct tg_recorder *r);

/* Fork (called from Python os.register_at_fork hooks, GIL held). */
void tg_fork_child_stop(struct tg_recorder_object *self);
int tg_fork_child_continue(struct tg_recorder_object *self, const char *outdir);

#pragma GCC visibility pop

#endif /* TG_RECORDER_H */
