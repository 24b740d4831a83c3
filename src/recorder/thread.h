/*
 * thread.h - the thread state: one struct tg_thread per profiled thread, and the
 * thread table that lists them (live, retired) with the run's thread log.
 *
 * Plain C (thread.c links alone with writer.c and names.c:
 * tests/c/test_thread_table.c).  What needs Python - a thread's name from
 * `threading`, stream_factory's files, reporting stopped streams, the
 * thread-local of the calling thread - is the binding side, thread_py.c, which
 * attaches and detaches threads through the verbs below.
 *
 * A state's life, one verb each:
 *   tg_thread_new            create it (its writers closed, the table's kick set)
 *   tg_thread_table_log_add  give it a unique file base name in the run's log
 *   tg_thread_table_add      list it: the flusher and fork can now reach it
 *   tg_thread_close_writers  flush, report and release its files
 *   tg_thread_table_end      its thread ended: unlist it, settle its counts and
 *                            hand it to the flusher (the ended list), which
 *                            writes and closes its files (take_ended) and
 *                            puts it on the closed list (closed_add), from
 *                            which a GIL holder reports and frees it
 *                            (take_closed); nobody waits for a write ...
 *   tg_thread_table_remove   ... or unlist it, once no flusher pass uses it
 *   tg_thread_table_settle   add its counts to the run's
 *   tg_thread_table_retire   keep it (closed, settled) on the retired list
 *                            (disable())
 *   tg_thread_table_reap_child  in a forked child: free every state but one
 *   tg_thread_free           free it (the release sequence, written once)
 */
#ifndef TG_THREAD_H
#define TG_THREAD_H

#include "recfmt.h"
#include "writer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

/* One open recorded call. */
struct tg_agg_thread;  /* aggregate.h */

struct tg_frame_entry {
    uintptr_t key;   /* frame address; | 1 for a C call made from that frame */
    int64_t start;   /* memory reading at the call */
    int64_t cap_line;  /* capture: the CALL's line (the RETURN's reference), or
                        * TG_CAP_NOT_WRITTEN when the CALL was dropped;
                        * aggregate: the call path's node (aggregate.h) */
    int64_t agg_us;    /* aggregate: the time of the call (us) */
};

/* tg_frame_entry.cap_line of a call whose CALL record is not in the capture. */
#define TG_CAP_NOT_WRITTEN INT64_MIN

/*
 * A profiled thread.  Created by its own thread (tg_thread_attach, thread_py.c),
 * owned by the recorder's thread table; freed by its thread when it ends through
 * our thread wrapper, otherwise put on the retired list by disable() and freed
 * at the next enable() (a raw-domain hook racing with disable never touches it:
 * the hooks only use thread-locals, but the callback might still hold it).
 */
