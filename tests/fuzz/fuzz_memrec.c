/*
 * fuzz_memrec.c - the .mem record parser (tg_memrec_parse) on arbitrary lines.
 *
 * Properties: no sanitizer report; on success every field lies inside the line,
 * DELTA follows the last "=>", and the parse is the same with and without the
 * TIME# part removed.
 */
#include "fuzz_util.h"  /* first: it defines _GNU_SOURCE */
#include "records.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fz_dup(data, size);
	struct tg_memrec r, r2;

	for (int has_time = 0; has_time < 2; has_time++) {
		if (tg_memrec_parse(&r, s, size, has_time))
			continue;
		FZ_ASSERT(fz_within(r.rest.s, r.rest.len, s, size));
		FZ_ASSERT(fz_within(r.site.s, r.site.len, s, size));
		FZ_ASSERT(fz_within(r.file.s, r.file.len, s, size));
		FZ_ASSERT(fz_within(r.func.s, r.func.len, s, size));
		FZ_ASSERT(fz_within(r.time.text.s, r.time.text.len, s, size));
		FZ_ASSERT(r.site.s == r.rest.s && r.site.len + 2 < r.rest.len + 1);
		FZ_ASSERT(memcmp(r.rest.s + r.site.len, "=>", 2) == 0);
		/* DELTA has no "=>" after it: it is all digits and a sign */
		FZ_ASSERT(!memmem(r.rest.s + r.site.len + 2, r.rest.len - r.site.len - 2, "=>", 2));
		FZ_ASSERT(r.func.s + r.func.len == r.site.s + r.site.len);
		FZ_ASSERT(!memchr(r.func.s, ':', r.func.len));
		if (has_time) {
			/* the rest alone parses the same without timestamps */
			FZ_ASSERT(!tg_memrec_parse(&r2, r.rest.s, r.rest.len, 0));
			FZ_ASSERT(r2.delta == r.delta && r2.line == r.line &&
				  r2.file.len == r.file.len && r2.func.len == r.func.len);
			FZ_ASSERT(r.time.v >= 0);
		}
	}
	free(s);
	return 0;
}
