/*
 * gptitle.c - thread names shortened for a graph's key and tic labels
 * (gptitle.h).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gptitle.h"

/* A title's bytes: TG_GP_TITLE_MAX characters of up to 4 bytes, " #K", NUL. */
#define GPT_BUF (TG_GP_TITLE_MAX * 4 + 24)
/* Default split of a long name: head characters, tail the rest after "..". */
#define GPT_HEAD ((TG_GP_TITLE_MAX - 2) * 2 / 3)
/* The least head kept when the tail is moved back to where names differ. */
#define GPT_MIN_HEAD 8
/* How far the tail may start before the first differing character, to begin
 * at its word ("003" rather than "3"). */
#define GPT_BACK 6

/* Characters of s[0..len): bytes that are not UTF-8 continuations. */
static size_t gpt_chars(const char *s, size_t len)
{
	size_t c = 0;

	for (size_t i = 0; i < len; i++)
		c += ((unsigned char)s[i] & 0xC0) != 0x80;
	return c;
}

/* Byte offset of character k of s (its length when it has fewer). */
static size_t gpt_at(const char *s, size_t k)
{
	size_t i = 0;

	for (; s[i]; i++)
		if (((unsigned char)s[i] & 0xC0) != 0x80 && k-- == 0)
			break;
	return i;
}

/* Characters s and t have in common at their start. */
static size_t gpt_common(const char *s, const char *t)
{
	size_t i = 0;

	while (s[i] && s[i] == t[i])
		i++;
	while (i && ((unsigned char)s[i] & 0xC0) == 0x80)  /* a whole character */
		i--;
	return gpt_chars(s, i);
}

/* Appends characters [from, to) of s to out (at *o). */
static void gpt_put(char *out, size_t *o, const char *s, size_t from, size_t to)
{
	size_t a = gpt_at(s, from), b = gpt_at(s, to);

	memcpy(out + *o, s + a, b - a);
	*o += b - a;
	out[*o] = '\0';
}

/* Writes s (chars characters) as head..s[from..]: head + tail fill the width. */
static void gpt_two(char *out, const char *s, size_t chars, size_t from)
{
	size_t o = 0;

	gpt_put(out, &o, s, 0, TG_GP_TITLE_MAX - 2 - (chars - from));
	gpt_put(out, &o, "..", 0, 2);
	gpt_put(out, &o, s, from, chars);
}

/* s shortened so that it shows where it first differs from the names of equal
 * default titles: from character d on (d >= GPT_HEAD). */
static void gpt_differ(char *out, const char *s, size_t chars, size_t d)
{
	size_t from = d, o = 0;
	const size_t head = 10, tail = 8, window = TG_GP_TITLE_MAX - 4 - head - tail;
	size_t b = gpt_at(s, from);

	while (from > 0 && d - from < GPT_BACK && isalnum((unsigned char)s[b - 1])) {
		from--;
		b--;
	}
	if (chars - from <= TG_GP_TITLE_MAX - 2 - GPT_MIN_HEAD) {
		gpt_two(out, s, chars, from);
		return;
	}
	/* the difference is far from the end: a window on it between head and tail */
	gpt_put(out, &o, s, 0, head);
	gpt_put(out, &o, "..", 0, 2);
	gpt_put(out, &o, s, from, from + window);
	gpt_put(out, &o, "..", 0, 2);
	gpt_put(out, &o, s, chars - tail, chars);
}

/* Non-zero when long names i and j (different) got the same title. */
static int gpt_clash(const char *const *names, char *const *t, const size_t *chars,
		     size_t i, size_t j)
{
	return i != j && t[i] && t[j] && chars[i] > TG_GP_TITLE_MAX &&
	       chars[j] > TG_GP_TITLE_MAX && strcmp(names[i], names[j]) &&
	       !strcmp(t[i], t[j]);
}

char **tg_gp_titles(const char *const *names, size_t n)
{
	char **t = malloc(n * (sizeof(*t) + GPT_BUF) + 1);
	char *buf = (char *)(t + n);
	/* chars[i]: name i's characters; d[i]: where it differs from the names
	 * of the same default title (0: none) */
	size_t *chars = calloc(2 * (n ? n : 1), sizeof(*chars)), *d = chars + n;

	if (!t || !chars) {
		free(t);
		free(chars);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		const char *s = names[i];

		t[i] = s ? buf + i * GPT_BUF : NULL;
		if (!s)
			continue;
		chars[i] = gpt_chars(s, strlen(s));
		if (chars[i] <= TG_GP_TITLE_MAX)
			snprintf(t[i], GPT_BUF, "%s", s);
		else
			gpt_two(t[i], s, chars[i], chars[i] - (TG_GP_TITLE_MAX - 2 - GPT_HEAD));
	}
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++)
			if (gpt_clash(names, t, chars, i, j)) {
				size_t c = gpt_common(names[i], names[j]);
				if (c > d[i])
					d[i] = c;
			}
	for (size_t i = 0; i < n; i++)
		if (d[i])
			gpt_differ(t[i], names[i], chars[i], d[i]);
	/* still the same (the window on the difference is alike too): numbered in
	 * their order, every one of them */
	for (size_t i = 0; i < n; i++) {
		size_t k = 0, mine = 0;

		for (size_t j = 0; j < n; j++)
			if (j == i || gpt_clash(names, t, chars, i, j)) {
				k++;
				if (j == i)
					mine = k;
			}
		d[i] = k > 1 ? mine : 0;
	}
	for (size_t i = 0; i < n; i++)
		if (d[i])
			snprintf(t[i] + strlen(t[i]), GPT_BUF - strlen(t[i]), " #%zu", d[i]);
	free(chars);
	return t;
}

char **tg_gp_thread_titles(const struct tg_dumpfile *files, size_t n,
			   const unsigned char *show)
{
	const char **names = malloc((n ? n : 1) * sizeof(*names));
	char **t;

	if (!names)
		return NULL;
	for (size_t i = 0; i < n; i++)
		names[i] = show[i] ? files[i].thread : NULL;
	t = tg_gp_titles(names, n);
	free(names);
	return t;
}
