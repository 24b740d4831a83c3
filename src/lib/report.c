/*
 * report.c - the one-page HTML report of a run (report.h).
 *
 * Each section is built from the library's own pieces: memg's graph and peak
 * selection (memg.c), decorate-stack's subtree (decorate.c), the frame tree
 * and its SVG (fold.c, flamesvg.c), the accounting tables and histogram
 * (acct_out.c).  Text reports that the library writes to a FILE * go through a
 * temporary file and are copied into the page escaped.  A binary capture is read
 * natively (dumpset.h, recsrc.h): its files are the ones export would write, so
 * the page is the one made from its exported text.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "aggfile.h"
#include "acct_out.h"
#include "decorate.h"
#include "dumpset.h"
#include "flamesvg.h"
#include "fold.h"
#include "held.h"
#include "gcruns.h"
#include "marks.h"
#include "linereader.h"
#include "markup.h"
#include "peaks.h"
#include "records.h"
#include "recsrc.h"
#include "report.h"
#include "runinfo.h"
#include "snapshot.h"
#include "tg_format.h"


/* Threads named in the report's first line; the others are counted. */
#define REP_HEADER_THREADS 20
/* The run's dump files, as memg takes them. */
struct rep_files {
	struct tg_dumpfile *v;   /* thread .mem files (sorted), then process.mem */
	char **paths;            /* owned paths of v[] */
	size_t n, threads;       /* all; thread files only */
	int has_stack;           /* some thread has a .stack file */
	const struct tg_capture *cap; /* the run's binary capture, or NULL: text dumps */
	struct tg_capture *own_cap;   /* cap when opened here (freed on release) */
	struct tg_dumpset agg_set;    /* an aggregate run's curves (dumpset.h), or empty */
	int sampled;             /* a sampled run: a .mem line is a reading of the
				    thread's memory, not a call's return (rep_sampled) */
	int aggregate;           /* an aggregate run: its series are readings of
				    each thread's curve too, no record per call */
	unsigned long long dropped; /* records the recorder dropped in a text run
				       (runinfo.json): .mem and .stack may not pair */
};

static void rep_note(const struct tg_report_cb *cb, const char *msg)
{
	if (cb && cb->note)
		cb->note(cb->ctx, msg);
}

/* A stage begins: said to the caller (the sections take minutes on a large run). */
static void rep_step(const struct tg_report_cb *cb, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void rep_step(const struct tg_report_cb *cb, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	if (!cb || !cb->step)
		return;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	cb->step(cb->ctx, what);
}

static void rep_files_release(struct rep_files *r)
{
	for (size_t i = 0; i < r->n; i++) {
		tg_dumpfile_release(&r->v[i]);
		free(r->paths[i]);
	}
	free(r->v);
	free(r->paths);
	tg_dumpset_free_capture(r->own_cap);
	tg_dumpset_release(&r->agg_set);
	memset(r, 0, sizeof(*r));
}


static int rep_is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int rep_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Lists DIR's thread .mem files and process.mem into R.  0 or -1. */
static int rep_files_list(struct rep_files *r, const char *dir, struct tg_diag *d)
{
	char **names = NULL;
	size_t n = 0, k, i;
	int process = 0, ret = -1;

	memset(r, 0, sizeof(*r));
	if (tg_dir_names(dir, TG_MEM_SUFFIX, 1, &names, &n, d) < 0)
		return -1;
	for (i = k = 0; i < n; i++) {  /* the process file apart, last */
		size_t len = strlen(names[i]);
		if (len > 3 && !strcmp(names[i] + len - 3, ".gz") && k &&
		    strlen(names[k - 1]) == len - 3 && !strncmp(names[k - 1], names[i], len - 3)) {
			free(names[i]);  /* X.mem and X.mem.gz: one thread, the plain file */
			continue;
		}
		if (!strcmp(names[i], TG_PROCESS_BASENAME TG_MEM_SUFFIX) ||
		    !strcmp(names[i], TG_PROCESS_BASENAME TG_MEM_SUFFIX ".gz")) {
			if (!process)
				process = names[i][len - 1] == 'z' ? 2 : 1;
			free(names[i]);
		} else {
			names[k++] = names[i];
		}
	}
	n = k;
	if (!(r->v = calloc(n + 1, sizeof(*r->v))) || !(r->paths = calloc(n + 1, sizeof(char *))))
		goto oom;
	for (i = 0; i <= n; i++) {
		char *stack;
		if (i == n && !process)
			break;
		if (asprintf(&r->paths[i], "%s/%s", dir,
			     i < n ? names[i] : process == 2 ? TG_PROCESS_BASENAME TG_MEM_SUFFIX ".gz"
							      : TG_PROCESS_BASENAME TG_MEM_SUFFIX) < 0) {
			r->paths[i] = NULL;
			goto oom;
		}
		if (tg_dumpfile_init(&r->v[i], r->paths[i]) < 0) {
			free(r->paths[i]);
			goto oom;
		}
		r->n++;
		if (i == n)
			break;
		r->threads++;
		{
			size_t blen = strlen(names[i]);  /* X.mem or X.mem.gz: X */
			if (blen > 3 && !strcmp(names[i] + blen - 3, ".gz"))
				blen -= 3;
			blen -= strlen(TG_MEM_SUFFIX);
			if (asprintf(&stack, "%s/%.*s%s", dir, (int)blen, names[i],
				     TG_STACK_SUFFIX) < 0)
				goto oom;
			r->has_stack |= rep_exists(stack);
			free(stack);
			if (!r->has_stack) {
				if (asprintf(&stack, "%s/%.*s%s.gz", dir, (int)blen, names[i],
					     TG_STACK_SUFFIX) < 0)
					goto oom;
				r->has_stack |= rep_exists(stack);
				free(stack);
			}
		}
	}
	ret = 0;
	goto out;
oom:
	tg_error(d, "out of memory");
	rep_files_release(r);
out:
	tg_dir_names_free(names, n);
	return ret;
}

/*
 * Lists the .mem files of capture CAP (as export would write them) into R,
 * thread files in name order then process.mem, as rep_files_list lists a text
 * run.  0 or -1.
 */
/* The thread curves of the aggregate run DIR as .mem files; 0 or -1. */
static int rep_files_aggregate(struct rep_files *r, char *dir, struct tg_diag *d)
{
	struct tg_dumpset *set = &r->agg_set;

	if (tg_dumpset_init(set, &dir, 1, TG_VIEW_MEM, d) < 0)
		return -1;
	if (!(r->v = calloc(set->n + 1, sizeof(*r->v))) ||
	    !(r->paths = calloc(set->n + 1, sizeof(char *))))
		return tg_error(d, "out of memory");
	for (size_t i = 0; i < set->n; i++) {
		if (!(r->paths[i] = strdup(set->v[i].path)))
			return tg_error(d, "out of memory");
		if (tg_dumpfile_init(&r->v[i], r->paths[i]) < 0) {
			free(r->paths[i]);
			r->paths[i] = NULL;
			return tg_error(d, "out of memory");
		}
		r->v[i].agg = set->v[i].agg;
		r->v[i].agg_thread = set->v[i].agg_thread;
		r->n = r->threads = i + 1;
	}
	return 0;
}

static int rep_files_capture(struct rep_files *r, const struct tg_capture *cap,
			     struct tg_diag *d)
{
	struct tg_dumpset set;
	size_t i, k = 0;
	int ret = -1;

	r->cap = cap;
	if (tg_dumpset_init_capture(&set, cap, TG_VIEW_MEM, d) < 0)
		goto out;
	if (!(r->v = calloc(set.n + 1, sizeof(*r->v))) ||
	    !(r->paths = calloc(set.n + 1, sizeof(char *))))
		goto oom;
	for (int process = 0; process < 2; process++)
		for (i = 0; i < set.n; i++) {
			const struct tg_dumpfile *src = &set.v[i];
			if ((src->kind == TG_DUMP_PROCESS) != process)
				continue;
			if (!(r->paths[k] = strdup(src->path)))
				goto oom;
			if (tg_dumpfile_init(&r->v[k], r->paths[k]) < 0) {
				free(r->paths[k]);
				r->paths[k] = NULL;
				goto oom;
			}
			r->v[k].kind = src->kind;
			r->v[k].cap = cap;
			r->v[k].cap_thread = src->cap_thread;
			r->n = ++k;
			if (!process)
				r->threads++;
		}
	/* a capture holds every call's record, stacks asked for or not: decorate-stack
	 * reads any thread's calls */
	r->has_stack = r->threads != 0;
	ret = 0;
	goto out;
oom:
	tg_error(d, "out of memory");
out:
	tg_dumpset_release(&set);
	return ret;
}

/* Whether R is a sampled run's (mode="sampled"): the first record of its
 * first text thread file that has one is the curve's pseudo-call
 * (tg_format.h).  Reads quietly: a malformed line is counted and said by the
 * sections that read the files. */
static int rep_sampled(const struct rep_files *r, int has_time)
{
	for (size_t i = 0; i < r->threads; i++) {
		const struct tg_dumpfile *df = &r->v[i];
		struct tg_diag quiet = { 0 };
		struct tg_src src;
		struct tg_memrec m;
		int got, sampled;

		if (df->kind != TG_DUMP_MEM || df->cap || df->agg)
			continue;
		if (tg_src_open(&src, df, has_time, 0, &quiet) < 0)
			continue;
		got = tg_src_next_mem(&src, &m, &quiet);
		/* m points into the source's buffer: compared before it is freed */
		sampled = got > 0 && m.file.len == sizeof(TG_CURVE_FILE) - 1 &&
			  memcmp(m.file.s, TG_CURVE_FILE, m.file.len) == 0 &&
			  m.func.len == sizeof(TG_CURVE_FUNC) - 1 &&
			  memcmp(m.func.s, TG_CURVE_FUNC, m.func.len) == 0;
		tg_src_release(&src);
		if (got > 0)
			return sampled;
	}
	return 0;
}

/* Copies TMP into OUT, escaped.  Rewinds TMP first. */
static void rep_copy_escaped(FILE *out, FILE *tmp)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;

	rewind(tmp);
	while ((len = getline(&line, &cap, tmp)) >= 0)
		tg_xml_text(out, line, (size_t)len);
	free(line);
}

