/*
 * pprof.h - a run's allocations as a pprof profile: google/pprof's
 * proto/profile.proto, protobuf wire encoding, gzip-compressed as pprof files
 * are on disk (docs/formats.md "pprof and speedscope").
 *
 * Sample types alloc_objects/count, alloc_space/bytes, inuse_objects/count,
 * inuse_space/bytes (the last, inuse_space, is what pprof shows by default); a
 * label "thread" with the thread's name on each sample; a Location per frame
 * with one Line (its Function and line number), a Function per name and file;
 * sample stacks leaf first.  No mappings or addresses: the frames are Python's.
 */
#ifndef TG_PPROF_H
#define TG_PPROF_H

#include <stddef.h>
#include <stdio.h>

#include "diag.h"
#include "xprof.h"

/*
 * Encodes X as a Profile message (uncompressed) into *BUF (malloc'ed, free
 * it), *LEN its size.  Returns 0 or -1 (out of memory, d->msg set).
 */
int tg_pprof_encode(const struct tg_xprof *x, unsigned char **buf, size_t *len,
		    struct tg_diag *d);

/*
 * Writes X to OUT as a gzip-compressed Profile.  Returns 0, or -1 with d->msg
 * set (out of memory, a write error).
 */
int tg_pprof_write(FILE *out, const struct tg_xprof *x, struct tg_diag *d);

#endif
