/*
 * parse_options.h - table-driven option parsing for the subcommands.
 *
 * Long options take their value as "--name=VALUE" or "--name VALUE"; options and
 * operands may be mixed (as argparse allows); "--" ends the options.  Errors are
 * printed git-style ("error: unknown option 'x'" and the usage) and give exit 2.
 */
#ifndef TG_PARSE_OPTIONS_H
#define TG_PARSE_OPTIONS_H

enum tg_opt_type {
	TG_OPT_END,
	TG_OPT_BOOL,    /* int *, set to 1 */
	TG_OPT_STRING,  /* const char **, the argument */
	TG_OPT_NUMBER,  /* double *, any decimal number */
	TG_OPT_COUNT,   /* unsigned long *, a non-negative integer */
	TG_OPT_SIZE,    /* int[2], "WxH" */
};

struct tg_option {
	const char *long_name;  /* without "--" */
	char short_name;        /* 0 for none */
	enum tg_opt_type type;
	void *value;
	int *seen;              /* set to 1 when given (may be NULL) */
	const char *argh;       /* argument name in the help ("N") */
	const char *help;       /* one line */
};

#define TG_OPT_END_ROW { NULL, 0, TG_OPT_END, NULL, NULL, NULL, NULL }

/*
 * Parses argv[1..argc) against opts (ended by TG_OPT_END_ROW); operands are
 * moved to the front of argv, their count stored in *nargs.  -h/--help prints
 * the help to stdout.  Returns 0 to go on, 1 after printing the help, 2 after a
 * usage error (printed on stderr).
 */
int tg_parse_options(int argc, char **argv, const struct tg_option *opts,
		     const char *usage, const char *summary, int *nargs);

/* Replaces each of the N operands that is the base directory of runs (BASE of
 * BASE/<pid>/, not a run itself) by its latest run, with a note on stderr when
 * there is more than one (rundirs.c).  The commands call it on their run
 * operands after tg_parse_options (not on decorate-stack's THREAD and EVENT). */
void tg_resolve_run_bases(char **operands, int n);

/* Prints the usage line and the option list to f. */
void tg_usage(FILE *f, const struct tg_option *opts, const char *usage, const char *summary);

#endif
