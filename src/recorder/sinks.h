/*
 * sinks.h - where a writer's bytes go when it has no descriptor of its own
 * (writer.h, struct tg_writer_sink): a stream of the binary capture, or a
 * Python file object from stream_factory.
 */
#ifndef TG_SINKS_H
#define TG_SINKS_H

#include "tg_compat.h"
#include "capture_write.h"
#include "writer.h"

#pragma GCC visibility push(hidden)

/* Open W so that every flush is one chunk KIND of STREAM in CAP (which must
 * outlive W's last flush); LABEL names it in messages.  Flushed by any consumer,
 * the flusher included.  Returns 0 or -ENOMEM. */
int tg_sink_open_chunks(struct tg_writer *w, struct tg_cap *cap, int kind, uint32_t stream,
                        const char *label);
/* Open W onto the Python file object FILE (a new reference is taken): str
 * lines, or bytes once FILE rejects str; flushed only by its owner with the GIL;
 * released with file.flush().  Returns 0 or -ENOMEM. */
int tg_sink_open_pyfile(struct tg_writer *w, PyObject *file, const char *label);

#pragma GCC visibility pop

#endif /* TG_SINKS_H */
