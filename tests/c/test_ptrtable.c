/*
 * Unit tests of the recorder's pointer -> size tables (src/recorder/ptrtable.c).
 *
 * The tables are pure C: pointers are only keys, never dereferenced, so any
 * address can be tried (unaligned, above 2^48, just below the compact limits).
 * Fixed cases first, then random operations checked against a reference model,
 * then growth to a few hundred thousand entries and the locked (raw) table from
 * several threads.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "ptrtable.h"
#include "ptrpage.h"
#include "tg_test.h"

/* Compact limits as the table documents them (ptrtable.h). */
#define COMPACT_SIZE_LIMIT (UINT64_C(1) << 20)
#define PAGE_WORD_LIMIT 0xFFFF          /* the GIL table's page map: words 1 to below */
#define COMPACT_PTR_LIMIT (UINT64_C(1) << 48)

static void *P(uint64_t v) { return (void *)(uintptr_t)v; }

/* Remove PTR from T: the size found, or -1 when unknown. */
static long long take(struct tg_ptrtable *t, uint64_t ptr)
{
	size_t size = 12345;
	if (!tg_ptrtable_remove(t, P(ptr), &size))
		return -1;
	return (long long)size;
}

static size_t entries(struct tg_ptrtable *t, size_t *compact, size_t *wide)
{
	struct tg_ptrtable_stats st;
	tg_ptrtable_stats(t, &st);
	if (compact)
		*compact = st.compact + st.paged;  /* one word per entry, either way */
	if (wide)
		*wide = st.wide;
	return st.compact + st.wide + st.paged;
}

