/*
 * pprof.c - writing a pprof profile (pprof.h): the few parts of the protobuf
 * wire format profile.proto needs (varints, length-delimited fields, packed
 * repeated integers), then gzip through zlib.
 *
 * Field numbers, from google/pprof proto/profile.proto:
 *   Profile: sample_type 1, sample 2, location 4, function 5, string_table 6,
 *            comment 13
 *   ValueType: type 1, unit 2          Sample: location_id 1, value 2, label 3
 *   Label: key 1, str 2                Location: id 1, line 4
 *   Line: function_id 1, line 2        Function: id 1, name 2, system_name 3,
 *                                                filename 4
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "pprof.h"

enum { PB_VARINT = 0, PB_LEN = 2 };

/* A growing byte buffer; oom is set (and writes stop) when memory runs out. */
struct pb {
	unsigned char *p;
	size_t n, cap;
	int oom;
};

static void pb_raw(struct pb *b, const void *s, size_t len)
{
	if (b->oom)
		return;
	if (b->n + len > b->cap) {
		size_t nc = b->cap ? b->cap : 256;
		unsigned char *np;
		while (nc < b->n + len)
			nc *= 2;
		if (!(np = realloc(b->p, nc))) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = nc;
	}
	memcpy(b->p + b->n, s, len);
	b->n += len;
}

