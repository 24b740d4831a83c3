/*
 * recorder.h - a run's configuration and state (struct tg_recorder, read by
 * every layer above thread state) and the events layer's entry points
 * (recorder.c).  Each other layer declares its own functions: lifecycle.h,
 * monitor.h, thread_start.h, thread.h / thread_py.h, writer.h, ...
 *
 * One struct tg_recorder lives inside each Python Recorder object (module.c); at
 * most one is active per process (tg_active).  Per-thread state (struct
 * tg_thread, thread.h) is created by the thread itself (thread_py.c), reached
 * through the thread-local tg_tls.thread, and listed in the recorder's thread
 * table so that disable(), the flusher and fork can reach every thread's buffers.
 */
#ifndef TG_RECORDER_H
#define TG_RECORDER_H

#include "tg_compat.h"
#include "clock.h"
#include "writer.h"
#include "capture_write.h"
#include "thread.h"
#include "aggregate.h"

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

/* r->default_path: the general copy of the event path, the default
 * configuration's, or the default configuration's with the clock's beat
 * (time_resolution="ms": its fast paths keep a beat's reading, clock.h; the
 * default's read the TSC with no test of the beat). */
#define TG_PATH_GENERAL 0
#define TG_PATH_DEFAULT 1
#define TG_PATH_DEFAULT_BEAT 2

struct tg_recorder {
    /* --- configuration: written by enable() with the GIL, then read-only --- */
    int active;                /* GIL */
    uint64_t gen;              /* run generation; GIL */
    uint64_t mon_gen;          /* gen while active, else 0: the monitoring fast
                                * path's one test of both (recorder.c); GIL */
    uint64_t ended_gen;        /* generation of the last run disable() ended
                                  (or began ending): a thread attaching across
                                  a Python call checks it; GIL */
    int record_python;         /* record Python calls */
    int record_c;              /* record C calls */
    int track_memory;          /* write .mem */
    int track_stack;           /* write .stack */
    int track_sleeps;          /* sleep/lock correction (process, rss modes) */
    int timestamps;            /* TIME# prefixes */
    int time_beat;             /* time_resolution="ms": the clock's beat
                                * runs while timed records are written */
    int sampled;               /* mode="sampled": no profile function nor
                                * sys.monitoring callbacks (sampled.h) */
    int aggregate;             /* aggregate=True: call paths and curves rolled up
                                * per thread into aggregate.tga (aggregate.h),
                                * no record per call */
    int fmt_text;              /* write the text files (.mem, .stack, process.mem) */
    int fmt_binary;            /* write capture.tg */
    int cap_compress;          /* zstd-compress its chunks (compress=True) */
    unsigned long long cap_max_size; /* max_size: rotating segments (0: capture.tg) */
    int text_mem, text_stack;  /* fmt_text && track_memory / track_stack */
    int cap_counts_mem, cap_counts_stack;  /* !fmt_text && track_memory / track_stack:
                                            * capture records count as .mem / .stack
                                            * lines in stats() */
    int default_path;          /* TG_PATH_*: the default configuration: tg_profile runs its
                                * copy without configuration tests (recorder.c,
                                * tg_event_path_choose); GIL.  Cleared with
                                * active, so that the fast path (tg_profile_fast)
                                * need not test active: from enable()'s choice
                                * to active, no thread's state is of the new
                                * generation yet */
    int time_calls;            /* read the clock at recorded calls */
    int time_returns;          /* read the clock at recorded returns */
    int memory_mode;           /* enum tg_memory_mode */
    int backend;               /* enum tg_backend, as resolved by enable() */
    int backend_auto;          /* backend chosen by default: may fall back */
    int mon_tool;              /* sys.monitoring tool id in use, or -1; GIL */
    int mon_tool_run;          /* the tool id of the current or last run, or -1
                                * (stats()); GIL */
    int mon_taken;             /* backend auto fell back to setprofile because
                                * both tool ids we may use were taken; GIL */
    PyObject *mon_missing;     /* sys.monitoring.MISSING (strong) or NULL; GIL */
    int mon_aside;             /* the program took the last tool id we may use:
                                * no events until it frees one (monitor.c); GIL */
    uint64_t mon_yielded;      /* times that happened (stats() "displaced"); GIL */
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
    struct tg_thread_table table;      /* states, retired states, the run's log
                                        * (thread.h); its own lock */
    _Atomic uint64_t samples_dropped;  /* process samples lost (the threads' are
                                        * the table's); written by the flusher (or
                                        * with it stopped), read by stats() */
    _Atomic uint64_t samples_taken;    /* process samples read (tg_process_sample);
                                        * as samples_dropped */
    unsigned long dummy_counter;       /* for Dummy-N; GIL */
    PyObject *errors;                  /* list of str: stopped streams; GIL */

