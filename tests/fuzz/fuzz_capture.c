/*
 * fuzz_capture.c - the binary capture reader over arbitrary bytes: opening
 * (header, chunk walk, definitions, END), decoding every stream, the text of
 * every record as export writes it, and the peaks command's path over the
 * capture (dumpset.c, recsrc.c, memg.c).
 *
 * Properties: no sanitizer report; a stream decodes to its end, its cut or an
 * error, never further; depths follow the calls, returns and unwound calls;
 * each record's text is one line with no control byte but its newline; the
 * peak list holds no control byte but tab and newline.
 */
#include "fuzz_util.h"  /* first: it defines _GNU_SOURCE */
#include "capture_read.h"
#include "dumpset.h"
#include "memg.h"
#include "peaks_out.h"
#include "recsrc.h"

static void fz_check_line(const char *s, size_t n)
{
	FZ_ASSERT(n >= 1 && s[n - 1] == '\n');
	for (size_t i = 0; i + 1 < n; i++)
		FZ_ASSERT((unsigned char)s[i] >= 0x20 && (unsigned char)s[i] != 0x7f);
}

static void fz_streams(const struct tg_capture *cap)
{
	static char line[TG_SRC_TEXT_MAX * 2 + 256];

	for (size_t t = 0; t <= cap->n_threads; t++) {
		const struct tg_cap_thread *th = t < cap->n_threads ? &cap->threads[t] : NULL;
		struct tg_capcur c;
		struct tg_cap_rec_data r;
		struct tg_diag d = { 0 };
		unsigned long calls = 0, returns = 0;
		uint64_t depth;
		int got;

		tg_capcur_init(&c, cap, th);
		while ((got = tg_capcur_next(&c, &r, &d)) > 0) {
			size_t n;
			/* Open calls: an UNWOUND event closes some without a record. */
			FZ_ASSERT(calls >= returns && calls - returns >= c.unwound);
			depth = calls - returns - c.unwound;
			if (r.type == TG_CAP_REC_CALL) {
				FZ_ASSERT(th && r.depth == depth && r.number == ++calls);
			} else if (r.type == TG_CAP_REC_RETURN) {
				FZ_ASSERT(th && depth > 0 && r.number == ++returns);
				FZ_ASSERT(r.depth == depth - 1 && r.call_number <= calls);
			} else {
				FZ_ASSERT(!th && r.type == TG_CAP_REC_SAMPLE);
			}
			n = tg_src_fmt_record(line, sizeof(line), &r, (cap->flags & TG_CAP_F_TIME) != 0);
			if (n)
				fz_check_line(line, n);
		}
		FZ_ASSERT(got == 0 || d.msg[0]);
		tg_capcur_release(&c);
	}
}

static void fz_peaks(const char *path)
{
	struct tg_dumpset s;
	struct tg_diag d = { 0 };
	struct tg_memg_opts o = { 0 };
	struct tg_peaks peaks;
	char *out = NULL;
	size_t outlen = 0;
	FILE *mf;

	if (tg_dumpset_init(&s, (char **)&path, 1, TG_VIEW_MEM, &d) == 0 && s.cap) {
		o.has_time = (s.cap->flags & TG_CAP_F_TIME) != 0;
		o.peak.peak_kb = 0.5;
		o.peak.delta_time = 1;
		o.peak.delta_value_kb = 2;
		tg_peaks_init(&peaks);
		if (tg_peaks_collect(&o, s.v, s.n, &peaks, NULL, &d) == 0) {
			mf = open_memstream(&out, &outlen);
			if (!mf)
				abort();
			tg_peaks_write_text(mf, &peaks, s.v, o.has_time);
			fclose(mf);
			for (size_t i = 0; i < outlen; i++)
				FZ_ASSERT(out[i] == '\n' || out[i] == '\t' ||
					  ((unsigned char)out[i] >= 0x20 && out[i] != 0x7f));
			free(out);
		}
		tg_peaks_release(&peaks);
	}
	tg_dumpset_release(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_file f;
	struct tg_capture cap;
	struct tg_diag d = { 0 };

	fz_file_open(&f, data, size);
	if (tg_capture_open(&cap, f.path, &d) == 0) {
		fz_streams(&cap);
		tg_capture_close(&cap);
		fz_peaks(f.path);
	} else {
		FZ_ASSERT(d.msg[0]);
	}
	fz_file_close(&f);
	return 0;
}
