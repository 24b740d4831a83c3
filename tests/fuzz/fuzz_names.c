/*
 * fuzz_names.c - the recorder's thread name -> file name mapping and record
 * field escaping (src/recorder/names.c; pure C, no Python).
 *
 * Input: a thread name, then (after the first NUL, if any) names already used
 * in the run, NUL-separated.
 * Properties of tg_safe_basename + tg_unique_basename: the result is not empty,
 * holds no '/', no control byte and no DEL, does not start with '.', is at most
 * TG_NAME_MAX bytes before its "~N" suffix, is not "process" and differs from
 * every used name.  The mapping is injective on names that fit: two different
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
	for (size_t i = 0; i < len; i++)
		FZ_ASSERT((unsigned char)out[i] >= 0x20 && (unsigned char)out[i] != 0x7f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *z = size ? memchr(data, 0, size) : NULL;
	size_t nlen = z ? (size_t)(z - data) : size;
	char *name = fz_dup(data, nlen);
	char out[TG_BASENAME_CAP], out2[TG_BASENAME_CAP];
	char *used[FZ_MAX_USED];
	size_t nused = 0, base_len;

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

	/* used names: the rest of the input; our own result among them, twice */
	if (z) {
		const uint8_t *p = z + 1, *end = data + size;
		while (p < end && nused < FZ_MAX_USED - 2) {
			const uint8_t *e = memchr(p, 0, (size_t)(end - p));
			size_t l = e ? (size_t)(e - p) : (size_t)(end - p);
			used[nused++] = fz_strdup(p, l);
			p += l + 1;
		}
	}
	used[nused++] = strdup(out);
	FZ_ASSERT(tg_unique_basename(out, used, nused) == 0);
	fz_check_base(out);
	FZ_ASSERT(strcmp(out, TG_PROCESS_BASENAME) != 0);
	for (size_t i = 0; i < nused; i++)
		FZ_ASSERT(strcmp(out, used[i]) != 0);
	FZ_ASSERT(strncmp(out, used[nused - 1], base_len) == 0);
	for (size_t i = 0; i < nused; i++)
		free(used[i]);

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
