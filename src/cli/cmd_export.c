/*
 * cmd_export.c - threadgraph export: a binary capture back to the text dumps,
 * or a run's allocations as a pprof profile or a speedscope file.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "aggfile.h"
#include "atomic_out.h"
#include "cli.h"
#include "export.h"
#include "fold_cli.h"
#include "marks.h"
#include "pprof.h"
#include "speedscope.h"
#include "tg_format.h"
#include "xprof.h"

static const char export_usage[] =
	"threadgraph export [-o DIR] [-q] [--max-output MB] RUN_DIR|CAPTURE\n"
	"       threadgraph export --pprof -o FILE.pb.gz [--speedscope FILE.json [--metric alloc|live]] "
	"[-q] RUN_DIR|SNAPSHOT\n"
	"       threadgraph export --speedscope FILE.json [--metric alloc|live] [-q] RUN_DIR|SNAPSHOT";

/* What export_profiles writes. */
struct export_prof_args {
	const char *pprof;       /* -o FILE with --pprof, else NULL */
	const char *speedscope;  /* --speedscope FILE, else NULL */
	enum tg_xval weight;     /* speedscope's weights (--metric) */
	int quiet;
};

/*
 * Fills X from PATH: its accounting snapshot (a run directory's final one, or a
 * snapshot file) or, for a run without accounting (or a capture), its recorded
 * per-call deltas.  Returns 0 or the exit code after printing the error.
 */
/* Whether DIR is the directory holding the capture file CAPTURE_PATH. */
static int export_same_dir(const char *capture_path, const char *dir)
{
	const char *slash = strrchr(capture_path, '/');
	char *capdir = slash ? strndup(capture_path, slash == capture_path ? 1 :
				       (size_t)(slash - capture_path)) : strdup(".");
	struct stat a, b;
	int same = capdir && stat(capdir, &a) == 0 && stat(dir, &b) == 0 &&
		   a.st_dev == b.st_dev && a.st_ino == b.st_ino;

	free(capdir);
	return same;
}

static int export_load(const char *path, struct tg_xprof *x)
{
	struct tg_snapshot s;
	struct tg_capture *cap = NULL;
	struct tg_common_args c = { 0 };
	struct tg_fold_args fa = { 0 };
	struct tg_fold f;
	struct tg_diag d;
	struct stat st = { 0 };
	int rc;

	tg_cli_diag_init(&d, &c);
	if ((rc = tg_dumpset_open_capture(path, &cap, &d)) < 0)
		return error("%s", d.msg);
	tg_dumpset_free_capture(cap);
	/* A snapshot file, or a run directory, with or without a capture: its
	 * accounting (the final snapshot) first; a capture file given as such
	 * holds only the recorded calls. */
	if (rc == 0 || (stat(path, &st) == 0 && S_ISDIR(st.st_mode))) {
		if (tg_snapshot_read(&s, path, &d) == 0) {
			rc = tg_xprof_from_snapshot(x, &s, &d);
			tg_snapshot_release(&s);
			if (rc < 0)
				return error("%s", d.msg);
			if (x->sampled)
				warning("sampled run (one sample per %lld bytes on average): the "
					"values are estimates", (long long)x->sampled);
			tg_cli_diag_summary(&d);
			return 0;
		}
		if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode) || !strstr(d.msg, "no snapshot in"))
			return error("%s", d.msg);
	}
	/* no accounting: the recorded calls' deltas are the best there is */
	tg_cli_note_no_accounting(path, rc == 1 && !S_ISDIR(st.st_mode),
				  "the profile holds the recorded per-call deltas (docs/formats.md, "
				  "\"pprof and speedscope\")");
	fa.metric = "delta";
	fa.has_metric = 1;
	/* each sample's thread is the one that allocated: pool and asyncio tasks stay
	 * under the thread that ran them, not grafted under their submitter as
	 * `folded` grafts them (the accounting path attributes them so too) */
	fa.no_stitch = 1;
	fa.max_depth = TG_FOLD_MAX_DEPTH;
	if ((rc = tg_cli_fold_load(&fa, path, export_usage, &f, &d)) != 0)
		return rc;
	rc = tg_xprof_from_fold(x, &f, &d);
	tg_fold_release(&f);
	return rc < 0 ? error("%s", d.msg) : 0;
}

/* Writes X to OUT as a pprof profile (PPROF) or a speedscope file; 0 or -1
 * (d->msg set, naming FILE). */