static void test_basic(struct tg_ptrtable *t)
{
	size_t c, w;

	CHECK_INT(take(t, 0x7f0000001000), -1);          /* empty table: miss */
	tg_ptrtable_insert(t, P(0x7f0000001000), 48);
	CHECK_INT(entries(t, &c, &w), 1);
	CHECK_INT(c, 1);
	CHECK_INT(take(t, 0x7f0000001010), -1);          /* neighbour: miss */
	CHECK_INT(take(t, 0x7f0000001008), -1);          /* same granule, unaligned */
	CHECK_INT(take(t, 0x7f0000001000), 48);
	CHECK_INT(take(t, 0x7f0000001000), -1);          /* removed once only */
	CHECK_INT(tg_ptrtable_count(), 0);

	/* replace: the last allocation at an address wins */
	tg_ptrtable_insert(t, P(0x1000), 10);
	tg_ptrtable_insert(t, P(0x1000), 0);
	CHECK_INT(entries(t, NULL, NULL), 1);
	CHECK_INT(take(t, 0x1000), 0);                   /* size 0 is a real size */

	/* what goes wide */
	tg_ptrtable_insert(t, P(0x1008), 5);                       /* 8-aligned */
	tg_ptrtable_insert(t, P(0x1001), 6);                       /* odd */
	tg_ptrtable_insert(t, P(COMPACT_PTR_LIMIT), 7);            /* too high */
	tg_ptrtable_insert(t, P(UINT64_MAX & ~UINT64_C(15)), 8);   /* highest */
	tg_ptrtable_insert(t, P(0x2000), COMPACT_SIZE_LIMIT);      /* too big */
	tg_ptrtable_insert(t, P(0x3000), SIZE_MAX);                /* any word */
	tg_ptrtable_insert(t, P(0x4000), (size_t)5 << 44 | 100);   /* site id 5 */
	tg_ptrtable_insert(t, P(0x8), 9);                          /* below 16 */
	/* and what stays compact: the limits minus one */
	tg_ptrtable_insert(t, P(COMPACT_PTR_LIMIT - 16), COMPACT_SIZE_LIMIT - 1);
	tg_ptrtable_insert(t, P(0x10), 1);
	CHECK_INT(entries(t, &c, &w), 10);
	CHECK_INT(c, 2);
	CHECK_INT(w, 8);
	CHECK_INT(take(t, 0x1000), -1);
	CHECK_INT(take(t, 0x1008), 5);
	CHECK_INT(take(t, 0x1001), 6);
	CHECK_INT(take(t, COMPACT_PTR_LIMIT), 7);
	CHECK_INT(take(t, UINT64_MAX & ~UINT64_C(15)), 8);
	CHECK_INT(take(t, 0x2000), (long long)COMPACT_SIZE_LIMIT);
	{
		size_t size = 0;
		CHECK(tg_ptrtable_remove(t, P(0x3000), &size) && size == SIZE_MAX);
	}
	CHECK_INT(take(t, 0x4000), (long long)((size_t)5 << 44 | 100));
	CHECK_INT(take(t, 0x8), 9);
	CHECK_INT(take(t, COMPACT_PTR_LIMIT - 16), (long long)(COMPACT_SIZE_LIMIT - 1));
	CHECK_INT(take(t, 0x10), 1);
	CHECK_INT(tg_ptrtable_count(), 0);

	/* an address moving between the arrays keeps one entry, the last size */
	tg_ptrtable_insert(t, P(0x5000), COMPACT_SIZE_LIMIT * 3);  /* wide */
	tg_ptrtable_insert(t, P(0x5000), 64);                      /* compact */
	CHECK_INT(entries(t, &c, &w), 1);
	CHECK_INT(c, 1);
	CHECK_INT(take(t, 0x5000), 64);
	CHECK_INT(take(t, 0x5000), -1);
	tg_ptrtable_insert(t, P(0x6000), 64);                      /* compact */
	tg_ptrtable_insert(t, P(0x6000), (size_t)1 << 50);         /* wide */
	CHECK_INT(entries(t, &c, &w), 1);
	CHECK_INT(w, 1);
	CHECK_INT(take(t, 0x6000), (long long)((size_t)1 << 50));
	CHECK_INT(take(t, 0x6000), -1);

	/* insert_wide: wide even when the word fits a compact entry, and still one
	 * entry per address whichever way it was entered last */
	tg_ptrtable_insert_wide(t, P(0x8000), 5);
	CHECK_INT(entries(t, &c, &w), 1);
	CHECK_INT(w, 1);
	tg_ptrtable_insert(t, P(0x8000), 6);                       /* compact now */
	CHECK_INT(entries(t, &c, &w), 1);
	CHECK_INT(c, 1);
	tg_ptrtable_insert_wide(t, P(0x8000), 7);
	CHECK_INT(entries(t, &c, &w), 1);
	CHECK_INT(w, 1);
	CHECK_INT(take(t, 0x8000), 7);
	CHECK_INT(take(t, 0x8000), -1);

	/* clear drops everything, and the table works again afterwards */
	tg_ptrtable_insert(t, P(0x7000), 1);
	tg_ptrtable_insert(t, P(0x7001), 1);
	tg_ptrtable_clear();
	CHECK_INT(tg_ptrtable_count(), 0);
	CHECK_INT(take(t, 0x7000), -1);
	CHECK_INT(take(t, 0x7001), -1);
	tg_ptrtable_insert(t, P(0x7000), 3);
	CHECK_INT(take(t, 0x7000), 3);
}

/* Deterministic generator (xorshift64*), so a failure can be replayed. */
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 2685821657736338717ull;
}

#define POOL 6000
static uint64_t pool[POOL];       /* the addresses tried */
static size_t model[POOL];        /* their expected sizes when present */
static char present[POOL];        /* whether the table should know them */

/* Whether removing pool[K] from T agrees with the model (and update it). */
static int remove_agrees(struct tg_ptrtable *t, long k)
{
	size_t size = 12345;
	int found = tg_ptrtable_remove(t, P(pool[k]), &size);
	int ok = found == present[k] && (!found || size == model[k]);
	present[k] = 0;
	return ok;
}

/* Addresses of every kind: mostly heap-like 16-aligned ones packed close (long
 * probe runs, the same shard), some unaligned, some above 2^48. */
