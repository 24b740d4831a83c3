/*
 * thread_py.h - the thread state's binding side (thread_py.c): attaching the
 * calling thread, detaching it, closing and retiring states for the recorder.
 * The plain-C state and table are thread.h.  Included by recorder.h (the hot
 * path attaches a thread on its first event).
 */
#ifndef TG_THREAD_PY_H
#define TG_THREAD_PY_H

#include "thread.h"

#include <stddef.h>

#pragma GCC visibility push(hidden)

struct tg_recorder;
struct tg_recorder_object;

/* Create, name, open and list the calling thread's state, named NAME (NAME_LEN
 * bytes of UTF-8) or, if NAME is NULL, after threading._active; it becomes
 * tg_tls.thread.  Needs the GIL.  Returns NULL on failure (no exception). */
struct tg_thread *tg_thread_attach(struct tg_recorder_object *self, const char *name,
                                   size_t name_len);
/* A state for a greenlet of the calling thread (greenlet.c), named NAME: as
 * tg_thread_attach, its log entry passed over by the lookups by thread; it
 * becomes tg_tls.thread. */
struct tg_thread *tg_thread_attach_greenlet(struct tg_recorder_object *self, const char *name,
                                            size_t name_len);
/* End T, a state of the calling thread no event appends to any more (its
 * thread's, or a greenlet's that ended): as tg_thread_detach does, without
 * touching tg_tls.  GIL held, TG_BUSY_TRACER set by the caller. */
void tg_thread_end_state(struct tg_recorder_object *self, struct tg_thread *t);
/* The calling thread ends: its Python streams closed, its state unlisted,
 * settled and handed to the flusher, which writes and closes the rest of its
 * files (tg_thread_close_ended); states the flusher closed before are reported
 * and freed.  GIL held; never waits for a write. */
void tg_thread_detach(struct tg_recorder_object *self);
/* The flusher's part of a thread's end: for every state on the table's ended
 * list, write and close its files and queue its capture stream's end, then
 * move it to the closed list (reported and freed by the next detach or
 * disable()).  No GIL needed; not with the GIL held (it writes). */
void tg_thread_close_ended(struct tg_recorder *r);
/* Close every live state (stopped streams noted in r->errors, capture counts
 * deposited) and move it to the retired list, and close the ended ones
 * (disable(); a failed enable()).  GIL held, released across the writes if
 * RELEASE_GIL (disable(): a failed enable() keeps it, its run half made, and
 * has little to write); flusher stopped. */
void tg_thread_retire_all(struct tg_recorder *r, int release_gil);
/* Append "PATH: reason" for a stopped writer W to r->errors (once).  GIL held. */
void tg_note_writer_error(struct tg_recorder *r, struct tg_writer *w);
/* Append "PATH[/LEAF]: strerror(ERR) (errno ERR)" to r->errors (once), PATH
 * decoded as OSError's filename is (the file system encoding: a path that is
 * not UTF-8 keeps its bytes as surrogate escapes, os.fsencode() gives it
 * back); LEAF is ASCII or NULL, PATH NULL prints "?".  GIL held; clears the
 * error indicator (a failure to append loses the note, never raises). */
void tg_note_path_error(struct tg_recorder *r, const char *path, const char *leaf, int err);

#pragma GCC visibility pop

#endif /* TG_THREAD_PY_H */
