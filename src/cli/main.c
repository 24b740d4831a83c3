/*
 * main.c - threadgraph: the command table and the global options.
 *
 * threadgraph [--no_time] [--version] [--help] COMMAND [options] ARGS...
 * Each command returns its exit code; stdout is flushed and checked afterwards so
 * that a full disk is an error, not silent truncation.  A reader that went away
 * (`threadgraph hist DIR | head`) is not: SIGPIPE is ignored, so writes fail with
 * EPIPE instead of killing us, and the command ends quietly with status 0, as
 * git and coreutils do.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

struct tg_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

/* The Python package's commands (they need an interpreter): threadgraph/__main__.py
 * runs them; listed first by the help, refused here with how to call them. */
static const struct { const char *name, *summary; } tg_python_commands[] = {
	{ "run", "run a Python program under the profiler, unchanged (threadgraph run --help)" },
	{ "attach", "record a running Python program, then leave it as it was (docs/attach.md)" },
	{ "detach", "stop a threadgraph attach recording process PID" },
};

static const struct tg_cmd tg_commands[] = {
	{ "memg", cmd_memg, "memory graph per thread with numbered peaks (memg.svg, memg.txt)" },
	{ "peaks", cmd_peaks, "list the peaks memg would label, on stdout" },
	{ "memh", cmd_memh, "functions that allocate and free the most (memh.svg, memh.txt)" },
	{ "nesting", cmd_nesting, "stack depth of each call against time (nesting.png)" },
	{ "interleave", cmd_interleave,
	  "which thread ran when (interleave.png, interleave.txt)" },
	{ "decorate-stack", cmd_decorate_stack,
	  "one call's subtree from a .stack dump with time and memory" },
	{ "summary", cmd_summary, "allocation accounting figures of a run (process, threads, windows)" },
	{ "threads", cmd_threads,
	  "each thread's allocated, freed, peak and live bytes, and who freed whose memory" },
	{ "hist", cmd_hist, "power-of-two histograms of allocation sizes (hist.svg)" },
	{ "top", cmd_top, "biggest call sites of a heap snapshot (live or total bytes)" },
	{ "diff", cmd_diff, "per-site growth between two heap snapshots (--base A B)" },
	{ "folded", cmd_folded, "a run's calls as folded stacks (flamegraph.pl, inferno, speedscope)" },
	{ "flamegraph", cmd_flamegraph, "an interactive flame graph of a run (flame.svg)" },
	{ "report", cmd_report, "one self-contained HTML page of a run (report.html)" },
	{ "live", cmd_live, "a terminal view of a run's threads' memory, refreshed every second" },
	{ "export", cmd_export, "a binary capture back to its text dumps (.mem, .stack, process.mem)" },
};

/* Non-zero when stdout is a pipe or socket whose reader has gone. */
static int main_stdout_reader_gone(void)
{
	struct pollfd p = { .fd = 1, .events = POLLOUT };

	return errno == EPIPE || (poll(&p, 1, 0) == 1 && (p.revents & POLLERR));
}

/*
 * Flushes stdout after a command that returned ret: returns ret when all was
 * written or when the reader went away (what it did not read, it did not want),
 * else prints an error and returns TG_EXIT_ERROR.
 */
static int main_finish_stdout(int ret)
{
	errno = 0;
	if (!fflush(stdout) && !ferror(stdout))
		return ret;
	if (main_stdout_reader_gone())
		return ret;
	fprintf(stderr, "error: unable to write to standard output\n");
	return TG_EXIT_ERROR;
}

static void main_usage(FILE *f)
{
	fputs("usage: threadgraph [--no_time] [--version] [-h|--help] COMMAND [options] ARGS...\n"
	      "\ncommands:\n", f);
	for (size_t i = 0; i < sizeof(tg_python_commands) / sizeof(tg_python_commands[0]); i++)
		fprintf(f, "    %-16s %s\n", tg_python_commands[i].name, tg_python_commands[i].summary);
	for (size_t i = 0; i < sizeof(tg_commands) / sizeof(tg_commands[0]); i++)
		fprintf(f, "    %-16s %s\n", tg_commands[i].name, tg_commands[i].summary);
	fputs("\nglobal options:\n"
	      "    --no_time        the dumps have no timestamps\n"
	      "    --version        print the version and exit\n"
	      "    -h, --help       show this help and exit\n"
	      "\nRun 'threadgraph COMMAND --help' for a command's options.\n", f);
}

int main(int argc, char **argv)
{
	int i, ret;

	/* a closed pipe on stdout shows as EPIPE, handled by main_finish_stdout */
	signal(SIGPIPE, SIG_IGN);
	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--no_time")) {
			tg_global_no_time = 1;
		} else if (!strcmp(argv[i], "--version")) {
#ifdef TG_HAVE_ZSTD
			printf("threadgraph %s\n", TG_VERSION);
#else
			/* pip shows no build output: say it where one looks */
			printf("threadgraph %s (built without zstd: a capture with "
			       "zstd-compressed chunks cannot be read)\n", TG_VERSION);
#endif
			return main_finish_stdout(TG_EXIT_OK);
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			main_usage(stdout);
			return main_finish_stdout(TG_EXIT_OK);
		} else {
			fprintf(stderr, "error: unknown option '%s'\n", argv[i]);
			main_usage(stderr);
			return TG_EXIT_USAGE;
		}
	}
	if (i == argc) {
		main_usage(stderr);
		return TG_EXIT_USAGE;
	}
	for (size_t c = 0; c < sizeof(tg_commands) / sizeof(tg_commands[0]); c++) {
		if (strcmp(argv[i], tg_commands[c].name))
			continue;
		ret = tg_commands[c].fn(argc - i, argv + i);
		return main_finish_stdout(ret);
	}
	if (!strcmp(argv[i], "help")) {  /* as git: `threadgraph help` is --help */
		main_usage(stdout);
		return main_finish_stdout(TG_EXIT_OK);
	}
	for (size_t c = 0; c < sizeof(tg_python_commands) / sizeof(tg_python_commands[0]); c++) {
		if (strcmp(argv[i], tg_python_commands[c].name))
			continue;
		fprintf(stderr, "error: '%s' is the Python package's command, with no global "
			"option before it: 'threadgraph %s [options] ...' (the installed "
			"command) or 'python3 -m threadgraph %s ...'\n", argv[i], argv[i], argv[i]);
		return TG_EXIT_USAGE;
	}
	fprintf(stderr, "error: unknown command '%s'\n", argv[i]);
	main_usage(stderr);
	return TG_EXIT_USAGE;
}
