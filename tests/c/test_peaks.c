/* Unit tests of peak selection (peaks.c). */
#include "peaks.h"
#include "tg_test.h"

static void add(struct tg_peaks *p, double x, long long delta, unsigned thread,
		unsigned long line)
{
	struct tg_peak c = { .x = x, .delta = delta, .thread = thread, .lineno = line };
	char rest[64];
	int n = snprintf(rest, sizeof(rest), "f.py:%lu:g=>%lld", line, delta);
	struct tg_diag d = { 0 };

	CHECK_INT(tg_peaks_add(p, &c, "T", 1, rest, (size_t)n, &d), 0);
}

int main(void)
{
	struct tg_peak_opts o = { .peak_kb = 200, .delta_time = 60, .delta_value_kb = 500 };
	struct tg_peaks p;

	/* candidates: strictly more than peak KB, either sign */
	CHECK(!tg_peak_is_candidate(&o, 200 * 1024));
	CHECK(tg_peak_is_candidate(&o, 200 * 1024 + 1));
	CHECK(tg_peak_is_candidate(&o, -(200 * 1024 + 1)));
	CHECK(!tg_peak_is_candidate(&o, 0));

	/* added out of time order across threads; selection sorts by time */
	tg_peaks_init(&p);
	add(&p, 100.0, 300 * 1024, 1, 7);   /* kept: first */
	add(&p, 130.0, 310 * 1024, 0, 3);   /* 30 s and 10 KB from 100: dropped */
	add(&p, 161.0, 320 * 1024, 0, 9);   /* 61 s from 100: kept */
	add(&p, 170.0, -300 * 1024, 1, 8);  /* 9 s but 620 KB from 161: kept */
	add(&p, 171.0, 100 * 1024, 1, 10);  /* 1 s, 400 KB: dropped */
	add(&p, 50.0, 900 * 1024, 2, 1);    /* earliest: kept first */
	tg_peaks_select(&p, &o, 200);
	CHECK_INT(p.n, 4);
	CHECK(p.v[0].x == 50.0 && p.v[0].id == 0);
	/* 100 is 50 s after 50 but 600 KB away in value: kept */
	CHECK(p.v[1].x == 100.0 && p.v[1].id == 1);
	CHECK(p.v[2].x == 161.0 && p.v[2].thread == 0 && p.v[2].lineno == 9);
	CHECK(p.v[3].x == 170.0 && p.v[3].delta == -300 * 1024);
	CHECK(!memcmp(tg_peak_rest(&p, &p.v[3]), "f.py:8:g=>-307200", 17));

	/* --top keeps the largest |delta| and their legend numbers, in time order */
	tg_peaks_top(&p, 2);
	CHECK_INT(p.n, 2);
	CHECK(p.v[0].id == 0 && p.v[1].id == 2);
	tg_peaks_sort_size(&p);
	CHECK(p.v[0].delta == 900 * 1024);
	tg_peaks_release(&p);

	/* equal distance is not "more than": with zero thresholds, equal points drop */
	{
		struct tg_peak_opts z = { 0, 0, 0 };
		tg_peaks_init(&p);
		add(&p, 1.0, 4096, 0, 1);
		add(&p, 1.0, 4096, 0, 2);
		add(&p, 1.0, 8192, 0, 3);
		add(&p, 2.0, 8192, 0, 4);
		tg_peaks_select(&p, &z, 1);
		CHECK_INT(p.n, 3);
		CHECK_INT(p.v[1].lineno, 3);
		tg_peaks_release(&p);
	}
	/* scaled: a burst of 18 candidates within 12 ms of a 1 s graph keeps only
	 * those more than 1/40 of the graph (25 ms) apart, the largest first; the
	 * burst's own span (12 ms) kept all 18 */
	{
		struct tg_peak_opts sc = { .peak_kb = 200, .scaled = 1 };
		tg_peaks_init(&p);
		for (unsigned i = 0; i < 18; i++)
			add(&p, 1.0 + i * 0.0007, (300 + (i == 9) * 100) * 1024, i, 1);
		add(&p, 0.5, 250 * 1024, 0, 2);  /* alone: kept */
		tg_peaks_select(&p, &sc, 1.02);
		CHECK_INT(p.n, 2);
		CHECK(p.v[0].x == 0.5 && p.v[0].id == 0);
		CHECK(p.v[1].thread == 9 && p.v[1].id == 1);  /* the burst's largest */
		tg_peaks_release(&p);

		/* the candidates' span alone (the graph no wider): 1 of 40 apart */
		tg_peaks_init(&p);
		for (unsigned i = 0; i < 18; i++)
			add(&p, 1.0 + i * 0.0007, 300 * 1024, i, 1);
		tg_peaks_select(&p, &sc, 17 * 0.0007);
		CHECK_INT(p.n, 18);
		tg_peaks_release(&p);
	}
	TG_TEST_DONE();
}
