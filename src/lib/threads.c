/*
 * threads.c - per-thread figures and cross-thread frees of a run (threads.h).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "held.h"
#include "peaks_out.h"
#include "threads.h"

void tg_threads_release(struct tg_threads *t)
{
	if (t->accounting)
		tg_summary_release(&t->sum);
	free(t->v);
	memset(t, 0, sizeof(*t));
}

/* The summary's figure K of thread e (TG_SUM_FIGURES_INIT order). */
enum { THR_REQUESTED = 0, THR_FREED = 1, THR_PEAK = 5 };

static int threads_from_summary(struct tg_threads *t, struct tg_diag *d)
{
	if (!(t->v = calloc(t->sum.n_threads ? t->sum.n_threads : 1, sizeof(*t->v))))
		return tg_error(d, "out of memory");
	for (size_t i = 0; i < t->sum.n_threads; i++) {
		const struct tg_sum_entity *e = &t->sum.threads[i];
		struct tg_thread_row *r = &t->v[t->n++];

		r->name = e->name;
		r->has_counts = 1;
		r->allocated = e->fig[THR_REQUESTED];
		r->freed = e->fig[THR_FREED];
		r->peak = e->fig[THR_PEAK];
		r->has_live_at_end = e->has_live_at_end;
		r->live_at_end = e->live_at_end;
	}
	return 0;
}

/* One thread's held curve: its highest level and its last. */
struct threads_held {
	int seen;
	int64_t peak, last;
};

static int threads_held_step(void *ctx, double x, const char *xs, size_t xlen, int64_t us,
			     int64_t v)
{
	struct threads_held *h = ctx;

	(void)x;
	(void)xs;
	(void)xlen;
	(void)us;
	if (!h->seen || v > h->peak)
		h->peak = v;
	h->last = v;
	h->seen = 1;
	return 0;
}

static int threads_from_dumps(struct tg_threads *t, const struct tg_dumpfile *files, size_t n,
			      const struct tg_memg_report *r, struct tg_diag *d)
{
	if (!(t->v = calloc(n ? n : 1, sizeof(*t->v))))
		return tg_error(d, "out of memory");
	for (size_t i = 0; i < n; i++) {
		struct threads_held h = { 0 };
		char why[TG_HELD_WHY_MAX];
		int rc;

		if (files[i].kind != TG_DUMP_MEM)
			continue;
		if (r && r->start)
			r->start(r->ctx, &files[i]);
		if ((rc = tg_held_read(&files[i], threads_held_step, &h, why, d)) < 0)
			return -1;
		if (rc == 1 || !h.seen) {
			if (r && r->skip)
				r->skip(r->ctx, &files[i], rc == 1 ? why : "no events");
			continue;
		}
		t->v[t->n].name = files[i].thread;
		t->v[t->n].peak = h.peak;
		t->v[t->n].has_live_at_end = 1;
		t->v[t->n].live_at_end = h.last;
		t->n++;
	}
	return 0;
}

int tg_threads_load_summary(struct tg_threads *t, const char *run_dir, struct tg_diag *d)
{
	memset(t, 0, sizeof(*t));
	if (tg_summary_read(&t->sum, run_dir, d) < 0)
		return 1;
	t->accounting = 1;
	if (threads_from_summary(t, d) < 0) {
		tg_threads_release(t);
		return -1;
	}
	return 0;
}

int tg_threads_load_dumps(struct tg_threads *t, const struct tg_dumpfile *files, size_t n,
			  const struct tg_memg_report *r, struct tg_diag *d)
{
	memset(t, 0, sizeof(*t));
	if (threads_from_dumps(t, files, n, r, d) < 0)
		goto fail;
	if (!t->n) {
		tg_error(d, "no thread figures: no thread dump with held memory");
		goto fail;
	}
	return 0;
fail:
	tg_threads_release(t);
	return -1;
}

static void threads_json_num(FILE *f, int known, int64_t v)
{
	if (known)
		fprintf(f, "%" PRId64, v);
	else
		fputs("null", f);
}