struct tg_thread {
    struct tg_thread *next;        /* live or retired list link; table lock (live) */
    unsigned pins;                 /* flusher passes using it unlocked
                                    * (tg_thread_table_each); table lock */
    uint64_t gen;                  /* run generation; immutable */
    struct tg_writer mem;          /* producer: this thread; see writer.h */
    struct tg_writer stack;        /* producer: this thread; see writer.h */
    struct tg_writer capw;         /* capture events (chunk mode); as mem */
    uint32_t stream;               /* capture stream id; immutable */
    size_t log_idx;                /* its log entry's seq (runinfo.json's threads,
                                    * threads()'s and position()'s "index"); set
                                    * at attach, immutable after */
    int64_t cap_us;                /* time of the stream's last timed record (us);
                                    * owner only */
    uint64_t cap_calls, cap_returns;  /* capture records written; owner only */
    uint64_t cap_dropped;          /* capture records lost; owner only */
    int64_t cap_level0;            /* tg_tls.allocated - freed when its stream
                                    * began: LEVEL marks count from there;
                                    * owner only */
    int level_due;                 /* a LEVEL mark is to follow the record being
                                    * written (tg_cap_reserve_slow); owner only */
    int cap_level_on;              /* its stream takes LEVEL marks (the run's
                                    * level_marks, and not a greenlet's state nor a
                                    * thread with greenlets: they share the
                                    * thread's counters); owner only */
    uint64_t cap_drop_pending;     /* of those, not yet marked in the stream; owner */
    uint64_t cap_unwind_pending;   /* calls unwound whose UNWOUND event could not be
                                    * written yet (written after the DROPPED mark
                                    * cap_drop_pending forces); owner */
    _Atomic uint64_t dropped;      /* records lost (text lines and capture records):
                                    * owner stores, others read (as n_records) */
    _Atomic uint64_t unwound;      /* recorded calls whose return was never seen,
                                    * closed by an outer frame's return
                                    * (recorder.c tg_unwind_to); as dropped */
    _Atomic uint64_t displaced;    /* times another tool took this thread's profile
                                    * function (lifecycle.c tg_reclaim); as dropped */
    _Atomic uint64_t n_records;    /* .mem lines written; owner stores, others read
                                    * (relaxed: a plain load/store, no lock prefix) */
    _Atomic uint64_t n_stack_records;  /* .stack lines written; as n_records */
    struct tg_frame_entry *frames; /* open recorded calls; owner only (GIL) */
    size_t depth;                  /* used entries of frames; owner only */
    size_t frames_cap;             /* owner only */
    int64_t correction;            /* bytes not charged (sleep/lock); owner only */
    int64_t curve_base;            /* memory="thread": its own traced bytes when
                                    * this run attached it (the counters are the
                                    * thread's for life, across enables): taken
                                    * from its curve's readings, which so start at
                                    * 0 at each enable (an attach); 0 in the other
                                    * modes.  Written by its own thread before its
                                    * first event, then owner only (read) */
    int64_t event_bias;            /* bytes the interpreter allocated to deliver the
                                    * current event (sys.monitoring's offset int):
                                    * left out of memory readings; owner only */
    struct tg_time_cache clock;    /* timestamps of this thread's lines; owner only */
    uintptr_t suppress_key;        /* frame of profiler plumbing running now: nothing
                                    * is recorded until it returns (0 = none); owner */
    int noted;                     /* a gc run or a mark named this thread: its log
                                    * entry is noted when it ends (thread_py.c
                                    * tg_thread_detach; not at once: a gc callback
                                    * may run where the table lock is held); owner */
    int held_by_other;             /* another tool's profile function holds this
                                    * thread (counted once in displaced); the GIL
                                    * (its own allocations, and another thread's
                                    * sweep: lifecycle.c tg_profile_reclaim) */
    size_t handoff_depth;          /* the recorded C call that changed this thread's
                                    * profile function while ours held it (the
                                    * entry at handoff_depth - 1, key handoff_key;
                                    * 0 = none): its return goes to the new
                                    * function, unseen (lifecycle.c tg_audit,
                                    * recorder.c tg_unwind_handoff); the GIL */
    uintptr_t handoff_key;
    int ending;                    /* its function returned under our thread
                                    * wrapper, which removes our profile function
                                    * (thread_start.c): a sweep leaves it alone;
                                    * the GIL */
    uintptr_t trig_key;            /* pending sleep trigger call (0 = none); owner */
    int64_t trig_before;           /* memory reading at its call; owner */
    int64_t trig_own_before;       /* own traced bytes at its call; owner */
    struct tg_agg_thread *agg;     /* aggregate: this thread's tree and curve, owned
                                    * by the run's list (aggregate.h); immutable
                                    * once the files are open */
    unsigned long ident;           /* threading ident; immutable */
    unsigned long native_id;       /* OS thread id; immutable */
    /* Sampled mode's memory curve (recorder.c tg_sampled_curve_point): the
     * points written and the last one's figure, so that the thread's end and
     * disable() add its last figure when it moved.  The GIL (points are
     * written with it, by the thread or by disable()). */
    uint64_t curve_points;
    int64_t curve_last;
    /* Greenlets (greenlet.c): a greenlet that runs in a thread gets a state of
     * its own, its stack and its counters, and the thread's own state lists
     * them.  All owner only (the GIL: its thread's switches, and fork). */
    struct tg_thread *glet_root;   /* a greenlet's state: its thread's own state;
                                    * NULL for a thread's own */
    uintptr_t glet_key;            /* a greenlet's state: the greenlet's address */
    struct tg_glet_slot *glets;    /* a thread's own state: its greenlets' states,
                                    * open addressing by key (0: free); NULL: none */
    size_t glets_mask, n_glets;
    int64_t glet_allocated;        /* tg_tls.allocated and freed while switched out */
    int64_t glet_freed;
    int64_t glet_out;              /* memory reading at the switch out (process and
                                    * rss modes: the others' growth goes to its
                                    * correction) */
    int glet_traced;               /* a thread's own state: greenlet's trace
                                    * function of this thread is the recorder's */
};

/* A greenlet's state in its thread's table (greenlet.c). */
struct tg_glet_slot {
    uintptr_t key;
    struct tg_thread *t;
};

/* A thread as listed in runinfo.json; the log lives for the whole run, less
 * the entries of an aggregate run's folded threads (tg_thread_table_log_fold). */