static int export_write(FILE *out, const char *file, const struct tg_xprof *x,
			const struct export_prof_args *a, int pprof, struct tg_diag *d)
{
	char why[sizeof(d->msg)];

	if (pprof ? tg_pprof_write(out, x, d) == 0
	    : tg_speedscope_write(out, x, a->weight, x->source ? x->source : "run", d) == 0)
		return 0;
	memcpy(why, d->msg, sizeof(why));
	return tg_error(d, "%s (writing '%s')", why, file);
}

/*
 * Writes FILE: a regular file (or a new one) whole or not at all, through a
 * temporary file renamed into place; a symbolic link, a device or a pipe that
 * exists (/dev/stdout) directly, never replaced (tg_aout_open_path).  0 or
 * the exit code after the error.
 */
static int export_one(const char *file, const struct tg_xprof *x, const struct export_prof_args *a,
		      int pprof)
{
	struct tg_aout out = { 0 };
	struct tg_diag d = { 0 };

	if (tg_cli_open_output(file, &out, &d) < 0)
		return error("%s", d.msg);
	if (export_write(out.f, file, x, a, pprof, &d) < 0) {
		tg_aout_abort(&out);
		return error("%s", d.msg);
	}
	if (tg_aout_commit(&out, &d) < 0) {
		tg_aout_release(&out);
		return error("%s", d.msg);
	}
	tg_aout_release(&out);
	if (!a->quiet) {
		/* "<no thread>" holds the snapshot's nodes without a thread: not one
		 * (xp_no_thread_last puts it last) */
		size_t nt = x->n_threads - (x->no_thread_samples ? 1 : 0);
		size_t ns = x->n_samples, nn = x->no_thread_samples, i;

		if (!pprof) {
			/* speedscope leaves out the samples of no weight (--metric live:
			 * what was all freed): count those written */
			size_t none = x->no_thread_samples ? x->threads[x->n_threads - 1] : (size_t)-1;

			for (ns = nn = i = 0; i < x->n_samples; i++)
				if (x->samples[i].v[a->weight] > 0) {
					ns++;
					nn += x->samples[i].thread == none;
				}
		}
		fprintf(stderr, "wrote %s profile of %zu sample%s (%zu thread%s",
			pprof ? "a pprof" : "a speedscope", ns,
			ns == 1 ? "" : "s", nt, nt == 1 ? "" : "s");
		if (nn)
			fprintf(stderr, ", and %zu sample%s with no thread, labelled "
				"'<no thread>'", nn, nn == 1 ? "" : "s");
		fputs(") to ", stderr);
		tg_cli_put(stderr, file);
		fputc('\n', stderr);
	}
	return 0;
}

static int export_profiles(const char *path, const struct export_prof_args *a)
{
	struct tg_xprof x;
	int ret;

	tg_xprof_init(&x);
	if ((ret = export_load(path, &x)) != 0)
		goto out;
	if (!x.n_samples)
		warning("'%s' holds no allocation: the profile is empty", x.source ? x.source : path);
	if (a->pprof && (ret = export_one(a->pprof, &x, a, 1)) != 0)
		goto out;
	if (a->speedscope)
		ret = export_one(a->speedscope, &x, a, 0);
out:
	tg_xprof_release(&x);
	return ret;
}

/* PATH's directory resolved (realpath) and its last name: two spellings of
 * one file, existing or not, give the same string.  NULL if the directory
 * does not resolve. */
static char *export_canonical(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path))
		: strdup(".");
	char *real = dir ? realpath(dir, NULL) : NULL;
	char *out = NULL;
	const char *name = slash ? slash + 1 : path;

	if (real && (out = malloc(strlen(real) + strlen(name) + 2)))
		sprintf(out, "%s/%s", real, name);
	free(real);
	free(dir);
	return out;
}

/* A and B name one file (the same path spelt two ways, or links to one
 * inode): an output that would replace an input, or the other output. */
static int export_same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	char *ca, *cb;
	int same;

	if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
		return S_ISREG(sa.st_mode) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
	ca = export_canonical(a);
	cb = export_canonical(b);
	same = ca && cb && !strcmp(ca, cb);
	free(ca);
	free(cb);
	return same;
}

/* Whether OUT would replace a file that export reads from IN: IN itself (a
 * snapshot or capture file), or, IN being a run directory, the snapshot it
 * stands for (its final one), its capture.tg, or one of its text dumps (a
 * .mem or .stack file in it).  Returns the file's description or NULL. */
