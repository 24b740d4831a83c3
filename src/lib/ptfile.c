/*
 * ptfile.c - binary temporary series (ptfile.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture_read.h"
#include "numparse.h"
#include "ptfile.h"

#define TG_PTFILE_BUF (1 << 15)
#define PT_HEAD (1 + 2 * sizeof(int64_t))  /* the tag, x or us, v */


size_t tg_pt_text(const struct tg_pt *p, char *buf)
{
	if (p->has_us)
		return tg_cap_fmt_time(buf, p->us);
	memcpy(buf, p->xs, p->len);
	return p->len;
}

size_t tg_pt_line_of(struct tg_pt_line *l, const struct tg_pt *p, int64_t v)
{
	l->v = v;
	l->us = p->us;
	l->has_us = (unsigned char)p->has_us;
	l->len = (unsigned char)(p->has_us ? 0 : p->len);
	memcpy(l->xs, p->xs, l->len);
	return offsetof(struct tg_pt_line, xs) + l->len;
}

size_t tg_pt_line_time(const struct tg_pt_line *l, char *buf)
{
	if (l->has_us)
		return tg_cap_fmt_time(buf, l->us);
	memcpy(buf, l->xs, l->len);
	return l->len;
}

int tg_ptfile_open(struct tg_ptfile *f, const char *dir, const char *name, struct tg_diag *d)
{
	char path[4200];

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
		return tg_error(d, "output directory name too long");
	if (!(f->buf = malloc(TG_PTFILE_BUF)))
		return tg_error(d, "out of memory");
	f->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (f->fd < 0) {
		tg_error(d, "unable to write '%s': %s", path, strerror(errno));
		free(f->buf);
		f->buf = NULL;
		return -1;
	}
	unlink(path);  /* anonymous from now on: nothing left behind */
	return 0;
}

static int ptfile_flush(struct tg_ptfile *f, struct tg_diag *d)
{
	size_t done = 0;

	while (done < f->n) {
		ssize_t w = write(f->fd, f->buf + done, f->n - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return tg_error(d, "unable to write a temporary series: %s",
					w < 0 ? strerror(errno) : "no space");
		done += (size_t)w;
	}
	f->n = 0;
	return 0;
}

int tg_ptfile_put(struct tg_ptfile *f, double x, int64_t v, const char *xs, size_t len,
		  struct tg_diag *d)
{
	char *r;

	if (len > TG_PT_TEXT_MAX)
		len = TG_PT_TEXT_MAX;
	if (f->n + PT_HEAD + len > TG_PTFILE_BUF && ptfile_flush(f, d) < 0)
		return -1;
	r = f->buf + f->n;
	r[0] = (char)(unsigned char)len;
	memcpy(r + 1, &x, sizeof(x));
	memcpy(r + 1 + sizeof(x), &v, sizeof(v));
	memcpy(r + PT_HEAD, xs, len);
	f->n += PT_HEAD + len;
	f->points++;
	return 0;
}

int tg_ptfile_put_us(struct tg_ptfile *f, int64_t us, int64_t v, double *x,
		     struct tg_diag *d)
{
	char *r;

	if (!TG_PT_US_EXACT(us)) {  /* no capture's: kept as text */
		char xs[TG_CAP_TIME_MAX];
		size_t len = tg_cap_fmt_time(xs, us), used;

		*x = tg_parse_double(xs, len, &used);
		return tg_ptfile_put(f, *x, v, xs, len, d);
	}
	*x = (double)us / 1e6;
	if (f->n + PT_HEAD > TG_PTFILE_BUF && ptfile_flush(f, d) < 0)
		return -1;
	r = f->buf + f->n;
	r[0] = (char)TG_PT_TAG_US;
	memcpy(r + 1, &us, sizeof(us));
	memcpy(r + 1 + sizeof(us), &v, sizeof(v));
	f->n += PT_HEAD;
	f->points++;
	return 0;
}

int tg_ptfile_rewind(struct tg_ptfile *f, struct tg_diag *d)
{
	if (!f->reading && ptfile_flush(f, d) < 0)
		return -1;
	if (lseek(f->fd, 0, SEEK_SET) < 0)
		return tg_error(d, "unable to read a temporary series: %s", strerror(errno));
	f->reading = 1;
	f->n = f->at = 0;
	return 0;
}

/* Reads on until buf holds `need` bytes from at.  1, 0 at the end, or -1. */
static int ptfile_fill(struct tg_ptfile *f, size_t need, struct tg_diag *d)
{
	if (f->n - f->at >= need)
		return 1;
	memmove(f->buf, f->buf + f->at, f->n - f->at);
	f->n -= f->at;
	f->at = 0;
	while (f->n < need) {
		ssize_t r = read(f->fd, f->buf + f->n, TG_PTFILE_BUF - f->n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return tg_error(d, "unable to read a temporary series: %s",
					strerror(errno));
		if (r == 0)
			return f->n ? tg_error(d, "a temporary series ends inside a point") : 0;
		f->n += (size_t)r;
	}
	return 1;
}

int tg_ptfile_get(struct tg_ptfile *f, struct tg_pt *p, struct tg_diag *d)
{
	const char *r;
	unsigned char tag;
	int got;

	if ((got = ptfile_fill(f, PT_HEAD, d)) <= 0)
		return got;
	r = f->buf + f->at;
	tag = (unsigned char)r[0];
	memcpy(&p->v, r + 1 + sizeof(int64_t), sizeof(p->v));
	if (tag == TG_PT_TAG_US) {
		memcpy(&p->us, r + 1, sizeof(p->us));
		p->x = (double)p->us / 1e6;
		p->has_us = 1;
		p->len = 0;
		f->at += PT_HEAD;
		return 1;
	}
	memcpy(&p->x, r + 1, sizeof(p->x));
	p->has_us = 0;
	p->len = tag;
	if ((got = ptfile_fill(f, PT_HEAD + p->len, d)) <= 0)
		return got < 0 ? -1 : tg_error(d, "a temporary series ends inside a point");
	memcpy(p->xs, f->buf + f->at + PT_HEAD, p->len);
	p->xs[p->len] = '\0';
	f->at += PT_HEAD + p->len;
	return 1;
}

void tg_ptfile_release(struct tg_ptfile *f)
{
	if (f->fd >= 0)
		close(f->fd);
	free(f->buf);
	f->fd = -1;
	f->buf = NULL;
}