struct tg_thread_log {
    uint64_t seq;      /* the thread's number in the run, from 0 (its stream,
                        * runinfo.json's and position()'s "index"); immutable */
    char *name;        /* thread name, UTF-8 (may contain NUL); malloc'ed */
    size_t name_len;
    char *base;        /* file base name, unique in the run; malloc'ed */
    unsigned long ident;
    unsigned long native_id;
    int has_mem, has_stack, custom;  /* custom: stream_factory files */
    int attaching;     /* its thread is still opening its streams (a stream_factory
                        * is Python: the run may end meanwhile); not listed */
    int noted;         /* a gc run or a mark names it (gc.txt, marks.txt): a fold
                        * keeps its family (tg_thread_table_family_of) */
    int folded;        /* folded (aggregate) but kept for the accounting, which
                        * adds it up with its family's: base is then the family's
                        * name; not listed, counted in its family */
    int greenlet;      /* a greenlet's entry (greenlet.c): the lookups by thread
                        * (log_find, the logmap) pass over it, since the
                        * accounting names the thread, not its greenlets */
};

/* Ended threads of an aggregate run folded into one entry (aggregate.h): their
 * log entries are dropped, counted here under the entry's name. */
struct tg_thread_family {
    char *base;        /* the entry's name ("req-*"); malloc'ed */
    uint64_t threads;  /* threads folded into it */
};

/* A noted thread an aggregate run folded away: the family its gc runs and
 * marks are written under. */
struct tg_thread_noted {
    uint64_t seq;      /* its log entry's seq */
    size_t family;     /* index in the table's families */
};

/* The threads of a recorder: what disable(), the flusher and fork must reach. */
struct tg_thread_table {
    pthread_mutex_t lock;          /* guards live, ended, closed, log*, names,
                                    * done_*, pins; never held across I/O */
    struct tg_thread *live;        /* listed states of this run */
    struct tg_thread *retired;     /* closed states of past runs, freed at the next
                                    * run; the caller's exclusion (the GIL) */
    struct tg_thread *ended;       /* states whose thread ended, settled, their
                                    * files not yet written and closed: the
                                    * flusher's to take (tg_thread_table_end) */
    struct tg_thread *closed;      /* ended states the flusher wrote and closed:
                                    * a GIL holder's to report and free */
    size_t n_ending;               /* ended states not yet on the closed list
                                    * (files maybe open); with unpinned */
    struct tg_thread_log *log;     /* every thread of the run, in order seen,
                                    * less the folded ones */
    size_t n_log, log_cap;
    uint64_t n_seen;               /* the next entry's seq */
    uint64_t log_moves;            /* times entries were added or removed (a
                                    * tg_thread_logmap's check) */
    struct tg_thread_family *families;  /* folded threads by family (aggregate);
                                    * at most TG_AGG_FAMILIES + 1 */
    size_t n_families;
    struct tg_thread_noted *noted; /* folded threads that were noted, by seq once
                                    * noted_sorted (sorted when looked up) */
    size_t n_noted, noted_cap;
    int noted_sorted;
    struct tg_nameset *names;      /* the log's base names (names.h) */
    uint64_t done_records, done_stack_records;  /* counts of unlisted states */
    uint64_t done_dropped;
    uint64_t done_unwound, done_displaced;
    pthread_cond_t unpinned;       /* a state's pins fell to 0; with lock */
    struct tg_thread **pass;       /* tg_thread_table_each's pinned states; the one
                                    * flusher (allocated under lock) */
    size_t pass_cap;
    void (*kick)(void *ctx);       /* called when a thread ends; set at init */
    void (*full_kick)(void *ctx);  /* given to every new state's writers (writer.h):
                                    * kick unless its owner sets another after init */
    void *kick_ctx;
};

/* Make TT empty; a thread's end and new states' writers will call
 * KICK(KICK_CTX) (may be NULL; the writers' one may be changed after, in
 * full_kick). */
void tg_thread_table_init(struct tg_thread_table *tt, void (*kick)(void *ctx), void *kick_ctx);
/* Free every state (live and retired) and the log, and destroy the lock.  No
 * thread may use TT any more. */
void tg_thread_table_destroy(struct tg_thread_table *tt);

/* A new state for run GEN of the thread IDENT / NATIVE_ID, its writers closed
 * (open them, then list it).  NULL when out of memory. */
struct tg_thread *tg_thread_new(struct tg_thread_table *tt, uint64_t gen, unsigned long ident,
                                unsigned long native_id);
/* Release whatever T's writers still hold (nothing is written: a closed state
 * has nothing pending, a reaped one was dropped in the fork child) and free T.
 * T must be unreachable: unlisted, not retired. */