static const char *export_input_clash(const char *in, const char *out)
{
	struct tg_diag probe = { .probe = 1 };
	struct stat st, so, sd;
	const char *what = NULL, *slash, *name;
	char *p = NULL, *odir;
	size_t n;

	if (export_same_file(in, out))
		return "the snapshot to read";
	if (stat(in, &st) != 0 || !S_ISDIR(st.st_mode))
		return NULL;
	if ((p = tg_snapshot_find(in, TG_SNAP_PICK_LAST, &probe)) && export_same_file(p, out))
		what = "the run's snapshot, which export reads";
	free(p);
	p = NULL;
	if (!what && asprintf(&p, "%s/capture.tg", in) >= 0 && export_same_file(p, out))
		what = "the run's capture, which export reads";
	free(p);
	if (what)
		return what;
	/* a text dump of the run: OUT in IN, named *.mem or *.stack */
	slash = strrchr(out, '/');
	name = slash ? slash + 1 : out;
	n = strlen(name);
	if (!((n > 4 && !strcmp(name + n - 4, ".mem")) || (n > 6 && !strcmp(name + n - 6, ".stack"))))
		return NULL;
	odir = slash ? strndup(out, slash == out ? 1 : (size_t)(slash - out)) : strdup(".");
	if (odir && stat(odir, &sd) == 0 && sd.st_dev == st.st_dev && sd.st_ino == st.st_ino &&
	    (stat(out, &so) != 0 || S_ISREG(so.st_mode)))
		what = "a dump of the run, which export reads";
	free(odir);
	return what;
}

