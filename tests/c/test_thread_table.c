/*
 * Unit tests of the recorder's thread state and thread table
 * (src/recorder/thread.c), linked with writer.c and names.c only: no Python.
 *
 * States are created, named in the run's log (unique base names), given real
 * files, listed, closed (stopped streams reported), unlisted or retired with
 * their counts settled, reaped in a real forked child, and freed; the table is
 * walked by a flusher thread while states come and go.  Under ASan
 * (make check-asan) the run also proves that no state, writer or log entry
 * leaks, in the parent and in the forked child.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "thread.h"
#include "tg_test.h"

static char tmpdir[] = "/tmp/tg_test_thread_table.XXXXXX";

static int kicks;
static void count_kick(void *ctx) { (void)ctx; kicks++; }

/* Length of a list linked by next. */
static int list_len(const struct tg_thread *t)
{
	int n = 0;
	for (; t != NULL; t = t->next)
		n++;
	return n;
}

static int listed(const struct tg_thread_table *tt, const struct tg_thread *t)
{
	const struct tg_thread *p;
	for (p = tt->live; p != NULL; p = p->next)
		if (p == t)
			return 1;
	return 0;
}

/* A new state named NAME, logged, its .mem file opened under its base name in
 * the test directory; the log index in *IDX. */
static struct tg_thread *make_state(struct tg_thread_table *tt, const char *name,
				    unsigned long ident, long *idx)
{
	struct tg_thread *t = tg_thread_new(tt, 1, ident, ident + 1000);
	char *owned = strdup(name);
	char path[512];

	CHECK(t != NULL && owned != NULL);
	*idx = tg_thread_table_log_add(tt, owned, strlen(name), ident, ident + 1000, 1, 0, 0);
	CHECK(*idx >= 0);
	CHECK(tt->log[*idx].attaching);  /* until its streams are open */
	tg_thread_table_log_joined(tt, (size_t)*idx);
	CHECK(!tt->log[*idx].attaching);
	snprintf(path, sizeof(path), "%s/%s.mem", tmpdir, tt->log[*idx].base);
	CHECK_INT(tg_writer_open_path(&t->mem, path), 0);
	return t;
}

static void put(struct tg_writer *w, const char *line)
{
	size_t n = strlen(line);
	char *p = tg_writer_reserve(w, n);
	CHECK(p != NULL);
	if (p != NULL) {
		memcpy(p, line, n);
		tg_writer_commit(w, n);
	}
}