void tg_thread_free(struct tg_thread *t);
/* Flush T's writers; for each stopped one call NOTE(CTX, writer) (its err and
 * path still set; NOTE may be NULL); release them.  T must be unreachable by the
 * flusher (unlisted).  T's counts are final afterwards. */
void tg_thread_close_writers(struct tg_thread *t, void (*note)(void *ctx, struct tg_writer *w),
                             void *ctx);

/* Add a log entry for a thread called NAME (NAME_LEN bytes; taken over, freed
 * with the log) with a base name unique in the run.  Returns its index, or -1
 * when out of memory (NAME still the caller's).  Takes the lock.  Entries move
 * (realloc) only here. */
long tg_thread_table_log_add(struct tg_thread_table *tt, char *name, size_t name_len,
                             unsigned long ident, unsigned long native_id, int has_mem,
                             int has_stack, int custom);
/* Mark log entry IDX, still attaching, a greenlet's.  Takes the lock. */
void tg_thread_table_log_greenlet(struct tg_thread_table *tt, size_t idx);
/* The thread of log entry IDX has its streams: list it (runinfo.json, stats,
 * accounting names).  Takes the lock. */
void tg_thread_table_log_joined(struct tg_thread_table *tt, size_t idx);
/* The last log entry of thread IDENT, or NULL.  The caller holds the lock or is
 * the only thread (a fork child). */
const struct tg_thread_log *tg_thread_table_log_find(const struct tg_thread_table *tt,
                                                     unsigned long ident);
/* An aggregate run folded the ended thread of log entry SEQ into the entry
 * FAMILY (aggregate.h tg_agg_thread_end): count it in FAMILY's, and drop its
 * log entry and release its base name, or with KEEP (the accounting finds
 * threads in the log) mark it folded, its base now FAMILY.  Returns 0, or -1 when out of memory or not
 * found (the entry is then kept as it was).  Takes the lock.  Entries move
 * (memmove) here: only under the GIL, never while a thread attaches
 * (thread_py.c reads its entry by index until it is listed).  On 0, *IDENT
 * and *NATIVE_ID (unless NULL) are the folded thread's (the accounting recycles its nodes,
 * acct_recycle.h). */
int tg_thread_table_log_fold(struct tg_thread_table *tt, uint64_t seq, const char *family,
                             int keep, unsigned long *ident, unsigned long *native_id);
/* The log entry of SEQ, or NULL (folded away, or not of this run): a binary
 * search (thread_lookup.c).  The caller holds the lock. */
struct tg_thread_log *tg_thread_table_log_seq_unlocked(struct tg_thread_table *tt,
                                                       uint64_t seq);

/* The log's entries by thread, for a pass naming many threads (the
 * accounting's): built once in O(entries) under the lock, then each lookup
 * is O(1) where a walk of the log per thread made the pass quadratic. */
struct tg_thread_logmap {
    size_t *slots;     /* log index + 1, open addressing; NULL: no map */
    size_t mask;
    uint64_t moves;    /* the log's log_moves when built */
};
/* Map TT's log (the lock held).  0, or -1 when out of memory: M is then
 * empty and tg_thread_logmap_find walks the log as before, as it does once
 * the log changed (an entry added or removed: the lock was let go between
 * lookups). */
int tg_thread_logmap_build(struct tg_thread_logmap *m, const struct tg_thread_table *tt);
/* The last entry of thread IDENT / NATIVE_ID that is not attaching, or NULL
 * (as a walk of the log from its end finds it).  The lock held. */
const struct tg_thread_log *tg_thread_logmap_find(const struct tg_thread_logmap *m,
                                                  const struct tg_thread_table *tt,
                                                  unsigned long ident,
                                                  unsigned long native_id);
/* Free M's map. */
void tg_thread_logmap_release(struct tg_thread_logmap *m);

/* A gc run or a mark names the thread of log entry SEQ (gc.txt, marks.txt):
 * if an aggregate run folds it, its family is kept for
 * tg_thread_table_family_of (the others' are not: the memory stays bounded
 * by the threads noted).  Takes the lock: never from a gc callback or a
 * finalizer (the binding makes Python objects with the lock held, which may
 * collect), hence struct tg_thread's noted. */
void tg_thread_table_log_note(struct tg_thread_table *tt, uint64_t seq);
/* The family (its entry's name, valid while the lock is held) that an
 * aggregate run folded the noted thread SEQ into, or NULL when SEQ was not
 * folded or not noted.  The caller holds the lock. */
