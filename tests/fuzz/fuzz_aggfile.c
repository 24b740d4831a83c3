/*
 * fuzz_aggfile.c - an arbitrary aggregate.tga through its reader and what the
 * commands do with it: tg_aggfile_parse, tg_aggfile_summary, and the checks a
 * parsed file promises (every node's parent before it, every function named
 * defined, buckets in increasing time).  Properties: no sanitizer report; a
 * parsed file keeps those promises; the summary holds no control byte but
 * newline.
 */
#include "fuzz_util.h"  /* first: it defines _GNU_SOURCE */
#include "aggfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tg_aggfile a;
	struct tg_diag d = { .strict = 0 };
	char *out = NULL;
	size_t outlen = 0;
	FILE *o;

	if (tg_aggfile_parse(&a, "fuzz/aggregate.tga", (const char *)data, size, &d) == 0) {
		for (size_t i = 0; i < a.nt; i++) {
			const struct tg_agg_rthread *t = &a.t[i];
			FZ_ASSERT(t->n_nodes >= 1);
			for (size_t j = 1; j < t->n_nodes; j++) {
				FZ_ASSERT(t->nodes[j].parent < j);
				FZ_ASSERT(t->nodes[j].func >= 1 && t->nodes[j].func <= a.nf);
			}
			for (size_t j = 1; j < t->nb; j++)
				FZ_ASSERT(t->b[j].t_us > t->b[j - 1].t_us);
		}
		o = open_memstream(&out, &outlen);
		if (!o)
			abort();
		tg_aggfile_summary(o, &a, 5);
		fclose(o);
		for (size_t i = 0; i < outlen; i++)
			FZ_ASSERT((unsigned char)out[i] >= 0x20 || out[i] == '\n');
		free(out);
	}
	tg_aggfile_release(&a);
	return 0;
}
