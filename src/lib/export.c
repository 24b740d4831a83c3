/*
 * export.c - write a capture's text dumps (export.h).
 *
 * One pass over each thread's stream writes its .mem and .stack lines together
 * through two 1 MiB buffers and write(2); nothing is allocated per record.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "export.h"
#include "peaks_out.h"
#include "recsrc.h"
#include "tg_format.h"

#define EXP_BUF (1u << 20)

/* An output file being written. */
struct exp_out {
	char *path;        /* owned */
	int fd;            /* -1 when not open */
	size_t n;          /* bytes in buf */
	char *buf;         /* EXP_BUF bytes */
	uint64_t *total;   /* bytes formatted so far, all files (shared) */
	uint64_t max;      /* bound of *total (0: none) */
};

/* The files of one export, to remove them all on failure. */
struct exp_state {
	char **created;    /* paths of the files created so far (owned) */
	size_t n_created, alloc;
};

static char *exp_path(const char *dir, const char *base, const char *suffix)
{
	size_t dl = strlen(dir), bl = strlen(base), sl = strlen(suffix);
	char *p = malloc(dl + bl + sl + 2);

	if (p) {
		memcpy(p, dir, dl);
		p[dl] = '/';
		memcpy(p + dl + 1, base, bl);
		memcpy(p + dl + 1 + bl, suffix, sl + 1);
	}
	return p;
}

/* mkdir -p dir (mode 0755, reduced by the umask); 0 or -1. */
static int exp_mkdirs(const char *dir, struct tg_diag *d)
{
	char *p = strdup(dir);
	struct stat st;

	if (!p)
		return tg_error(d, "out of memory");
	if (!*p) {
		free(p);
		return tg_error(d, "unable to create directory '': %s", strerror(ENOENT));
	}
	for (char *s = p + 1; ; s++) {
		if (*s == '/' || !*s) {
			char c = *s;
			*s = '\0';
			if (mkdir(p, 0755) < 0 && errno != EEXIST) {
				tg_error(d, "unable to create directory '%s': %s", p, strerror(errno));
				free(p);
				return -1;
			}
			*s = c;
			if (!c)
				break;
		}
	}
	free(p);
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return tg_error(d, "'%s' is not a directory", dir);
	return 0;
}