static uint64_t random_address(void)
{
	uint64_t r = rnd() % 100;
	if (r < 70)
		return 0x55550000000ull + (rnd() % 20000) * 16;
	if (r < 80)
		return 0x7fff00000000ull + (rnd() % 4000) * 8;           /* half unaligned */
	if (r < 88)
		return (rnd() | 1) & (COMPACT_PTR_LIMIT - 1);         /* odd */
	if (r < 94)
		return (COMPACT_PTR_LIMIT + (rnd() % 1000) * 16) | ((rnd() & 1) << 63);
	/* any 16-aligned address of a 4 GiB range (mapped for the page map's
	 * walk: FAKE_MAPS) */
	return 0x300000000000ull + ((rnd() & 0xFFFFFFFFu) & ~UINT64_C(15));
}

static size_t random_size(void)
{
	uint64_t r = rnd() % 100;
	if (r < 76)
		return rnd() % 2048;
	if (r < 80)
		return PAGE_WORD_LIMIT - 2 + rnd() % 4;             /* the page map's */
	if (r < 88)
		return COMPACT_SIZE_LIMIT - 2 + rnd() % 4;          /* around the limit */
	if (r < 94)
		return (size_t)rnd();                               /* any word */
	return (size_t)(rnd() % 4096) << 44 | (rnd() % 4096);   /* with a site id */
}

static void test_random(struct tg_ptrtable *t, long ops)
{
	long i, bad = 0;
	size_t live = 0;

	for (i = 0; i < POOL; i++) {
		long j;
		uint64_t a;
	again:
		a = random_address();
		for (j = 0; j < i; j++)
			if (pool[j] == a)
				goto again;
		pool[i] = a;
		present[i] = 0;
	}
	for (i = 0; i < ops; i++) {
		long k = (long)(rnd() % POOL);
		uint64_t op = rnd() % 10;
		if (op < 5) {                     /* allocate (or replace a stale entry) */
			size_t size = random_size();
			/* The GIL table replaces a stale entry only as it leaves the
			 * newest slot (ptrtable.h): its hooks see every free first. */
			if (t == &tg_ptrtable_gil && present[k]) {
				live--;
				if (!remove_agrees(t, k))
					bad++;
			}
			if (op == 0)              /* the accounting path */
				tg_ptrtable_insert_wide(t, P(pool[k]), size);
			else
				tg_ptrtable_insert(t, P(pool[k]), size);
			live += !present[k];
			present[k] = 1;
			model[k] = size;
		} else {                          /* free, known or not */
			live -= present[k];
			if (!remove_agrees(t, k))
				bad++;
		}
		if (i % 4096 == 0 && entries(t, NULL, NULL) != live)
			bad++;
	}
	CHECK_INT(bad, 0);
	CHECK_INT(entries(t, NULL, NULL), live);
	for (i = 0; i < POOL; i++)
		if (!remove_agrees(t, i))
			bad++;
	CHECK_INT(bad, 0);
	CHECK_INT(tg_ptrtable_count(), 0);
}

/* Many entries: the arrays grow several times and stay exact; the compact ones
 * cost well under the old 32 bytes an entry. */
static void test_growth(struct tg_ptrtable *t)
{
	const long n = 300000;
	struct tg_ptrtable_stats st;
	long i, bad = 0;

	tg_ptrtable_clear();  /* the bytes below: this test's alone */
	for (i = 0; i < n; i++)
		tg_ptrtable_insert(t, P(0x011200000000ull + (uint64_t)i * 32), (size_t)i % 1000 + 1);
	tg_ptrtable_stats(t, &st);
	CHECK_INT(st.compact + st.paged, n);
	CHECK_INT(st.paged, t == &tg_ptrtable_gil ? n : 0);
	CHECK_INT(st.wide, 0);
	CHECK(st.bytes <= (size_t)n * 8 * 8 / 3 + 16 * 1024 * 8);   /* load >= 3/8 */
	for (i = 0; i < n; i++)                  /* the odd granules were never entered */
		if (take(t, 0x011200000010ull + (uint64_t)i * 32) != -1)
			bad++;
	for (i = 0; i < n; i += 2)
		if (take(t, 0x011200000000ull + (uint64_t)i * 32) != i % 1000 + 1)
			bad++;
	CHECK_INT(tg_ptrtable_count(), n / 2);
	for (i = 1; i < n; i += 2)
		if (take(t, 0x011200000000ull + (uint64_t)i * 32) != i % 1000 + 1)
			bad++;
	CHECK_INT(bad, 0);
	CHECK_INT(tg_ptrtable_count(), 0);
	tg_ptrtable_clear();
}

