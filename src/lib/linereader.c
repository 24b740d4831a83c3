/*
 * linereader.c - buffered line reading with memchr; gzip through zlib.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "linereader.h"

/* Bytes looked at for NUL bytes when deciding that a file is binary. */
#define TG_LR_SNIFF 4096

/*
 * Non-zero when more than one byte in eight of the file's start are NUL or
 * control bytes other than tab, CR and LF: an executable, an image, a core file.
 * A text dump with one bad line is not binary; that line is reported as malformed.
 */
static int lr_looks_binary(const char *p, size_t n)
{
	size_t bad = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		bad += c < 0x20 && c != '\t' && c != '\n' && c != '\r';
	}
	return bad * 8 > n;
}

/* Reads up to n bytes into p; returns the count, 0 at EOF, -1 on error. */
static long lr_read(struct tg_lr *lr, char *p, size_t n, struct tg_diag *d)
{
	if (lr->gz) {
		int r = gzread((gzFile)lr->gz, p, (unsigned)n);
		if (r < 0) {
			int zerr;
			const char *m = gzerror((gzFile)lr->gz, &zerr);
			return tg_error(d, "unable to read '%s': %s", lr->path,
					zerr == Z_ERRNO ? strerror(errno) : m);
		}
		if (r == 0 && !gzeof((gzFile)lr->gz))
			return tg_error(d, "unable to read '%s': truncated gzip data", lr->path);
		if (r == 0) {
			int zerr;
			gzerror((gzFile)lr->gz, &zerr);
			if (zerr == Z_BUF_ERROR)
				return tg_error(d, "unable to read '%s': truncated gzip data", lr->path);
		}
		return r;
	}
	for (;;) {
		ssize_t r = read(lr->fd, p, n);
		if (r >= 0)
			return (long)r;
		if (errno != EINTR)
			return tg_error(d, "unable to read '%s': %s", lr->path, strerror(errno));
	}
}

/* Moves unread data to the front and reads more; returns 0 or -1. */
static int lr_fill(struct tg_lr *lr, struct tg_diag *d)
{
	long r;

	char *nul;

	if (lr->pos) {
		memmove(lr->buf, lr->buf + lr->pos, lr->end - lr->pos);
		if (lr->nul_at != SIZE_MAX)
			lr->nul_at -= lr->pos;
		if (lr->cr_at != SIZE_MAX)
			lr->cr_at -= lr->pos;
		lr->end -= lr->pos;
		lr->pos = 0;
	}
	r = lr_read(lr, lr->buf + lr->end, lr->cap - lr->end, d);
	if (r < 0)
		return -1;
	if (r == 0)
		lr->eof = 1;
	if (lr->nul_at == SIZE_MAX && (nul = memchr(lr->buf + lr->end, '\0', (size_t)r)))
		lr->nul_at = (size_t)(nul - lr->buf);
	if (lr->cr_at == SIZE_MAX && (nul = memchr(lr->buf + lr->end, '\r', (size_t)r)))
		lr->cr_at = (size_t)(nul - lr->buf);
	lr->end += (size_t)r;
	return 0;
}

