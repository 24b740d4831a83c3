/*
 * fuzz_linereader.c - the line reader (tg_lr_*) over arbitrary bytes, plain or
 * gzip (a fuzz input starting with 1f 8b is read through zlib).
 *
 * Properties: no sanitizer report; no line holds '\n' or is longer than
 * TG_LR_MAX_LINE; has_nul is set exactly for lines holding a NUL byte, and
 * has_cr exactly for lines holding a '\r' (a final "\r\n" ends the line), and
 * tg_lr_bad() names a reason exactly for overlong, NUL or CR lines; line numbers
 * count up by one; for plain input the lines and their terminators account for
 * every byte, only the last line may lack its newline, and (overlong lines
 * aside) each line is the input's text at that place.
 */
#include "fuzz_util.h"  /* first: it defines _GNU_SOURCE */
#include "linereader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_file f;
	struct tg_lr lr;
	struct tg_diag d = { 0 };
	const char *line;
	size_t len, off = 0;
	unsigned long n = 0;
	int got, gz = size >= 2 && data[0] == 0x1f && data[1] == 0x8b, ok = 1;

	fz_file_open(&f, data, size);
	if (tg_lr_open(&lr, f.path, 0, &d) < 0) {
		fz_file_close(&f);
		return 0;
	}
	while ((got = tg_lr_next(&lr, &line, &len, &d)) > 0) {
		n++;
		FZ_ASSERT(lr.lineno == n);
		FZ_ASSERT(len <= TG_LR_MAX_LINE);
		FZ_ASSERT(!memchr(line, '\n', len));
		FZ_ASSERT(!lr.overlong || len == 0);
		/* NULs are found once per buffer fill: the flag must match the line */
		if (!lr.overlong) {
			FZ_ASSERT(lr.has_nul == (memchr(line, '\0', len) != NULL));
			/* a "\r\n" ending is not part of the line; any other '\r' is */
			FZ_ASSERT(lr.has_cr == (memchr(line, '\r', len) != NULL));
		}
		FZ_ASSERT((tg_lr_bad(&lr) != NULL) == (lr.overlong || lr.has_nul || lr.has_cr));
		if (!gz && ok && !lr.overlong) {
			/* the line is the input's text at the current offset */
			FZ_ASSERT(off + len <= size && !memcmp(line, data + off, len));
		}
		if (!gz) {
			/* overlong lines are skipped whole; find where the next begins */
			const uint8_t *nl = off < size ? memchr(data + off, '\n', size - off) : NULL;
			off = nl ? (size_t)(nl - data) + 1 : size;
			FZ_ASSERT(lr.no_newline == !nl);
		}
	}
	if (got == 0 && !gz)
		FZ_ASSERT(off == size);
	tg_lr_release(&lr);
	tg_lr_release(&lr); /* documented as safe twice */
	fz_file_close(&f);
	return 0;
}