/* The GIL table's newest slot (ptrtable_fast.h): a block freed before the next
 * insert never reaches the map; one inserted after it moves there; a block
 * of any kind (hash-bound, wide) passes through it; stats and clear see it. */
static void test_newest(void)
{
	struct tg_ptrtable *t = &tg_ptrtable_gil;
	struct tg_ptrtable_stats st;
	const uint64_t base = 0x013500000000ull;

	tg_ptrtable_clear();
	tg_ptrtable_insert(t, P(base), 48);           /* a frame object, freed at once */
	CHECK_INT(take(t, base), 48);
	CHECK_INT(take(t, base), -1);
	CHECK_INT(tg_ptrtable_count(), 0);
	tg_ptrtable_insert(t, P(base), 48);
	tg_ptrtable_insert(t, P(base + 64), 32);      /* base moves to the map */
	CHECK_INT(take(t, base), 48);
	CHECK_INT(take(t, base + 64), 32);
	tg_ptrtable_insert(t, P(base), 48);
	tg_ptrtable_insert(t, P(base), 80);           /* its free unseen: replaced */
	CHECK_INT(take(t, base), 80);
	CHECK_INT(take(t, base), -1);
	tg_ptrtable_insert(t, P(base + 8), 5);        /* unaligned: hash once moved */
	tg_ptrtable_insert(t, P(base + 128), PAGE_WORD_LIMIT);  /* hash once moved */
	tg_ptrtable_insert(t, P(base + 256), 7);
	tg_ptrtable_stats(t, &st);                    /* moves base + 256 to the map */
	CHECK_INT(st.paged, 1);
	CHECK_INT(st.compact + st.wide, 2);
	tg_ptrtable_insert(t, P(base + 512), 9);
	tg_ptrtable_insert_wide(t, P(base + 512), UINT64_C(3) << 44 | 9);  /* one entry */
	CHECK_INT(tg_ptrtable_count(), 4);
	CHECK_INT(take(t, base + 512), (long long)(UINT64_C(3) << 44 | 9));
	CHECK_INT(take(t, base + 512), -1);
	CHECK_INT(take(t, base + 8), 5);
	CHECK_INT(take(t, base + 128), PAGE_WORD_LIMIT);
	CHECK_INT(take(t, base + 256), 7);
	tg_ptrtable_insert(t, P(base), 48);
	tg_ptrtable_clear();                          /* empties the slot too */
	CHECK_INT(take(t, base), -1);
	CHECK_INT(tg_ptrtable_count(), 0);
}

/* The GIL table's page map (ptrpage.h): which blocks it takes, one entry per
 * address between it and the hash, its pages and nodes given back. */
