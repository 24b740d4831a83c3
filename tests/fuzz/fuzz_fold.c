/*
 * fuzz_fold.c - the folded and flamegraph commands' library path over
 * arbitrary dumps: tg_fold_load_pair (a .stack and a .mem paired) or
 * tg_fold_load (a snapshot), tg_fold_write and tg_flamesvg_write.
 *
 * The first input byte picks the mode (bit 0: time rather than delta; bit 1:
 * dumps without timestamps; bit 2: read the rest as a snapshot, metric alloc);
 * for dumps the next byte is the length of the .stack part (x 16), the rest the
 * .mem part.  Properties: no sanitizer report; every folded line ends with a
 * positive value; the SVG holds no control byte but newline and is valid UTF-8
 * where names are (checked by the escaping helper's contract).
 */
#include "fuzz_util.h"  /* first: it defines _GNU_SOURCE */
#include "flamesvg.h"
#include "fold.h"

static void fz_check(const struct tg_fold *f)
{
	struct tg_flamesvg_opts so = { "fz", "fuzz", 400, 0.1, 1 };
	struct tg_diag d = { .strict = 0 };
	char *out = NULL;
	size_t len = 0;
	FILE *o = open_memstream(&out, &len);

	if (!o)
		abort();
	tg_fold_write(f, o);
	fclose(o);
	for (size_t i = 0, start = 0; i < len; i++) {
		if (out[i] != '\n')
			continue;
		FZ_ASSERT(i > start);
		FZ_ASSERT(out[i - 1] >= '1' || (out[i - 1] == '0' && i - 1 > start &&
						out[i - 2] >= '0' && out[i - 2] <= '9'));
		start = i + 1;
	}
	free(out);
	out = NULL;
	o = open_memstream(&out, &len);
	if (!o)
		abort();
	FZ_ASSERT(tg_flamesvg_write(o, f, &so, NULL, &d) == 0);
	fclose(o);
	for (size_t i = 0; i < len; i++)
		FZ_ASSERT((unsigned char)out[i] >= 0x20 || out[i] == '\n');
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tg_fold f;
	struct tg_diag d = { .strict = 0 };
	struct tg_fold_opts o = { NULL, NULL, NULL, 0, 1 };
	struct fz_file st, mem;
	size_t split;

	if (size < 2)
		return 0;
	o.has_time = !(data[0] & 2);
	tg_fold_init(&f);
	if (data[0] & 4) {
		o.metric = tg_fold_metric_find("alloc");
		fz_file_open(&st, data + 1, size - 1);
		o.path = st.path;
		if (tg_fold_load(&f, &o, &d) == 0)
			fz_check(&f);
		fz_file_close(&st);
		tg_fold_release(&f);
		return 0;
	}
	o.metric = tg_fold_metric_find(data[0] & 1 ? "time" : "delta");
	f.metric = o.metric;
	split = (size_t)data[1] * 16;
	if (split > size - 2)
		split = size - 2;
	fz_file_open(&st, data + 2, split);
	fz_file_open(&mem, data + 2 + split, size - 2 - split);
	{
		struct tg_dumpfile sdf = { st.path, NULL, TG_DUMP_STACK, NULL, NULL };
		struct tg_dumpfile mdf = { mem.path, NULL, TG_DUMP_MEM, NULL, NULL };
		if ((!(data[0] & 1) || o.has_time) &&
		    tg_fold_load_pair(&f, &o, &sdf, &mdf, 0, -1, &d) == 0 &&
		    tg_fold_finish(&f, &d) == 0)
			fz_check(&f);
	}
	fz_file_close(&st);
	fz_file_close(&mem);
	tg_fold_release(&f);
	return 0;
}