/* Writes PATH's bytes as an <img> data: URI of type svg.  0 or -1. */
static int rep_inline_svg(FILE *out, const char *path, const char *alt, struct tg_diag *d)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf = NULL;
	long len;
	int ret = -1;

	if (!f)
		return tg_error(d, "unable to read '%s': %s", path, strerror(errno));
	if (fseek(f, 0, SEEK_END) < 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0) {
		tg_error(d, "unable to read '%s': %s", path, strerror(errno));
		goto out;
	}
	if (!(buf = malloc((size_t)len + 1))) {
		tg_error(d, "out of memory");
		goto out;
	}
	if (fread(buf, 1, (size_t)len, f) != (size_t)len) {
		tg_error(d, "unable to read '%s'", path);
		goto out;
	}
	fputs("<img class=\"graph\" alt=\"", out);
	tg_xml_puts(out, alt);
	fputs("\" src=\"data:image/svg+xml;base64,", out);
	tg_base64_write(out, buf, (size_t)len);
	fputs("\">\n", out);
	ret = 0;
out:
	free(buf);
	fclose(f);
	return ret;
}

static void rep_note_html(FILE *out, const char *msg)
{
	fputs("<p class=\"note\">", out);
	tg_xml_puts(out, msg);
	fputs("</p>\n", out);
}