static void test_pages(void)
{
	struct tg_ptrtable *t = &tg_ptrtable_gil;
	struct tg_ptrtable_stats st;
	const uint64_t base = 0x013400000000ull;
	size_t empty_bytes, sp;
	long i, bad = 0, resident = 0;
	int top_paged;
	unsigned char in_core;

	tg_ptrtable_clear();
	tg_ptrtable_insert(t, P(base), PAGE_WORD_LIMIT - 1);       /* the largest */
	/* The map covers all of user space, but where the address space to
	 * reserve is short (ThreadSanitizer: 2^42 of it; valgrind 2^37) */
	CHECK_INT(tg_ptrpage_reserve(&tg_ptrpage_gil), 0);
#ifndef __SANITIZE_THREAD__
	CHECK(tg_ptrpage_gil.glimit == UINT64_C(1) << 43);
#endif
	top_paged = tg_ptrpage_gil.glimit == UINT64_C(1) << 43;
	tg_ptrtable_insert(t, P(base + 16), PAGE_WORD_LIMIT);      /* hash */
	tg_ptrtable_insert(t, P((UINT64_C(1) << 47) - 16), 1);     /* top page */
	tg_ptrtable_insert(t, P(UINT64_C(1) << 47), 1);            /* above: hash */
	tg_ptrtable_stats(t, &st);
	CHECK_INT(st.paged, 1 + top_paged);
	CHECK_INT(st.compact, 3 - top_paged);
	CHECK_INT(take(t, base + 8), -1);          /* unaligned, same granule */
	CHECK_INT(take(t, base), PAGE_WORD_LIMIT - 1);
	CHECK_INT(take(t, base + 16), PAGE_WORD_LIMIT);
	CHECK_INT(take(t, (UINT64_C(1) << 47) - 16), 1);
	CHECK_INT(take(t, UINT64_C(1) << 47), 1);
	CHECK_INT(tg_ptrtable_count(), 0);

	/* an address moving between the page map and the hash keeps one entry */
	tg_ptrtable_insert(t, P(base), 100);
	tg_ptrtable_insert(t, P(base), 70000);                     /* hash now */
	tg_ptrtable_stats(t, &st);
	CHECK_INT(st.paged, 0);
	CHECK_INT(st.compact, 1);
	tg_ptrtable_insert(t, P(base), 200);                       /* page map again */
	tg_ptrtable_stats(t, &st);
	CHECK_INT(st.paged, 1);
	CHECK_INT(st.compact + st.wide, 0);
	tg_ptrtable_insert_wide(t, P(base), 300);                  /* accounting's */
	tg_ptrtable_stats(t, &st);
	CHECK_INT(st.paged + st.compact, 0);
	CHECK_INT(st.wide, 1);
	tg_ptrtable_insert(t, P(base), 400);
	CHECK_INT(tg_ptrtable_count(), 1);
	CHECK_INT(take(t, base), 400);

	/* a word 0 (a 0-byte block) has no page map entry (0 is "none"): the
	 * hash holds it, the map marks it, and it moves back to the map */
	tg_ptrtable_insert(t, P(base + 32), 5);
	tg_ptrtable_insert(t, P(base + 32), 0);
	tg_ptrtable_stats(t, &st);
	CHECK_INT(st.compact, 1);
	CHECK_INT(st.paged, 0);
	CHECK_INT(take(t, base + 32), 0);
	tg_ptrtable_insert(t, P(base + 32), 0);
	tg_ptrtable_insert(t, P(base + 48), 1);                    /* moves base + 32 */
	tg_ptrtable_insert(t, P(base + 32), 7);
	tg_ptrtable_insert(t, P(base + 64), 1);
	tg_ptrtable_stats(t, &st);
	CHECK_INT(st.compact + st.wide, 0);
	CHECK_INT(take(t, base + 32), 7);
	CHECK_INT(take(t, base + 48), 1);
	CHECK_INT(take(t, base + 64), 1);
	CHECK_INT(take(t, base), -1);

	/* a full page of entries, then a 32 MiB region: exact, the pages in
	 * memory counted, and the region's given back when its heap goes
	 * (tg_ptrpage_forget), none that also shadows a neighbour */
	tg_ptrtable_clear();
	CHECK_INT(tg_ptrpage_reserve(&tg_ptrpage_gil), 0);   /* its first page, and no entry */
	tg_ptrtable_stats(t, &st);
	empty_bytes = st.bytes;
	for (i = 0; i < 2048; i++)
		tg_ptrtable_insert(t, P(base + (uint64_t)i * 16), (size_t)i + 1);
	for (i = 0; i < 2 * 4096; i++)           /* a block per 4 KiB of heap */
		tg_ptrtable_insert(t, P(base + (UINT64_C(1) << 24) + (uint64_t)i * 4096 + 32), 7);
	tg_ptrtable_stats(t, &st);
	CHECK_INT(st.paged, 2048 + 2 * 4096);
	CHECK_INT(st.bytes, empty_bytes + (1 + 2 * 4096 / 8) * 4096);  /* 32 KiB of heap a page */
	for (i = 2047; i >= 0; i--)
		if (take(t, base + (uint64_t)i * 16) != i + 1)
			bad++;
	for (i = 0; i < 2 * 4096; i++)
		if (take(t, base + (UINT64_C(1) << 24) + (uint64_t)i * 4096 + 32) != 7)
			bad++;
	CHECK_INT(bad, 0);
	tg_ptrtable_stats(t, &st);
	CHECK_INT(st.paged, 0);
	CHECK_INT(st.bytes, empty_bytes + (1 + 2 * 4096 / 8) * 4096);  /* still there */
	/* a range that covers no page of the map wholly: nothing goes */
	tg_ptrpage_forget(&tg_ptrpage_gil, (uintptr_t)base + 4096, 16384);
	CHECK_INT(tg_ptrpage_gil.forgets, 0);
	tg_ptrpage_forget(&tg_ptrpage_gil, (uintptr_t)base + (UINT64_C(1) << 24), UINT64_C(1) << 25);
	CHECK_INT(tg_ptrpage_gil.forgets, 1);
	CHECK_INT(tg_ptrpage_gil.forgot, 2 * 4096 / 8 * 4096);
	tg_ptrtable_stats(t, &st);
	CHECK_INT(st.bytes, empty_bytes + 4096);   /* base's page alone */
	for (sp = 0; sp < 2 * 4096 / 8; sp++) {
		uint64_t g = (base + (UINT64_C(1) << 24)) / 16 + sp * 2048;
		if (mincore((char *)&tg_ptrpage_gil.word1[g], 4096, &in_core) == 0 && (in_core & 1))
			resident++;
	}
	CHECK_INT(resident, 0);
	/* the region's heap used again: entered as before */
	tg_ptrtable_insert(t, P(base + (UINT64_C(1) << 24) + 32), 5);
	tg_ptrtable_insert(t, P(base + (UINT64_C(1) << 24) + 64), 6);
	tg_ptrtable_stats(t, &st);
	CHECK_INT(st.paged, 2);
	CHECK_INT(take(t, base + (UINT64_C(1) << 24) + 32), 5);
	CHECK_INT(take(t, base + (UINT64_C(1) << 24) + 64), 6);
	/* the edges: the pages that shadow the range's first and last 32 KiB
	 * go only when the range covers them whole */
	tg_ptrtable_insert(t, P(base + (UINT64_C(3) << 24) - 16), 9);   /* just below */
	tg_ptrtable_insert(t, P(base + (UINT64_C(4) << 24)), 10);       /* just above */
	tg_ptrtable_insert(t, P(base + (UINT64_C(3) << 24) + 48), 11);
	tg_ptrtable_insert(t, P(base + (UINT64_C(5) << 24)), 12);       /* 11 to the map */
	tg_ptrpage_forget(&tg_ptrpage_gil, (uintptr_t)base + (UINT64_C(3) << 24), UINT64_C(1) << 24);
	CHECK_INT(take(t, base + (UINT64_C(3) << 24) - 16), 9);
	CHECK_INT(take(t, base + (UINT64_C(4) << 24)), 10);
	CHECK_INT(take(t, base + (UINT64_C(3) << 24) + 48), -1);          /* its heap went */
	CHECK_INT(take(t, base + (UINT64_C(5) << 24)), 12);
	tg_ptrtable_clear();
	CHECK_INT(tg_ptrpage_gil.forgets, 0);
	tg_ptrpage_forget(&tg_ptrpage_gil, (uintptr_t)base, UINT64_C(1) << 24);  /* no map: nothing */
	CHECK_INT(tg_ptrpage_gil.forgets, 0);
}

