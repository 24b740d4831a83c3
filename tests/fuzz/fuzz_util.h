/*
 * fuzz_util.h - helpers shared by the libFuzzer targets in tests/fuzz/.
 *
 * The analysis library reads dumps by path, so targets that exercise a reader
 * put the fuzz input into an anonymous memory file (memfd) and hand the library
 * its /proc/self/fd path: no disk I/O, nothing left behind, and each run opens
 * the file afresh exactly as the CLI opens a dump.
 */
#ifndef TG_FUZZ_UTIL_H
#define TG_FUZZ_UTIL_H

#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* A dump held in a memfd; path is what the library opens. */
struct fz_file {
	int fd;
	char path[64];
};

/* Creates a memory file holding data[0..n); aborts on failure (not a finding). */
static inline void fz_file_open(struct fz_file *f, const uint8_t *data, size_t n)
{
	size_t off = 0;

	f->fd = memfd_create("tg-fuzz", MFD_CLOEXEC);
	if (f->fd < 0) {
		perror("memfd_create");
		abort();
	}
	while (off < n) {
		ssize_t w = write(f->fd, data + off, n - off);
		if (w <= 0) {
			perror("write");
			abort();
		}
		off += (size_t)w;
	}
	snprintf(f->path, sizeof(f->path), "/proc/self/fd/%d", f->fd);
}

static inline void fz_file_close(struct fz_file *f)
{
	close(f->fd);
	f->fd = -1;
}

/* An exact-size heap copy of the input, so ASan sees any read past its end. */
static inline char *fz_dup(const uint8_t *data, size_t n)
{
	char *p = malloc(n ? n : 1);

	if (!p)
		abort();
	memcpy(p, data, n);
	return p;
}

/* A NUL-terminated heap copy. */
static inline char *fz_strdup(const uint8_t *data, size_t n)
{
	char *p = malloc(n + 1);

	if (!p)
		abort();
	memcpy(p, data, n);
	p[n] = '\0';
	return p;
}

/* A property of the target's output does not hold: report and crash. */
#define FZ_ASSERT(cond) do { \
	if (!(cond)) { \
		fprintf(stderr, "%s:%d: property violated: %s\n", __FILE__, __LINE__, #cond); \
		abort(); \
	} \
} while (0)

/* Non-zero when p lies inside [base, base+n] (one past the end allowed). */
static inline int fz_within(const char *p, size_t len, const char *base, size_t n)
{
	return p >= base && len <= n && (size_t)(p - base) <= n - len;
}

/* Non-zero when s[0..n) holds a UTF-8 C1 control (U+0080-U+009F: C2 80-C2 9F),
 * which some terminals take as CSI and friends. */
static inline int fz_has_c1(const char *s, size_t n)
{
	for (size_t i = 0; i + 1 < n; i++)
		if ((unsigned char)s[i] == 0xc2 && (unsigned char)s[i + 1] >= 0x80 &&
		    (unsigned char)s[i + 1] <= 0x9f)
			return 1;
	return 0;
}

#endif
