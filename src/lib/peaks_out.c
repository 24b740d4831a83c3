/*
 * peaks_out.c - print the peak list.
 */
#include <string.h>

#include "fmt.h"
#include "markup.h"
#include "marks.h"
#include "peaks_out.h"
#include "records.h"
#include "tg_format.h"

int tg_json_string(FILE *f, const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;

	putc('"', f);
	while (i < len) {
		size_t l;
		if (u[i] == '"' || u[i] == '\\') {
			putc('\\', f);
			putc(u[i], f);
			i++;
		} else if ((l = tg_unsafe_seq(u + i, len - i)) != 0) {
			/* C0 and C1 controls (U+009B is CSI) and the bidirectional
			 * controls: the code point escaped, as tg_fputs_json_safe */
			unsigned cp = l == 1 ? u[i] : l == 2 ?
				((u[i] & 0x1fu) << 6) | (u[i + 1] & 0x3fu) :
				((u[i] & 0x0fu) << 12) | ((u[i + 1] & 0x3fu) << 6) | (u[i + 2] & 0x3fu);
			fprintf(f, "\\u%04x", cp);
			i += l;
		} else if ((l = tg_utf8_len(u + i, len - i)) != 0) {
			fwrite(u + i, 1, l, f);
			i += l;
		} else {
			fputs("\\ufffd", f);
			i++;
		}
	}
	return putc('"', f) == EOF ? EOF : 0;
}

/* Splits a peak's rest text back into its fields. */
static void peaks_fields(const struct tg_peaks *p, const struct tg_peak *k,
			 struct tg_memrec *r)
{
	/* rest was parsed when the peak was collected, so this cannot fail */
	if (tg_memrec_parse(r, tg_peak_rest(p, k), k->rest_len, 0))
		memset(r, 0, sizeof(*r));
}

/*
 * What decorate-stack takes for a peak's file: the .mem path of a text dump; of a
 * binary capture, whose .mem files exist only after `threadgraph export`, the run
 * directory (decorate-stack RUN_DIR THREAD LINE).  Sets *len.
 */
static const char *peaks_mem_file(const struct tg_dumpfile *df, size_t *len)
{
	const char *slash = df->cap ? strrchr(df->path, '/') : NULL;

	if (!df->cap) {
		*len = strlen(df->path);
		return df->path;
	}
	if (!slash) {
		*len = 1;
		return ".";
	}
	*len = slash == df->path ? 1 : (size_t)(slash - df->path);
	return df->path;
}

int tg_peaks_write_text(FILE *f, const struct tg_peaks *p, const struct tg_dumpfile *files,
			int has_time)
{
	for (size_t i = 0; i < p->n; i++) {
		const struct tg_peak *k = &p->v[i];
		struct tg_memrec r;
		const char *mem;
		size_t len;

		peaks_fields(p, k, &r);
		fprintf(f, "%zu\t", k->id);
		if (has_time)
			fwrite(tg_peak_time(p, k), 1, k->time_len, f);
		else
			fprintf(f, "%.0f", k->x);
		putc('\t', f);
		tg_fputs_safe(f, files[k->thread].thread, strlen(files[k->thread].thread));
		fprintf(f, "\t%lld\t", k->delta);
		mem = peaks_mem_file(&files[k->thread], &len);
		tg_fputs_safe(f, mem, len);
		fprintf(f, "\t%lu\t", k->lineno);
		tg_fputs_safe(f, r.site.s, r.site.len);
		if (putc('\n', f) == EOF)
			return EOF;
	}
	return 0;
}

/*
 * Writes TIME text (digits, optionally '.' and digits: checked when parsed) as a
 * JSON number: redundant leading zeros dropped ("05" is not JSON) and "123."
 * completed to "123.0".
 */
static void peaks_json_time(FILE *f, const char *t, size_t n)
{
	while (n > 1 && t[0] == '0' && t[1] != '.') {
		t++;
		n--;
	}
	fwrite(t, 1, n, f);
	if (n && t[n - 1] == '.')
		putc('0', f);
}

int tg_peaks_write_json(FILE *f, const struct tg_peaks *p, const struct tg_dumpfile *files,
			int has_time)
{
	return tg_peaks_write_json_phases(f, p, files, has_time, NULL);
}

int tg_peaks_write_json_phases(FILE *f, const struct tg_peaks *p,
			       const struct tg_dumpfile *files, int has_time,
			       const struct tg_marks *m)
{
	putc('[', f);
	for (size_t i = 0; i < p->n; i++) {
		const struct tg_peak *k = &p->v[i];
		const struct tg_dumpfile *df = &files[k->thread];
		struct tg_memrec r;
		const char *mem;
		size_t len;

		peaks_fields(p, k, &r);
		fprintf(f, "%s\n  {\"index\": %zu, \"time\": ", i ? "," : "", k->id);
		if (has_time) {
			peaks_json_time(f, tg_peak_time(p, k), k->time_len);
		} else {
			fputs("null", f);
		}
		/* the call's start: with the return's time, the span the call ran */
		if (has_time && k->call_start >= 0)
			fprintf(f, ", \"call_start\": %.6f", k->call_start);
		else
			fputs(", \"call_start\": null", f);
		fputs(", \"thread\": ", f);
		tg_json_string(f, df->thread, strlen(df->thread));
		fputs(", \"site\": ", f);
		tg_json_string(f, r.site.s, r.site.len);
		fputs(", \"file\": ", f);
		tg_json_string(f, r.file.s, r.file.len);
		fprintf(f, ", \"line\": %lu, \"function\": ", r.line);
		tg_json_string(f, r.func.s, r.func.len);
		fprintf(f, ", \"delta\": %lld, \"mem_file\": ", k->delta);
		mem = peaks_mem_file(df, &len);
		tg_json_string(f, mem, len);
		fprintf(f, ", \"mem_line\": %lu", k->lineno);
		if (m) {
			const struct tg_phase *ph = has_time ? tg_marks_phase_at(m, k->x) : NULL;
			fputs(", \"phase\": ", f);
			if (ph)
				tg_json_string(f, ph->name, strlen(ph->name));
			else
				fputs("null", f);
		}
		putc('}', f);
	}
	fputs(p->n ? "\n]\n" : "]\n", f);
	return ferror(f) ? EOF : 0;
}
