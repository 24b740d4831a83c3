/* Unit tests of nesting's bounded point set (nesting_pts.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "nesting_pts.h"
#include "tg_test.h"

/* A million calls over 10 s, depths 0..6, one call of depth 40: the set stays
 * within its slices, every entry's calls in its slice, every depth kept. */
static void test_bounded(void)
{
	struct tg_npts p;
	struct tg_diag d = { 0 };
	int bad = 0, deep = 0, outside = 0, depths[7] = { 0 };
	const double t0 = 1700000000.0;

	tg_npts_init(&p, 1e-6, 2 * 1920, 1 << 18);
	for (long i = 0; i < 1000000; i++)
		bad += tg_npts_add(&p, t0 + (double)i * 1e-5, (unsigned)(i % 7), &d) != 0;
	bad += tg_npts_add(&p, t0 + 5.0, 40, &d) != 0;
	CHECK_INT(bad, 0);
	CHECK((uint64_t)p.hi - (uint64_t)p.lo + 1 <= 2 * 1920);
	CHECK(p.width <= 10.0 / 1920);  /* no wider than a column of the span */
	CHECK(p.n <= 7 * 2 * 1920 + 1);
	for (size_t i = 0; i < p.cap; i++) {
		const struct tg_npts_ent *e = &p.v[i];
		if (!e->used)
			continue;
		deep += e->depth == 40;
		if (e->depth < 7)
			depths[e->depth]++;
		/* both ends in the entry's slice (to a rounding) */
		outside += e->first > e->last ||
			floor(e->first / p.width) < (double)e->slice - 1 ||
			floor(e->last / p.width) > (double)e->slice + 1;
	}
	CHECK_INT(deep, 1);
	CHECK_INT(outside, 0);
	for (int k = 0; k < 7; k++)
		CHECK(depths[k] > 1000);
	tg_npts_release(&p);
}

/* Slices given by the caller: one per (slice, depth), its first and last x. */
static void test_slices_and_write(void)
{
	struct tg_npts p;
	struct tg_diag d = { 0 };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	tg_npts_init(&p, 1, 0, 0);
	CHECK_INT(tg_npts_add_slice(&p, 0, 2.5, 1, &d), 0);
	CHECK_INT(tg_npts_add_slice(&p, 0, 1.5, 1, &d), 0);
	CHECK_INT(tg_npts_add_slice(&p, 0, 2.0, 1, &d), 0);
	CHECK_INT(tg_npts_add_slice(&p, 1, 3.0, 1, &d), 0);
	CHECK_INT(tg_npts_add_slice(&p, 0, 1.75, 2, &d), 0);
	CHECK_INT(p.n, 3);
	CHECK_INT(tg_npts_write(&p, f, 2, 0, &d), 3);
	CHECK_INT(tg_npts_write(&p, f, 1, 1, &d), 4);
	fclose(f);
	CHECK_STR(buf, "1.50 1\n1.75 2\n3.00 1\n" "1.5 1\n1.8 2\n2.5 1\n3.0 1\n");
	free(buf);
	tg_npts_release(&p);
}

/* A hostile dump's times: huge, negative, not a number; bounded all the same. */
static void test_hostile_x(void)
{
	struct tg_npts p;
	struct tg_diag d = { 0 };
	int bad = 0;

	tg_npts_init(&p, 1e-6, 64, 1000);
	bad += tg_npts_add(&p, 1e300, 1, &d) != 0;
	bad += tg_npts_add(&p, -1e300, 1, &d) != 0;
	bad += tg_npts_add(&p, NAN, 2, &d) != 0;
	bad += tg_npts_add(&p, 0, 3, &d) != 0;
	for (unsigned k = 0; k < 5000; k++)  /* more depths than max_n in one slice */
		bad += tg_npts_add(&p, 1.0, k, &d) != 0;
	CHECK_INT(bad, 0);
	CHECK((uint64_t)p.hi - (uint64_t)p.lo + 1 <= 64);
	CHECK(p.n <= 5003);
	tg_npts_release(&p);
}

int main(void)
{
	test_bounded();
	test_slices_and_write();
	test_hostile_x();
	TG_TEST_DONE();
}