/* A section's note, on the page and to the caller. */
static void rep_missing(FILE *out, const struct tg_report_cb *cb, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void rep_missing(FILE *out, const struct tg_report_cb *cb, const char *fmt, ...)
{
	char msg[1400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	rep_note_html(out, msg);
	rep_note(cb, msg);
}

static const char rep_style[] =
	"body{font-family:system-ui,'DejaVu Sans',Verdana,sans-serif;margin:0 auto;"
	"max-width:1240px;padding:0 16px 40px;color:#222;background:#fff}\n"
	"h1{font-size:1.6em;margin:18px 0 4px}h2{margin-top:34px;border-bottom:1px solid #ccc;"
	"padding-bottom:4px}\n"
	"nav a{margin-right:14px}.meta{color:#555;margin:0}\n"
	".note{background:#fff6d8;border-left:4px solid #e0b000;padding:8px 12px}\n"
	"table{border-collapse:collapse;font-size:14px}\n"
	"th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}\n"
	"td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\n"
	"td.time{white-space:nowrap}\n"
	"td code{overflow-wrap:anywhere}\n"
	"pre{background:#f6f6f6;border:1px solid #ddd;padding:8px;overflow:auto;"
	"max-height:420px;font-size:12px}\n"
	"img.graph{max-width:100%;height:auto;border:1px solid #ddd}\n"
	"section.peak:target{outline:3px solid #e0b000}\n"
	".gc{background:#e8f0ff;color:#134;padding:0 4px;border-radius:3px;font-size:13px}\n"
	"svg.tgflame{max-width:100%;height:auto;border:1px solid #ddd}\n";

/* The memory graph, in its section.  Soft failures become notes. */
static void rep_memg(FILE *out, const struct tg_report_opts *o, const struct rep_files *files,
		     const struct tg_report_cb *cb, struct tg_diag *d)
{
	struct tg_plot_opts po = { o->scratch, "svg", 1200, 560, 0, o->gnuplot, 0 };
	struct tg_diag sub = *d;
	char *path;

	fputs("<h2 id=\"memory\">Memory by thread</h2>\n", out);
	if (!files->threads) {
		rep_missing(out, cb, "no thread .mem files in the run: no memory graph");
		return;
	}
	if (files->sampled || files->aggregate)
		fprintf(out, "<p>Each thread's memory (KB: what it allocated less what it freed) "
			"at each reading of its curve, %s, with the numbered peaks of the table "
			"below (as <code>threadgraph memg</code> draws them).</p>\n",
			files->sampled ? "a sampled run recording no calls" :
			"an aggregate run keeping no record per call");
	else
		fputs("<p>Each thread's memory delta per recorded return (KB) "
		      "with the numbered peaks of the table below (as <code>threadgraph memg</code> "
		      "draws them).</p>\n", out);
	if (!o->gnuplot) {  /* said before anything is read: no temporary path in it */
		rep_missing(out, cb, "memory graph left out: gnuplot not found (the graph "
			    "needs gnuplot; the rest of the report does not)");
		return;
	}
	rep_step(cb, "memory graph");
	if (tg_memg_run(&o->memg, &po, files->v, files->n, NULL, &sub) < 0) {
		rep_missing(out, cb, "memory graph left out: %s%s", sub.msg,
			    strstr(sub.msg, "gnuplot") ? " (the graph needs gnuplot; the rest of "
			    "the report does not)" : "");
		d->malformed = sub.malformed;
		return;
	}
	d->malformed = sub.malformed;
	if (asprintf(&path, "%s/memg.svg", o->scratch) < 0)
		return;
	if (rep_inline_svg(out, path, "memory by thread", &sub) < 0)
		rep_missing(out, cb, "memory graph left out: %s", sub.msg);
	free(path);
}

/* Rows of the held table before the rest are summed. */
#define REP_HELD_ROWS 20

static const struct tg_held_peak *rep_held_sort;
static int rep_held_cmp(const void *a, const void *b)
{
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	int64_t x = rep_held_sort->level[i], y = rep_held_sort->level[j];

	if (x != y)
		return x < y ? 1 : -1;
	return i < j ? -1 : i > j;
}

/* A record's TIME text XS (LEN bytes; X its value): a time of day, as the
 * peaks table shows it, when X is a Unix time; else the text (an event
 * number of a run without times). */
static void rep_clock(FILE *out, double x, const char *xs, size_t len)
{
	char buf[64];
	struct tm tm;
	time_t t = (time_t)x;
	const char *dot = memchr(xs, '.', len);

	if (x >= 1e9 && localtime_r(&t, &tm) &&
	    strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm)) {
		fputs(buf, out);
		if (dot)
			tg_xml_text(out, dot, (size_t)(xs + len - dot));
	} else {
		tg_xml_text(out, xs, len);
	}
}

/* The rest of a row of the held table, after its name: LEVEL at the peak, its
 * share of TOTAL, its own PEAK and its level at its END (sizes as every size
 * the report prints: B, KB, MB, GB). */
static void rep_held_row(FILE *out, int64_t level, int64_t total, int64_t peak, int64_t end)
{
	char a[32], b[32], c[32];

	tg_fmt_bytes_short(a, level);
	tg_fmt_bytes_short(b, peak);
	tg_fmt_bytes_short(c, end);
	fprintf(out, "</td><td class=\"num\">%s</td><td class=\"num\">%.1f%%</td>"
		"<td class=\"num\">%s</td><td class=\"num\">%s</td></tr>\n", a,
		total ? 100.0 * (double)level / (double)total : 0.0, b, c);
}

/* The largest peak's shares: who drove it, largest first (REP_HELD_ROWS rows). */
static void rep_held_table(FILE *out, const struct tg_held_peak *p, const struct rep_files *files)
{
	size_t *ix = malloc((p->n ? p->n : 1) * sizeof(*ix)), k = 0;
	int64_t rest = 0, rest_peak = 0, rest_end = 0;
	char a[32];

	if (!ix)
		return;
	for (size_t i = 0; i < p->n; i++)
		if (p->has[i])
			ix[k++] = i;
	rep_held_sort = p;  /* qsort has no context argument; set just before */
	qsort(ix, k, sizeof(*ix), rep_held_cmp);
	tg_fmt_bytes_short(a, p->total);
	fprintf(out, "<p>Largest peak of all threads' held memory: <b>%s</b> (%lld bytes) at ",
		a, (long long)p->total);
	rep_clock(out, p->x, p->xs, strlen(p->xs));
	fputs(". Who drove it:</p>\n<table><tr><th>Thread</th><th>Held at the peak</th>"
	      "<th>Share</th><th>Own peak</th><th>Held at its end</th></tr>\n", out);
	for (size_t j = 0; j < k; j++) {
		size_t i = ix[j];

		if (j >= REP_HELD_ROWS) {
			rest += p->level[i];
			rest_peak += p->peak[i];
			rest_end += p->end[i];
			continue;
		}
		fputs("<tr><td>", out);
		tg_xml_puts(out, files->v[i].thread);
		rep_held_row(out, p->level[i], p->total, p->peak[i], p->end[i]);
	}
	if (k > REP_HELD_ROWS) {
		fprintf(out, "<tr><td>%zu other threads (sum)", k - REP_HELD_ROWS);
		rep_held_row(out, rest, p->total, rest_peak, rest_end);
	}
	fputs("</table>\n", out);
	free(ix);
}

/* Names listed in a note of threads left out; the others are counted. */
#define REP_SKIP_NAMES 8

/* The threads a section left out, grouped by why: one note per reason. */
struct rep_skip {
	char *why;        /* the library's reason (owned) */
	char *names;      /* the first REP_SKIP_NAMES threads, ", "-joined (owned) */
	size_t n;         /* threads left out for it */
};
struct rep_skips {
	struct rep_skip *v;
	size_t n, cap;
	int oom;          /* a reason could not be kept: the notes are incomplete */
};

static void rep_skips_release(struct rep_skips *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i].why);
		free(s->v[i].names);
	}
	free(s->v);
	memset(s, 0, sizeof(*s));
}