    /* --- process.mem --- */
    /* The sample's producer is the flusher (tg_process_sample), or enable() /
     * disable() / a forked child with the flusher stopped: the event path only
     * counts down and counts the requests (docs/api.md "process.mem"). */
    struct tg_writer process_w;        /* producer: the sample's (above) */
    struct tg_time_cache process_clock;  /* process_w's timestamps; the producer */
    unsigned long sample_countdown;    /* profile events until the next process.mem
                                        * request (0 at enable without sampling:
                                        * wraps, see tg_sample_request); GIL (every
                                        * event holds it, so a plain counter: a
                                        * locked add here cost more than the rest
                                        * of the profile function) */
    _Atomic uint64_t sample_requests;  /* process.mem requests made (one per
                                        * sample_every events): raised by the event
                                        * path under the GIL (a relaxed load and
                                        * store, no locked add), read by the sample's
                                        * producer */
    uint64_t sample_requests_taken;    /* the requests already written; the
                                        * sample's producer */
    /* LEVEL marks (docs/formats.md): the thread whose event ends a countdown
     * writes its memory into its capture stream every TG_LEVEL_EVENTS
     * events (the countdown ends at the nearer of a request and a mark), so
     * that readers of held memory re-anchor there (frees by
     * the open calls' own code show in no RETURN until those return). */
#define TG_LEVEL_EVENTS 1000           /* profile events a mark, about */
    int level_marks;                   /* write them (binary capture, memory
                                        * thread, full mode); set at enable */
    unsigned long countdown_set;       /* sample_countdown's last start: the
                                        * events it counts; GIL */
    unsigned long sample_left;         /* events to the next process.mem request
                                        * as of that start; GIL */
    unsigned long level_left;          /* events to the next mark, likewise; GIL */

    /* --- capture.tg (fmt_binary) --- */
    struct tg_cap cap;                 /* the file; see capture_write.h */
    struct tg_cap_idtab cfunc_ids;     /* (PyMethodDef, owner) -> code id, each
                                        * owner referenced; GIL */
    struct tg_writer process_cap;      /* process samples (chunk mode); as process_w */
    int64_t process_cap_us;            /* last sample's time (us); the producer */
    int64_t process_cap_bytes;         /* last sample's bytes; the producer */

    /* --- aggregate.tga (aggregate) --- */
    struct tg_agg agg;                 /* trees, curves, names; see aggregate.h */
    struct tg_cap_idtab agg_cfunc_ids; /* (PyMethodDef, owner) -> function id, each
                                        * owner referenced; GIL */

    /* --- background flusher (a pthread, not a Python thread) --- */
    pthread_mutex_t flusher_lock;      /* guards flusher_stop, flusher_kicked,
                                        * flusher_busy, flusher_paused */
    pthread_cond_t flusher_cond;
    int flusher_stop;
    int flusher_kicked;                /* a writer handed off a full buffer */
    int flusher_busy;                  /* working without flusher_lock (writing) */
    int flusher_paused;                /* wait after the work in hand: a fork */
    _Atomic int flusher_polling;       /* 1: the flusher looks at the handed-off
                                        * buffers again within TG_QUEUE_POLL_NS,
                                        * unkicked (tg_flusher_kick_full); written
                                        * by the flusher (and its starter), read by
                                        * writers' kicks; seq_cst */
    int flusher_running;               /* GIL */
    pthread_t flusher;

