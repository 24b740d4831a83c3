/*
 * markup.c - escaping untrusted text for XML and HTML, number formats for
 * people, base64 for data: URIs (markup.h).
 */
#include <inttypes.h>
#include <string.h>

#include "markup.h"

size_t tg_utf8_len(const unsigned char *s, size_t n)
{
	size_t need, i;
	unsigned cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		need = 2;
		cp = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		need = 3;
		cp = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		need = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	if (n < need)
		return 0;
	for (i = 1; i < need; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((need == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (need == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return need;
}

int tg_xml_text(FILE *f, const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, l;

	while (i < len) {
		switch (u[i]) {
		case '&': fputs("&amp;", f); i++; continue;
		case '<': fputs("&lt;", f); i++; continue;
		case '>': fputs("&gt;", f); i++; continue;
		case '"': fputs("&quot;", f); i++; continue;
		case '\'': fputs("&#39;", f); i++; continue;
		}
		if (u[i] == '\n' || u[i] == '\t') {
			putc(u[i], f);
			i++;
		} else if (u[i] < 0x20 || u[i] == 0x7f) {
			putc('?', f);  /* not allowed in XML 1.0, or a terminal escape */
			i++;
		} else if (!(l = tg_utf8_len(u + i, len - i))) {
			fputs("\xef\xbf\xbd", f);
			i++;
		} else if (l == 2 && u[i] == 0xc2 && u[i + 1] <= 0x9f) {
			putc('?', f);
			i += 2;
		} else {
			fwrite(u + i, 1, l, f);
			i += l;
		}
	}
	return ferror(f) ? EOF : 0;
}

int tg_xml_puts(FILE *f, const char *s)
{
	return tg_xml_text(f, s, strlen(s));
}

void tg_fmt_grouped(char *buf, int64_t v)
{
	char tmp[32];
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	int n = 0, k = 0;

	do {
		if (k && k % 3 == 0)
			tmp[n++] = ',';
		tmp[n++] = (char)('0' + u % 10);
		u /= 10;
		k++;
	} while (u);
	if (v < 0)
		tmp[n++] = '-';
	for (int i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	buf[n] = '\0';
}

void tg_fmt_bytes_short(char *buf, int64_t v)
{
	static const char *const units[] = { "KB", "MB", "GB", "TB", "PB", "EB" };
	double x = (double)v;
	int u = -1;

	while ((x >= 1024 || x <= -1024) && u < 5) {
		x /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, 32, "%" PRId64 " B", v);
	else
		snprintf(buf, 32, "%.*f %s", x < 10 && x > -10 ? 2 : 1, x, units[u]);
}

int tg_base64_write(FILE *f, const unsigned char *data, size_t len)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t i;

	for (i = 0; i + 2 < len; i += 3) {
		unsigned v = (unsigned)data[i] << 16 | (unsigned)data[i + 1] << 8 | data[i + 2];
		putc(tab[v >> 18], f);
		putc(tab[(v >> 12) & 63], f);
		putc(tab[(v >> 6) & 63], f);
		putc(tab[v & 63], f);
	}
	if (i < len) {
		unsigned v = (unsigned)data[i] << 16 | (i + 1 < len ? (unsigned)data[i + 1] << 8 : 0);
		putc(tab[v >> 18], f);
		putc(tab[(v >> 12) & 63], f);
		putc(i + 1 < len ? tab[(v >> 6) & 63] : '=', f);
		putc('=', f);
	}
	return ferror(f) ? EOF : 0;
}
