/*
 * fuzz_gpquote.c - gnuplot string quoting (tg_gp_quote), the only way dump text
 * reaches a gnuplot script.
 *
 * Properties: the output is one gnuplot string expression made only of
 * single-quoted literals holding no quote and the exact text sprintf('%c',39),
 * joined by '.': so no backquote, '@' or anything else can stand outside a
 * literal, and no literal starts with a doubled quote (which gnuplot's scanner
 * reads as an empty string); it holds no control byte (no newline ends the
 * command early) and no DEL; and evaluating it gives back the input with
 * each byte of a control, C1 or bidirectional control and of invalid UTF-8
 * as '?' (valid UTF-8 for gnuplot's svg).
 */
#include "fuzz_util.h"  /* first: it defines _GNU_SOURCE */
#include "gnuplot.h"
#include "markup.h"
#include "tg_format.h"

#define FZ_QUOTE "sprintf('%c',39)"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fz_dup(data, size), *out = NULL;
	size_t outlen = 0, i = 0, k = 0, ql = strlen(FZ_QUOTE);
	FILE *f = open_memstream(&out, &outlen);
	int items = 0;

	unsigned char *want = malloc(size + 1);

	if (!f || !want)
		abort();
	/* each input byte's output: itself, or '?' for the bytes of a control,
	 * C1 or bidirectional control, and of invalid UTF-8 */
	for (size_t j = 0; j < size;) {
		const unsigned char *u = (const unsigned char *)s + j;
		size_t bad = tg_unsafe_seq(u, size - j), ok = bad ? 0 : tg_utf8_len(u, size - j);

		if (ok) {
			memcpy(want + j, u, ok);
			j += ok;
		} else {
			for (size_t m = 0; m < (bad ? bad : 1); m++)
				want[j + m] = '?';
			j += bad ? bad : 1;
		}
	}
	FZ_ASSERT(tg_gp_quote(f, s, size) == 0);
	fclose(f);
	for (size_t j = 0; j < outlen; j++)
		FZ_ASSERT((unsigned char)out[j] >= 0x20 && out[j] != 0x7f);
	while (i < outlen) {
		if (items++)
			FZ_ASSERT(out[i++] == '.');
		if (outlen - i >= ql && !memcmp(out + i, FZ_QUOTE, ql)) {
			FZ_ASSERT(k < size && s[k] == '\'');
			k++;
			i += ql;
			continue;
		}
		FZ_ASSERT(out[i++] == '\'');
		/* a literal: no quote inside, so it ends at the next one */
		for (; i < outlen && out[i] != '\''; i++) {
			FZ_ASSERT(k < size && (unsigned char)out[i] == want[k]);
			k++;
		}
		FZ_ASSERT(i < outlen);
		i++;
	}
	FZ_ASSERT(items > 0 && k == size);
	free(out);
	free(s);
	free(want);
	return 0;
}