/* tg_memg_report's skip: keeps DF's thread under WHY (a .stack file handed in
 * with the dumps is no thread left out). */
static void rep_skip(void *ctx, const struct tg_dumpfile *df, const char *why)
{
	struct rep_skips *s = ctx;
	struct rep_skip *k = NULL;
	char *names;

	if (df->kind != TG_DUMP_MEM)
		return;
	for (size_t i = 0; i < s->n && !k; i++)
		if (strcmp(s->v[i].why, why) == 0)
			k = &s->v[i];
	if (!k) {
		if (s->n == s->cap) {
			size_t cap = s->cap ? 2 * s->cap : 4;
			struct rep_skip *v = realloc(s->v, cap * sizeof(*v));
			if (!v) {
				s->oom = 1;
				return;
			}
			s->v = v;
			s->cap = cap;
		}
		k = &s->v[s->n];
		memset(k, 0, sizeof(*k));
		if (!(k->why = strdup(why))) {
			s->oom = 1;
			return;
		}
		s->n++;
	}
	if (k->n++ >= REP_SKIP_NAMES)
		return;
	if (asprintf(&names, "%s%s%s", k->names ? k->names : "", k->names ? ", " : "",
		     df->thread) < 0) {
		s->oom = 1;
		return;
	}
	free(k->names);
	k->names = names;
}

static const struct tg_memg_report rep_skip_report = { NULL, rep_skip, NULL, NULL };

/* One note per reason of S, naming the threads WHAT left out. */
static void rep_skips_note(FILE *out, const struct tg_report_cb *cb, const struct rep_skips *s,
			   const char *what)
{
	for (size_t i = 0; i < s->n; i++) {
		const struct rep_skip *k = &s->v[i];
		char more[64] = "";

		if (k->n > REP_SKIP_NAMES)
			snprintf(more, sizeof(more), " and %zu more", k->n - REP_SKIP_NAMES);
		rep_missing(out, cb, "%s %s%s left out of %s: %s", k->n == 1 ? "thread" : "threads",
			    k->names ? k->names : "", more, what, k->why);
	}
	if (s->oom)
		rep_missing(out, cb, "out of memory: some threads left out of %s are not named "
			    "here", what);
}

/* Each thread's held memory over time (memg --held) and the largest peak's
 * shares, the report's first section.  Soft failures become notes, and so
 * does each thread left out (a .stack that does not pair with its .mem, as
 * memg --held warns). */
static void rep_held(FILE *out, const struct tg_report_opts *o, const struct rep_files *files,
		     const struct tg_report_cb *cb, struct tg_diag *d)
{
	struct tg_plot_opts po = { o->scratch, "svg", 1200, 560, 0, o->gnuplot, 0 };
	struct tg_memg_opts mo = o->memg;
	struct tg_held_peak p;
	struct tg_diag sub = *d;
	struct rep_skips skips;
	struct tg_memg_report sr = rep_skip_report;
	char *path;
	int rc;

	sr.ctx = &skips;
	mo.no_process = 0;  /* its own axis: it flattens nothing here */
	fputs("<h2 id=\"held\">Memory held by thread</h2>\n", out);
	if (!files->threads) {
		rep_missing(out, cb, "no thread .mem files in the run: no held memory");
		return;
	}
	fputs("<p>What each thread holds over time: allocated by it and not freed by it, "
	      "MB (as <code>threadgraph memg --held</code> draws it).</p>\n", out);
	rep_step(cb, "held memory");
	memset(&p, 0, sizeof(p));
	memset(&skips, 0, sizeof(skips));
	rc = tg_held_run(&mo, &po, files->v, files->n, &sr, &p, &sub);
	rep_skips_note(out, cb, &skips, "the held memory");
	rep_skips_release(&skips);
	d->malformed = sub.malformed;
	if (rc < 0) {
		rep_missing(out, cb, "held memory left out: %s%s", sub.msg,
			    strstr(sub.msg, "gnuplot") ? " (the graph needs gnuplot; the rest of "
			    "the report does not)" : "");
		return;
	}
	if (!o->gnuplot) {
		rep_missing(out, cb, "held memory graph left out: gnuplot not found (the graph "
			    "needs gnuplot; the rest of the report does not)");
	} else if (asprintf(&path, "%s/memg-held.svg", o->scratch) >= 0) {
		if (rep_inline_svg(out, path, "memory held by thread", &sub) < 0)
			rep_missing(out, cb, "held memory graph left out: %s", sub.msg);
		free(path);
	}
	if (p.found)
		rep_held_table(out, &p, files);
	tg_held_peak_release(&p);
}

/* Writes a peak's TIME as local "HH:MM:SS.ffffff" (the dump's text otherwise). */
static void rep_time(FILE *out, const struct tg_peaks *p, const struct tg_peak *k, int has_time)
{
	const char *text = tg_peak_time(p, k);

	if (!has_time) {
		fprintf(out, "event %.0f", k->x);
		return;
	}
	rep_clock(out, k->x, text, k->time_len);
}

/* What marks the peaks whose call ran the garbage collector. */
struct rep_gc {
	struct tg_gc_runs runs;        /* gc.txt */
	struct tg_run_threads threads; /* runinfo.json: a text dump's native id */
};

/* The native id of FILES' thread file I: the capture's, else runinfo.json's;
 * 0 when not known. */
static int rep_native_id(const struct rep_gc *g, const struct rep_files *files, size_t i,
			 unsigned long long *id)
{
	const struct tg_dumpfile *df = &files->v[i];

	if (df->cap_thread) {
		*id = df->cap_thread->native_id;
		return 1;
	}
	return !df->cap && tg_run_threads_id(&g->threads, df->thread, id);
}

/* The collections peak K's call ran (its thread, within its call's span):
 * their number, objects collected in *objects; 0 when they collected nothing
 * (nothing freed for the delta to include), or when its call start or its
 * thread's native id is not known (no times, a text dump without .stack). */
static size_t rep_peak_gc(const struct rep_gc *g, const struct rep_files *files,
			  const struct tg_peak *k, long long *objects)
{
	unsigned long long id;
	size_t runs;

	*objects = 0;
	if (!g->runs.n || k->call_start < 0)
		return 0;
	/* an aggregate run's folded entry: the runs of its threads (gc.txt's FAMILY) */
	if (files->v[k->thread].agg_thread && files->v[k->thread].agg_thread->folded) {
		runs = tg_gc_runs_within_family(&g->runs, files->v[k->thread].agg_thread->base,
						k->call_start, k->x, objects);
		return *objects > 0 ? runs : 0;
	}
	if (!rep_native_id(g, files, k->thread, &id))
		return 0;
	runs = tg_gc_runs_within(&g->runs, id, k->call_start, k->x, objects);
	return *objects > 0 ? runs : 0;
}

