/*
 * fuzz_stackrec.c - the .stack record parser (tg_stackrec_parse).
 *
 * Properties: no sanitizer report; on success the fields lie inside the line,
 * depth counts exactly the leading spaces, and FUNCTION holds no ':'.
 */
#include "fuzz_util.h"  /* first: it defines _GNU_SOURCE */
#include "records.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fz_dup(data, size);
	struct tg_stackrec r;

	for (int has_time = 0; has_time < 2; has_time++) {
		size_t sp = 0;

		if (tg_stackrec_parse(&r, s, size, has_time))
			continue;
		while (sp < size && s[sp] == ' ')
			sp++;
		FZ_ASSERT(r.depth == sp);
		FZ_ASSERT(fz_within(r.site.s, r.site.len, s, size));
		FZ_ASSERT(fz_within(r.file.s, r.file.len, s, size));
		FZ_ASSERT(fz_within(r.func.s, r.func.len, s, size));
		FZ_ASSERT(r.site.s + r.site.len == s + size);
		FZ_ASSERT(!memchr(r.func.s, ':', r.func.len));
	}
	free(s);
	return 0;
}
