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
/* The calling thread ends: unlist, close, settle and free its state.  GIL held. */
void tg_thread_detach(struct tg_recorder_object *self);
/* Close T's files (stopped streams noted in r->errors) and deposit its capture
 * counts.  GIL held, T unlisted. */
void tg_thread_close(struct tg_recorder *r, struct tg_thread *t);
/* Close every live state and move it to the retired list (disable()).  GIL
 * held, flusher stopped. */
void tg_thread_retire_all(struct tg_recorder *r);
/* Append "PATH: reason" for a stopped writer W to r->errors (once).  GIL held. */
void tg_note_writer_error(struct tg_recorder *r, struct tg_writer *w);

#pragma GCC visibility pop

#endif /* TG_THREAD_PY_H */
