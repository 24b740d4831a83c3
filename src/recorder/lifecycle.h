/*
 * lifecycle.h - enable/disable of a recorder, its background flusher and fork handling
 * (lifecycle.c); the module's one-time set up.
 */
#ifndef TG_LIFECYCLE_H
#define TG_LIFECYCLE_H

#include "recorder.h"

#pragma GCC visibility push(hidden)

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

/* Install the profile function on every existing thread, or remove it. */
void tg_profile_all_threads(struct tg_recorder_object *self, int install);
/* After another tool changed profile functions of threads other than its
 * own, without the audit event that tells each thread (yappi writes every
 * thread state directly): count the threads it holds in their `displaced`
 * and, with TAKE, put ours back on the thread states that have none.
 * 3.8-3.11, setprofile backend, recording; nothing otherwise.  GIL held, not
 * inside an allocation (the install raises the audit event). */
void tg_profile_reclaim(struct tg_recorder_object *self, int take);
/* Recorder.__call__: the recorder's object installed as a Python profile
 * function (sys.setprofile(sys.getprofile()) saved while the recorder held
 * the thread, given back outside spguard.c's wrapper, e.g. after disable()):
 * never an error, whatever the arguments.  On the calling thread, the
 * recording recorder's C function takes the Python trampoline's place (the
 * event of this call is not recorded); a recorder that no longer records
 * removes itself, leaving the thread with no profile function, as a program
 * that saved it before enable() would have.  Returns None.  GIL held. */
PyObject *tg_recorder_call(PyObject *self, PyObject *args, PyObject *kw);
/* The number of thread states with a profile function that is not the recorder's
 * (the program's own sys.setprofile): threadgraph attach refuses to replace it.
 * The GIL must be held. */
int tg_profile_others_count(void);

/* Flusher thread. */
int tg_flusher_start(struct tg_recorder *r);
/* Wake RECORDER's flusher to write handed-off buffers and close ended
 * threads' files; nothing if it is not running.  GIL held. */
void tg_flusher_kick(void *recorder);
/* A writer's kick (writer.h), on a handoff: tg_flusher_kick, unless the
 * flusher is polling the queue anyway (it found buffers at its last look and
 * looks again within TG_QUEUE_POLL_NS) and fewer than TG_KICK_QUEUED buffers
 * wait.  GIL held. */
void tg_flusher_kick_full(void *recorder);
void tg_flusher_stop(struct tg_recorder *r);
/* Before fork() (os.register_at_fork, GIL held): the flusher is stopped if it
 * is idle (no other thread at the fork); if it is writing, which may take as
 * long as a blocked sink wants, it is paused instead, not waited for: it
 * finishes that work in the parent and waits.  tg_flusher_fork_parent resumes
 * (or restarts) it after fork(); the child has no flusher. */
void tg_flusher_fork_prepare(struct tg_recorder *r);
/* Returns 0 or -errno (no flusher: buffers are written when they fill and at
 * disable). */
int tg_flusher_fork_parent(struct tg_recorder *r);

/* Fork (called from Python os.register_at_fork hooks, GIL held). */
void tg_fork_child_stop(struct tg_recorder_object *self);
int tg_fork_child_continue(struct tg_recorder_object *self, const char *outdir);

#pragma GCC visibility pop

#endif /* TG_LIFECYCLE_H */
