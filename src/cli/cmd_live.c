/*
 * cmd_live.c - threadgraph live: a terminal view of a run being written,
 * refreshed every second (docs/attach.md "threadgraph live").
 *
 * The figures come from src/lib/live.c; this file only reads keys and draws,
 * with plain ANSI escapes: the alternate screen while it runs, the terminal
 * restored on q, at end of input and on SIGINT, SIGTERM, SIGHUP and SIGQUIT.
 * `--once` prints one reading as plain text instead, for scripts and pipes.
 * `threadgraph live PID` is the Python package's (it attaches first):
 * threadgraph/_attach.py runs this command on the run directory it gets.
 */
#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "aggfile.h"
#include "capture_read.h"
#include "cli.h"
#include "live.h"
#include "live_agg.h"
#include "live_curves.h"
#include "runinfo.h"
#include "snapshot.h"
#include "tg_format.h"

static const char live_usage[] =
	"threadgraph live [--sort KEY] RUN_DIR\n"
	"       threadgraph live [attach options] PID\n"
	"       threadgraph live --once [--sort KEY] RUN_DIR";

#define LIVE_REFRESH_MS 1000
#define LIVE_FUNCS_SHOWN 8
#define LIVE_SITES_SHOWN 5
#define LIVE_NAME_MIN 12   /* THREAD column: at least, and without a terminal at most */
#define LIVE_NAME_MAX 48
#define LIVE_FIGURES 59    /* the row beside the name: mark, 4 x " %11s", " %9lu" */

/* Sort keys of the thread table, cycled by 's'. */
struct live_sort {
	const char *name;
	int (*cmp)(const struct tg_live_thread *, const struct tg_live_thread *);
};

static int live_cmp_i64(int64_t a, int64_t b)
{
	return a < b ? 1 : a > b ? -1 : 0;  /* largest first */
}
static int live_by_now(const struct tg_live_thread *a, const struct tg_live_thread *b)
{
	return live_cmp_i64(a->now, b->now);
}
static int live_by_change(const struct tg_live_thread *a, const struct tg_live_thread *b)
{
	return live_cmp_i64(a->change, b->change);
}
static int live_by_peak(const struct tg_live_thread *a, const struct tg_live_thread *b)
{
	return live_cmp_i64(a->peak, b->peak);
}
static int live_by_largest(const struct tg_live_thread *a, const struct tg_live_thread *b)
{
	return live_cmp_i64(a->largest, b->largest);
}
static int live_by_name(const struct tg_live_thread *a, const struct tg_live_thread *b)
{
	return strcmp(a->name, b->name);
}

static const struct live_sort live_sorts[] = {
	{ "now", live_by_now },
	{ "change", live_by_change },
	{ "peak", live_by_peak },
	{ "largest", live_by_largest },
	{ "name", live_by_name },
	{ "start", NULL },  /* attach order */
};
#define LIVE_NSORTS (sizeof(live_sorts) / sizeof(live_sorts[0]))

/* The view's state: what the keys change. */
struct live_view {
	const char *run;        /* the operand, for the title */
	char *capture;          /* RUN_DIR/capture.tg, or a segment of it (owned) */
	size_t sort;            /* index into live_sorts */
	int paused;
	uint32_t selected;      /* stream of the selected thread, 0: none */
	int done;               /* q, end of input or a finishing signal */
	struct tg_live lv;
	char status[256];       /* why there are no figures yet, or the last error,
				 * or which part of the run a capture of limited
				 * size covers */
	char *dir;              /* the directory holding the capture (owned) */
	struct tg_snapshot snap; /* its newest snapshot, sites by live bytes (has_snap) */
	int has_snap;
	struct timespec dir_mtime; /* of dir when snap was last looked for */
	time_t snap_mtime;      /* when snap's file was written */
	int sampled;            /* a sampled run: figures from its curves, in dir */
	int agg;                /* an aggregate run: from dir's aggregate.tga */
	struct tg_live_curves curves; /* how far they were read (sampled) */
	struct timespec read_at; /* when the figures' reading began (CLOCK_MONOTONIC) */
	double interval;        /* seconds from the reading before it to that one
				 * (0: one reading): CHANGE is per second of it, the
				 * period growing with the time a reading takes */
};

/* Set by the finishing signals and SIGWINCH (the main loop acts on them). */
static volatile sig_atomic_t live_signal, live_resized;

static void live_on_signal(int sig)
{
	live_signal = sig;
}

static void live_on_winch(int sig)
{
	(void)sig;
	live_resized = 1;
}

