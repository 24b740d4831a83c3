/*
 * speedscope.c - writing speedscope's JSON file format (speedscope.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "peaks_out.h"  /* tg_json_string */
#include "speedscope.h"

/*
 * The samples' indices grouped by thread, in x->threads order (each thread's
 * samples in their order): a malloc'ed array of x->n_samples, *FIRST (malloc'ed,
 * n_threads + 1) where each thread's run starts.  0 or -1 (out of memory).
 */
static int ss_by_thread(const struct tg_xprof *x, size_t **order, size_t **first)
{
	size_t *pos = malloc((x->n_strs + 1) * sizeof(*pos)), *o = NULL, *f = NULL, i;

	if (!pos || !(o = malloc((x->n_samples + 1) * sizeof(*o))) ||
	    !(f = calloc(x->n_threads + 2, sizeof(*f)))) {
		free(pos);
		free(o);
		return -1;
	}
	for (i = 0; i < x->n_threads; i++)
		pos[x->threads[i]] = i;
	for (i = 0; i < x->n_samples; i++)  /* counting sort, stable */
		f[pos[x->samples[i].thread] + 2]++;
	for (i = 2; i < x->n_threads + 2; i++)
		f[i] += f[i - 1];
	for (i = 0; i < x->n_samples; i++)
		o[f[pos[x->samples[i].thread] + 1]++] = i;
	free(pos);
	*order = o;
	*first = f;
	return 0;
}

int tg_speedscope_write(FILE *out, const struct tg_xprof *x, enum tg_xval which,
			const char *name, struct tg_diag *d)
{
	size_t i, t, k, *order, *first;

	if (ss_by_thread(x, &order, &first) < 0)
		return tg_error(d, "out of memory");
	fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\n"
	      "\"exporter\":\"threadgraph\",\n\"name\":", out);
	tg_json_string(out, name, strlen(name));
	fputs(",\n\"activeProfileIndex\":0,\n\"shared\":{\"frames\":[", out);
	for (i = 0; i < x->n_frames; i++) {
		const struct tg_xfunc *fn = &x->funcs[x->frames[i].func];
		const char *file = tg_xprof_str(x, fn->file), *fname = tg_xprof_str(x, fn->name);

		fputs(i ? ",\n{\"name\":" : "\n{\"name\":", out);
		tg_json_string(out, fname, strlen(fname));
		if (*file) {
			fputs(",\"file\":", out);
			tg_json_string(out, file, strlen(file));
		}
		if (x->frames[i].line)
			fprintf(out, ",\"line\":%" PRId64, x->frames[i].line);
		putc('}', out);
	}
	fputs("]},\n\"profiles\":[", out);
	for (t = 0; t < x->n_threads; t++) {
		const char *tname = tg_xprof_str(x, x->threads[t]);
		int64_t end = 0;
		int first_sample = 1;

		for (i = first[t]; i < first[t + 1]; i++) {
			int64_t w = x->samples[order[i]].v[which];
			if (w > 0 && __builtin_add_overflow(end, w, &end))
				end = INT64_MAX;
		}
		fputs(t ? ",\n{\"type\":\"sampled\",\"name\":" : "\n{\"type\":\"sampled\",\"name\":",
		      out);
		tg_json_string(out, tname, strlen(tname));
		fprintf(out, ",\"unit\":\"bytes\",\"startValue\":0,\"endValue\":%" PRId64
			",\n\"samples\":[", end);
		for (i = first[t]; i < first[t + 1]; i++) {
			const struct tg_xsample *s = &x->samples[order[i]];
			if (s->v[which] <= 0)
				continue;
			fputs(first_sample ? "\n[" : ",\n[", out);
			first_sample = 0;
			for (k = s->depth; k-- > 0;)  /* outermost first */
				fprintf(out, k + 1 < s->depth ? ",%zu" : "%zu",
					x->stack_ids[s->stack + k]);
			putc(']', out);
		}
		fputs("],\n\"weights\":[", out);
		first_sample = 1;
		for (i = first[t]; i < first[t + 1]; i++) {
			const struct tg_xsample *s = &x->samples[order[i]];
			if (s->v[which] <= 0)
				continue;
			fprintf(out, first_sample ? "%" PRId64 : ",%" PRId64, s->v[which]);
			first_sample = 0;
		}
		fputs("]}", out);
	}
	fputs("]}\n", out);
	free(order);
	free(first);
	if (ferror(out))
		return tg_error(d, "unable to write the speedscope file: %s", strerror(errno));
	return 0;
}
