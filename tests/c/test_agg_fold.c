/*
 * test_agg_fold.c - aggregate=True's ended threads (src/recorder/aggregate.c,
 * plain C): past TG_AGG_KEEP_ENDED the oldest ended thread is folded into its
 * name family's entry, counts, totals and times added per call path and
 * curves added up bucket by bucket at the wider width (an ended thread
 * counting at its last level after its end); past TG_AGG_FAMILIES
 * families, into the one "*"; the list stays bounded however many end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "tg_test.h"

static struct tg_agg a;

/* The listed entry named BASE, or NULL. */
static struct tg_agg_thread *entry(const char *base)
{
	struct tg_agg_thread *at;
	for (at = a.threads; at != NULL; at = at->next)
		if (strcmp(at->base, base) == 0)
			return at;
	return NULL;
}

static size_t listed(void)
{
	size_t n = 0;
	for (struct tg_agg_thread *at = a.threads; at != NULL; at = at->next)
		n++;
	return n;
}

/* A thread named BASE that calls f1 -> f2 once, DELTA bytes in f2, with
 * memory BYTES at time NOW_US; then it ends. */
static uint64_t tags;        /* the threads made so far: each one's tag */
static int folded_one;       /* what the last end folded, if it did */
static uint64_t folded_tag;
static char folded_into[TG_AGG_FAMILY_CAP];

static void one(const char *base, int64_t delta, int64_t now_us, int64_t bytes)
{
	struct tg_agg_thread *at = tg_agg_thread_new(&a, base, 7, ++tags);
	uint32_t n1, n2;

	CHECK(at != NULL);
	n1 = tg_agg_enter(at, 0, 1, 10);
	n2 = tg_agg_enter(at, n1, 2, 20);
	tg_agg_curve(at, now_us, bytes);
	tg_agg_leave(at, n2, delta, 5);
	tg_agg_leave(at, n1, delta + 1, 6);
	folded_one = tg_agg_thread_end(&a, at, &folded_tag, folded_into);
}