int cmd_export(int argc, char **argv)
{
	struct tg_capture *cap = NULL;
	struct tg_export_stats st;
	struct tg_diag d = { 0 };
	const char *outdir = NULL, *speedscope = NULL, *metric = "alloc";
	const char *clash, *clashing;
	char *dir = NULL;
	int nargs, ret, quiet = 0, pprof = 0, has_metric = 0, has_max = 0;
	unsigned long max_mib = ULONG_MAX;  /* unset: tg_export_default_max */
	const struct tg_option opts[] = {
		{ "max-output", 0, TG_OPT_COUNT, &max_mib, &has_max, "MB",
		  "write at most MB megabytes (2^20 bytes) of text (default: 1024 plus 100 times the "
		  "capture's size, 0: no limit): a .stack line is indented by its depth" },
		{ "metric", 0, TG_OPT_STRING, &metric, &has_metric, "M",
		  "--speedscope's weights: alloc (bytes allocated, default) or live (bytes "
		  "live when the snapshot was written)" },
		{ "output", 'o', TG_OPT_STRING, &outdir, NULL, "DIR",
		  "write the files into DIR, created if missing (default: the capture's "
		  "directory); with --pprof, the profile's file" },
		{ "pprof", 0, TG_OPT_BOOL, &pprof, NULL, NULL,
		  "write a gzip'd pprof profile (alloc_objects, alloc_space, inuse_objects, "
		  "inuse_space; a thread label) to -o FILE" },
		{ "speedscope", 0, TG_OPT_STRING, &speedscope, NULL, "FILE",
		  "write a speedscope file, one profile per thread, weights in bytes" },
		{ "quiet", 'q', TG_OPT_BOOL, &quiet, NULL, NULL,
		  "do not print what was written" },
		TG_OPT_END_ROW,
	};

	ret = tg_parse_options(argc, argv, opts, export_usage,
			       "Writes the text dumps of a binary capture (RUN_DIR/capture.tg), "
			       "byte for byte what\nthe recorder writes in text mode: THREAD.mem, "
			       "THREAD.stack, process.mem.\nNever overwrites a file.", &nargs);
	if (ret)
		return ret == 1 ? TG_EXIT_OK : TG_EXIT_USAGE;
	tg_resolve_run_bases(argv, nargs > 0);  /* RUN_DIR: a base of runs reads its latest */
	if (nargs != 1)
		return usage_error(export_usage, "expected one run directory or capture file");
	if (!pprof && !speedscope && tg_aggfile_is_run(argv[0]))
		return error("'%s' is an aggregate run (aggregate.tga): it keeps call paths and "
			     "curves, no records to export as dumps; summary, folded, flamegraph, "
			     "memg, peaks and report read it", argv[0]);
	if (pprof || speedscope) {
		struct export_prof_args pa = { NULL, speedscope, TG_XV_ALLOC_SPACE, quiet };

		if (pprof && !outdir)
			return usage_error(export_usage, "--pprof needs -o FILE, the profile to write");
		if (!pprof && outdir)
			return usage_error(export_usage, "-o names --pprof's file; --speedscope "
					   "takes its own");
		if (has_max)
			return usage_error(export_usage, "--max-output limits the text dumps, not "
					   "--pprof or --speedscope");
		if (has_metric && !speedscope)
			return usage_error(export_usage, "--metric chooses --speedscope's weights");
		if (pprof && speedscope && export_same_file(outdir, speedscope))
			return usage_error(export_usage, "--pprof's -o and --speedscope name the "
					   "same file '%s': give each its own", speedscope);
		clashing = pprof ? outdir : speedscope;
		if (!(clash = export_input_clash(argv[0], clashing)) && speedscope)
			clash = export_input_clash(argv[0], clashing = speedscope);
		if (clash)
			return error("'%s' is %s: write the profile to another file",
				     clashing, clash);
		if (!strcmp(metric, "live"))
			pa.weight = TG_XV_INUSE_SPACE;
		else if (strcmp(metric, "alloc"))
			return usage_error(export_usage, "unknown metric '%s' (expected alloc or "
					   "live)", metric);
		pa.pprof = pprof ? outdir : NULL;
		return export_profiles(argv[0], &pa);
	}
	if (has_metric)
		return usage_error(export_usage, "--metric chooses --speedscope's weights");
	ret = tg_dumpset_open_capture(argv[0], &cap, &d);
	if (ret < 0)
		return error("%s", d.msg);
	if (ret == 0) {
		struct stat st;
		if (stat(argv[0], &st) < 0)  /* as every other command says it */
			return error("unable to open '%s': %s", argv[0], strerror(errno));
		return error("'%s' is not a capture (a run directory holding %s, or that file)",
			     argv[0], TG_CAP_FILENAME);
	}
	tg_cli_capture_warnings(cap);
	if (!outdir) {
		const char *slash = strrchr(cap->path, '/');
		size_t n = slash ? (size_t)(slash - cap->path) : 0;
		if (!(dir = malloc(n + 2))) {
			ret = error("out of memory");
			goto out;
		}
		if (n)
			memcpy(dir, cap->path, n);
		else
			dir[n++] = '.';
		dir[n] = '\0';
		outdir = dir;
	}
	if (tg_export_run(cap, outdir, max_mib == ULONG_MAX ? tg_export_default_max(cap)
			  : (uint64_t)max_mib << 20, &st, &d) < 0) {
		ret = error("%s", d.msg);
		goto out;
	}
	{
		/* the run's phases and task links, and its collector's runs (gc.txt:
		 * report's marks), go with its dumps (docs/formats.md) */
		const char *slash = strrchr(cap->path, '/');
		char *capdir = slash ? strndup(cap->path, slash == cap->path ? 1 :
					       (size_t)(slash - cap->path)) : strdup(".");
		int rc = capdir ? tg_marks_copy(capdir, outdir, &d) : tg_error(&d, "out of memory");
		int gc = rc < 0 ? 0 : tg_run_file_copy(capdir, outdir, "gc.txt", &d);
		free(capdir);
		if (rc < 0 || gc < 0) {
			ret = error("%s", d.msg);
			goto out;
		}
		st.files += rc + gc;
	}
	if (st.runinfo_kept && cap->seg_first > 1 && !export_same_dir(cap->path, outdir))
		warning("'%s/%s' exists and was left as it is: a fold of these files cannot "
			"tell which returns close the calls open where the segments kept "
			"begin (fold the capture, or export into an empty directory)",
			outdir, TG_RUNINFO_NAME);
	if (st.dropped)
		warning("the recorder lost %llu record%s: the files lack them",
			(unsigned long long)st.dropped, st.dropped == 1 ? "" : "s");
	if (!quiet) {
		fprintf(stderr, "wrote %lu file%s (%llu lines) into ", st.files,
			st.files == 1 ? "" : "s", (unsigned long long)st.records);
		tg_cli_put(stderr, outdir);
		fputc('\n', stderr);
	}
	ret = TG_EXIT_OK;
out:
	free(dir);
	tg_dumpset_free_capture(cap);
	return ret;
}
