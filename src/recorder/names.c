/*
 * names.c - escaping of untrusted names for file names and record fields.
 *
 * Thread names come from the profiled program and end up as file names and
 * inside records, so they are never trusted: nothing here can produce a path
 * separator, a "." or ".." name, a hidden file, or a byte that splits a line.
 */
#include "names.h"
#include "tg_format.h"

#include <stdio.h>
#include <string.h>

static const char tg_hex_upper[] = "0123456789ABCDEF";
static const char tg_hex_lower[] = "0123456789abcdef";

static int
tg_basename_needs_pct(unsigned char c)
{
    return c == '/' || c == '%' || c == '\\' || c < 0x20 || c == 0x7f;
}

/* Length of the UTF-8 sequence at NAME[I] (LEN bytes in all): its lead byte's
 * length when that many continuation bytes (0x80-0xBF) follow, else 1.  A byte
 * that does not start a whole sequence is copied alone and the bytes after it
 * are looked at one by one, so a '/' or a control byte can never ride inside
 * a malformed "sequence" (the name comes from Python as valid UTF-8, but this
 * function's contract holds for any bytes). */
static size_t
tg_utf8_seq_len(const char *name, size_t i, size_t len)
{
    unsigned char c = (unsigned char)name[i];
    size_t n = 1, k;

    if (c >= 0xf0 && c < 0xf8)
        n = 4;
    else if (c >= 0xe0 && c < 0xf0)
        n = 3;
    else if (c >= 0xc0 && c < 0xe0)
        n = 2;
    if (i + n > len)
        return 1;
    for (k = 1; k < n; k++)
        if (((unsigned char)name[i + k] & 0xc0) != 0x80)
            return 1;
    return n;
}

void
tg_safe_basename(const char *name, size_t len, char *out)
{
    size_t i = 0, o = 0;

    if (len == 0) {
        strcpy(out, "%00");
        return;
    }
    while (i < len) {
        unsigned char c = (unsigned char)name[i];
        if (tg_basename_needs_pct(c) || (i == 0 && c == '.')) {
            if (o + 3 > TG_NAME_MAX)
                break;
            out[o++] = '%';
            out[o++] = tg_hex_upper[c >> 4];
            out[o++] = tg_hex_upper[c & 15];
            i++;
        } else {
            size_t n = tg_utf8_seq_len(name, i, len);
            if (o + n > TG_NAME_MAX)
                break;
            memcpy(out + o, name + i, n);
            o += n;
            i += n;
        }
    }
    out[o] = '\0';
}

int
tg_unique_basename(char *out, char *const *used, size_t n)
{
    size_t base_len = strlen(out);
    unsigned long k = 1;

    for (;;) {
        int taken = strcmp(out, TG_PROCESS_BASENAME) == 0;
        size_t i;
        for (i = 0; !taken && i < n; i++)
            taken = strcmp(out, used[i]) == 0;
        if (!taken)
            return 0;
        k++;
        snprintf(out + base_len, TG_BASENAME_CAP - base_len, "~%lu", k);
    }
}

size_t
tg_escaped_len(const char *src, size_t len)
{
    size_t i, n = len;
    for (i = 0; i < len; i++)
        if (TG_NEEDS_ESCAPE(src[i]))
            n += 3;
    return n;
}

char *
tg_escape(char *dst, const char *src, size_t len)
{
    size_t i;
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)src[i];
        if (TG_NEEDS_ESCAPE(c)) {
            *dst++ = '\\';
            *dst++ = 'x';
            *dst++ = tg_hex_lower[c >> 4];
            *dst++ = tg_hex_lower[c & 15];
        } else {
            *dst++ = (char)c;
        }
    }
    return dst;
}
