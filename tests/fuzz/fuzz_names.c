/*
 * fuzz_names.c - the recorder's thread name -> file name mapping and record
 * field escaping (src/recorder/names.c; pure C, no Python).
 *
 * Input: a thread name, then (after the first NUL, if any) names already used
 * in the run, NUL-separated.
 * Properties of tg_safe_basename + tg_nameset_claim (what the recorder runs):
 * the result is not empty, holds no '/', no control byte, DEL, C1 or
 * bidirectional control (tg_unsafe_seq), does not
 * start with '.', is at most TG_NAME_MAX bytes before its "~N" suffix, is not
 * "process" and differs from every name claimed before it in the run.  The mapping is injective on names that fit: two different
 * names of at most TG_NAME_MAX/3 bytes give different base names.
 * Properties of tg_escape: no control byte or DEL, length tg_escaped_len().
 */
#include "fuzz_util.h"  /* first: it defines _GNU_SOURCE */
#include "names.h"
#include "tg_format.h"

#define FZ_MAX_USED 16

static void fz_check_base(const char *out)
{
	size_t len = strlen(out);

	FZ_ASSERT(len > 0 && len < TG_BASENAME_CAP);
	FZ_ASSERT(out[0] != '.');
	FZ_ASSERT(!strchr(out, '/'));
	/* no control byte, DEL, C1 or bidirectional control (U+009B, U+202E) */
	for (size_t i = 0; i < len; i++)
		FZ_ASSERT(!tg_unsafe_seq((const unsigned char *)out + i, len - i));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *z = size ? memchr(data, 0, size) : NULL;
	size_t nlen = z ? (size_t)(z - data) : size;
	char *name = fz_dup(data, nlen);
	char out[TG_BASENAME_CAP], out2[TG_BASENAME_CAP];
	char *used[FZ_MAX_USED];
	size_t nused = 0, base_len;
	struct tg_nameset *set;

	tg_safe_basename(name, nlen, out);
	fz_check_base(out);
	base_len = strlen(out);
	FZ_ASSERT(base_len <= TG_NAME_MAX);

	/* injective: the name with its last byte changed maps elsewhere */
	if (nlen && nlen <= TG_NAME_MAX / 3) {
		char *other = fz_dup((const uint8_t *)name, nlen);
		other[nlen - 1] ^= 0x01;
		tg_safe_basename(other, nlen, out2);
		FZ_ASSERT(strcmp(out, out2) != 0);
		free(other);
	}

	/* used names: the rest of the input, claimed in order as threads of one
	 * run would; then our own name twice (the second claim gets a suffix) */
	set = tg_nameset_new();
	FZ_ASSERT(set != NULL);
	if (z) {
		const uint8_t *p = z + 1, *end = data + size;
		while (p < end && nused < FZ_MAX_USED - 2) {
			const uint8_t *e = memchr(p, 0, (size_t)(end - p));
			size_t l = e ? (size_t)(e - p) : (size_t)(end - p);
			char claimed[TG_BASENAME_CAP];
			tg_safe_basename((const char *)p, l, claimed);
			FZ_ASSERT(tg_nameset_claim(set, claimed) == 0);
			used[nused++] = strdup(claimed);
			p += l + 1;
		}
	}
	for (int round = 0; round < 2; round++) {
		strcpy(out2, out);
		FZ_ASSERT(tg_nameset_claim(set, out2) == 0);
		fz_check_base(out2);
		FZ_ASSERT(strcmp(out2, TG_PROCESS_BASENAME) != 0);
		for (size_t i = 0; i < nused; i++)
			FZ_ASSERT(strcmp(out2, used[i]) != 0);
		FZ_ASSERT(strncmp(out2, out, base_len) == 0);
		used[nused++] = strdup(out2);
	}
	for (size_t i = 0; i < nused; i++)
		free(used[i]);
	tg_nameset_free(set);

	{
		size_t el = tg_escaped_len(name, nlen);
		char *esc = malloc(el + 1);
		FZ_ASSERT(esc && tg_escape(esc, name, nlen) == esc + el);
		for (size_t i = 0; i < el; i++)
			FZ_ASSERT((unsigned char)esc[i] >= 0x20 && (unsigned char)esc[i] != 0x7f);
		free(esc);
	}
	free(name);
	return 0;
}