static char *slurp(const char *base)
{
	char path[512];
	static char buf[4096];
	FILE *f;
	size_t n;
	snprintf(path, sizeof(path), "%s/%s.mem", tmpdir, base);
	f = fopen(path, "r");
	if (f == NULL)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* tg_thread_close_writers's NOTE: records which writers stopped, and that their
 * error and path are still there to report. */
static int notes;
static char noted_path[512];
static int noted_err;
static void note(void *ctx, struct tg_writer *w)
{
	CHECK(ctx == &notes);
	notes++;
	noted_err = atomic_load(&w->err);
	snprintf(noted_path, sizeof(noted_path), "%s", w->path ? w->path : "(null)");
}

/* --- create, log, list, close, unlist, retire, free ----------------------------- */

static void test_life(void)
{
	struct tg_thread_table tt;
	struct tg_thread *a, *b, *c, *list, *next;
	long ia, ib, ic;
	uint64_t rec, srec, drop;
	size_t threads;

	tg_thread_table_init(&tt, count_kick, &kicks);
	a = make_state(&tt, "worker", 11, &ia);
	b = make_state(&tt, "worker", 12, &ib);     /* same name: distinct base */
	c = make_state(&tt, "a/b\nc", 13, &ic);     /* unsafe characters escaped */
	CHECK_STR(tt.log[ia].base, "worker");
	CHECK_STR(tt.log[ib].base, "worker~2");
	CHECK_STR(tt.log[ic].base, "a%2Fb%0Ac");
	CHECK_STR(tt.log[ic].name, "a/b\nc");        /* the name itself is kept */
	CHECK(a->mem.kick == count_kick && a->capw.kick_ctx == &kicks);  /* the table's kick */
	CHECK(a->gen == 1 && a->ident == 11 && a->native_id == 1011);
	CHECK(tt.live == NULL);                      /* not listed before add */
	tg_thread_table_add(&tt, a);
	tg_thread_table_add(&tt, b);
	tg_thread_table_add(&tt, c);
	CHECK_INT(list_len(tt.live), 3);
	CHECK(listed(&tt, a) && listed(&tt, b) && listed(&tt, c));

	/* Records and counts. */
	put(&a->mem, "a1\n");
	put(&b->mem, "b1\n");
	put(&c->mem, "c1\n");
	atomic_store(&a->n_records, 5);
	atomic_store(&b->n_records, 7);
	atomic_store(&b->n_stack_records, 2);
	atomic_store(&c->dropped, 3);
	tg_thread_table_totals(&tt, &rec, &srec, &drop, &threads);
	CHECK_INT(rec, 12);
	CHECK_INT(srec, 2);
	CHECK_INT(drop, 3);
	CHECK_INT(threads, 3);

	/* b's thread ends: unlist, close, settle, free. */
	CHECK_INT(tg_thread_table_remove(&tt, b), 1);
	CHECK_INT(tg_thread_table_remove(&tt, b), 0);  /* unlisting twice is harmless */
	CHECK(!listed(&tt, b) && listed(&tt, a) && listed(&tt, c));
	notes = 0;
	tg_thread_close_writers(b, note, &notes);
	CHECK_INT(notes, 0);
	CHECK(b->mem.buf == NULL && b->mem.fd < 0);   /* released */
	tg_thread_table_settle(&tt, b);
	tg_thread_free(b);
	CHECK_STR(slurp("worker~2"), "b1\n");
	tg_thread_table_totals(&tt, &rec, &srec, &drop, &threads);
	CHECK_INT(rec, 12);  /* b's counts moved to the done counts */
	CHECK_INT(srec, 2);
	CHECK_INT(threads, 3);  /* the log keeps every thread of the run */

	/* c's file was closed under us: closing it reports the stopped stream. */
	close(c->mem.fd);
	/* disable(): every live state closed and retired. */
	list = tg_thread_table_take_live(&tt);
	CHECK(tt.live == NULL);
	CHECK_INT(list_len(list), 2);
	notes = 0;
	for (; list != NULL; list = next) {
		next = list->next;
		tg_thread_close_writers(list, note, &notes);
		tg_thread_table_settle(&tt, list);
		tg_thread_table_retire(&tt, list);
	}
	CHECK_INT(notes, 1);
	CHECK_INT(noted_err, EBADF);
	CHECK(strstr(noted_path, "a%2Fb%0Ac.mem") != NULL);
	CHECK_STR(slurp("worker"), "a1\n");
	CHECK_INT(list_len(tt.retired), 2);
	tg_thread_table_totals(&tt, &rec, &srec, &drop, &threads);
	CHECK_INT(rec, 12);
	CHECK_INT(srec, 2);
	CHECK_INT(drop, 3);

	/* The log: the last entry of an ident; a new run forgets it. */
	CHECK(tg_thread_table_log_find(&tt, 12) == &tt.log[ib]);
	CHECK(tg_thread_table_log_find(&tt, 99) == NULL);
	/* The next run: retired states freed, log and counts cleared. */
	tg_thread_table_free_retired(&tt);
	CHECK(tt.retired == NULL);
	tg_thread_table_clear_log(&tt);
	tg_thread_table_totals(&tt, &rec, &srec, &drop, &threads);
	CHECK_INT(rec + srec + drop + threads, 0);
	/* Base names are unique per run: "worker" is free again. */
	{
		char *n = strdup("worker");
		long i = tg_thread_table_log_add(&tt, n, 6, 11, 1011, 1, 0, 0);
		CHECK_INT(i, 0);
		CHECK_STR(tt.log[0].base, "worker");
		/* still attaching (the run ended in its stream_factory call): not counted */
		tg_thread_table_totals(&tt, &rec, &srec, &drop, &threads);
		CHECK_INT(threads, 0);
		tg_thread_table_log_joined(&tt, (size_t)i);
		tg_thread_table_log_joined(&tt, 7);  /* out of range: nothing */
		tg_thread_table_totals(&tt, &rec, &srec, &drop, &threads);
		CHECK_INT(threads, 1);
	}
	/* Destroy frees what is left: a live state, a retired one, the log. */
	a = tg_thread_new(&tt, 2, 21, 21);
	b = tg_thread_new(&tt, 2, 22, 22);
	tg_thread_table_add(&tt, a);
	tg_thread_table_retire(&tt, b);
	tg_thread_table_destroy(&tt);
}

/* --- an aggregate run's folded threads leave the log ---------------------------- */

/* Log a joined thread NAME; its index. */
static long log_one(struct tg_thread_table *tt, const char *name, unsigned long ident)
{
	long i = tg_thread_table_log_add(tt, strdup(name), strlen(name), ident, ident + 1000,
					 0, 0, 0);
	CHECK(i >= 0);
	tg_thread_table_log_joined(tt, (size_t)i);
	return i;
}

static void test_log_fold(void)
{
	struct tg_thread_table tt;
	uint64_t rec, srec, drop;
	size_t threads, cap = 0;
	char name[32];
	long i;

	tg_thread_table_init(&tt, NULL, NULL);
	CHECK_INT(log_one(&tt, "MainThread", 1), 0);
	CHECK_INT(log_one(&tt, "h", 2), 1);
	CHECK_INT(log_one(&tt, "h", 3), 2);
	CHECK_STR(tt.log[2].base, "h~2");
	/* fold "h" (seq 1): its entry and its name go; seqs stay */
	CHECK_INT(tg_thread_table_log_fold(&tt, 1, "h~*", 0, NULL, NULL), 0);
	CHECK_INT(tt.n_log, 2);
	CHECK_INT(tt.log[1].seq, 2);
	CHECK_STR(tt.log[1].base, "h~2");
	CHECK_INT(tg_thread_table_log_fold(&tt, 1, "h~*", 0, NULL, NULL), -1);  /* gone already */
	/* the name is free again; the copies' count goes on where the base's was */
	i = log_one(&tt, "h", 4);
	CHECK_INT(tt.log[i].seq, 3);
	CHECK_STR(tt.log[i].base, "h");
	i = log_one(&tt, "h", 5);
	CHECK_STR(tt.log[i].base, "h~3");
	tg_thread_table_totals(&tt, &rec, &srec, &drop, &threads);
	CHECK_INT(threads, 5);  /* every thread seen, folded or not */
	/* a thread per request: the log holds the ones not folded, the families
	 * count the others, and a burst's room is given back */
	for (int k = 0; k < 5000; k++) {
		snprintf(name, sizeof(name), "req-%d", k);
		i = log_one(&tt, name, 100 + (unsigned long)k);
		if (tt.log_cap > cap)
			cap = tt.log_cap;
		if (k >= 16)
			CHECK_INT(tg_thread_table_log_fold(&tt, tt.log[i].seq - 16,
							   k % 2 ? "req-*" : "*", 0, NULL, NULL), 0);
	}
	CHECK_INT(tt.n_log, 4 + 16);
	CHECK(cap <= 64);  /* never more room than the entries listed need */
	CHECK(tt.log_cap <= 64);
	CHECK_INT(tt.n_families, 3);
	CHECK_STR(tt.families[1].base, "*");
	CHECK_INT(tt.families[1].threads + tt.families[2].threads, 5000 - 16);
	CHECK_INT(tt.log[tt.n_log - 1].seq, 5 + 5000 - 1);
	tg_thread_table_totals(&tt, &rec, &srec, &drop, &threads);
	CHECK_INT(threads, 5 + 5000);
	/* the set holds the names of the entries listed, and "process" */
	for (int k = 0; k < 5000 - 16; k++) {
		snprintf(name, sizeof(name), "req-%d", k);
		i = log_one(&tt, name, 9000 + (unsigned long)k);
		CHECK_STR(tt.log[i].base, name);
		CHECK_INT(tg_thread_table_log_fold(&tt, tt.log[i].seq, "req-*", 0, NULL, NULL), 0);
	}
	/* with the accounting on, a folded entry stays, name and all, unlisted */
	i = log_one(&tt, "acct", 2);
	CHECK_INT(tg_thread_table_log_fold(&tt, tt.log[i].seq, "acct~*", 1, NULL, NULL), 0);
	CHECK_INT(tt.log[i].folded, 1);
	CHECK_STR(tt.log[i].base, "acct~*");  /* the accounting's name for it */
	CHECK_INT(tg_thread_table_log_fold(&tt, tt.log[i].seq, "acct~*", 1, NULL, NULL), -1);
	CHECK_STR(tt.log[log_one(&tt, "acct", 3)].base, "acct~2");
	tg_thread_table_totals(&tt, &rec, &srec, &drop, &threads);
	CHECK_INT(threads, 5 + 5000 + 5000 - 16 + 2);  /* and "acct", folded or not */
	i = log_one(&tt, "req-4999", 1);
	CHECK_STR(tt.log[i].base, "req-4999~2");
	i = log_one(&tt, "process", 1);
	CHECK_STR(tt.log[i].base, "process~2");
	/* a new run forgets the families */
	tg_thread_table_clear_log(&tt);
	CHECK_INT(tt.n_families, 0);
	CHECK_INT(log_one(&tt, "x", 1), 0);
	CHECK_INT(tt.log[0].seq, 0);
	tg_thread_table_destroy(&tt);
}

/* The walk the accounting made per thread before the log map (thread.h):
 * the last entry of IDENT / NATIVE_ID not attaching. */
static const struct tg_thread_log *walk_find(const struct tg_thread_table *tt,
					     unsigned long ident, unsigned long native_id)
{
	for (size_t i = tt->n_log; i-- > 0;)
		if (tt->log[i].ident == ident && tt->log[i].native_id == native_id
		    && !tt->log[i].attaching)
			return &tt->log[i];
	return NULL;
}

/* Many threads, idents reused (as pthread ids are), some folded and kept (the
 * accounting's case), some folded away, one still attaching: the map finds for
 * every thread the entry the walk finds, by seq a binary search finds every
 * entry kept and none folded away, and a map of a log changed since falls
 * back to the walk. */
static void test_log_lookup(void)
{
	enum { N = 6000 };
	struct tg_thread_table tt;
	struct tg_thread_logmap map;
	char name[32];
	long i;
	int bad = 0;

	tg_thread_table_init(&tt, NULL, NULL);
	for (int k = 0; k < N; k++) {
		snprintf(name, sizeof(name), "req-%d", k);
		/* every third thread reuses an earlier one's ident and native id */
		i = log_one(&tt, name, k % 3 == 2 ? (unsigned long)(k / 3) : 100000 + (unsigned long)k);
		if (k >= 16 && k % 2)
			CHECK_INT(tg_thread_table_log_fold(&tt, tt.log[i].seq - 16, "req-*", k % 4 == 1, NULL, NULL),
				  0);
	}
	/* one still attaching: neither finds it */
	i = tg_thread_table_log_add(&tt, strdup("att"), 3, 7, 1007, 0, 0, 0);
	CHECK(i >= 0);
	CHECK_INT(tg_thread_logmap_build(&map, &tt), 0);
	for (unsigned long id = 0; id < 100000 + N; id = id + 1 == N ? 100000 : id + 1)
		if (tg_thread_logmap_find(&map, &tt, id, id + 1000) != walk_find(&tt, id, id + 1000))
			bad++;
	CHECK_INT(bad, 0);
	CHECK(tg_thread_logmap_find(&map, &tt, 7, 1007) == NULL);
	CHECK(tg_thread_logmap_find(&map, &tt, 7, 1008) == NULL);  /* native id differs */
	/* by seq: each entry kept is found, nothing in between */
	bad = 0;
	for (uint64_t seq = 0, j = 0; seq < tt.n_seen; seq++) {
		struct tg_thread_log *e = tg_thread_table_log_seq_unlocked(&tt, seq);
		if (j < tt.n_log && tt.log[j].seq == seq)
			bad += e != &tt.log[j++];
		else
			bad += e != NULL;
	}
	CHECK_INT(bad, 0);
	/* a noted thread folded away keeps its family, one not noted does not;
	 * one folded and kept (the accounting) goes by its entry's base */
	{
		long a = log_one(&tt, "na", 200001), b = log_one(&tt, "nb", 200002);
		long c = log_one(&tt, "nc", 200003);
		uint64_t sa = tt.log[a].seq, sb = tt.log[b].seq, sc = tt.log[c].seq;
		tg_thread_table_log_note(&tt, sc);
		tg_thread_table_log_note(&tt, sa);
		/* folded out of seq order: the lookup sorts */
		CHECK_INT(tg_thread_table_log_fold(&tt, sc, "n*", 0, NULL, NULL), 0);
		CHECK_INT(tg_thread_table_log_fold(&tt, sb, "n*", 0, NULL, NULL), 0);
		CHECK_INT(tg_thread_table_log_fold(&tt, sa, "*", 0, NULL, NULL), 0);
		CHECK_STR(tg_thread_table_family_of_unlocked(&tt, sa), "*");
		CHECK(tg_thread_table_family_of_unlocked(&tt, sb) == NULL);
		CHECK_STR(tg_thread_table_family_of_unlocked(&tt, sc), "n*");
		CHECK(tg_thread_table_family_of_unlocked(&tt, tt.log[0].seq) == NULL);
		for (size_t k = 0; k < tt.n_log; k++)
			if (tt.log[k].folded) {
				CHECK_STR(tg_thread_table_family_of_unlocked(&tt, tt.log[k].seq),
					  "req-*");
				break;
			}
		CHECK_INT(tt.n_noted, 2);
		CHECK(tg_thread_logmap_find(&map, &tt, 5, 1005) == walk_find(&tt, 5, 1005));
	}
	/* the log changes: the old map is not trusted */
	log_one(&tt, "late", 5);  /* reuses ident 5 */
	CHECK(tg_thread_logmap_find(&map, &tt, 5, 1005) == &tt.log[tt.n_log - 1]);
	tg_thread_logmap_release(&map);
	tg_thread_logmap_release(&map);  /* safe twice */
	tg_thread_table_destroy(&tt);
}

/* The name set under claims and releases in a random order (backward-shift
 * deletion keeps every held name reachable): each claim gives a name no held
 * one has, and each released one can be claimed again. */
static void test_nameset_release(void)
{
	enum { NAMES = 600 };
	struct tg_nameset *ns = tg_nameset_new();
	static char held[NAMES][TG_BASENAME_CAP];
	int is_held[NAMES] = {0}, n_held = 0;
	unsigned seed = 12345;

	CHECK(ns != NULL);
	for (int step = 0; step < 20000; step++) {
		int k;
		seed = seed * 1103515245u + 12345u;
		k = (int)((seed >> 8) % NAMES);
		if (is_held[k]) {
			tg_nameset_release(ns, held[k]);
			is_held[k] = 0;
			n_held--;
		} else {
			/* few distinct names, so that copies ("w3~2") come and go too */
			snprintf(held[k], sizeof(held[k]), "w%u", (seed >> 20) % 40);
			CHECK_INT(tg_nameset_claim(ns, held[k]), 0);
			for (int j = 0; j < NAMES; j++)
				if (is_held[j] && strcmp(held[j], held[k]) == 0)
					CHECK(!"a claim gave a held name");
			is_held[k] = 1;
			n_held++;
		}
	}
	CHECK(n_held > 0);
	/* every held name is still found: claiming it again gives a copy */
	for (int j = 0; j < NAMES; j++) {
		char again[TG_BASENAME_CAP];
		if (!is_held[j])
			continue;
		memcpy(again, held[j], sizeof(again));
		CHECK_INT(tg_nameset_claim(ns, again), 0);
		CHECK(strcmp(again, held[j]) != 0);
		tg_nameset_release(ns, again);
	}
	tg_nameset_release(ns, "process");  /* reserved: stays */
	{
		char p[TG_BASENAME_CAP] = "process";
		CHECK_INT(tg_nameset_claim(ns, p), 0);
		CHECK_STR(p, "process~2");
	}
	tg_nameset_free(ns);
}

/* --- fork: the child keeps only the forking thread's state ---------------------- */

static void test_fork_reap(void)
{
	struct tg_thread_table tt;
	struct tg_thread *a, *b, *me, *old;
	long ia, ib, im;
	pid_t pid;
	int status;

	tg_thread_table_init(&tt, NULL, NULL);
	old = tg_thread_new(&tt, 1, 30, 30);
	tg_thread_table_retire(&tt, old);   /* a past run's state */
	a = make_state(&tt, "fa", 31, &ia);
	me = make_state(&tt, "fme", 32, &im);
	b = make_state(&tt, "fb", 33, &ib);
	tg_thread_table_add(&tt, a);
	tg_thread_table_add(&tt, me);
	tg_thread_table_add(&tt, b);
	put(&a->mem, "parent a\n");
	put(&me->mem, "parent me\n");
	/* A thread that ended, not yet written by the flusher, and one written
	 * and closed, not yet freed: the child frees both, writing nothing. */
	{
		long ie, ic;
		struct tg_thread *e = make_state(&tt, "fe", 34, &ie);
		struct tg_thread *c = make_state(&tt, "fc", 35, &ic);
		tg_thread_table_add(&tt, e);
		tg_thread_table_add(&tt, c);
		put(&e->mem, "parent e\n");
		tg_thread_table_end(&tt, c);
		tg_thread_table_closed_add(&tt, tg_thread_table_take_ended(&tt));
		tg_writer_close_nogil(&c->mem);
		tg_thread_table_end(&tt, e);
	}
	pid = fork();
	if (pid == 0) {
		/* What the atfork child handler and fork_child_reap do. */
		struct tg_thread *lists[3] = { tt.live, tt.ended, tt.closed };
		struct tg_thread *t, *got;
		int bad = 0, i;
		for (i = 0; i < 3; i++)
			for (t = lists[i]; t != NULL; t = t->next)
				tg_writer_drop_in_child(&t->mem);
		got = tg_thread_table_reap_child(&tt, me);
		bad |= got != me;
		bad |= me->next != NULL;
		bad |= tt.live != NULL || tt.retired != NULL;
		bad |= tt.ended != NULL || tt.closed != NULL;
		bad |= tg_writer_usable(&me->mem);  /* its inherited file is the parent's */
		tg_thread_free(me);
		/* A state that was not listed (or NULL) is not returned. */
		bad |= tg_thread_table_reap_child(&tt, NULL) != NULL;
		tg_thread_table_destroy(&tt);
		exit(bad ? 1 : 0);  /* exit, not _exit: LeakSanitizer checks the child */
	}
	CHECK(pid > 0);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status));
	CHECK_INT(WEXITSTATUS(status), 0);
	/* The parent's states are untouched and write their bytes once. */
	CHECK_INT(list_len(tt.live), 3);
	CHECK_INT(list_len(tt.retired), 1);
	tg_thread_table_destroy(&tt);  /* frees (and flushes) every state */
	CHECK_STR(slurp("fa"), "parent a\n");
	CHECK_STR(slurp("fme"), "parent me\n");
	CHECK_STR(slurp("fb"), "");
	CHECK_STR(slurp("fe"), "parent e\n");  /* the parent's, once */
}