int tg_threads_write_json(FILE *f, const struct tg_threads *t)
{
	fputs("{\"threads\": [", f);
	for (size_t i = 0; i < t->n; i++) {
		const struct tg_thread_row *r = &t->v[i];

		fputs(i ? ",\n  {\"name\": " : "\n  {\"name\": ", f);
		tg_json_string(f, r->name, strlen(r->name));
		fputs(", \"allocated\": ", f);
		threads_json_num(f, r->has_counts, r->allocated);
		fputs(", \"freed\": ", f);
		threads_json_num(f, r->has_counts, r->freed);
		fprintf(f, ", \"peak\": %" PRId64 ", \"live_at_end\": ", r->peak);
		threads_json_num(f, r->has_live_at_end, r->live_at_end);
		fputc('}', f);
	}
	fputs(t->n ? "\n ],\n \"freed_by\": [" : "],\n \"freed_by\": [", f);
	for (size_t i = 0; t->accounting && i < t->sum.n_pairs; i++) {
		const struct tg_sum_pair *p = &t->sum.pairs[i];

		fputs(i ? ",\n  {\"allocated_in\": " : "\n  {\"allocated_in\": ", f);
		tg_json_string(f, p->allocated_in, strlen(p->allocated_in));
		fputs(", \"freed_in\": ", f);
		tg_json_string(f, p->freed_in, strlen(p->freed_in));
		fprintf(f, ", \"bytes\": %" PRId64 ", \"blocks\": %" PRId64 "}", p->bytes, p->blocks);
	}
	fputs(t->accounting && t->sum.n_pairs ? "\n ]}\n" : "]}\n", f);
	return ferror(f) ? EOF : 0;
}

/* A size for people: B, KB, MB, GB (powers of 1024), 3 significant digits. */
static void threads_size(char *buf, size_t n, int64_t v)
{
	static const char *const unit[] = { "B", "KB", "MB", "GB", "TB" };
	double x = (double)(v < 0 ? -v : v);
	int u = 0;

	while (x >= 1024 && u < 4) {
		x /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, n, "%s%.0f B", v < 0 ? "-" : "", x);
	else
		snprintf(buf, n, "%s%.*f %s", v < 0 ? "-" : "", x < 10 ? 2 : x < 100 ? 1 : 0, x,
			 unit[u]);
}

int tg_threads_write_text(FILE *f, const struct tg_threads *t)
{
	int w = 6;
	char a[32], b[32], c[32], e[32];

	for (size_t i = 0; i < t->n; i++) {
		int l = (int)strlen(t->v[i].name);
		if (l > w)
			w = l;
	}
	for (size_t i = 0; t->accounting && i < t->sum.n_pairs; i++) {
		int l = (int)strlen(t->sum.pairs[i].allocated_in);
		int m = (int)strlen(t->sum.pairs[i].freed_in);
		if (l > w)
			w = l;
		if (m > w)
			w = m;
	}
	if (w < 12)
		w = 12;  /* "ALLOCATED IN" */
	if (w > 40)
		w = 40;
	fprintf(f, "%-*s  %11s  %11s  %11s  %11s\n", w, "THREAD", "ALLOCATED", "FREED", "PEAK",
		"LIVE AT END");
	for (size_t i = 0; i < t->n; i++) {
		const struct tg_thread_row *r = &t->v[i];

		threads_size(a, sizeof(a), r->allocated);
		threads_size(b, sizeof(b), r->freed);
		threads_size(c, sizeof(c), r->peak);
		threads_size(e, sizeof(e), r->live_at_end);
		tg_fputs_safe_pad(f, r->name, w);
		fprintf(f, "  %11s  %11s  %11s  %11s\n", r->has_counts ? a : "-",
			r->has_counts ? b : "-", c, r->has_live_at_end ? e : "-");
	}
	if (!t->accounting) {
		fputs("\n(no accounting: PEAK and LIVE AT END are each thread's held memory, "
		      "ALLOCATED and FREED and the\ncross-thread frees need a run with "
		      "accounting on: threadgraph run --accounting)\n", f);
		return ferror(f) ? EOF : 0;
	}
	if (!t->sum.has_freed_by) {
		fputs("\n(cross-thread frees were not counted: the summary was written by a "
		      "threadgraph without them)\n", f);
		return ferror(f) ? EOF : 0;
	}
	if (!t->sum.n_pairs) {
		fputs("\nno block was freed by a thread other than the one that allocated it\n", f);
		return ferror(f) ? EOF : 0;
	}
	fputs("\nFreed by another thread than the one that allocated it:\n", f);
	fprintf(f, "%-*s  %-*s  %11s  %8s\n", w, "ALLOCATED IN", w, "FREED IN", "BYTES", "BLOCKS");
	for (size_t i = 0; i < t->sum.n_pairs; i++) {
		const struct tg_sum_pair *p = &t->sum.pairs[i];

		threads_size(a, sizeof(a), p->bytes);
		tg_fputs_safe_pad(f, p->allocated_in, w);
		fputs("  ", f);
		tg_fputs_safe_pad(f, p->freed_in, w);
		fprintf(f, "  %11s  %8" PRId64 "\n", a, p->blocks);
	}
	if (t->sum.freed_by_lost)
		fprintf(f, "  (and %" PRId64 " bytes between pairs of threads the recorder could "
			"not keep apart)\n", t->sum.freed_by_lost);
	return ferror(f) ? EOF : 0;
}
