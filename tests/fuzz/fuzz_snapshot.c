/*
 * fuzz_snapshot.c - the top and diff commands' library path over one arbitrary
 * heap snapshot (format 1 or 2): tg_snapshot_read, tg_snapshot_group at a
 * depth and thread mode, tg_snapshot_sort, tg_top_print, and tg_snapshot_diff
 * of the snapshot with itself.
 *
 * The first input byte picks options (bits 0-2: --depth 0-7; bit 3:
 * --merge-threads; bit 4: --sort total); the rest is the snapshot.  Properties:
 * no sanitizer report; the output holds no control byte but newline; a
 * snapshot diffed with itself shows no site.
 */
#include "fuzz_util.h"  /* first: it defines _GNU_SOURCE */
#include "acct_out.h"
#include "snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_file f;
	struct tg_snapshot s;
	struct tg_diag d = { .strict = 0 };
	struct tg_snap_delta *v = NULL;
	size_t n = 0, outlen = 0;
	char *out = NULL;
	FILE *o;
	unsigned depth;
	int merge, total;

	if (size < 1)
		return 0;
	depth = data[0] & 7;
	merge = (data[0] >> 3) & 1;
	total = (data[0] >> 4) & 1;
	fz_file_open(&f, data + 1, size - 1);
	if (tg_snapshot_read(&s, f.path, &d) == 0) {
		if (tg_snapshot_group(&s, depth, merge, &d) == 0) {
			tg_snapshot_sort(&s, total ? TG_SNAP_TOTAL : TG_SNAP_LIVE);
			o = open_memstream(&out, &outlen);
			if (!o)
				abort();
			tg_top_print(o, &s, 0);
			fclose(o);
			for (size_t i = 0; i < outlen; i++)
				FZ_ASSERT((unsigned char)out[i] >= 0x20 || out[i] == '\n');
			free(out);
			if (tg_snapshot_diff(&s, &s, &v, &n, &d) == 0) {
				FZ_ASSERT(n == 0);
				free(v);
			}
		}
		tg_snapshot_release(&s);
	}
	fz_file_close(&f);
	return 0;
}