/* Write MAPS to a new file made from TEMPLATE (mkstemp's), for the page
 * map's walk (tg_ptrpage_maps_path). */
static void write_maps(char *template, const char *maps)
{
	int fd = mkstemp(template);
	ssize_t len = (ssize_t)strlen(maps);

	if (fd < 0 || write(fd, maps, (size_t)len) != len) {
		perror("fake maps");
		exit(2);
	}
	close(fd);
}

/* Granule 0's mark is no entry: left out of the walk's count where the map's
 * first page is walked (something mapped at 0), and nothing taken off where
 * it is not (a real process: nothing is mapped below mmap_min_addr). */
static void test_walk_first_page(void)
{
	static const char maps[] = "13400000000-13500000000 rw-p 00000000 00:00 0\n";
	static char path[] = "/tmp/tg_test_maps0_XXXXXX";
	const char *saved = tg_ptrpage_maps_path;
	struct tg_ptrtable *t = &tg_ptrtable_gil;
	struct tg_ptrtable_stats st;

	write_maps(path, maps);
	tg_ptrtable_clear();
	tg_ptrtable_insert(t, P(0x013400000000ull), 24);
	tg_ptrtable_stats(t, &st);                        /* FAKE_MAPS: page 0 walked */
	CHECK_INT(st.paged, 1);
	tg_ptrpage_maps_path = path;
	tg_ptrtable_stats(t, &st);                        /* page 0 not walked */
	CHECK_INT(st.paged, 1);
	tg_ptrpage_maps_path = saved;
	unlink(path);
	CHECK_INT(take(t, 0x013400000000ull), 24);
	tg_ptrtable_clear();
}

