/*
 * dumpfile.c - classify dump files by name (docs/formats.md, "File names").
 */
#include <stdlib.h>
#include <string.h>

#include "dumpfile.h"
#include "tg_format.h"

int tg_dumpfile_init(struct tg_dumpfile *df, const char *path)
{
	const char *base = strrchr(path, '/');
	size_t len;
	const char *dot;

	base = base ? base + 1 : path;
	len = strlen(base);
	if (len > 3 && !strcmp(base + len - 3, ".gz"))
		len -= 3;
	df->path = path;
	df->kind = TG_DUMP_MEM;
	df->cap = NULL;
	df->cap_thread = NULL;
	df->agg = NULL;
	df->agg_thread = NULL;
	df->run_dropped = 0;
	dot = NULL;
	for (size_t i = 0; i < len; i++)
		if (base[i] == '.')
			dot = base + i;
	if (dot && (size_t)(base + len - dot) == strlen(TG_STACK_SUFFIX) &&
	    !strncmp(dot, TG_STACK_SUFFIX, strlen(TG_STACK_SUFFIX)))
		df->kind = TG_DUMP_STACK;
	if (dot)
		len = (size_t)(dot - base);
	df->thread = malloc(len + 1);
	if (!df->thread)
		return -1;
	memcpy(df->thread, base, len);
	df->thread[len] = '\0';
	if (df->kind == TG_DUMP_MEM && !strcmp(df->thread, TG_PROCESS_BASENAME))
		df->kind = TG_DUMP_PROCESS;
	return 0;
}

void tg_dumpfile_release(struct tg_dumpfile *df)
{
	free(df->thread);
	df->thread = NULL;
}
