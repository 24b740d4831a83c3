/*
 * tg_test.h - a tiny assertion and report helper for the C unit tests.
 *
 * Each test program includes this once, uses the CHECK macros (which report the
 * file and line of a failure and go on), and ends main with TG_TEST_DONE(), which
 * prints "N passed, N failed" and returns non-zero if anything failed.
 */
#ifndef TG_TEST_H
#define TG_TEST_H

#include <stdio.h>
#include <string.h>

static int tg_test_passed, tg_test_failed;

#define CHECK(cond) do { \
	if (cond) { tg_test_passed++; } \
	else { tg_test_failed++; \
	       fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); } \
} while (0)

#define CHECK_INT(a, b) do { \
	long long a_ = (long long)(a), b_ = (long long)(b); \
	if (a_ == b_) { tg_test_passed++; } \
	else { tg_test_failed++; \
	       fprintf(stderr, "%s:%d: %s == %lld, expected %lld\n", __FILE__, __LINE__, \
		       #a, a_, b_); } \
} while (0)

#define CHECK_STR(a, b) do { \
	const char *a_ = (a), *b_ = (b); \
	if (a_ && b_ && !strcmp(a_, b_)) { tg_test_passed++; } \
	else { tg_test_failed++; \
	       fprintf(stderr, "%s:%d: %s == \"%s\", expected \"%s\"\n", __FILE__, __LINE__, \
		       #a, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); } \
} while (0)

/* Compares a (pointer, length) piece with a C string. */
#define CHECK_MEM(p, n, b) do { \
	const char *b_ = (b); size_t n_ = (n); \
	if (n_ == strlen(b_) && !memcmp((p), b_, n_)) { tg_test_passed++; } \
	else { tg_test_failed++; \
	       fprintf(stderr, "%s:%d: %s == \"%.*s\", expected \"%s\"\n", __FILE__, __LINE__, \
		       #p, (int)n_, (p), b_); } \
} while (0)

#define TG_TEST_DONE() do { \
	printf("%d passed, %d failed\n", tg_test_passed, tg_test_failed); \
	return tg_test_failed ? 1 : 0; \
} while (0)

#endif