/* A page that one block keeps emptying and refilling: exact each time, and
 * nothing given back (only a heap that goes takes its shadow with it). */
static void test_parked(void)
{
	struct tg_ptrtable *t = &tg_ptrtable_gil;
	struct tg_ptrtable_stats st;
	const uint64_t base = 0x013600000000ull;
	long i, bad = 0;

	tg_ptrtable_clear();
	tg_ptrtable_insert(t, P(base), 1);
	tg_ptrtable_insert(t, P(base + 16), 2);       /* base goes to the map */
	for (i = 0; i < 1000; i++) {               /* base's page empties each time */
		if (take(t, base) != 1)
			bad++;
		tg_ptrtable_insert(t, P(base), 1);
		tg_ptrtable_insert(t, P(base + 32), 3);   /* moves base to the map */
		if (take(t, base + 32) != 3)
			bad++;
	}
	CHECK_INT(bad, 0);
	CHECK_INT(take(t, base), 1);
	CHECK_INT(take(t, base + 16), 2);
	tg_ptrtable_stats(t, &st);
	CHECK_INT(st.paged, 0);
	CHECK(st.bytes >= 4096);                      /* its page stays */
	CHECK_INT(tg_ptrpage_gil.forgets, 0);
	CHECK_INT(tg_ptrtable_count(), 0);
	tg_ptrtable_clear();
}

/* Where the page map's address space cannot be had (ulimit -v), every block
 * goes to the hash, exactly, and the mmap is not retried per block.  In a
 * child: the limit must not reach the other tests. */