int main(void)
{
	struct tg_agg_thread *fam, *t;
	struct tg_agg_node *nd;
	char name[32];
	int i;

	pthread_mutex_init(&a.lock, NULL);
	tg_agg_open(&a, 1000000, "thread", 1000);
	CHECK_INT(tg_agg_func_add(&a, 0, "a.py", 4, "f1", 2), 1);
	CHECK_INT(tg_agg_func_add(&a, 0, "a.py", 4, "f2", 2), 2);

	/* 16 ended threads are kept whole; the 17th end folds the first */
	for (i = 1; i <= 16; i++) {
		snprintf(name, sizeof(name), "Thread-%d (h)", i);
		one(name, i, 1000000 + 500, 100);
	}
	CHECK_INT(listed(), 16);
	CHECK(entry("Thread-* (h)") == NULL);
	CHECK_INT(folded_one, 0);
	one("Thread-17 (h)", 17, 1000000 + 1700000, 50);
	/* the caller learns which thread went where (its thread log's entry) */
	CHECK_INT(folded_one, 1);
	CHECK_INT(folded_tag, 1);
	CHECK_STR(folded_into, "Thread-* (h)");
	CHECK_INT(listed(), 17);  /* 16 whole, one folded entry */
	CHECK(entry("Thread-1 (h)") == NULL);
	fam = entry("Thread-* (h)");
	CHECK(fam != NULL);
	CHECK_INT(fam->folded, 1);
	CHECK_INT(fam->native_id, 0);
	CHECK_INT(fam->ended, 0);
	CHECK_INT(atomic_load(&fam->n), 3);
	nd = tg_agg_node_at(fam, 2);
	CHECK_INT(nd->func, 2);
	CHECK_INT(atomic_load(&nd->count), 1);
	CHECK_INT(atomic_load(&nd->total), 1);
	/* the second fold: counts, totals and times added, the largest kept, the
	 * curve widened to the second thread's and its buckets added up */
	t = entry("Thread-2 (h)");
	CHECK(t != NULL);
	for (i = 0; i < 600; i++)  /* merges its curve: 1 ms -> 2 ms */
		tg_agg_curve(t, 1000000 + 1000 * i, 40);
	one("Thread-18 (h)", 18, 1000000 + 1800000, 60);
	CHECK_INT(folded_tag, 2);
	CHECK_INT(fam->folded, 2);
	CHECK(entry("Thread-2 (h)") == NULL);
	nd = tg_agg_node_at(fam, 2);
	CHECK_INT(atomic_load(&nd->count), 2);
	CHECK_INT(atomic_load(&nd->total), 1 + 2);
	CHECK_INT(atomic_load(&nd->max), 2);
	CHECK_INT(atomic_load(&nd->time_us), 10);
	CHECK_INT(atomic_load(&tg_agg_node_at(fam, 1)->total), 2 + 3);
	CHECK_INT(atomic_load(&fam->width_us), 2000);
	/* bucket 0: thread 1's 100 at 0.5 ms, and thread 2's 100 and 40 */
	CHECK_INT(atomic_load(&fam->bmin[0]), 100 + 40);
	CHECK_INT(atomic_load(&fam->bmax[0]), 100 + 100);
	/* thread 1 ended in bucket 0 still holding its 100: counted after it */
	CHECK_INT(atomic_load(&fam->bmin[299]), 40 + 100);
	CHECK_INT(atomic_load(&fam->bmax[299]), 40 + 100);
	CHECK_INT(fam->last, 40 + 100);
	CHECK_INT(atomic_load(&fam->nb), 300);
	/* the third fold: a thread with gaps in its curve, ending after the
	 * entry's; its gaps hold its level, the entry's threads count at their
	 * last level where the entry had no bucket, buckets where neither has a
	 * reading stay without one, and the entry's level is what they all hold
	 * at the end */
	t = entry("Thread-3 (h)");
	CHECK(t != NULL);
	tg_agg_curve(t, 1000000 + 700000, 500);   /* bucket 350 at 2 ms */
	tg_agg_curve(t, 1000000 + 705000, 300);   /* 352 */
	tg_agg_curve(t, 1000000 + 720000, 1000);  /* 360 */
	tg_agg_curve(t, 1000000 + 720500, 30);
	one("Thread-19 (h)", 19, 1000000 + 1900000, 70);
	CHECK_INT(folded_tag, 3);
	CHECK_INT(fam->folded, 3);
	CHECK_INT(atomic_load(&fam->bmin[0]), 140 + 100);
	CHECK_INT(atomic_load(&fam->bmax[0]), 200 + 100);
	CHECK_INT(atomic_load(&fam->bmax[100]), 140 + 100);  /* thread 3's gap */
	CHECK(atomic_load(&fam->bmin[320]) > atomic_load(&fam->bmax[320]));  /* none: */
	CHECK(atomic_load(&fam->bmin[351]) > atomic_load(&fam->bmax[351]));  /* held */
	CHECK_INT(atomic_load(&fam->bmin[350]), 140 + 500);  /* after the entry's */
	CHECK_INT(atomic_load(&fam->bmax[350]), 140 + 500);
	CHECK_INT(atomic_load(&fam->bmin[352]), 140 + 300);
	CHECK_INT(atomic_load(&fam->bmin[360]), 140 + 30);
	CHECK_INT(atomic_load(&fam->bmax[360]), 140 + 1000);
	CHECK_INT(fam->last, 140 + 30);
	CHECK_INT(atomic_load(&fam->nb), 361);

	/* other families: one entry each up to TG_AGG_FAMILIES, then "*" */
	for (i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "w%c", 'a' + i);  /* no digits: "wa~*", ... */
		one(name, 1, 1000000, 1);
	}
	CHECK(entry("wa~*") != NULL);
	CHECK(entry("*") != NULL);
	CHECK_STR(folded_into, "*");
	CHECK_INT(folded_tag, tags - TG_AGG_KEEP_ENDED);
	CHECK_INT(listed(), TG_AGG_KEEP_ENDED + TG_AGG_FAMILIES + 1);
	{
		uint64_t folded = 0;
		for (t = a.threads; t != NULL; t = t->next)
			folded += t->folded;
		CHECK_INT(folded, 19 + 40 - TG_AGG_KEEP_ENDED);
		CHECK_INT(atomic_load(&tg_agg_node_at(entry("*"), 2)->count), entry("*")->folded);
	}
	/* a thousand more: the list does not grow */
	for (i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "req-%d", i);
		one(name, 1, 1000000, 1);
	}
	CHECK_INT(listed(), TG_AGG_KEEP_ENDED + TG_AGG_FAMILIES + 1);
	tg_agg_close(&a);
	CHECK(a.threads == NULL);
	CHECK_INT(a.n_ended, 0);
	CHECK_INT(a.n_families, 0);
	TG_TEST_DONE();
}
