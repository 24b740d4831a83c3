/*
 * fuzz_peaks.c - the peaks command's library path over one arbitrary .mem dump:
 * the memg reader (tg_memg_read_thread), peak selection, --top/--sort, and the
 * text and JSON writers (tg_peaks_collect, tg_peaks_*, tg_peaks_write_*).
 *
 * The first input byte picks options (timestamps or not, thresholds, --top);
 * the rest is the dump.  Properties: no sanitizer report; the text output holds
 * no control byte but tab and newline; the JSON output holds no control byte
 * but newline, its brackets balance outside strings and every "time" is a JSON
 * number; neither holds a UTF-8 C1 control.
 */
#include "fuzz_util.h"  /* first: it defines _GNU_SOURCE */
#include "dumpfile.h"
#include "memg.h"
#include "peaks_out.h"

/* Non-zero when s[0..n) is a JSON number (RFC 8259: no leading zeros). */
static int fz_json_number(const char *s, size_t n)
{
	size_t i = 0;

	if (i < n && s[i] == '-')
		i++;
	if (i < n && s[i] == '0')
		i++;
	else if (i < n && s[i] >= '1' && s[i] <= '9')
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
	else
		return 0;
	if (i < n && s[i] == '.') {
		size_t f = ++i;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
		if (i == f)
			return 0;
	}
	return i == n;
}

/* Every "time": value of the JSON output is null or a JSON number. */
static void fz_check_json_times(const char *s, size_t n)
{
	const char *key = "\"time\": ", *p = s, *end = s + n;

	while ((p = memmem(p, (size_t)(end - p), key, strlen(key)))) {
		const char *v = p + strlen(key), *c = memchr(v, ',', (size_t)(end - v));
		FZ_ASSERT(c);
		FZ_ASSERT((c - v == 4 && !memcmp(v, "null", 4)) ||
			  fz_json_number(v, (size_t)(c - v)));
		p = c;
	}
}

static void fz_check_text(const char *s, size_t n, int json)
{
	int depth = 0, in_str = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		FZ_ASSERT(c == '\n' || (c == '\t' && !json) || (c >= 0x20 && c != 0x7f));
		if (!json)
			continue;
		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = 0;
			continue;
		}
		if (c == '"')
			in_str = 1;
		else if (c == '[' || c == '{')
			depth++;
		else if (c == ']' || c == '}')
			FZ_ASSERT(--depth >= 0);
	}
	FZ_ASSERT(!fz_has_c1(s, n));
	if (json) {
		FZ_ASSERT(depth == 0 && !in_str);
		fz_check_json_times(s, n);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_file f;
	struct tg_dumpfile df;
	struct tg_memg_opts o = { 0 };
	struct tg_peaks peaks;
	struct tg_diag d = { 0 };
	unsigned flags = size ? data[0] : 0;
	char *out = NULL;
	size_t outlen = 0;
	FILE *mf;

	if (size)
		data++, size--;
	o.has_time = !(flags & 1);
	o.peak.peak_kb = (flags & 2) ? 0 : 0.5;
	o.peak.delta_time = (flags & 4) ? 0 : 1;
	o.peak.delta_value_kb = (flags & 8) ? 0 : 2;
	o.has_cap = (flags & 16) != 0;
	o.cap_kb = 3;
	fz_file_open(&f, data, size);
	if (tg_dumpfile_init(&df, f.path) < 0)
		abort();
	tg_peaks_init(&peaks);
	if (tg_peaks_collect(&o, &df, 1, &peaks, NULL, &d) == 0) {
		if (flags & 32)
			tg_peaks_top(&peaks, flags >> 6);
		if (flags & 64)
			tg_peaks_sort_size(&peaks);
		for (int json = 0; json < 2; json++) {
			mf = open_memstream(&out, &outlen);
			if (!mf)
				abort();
			if (json)
				tg_peaks_write_json(mf, &peaks, &df, o.has_time);
			else
				tg_peaks_write_text(mf, &peaks, &df, o.has_time);
			fclose(mf);
			fz_check_text(out, outlen, json);
			free(out);
			out = NULL;
		}
	}
	tg_peaks_release(&peaks);
	tg_dumpfile_release(&df);
	fz_file_close(&f);
	return 0;
}