static void test_pages_without_address_space(void)
{
	pid_t pid = fork();
	int status = 0;

	if (pid == 0) {
		struct tg_ptrtable_stats st;
		struct rlimit rl;
		long i, bad = 0;
		unsigned long vm_pages = 0;
		FILE *f = fopen("/proc/self/statm", "r");

		if (f == NULL || fscanf(f, "%lu", &vm_pages) != 1)
			_exit(2);
		fclose(f);
		tg_ptrtable_clear();
		/* Room for the hash, not for the smallest map's 8 GiB. */
		rl.rlim_cur = rl.rlim_max = vm_pages * 4096ul + 24ul * 1024 * 1024;
		if (setrlimit(RLIMIT_AS, &rl) != 0)
			_exit(3);
		for (i = 0; i < 20000; i++)
			tg_ptrtable_insert(&tg_ptrtable_gil, P(0x7f5600000000ull + (uint64_t)i * 48), 40);
		tg_ptrtable_stats(&tg_ptrtable_gil, &st);
		for (i = 0; i < 20000; i++)
			if (take(&tg_ptrtable_gil, 0x7f5600000000ull + (uint64_t)i * 48) != 40)
				bad++;
		_exit(st.paged == 0 && st.compact == 20000 && bad == 0
		      && tg_ptrtable_count() == 0 && tg_ptrpage_gil.unmapped ? 0 : 1);
	}
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status));
	CHECK_INT(WEXITSTATUS(status), 0);
}

/* The raw table from several threads at once, each on its own addresses. */
#define THREADS 4
static long thread_bad[THREADS];

static void *hammer(void *arg)
{
	long id = (long)(intptr_t)arg, i, r;
	uint64_t base = 0x600000000000ull + (uint64_t)id * 0x100000000ull;

	for (r = 0; r < 20; r++) {
		for (i = 0; i < 5000; i++)
			tg_ptrtable_insert(&tg_ptrtable_raw, P(base + (uint64_t)i * 16),
					   i % 3 ? (size_t)i : (size_t)i << 30);
		for (i = 0; i < 5000; i++)
			if (take(&tg_ptrtable_raw, base + (uint64_t)i * 16)
			    != (i % 3 ? i : (long long)((size_t)i << 30)))
				thread_bad[id]++;
	}
	return NULL;
}

static void test_threads(void)
{
	pthread_t th[THREADS];
	long i, bad = 0;

	for (i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, hammer, (void *)(intptr_t)i);
	for (i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		bad += thread_bad[i];
	}
	CHECK_INT(bad, 0);
	CHECK_INT(tg_ptrtable_count(), 0);
	/* what fork() does around the child */
	tg_ptrtable_lock_all();
	tg_ptrtable_unlock_all();
	tg_ptrtable_insert(&tg_ptrtable_raw, P(0x1230), 7);
	CHECK_INT(take(&tg_ptrtable_raw, 0x1230), 7);
}

/* The page map's walk (its statistics) reads the entries in the shadow of
 * mapped ranges only: the made-up addresses above are given as mapped. */
static const char FAKE_MAPS[] =
	"0-100000 rw-p 00000000 00:00 0\n"                     /* in address order */
	"11200000000-11300000000 rw-p 00000000 00:00 0\n"
	"13400000000-13700000000 rw-p 00000000 00:00 0\n"
	"55550000000-55560000000 rw-p 00000000 00:00 0\n"
	"300000000000-300100000000 rw-p 00000000 00:00 0\n"
	"7f0000000000-7f0001000000 rw-p 00000000 00:00 0 "
	/* a path longer than the walk's line buffer: its rest is no range */
	"/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	"/7fff00000000-7fff01000000\n"
	"7fff00000000-7fff01000000 rw-p 00000000 00:00 0\n"
	"7ffffff00000-800000001000 rw-p 00000000 00:00 0\n";

static void fake_maps(void)
{
	static char path[] = "/tmp/tg_test_maps_XXXXXX";

	write_maps(path, FAKE_MAPS);
	tg_ptrpage_maps_path = path;
}

int main(void)
{
	fake_maps();
	test_basic(&tg_ptrtable_gil);
	test_basic(&tg_ptrtable_raw);
	test_random(&tg_ptrtable_gil, 400000);
	test_random(&tg_ptrtable_raw, 200000);
	test_growth(&tg_ptrtable_gil);
	test_growth(&tg_ptrtable_raw);
	test_newest();
	test_pages();
	test_parked();
	test_walk_first_page();
	test_pages_without_address_space();
	test_threads();
	tg_ptrtable_clear();
	unlink(tg_ptrpage_maps_path);
	TG_TEST_DONE();
}
