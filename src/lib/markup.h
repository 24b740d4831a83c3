/*
 * markup.h - writing untrusted text into XML, SVG and HTML, and the UTF-8
 * check it needs (dump text is bytes, an XML parser wants valid UTF-8).
 */
#ifndef TG_MARKUP_H
#define TG_MARKUP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Length of the valid UTF-8 sequence at S (at most N bytes), or 0 if invalid. */
size_t tg_utf8_len(const unsigned char *s, size_t n);

/*
 * Writes LEN bytes of S as XML/HTML text or attribute content: & < > " ' as
 * entities, newlines and tabs as they are, other control bytes (and C1 controls) as '?', invalid UTF-8 as U+FFFD.
 * Returns 0 or EOF.
 */
int tg_xml_text(FILE *f, const char *s, size_t len);
/* tg_xml_text of a NUL-terminated string. */
int tg_xml_puts(FILE *f, const char *s);

/* Writes V with thousands separators ("-1,234,567") into buf (32 bytes). */
void tg_fmt_grouped(char *buf, int64_t v);

/* Writes the bytes of V in a short unit ("1.50 MB", "999 B"; KB, MB... powers of
 * 1024, as every size the commands print) into buf (32 bytes). */
void tg_fmt_bytes_short(char *buf, int64_t v);

/* Writes LEN bytes of DATA as base64 (no line breaks); 0 or EOF. */
int tg_base64_write(FILE *f, const unsigned char *data, size_t len);

#endif