/* --- a flusher walking the table while threads come and go ---------------------- */

struct walker {
	struct tg_thread_table *tt;
	atomic_int stop;
	long walks;
	long failed;  /* passes that ran out of memory */
};

/* The flusher's pass over one state (lifecycle.c), without the table's lock. */
static void walker_flush(struct tg_thread *t, void *ctx)
{
	(void)ctx;
	tg_writer_flush_full_nogil(&t->mem);
	tg_writer_flush_nogil(&t->mem);
}

static void *walker_main(void *arg)
{
	struct walker *w = arg;
	while (!atomic_load(&w->stop)) {
		if (tg_thread_table_each(w->tt, walker_flush, NULL) < 0)
			w->failed++;
		w->walks++;
	}
	return NULL;
}

static void test_concurrent_walk(void)
{
	struct tg_thread_table tt;
	struct walker w = { 0 };
	pthread_t th;
	struct tg_thread *keep[8] = { 0 };
	long i, idx;
	uint64_t rec, srec, drop;
	size_t threads;

	tg_thread_table_init(&tt, NULL, NULL);
	w.tt = &tt;
	CHECK(pthread_create(&th, NULL, walker_main, &w) == 0);
	for (i = 0; i < 2000; i++) {
		char name[32];
		struct tg_thread *t;
		snprintf(name, sizeof(name), "t%ld", i % 5);
		t = make_state(&tt, name, (unsigned long)i, &idx);
		put(&t->mem, "x\n");
		atomic_store(&t->n_records, 1);
		tg_thread_table_add(&tt, t);
		/* Threads end in a different order than they start. */
		if (keep[i % 8] != NULL) {
			struct tg_thread *old = keep[i % 8];
			CHECK_INT(tg_thread_table_remove(&tt, old), 1);
			tg_thread_close_writers(old, NULL, NULL);
			tg_thread_table_settle(&tt, old);
			tg_thread_free(old);
		}
		keep[i % 8] = t;
	}
	atomic_store(&w.stop, 1);
	pthread_join(th, NULL);
	CHECK(w.walks > 0);
	CHECK_INT(w.failed, 0);
	CHECK_INT(list_len(tt.live), 8);
	tg_thread_table_totals(&tt, &rec, &srec, &drop, &threads);
	CHECK_INT(rec, 2000);
	CHECK_INT(threads, 2000);
	CHECK_STR(tt.log[1999].base, "t4~400");
	tg_thread_table_destroy(&tt);
}

