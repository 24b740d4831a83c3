/*
 * thread_start.h - the thread-start wrappers (thread_start.c): a thread started through
 * _thread / threading attaches to the recorder before its function runs.
 */
#ifndef TG_THREAD_START_H
#define TG_THREAD_START_H

#include "recorder.h"

#pragma GCC visibility push(hidden)

/* Install/remove the thread-start wrappers (thread_start.c). */
int tg_threads_module_init(void);
int tg_threads_wrap(struct tg_recorder_object *self);
void tg_threads_unwrap(struct tg_recorder_object *self);

#pragma GCC visibility pop

#endif /* TG_THREAD_START_H */
