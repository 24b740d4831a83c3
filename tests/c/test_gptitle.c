/* Unit tests of the graphs' shortened thread titles (gptitle.c). */
#include <stdlib.h>

#include "gptitle.h"
#include "tg_test.h"

/* Characters of a UTF-8 string. */
static size_t chars(const char *s)
{
	size_t c = 0;

	for (; *s; s++)
		c += ((unsigned char)*s & 0xC0) != 0x80;
	return c;
}

int main(void)
{
	const char *names[] = {
		"W1",
		NULL,  /* no title */
		"Worker-with-a-really-long-descriptive-name-number-000-of-the-pool",
		"Worker-with-a-really-long-descriptive-name-number-001-of-the-pool",
		"Thread-12 (process_request_thread_of_the_server)",
		"a-very-long-name-that-is-the-same-aaaaaaaaaaa-1-aaaaaaaaaaaaaaaaaaaaaaaaaaaaa-tail",
		"a-very-long-name-that-is-the-same-aaaaaaaaaaa-2-aaaaaaaaaaaaaaaaaaaaaaaaaaaaa-tail",
		"\xc3\xa0\xc3\xa0\xc3\xa0\xc3\xa0\xc3\xa0\xc3\xa0\xc3\xa0\xc3\xa0\xc3\xa0\xc3\xa0"
		"\xc3\xa0\xc3\xa0\xc3\xa0\xc3\xa0\xc3\xa0\xc3\xa0\xc3\xa0\xc3\xa0\xc3\xa0\xc3\xa0"
		"\xc3\xa0\xc3\xa0\xc3\xa0\xc3\xa0\xc3\xa0\xc3\xa0\xc3\xa0\xc3\xa0\xc3\xa0\xc3\xa0"
		"\xc3\xa0\xc3\xa0\xc3\xa0\xc3\xa0\xc3\xa0-x",  /* 37 characters, 72 bytes */
		"exactly-thirty-two-characters-ok",
	};
	size_t n = sizeof(names) / sizeof(names[0]);
	char **t = tg_gp_titles(names, n);

	CHECK(t != NULL);
	if (!t)
		TG_TEST_DONE();
	CHECK_STR(t[0], "W1");
	CHECK(t[1] == NULL);
	/* differ in the middle: the tail from where they differ, at its word */
	CHECK_STR(t[2], "Worker-with-a-r..000-of-the-pool");
	CHECK_STR(t[3], "Worker-with-a-r..001-of-the-pool");
	/* alone: head (two thirds) .. tail */
	CHECK_STR(t[4], "Thread-12 (process_r..he_server)");
	/* the difference far from the end: a window on it */
	CHECK_STR(t[5], "a-very-lon..1-aaaaaaaa..aaa-tail");
	CHECK_STR(t[6], "a-very-lon..2-aaaaaaaa..aaa-tail");
	/* characters, not bytes, and cut at their boundaries */
	CHECK_INT(chars(t[7]), 32);
	CHECK_STR(t[8], "exactly-thirty-two-characters-ok");
	free(t);

	/* random names over a small alphabet: distinct names, distinct titles of
	 * at most TG_GP_TITLE_MAX characters (" #K" after, where needed) */
	srand(12);
	for (int round = 0; round < 200; round++) {
		char buf[40][80];
		const char *v[40];
		int bad = 0, over = 0;

		for (int i = 0; i < 40; i++) {
			int len = 20 + rand() % 50;
			for (int k = 0; k < len; k++)
				buf[i][k] = "ab-"[rand() % (round % 2 ? 3 : 2)];
			buf[i][len] = '\0';
			v[i] = buf[i];
		}
		t = tg_gp_titles(v, 40);
		if (!t)
			break;
		for (int i = 0; i < 40; i++) {
			const char *k = strstr(t[i], " #");
			size_t c = k ? (size_t)(k - t[i]) : strlen(t[i]);
			over |= c > TG_GP_TITLE_MAX;
			for (int j = 0; j < i; j++)
				bad |= strcmp(v[i], v[j]) && !strcmp(t[i], t[j]);
		}
		CHECK(!bad);
		CHECK(!over);
		free(t);
	}
	TG_TEST_DONE();
}