static void pb_varint(struct pb *b, uint64_t v)
{
	unsigned char t[10];
	size_t n = 0;

	do {
		t[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	pb_raw(b, t, n);
}

static void pb_key(struct pb *b, unsigned field, unsigned wire)
{
	pb_varint(b, (uint64_t)field << 3 | wire);
}

/* An integer field (int64 or uint64: a negative int64 is its two's complement,
 * ten bytes); zero, the default, is left out as proto3 does. */
static void pb_int(struct pb *b, unsigned field, uint64_t v)
{
	if (!v)
		return;
	pb_key(b, field, PB_VARINT);
	pb_varint(b, v);
}

/* A length-delimited field holding SUB's bytes (a message, packed integers). */
static void pb_sub(struct pb *b, unsigned field, const struct pb *sub)
{
	if (sub->oom)
		b->oom = 1;
	pb_key(b, field, PB_LEN);
	pb_varint(b, sub->n);
	pb_raw(b, sub->p, sub->n);
}

static void pb_string(struct pb *b, unsigned field, const char *s)
{
	size_t len = strlen(s);
	pb_key(b, field, PB_LEN);
	pb_varint(b, len);
	pb_raw(b, s, len);
}

/* Strings written before the xprof's own: string_table[1 + i]. */
enum { FIX_THREAD = TG_XV_N * 2, FIX_COMMENT1, FIX_COMMENT2, FIX_N };

int tg_pprof_encode(const struct tg_xprof *x, unsigned char **buf, size_t *len,
		    struct tg_diag *d)
{
	struct pb out = { 0 }, m = { 0 }, inner = { 0 };
	const char *fix[FIX_N];
	char *c1 = NULL;
	size_t i, k;
	int ret = -1;

/* the string_table index of the xprof's string ID */
#define SID(id) ((id) ? (uint64_t)(id) + FIX_N : 0)
	for (i = 0; i < TG_XV_N; i++) {
		fix[2 * i] = tg_xval_names[i];
		fix[2 * i + 1] = tg_xval_units[i];
	}
	fix[FIX_THREAD] = "thread";
	if (asprintf(&c1, "threadgraph export of %s%s", x->source ? x->source : "a run",
		     x->sampled ? " (sampled: the values are estimates)" : "") < 0) {
		c1 = NULL;
		goto oom;
	}
	fix[FIX_COMMENT1] = c1;
	fix[FIX_COMMENT2] = x->from == TG_XPROF_ACCOUNTING
		? "from the allocation accounting: alloc_* allocated until the snapshot was "
		  "written (over the run for the final one, up to the peak for a peak one), "
		  "inuse_* still live then, per calling context"
		: "without accounting, from the recorded per-call deltas: *_space is the sum "
		  "of the positive own deltas of a context's calls, *_objects the number of "
		  "those calls; alloc and inuse are the same";

	for (i = 0; i < TG_XV_N; i++) {  /* sample_type */
		m.n = 0;
		pb_int(&m, 1, 1 + 2 * i);
		pb_int(&m, 2, 1 + 2 * i + 1);
		pb_sub(&out, 1, &m);
	}
	for (i = 0; i < x->n_samples; i++) {  /* sample */
		const struct tg_xsample *s = &x->samples[i];
		m.n = 0;
		inner.n = 0;
		for (k = 0; k < s->depth; k++)
			pb_varint(&inner, x->stack_ids[s->stack + k] + 1);
		pb_sub(&m, 1, &inner);
		inner.n = 0;
		for (k = 0; k < TG_XV_N; k++)
			pb_varint(&inner, (uint64_t)s->v[k]);
		pb_sub(&m, 2, &inner);
		inner.n = 0;
		pb_int(&inner, 1, 1 + FIX_THREAD);
		pb_int(&inner, 2, SID(s->thread));
		pb_sub(&m, 3, &inner);
		pb_sub(&out, 2, &m);
		if (out.oom)
			goto oom;
	}
	for (i = 0; i < x->n_frames; i++) {  /* location */
		m.n = 0;
		inner.n = 0;
		pb_int(&m, 1, i + 1);
		pb_int(&inner, 1, x->frames[i].func + 1);
		pb_int(&inner, 2, (uint64_t)x->frames[i].line);
		pb_sub(&m, 4, &inner);
		pb_sub(&out, 4, &m);
	}
	for (i = 0; i < x->n_funcs; i++) {  /* function */
		m.n = 0;
		pb_int(&m, 1, i + 1);
		pb_int(&m, 2, SID(x->funcs[i].name));
		pb_int(&m, 3, SID(x->funcs[i].name));
		pb_int(&m, 4, SID(x->funcs[i].file));
		pb_sub(&out, 5, &m);
	}
	pb_string(&out, 6, "");  /* string_table */
	for (i = 0; i < FIX_N; i++)
		pb_string(&out, 6, fix[i]);
	for (i = 1; i < x->n_strs; i++)
		pb_string(&out, 6, x->strs[i]);
	inner.n = 0;  /* comment, packed as proto3 writes repeated integers */
	pb_varint(&inner, 1 + FIX_COMMENT1);
	pb_varint(&inner, 1 + FIX_COMMENT2);
	pb_sub(&out, 13, &inner);
#undef SID
	if (out.oom || m.oom || inner.oom)
		goto oom;
	*buf = out.p;
	*len = out.n;
	out.p = NULL;
	ret = 0;
	goto out;
oom:
	tg_error(d, "out of memory");
out:
	free(out.p);
	free(m.p);
	free(inner.p);
	free(c1);
	return ret;
}

int tg_pprof_write(FILE *out, const struct tg_xprof *x, struct tg_diag *d)
{
	unsigned char *buf = NULL, chunk[65536];
	size_t len;
	z_stream z;
	int zr, ret = -1;

	if (tg_pprof_encode(x, &buf, &len, d) < 0)
		return -1;
	memset(&z, 0, sizeof(z));
	/* 15 + 16: a gzip wrapper around the deflate stream */
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK) {
		free(buf);
		return tg_error(d, "out of memory (zlib)");
	}
	z.next_in = buf;
	do {
		/* avail_in is 32 bits: a larger profile goes in in pieces */
		size_t left = len - (size_t)(z.next_in - buf);
		z.avail_in = left > UINT32_MAX ? UINT32_MAX : (uInt)left;
		z.next_out = chunk;
		z.avail_out = sizeof(chunk);
		zr = deflate(&z, left > z.avail_in ? Z_NO_FLUSH : Z_FINISH);
		if (zr == Z_STREAM_ERROR) {
			tg_error(d, "zlib failed to compress the profile");
			goto out;
		}
		if (fwrite(chunk, 1, sizeof(chunk) - z.avail_out, out) != sizeof(chunk) - z.avail_out) {
			tg_error(d, "unable to write the profile: %s", strerror(errno));
			goto out;
		}
	} while (zr != Z_STREAM_END);
	ret = 0;
out:
	deflateEnd(&z);
	free(buf);
	return ret;
}
