/*
 * atomic_out.c - temp file + rename for every output.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_out.h"

/* Output files are large and written sequentially. */
#define TG_AOUT_BUF (1 << 20)

int tg_aout_names(struct tg_aout *a, const char *dir, const char *name, struct tg_diag *d)
{
	size_t n = strlen(dir) + strlen(name) + 64;

	memset(a, 0, sizeof(*a));
	a->final = malloc(n);
	a->tmp = malloc(n);
	if (!a->final || !a->tmp) {
		tg_aout_release(a);
		return tg_error(d, "out of memory");
	}
	/* "NAME", not "./NAME": the name as the user gave it (-o NAME) */
	if (!strcmp(dir, "."))
		snprintf(a->final, n, "%s", name);
	else
		snprintf(a->final, n, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/",
			 name);
	snprintf(a->tmp, n, "%s/.%s.tmp.%ld", dir, name, (long)getpid());
	return 0;
}

/*
 * Sets d to "unable to write 'FILE': ERR", FILE the file asked for (the
 * temporary name, which differs on every run, is an implementation detail):
 * when the temporary file could not be made (CREATING), why its folder matters.
 * Returns -1.
 */
static int aout_error(const struct tg_aout *a, int err, int creating, struct tg_diag *d)
{
	const char *slash = strrchr(a->final, '/');
	const char *base = slash ? slash + 1 : a->final;
	char shown[4200], dir[4200];

	if (a->shown_dir)
		snprintf(shown, sizeof(shown), "%s/%s", a->shown_dir, base);
	else
		snprintf(shown, sizeof(shown), "%s", a->final);
	if (a->shown_dir)
		snprintf(dir, sizeof(dir), "%s", a->shown_dir);
	else if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", slash == a->final ? 1 : (int)(slash - a->final),
			 a->final);
	if (creating && err == ENOENT)
		return tg_error(d, "unable to write '%s': %s (its directory '%s' does not exist)",
				shown, strerror(err), dir);
	if (creating && (err == EACCES || err == EPERM))
		return tg_error(d, "unable to write '%s': %s (its directory '%s' is not "
				"writable: the file is replaced whole, through a new file there)",
				shown, strerror(err), dir);
	return tg_error(d, "unable to write '%s': %s", shown, strerror(err));
}

static int aout_open(struct tg_aout *a, const char *dir, const char *shown, const char *name,
		     struct tg_diag *d)
{
	int fd;

	if (tg_aout_names(a, dir, name, d) < 0)
		return -1;
	a->shown_dir = shown;
	unlink(a->tmp); /* a leftover of a killed run with our pid */
	fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0) {
		aout_error(a, errno, 1, d);
		tg_aout_release(a);
		return -1;
	}
	a->f = fdopen(fd, "w");
	if (!a->f) {
		close(fd);
		tg_aout_abort(a);
		return tg_error(d, "out of memory");
	}
	setvbuf(a->f, NULL, _IOFBF, TG_AOUT_BUF);
	return 0;
}

int tg_aout_open(struct tg_aout *a, const char *dir, const char *name, struct tg_diag *d)
{
	return aout_open(a, dir, NULL, name, d);
}

int tg_aout_open_in(struct tg_aout *a, const char *dir, const char *shown,
		    const char *name, struct tg_diag *d)
{
	return aout_open(a, dir, shown, name, d);
}

/*
 * Whether PATH, which exists and is no regular file (a link, a device, a
 * pipe: LST its lstat), may be written through: the user's own, or in a
 * directory that no other user but root may write (so that no one else can
 * have put it there: /dev/stdout).  A link another user planted in a shared
 * directory is not followed (docs/security.md): the output replaces it, as a
 * file of that name (the rename fails where the directory forbids it).
 */
static int aout_special_trusted(const char *path, const struct stat *lst)
{
	const char *slash = strrchr(path, '/');
	struct stat dst;
	char *dir;
	int ok;

	if (lst->st_uid == geteuid())
		return 1;
	if (!slash)
		dir = strdup(".");
	else
		dir = strndup(path, slash == path ? 1 : (size_t)(slash - path));
	if (!dir)
		return 0;
	ok = stat(dir, &dst) == 0 && (dst.st_uid == 0 || dst.st_uid == geteuid())
	     && !(dst.st_mode & (S_IWGRP | S_IWOTH));
	free(dir);
	return ok;
}

int tg_aout_open_path(struct tg_aout *a, const char *path, struct tg_diag *d)
{
	const char *slash = strrchr(path, '/');
	struct stat st;
	char *dir;
	int rc;

	memset(a, 0, sizeof(*a));
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return tg_error(d, "'%s' is a directory: give the file to write", path);
	if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && aout_special_trusted(path, &st)) {
		/* a link, a device, a pipe of the user's: written through, never
		 * replaced */
		if (!(a->final = strdup(path)))
			return tg_error(d, "out of memory");
		if (!(a->f = fopen(path, "w"))) {
			tg_error(d, "unable to open '%s': %s", path, strerror(errno));
			tg_aout_release(a);
			return -1;
		}
		return 0;
	}
	if (!slash)
		return tg_aout_open(a, ".", path, d);
	if (!slash[1])
		return tg_error(d, "'%s' names a directory, not a file", path);
	if (!(dir = strndup(path, slash == path ? 1 : (size_t)(slash - path))))
		return tg_error(d, "out of memory");
	rc = tg_aout_open(a, dir, slash + 1, d);
	free(dir);
	return rc;
}

int tg_aout_commit(struct tg_aout *a, struct tg_diag *d)
{
	int bad = 0;

	if (a->f) {
		bad = fflush(a->f) != 0 || ferror(a->f);
		if (fclose(a->f) != 0)
			bad = 1;
		a->f = NULL;
		if (bad) {
			aout_error(a, errno, 0, d);
			goto fail;
		}
	}
	if (!a->tmp)
		return 0;  /* written directly (tg_aout_open_path) */
	if (rename(a->tmp, a->final) < 0) {
		aout_error(a, errno, 0, d);
		goto fail;
	}
	return 0;
fail:
	if (a->tmp)
		unlink(a->tmp);
	return -1;
}

void tg_aout_abort(struct tg_aout *a)
{
	if (a->f) {
		fclose(a->f);
		a->f = NULL;
	}
	if (a->tmp)
		unlink(a->tmp);
	tg_aout_release(a);
}

void tg_aout_release(struct tg_aout *a)
{
	free(a->final);
	free(a->tmp);
	a->final = a->tmp = NULL;
	a->shown_dir = NULL;
}
