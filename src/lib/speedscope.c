/*
 * speedscope.c - writing speedscope's JSON file format (speedscope.h).
 */
#include <inttypes.h>
#include <string.h>

#include "peaks_out.h"  /* tg_json_string */
#include "speedscope.h"

int tg_speedscope_write(FILE *out, const struct tg_xprof *x, enum tg_xval which,
			const char *name)
{
	size_t i, t, k;

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
		int first = 1;

		for (i = 0; i < x->n_samples; i++)
			if (x->samples[i].thread == x->threads[t] && x->samples[i].v[which] > 0 &&
			    __builtin_add_overflow(end, x->samples[i].v[which], &end))
				end = INT64_MAX;
		fputs(t ? ",\n{\"type\":\"sampled\",\"name\":" : "\n{\"type\":\"sampled\",\"name\":",
		      out);
		tg_json_string(out, tname, strlen(tname));
		fprintf(out, ",\"unit\":\"bytes\",\"startValue\":0,\"endValue\":%" PRId64
			",\n\"samples\":[", end);
		for (i = 0; i < x->n_samples; i++) {
			const struct tg_xsample *s = &x->samples[i];
			if (s->thread != x->threads[t] || s->v[which] <= 0)
				continue;
			fputs(first ? "\n[" : ",\n[", out);
			first = 0;
			for (k = s->depth; k-- > 0;)  /* outermost first */
				fprintf(out, k + 1 < s->depth ? ",%zu" : "%zu",
					x->stack_ids[s->stack + k]);
			putc(']', out);
		}
		fputs("],\n\"weights\":[", out);
		first = 1;
		for (i = 0; i < x->n_samples; i++) {
			const struct tg_xsample *s = &x->samples[i];
			if (s->thread != x->threads[t] || s->v[which] <= 0)
				continue;
			fprintf(out, first ? "%" PRId64 : ",%" PRId64, s->v[which]);
			first = 0;
		}
		fputs("]}", out);
	}
	fputs("]}\n", out);
	return ferror(out) ? EOF : 0;
}