/* Bytes as the view shows them: 1023 B, 12.3 KB, 4.56 MB, signed with SIGN. */
static void live_bytes(char *buf, size_t n, int64_t v, int sign)
{
	double a = (double)(v < 0 ? -v : v);
	const char *s = v < 0 ? "-" : sign && v > 0 ? "+" : "";

	if (a < 1024)
		snprintf(buf, n, "%s%.0f B", s, a);
	else if (a < 1024.0 * 1024)
		snprintf(buf, n, "%s%.1f KB", s, a / 1024);
	else if (a < 1024.0 * 1024 * 1024)
		snprintf(buf, n, "%s%.2f MB", s, a / (1024.0 * 1024));
	else
		snprintf(buf, n, "%s%.2f GB", s, a / (1024.0 * 1024 * 1024));
}

/* BYTES changed over SECONDS (0: no interval yet) as a change per second,
 * held at the int64 bounds. */
static int64_t live_per_second(int64_t bytes, double seconds)
{
	double r = seconds > 0 ? (double)bytes / seconds : 0;

	if (r >= 9.2e18)
		return INT64_MAX;
	if (r <= -9.2e18)
		return INT64_MIN;
	return (int64_t)(r < 0 ? r - 0.5 : r + 0.5);
}

/* Code points of the UTF-8 text S[0, N) (a terminal column each, as near as
 * counts: thread names are mostly ASCII). */
static size_t live_chars(const char *s, size_t n)
{
	size_t chars = 0;

	for (size_t i = 0; i < n; i++)
		chars += ((unsigned char)s[i] & 0xC0) != 0x80;
	return chars;
}

/* The byte offset in S where its code point number K starts (or its length). */
static size_t live_char_at(const char *s, size_t k)
{
	size_t i = 0;

	for (; s[i]; i++)
		if (((unsigned char)s[i] & 0xC0) != 0x80 && k-- == 0)
			break;
	return i;
}

/* Writes S[0, N) with each terminal-unsafe sequence (tg_unsafe_seq: control
 * bytes, C1 and bidirectional controls) as one '?': a thread's name is the
 * program's. */
static void live_put_text(FILE *f, const char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t u = tg_unsafe_seq((const unsigned char *)s + i, n - i);
		fputc(u ? '?' : s[i], f);
		i += u ? u : 1;
	}
}

/* A line of the frame, cut at WIDTH columns (0: no limit), then EOL. */
__attribute__((format(printf, 4, 5)))
static void live_line(FILE *f, int width, const char *eol, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if (n >= (int)sizeof(line))
		n = (int)sizeof(line) - 1;
	if (width > 0 && n > width)
		n = width;
	live_put_text(f, line, (size_t)n);
	fputs(eol, f);
}

/* NAME in W columns into OUT (N bytes, LIVE_NAME_BUF): padded, or its head
 * (two thirds) and its tail around ".." when longer: names differ near their
 * start ("Thread-12 (process_request_thread)") or at their end ("pool-worker-17"). */
#define LIVE_NAME_BUF (LIVE_NAME_MAX * 4 + 1)
static void live_fit_name(char *out, size_t n, const char *name, int w)
{
	size_t len = strlen(name), chars = live_chars(name, len);
	size_t head, tail, cut, from;

	if (chars <= (size_t)w) {
		snprintf(out, n, "%s%*s", name, (int)((size_t)w - chars), "");
		return;
	}
	head = (size_t)(w - 2) * 2 / 3;
	tail = (size_t)(w - 2) - head;
	cut = live_char_at(name, head);
	from = live_char_at(name, chars - tail);
	snprintf(out, n, "%.*s..%s", (int)cut, name, name + from);
}

/* The THREAD column's width: the longest name, within what COLS leaves beside
 * the figures on a terminal (TTY), else within LIVE_NAME_MAX. */
static int live_name_width(const struct tg_live *lv, int cols, int tty)
{
	int w = LIVE_NAME_MIN, room = tty ? cols - 1 - LIVE_FIGURES : LIVE_NAME_MAX;

	for (size_t i = 0; i < lv->n_threads; i++) {
		const char *n = lv->threads[i].name;
		size_t c = live_chars(n, strlen(n));
		if (c > (size_t)w)
			w = c > LIVE_NAME_MAX ? LIVE_NAME_MAX : (int)c;
	}
	if (w > room)
		w = room;
	return w < LIVE_NAME_MIN ? LIVE_NAME_MIN : w;
}

/* The process's resident set now, from /proc when it still runs, else -1. */
static int64_t live_rss_now(uint32_t pid)
{
	char path[64];
	long pages, resident;
	FILE *f;
	int n;

	snprintf(path, sizeof(path), "/proc/%u/statm", (unsigned)pid);
	if (!(f = fopen(path, "r")))
		return -1;
	n = fscanf(f, "%ld %ld", &pages, &resident);
	fclose(f);
	if (n != 2)
		return -1;
	return (int64_t)resident * sysconf(_SC_PAGESIZE);
}

/* The process's threads now (/proc/PID/status "Threads:"), or -1 when it is
 * gone or the line is not there. */
static long live_threads_now(uint32_t pid)
{
	char path[64], line[256];
	long n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/status", (unsigned)pid);
	if (!(f = fopen(path, "r")))
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Threads: %ld", &n) == 1)
			break;
	fclose(f);
	return n;
}