int tg_lr_open(struct tg_lr *lr, const char *path, size_t bufsize, struct tg_diag *d)
{
	struct stat st;
	unsigned char magic[2];
	ssize_t n;

	memset(lr, 0, sizeof(*lr));
	lr->nul_at = SIZE_MAX;
	lr->cr_at = SIZE_MAX;
	lr->path = path;
	/* O_NONBLOCK: opening a FIFO that has no writer (one planted in a run
	 * directory) must not wait for one; reads block again as usual, so a pipe
	 * (threadgraph peaks <(zcat ...)) is read to its end and a FIFO without a
	 * writer reads as an empty file */
	lr->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (lr->fd < 0)
		return tg_error(d, "unable to open '%s': %s", path, strerror(errno));
	{
		int fl = fcntl(lr->fd, F_GETFL);
		if (fl >= 0)
			(void)fcntl(lr->fd, F_SETFL, fl & ~O_NONBLOCK);
	}
	if (fstat(lr->fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		tg_error(d, "unable to read '%s': is a directory", path);
		goto fail_fd;
	}
	if (bufsize < 2 * TG_LR_MAX_LINE)
		bufsize = bufsize ? 2 * TG_LR_MAX_LINE : TG_LR_BUFSIZE;
	lr->cap = bufsize;
	lr->buf = malloc(lr->cap);
	if (!lr->buf) {
		tg_error(d, "out of memory reading '%s'", path);
		goto fail_fd;
	}
	n = pread(lr->fd, magic, 2, 0);
	if (n < 0 && errno != ESPIPE) {
		tg_error(d, "unable to read '%s': %s", path, strerror(errno));
		goto fail_buf;
	}
	if (n == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
		int fd2 = dup(lr->fd);
		if (fd2 < 0 || !(lr->gz = gzdopen(fd2, "rb"))) {
			if (fd2 >= 0)
				close(fd2);
			tg_error(d, "unable to open '%s' as gzip", path);
			goto fail_buf;
		}
		gzbuffer((gzFile)lr->gz, 256 * 1024);
	}
	if (lr_fill(lr, d) < 0)
		goto fail_gz;
	if (lr_looks_binary(lr->buf, lr->end < TG_LR_SNIFF ? lr->end : TG_LR_SNIFF)) {
		tg_error(d, "'%s' is a binary file, not a threadgraph dump", path);
		goto fail_gz;
	}
	return 0;

fail_gz:
	if (lr->gz)
		gzclose((gzFile)lr->gz);
	lr->gz = NULL;
fail_buf:
	free(lr->buf);
	lr->buf = NULL;
fail_fd:
	close(lr->fd);
	lr->fd = -1;
	return -1;
}

int tg_lr_next_slow(struct tg_lr *lr, const char **line, size_t *len, struct tg_diag *d)
{
	for (;;) {
		char *s = lr->buf + lr->pos;
		size_t avail = lr->end - lr->pos;
		char *nl = avail ? memchr(s, '\n', avail) : NULL;
		size_t l;

		if (nl || (lr->eof && avail)) {
			l = nl ? (size_t)(nl - s) : avail;
			lr->pos += nl ? l + 1 : l;
			lr->no_newline = !nl;
			lr->lineno++;
			lr->overlong = lr->discarding || l > TG_LR_MAX_LINE;
			lr->discarding = 0;
			lr->has_nul = lr->nul_at < lr->pos;
			if (lr->has_nul) {
				char *nul = memchr(lr->buf + lr->pos, '\0', lr->end - lr->pos);
				lr->nul_at = nul ? (size_t)(nul - lr->buf) : SIZE_MAX;
			}
			lr->has_cr = 0;
			if (lr->cr_at < lr->pos) {
				/* the line holds a '\r': its end ("\r\n"), or inside */
				char *cr = memchr(lr->buf + lr->pos, '\r', lr->end - lr->pos);
				lr->cr_at = cr ? (size_t)(cr - lr->buf) : SIZE_MAX;
				if (l && s[l - 1] == '\r')
					l--;
				lr->has_cr = memchr(s, '\r', l) != NULL;
			}
			if (lr->overlong)
				l = 0;
			*line = s;
			*len = l;
			return 1;
		}
		if (lr->eof) {
			if (lr->discarding) {
				/* an overlong last line without newline */
				lr->discarding = 0;
				lr->overlong = 1;
				lr->has_nul = lr->has_cr = 0;
				lr->no_newline = 1;
				lr->lineno++;
				*line = lr->buf;
				*len = 0;
				return 1;
			}
			return 0;
		}
		if (lr->discarding || avail >= TG_LR_MAX_LINE) {
			lr->pos = lr->end = 0;
			lr->nul_at = lr->cr_at = SIZE_MAX;
			lr->discarding = 1;
		}
		if (lr_fill(lr, d) < 0)
			return -1;
	}
}

void tg_lr_release(struct tg_lr *lr)
{
	if (lr->gz)
		gzclose((gzFile)lr->gz);
	lr->gz = NULL;
	if (lr->fd >= 0)
		close(lr->fd);
	lr->fd = -1;
	free(lr->buf);
	lr->buf = NULL;
}