/* Writes the mark of a peak whose call ran the collector (nothing otherwise). */
static void rep_gc_mark(FILE *out, size_t runs, long long objects)
{
	if (runs)
		fprintf(out, " <span class=\"gc\">ran the garbage collector (%zu run%s, %lld "
			"object%s collected)</span>", runs, runs == 1 ? "" : "s", objects,
			objects == 1 ? "" : "s");
}

/* The peaks table and each peak's decorated subtree. */
static int rep_peaks(FILE *out, const struct tg_report_opts *o, const struct rep_files *files,
		     const struct tg_report_cb *cb, struct tg_diag *d)
{
	struct tg_peaks peaks;
	struct rep_gc gc;
	struct tg_marks marks;
	size_t max_peaks = o->max_peaks ? o->max_peaks : 50;
	size_t max_lines = o->max_lines ? o->max_lines : 300;
	size_t gc_marked = 0;
	int ret = -1, phases;

	tg_peaks_init(&peaks);
	tg_marks_init(&marks);
	tg_gc_runs_init(&gc.runs);
	tg_run_threads_init(&gc.threads);
	fputs("<h2 id=\"peaks\">Peaks</h2>\n", out);
	if (!files->threads) {
		rep_missing(out, cb, "no thread .mem files in the run: no peaks");
		return 0;
	}
	rep_step(cb, "peaks");
	if (tg_marks_read_near(&marks, files->v, files->n, d) < 0 ||
	    tg_peaks_collect(&o->memg, files->v, files->n, &peaks, NULL, d) < 0)
		goto out;
	phases = marks.n_phases && o->memg.has_time;
	if (o->memg.has_time && (tg_gc_runs_read(&gc.runs, o->run_dir, d) < 0 ||
				 (gc.runs.n && tg_run_threads_read(&gc.threads, o->run_dir, d) < 0)))
		goto out;
	for (size_t i = 0; i < peaks.n; i++) {
		long long objects;
		gc_marked += rep_peak_gc(&gc, files, &peaks.v[i], &objects) > 0;
	}
	if (!peaks.n) {
		fprintf(out, files->sampled || files->aggregate ?
			"<p>No reading of a thread's memory exceeds %g KB "
			"(<code>--peak</code>).</p>\n" : "<p>No return changed a thread's memory "
			"by more than %g KB (<code>--peak</code>).</p>\n", o->memg.peak.peak_kb);
		ret = 0;
		goto out;
	}
	if (files->sampled) {
		/* no call, no delta, no subtree: the readings, said as such */
		fprintf(out, "<p>A sampled run records no calls: these are readings of a "
			"thread's memory (what it allocated less what it freed, exact) above %g "
			"KB, kept as memg keeps them. The call sites holding memory are in the "
			"flame graphs and the accounting below, estimated from the samples.</p>\n",
			o->memg.peak.peak_kb);
	} else if (files->aggregate) {
		/* readings of the curve's buckets: no call, no delta, no subtree */
		fprintf(out, "<p>An aggregate run keeps no record per call: these are readings "
			"of a thread's memory (what it allocated less what it freed, the lowest "
			"and highest of each bucket of its curve) above %g KB, kept as memg keeps "
			"them. Its calls, rolled up per call path, are in the flame graphs below "
			"and in <code>threadgraph summary</code>.</p>\n", o->memg.peak.peak_kb);
		if (gc_marked)
			fprintf(out, "<p class=\"meta\">%zu of these readings are of a bucket "
				"during which <span class=\"gc\">the garbage collector ran</span> "
				"in their thread (gc.txt).</p>\n", gc_marked);
	} else {
		fprintf(out, "<p>Returns whose delta exceeds %g KB, kept as memg keeps them; "
			"each number links to the call's subtree with the time and memory of every "
			"call in it (<code>threadgraph decorate-stack</code>).</p>\n",
			o->memg.peak.peak_kb);
		/* numbers that look wrong, explained where they are shown */
		fputs("<p class=\"meta\">A delta is what the thread held more, or less, when the "
		      "call returned: a temporary its caller frees right after counts as the call's "
		      "growth (the caller's own delta then shows the release), and a garbage "
		      "collection run during a call counts all it freed to that call.</p>\n", out);
		if (gc_marked)
			fprintf(out, "<p class=\"meta\">%zu of these peaks' calls <span class=\"gc\">ran "
				"the garbage collector</span> (gc.txt): their delta includes what it "
				"freed, and what the call left to it.</p>\n", gc_marked);
	}
	if (files->sampled || files->aggregate)
		;  /* no record per call: --stack would give these runs no subtree */
	else if (!files->has_stack)
		rep_missing(out, cb, "the run has no .stack files: the peaks' call subtrees need "
			    "them (threadgraph run --stack, ProcessProfile.trackStack())");
	else if (!o->memg.has_time)
		rep_missing(out, cb, "the dumps have no timestamps: the peaks' call subtrees "
			    "(decorate-stack) need them");
	if (phases)
		fputs("<p class=\"meta\">A peak's phase is the innermost "
		      "<code>threadgraph.phase</code> open when its call returned.</p>\n", out);
	fprintf(out, "<table><tr><th>#</th><th>time</th>%s<th>thread</th><th>%s</th></tr>\n",
		phases ? "<th>phase</th>" : "", files->sampled || files->aggregate ?
		"reading (FILE:LINE:FUNCTION=&gt;BYTES)</th><th>memory" :
		"call (FILE:LINE:FUNCTION=&gt;DELTA)</th><th>delta");
	for (size_t i = 0; i < peaks.n; i++) {
		const struct tg_peak *k = &peaks.v[i];
		char g[32], s[32];
		int link = files->has_stack && o->memg.has_time && i < max_peaks;
		long long objects;
		size_t runs = rep_peak_gc(&gc, files, k, &objects);

		tg_fmt_grouped(g, k->delta);
		tg_fmt_bytes_short(s, k->delta);
		if (link)
			fprintf(out, "<tr><td><a href=\"#peak-%zu\">%zu</a></td><td class=\"time\">",
				k->id, k->id);
		else
			fprintf(out, "<tr><td>%zu</td><td class=\"time\">", k->id);
		rep_time(out, &peaks, k, o->memg.has_time);
		fputs("</td><td>", out);
		if (phases) {
			const struct tg_phase *ph = tg_marks_phase_at(&marks, k->x);
			if (ph)
				tg_xml_puts(out, ph->name);
			fputs("</td><td>", out);
		}
		tg_xml_puts(out, files->v[k->thread].thread);
		fputs("</td><td><code>", out);
		tg_xml_text(out, tg_peak_rest(&peaks, k), k->rest_len);
		fputs("</code>", out);
		rep_gc_mark(out, runs, objects);
		fprintf(out, "</td><td class=\"num\">%s B (%s)</td></tr>\n", g, s);
	}
	fputs("</table>\n", out);
	if (files->has_stack && o->memg.has_time && peaks.n > max_peaks)
		rep_missing(out, cb, "only the first %zu peaks have their subtree here; run "
			    "threadgraph decorate-stack for the others", max_peaks);
	if (files->has_stack && o->memg.has_time)
		rep_step(cb, "peaks' call subtrees (%zu, decorate-stack)",
			 peaks.n < max_peaks ? peaks.n : max_peaks);
	for (size_t i = 0; files->has_stack && o->memg.has_time && i < peaks.n && i < max_peaks;
	     i++) {
		const struct tg_peak *k = &peaks.v[i];
		const char *mem = files->v[k->thread].path;
		/* bounded where it is read: a thread's whole run() is millions of calls */
		struct tg_decorate_opts dopts = { NULL, "  ", 1, 0, 0, max_lines };
		struct tg_diag sub = *d;
		char *stack = NULL, event[32];
		FILE *tmp;

		fprintf(out, "<section class=\"peak\" id=\"peak-%zu\"><h3>Peak %zu: ", k->id, k->id);
		tg_xml_puts(out, files->v[k->thread].thread);
		fputs(" &gt; <code>", out);
		tg_xml_text(out, tg_peak_rest(&peaks, k), k->rest_len);
		fputs("</code>", out);
		{
			long long objects;
			size_t runs = rep_peak_gc(&gc, files, k, &objects);
			rep_gc_mark(out, runs, objects);
		}
		fputs("</h3>\n", out);
		snprintf(event, sizeof(event), "%lu", k->lineno);
		if (asprintf(&stack, "%.*s%s", (int)(strlen(mem) - 4), mem, TG_STACK_SUFFIX) < 0) {
			tg_error(d, "out of memory");
			goto out;
		}
		if (!(tmp = tmpfile())) {
			free(stack);
			tg_error(d, "unable to make a temporary file: %s", strerror(errno));
			goto out;
		}
		if (files->cap ? !files->has_stack || !files->v[k->thread].cap_thread :
				 !rep_exists(stack)) {
			rep_note_html(out, "this thread has no .stack file");
		} else if (files->cap ?
			   tg_decorate_capture_run(files->cap, files->v[k->thread].cap_thread->base,
						   event, &dopts, tmp, NULL, &sub) < 0 :
			   tg_decorate_run(mem, stack, event, &dopts, tmp, NULL, &sub) < 0) {
			rep_note_html(out, sub.msg);
		} else {
			fputs("<pre>", out);
			rep_copy_escaped(out, tmp); /* its last line counts what it left out */
			fputs("</pre>\n", out);
		}
		d->malformed = sub.malformed;
		fclose(tmp);
		free(stack);
		fputs("<p><a href=\"#peaks\">\xe2\x86\x91 peaks</a></p></section>\n", out);
	}
	ret = 0;
out:
	tg_run_threads_release(&gc.threads);
	tg_gc_runs_release(&gc.runs);
	tg_peaks_release(&peaks);
	tg_marks_release(&marks);
	return ret;
}