    int fork_child_pending;            /* set by the atfork child handler */
};

struct tg_recorder_object {
    PyObject_HEAD
    struct tg_recorder r;
};

#include "thread_py.h"

/* The active recorder object, or NULL; GIL (read by the atfork handlers, which
 * run in the forking thread while it holds the GIL). */
extern struct tg_recorder_object *tg_active;



/* Decide r->default_path from R's configuration (enable, after the derived
 * fields and accounting are set). */
void tg_event_path_choose(struct tg_recorder *r);

/* Take the pending process.mem requests: how many were made since the last
 * take (each time the countdown reached 0, in any thread).  The sample's
 * producer only. */
uint64_t tg_process_sample_wanted(struct tg_recorder *r);
/* One process.mem reading for N requests (N >= 1): the time now, then the
 * resident set size read from /proc/self/statm, written N times (one line, and
 * one capture sample, per request) to process_w and process_cap.  The sample's
 * producer only (the flusher; or with the flusher stopped), no GIL needed. */
void tg_process_sample(struct tg_recorder *r, uint64_t n);

/* Our profile function is T's again after another tool's, or none, held it
 * (lifecycle.c): the C call that handed it over (T->handoff_depth) returned
 * unseen; close it, and any call above it, as unwound.  T's own thread, GIL. */
void tg_unwind_handoff(struct tg_recorder *r, struct tg_thread *t);

/* Profile function (PyEval_SetProfile); OBJ is the recorder object. */
int tg_profile(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg);

/* One-time set up of the code-object cache at module import (GIL held). */
int tg_recorder_module_init_code_index(void);
/* Whether tg_frame_code reads the calling frame's code as PyFrame_GetCode
 * does: 0, or -1 with ImportError set. */
int tg_frame_code_check(void);

/* Whether tg_stack_codes (tg_compat.h) finds the calling frame's code as
 * PyEval_GetFrame does: 0, or -1 with ImportError set (tg_frame_code_check
 * calls it). */
int tg_stack_codes_check(void);

/* What a sampled stack (sampled.c) records for a frame running CODE under R's
 * configuration (GIL, the exception in flight saved): 1 with the call as the
 * profile function records it (escaped FILE and FUNC, in the code object's
 * cache entry, and its first LINE); 0 when R's filter leaves it out; -1 for
 * the profiler's own plumbing (it and its callees are hidden); -2 when its
 * cache entry cannot be built. */
int tg_code_site(struct tg_recorder *r, PyCodeObject *code, const char **file, size_t *file_len,
                 long *line, const char **func, size_t *func_len);

/* A point of the calling thread's memory curve in a sampled run: BYTES, its
 * memory now (allocated - freed since the run's start), as a .mem line
 * (tg_format.h TG_CURVE_FILE).  GIL held, TG_BUSY_TRACER set; a thread not yet
 * attached writes none. */
void tg_sampled_curve_point(struct tg_recorder_object *obj, int64_t bytes);
/* Sampled mode: T's curve ends at its figure now (its requested less freed
 * bytes), a last point when that moved since its last one, so that a
 * thread's frees after its last sample show (the thread ending, or
 * disable() for the threads still running).  GIL held. */
void tg_sampled_curve_last(struct tg_recorder *r, struct tg_thread *t);
/* The calling thread's memory reading for R's mode (docs/api.md), T its
 * state: what a call's delta is taken from.  GIL held. */
int64_t tg_memory_reading(struct tg_recorder *r, struct tg_thread *t);

/* Calls of the LEN methods DEFS (the Recorder type's own) are plumbing, never
 * recorded.  Set once at module import, before any recorder is enabled. */
void tg_recorder_ignore_methods(PyMethodDef *defs, size_t len);



#pragma GCC visibility pop

#endif /* TG_RECORDER_H */
