/*
 * test_acct_sites.c - accounting's site interning (src/recorder/acct_sites.c)
 * against a simple model: lists searched linearly.  Functions: equal texts get
 * equal ids whatever their addresses, new texts the next id, a reused address
 * with a new text does not hit the cache.  Nodes: (parent, call) gets one id,
 * parents come first, a child inherits its parent's thread, roots are distinct
 * per thread, every node has counters; a full table answers TG_SITE_FULL and
 * still finds what it holds.  Links acct_sites.c alone (pure C).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acct_sites.h"
#include "tg_test.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* --- the model ------------------------------------------------------------ */

struct mfunc {
	char file[32], func[32];
	long line;
	int esc;
};

struct mnode {
	uint32_t parent, fid, tix;
};

#define NTEXT 300
#define MAXN 20000

static struct mfunc mfuncs[NTEXT + 8];   /* [1, n_mfuncs) */
static size_t n_mfuncs = 1;
static struct mnode mnodes[MAXN];        /* [1, n_mnodes) */
static size_t n_mnodes = 1;

static uint32_t model_func(const struct mfunc *f)
{
	for (size_t i = 1; i < n_mfuncs; i++)
		if (!strcmp(mfuncs[i].file, f->file) && !strcmp(mfuncs[i].func, f->func)
		    && mfuncs[i].line == f->line && mfuncs[i].esc == f->esc)
			return (uint32_t)i;
	mfuncs[n_mfuncs] = *f;
	return (uint32_t)n_mfuncs++;
}

static uint32_t model_node(uint32_t parent, uint32_t fid, uint32_t tix, int root)
{
	if (!root)
		for (size_t i = 1; i < n_mnodes; i++)
			if (mnodes[i].parent == parent && mnodes[i].fid == fid)
				return (uint32_t)i;
	mnodes[n_mnodes].parent = parent;
	mnodes[n_mnodes].fid = fid;
	mnodes[n_mnodes].tix = tix;
	return (uint32_t)n_mnodes++;
}

/* --- tests ------------------------------------------------------------------ */

/* Random texts, each interned through several copies at different addresses. */
static void test_against_model(struct tg_acct_sites *s)
{
	static struct mfunc texts[NTEXT];
	enum { COPIES = 3, THREADS = 4 };
	static char copies[NTEXT][COPIES][2][32];
	uint32_t roots[THREADS];
	int bad_func = 0, bad_node = 0, bad_ctr = 0;

	for (int i = 0; i < NTEXT; i++) {
		/* a few share file or function, so that only the whole key tells them apart */
		snprintf(texts[i].file, sizeof(texts[i].file), "f%d.py", i % 37);
		snprintf(texts[i].func, sizeof(texts[i].func), "fn%d", i % 53);
		texts[i].line = i % 11;
		texts[i].esc = i % 2;
		for (int c = 0; c < COPIES; c++) {
			strcpy(copies[i][c][0], texts[i].file);
			strcpy(copies[i][c][1], texts[i].func);
		}
	}
	for (uint32_t t = 0; t < THREADS; t++) {
		roots[t] = tg_sites_root_add(s, t);
		CHECK_INT(roots[t], model_node(0, 0, t, 1));
	}
	for (int step = 0; step < 60000; step++) {
		int i = (int)(next_rand() % NTEXT), c = (int)(next_rand() % COPIES);
		const struct mfunc *m = &texts[i];
		uint32_t fid = tg_sites_func_intern(s, copies[i][c][0], strlen(m->file), m->line,
						    copies[i][c][1], strlen(m->func), m->esc);
		uint32_t want = model_func(m);
		uint32_t parent, node, wnode;

		if (fid != want)
			bad_func++;
		if (n_mnodes >= MAXN - 1)
			continue;
		/* a parent: a root, or a node seen so far */
		if (next_rand() % 4 == 0)
			parent = roots[next_rand() % THREADS];
		else
			parent = (uint32_t)(1 + next_rand() % (n_mnodes - 1));
		node = tg_sites_node_intern(s, parent, fid);
		wnode = model_node(parent, want, mnodes[parent].tix, 0);
		if (node != wnode || s->nodes[node].parent != parent || s->nodes[node].fid != want
		    || s->nodes[node].tix != mnodes[parent].tix || !(parent < node))
			bad_node++;
		if (tg_sites_ctr(s, node) == NULL)
			bad_ctr++;
	}
	CHECK_INT(bad_func, 0);
	CHECK_INT(bad_node, 0);
	CHECK_INT(bad_ctr, 0);
	CHECK_INT(s->nfuncs, n_mfuncs);
	CHECK_INT(s->nnodes, n_mnodes);
	/* what the table holds is what was passed */
	for (size_t i = 1; i < n_mfuncs; i++) {
		const struct tg_acct_func *f = &s->funcs[i];
		CHECK(f->file_len == strlen(mfuncs[i].file) && !strcmp(f->file, mfuncs[i].file)
		      && f->func_len == strlen(mfuncs[i].func) && !strcmp(f->func, mfuncs[i].func)
		      && f->line == mfuncs[i].line && f->esc == mfuncs[i].esc);
	}
	/* counters are distinct per node and start at zero */
	CHECK(tg_sites_ctr(s, 1) != tg_sites_ctr(s, 2));
	CHECK_INT(tg_sites_ctr(s, (uint32_t)(n_mnodes - 1))->alloc_bytes, 0);
}