/* Whether the run has a live-at-peak snapshot. */
static int rep_has_peak_snapshot(const char *dir)
{
	struct tg_diag scratch = { .probe = 1 };
	char *path = tg_snapshot_find(dir, TG_SNAP_PICK_PEAK, &scratch);
	int found = path != NULL;
	free(path);
	return found;
}

/* One flame graph, in its section.  Soft failures become notes. */
static int rep_flame(FILE *out, const struct tg_report_opts *o, const struct rep_files *files,
		     const struct tg_fold_metric_info *m, const struct tg_report_cb *cb,
		     struct tg_diag *d)
{
	struct tg_fold_opts fo = { .path = o->run_dir, .metric = m, .has_time = o->memg.has_time,
				   .cap = o->cap, .max_depth = TG_FOLD_MAX_DEPTH,
				   .no_stitch = o->no_stitch };
	struct tg_flamesvg_opts so = { NULL, m->what, 1200, 0.1, 0 };
	struct tg_fold f;
	struct tg_diag sub = *d;
	char id[64];

	snprintf(id, sizeof(id), "flame-%s", m->name);
	so.id = id;
	/* the heading's id is not the graph's: the graph's script finds itself by id */
	fprintf(out, "<h2 id=\"flamegraph-%s\">Flame graph: %s</h2>\n", m->name, m->what);
	rep_step(cb, "flame graph (%s)", m->name);
	tg_fold_init(&f);
	if (tg_fold_load(&f, &fo, &sub) < 0) {
		rep_missing(out, cb, "flame graph (%s) left out: %s", m->name, sub.msg);
		d->malformed = sub.malformed;
		tg_fold_release(&f);
		return 0;
	}
	d->malformed = sub.malformed;
	fputs("<p>Each box is a call in its calling context, as wide as its share; callees "
	      "below their callers. Hover for the values, click to zoom, type in the search "
	      "box to highlight. Also <code>threadgraph folded --metric ", out);
	fputs(m->name, out);
	fputs("</code>.</p>\n", out);
	if (f.sampled)
		rep_missing(out, cb, "sampled run (one sample per %lld bytes on average): the %s "
			    "values are estimates", (long long)f.sampled, m->name);
	if (f.no_stack == 1)
		rep_missing(out, cb, "thread '%s' left out of the %s flame graph: no .stack file "
			    "beside '%s' (the metric pairs each thread's .stack and .mem)",
			    f.no_stack_thread, m->name, f.no_stack_mem);
	else if (f.no_stack)
		rep_missing(out, cb, "%lu threads left out of the %s flame graph: no .stack file "
			    "beside their .mem ('%s' and %lu other%s; the metric pairs each "
			    "thread's .stack and .mem)", f.no_stack, m->name, f.no_stack_mem,
			    f.no_stack - 1, f.no_stack == 2 ? "" : "s");
	if (f.deep)
		rep_missing(out, cb, "%lu call%s nested deeper than %d: part of their ancestor's "
			    "own %s value in the flame graph (threadgraph flamegraph --max-depth N "
			    "goes further)", f.deep, f.deep == 1 ? "" : "s", TG_FOLD_MAX_DEPTH,
			    m->name);
	/* what folded warns of damaged dumps, or of a run's drops (said at the top):
	 * the graph is drawn, but not silently */
	if (f.mismatched)
		rep_missing(out, cb, "%lu call%s paired with a return of another function "
			    "(%s): their %s values in the flame graph may be wrong",
			    f.mismatched, f.mismatched == 1 ? "" : "s", files->dropped ?
			    "the recorder dropped records of the run" : "damaged dumps?", m->name);
	if (f.extra)
		rep_missing(out, cb, "%lu return record%s left over after the last call "
			    "(%s): left out of the %s flame graph", f.extra,
			    f.extra == 1 ? "" : "s", files->dropped ?
			    "the recorder dropped records of the run" : "damaged dumps?", m->name);
	if (tg_flamesvg_write(out, &f, &so, NULL, d) < 0) {
		if (ferror(out))  /* the page's own stream failed, not the flame graph */
			tg_error(d, "unable to write the report");
		tg_fold_release(&f);
		return -1;
	}
	tg_fold_release(&f);
	return 0;
}

