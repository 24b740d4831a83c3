/*
 * fuzz_gpquote.c - gnuplot string quoting (tg_gp_quote), the only way dump text
 * reaches a gnuplot script.
 *
 * Properties: the output is exactly one single-quoted gnuplot string: it starts
 * and ends with ', every ' inside is doubled, so no backquote, '@' or anything
 * else can stand outside the string; it holds no control byte (no newline ends
 * the command early) and no DEL; and unquoting gives back the input with control
 * bytes as '?'.
 */
#include "fuzz_util.h"  /* first: it defines _GNU_SOURCE */
#include "gnuplot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fz_dup(data, size), *out = NULL;
	size_t outlen = 0, i, k = 0;
	FILE *f = open_memstream(&out, &outlen);

	if (!f)
		abort();
	FZ_ASSERT(tg_gp_quote(f, s, size) == 0);
	fclose(f);
	FZ_ASSERT(outlen >= 2 && out[0] == '\'' && out[outlen - 1] == '\'');
	for (i = 1; i < outlen - 1; i++) {
		unsigned char c = (unsigned char)out[i];
		unsigned char want = (unsigned char)s[k];

		FZ_ASSERT(c >= 0x20 && c != 0x7f);
		if (c == '\'') {
			/* inside the string a quote is always doubled */
			FZ_ASSERT(i + 1 < outlen - 1 && out[i + 1] == '\'');
			i++;
		}
		if (want < 0x20 || want == 0x7f)
			want = '?';
		FZ_ASSERT(k < size && c == want);
		k++;
	}
	FZ_ASSERT(k == size);
	free(out);
	free(s);
	return 0;
}
