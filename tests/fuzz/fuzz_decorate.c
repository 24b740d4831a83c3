/*
 * fuzz_decorate.c - decorate-stack (tg_decorate_run) over a .mem and a .stack
 * dump and an EVENT, all three taken from the fuzz input.
 *
 * Input layout: EVENT '\0' MEM '\0' STACK (missing parts are empty).  EVENT is a
 * line number or line text, as on the command line.
 * Properties: no sanitizer report; the output (dump text) holds no control
 * byte but '\n', no DEL and no UTF-8 C1 control, so it cannot drive a terminal;
 * a failed run sets a message.
 */
#include "fuzz_util.h"  /* first: it defines _GNU_SOURCE */
#include "decorate.h"

static const uint8_t *fz_take(const uint8_t **p, size_t *n, size_t *len)
{
	const uint8_t *s = *p, *z = *n ? memchr(s, 0, *n) : NULL;

	*len = z ? (size_t)(z - s) : *n;
	*p += z ? *len + 1 : *len;
	*n -= z ? *len + 1 : *len;
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data, *ev, *mem, *stk;
	size_t n = size, evlen, memlen, stklen;
	struct fz_file fm, fs;
	struct tg_decorate_opts o = { "/pre/", NULL };
	struct tg_diag d = { 0 };
	char *event, *out = NULL;
	size_t outlen = 0;
	FILE *f;
	int ret;

	ev = fz_take(&p, &n, &evlen);
	mem = fz_take(&p, &n, &memlen);
	stk = fz_take(&p, &n, &stklen);
	stklen += n; /* the stack takes whatever follows, NULs included */
	event = fz_strdup(ev, evlen);
	fz_file_open(&fm, mem, memlen);
	fz_file_open(&fs, stk, stklen);
	f = open_memstream(&out, &outlen);
	if (!f)
		abort();
	ret = tg_decorate_run(fm.path, fs.path, event, &o, f, NULL, &d);
	fclose(f);
	if (ret < 0)
		FZ_ASSERT(d.msg[0] != '\0');
	for (size_t i = 0; i < outlen; i++) {
		unsigned char c = (unsigned char)out[i];
		FZ_ASSERT(c == '\n' || (c >= 0x20 && c != 0x7f));
	}
	FZ_ASSERT(!fz_has_c1(out, outlen));
	free(out);
	free(event);
	fz_file_close(&fm);
	fz_file_close(&fs);
	return 0;
}