/* The accounting summary and histograms, in their section. */
/* Pairs of the cross-thread frees table before the rest are summed. */
#define REP_PAIR_ROWS 20

/* Who freed whose memory (threadgraph threads): the summary's pairs. */
static void rep_freed_by(FILE *out, const struct tg_summary *s, const struct tg_report_cb *cb)
{
	int64_t rest = 0, rest_blocks = 0;

	fputs("<h3 id=\"freed-by\">Cross-thread frees</h3>\n", out);
	if (!s->has_freed_by) {
		rep_missing(out, cb, "no cross-thread frees: the summary was written by a "
			    "threadgraph that did not count them");
		return;
	}
	if (!s->n_pairs) {
		fputs("<p>No block was freed by a thread other than the one that allocated "
		      "it.</p>\n", out);
		return;
	}
	fputs("<p>Memory allocated in one thread and freed in another (as <code>threadgraph "
	      "threads</code> prints it), largest first.</p>\n<table><tr><th>Allocated in</th>"
	      "<th>Freed in</th><th>Bytes</th><th>Blocks</th></tr>\n", out);
	for (size_t i = 0; i < s->n_pairs; i++) {
		const struct tg_sum_pair *p = &s->pairs[i];

		if (i >= REP_PAIR_ROWS) {
			rest += p->bytes;
			rest_blocks += p->blocks;
			continue;
		}
		fputs("<tr><td>", out);
		tg_xml_puts(out, p->allocated_in);
		fputs("</td><td>", out);
		tg_xml_puts(out, p->freed_in);
		fprintf(out, "</td><td class=\"num\">%lld</td><td class=\"num\">%lld</td></tr>\n",
			(long long)p->bytes, (long long)p->blocks);
	}
	if (s->n_pairs > REP_PAIR_ROWS)
		fprintf(out, "<tr><td colspan=\"2\">%zu other pairs (sum)</td><td class=\"num\">"
			"%lld</td><td class=\"num\">%lld</td></tr>\n", s->n_pairs - REP_PAIR_ROWS,
			(long long)rest, (long long)rest_blocks);
	fputs("</table>\n", out);
	if (s->freed_by_lost)
		fprintf(out, "<p>And %lld bytes between pairs of threads the recorder could not keep "
			"apart.</p>\n", (long long)s->freed_by_lost);
}

/*
 * The accounting section.  A run recorded without accounting (ACCOUNTING 0: no
 * summary.txt[.gz]) gets a note on the page only: accounting is off by default,
 * so its absence is the run's choice, not something wrong to warn about (the
 * command `threadgraph run` prints would warn on every run).  Summary files that
 * are there but unreadable are warned about.
 */
static int rep_accounting(FILE *out, const struct tg_report_opts *o, int accounting,
			  const struct tg_report_cb *cb, struct tg_diag *d)
{
	struct tg_plot_opts po = { o->scratch, "svg", 1000, 480, 0, o->gnuplot, 0 };
	struct tg_summary s;
	struct tg_diag sub = *d;
	FILE *tmp;
	char *path;

	fputs("<h2 id=\"accounting\">Allocation accounting</h2>\n", out);
	if (accounting)
		rep_step(cb, "accounting");
	if (!accounting) {
		rep_note_html(out, "this run was recorded without allocation accounting (no "
			      "summary.txt); allocation accounting is turned on with threadgraph "
			      "run --accounting or ProcessProfile(accounting=True)");
		return 0;
	}
	if (tg_summary_read(&s, o->run_dir, &sub) < 0) {
		rep_missing(out, cb, "no accounting summary: %s; allocation accounting is "
			    "turned on with threadgraph run --accounting or "
			    "ProcessProfile(accounting=True)", sub.msg);
		return 0;
	}
	if (!(tmp = tmpfile())) {
		tg_summary_release(&s);
		return tg_error(d, "unable to make a temporary file: %s", strerror(errno));
	}
	tg_summary_print(tmp, &s);
	fputs("<h3>Summary</h3>\n<pre>", out);
	rep_copy_escaped(out, tmp);
	fputs("</pre>\n", out);
	rep_freed_by(out, &s, cb);
	fputs("<h3>Allocation sizes</h3>\n", out);
	if (!o->gnuplot) {
		rep_missing(out, cb, "histogram graph left out: gnuplot not found (the graph "
			    "needs gnuplot; the rest of the report does not)");
	} else if (tg_hist_plot(&s.process, &po, &sub) < 0) {
		rep_missing(out, cb, "histogram graph left out: %s", sub.msg);
	} else if (asprintf(&path, "%s/hist.svg", o->scratch) >= 0) {
		if (rep_inline_svg(out, path, "allocation sizes", &sub) < 0)
			rep_missing(out, cb, "histogram graph left out: %s", sub.msg);
		free(path);
	}
	fclose(tmp);
	if (!(tmp = tmpfile())) {
		tg_summary_release(&s);
		return tg_error(d, "unable to make a temporary file: %s", strerror(errno));
	}
	tg_hist_print(tmp, &s);
	fputs("<pre>", out);
	rep_copy_escaped(out, tmp);
	fputs("</pre>\n", out);
	fclose(tmp);
	tg_summary_release(&s);
	return 0;
}

