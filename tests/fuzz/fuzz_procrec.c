/*
 * fuzz_procrec.c - the process.mem record parser, and the TIME and integer
 * field parsers under it (tg_procrec_parse, tg_time_parse, tg_int_parse).
 *
 * Properties: no sanitizer report; a parsed BYTES and TIME agree with strtoll
 * and strtod on the same text (TIME within a relative 1e-12: the fast path may
 * differ from strtod by an ulp or so).
 */
#include "fuzz_util.h"  /* first: it defines _GNU_SOURCE */
#include <math.h>

#include "records.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fz_dup(data, size);
	char *z = fz_strdup(data, size);
	struct tg_procrec r;
	long long v;
	double t;

	for (int has_time = 0; has_time < 2; has_time++)
		if (!tg_procrec_parse(&r, s, size, has_time) && has_time)
			FZ_ASSERT(fz_within(r.time.text.s, r.time.text.len, s, size));
	if (!tg_int_parse(s, size, &v))
		FZ_ASSERT(v == strtoll(z, NULL, 10));
	if (!tg_time_parse(s, size, &t)) {
		double e = strtod(z, NULL);
		FZ_ASSERT(t >= 0 && fabs(t - e) <= 1e-12 * (e > 1 ? e : 1));
	}
	free(z);
	free(s);
	return 0;
}