static int exp_flush(struct exp_out *o, struct tg_diag *d)
{
	size_t off = 0;

	while (off < o->n) {
		ssize_t w = write(o->fd, o->buf + off, o->n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return tg_error(d, "unable to write '%s': %s", o->path,
					w < 0 ? strerror(errno) : "short write");
		off += (size_t)w;
	}
	o->n = 0;
	return 0;
}

/* Opens o->path (created, never replaced); 0 or -1. */
static int exp_open(struct exp_state *x, struct exp_out *o, struct tg_diag *d)
{
	if (x->n_created == x->alloc) {
		size_t na = x->alloc ? 2 * x->alloc : 16;
		char **nv = realloc(x->created, na * sizeof(*nv));
		if (!nv)
			return tg_error(d, "out of memory");
		x->created = nv;
		x->alloc = na;
	}
	o->fd = open(o->path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (o->fd < 0 && errno == EEXIST)
		return tg_error(d, "'%s' exists: export never overwrites a file", o->path);
	if (o->fd < 0)
		return tg_error(d, "unable to create '%s': %s", o->path, strerror(errno));
	if (!(x->created[x->n_created] = strdup(o->path))) {
		close(o->fd);
		o->fd = -1;
		unlink(o->path);
		return tg_error(d, "out of memory");
	}
	x->n_created++;
	o->n = 0;
	return 0;
}

static int exp_close(struct exp_out *o, struct tg_diag *d)
{
	int ret = 0;

	if (o->fd < 0)
		return 0;
	if (exp_flush(o, d) < 0)
		ret = -1;
	if (close(o->fd) < 0 && !ret)
		ret = tg_error(d, "unable to write '%s': %s", o->path, strerror(errno));
	o->fd = -1;
	return ret;
}

/* Appends the text of r to o; 0 or -1. */
static int exp_put(struct exp_out *o, const struct tg_cap_rec_data *r, int timed,
		   struct tg_diag *d)
{
	size_t n;

	if (EXP_BUF - o->n < (1u << 16) && exp_flush(o, d) < 0)
		return -1;
	n = tg_src_fmt_record(o->buf + o->n, EXP_BUF - o->n, r, timed);
	if (!n) {
		/* a record longer than the buffer's slack: flush and retry once */
		if (exp_flush(o, d) < 0)
			return -1;
		n = tg_src_fmt_record(o->buf, EXP_BUF, r, timed);
		if (!n)
			return tg_error(d, "a record of '%s' is too long to export", o->path);
	}
	o->n += n;
	*o->total += n;
	if (o->max && *o->total > o->max)
		return tg_error(d, "the text would be more than %llu MB (calls nested %u "
				"deep in '%s'): give --max-output MB to go further (0: no "
				"limit)", (unsigned long long)(o->max >> 20), r->depth, o->path);
	return 0;
}

/* Writes one stream (t NULL: process samples) into mem and stack (NULL: skip). */
static int exp_stream(const struct tg_capture *cap, const struct tg_cap_thread *t,
		      struct exp_out *mem, struct exp_out *stack, struct tg_export_stats *st,
		      struct tg_diag *d)
{
	struct tg_capcur c;
	struct tg_cap_rec_data r;
	int timed = (cap->flags & TG_CAP_F_TIME) != 0, got, ret = -1;

	tg_capcur_init(&c, cap, t);
	while ((got = tg_capcur_next(&c, &r, d)) > 0) {
		struct exp_out *o = r.type == TG_CAP_REC_CALL ? stack : mem;
		if (!o)
			continue;
		if (exp_put(o, &r, timed, d) < 0)
			goto out;
		st->records++;
	}
	if (got < 0)
		goto out;
	st->dropped += c.dropped;
	ret = 0;
out:
	tg_capcur_release(&c);
	return ret;
}

/* Writes dir/runinfo.json for an export: each thread's files and native id
 * (the collector's runs of gc.txt name threads by it: report's marks), and, of
 * a capture's kept segments, where they begin, the calls open there (its
 * head's), that a fold of the text pairs them as a fold of the capture does
 * (the returns of those calls, some before the first .stack line, are in the
 * .mem), and the memory it held there.  Of a whole capture it has none of
 * the segments' keys, so that the text is read as it was without it.  One
 * already there (the run's own, beside the capture) is left as it is
 * (st->runinfo_kept).  0 or -1. */
static int exp_runinfo(struct exp_state *x, const struct tg_capture *cap, const char *dir,
		       int want_mem, int want_stack, struct tg_export_stats *st,
		       struct tg_diag *d)
{
	struct exp_out o = { NULL, -1, 0, NULL, NULL, 0 };
	char *text = NULL, *name = NULL, kept[TG_CAP_TIME_MAX];
	const int segs = cap->seg_first > 1;
	size_t len = 0, klen;
	struct stat sb;
	FILE *f;
	int ret = -1;

	if (!(o.path = exp_path(dir, TG_RUNINFO_NAME, "")))
		return tg_error(d, "out of memory");
	if (lstat(o.path, &sb) == 0) {
		st->runinfo_kept = 1;
		free(o.path);
		return 0;
	}
	if (!(f = open_memstream(&text, &len))) {
		free(o.path);
		return tg_error(d, "out of memory");
	}
	fprintf(f, "{\n  \"format\": 1,\n  \"pid\": %u,\n", (unsigned)cap->pid);
	if (segs) {
		klen = tg_cap_fmt_time(kept, cap->kept_from_us);
		fprintf(f, "  \"kept_from\": %.*s,\n", (int)klen, kept);
		/* what the commands reading the text say of it, as they do of the
		 * capture: the segments kept, the run's start (their time axis) and end */
		klen = tg_cap_fmt_time(kept, cap->start_us);
		fprintf(f, "  \"segments_kept\": [%u, %u],\n  \"start_time\": %.*s,\n",
			cap->seg_first, cap->seg_last, (int)klen, kept);
		if (cap->has_end) {
			klen = tg_cap_fmt_time(kept, cap->end_us);
			fprintf(f, "  \"end_time\": %.*s,\n", (int)klen, kept);
		} else {
			fputs("  \"end_time\": null,\n", f);
		}
	}
	fputs("  \"threads\": [", f);
	for (size_t i = 0; i < cap->n_threads; i++) {
		const struct tg_cap_thread *t = &cap->threads[i];
		fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
		tg_json_string(f, t->name, strlen(t->name));
		fprintf(f, ", \"native_id\": %llu, \"ident\": %llu",
			(unsigned long long)t->native_id, (unsigned long long)t->ident);
		for (int k = 0; k < 2; k++) {
			fprintf(f, ", \"%s\": ", k ? "stack" : "mem");
			free(name);
			if (!(k ? want_stack : want_mem)) {
				name = NULL;
				fputs("null", f);
			} else if ((name = exp_path(".", t->base, k ? TG_STACK_SUFFIX : TG_MEM_SUFFIX))) {
				tg_json_string(f, name + 2, strlen(name + 2));
			}
		}
		if (!segs) {
			fputs("}", f);
			continue;
		}
		fprintf(f, ", \"open_at_start\": %llu",
			(unsigned long long)(t->has_state ? t->state.depth : 0));
		/* what it held there, by depth, as the head gives it: held memory
		 * (memg --held) goes on from it as it does on the capture */
		if (t->has_state) {
			fputs(", \"held_at_start\": [", f);
			if (!t->state.n_lvl)
				fprintf(f, "%lld", (long long)t->state.mem);
			for (size_t k = 0; k < t->state.n_lvl; k++)
				fprintf(f, "%s%lld", k ? ", " : "", (long long)t->state.lvl[k]);
			fputs("]", f);
		}
		fputs("}", f);
	}
	fputs("\n  ]\n}\n", f);
	free(name);
	if (fclose(f) != 0 || !text) {
		tg_error(d, "out of memory");
		goto out;
	}
	if (exp_open(x, &o, d) < 0)
		goto out;
	o.buf = text;
	o.n = len;
	if (exp_close(&o, d) < 0)
		goto out;
	st->files++;
	ret = 0;
out:
	if (o.fd >= 0)
		close(o.fd);
	free(o.path);
	free(text);
	return ret;
}

uint64_t tg_export_default_max(const struct tg_capture *cap)
{
	return (1ull << 30) + 100 * (uint64_t)cap->size;
}

int tg_export_run(const struct tg_capture *cap, const char *dir, uint64_t max_bytes,
		  struct tg_export_stats *st, struct tg_diag *d)
{
	struct exp_state x = { 0 };
	uint64_t total = 0;
	struct exp_out mem = { NULL, -1, 0, NULL, &total, max_bytes };
	struct exp_out stack = { NULL, -1, 0, NULL, &total, max_bytes };
	int want_mem = (cap->flags & TG_CAP_F_MEMORY) != 0;
	int want_stack = (cap->flags & TG_CAP_F_STACK) != 0;
	int ret = -1;
	struct stat sb;

	memset(st, 0, sizeof(*st));
	if (exp_mkdirs(dir, d) < 0)
		return -1;
	/* refuse before writing anything when one of the files exists */
	for (size_t i = 0; i <= cap->n_threads; i++) {
		for (int k = 0; k < 2; k++) {
			char *p;
			int exists;
			if (i == cap->n_threads) {
				if (k || !(cap->flags & TG_CAP_F_PROCESS))
					continue;
				p = exp_path(dir, TG_PROCESS_BASENAME, TG_MEM_SUFFIX);
			} else {
				if (!(k ? want_stack : want_mem))
					continue;
				p = exp_path(dir, cap->threads[i].base,
					     k ? TG_STACK_SUFFIX : TG_MEM_SUFFIX);
			}
			if (!p)
				return tg_error(d, "out of memory");
			exists = lstat(p, &sb) == 0;
			if (exists)
				tg_error(d, "'%s' exists: export never overwrites a file "
					 "(give another directory with -o)", p);
			free(p);
			if (exists)
				return -1;
		}
	}
	mem.buf = malloc(EXP_BUF);
	stack.buf = malloc(EXP_BUF);
	if (!mem.buf || !stack.buf) {
		tg_error(d, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < cap->n_threads; i++) {
		const struct tg_cap_thread *t = &cap->threads[i];

		free(mem.path);
		free(stack.path);
		mem.path = exp_path(dir, t->base, TG_MEM_SUFFIX);
		stack.path = exp_path(dir, t->base, TG_STACK_SUFFIX);
		if (!mem.path || !stack.path) {
			tg_error(d, "out of memory");
			goto out;
		}
		if ((want_mem && exp_open(&x, &mem, d) < 0) ||
		    (want_stack && exp_open(&x, &stack, d) < 0))
			goto out;
		if (exp_stream(cap, t, want_mem ? &mem : NULL, want_stack ? &stack : NULL, st,
			       d) < 0)
			goto out;
		if (exp_close(&mem, d) < 0 || exp_close(&stack, d) < 0)
			goto out;
		st->files += (unsigned long)(want_mem + want_stack);
	}
	if (cap->flags & TG_CAP_F_PROCESS) {
		free(mem.path);
		if (!(mem.path = exp_path(dir, TG_PROCESS_BASENAME, TG_MEM_SUFFIX))) {
			tg_error(d, "out of memory");
			goto out;
		}
		if (exp_open(&x, &mem, d) < 0 || exp_stream(cap, NULL, &mem, NULL, st, d) < 0 ||
		    exp_close(&mem, d) < 0)
			goto out;
		st->files++;
	}
	if (exp_runinfo(&x, cap, dir, want_mem, want_stack, st, d) < 0)
		goto out;
	ret = 0;
out:
	if (mem.fd >= 0)
		close(mem.fd);
	if (stack.fd >= 0)
		close(stack.fd);
	for (size_t i = 0; i < x.n_created; i++) {
		if (ret < 0)
			unlink(x.created[i]);
		free(x.created[i]);
	}
	free(x.created);
	free(mem.path);
	free(stack.path);
	free(mem.buf);
	free(stack.buf);
	return ret;
}
