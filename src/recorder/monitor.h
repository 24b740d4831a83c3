/*
 * monitor.h - the sys.monitoring event source (monitor.c, CPython 3.12+).
 */
#ifndef TG_MONITOR_H
#define TG_MONITOR_H

#include "recorder.h"

#pragma GCC visibility push(hidden)

#if TG_HAVE_MONITORING
/* Bytes the allocator is asked for by PyLong_FromSsize_t(1000), as the hooks
 * will see it (0 if none).  GIL held, hooks not installed yet. */
int64_t tg_offset_int_size(void);
#endif
/* Start or stop delivering sys.monitoring events to the recorder (monitor.c);
 * install returns 0, or -1 with an exception (nothing installed), -2 (with a
 * RuntimeError) when both tool ids threadgraph may use are taken. */
int tg_monitor_install(struct tg_recorder_object *self);  /* 3.8-3.11: -1, ValueError */
void tg_monitor_uninstall(struct tg_recorder_object *self);

#pragma GCC visibility pop

#endif /* TG_MONITOR_H */