/* The threads in the view's order: an array of pointers (owned by the caller). */
static const struct tg_live_thread **live_ordered(const struct live_view *v)
{
	const struct tg_live_thread **o = malloc((v->lv.n_threads + 1) * sizeof(*o));
	const struct live_sort *s = &live_sorts[v->sort];

	if (!o)
		return NULL;
	for (size_t i = 0; i < v->lv.n_threads; i++)
		o[i] = &v->lv.threads[i];
	/* insertion sort: stable, and the table is small */
	for (size_t i = 1; s->cmp && i < v->lv.n_threads; i++) {
		const struct tg_live_thread *t = o[i];
		size_t j = i;
		while (j > 0 && s->cmp(o[j - 1], t) > 0) {
			o[j] = o[j - 1];
			j--;
		}
		o[j] = t;
	}
	return o;
}

/*
 * Reads the newest snapshot of the run (accounting on: periodic, threshold or
 * manual snapshots while it runs, the final one at its end) when the run
 * directory changed since the last look (a snapshot is a new file in it), as
 * the call sites by live bytes, merged over the threads.  No snapshot (no
 * accounting, or none written yet): nothing shown.
 */
static void live_snap_refresh(struct live_view *v)
{
	struct tg_snapshot s;
	struct tg_diag d = { 0 };
	struct stat st;

	if (!v->dir || stat(v->dir, &st) != 0)
		return;
	if (st.st_mtim.tv_sec == v->dir_mtime.tv_sec && st.st_mtim.tv_nsec == v->dir_mtime.tv_nsec)
		return;
	v->dir_mtime = st.st_mtim;
	d.probe = 1;  /* none yet is no error here */
	if (tg_snapshot_read(&s, v->dir, &d) < 0)
		return;
	if (tg_snapshot_group(&s, 1, 1, &d) < 0) {
		tg_snapshot_release(&s);
		return;
	}
	tg_snapshot_sort(&s, TG_SNAP_LIVE);
	if (v->has_snap)
		tg_snapshot_release(&v->snap);
	v->snap = s;
	v->has_snap = 1;
	v->snap_mtime = stat(s.path, &st) == 0 ? st.st_mtime : 0;
}

/* The call sites panel: LIVE_SITES_SHOWN lines and a title, when a snapshot is
 * known, in at most MAX lines (the blank line and the title included: none
 * below 3).  Returns the lines drawn. */
static int live_draw_sites(FILE *f, const struct live_view *v, int cols, int tty, const char *eol,
			   int max)
{
	const struct tg_snapshot *s = &v->snap;
	const char *base = strrchr(s->path, '/');
	char a[32], when[32] = "";
	struct tm tm;
	int drawn = 2;

	if (max < 3)
		return 0;
	if (v->snap_mtime && localtime_r(&v->snap_mtime, &tm))
		strftime(when, sizeof(when), ", written %H:%M:%S", &tm);
	fprintf(f, "%s%s", eol, tty ? "\033[1m" : "");
	live_line(f, tty ? cols - 1 : 0, "", "top call sites by live bytes, all threads (%s%s)",
		  base ? base + 1 : s->path, when);
	fprintf(f, "%s%s", tty ? "\033[0m" : "", eol);
	/* sorted by live bytes: the sites past the last one holding memory (allocated
	 * and all freed since) say nothing of what is live, and are not listed */
	for (size_t i = 0; i < s->n && i < LIVE_SITES_SHOWN && s->sites[i].live_bytes > 0
		     && drawn < max; i++, drawn++) {
		char line[512];
		live_bytes(a, sizeof(a), s->sites[i].live_bytes, 0);
		snprintf(line, sizeof(line), "  %12s %8lld  %s", a, (long long)s->sites[i].live_count,
			 s->sites[i].site);
		fprintf(f, "%.*s%s", tty ? cols - 1 : (int)sizeof(line), line, eol);
	}
	return drawn;
}

/* One function's line: its bytes, calls, name and FILE:LINE, in WIDTH columns
 * (0: no limit).  A path too long loses its head ("..lib/python3.12/x.py:12"):
 * its end names the file. */
static void live_draw_func(FILE *f, const struct tg_live_func *fn, int width, const char *eol)
{
	char a[32], head[600], loc[512];
	int n, keep;
	size_t len;

	live_bytes(a, sizeof(a), fn->net, 0);
	n = snprintf(head, sizeof(head), "  %11s %8lu  %s  ", a, fn->calls, fn->func);
	if (n < 0 || n >= (int)sizeof(head))
		n = (int)sizeof(head) - 1;
	if (fn->line)
		snprintf(loc, sizeof(loc), "%s:%llu", fn->file, (unsigned long long)fn->line);
	else
		snprintf(loc, sizeof(loc), "%s", fn->file);
	len = strlen(loc);
	keep = width - n;
	if (!width || len <= (size_t)(keep > 0 ? keep : 0)) {
		live_put_text(f, head, (size_t)n);
		live_put_text(f, loc, len);
	} else if (keep >= 12) {
		live_put_text(f, head, (size_t)n);
		fputs("..", f);
		live_put_text(f, loc + len - (size_t)(keep - 2), (size_t)(keep - 2));
	} else {
		live_put_text(f, head, (size_t)(n < width ? n : width));
	}
	fputs(eol, f);
}