const char *tg_thread_table_family_of_unlocked(struct tg_thread_table *tt, uint64_t seq);

/* Forget the log (names, base names) and the done counts: a new run.  A thread
 * still attaching to the previous run (in its stream_factory call) holds only
 * an index into this log: it checks the run's generation before using it again
 * (thread_py.c tg_run_still) and gives the run up. */
void tg_thread_table_clear_log(struct tg_thread_table *tt);

/* List T (live). */
void tg_thread_table_add(struct tg_thread_table *tt, struct tg_thread *t);
/* Unlist T if it is listed; returns 1 if it was.  Returns once no
 * tg_thread_table_each call uses T (T can then be closed and freed). */
int tg_thread_table_remove(struct tg_thread_table *tt, struct tg_thread *t);
/* T's thread ended (no record is appended to T any more; its owner-only
 * streams already closed): unlist T, settle its counts and put it on the
 * ended list for the flusher, then call the table's kick.  Never waits: a
 * flusher pass may be inside a write of T (it is pinned); the flusher takes
 * the ended list only between passes. */
void tg_thread_table_end(struct tg_thread_table *tt, struct tg_thread *t);
/* Take the ended list (linked by next), once no tg_thread_table_each call uses
 * any of them (the flusher, between its passes; or with the flusher stopped).
 * The caller writes and closes their files, then gives them to closed_add. */
struct tg_thread *tg_thread_table_take_ended(struct tg_thread_table *tt);
/* Put LIST (linked by next; written and closed) on the closed list. */
void tg_thread_table_closed_add(struct tg_thread_table *tt, struct tg_thread *list);
/* Wait until every state ended so far is on the closed list (its files
 * written and closed); the caller has the flusher running, or makes the
 * closes itself.  Not with the GIL held (tests: _test_wait_ended). */
void tg_thread_table_wait_ended(struct tg_thread_table *tt);
/* Take the closed list (linked by next): report their stopped writers, free them. */
struct tg_thread *tg_thread_table_take_closed(struct tg_thread_table *tt);
/* Unlist every live state and return them as a list (linked by next), once no
 * tg_thread_table_each call uses any of them. */
struct tg_thread *tg_thread_table_take_live(struct tg_thread_table *tt);
/*
 * Call FN(T, CTX) for every listed state T, the lock NOT held during the calls
 * (they write files: a slow disk must not stall thread start, thread end of
 * other threads, or fork, which take the lock with the GIL held).  Each state
 * is pinned from the list walk until its call returns, so that remove and
 * take_live wait for it and it is neither closed nor freed meanwhile.  One
 * caller at a time (the flusher).  Returns 0, or -1 when out of memory (no
 * call made).
 */
int tg_thread_table_each(struct tg_thread_table *tt,
                         void (*fn)(struct tg_thread *t, void *ctx), void *ctx);
/* Call FN(T, CTX) for every live state with the table's lock held: FN does
 * memory work alone (no I/O, no Python, no lock).  Any thread, any number at
 * once (tg_thread_table_each is the flusher's alone). */
void tg_thread_table_each_locked(struct tg_thread_table *tt,
                                 void (*fn)(struct tg_thread *t, void *ctx), void *ctx);
/* Add the counts of T (closed, unlisted) to the run's done counts. */
void tg_thread_table_settle(struct tg_thread_table *tt, struct tg_thread *t);
/* Keep T (closed, unlisted, settled) on the retired list. */
void tg_thread_table_retire(struct tg_thread_table *tt, struct tg_thread *t);
/* Free every retired state. */
void tg_thread_table_free_retired(struct tg_thread_table *tt);
/* In a forked child: free every live state except ME (the forking thread's, or
 * NULL) and every retired, ended and closed one; their writers must have been
 * dropped (tg_writer_drop_in_child).  A state the parent's flusher had taken
 * off the ended list is on none: never touched (leaked).  Returns ME unlisted,
 * or NULL. */
struct tg_thread *tg_thread_table_reap_child(struct tg_thread_table *tt, struct tg_thread *me);

/* The run's totals: done counts plus the live states' (read relaxed), and the
 * number of threads logged (folded ones included).  Takes the lock. */
void tg_thread_table_totals(struct tg_thread_table *tt, uint64_t *records,
                            uint64_t *stack_records, uint64_t *dropped, size_t *threads);

/* The run's losses other than dropped records (done counts plus the live
 * states'): calls unwound, takeovers of the profile function.  Takes the lock. */
void tg_thread_table_losses(struct tg_thread_table *tt, uint64_t *unwound,
                            uint64_t *displaced);

#pragma GCC visibility pop

#endif /* TG_THREAD_H */