/* --- the flusher's pass holds no lock across a write ------------------------------ */

struct held {
	struct tg_thread_table *tt;
	struct tg_thread *slow;  /* the state whose "write" blocks */
	sem_t entered, release;
	int calls;
};

/* A write to a slow disk: blocks, for SLOW, until the test releases it. */
static void held_call(struct tg_thread *t, void *ctx)
{
	struct held *h = ctx;

	h->calls++;
	if (t != h->slow)
		return;
	sem_post(&h->entered);
	while (sem_wait(&h->release) < 0 && errno == EINTR)
		;
}

static void *held_main(void *arg)
{
	struct held *h = arg;

	CHECK_INT(tg_thread_table_each(h->tt, held_call, h), 0);
	return NULL;
}

/*
 * While the flusher's pass is inside a write (of state a), the table's lock is
 * free: a thread starts (log_add, add) and another one ends (remove, close,
 * free) without waiting for the disk, as thread start, thread end and fork do
 * with the GIL held.  The pass still visits every state listed at its start;
 * a state it holds is unlisted only once its write returned.
 */
static void test_each_holds_no_lock(void)
{
	struct tg_thread_table tt;
	struct held h = { 0 };
	struct tg_thread *a, *b, *c, *d;
	long ia, ib, ic, id;
	pthread_t th;

	tg_thread_table_init(&tt, NULL, NULL);
	a = make_state(&tt, "a", 41, &ia);
	b = make_state(&tt, "b", 42, &ib);
	tg_thread_table_add(&tt, a);
	tg_thread_table_add(&tt, b);
	h.tt = &tt;
	h.slow = a;
	sem_init(&h.entered, 0, 0);
	sem_init(&h.release, 0, 0);
	CHECK(pthread_create(&th, NULL, held_main, &h) == 0);
	while (sem_wait(&h.entered) < 0 && errno == EINTR)
		;
	/* the pass is blocked in a's write: none of this may wait for it */
	c = make_state(&tt, "c", 43, &ic);
	tg_thread_table_add(&tt, c);
	CHECK(listed(&tt, c));
	d = make_state(&tt, "d", 44, &id);
	tg_thread_table_add(&tt, d);
	CHECK_INT(tg_thread_table_remove(&tt, d), 1);  /* not in the pass: at once */
	tg_thread_close_writers(d, NULL, NULL);
	tg_thread_table_settle(&tt, d);
	tg_thread_free(d);
	sem_post(&h.release);
	pthread_join(th, NULL);
	CHECK_INT(h.calls, 2);  /* a and b, listed when the pass began */
	CHECK_INT(a->pins + b->pins + c->pins, 0);
	CHECK_INT(tg_thread_table_remove(&tt, a), 1);
	tg_thread_close_writers(a, NULL, NULL);
	tg_thread_free(a);
	sem_destroy(&h.entered);
	sem_destroy(&h.release);
	tg_thread_table_destroy(&tt);
}