/* A curve reading's age, at T_US: "2.4 s" before now (the run goes on) or
 * before the run's end (runinfo.json's end_time; the run's newest reading when
 * that is not known, or earlier), "-" before any. */
static void live_age(char *buf, size_t n, const struct tg_live *lv, int64_t t_us)
{
	struct timespec ts;
	int64_t ref;

	if (!t_us) {
		snprintf(buf, n, "-");
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	/* an ended run: the age a thread's NOW had when the run ended, so that a
	 * thread that stopped allocating long before shows it */
	if (lv->ended)
		ref = lv->end_us > lv->last_us ? lv->end_us : lv->last_us;
	else
		ref = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
	snprintf(buf, n, "%.1f s", (double)(ref - t_us) / 1e6);
}

/* The frame: LINES lines of at most COLS columns on F (plain text with
 * TTY 0; reverse video for the selected thread with TTY 1). */
static void live_draw(FILE *f, const struct live_view *v, int lines, int cols, int tty)
{
	const struct tg_live *lv = &v->lv;
	const struct tg_live_thread **o;
	const char *eol = tty ? "\033[K\n" : "\n";
	char a[32], b[32], c[32], d[32];
	int64_t rss = lv->ended ? -1 : live_rss_now(lv->pid), total = 0;
	long running;
	int used = 0, room, left, w = live_name_width(lv, cols, tty);
	char age[64] = "", tail[128], name[LIVE_NAME_BUF];
	size_t run_len, run_room;
	size_t shown = 0;
	const char *sel_name = NULL;

	if (lv->readings && lv->curves) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		if (lv->ended)
			snprintf(age, sizeof(age), "run ended");
		else if (!lv->timed)  /* no timestamps: no age to give */
			snprintf(age, sizeof(age), "%s", rss < 0 ? "not running, no end record"
				 : "recording");
		else if (!lv->last_us)
			snprintf(age, sizeof(age), "%s, no reading yet",
				 rss < 0 ? "not running, no end record" : "recording");
		else
			snprintf(age, sizeof(age), "%s, latest reading %.1f s ago",
				 rss < 0 ? "not running, no end record" : "recording",
				 (double)((int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000
					  - lv->last_us) / 1e6);
	} else if (lv->readings && !lv->timed) {
		snprintf(age, sizeof(age), "%s", lv->ended ? "run ended" : "recording");
	} else if (lv->readings && !lv->ended) {  /* the latest record's age: how fresh, or how idle */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		/* no end record and no such process (here): it was killed, or
		 * the run was copied from another machine */
		snprintf(age, sizeof(age), "%s, latest record %.1f s ago",
			 rss < 0 ? "not running, no end record" : "recording",
			 (double)((int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000 - lv->last_us)
			 / 1e6);
	} else if (lv->readings) {
		snprintf(age, sizeof(age), "run ended after %.1f s",
			 (double)(lv->last_us - lv->start_us) / 1e6);
	} else {
		snprintf(age, sizeof(age), "waiting");
	}
	/* The run's path gets what the rest leaves, losing its head (its end names
	 * the run) for "..." (not "..": cut before a '/', that read as the parent
	 * directory); PAUSED comes first, where it is never cut. */
	snprintf(tail, sizeof(tail), "  pid %u  %s", (unsigned)lv->pid, age);
	run_len = strlen(v->run);
	run_room = (size_t)(cols > 0 ? cols : 80) - 1 - strlen("threadgraph live  ") - strlen(tail)
		   - (v->paused ? strlen("PAUSED  ") : 0);
	if ((ssize_t)run_room < 12)
		run_room = 12;
	live_line(f, tty ? cols - 1 : 0, eol, "threadgraph live  %s%s%s%s",
		  v->paused ? "PAUSED  " : "", tty && run_len > run_room ? "..." : "",
		  tty && run_len > run_room ? v->run + run_len - (run_room - 3) : v->run, tail);
	used++;
	for (size_t i = 0; i < lv->n_threads; i++)
		if (__builtin_add_overflow(total, lv->threads[i].now, &total))
			/* a damaged file's figures: held at the bound, not wrapped */
			total = lv->threads[i].now < 0 ? INT64_MIN : INT64_MAX;
	live_bytes(a, sizeof(a), total, 0);
	if (rss >= 0)
		live_bytes(b, sizeof(b), rss, 0);
	else if (lv->has_process)
		live_bytes(b, sizeof(b), lv->process_bytes, 0);
	else
		snprintf(b, sizeof(b), "-");
	/* The threads the process runs now (from /proc, beside its RSS), and the
	 * rows the figures have: every thread the run has seen, the ended ones
	 * too (an aggregate run's rows fold families of ended threads), which
	 * a thread per request makes grow without bound: not to be read as a
	 * thread leak. */
	running = rss >= 0 ? live_threads_now(lv->pid) : -1;
	if (running >= 0)
		snprintf(c, sizeof(c), "%ld running, ", running);
	else
		c[0] = '\0';
	/* a sampled run's NOW is each thread's latest reading, which LATEST dates */
	live_line(f, tty ? cols - 1 : 0, eol,
		  "process: RSS %s%s  threads %s%zu %s  their memory %s %s", b,
		  rss < 0 && lv->has_process ? " (last sample)" : "", c, lv->n_threads,
		  v->agg ? "rows" : "seen", lv->curves ? "at their latest readings" : "now", a);
	used++;
	if (v->status[0]) {
		live_line(f, tty ? cols - 1 : 0, eol, "%s", v->status);
		used++;
	}
	fputs(tty ? "\033[1m" : "", f);
	live_line(f, tty ? cols - 1 : 0, "", " %-*s %11s %11s %11s %11s %9s", w, "THREAD",
		  "NOW", "CHANGE/s", "PEAK", lv->curves ? "LATEST" : "LARGEST",
		  lv->curves ? "READINGS" : "RETURNS");
	fprintf(f, "%s%s", tty ? "\033[0m" : "", eol);
	used++;
	room = lines - used - 4 - LIVE_FUNCS_SHOWN - (v->has_snap ? LIVE_SITES_SHOWN + 2 : 0);
	if (room < 3)
		room = 3;
	/* a small terminal: the threads first, with the "more" line and the keys'
	 * line, and the panels below get what is left (a frame taller than the
	 * terminal scrolls its title and header off) */
	if (room > lines - used - 2)
		room = lines - used - 2 > 1 ? lines - used - 2 : 1;
	o = live_ordered(v);
	for (size_t i = 0; o && i < lv->n_threads && (int)shown < room; i++, shown++) {
		const struct tg_live_thread *t = o[i];
		int sel = v->selected == t->stream;

		live_bytes(a, sizeof(a), t->now, 0);
		live_bytes(b, sizeof(b), live_per_second(t->change, v->interval), 1);
		live_bytes(c, sizeof(c), t->peak, 0);
		if (lv->curves)
			live_age(d, sizeof(d), lv, t->last_us);
		else
			live_bytes(d, sizeof(d), t->largest, 0);
		live_fit_name(name, sizeof(name), t->name, w);
		fputs(sel && tty ? "\033[7m" : "", f);
		live_line(f, tty ? cols - 1 : 0, "", "%c%s %11s %11s %11s %11s %9lu",
			  sel ? '>' : ' ', name, a, b, c, d, t->returns);
		fprintf(f, "%s%s", sel && tty ? "\033[0m" : "", eol);
		used++;
	}
	if (o && shown < lv->n_threads) {
		fprintf(f, " ... %zu more threads (s sorts)%s", lv->n_threads - shown, eol);
		used++;
	}
	free(o);
	/* the lines left for the panels, the keys' line kept */
	left = lines - used - (tty ? 1 : 0);
	if (v->has_snap)
		left -= live_draw_sites(f, v, cols, tty, eol, left);
	for (size_t i = 0; i < lv->n_threads; i++)
		if (lv->threads[i].stream == v->selected)
			sel_name = lv->threads[i].name;
	if (lv->curves) {  /* no calls: the sites come from the run's snapshots */
		if (!v->has_snap && left >= 2) {
			fputs(eol, f);
			live_line(f, tty ? cols - 1 : 0, eol, "call sites: a sampled run records no "
				  "calls; its snapshots (--snapshot-when, the final one) give the "
				  "sites by live bytes");
		}
		if (tty) {
			fputs("\033[J", f);
			live_line(f, cols - 1, "", "q quit  s sort (%s)  p pause",
				  live_sorts[v->sort].name);
		}
		return;
	}
	if (left >= 3) {
		fprintf(f, "%s%s", eol, tty ? "\033[1m" : "");
		live_line(f, tty ? cols - 1 : 0, "", "top functions by net bytes of their calls, %s%s",
			  sel_name ? "thread " : "all threads", sel_name ? sel_name : "");
		fprintf(f, "%s%s", tty ? "\033[0m" : "", eol);
		for (size_t i = 0; i < lv->n_funcs && i < LIVE_FUNCS_SHOWN && (int)i < left - 2; i++)
			live_draw_func(f, &lv->funcs[i], tty ? cols - 1 : 0, eol);
	}
	if (tty) {
		fputs("\033[J", f);
		live_line(f, cols - 1, "", "q quit  s sort (%s)  p pause  j/k select a thread  "
			  "a all threads", live_sorts[v->sort].name);
	}
}

/* What a run directory's runinfo.json says of the run, read once. */
struct live_kind {
	int sampled;    /* a sampled run: its curves (the recorder writes mode at enable()) */
	int aggregate;  /* an aggregate run (before its first aggregate.tga, written a
			   second after enable()) */
	int text_only;  /* a run of text dumps only: the run's mode is given and no
			   capture named (a run of threadgraph 0.x gives no mode: not known) */
};

/* Reads DIR's runinfo.json into *k (all 0 without one).  Returns 0, or
 * TG_EXIT_ERROR with the error printed (out of memory). */
static int live_kind_read(const char *dir, struct live_kind *k)
{
	struct tg_run_threads ri;
	struct tg_diag d = { 0 };

	memset(k, 0, sizeof(*k));
	tg_run_threads_init(&ri);
	if (tg_run_threads_read(&ri, dir, &d) < 0)
		return error("%s", d.msg);
	k->sampled = tg_live_curves_is_run(&ri);
	k->aggregate = ri.aggregate;
	k->text_only = ri.mode && !ri.has_capture;
	tg_run_threads_release(&ri);
	return 0;
}

/* The status line after a reading: empty, or, of a capture of limited size,
 * which part of the run its segments kept cover (the figures but NOW are of
 * those records), as every command says it. */
static void live_status_kept(struct live_view *v)
{
	const struct tg_live *lv = &v->lv;

	v->status[0] = '\0';
	if (lv->seg_first > 1)
		tg_cli_kept_text(v->status, sizeof(v->status), lv->seg_first, lv->seg_last,
				 lv->kept_from_us - lv->start_us,
				 lv->ended ? lv->end_us - lv->start_us : -1);
}

/* After a reading that succeeded, begun at T0 (BEFORE: the readings until
 * then): the seconds since the reading the changes are against. */
static void live_timed(struct live_view *v, const struct timespec *t0, unsigned long before)
{
	v->interval = before ? (double)(t0->tv_sec - v->read_at.tv_sec)
			       + (double)(t0->tv_nsec - v->read_at.tv_nsec) / 1e9 : 0;
	v->read_at = *t0;
}

/* Reads the capture unless paused; keeps the last figures on failure. */
static void live_refresh(struct live_view *v)
{
	struct tg_diag d = { 0 };
	struct timespec t0;
	unsigned long before = v->lv.readings;

	if (v->paused)
		return;
	/* a run not started when the view was: its capture may be segments
	 * (--max-size), not the capture.tg looked for */
	if (v->capture && !v->lv.readings && access(v->capture, F_OK) != 0) {
		char *found;
		if (tg_capture_detect(v->run, &found)) {
			free(v->capture);
			v->capture = found;
		}
	}
	v->lv.focus = v->selected;
	live_snap_refresh(v);
	/* what is read is the files as they are when the reading begins */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (v->sampled || v->agg) {
		if ((v->sampled ? tg_live_curves_read(&v->lv, &v->curves, v->dir, &d)
				: tg_live_agg_read(&v->lv, v->dir, &d)) == 0) {
			v->status[0] = '\0';
			live_timed(v, &t0, before);
		}
		else if (v->agg && !v->lv.readings && !tg_aggfile_is_run(v->dir))
			snprintf(v->status, sizeof(v->status), "waiting for %s/" TG_AGG_FILE
				 " (written every second)", v->dir);
		else
			snprintf(v->status, sizeof(v->status), "cannot read: %.200s", d.msg);
		return;
	}
	if (tg_live_read(&v->lv, v->capture, &d) < 0) {
		if (!v->lv.readings && access(v->capture, F_OK) != 0)
			snprintf(v->status, sizeof(v->status), "waiting for %s", v->capture);
		else
			snprintf(v->status, sizeof(v->status), "cannot read: %.200s", d.msg);
		return;
	}
	live_timed(v, &t0, before);
	live_status_kept(v);
}

/* Moves the selection by STEP in the view's order. */
static void live_select(struct live_view *v, int step)
{
	const struct tg_live_thread **o = live_ordered(v);
	size_t n = v->lv.n_threads, at = n;

	if (!o || !n) {
		free(o);
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (o[i]->stream == v->selected)
			at = i;
	if (at == n)
		at = step > 0 ? 0 : n - 1;
	else if (step > 0)
		at = at + 1 < n ? at + 1 : at;
	else
		at = at > 0 ? at - 1 : 0;
	v->selected = o[at]->stream;
	free(o);
}

/* Acts on the key bytes in BUF; returns 1 when the view must be read again. */
static int live_keys(struct live_view *v, const char *buf, ssize_t n)
{
	int reread = 0;

	for (ssize_t i = 0; i < n; i++) {
		char k = buf[i];

		if (k == '\033' && i + 2 < n && buf[i + 1] == '[') {  /* arrows */
			k = buf[i + 2] == 'A' ? 'k' : buf[i + 2] == 'B' ? 'j' : 0;
			i += 2;
		}
		switch (k) {
		case 'q': case 'Q': case 3 /* ^C in raw mode */:
			v->done = 1;
			break;
		case 's':
			v->sort = (v->sort + 1) % LIVE_NSORTS;
			break;
		case 'p': case ' ':
			v->paused = !v->paused;
			break;
		case 'j': live_select(v, 1); reread = 1; break;
		case 'k': live_select(v, -1); reread = 1; break;
		case 'a': v->selected = 0; reread = 1; break;
		default: break;
		}
	}
	return reread;
}

static void live_term_size(int *lines, int *cols)
{
	struct winsize ws;

	*lines = 24;
	*cols = 80;
	if (ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
		*lines = ws.ws_row;
		*cols = ws.ws_col;
	}
}

/* Draws one frame at the top of the alternate screen, in one write. */
static void live_frame(const struct live_view *v)
{
	char *buf = NULL;
	size_t len = 0;
	int lines, cols;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return;
	live_term_size(&lines, &cols);
	fputs("\033[H", f);
	live_draw(f, v, lines, cols, 1);
	fclose(f);
	if (buf && write(1, buf, len) < 0)
		errno = 0;  /* the terminal went away: the loop ends at end of input */
	free(buf);
}

/* Milliseconds from B to A (negative: A is before B). */
static long live_ms_since(const struct timespec *a, const struct timespec *b)
{
	return (long)(a->tv_sec - b->tv_sec) * 1000 + (a->tv_nsec - b->tv_nsec) / 1000000;
}

/* The interactive loop on a terminal: returns the exit code. */
static int live_interactive(struct live_view *v)
{
	struct termios saved, raw;
	struct sigaction sa = { 0 }, old[5];
	const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
	int have_tty = tcgetattr(0, &saved) == 0, reread = 0;
	struct timespec next = { 0 };  /* when the next reading is due */

	if (have_tty) {
		raw = saved;
		raw.c_lflag &= ~(ICANON | ECHO);
		raw.c_cc[VMIN] = 1;
		raw.c_cc[VTIME] = 0;
		tcsetattr(0, TCSANOW, &raw);
	}
	sa.sa_handler = live_on_signal;
	for (size_t i = 0; i < 4; i++)
		sigaction(sigs[i], &sa, &old[i]);
	sa.sa_handler = live_on_winch;
	sigaction(SIGWINCH, &sa, &old[4]);
	fputs("\033[?1049h\033[?25l\033[2J", stdout);  /* alternate screen, no cursor */
	fflush(stdout);
	/* A reading every LIVE_REFRESH_MS after the previous one ended, or at
	 * once for a new selection; a key or a resize only draws again, so that
	 * CHANGE/s keeps a second's worth of records (a reading just after
	 * another may hold a flush that took half a second, over a few ms). */
	while (!v->done && !live_signal) {
		struct pollfd p = { .fd = 0, .events = POLLIN };
		struct timespec now;
		char buf[64];
		int r, wait_ms;

		clock_gettime(CLOCK_MONOTONIC, &now);
		if (reread || !v->lv.readings || live_ms_since(&now, &next) >= 0) {
			live_refresh(v);
			clock_gettime(CLOCK_MONOTONIC, &next);
			next.tv_sec += LIVE_REFRESH_MS / 1000;
			next.tv_nsec += (LIVE_REFRESH_MS % 1000) * 1000000L;
			if (next.tv_nsec >= 1000000000L) {
				next.tv_sec++;
				next.tv_nsec -= 1000000000L;
			}
			reread = 0;
			clock_gettime(CLOCK_MONOTONIC, &now);
		}
		live_frame(v);
		wait_ms = -live_ms_since(&now, &next);
		r = poll(&p, 1, wait_ms > 0 ? wait_ms : 0);
		if (r > 0) {
			ssize_t n = read(0, buf, sizeof(buf));
			if (n <= 0) {
				v->done = 1;  /* end of input */
			} else if (live_keys(v, buf, n)) {
				reread = 1;
				v->paused = 0;  /* a new selection is shown even when paused */
			}
		}
		live_resized = 0;
	}
	fputs("\033[?25h\033[?1049l", stdout);  /* the terminal as it was */
	fflush(stdout);
	if (have_tty)
		tcsetattr(0, TCSANOW, &saved);
	for (size_t i = 0; i < 4; i++)
		sigaction(sigs[i], &old[i], NULL);
	sigaction(SIGWINCH, &old[4], NULL);
	if (live_signal && live_signal != SIGINT)
		return 128 + live_signal;
	return TG_EXIT_OK;
}

int cmd_live(int argc, char **argv)
{
	struct live_view v = { 0 };
	const char *sort = NULL;
	int once = 0, nargs, ret, missing, is_dir;
	struct live_kind kind = { 0 };
	struct stat st;
	const struct tg_option opts[] = {
		{ "once", 0, TG_OPT_BOOL, &once, NULL, NULL,
		  "print one reading as plain text on stdout and exit (no terminal needed)" },
		{ "sort", 0, TG_OPT_STRING, &sort, NULL, "KEY",
		  "order of the threads: now (default), change, peak, largest, name, start" },
		TG_OPT_END_ROW,
	};

	ret = tg_parse_options(argc, argv, opts, live_usage,
			       "A view of each thread's memory, refreshed every second, of a run being "
			       "written\n(or ended): its memory now, its change per second, "
			       "its peak, its\nlargest call, the process RSS and the top functions. Keys: "
			       "q quits, s sorts,\np pauses, j/k select a thread (its functions), a all "
			       "threads. With a PID\n(threadgraph live PID, the Python command) it "
			       "attaches first and detaches on q.\n\nIt reads a run's binary "
			       "capture, a sampled run's memory curves (run --sampled;\nits call "
			       "sites from the snapshots that run --snapshot-every writes) or an\n"
			       "aggregate run's aggregate.tga (run --aggregate); run --live shows it "
			       "for the\nprogram it runs. A full run of text dumps (--format text) "
			       "has none of them.", &nargs);
	if (ret)
		return ret == 1 ? TG_EXIT_OK : TG_EXIT_USAGE;
	tg_resolve_run_bases(argv, nargs > 0);
	if (nargs != 1)
		return usage_error(live_usage, "expected one run directory");
	if (sort) {
		for (v.sort = 0; v.sort < LIVE_NSORTS && strcmp(live_sorts[v.sort].name, sort); v.sort++)
			;
		if (v.sort == LIVE_NSORTS)
			return usage_error(live_usage, "unknown sort key '%s'", sort);
	}
	v.run = argv[0];
	/* A directory, or a run not started yet (interactive: the view waits for
	 * its capture, saying so): RUN_DIR/capture.tg. */
	errno = 0;
	missing = stat(argv[0], &st) != 0 && errno == ENOENT;
	is_dir = !missing && errno == 0 && S_ISDIR(st.st_mode);
	if (is_dir && (ret = live_kind_read(argv[0], &kind)) != 0)
		return ret;
	if (kind.sampled) {
		v.sampled = 1;  /* its curves, read as they grow */
	} else if (is_dir && (tg_aggfile_is_run(argv[0]) || kind.aggregate)) {
		v.agg = 1;      /* its aggregate.tga, rewritten every second */
	} else if (!is_dir && tg_aggfile_is_run(argv[0])) {
		return error("'%s' is an aggregate file: give live its run directory", argv[0]);
	} else if (is_dir && tg_capture_detect(argv[0], &v.capture)) {
		;  /* its capture.tg, or its segments (--max-size) */
	} else if (kind.text_only) {
		return error("'%s' is a run of text dumps (--format text): live reads a binary "
			     "capture, or a sampled run's curves; record with --format binary or "
			     "both", argv[0]);
	} else if (is_dir || (missing && !once)) {
		size_t n = strlen(argv[0]);
		if (!(v.capture = malloc(n + sizeof("/" TG_CAP_FILENAME))))
			return error("out of memory");
		memcpy(v.capture, argv[0], n);
		strcpy(v.capture + n, "/" TG_CAP_FILENAME);
	} else if (!tg_capture_detect(argv[0], &v.capture)) {
		return error("'%s' is not a run directory or a capture (live reads the binary "
			     "capture, or a sampled run's curves: a full run made with --format "
			     "text has neither)", argv[0]);
	}
	tg_live_init(&v.lv);
	tg_live_curves_init(&v.curves);
	if ((v.dir = strdup(v.sampled || v.agg ? argv[0] : v.capture)) != NULL
	    && !v.sampled && !v.agg) {
		char *slash = strrchr(v.dir, '/');
		if (slash)
			*slash = '\0';
		else
			strcpy(v.dir, ".");
	}
	if (!v.dir)
		return error("out of memory");
	if (once) {
		struct tg_diag d = { 0 };
		live_snap_refresh(&v);
		if ((v.sampled ? tg_live_curves_read(&v.lv, &v.curves, v.dir, &d)
		     : v.agg ? tg_live_agg_read(&v.lv, v.dir, &d)
			     : tg_live_read(&v.lv, v.capture, &d)) < 0) {
			ret = error("%s", d.msg);
		} else {
			live_status_kept(&v);
			live_draw(stdout, &v, 1000000, 1000, 0);
			ret = TG_EXIT_OK;
		}
	} else if (!isatty(1)) {
		ret = error("live draws on a terminal: give --once to print one reading");
	} else {
		ret = live_interactive(&v);
	}
	tg_live_release(&v.lv);
	tg_live_curves_release(&v.curves);
	if (v.has_snap)
		tg_snapshot_release(&v.snap);
	free(v.dir);
	free(v.capture);
	return ret;
}