/* A freed string's address reused for another text: the cache must not answer
 * with the old id. */
static void test_address_reuse(struct tg_acct_sites *s)
{
	char file[16] = "reuse_a.py", func[16] = "g";
	uint32_t a, b, a2;

	a = tg_sites_func_intern(s, file, strlen(file), 7, func, 1, 0);
	CHECK(a != 0);
	CHECK_INT(tg_sites_func_intern(s, file, strlen(file), 7, func, 1, 0), a);
	memcpy(file, "reuse_b.py", 10);
	b = tg_sites_func_intern(s, file, strlen(file), 7, func, 1, 0);
	CHECK(b != 0 && b != a);
	CHECK_STR(s->funcs[b].file, "reuse_b.py");
	memcpy(file, "reuse_a.py", 10);
	a2 = tg_sites_func_intern(s, file, strlen(file), 7, func, 1, 0);
	CHECK_INT(a2, a);
	/* the same text with another escaping flag is another function */
	CHECK(tg_sites_func_intern(s, file, strlen(file), 7, func, 1, 1) != a);
	/* embedded NUL bytes count: lengths are part of the key */
	CHECK(tg_sites_func_intern(s, "x\0y", 3, 1, "f", 1, 0)
	      != tg_sites_func_intern(s, "x\0z", 3, 1, "f", 1, 0));
}

/* Filling the node table: past TG_SITE_NOTHREAD ids, new nodes are
 * TG_SITE_FULL, the ones held are still found. */
static void test_full(void)
{
	struct tg_acct_sites *s = calloc(1, sizeof(*s));
	uint32_t root, fid, last = 0, n, first;
	int bad = 0;

	if (s == NULL) {
		CHECK(s != NULL);
		return;
	}
	root = tg_sites_root_add(s, 0);
	fid = tg_sites_func_intern(s, "a.py", 4, 1, "f", 1, 0);
	first = tg_sites_node_intern(s, root, fid);
	/* a chain: each node the child of the previous one */
	for (n = first; n != TG_SITE_FULL; n = tg_sites_node_intern(s, n, fid)) {
		if (last && n != last + 1)
			bad++;
		last = n;
	}
	CHECK_INT(bad, 0);
	CHECK_INT(last, TG_SITE_NOTHREAD - 1);
	CHECK_INT(s->nnodes, TG_SITE_NOTHREAD);
	CHECK_INT(tg_sites_root_add(s, 1), TG_SITE_FULL);
	CHECK_INT(tg_sites_node_intern(s, root, fid), first);
	CHECK_INT(tg_sites_node_intern(s, last - 1, fid), last);
	CHECK(tg_sites_ctr(s, last) != NULL);
	tg_sites_reset(s);
	free(s);
}