/*
 * A thread ends while the flusher's pass is inside a write of its own state
 * (issue: the ending thread waited for the pin with the GIL held): end hands
 * the state over without waiting, settled at once; the flusher takes the
 * ended list only after its pass, writes and closes the files
 * (tg_writer_close_nogil) and puts the states on the closed list, from which
 * the next GIL holder reports and frees them.
 */
static void test_end_while_written(void)
{
	struct tg_thread_table tt;
	struct held h = { 0 };
	struct tg_thread *a, *b, *list;
	long ia, ib;
	pthread_t th;
	uint64_t rec, srec, drop;
	size_t threads;

	kicks = 0;
	tg_thread_table_init(&tt, count_kick, &kicks);
	a = make_state(&tt, "ea", 51, &ia);
	b = make_state(&tt, "eb", 52, &ib);
	tg_thread_table_add(&tt, a);
	tg_thread_table_add(&tt, b);
	put(&a->mem, "a last\n");
	atomic_store(&a->n_records, 4);
	h.tt = &tt;
	h.slow = a;
	sem_init(&h.entered, 0, 0);
	sem_init(&h.release, 0, 0);
	CHECK(pthread_create(&th, NULL, held_main, &h) == 0);
	while (sem_wait(&h.entered) < 0 && errno == EINTR)
		;
	/* a's write is stuck: its thread ends without waiting for it */
	tg_thread_table_end(&tt, a);
	CHECK(!listed(&tt, a) && listed(&tt, b));
	CHECK(tt.ended == a && a->pins == 1);
	CHECK_INT(tt.n_ending, 1);  /* its files maybe still open */
	CHECK_INT(kicks, 1);  /* the flusher is told */
	tg_thread_table_totals(&tt, &rec, &srec, &drop, &threads);
	CHECK_INT(rec, 4);    /* settled at once */
	CHECK(tg_thread_table_take_closed(&tt) == NULL);  /* not written yet */
	sem_post(&h.release);
	pthread_join(th, NULL);
	/* The flusher, after its pass. */
	list = tg_thread_table_take_ended(&tt);
	CHECK(list == a && a->next == NULL && a->pins == 0 && tt.ended == NULL);
	tg_writer_close_nogil(&a->mem);
	CHECK(a->mem.buf == NULL && a->mem.fd < 0 && a->mem.path != NULL);
	CHECK_STR(slurp("ea"), "a last\n");
	tg_thread_table_closed_add(&tt, list);
	CHECK_INT(tt.n_ending, 0);
	tg_thread_table_wait_ended(&tt);  /* at once: nothing ending */
	/* The next GIL holder: report and free. */
	list = tg_thread_table_take_closed(&tt);
	CHECK(list == a && tt.closed == NULL);
	notes = 0;
	tg_thread_close_writers(a, note, &notes);
	CHECK_INT(notes, 0);
	tg_thread_free(a);
	tg_thread_table_totals(&tt, &rec, &srec, &drop, &threads);
	CHECK_INT(rec, 4);
	/* Ended and closed states left at destroy are freed (ASan: no leak). */
	tg_thread_table_end(&tt, b);
	list = tg_thread_table_take_ended(&tt);
	tg_thread_table_closed_add(&tt, list);
	b = make_state(&tt, "ec", 53, &ib);
	tg_thread_table_add(&tt, b);
	tg_thread_table_end(&tt, b);
	CHECK(tt.ended == b && tt.closed != NULL);
	sem_destroy(&h.entered);
	sem_destroy(&h.release);
	tg_thread_table_destroy(&tt);
}

int main(void)
{
	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	test_life();
	test_fork_reap();
	test_log_fold();
	test_log_lookup();
	test_nameset_release();
	test_concurrent_walk();
	test_each_holds_no_lock();
	test_end_while_written();
	{
		char cmd[300];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", tmpdir);
	}
	TG_TEST_DONE();
}