int tg_report_write(const struct tg_report_opts *opts, FILE *out,
		    const struct tg_report_cb *cb, struct tg_diag *d)
{
	struct tg_report_opts ro = *opts, *o = &ro;
	struct rep_files files;
	const struct tg_fold_metric_info *metrics[3];
	size_t nm = 0;
	int accounting, native, ret = -1, rc;
	char *summary = NULL, *run_dir = NULL;
	struct tg_run_threads info;

	memset(&files, 0, sizeof(files));
	rep_step(cb, "reading %s", o->run_dir);
	if (!o->cap) {
		if ((rc = tg_dumpset_open_capture(o->run_dir, &files.own_cap, d)) < 0)
			return -1;
		o->cap = files.own_cap;
	}
	if (o->cap && !rep_is_dir(o->run_dir)) {
		/* RUN_DIR/capture.tg given: the run's other files are beside it */
		const char *slash = strrchr(o->cap->path, '/');
		if (!(run_dir = strndup(o->cap->path, slash ? (size_t)(slash - o->cap->path) : 0)) ||
		    !*run_dir) {
			free(run_dir);
			if (!(run_dir = strdup(".")))
				goto oom;
		}
		o->run_dir = run_dir;
	}
	if (o->cap) {
		/* the capture's records stand for the text dumps export would write */
		o->memg.has_time = o->memg.has_time && (o->cap->flags & TG_CAP_F_TIME);
		if (rep_files_capture(&files, o->cap, d) < 0)
			goto out;
	} else if (tg_aggfile_is_run(o->run_dir)) {
		if (rep_files_aggregate(&files, (char *)o->run_dir, d) < 0)
			goto out;
		files.aggregate = 1;
	} else if (rep_files_list(&files, o->run_dir, d) < 0) {
		return -1;
	}
	files.sampled = rep_sampled(&files, o->memg.has_time);
	if (!o->cap && !files.aggregate && (files.dropped = tg_run_dropped(o->run_dir)))
		for (size_t i = 0; i < files.n; i++)
			files.v[i].run_dropped = files.dropped;
	if (asprintf(&summary, "%s/summary.txt", o->run_dir) < 0) {
		summary = NULL;
		tg_error(d, "out of memory");
		goto out;
	}
	accounting = rep_exists(summary);
	free(summary);
	if (!accounting && asprintf(&summary, "%s/summary.txt.gz", o->run_dir) >= 0) {
		accounting = rep_exists(summary);
		free(summary);
	}
	/* whether native memory was counted: two reports of one program differ
	 * by what native code took, and the page says which it is */
	tg_run_threads_init(&info);
	if (tg_run_threads_read(&info, o->run_dir, d) < 0)
		goto out;
	native = info.native;
	tg_run_threads_release(&info);
	if (o->metric) {
		if (!(metrics[nm++] = tg_fold_metric_find(o->metric))) {
			tg_error(d, "unknown metric '%s'", o->metric);
			goto out;
		}
	} else if (accounting) {
		if (rep_has_peak_snapshot(o->run_dir))
			metrics[nm++] = tg_fold_metric_find("peak");
		metrics[nm++] = tg_fold_metric_find("alloc");
	} else {
		metrics[nm++] = tg_fold_metric_find("delta");
	}
	if (!files.threads && !accounting) {
		tg_error(d, "'%s' holds no thread dumps and no accounting files: not a run "
			 "directory", o->run_dir);
		goto out;
	}

	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
	      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
	      "<title>threadgraph report: ", out);
	tg_xml_puts(out, o->run_dir);
	fprintf(out, "</title>\n<style>\n%s</style>\n</head><body>\n", rep_style);
	fputs("<h1>threadgraph report</h1>\n<p class=\"meta\">Run <code>", out);
	tg_xml_puts(out, o->run_dir);
	fprintf(out, "</code>: %zu thread%s", files.threads, files.threads == 1 ? "" : "s");
	/* named up to REP_HEADER_THREADS: 510 names took 2.5 screens before the graph */
	for (size_t i = 0; i < files.threads && i < REP_HEADER_THREADS; i++) {
		fputs(i ? ", " : " (", out);
		tg_xml_puts(out, files.v[i].thread);
	}
	if (files.threads > REP_HEADER_THREADS)
		fprintf(out, " and %zu more", files.threads - REP_HEADER_THREADS);
	fprintf(out, "%s; stacks %s; accounting %s%s.</p>\n", files.threads ? ")" : "",
		files.has_stack ? "recorded" : "not recorded", accounting ? "on" : "off",
		native < 0 ? "" : native ? "; native memory counted"
		: "; Python's allocators only (no native memory)");
	if (o->covers) {
		fputs("<p class=\"note\">Part of the run only: ", out);
		tg_xml_puts(out, o->covers);
		fprintf(out, ". The memory graphs, the peaks and the flame graphs of recorded "
			"calls (delta, time) show that part; the accounting%s covers the "
			"whole run.</p>\n", accounting ? " (its flame graphs and tables)" : ", when on,");
	}
	fputs("<nav><a href=\"#held\">held memory</a><a href=\"#memory\">memory graph</a><a href=\"#peaks\">peaks</a>", out);
	for (size_t i = 0; i < nm; i++)
		fprintf(out, "<a href=\"#flamegraph-%s\">flame graph (%s)</a>", metrics[i]->name,
			metrics[i]->name);
	fputs("<a href=\"#accounting\">accounting</a></nav>\n", out);
	if (files.dropped)  /* up front: every section that pairs .mem and .stack */
		rep_missing(out, cb, "the recorder dropped %llu record%s it could not write "
			    "(runinfo.json): " TG_RUN_DROPPED_PAIRING, files.dropped,
			    files.dropped == 1 ? "" : "s");

	rep_held(out, o, &files, cb, d);
	rep_memg(out, o, &files, cb, d);
	if (rep_peaks(out, o, &files, cb, d) < 0)
		goto out;
	for (size_t i = 0; i < nm; i++)
		if (rep_flame(out, o, &files, metrics[i], cb, d) < 0)
			goto out;
	if (rep_accounting(out, o, accounting, cb, d) < 0)
		goto out;
	fputs("<p class=\"meta\">Made by threadgraph report; self-contained: nothing is "
	      "fetched.</p>\n</body></html>\n", out);
	if (ferror(out)) {
		tg_error(d, "unable to write the report");
		goto out;
	}
	ret = 0;
	goto out;
oom:
	tg_error(d, "out of memory");
out:
	rep_files_release(&files);
	free(run_dir);
	return ret;
}