/* Reset empties the tables; they work again afterwards. */
static void test_reset(struct tg_acct_sites *s)
{
	uint32_t r, f;

	tg_sites_reset(s);
	CHECK_INT(s->nfuncs, 0);
	CHECK_INT(s->nnodes, 0);
	CHECK(tg_sites_ctr(s, 1) == NULL);
	r = tg_sites_root_add(s, 5);
	f = tg_sites_func_intern(s, "b.py", 4, 2, "h", 1, 0);
	CHECK_INT(r, 1);
	CHECK_INT(f, 1);
	CHECK_INT(tg_sites_node_intern(s, r, f), 2);
	CHECK_INT(s->nodes[2].tix, 5);
	tg_sites_reset(s);
}

/* Recycled node ids (tg_sites_node_free): thread trees made and freed again
 * and again, leaves first, as acct_recycle.c does.  Every node still in use is
 * found again under its key with its id (the hash's backward-shift deletion
 * keeps every probe chain whole), a freed key is not found (interning it
 * again gives a fresh or recycled id), freed ids are reused before new ones,
 * so the table's size stays that of the trees alive at once. */
#define RT_THREADS 8
#define RT_NODES 64
static void test_recycle(void)
{
	struct tg_acct_sites *s = calloc(1, sizeof(*s));
	uint32_t ids[RT_THREADS][RT_NODES], par[RT_THREADS][RT_NODES], fid[RT_THREADS][RT_NODES];
	uint32_t tix[RT_THREADS], funcs[16], round, k, i, j, high = 0, next_tix = 0;
	char name[8];

	if (s == NULL)
		abort();
	for (i = 0; i < 16; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		funcs[i] = tg_sites_func_intern(s, "r.py", 4, (long)i, name, strlen(name), 0);
	}
	for (round = 0; round < 200; round++) {
		for (k = 0; k < RT_THREADS; k++) {
			if (round > 0 && (next_rand() & 1) == 0)
				continue;
			if (round > 0) {  /* free thread k's tree, leaves (higher index) first */
				CHECK_INT(tg_sites_free_reserve(s, RT_NODES), 0);
				for (j = RT_NODES; j-- > 0;) {
					struct tg_acct_site_ctr *c = tg_sites_ctr(s, ids[k][j]);
					c->tix1 = 0;
					tg_sites_node_free(s, ids[k][j]);
					CHECK_INT(s->nodes[ids[k][j]].tix, TG_NODE_FREE);
				}
			}
			tix[k] = next_tix++;
			ids[k][0] = tg_sites_root_add(s, tix[k]);
			par[k][0] = 0;
			fid[k][0] = 0;
			for (j = 1; j < RT_NODES; j++) {
				par[k][j] = (uint32_t)(next_rand() % j);
				fid[k][j] = funcs[next_rand() % 16];
				/* a key already made in this tree keeps its id */
				ids[k][j] = tg_sites_node_intern(s, ids[k][par[k][j]], fid[k][j]);
				CHECK(ids[k][j] != TG_SITE_FULL);
				CHECK_INT(s->nodes[ids[k][j]].tix, tix[k]);
				CHECK_INT(tg_sites_ctr(s, ids[k][j])->tix1, tix[k] + 1);
			}
		}
		/* every node alive is found with its id; nothing new is made */
		high = (uint32_t)s->nnodes;
		for (k = 0; k < RT_THREADS; k++)
			for (j = 1; j < RT_NODES; j++)
				CHECK_INT(tg_sites_node_intern(s, ids[k][par[k][j]], fid[k][j]), ids[k][j]);
		CHECK_INT(s->nnodes, high);
	}
	CHECK(s->recycled);
	/* 8 trees of 64 nodes at most alive at once: ids stay below 2 x 8 x 64 */
	CHECK(s->nnodes <= 1 + 2 * RT_THREADS * RT_NODES);
	tg_sites_reset(s);
	CHECK_INT(s->nfree, 0);
	CHECK(!s->recycled);
	free(s);
}

int main(void)
{
	static struct tg_acct_sites s;  /* all zero: empty */

	test_against_model(&s);
	test_address_reuse(&s);
	test_reset(&s);
	test_full();
	test_recycle();
	TG_TEST_DONE();
}
