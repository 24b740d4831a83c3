/* Unit tests of the line reader: CRLF, last line, NUL, gzip, overlong, errors. */
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include "linereader.h"
#include "tg_test.h"

static char dir[] = "/tmp/tg_test_lr.XXXXXX";

static const char *tmpfile_with(const char *name, const char *data, size_t len)
{
	static char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	fwrite(data, 1, len, f);
	fclose(f);
	return path;
}

/* Reads all lines of path, joined with '|' into out; returns line count or -1. */
static int read_all(const char *path, char *out, size_t n, struct tg_diag *d, int *overlong)
{
	struct tg_lr lr;
	const char *line;
	size_t len, o = 0;
	int got, count = 0;

	*overlong = 0;
	if (tg_lr_open(&lr, path, 0, d) < 0)
		return -1;
	while ((got = tg_lr_next(&lr, &line, &len, d)) > 0) {
		if (lr.overlong)
			(*overlong)++;
		if (o + len + 2 < n) {
			memcpy(out + o, line, len);
			o += len;
			out[o++] = '|';
		}
		count++;
	}
	out[o] = '\0';
	tg_lr_release(&lr);
	return got < 0 ? -1 : count;
}

int main(void)
{
	struct tg_diag d = { 0 };
	char out[4096];
	int ov;
	const char *p;

	if (!mkdtemp(dir))
		return 2;
	p = tmpfile_with("crlf.mem", "a\r\nb\r\n\r\nc", 9);
	CHECK_INT(read_all(p, out, sizeof(out), &d, &ov), 4);
	CHECK_STR(out, "a|b||c|");
	{ /* a NUL byte marks its line only, wherever buffers end */
		struct tg_lr lr;
		const char *line;
		size_t len;
		int nuls[4] = { 0 }, i = 0;

		p = tmpfile_with("nul.mem", "aaaa\nb\0b\ncccc\nd\0\n", 17);
		CHECK_INT(tg_lr_open(&lr, p, 0, &d), 0);
		while (i < 4 && tg_lr_next(&lr, &line, &len, &d) > 0)
			nuls[i++] = lr.has_nul;
		tg_lr_release(&lr);
		CHECK(!nuls[0] && nuls[1] && !nuls[2] && nuls[3]);
		CHECK_INT(i, 4);
	}
	{ /* a bare '\r' inside a line marks it; a final "\r\n" or '\r' does not */
		struct tg_lr lr;
		const char *line;
		size_t len;
		int crs[5] = { 0 }, i = 0;
		size_t lens[5] = { 0 };

		p = tmpfile_with("cr.mem", "aa\r\nb\rb\ncc\n\rd\r\ne\r", 17);
		CHECK_INT(tg_lr_open(&lr, p, 0, &d), 0);
		while (i < 5 && tg_lr_next(&lr, &line, &len, &d) > 0) {
			crs[i] = lr.has_cr;
			lens[i++] = len;
		}
		tg_lr_release(&lr);
		CHECK_INT(i, 5);
		CHECK(!crs[0] && crs[1] && !crs[2] && crs[3] && !crs[4]);
		CHECK(lens[0] == 2 && lens[1] == 3 && lens[2] == 2 && lens[3] == 2 && lens[4] == 1);
	}
	p = tmpfile_with("empty.mem", "", 0);
	CHECK_INT(read_all(p, out, sizeof(out), &d, &ov), 0);
	p = tmpfile_with("nl.mem", "\n", 1);
	CHECK_INT(read_all(p, out, sizeof(out), &d, &ov), 1);
	p = tmpfile_with("bin.mem", "\x7f" "ELF\0\0\0\1", 8);
	CHECK_INT(read_all(p, out, sizeof(out), &d, &ov), -1);
	CHECK(strstr(d.msg, "is a binary file") != NULL);
	CHECK_INT(read_all("/nonexistent/x.mem", out, sizeof(out), &d, &ov), -1);
	CHECK(strstr(d.msg, "unable to open '/nonexistent/x.mem'") != NULL);
	CHECK_INT(read_all(dir, out, sizeof(out), &d, &ov), -1);
	CHECK(strstr(d.msg, "is a directory") != NULL);

	{ /* an overlong line in the middle and one at the end without newline */
		size_t n = 3 * TG_LR_MAX_LINE;
		char *big = malloc(2 * n + 16);
		memset(big, 'x', 2 * n + 16);
		memcpy(big, "a\n", 2);
		big[2 + n] = '\n';
		memcpy(big + 3 + n, "b\n", 2);
		p = tmpfile_with("long.mem", big, 2 * n + 5);
		CHECK_INT(read_all(p, out, sizeof(out), &d, &ov), 4);
		CHECK_INT(ov, 2);
		CHECK_STR(out, "a||b||");
		free(big);
	}
	{ /* gzip, also a truncated one */
		char path[256];
		gzFile gz;
		FILE *f;
		long size;
		char *buf;

		snprintf(path, sizeof(path), "%s/t.mem.gz", dir);
		gz = gzopen(path, "wb");
		for (int i = 0; i < 20000; i++)
			gzprintf(gz, "%d.5#f.py:%d:g=>%d\n", i, i, -i);
		gzclose(gz);
		CHECK_INT(read_all(path, out, sizeof(out), &d, &ov), 20000);
		CHECK(!strncmp(out, "0.5#f.py:0:g=>0|1.5#f.py:1:g=>-1|", 33));
		f = fopen(path, "rb");
		fseek(f, 0, SEEK_END);
		size = ftell(f);
		rewind(f);
		buf = malloc((size_t)size);
		CHECK_INT(fread(buf, 1, (size_t)size, f), size);
		fclose(f);
		p = tmpfile_with("cut.mem.gz", buf, (size_t)size / 2);
		CHECK_INT(read_all(p, out, sizeof(out), &d, &ov), -1);
		CHECK(strstr(d.msg, "truncated gzip data") != NULL || strstr(d.msg, "unable to read") != NULL);
		free(buf);
	}
	{ /* lines spanning many buffer refills keep their numbers */
		struct tg_lr lr;
		const char *line;
		size_t len;
		FILE *f;
		char path[256];
		unsigned long last = 0;
		int ok = 1;

		snprintf(path, sizeof(path), "%s/many.mem", dir);
		f = fopen(path, "w");
		for (int i = 1; i <= 200000; i++)
			fprintf(f, "%d\n", i);
		fclose(f);
		CHECK_INT(tg_lr_open(&lr, path, 0, &d), 0);
		while (tg_lr_next(&lr, &line, &len, &d) > 0) {
			if (strtoul(line, NULL, 10) != lr.lineno)
				ok = 0;
			last = lr.lineno;
		}
		tg_lr_release(&lr);
		CHECK(ok);
		CHECK_INT(last, 200000);
	}
	{
		char cmd[64];
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			return 2;
	}
	TG_TEST_DONE();
}
