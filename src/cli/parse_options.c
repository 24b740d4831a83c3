/*
 * parse_options.c - the option parser shared by all subcommands.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse_options.h"

void tg_usage(FILE *f, const struct tg_option *opts, const char *usage, const char *summary)
{
	fprintf(f, "usage: %s\n", usage);
	if (summary)
		fprintf(f, "\n%s\n", summary);
	fputs("\noptions:\n", f);
	fprintf(f, "    %-28s %s\n", "-h, --help", "show this help and exit");
	for (const struct tg_option *o = opts; o->type != TG_OPT_END; o++) {
		char left[64];
		int n = 0;
		if (o->short_name)
			n = snprintf(left, sizeof(left), "-%c, ", o->short_name);
		snprintf(left + n, sizeof(left) - (size_t)n, "--%s%s%s", o->long_name,
			 o->argh ? " " : "", o->argh ? o->argh : "");
		fprintf(f, "    %-28s %s\n", left, o->help);
	}
}

static int po_usage_error(const struct tg_option *opts, const char *usage)
{
	fprintf(stderr, "usage: %s\n(see --help for the options)\n", usage);
	(void)opts;
	return 2;
}

/* Stores arg into o's value; returns 0 or 2 after printing the error. */
static int po_set(const struct tg_option *o, const char *arg)
{
	char *end;

	switch (o->type) {
	case TG_OPT_STRING:
		/* an empty path names nothing: refuse it here rather than let it reach
		 * mkdir -p or a rename with a message about a temporary file */
		if (!*arg && o->argh && (!strcmp(o->argh, "DIR") || !strcmp(o->argh, "FILE"))) {
			fprintf(stderr, "error: option '--%s' expects a %s, got an empty string\n",
				o->long_name, o->argh);
			return 2;
		}
		*(const char **)o->value = arg;
		return 0;
	case TG_OPT_NUMBER: {
		double v;
		errno = 0;
		v = strtod(arg, &end);
		if (!*arg || *end || errno || !isfinite(v)) {
			fprintf(stderr, "error: option '--%s' expects a number, got '%s'\n",
				o->long_name, arg);
			return 2;
		}
		*(double *)o->value = v;
		return 0;
	}
	case TG_OPT_COUNT: {
		unsigned long v;
		errno = 0;
		v = strtoul(arg, &end, 10);
		if (!*arg || *end || errno || arg[0] == '-') {
			fprintf(stderr, "error: option '--%s' expects a non-negative integer, "
				"got '%s'\n", o->long_name, arg);
			return 2;
		}
		*(unsigned long *)o->value = v;
		return 0;
	}
	case TG_OPT_SIZE: {
		long w, h;
		int *wh = o->value;
		const char *orig = arg;
		errno = 0;
		w = strtol(arg, &end, 10);
		if (end == arg || (*end != 'x' && *end != 'X'))
			goto bad_size;
		arg = end + 1;
		h = strtol(arg, &end, 10);
		if (end == arg || *end || errno || w < 16 || h < 16 || w > 20000 || h > 20000)
			goto bad_size;
		wh[0] = (int)w;
		wh[1] = (int)h;
		return 0;
bad_size:
		fprintf(stderr, "error: option '--%s' expects WIDTHxHEIGHT in pixels "
			"(16 to 20000), got '%s'\n", o->long_name, orig);
		return 2;
	}
	default:
		return 2;
	}
}

int tg_parse_options(int argc, char **argv, const struct tg_option *opts,
		     const char *usage, const char *summary, int *nargs)
{
	int i, n = 0, only_operands = 0;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *val = NULL;
		const struct tg_option *o = NULL;
		size_t nlen;

		if (only_operands || a[0] != '-' || !a[1]) {
			argv[n++] = argv[i];
			continue;
		}
		if (!strcmp(a, "--")) {
			only_operands = 1;
			continue;
		}
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			tg_usage(stdout, opts, usage, summary);
			return 1;
		}
		if (a[1] == '-') {
			const char *eq = strchr(a + 2, '=');
			nlen = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
			val = eq ? eq + 1 : NULL;
			for (const struct tg_option *p = opts; p->type != TG_OPT_END; p++)
				if (strlen(p->long_name) == nlen && !strncmp(p->long_name, a + 2, nlen))
					o = p;
		} else {
			for (const struct tg_option *p = opts; p->type != TG_OPT_END; p++)
				if (p->short_name && p->short_name == a[1])
					o = p;
			if (o && a[2])
				val = a + 2;
		}
		if (!o) {
			fprintf(stderr, "error: unknown option '%s'\n", a);
			return po_usage_error(opts, usage);
		}
		if (o->type == TG_OPT_BOOL) {
			if (val) {
				fprintf(stderr, "error: option '--%s' takes no value\n", o->long_name);
				return po_usage_error(opts, usage);
			}
			*(int *)o->value = 1;
		} else {
			if (!val) {
				if (i + 1 >= argc) {
					fprintf(stderr, "error: option '--%s' requires a value\n",
						o->long_name);
					return po_usage_error(opts, usage);
				}
				val = argv[++i];
			}
			if (po_set(o, val))
				return 2;
		}
		if (o->seen)
			*o->seen = 1;
	}
	*nargs = n;
	return 0;
}
