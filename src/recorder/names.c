/*
 * names.c - escaping of untrusted names for file names and record fields.
 *
 * Thread names come from the profiled program and end up as file names and
 * inside records, so they are never trusted: nothing here can produce a path
 * separator, a "." or ".." name, a hidden file, or a byte that splits a line.
 */
#include "names.h"
#include "tg_format.h"
#include "tg_fnv.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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
        /* a C1 or bidirectional control (U+009B, U+202E): each byte as %HH,
         * so no listing of the directory shows it raw */
        size_t u = tg_unsafe_seq((const unsigned char *)name + i, len - i);
        if (tg_basename_needs_pct(c) || (i == 0 && c == '.') || u > 1) {
            size_t k, n = u > 1 ? u : 1;
            if (o + 3 * n > TG_NAME_MAX)
                break;
            for (k = 0; k < n; k++) {
                unsigned char b = (unsigned char)name[i + k];
                out[o++] = '%';
                out[o++] = tg_hex_upper[b >> 4];
                out[o++] = tg_hex_upper[b & 15];
            }
            i += n;
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

/* One name of a set, and for a name that others were derived from, the suffix
 * to try next (all smaller ones were taken; tg_nameset_claim passes over those
 * held and takes a released one again only when the count restarts with a
 * released base name). */
struct tg_name_entry {
    char *name;           /* malloc'ed; NULL = empty slot */
    unsigned long next;   /* next "~N" to try for copies of this name */
};

struct tg_nameset {
    struct tg_name_entry *slots;
    size_t mask;          /* capacity - 1 (a power of two) */
    size_t count;
};

static uint64_t
tg_name_hash(const char *s)
{
    return tg_fnv1a(TG_FNV_BASIS, s, strlen(s));
}

/* The slot holding NAME, or the empty slot where it would go. */
static struct tg_name_entry *
tg_nameset_slot(struct tg_nameset *s, const char *name)
{
    size_t i = tg_name_hash(name) & s->mask;
    while (s->slots[i].name != NULL && strcmp(s->slots[i].name, name) != 0)
        i = (i + 1) & s->mask;
    return &s->slots[i];
}

/* Add NAME (copied); returns its entry or NULL when out of memory. */
static struct tg_name_entry *
tg_nameset_add(struct tg_nameset *s, const char *name)
{
    struct tg_name_entry *e;
    if ((s->count + 1) * 2 > s->mask + 1) {
        size_t cap = (s->mask + 1) * 2, i;
        struct tg_name_entry *old = s->slots;
        struct tg_name_entry *slots = calloc(cap, sizeof(*slots));
        size_t old_cap = s->mask + 1;
        if (slots == NULL)
            return NULL;
        s->slots = slots;
        s->mask = cap - 1;
        for (i = 0; i < old_cap; i++)
            if (old[i].name != NULL)
                *tg_nameset_slot(s, old[i].name) = old[i];
        free(old);
    }
    e = tg_nameset_slot(s, name);
    if (e->name == NULL) {
        e->name = strdup(name);
        if (e->name == NULL)
            return NULL;
        e->next = 2;
        s->count++;
    }
    return e;
}

struct tg_nameset *
tg_nameset_new(void)
{
    struct tg_nameset *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->mask = 15;
    s->slots = calloc(s->mask + 1, sizeof(*s->slots));
    if (s->slots == NULL || tg_nameset_add(s, TG_PROCESS_BASENAME) == NULL) {
        tg_nameset_free(s);
        return NULL;
    }
    return s;
}

void
tg_nameset_free(struct tg_nameset *s)
{
    size_t i;
    if (s == NULL)
        return;
    if (s->slots != NULL)
        for (i = 0; i <= s->mask; i++)
            free(s->slots[i].name);
    free(s->slots);
    free(s);
}

int
tg_nameset_claim(struct tg_nameset *s, char *out)
{
    size_t base_len = strlen(out);
    struct tg_name_entry *base = tg_nameset_slot(s, out);
    unsigned long k;

    if (base->name == NULL)
        return tg_nameset_add(s, out) == NULL ? -1 : 0;
    for (k = base->next;; k++) {
        snprintf(out + base_len, TG_BASENAME_CAP - base_len, "~%lu", k);
        if (tg_nameset_slot(s, out)->name == NULL)
            break;
    }
    /* base may move when the table grows: find it again after adding */
    if (tg_nameset_add(s, out) == NULL) {
        out[base_len] = '\0';
        return -1;
    }
    out[base_len] = '\0';
    tg_nameset_slot(s, out)->next = k + 1;
    snprintf(out + base_len, TG_BASENAME_CAP - base_len, "~%lu", k);
    return 0;
}

void
tg_nameset_release(struct tg_nameset *s, const char *name)
{
    struct tg_name_entry *e = tg_nameset_slot(s, name);
    size_t i, j, home;

    if (e->name == NULL || strcmp(name, TG_PROCESS_BASENAME) == 0)
        return;
    free(e->name);
    e->name = NULL;
    s->count--;
    /* Linear probing without tombstones: move back each later entry of the
     * run whose home slot does not lie cyclically in (i, j], so that every
     * name stays reachable from its home slot. */
    i = (size_t)(e - s->slots);
    for (j = (i + 1) & s->mask; s->slots[j].name != NULL; j = (j + 1) & s->mask) {
        home = tg_name_hash(s->slots[j].name) & s->mask;
        if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) {
            s->slots[i] = s->slots[j];
            s->slots[j].name = NULL;
            i = j;
        }
    }
}

/* Escaped length of SRC (LEN bytes), whole. */
static size_t
tg_escaped_len_all(const char *src, size_t len)
{
    size_t i, n = len;
    for (i = 0; i < len; i++)
        if (TG_NEEDS_ESCAPE(src[i]))
            n += 3;
    return n;
}

/* 64-bit FNV-1a of SRC: the suffix that keeps two cut texts apart. */
static uint64_t
tg_text_hash(const char *src, size_t len)
{
    return tg_fnv1a(TG_FNV_BASIS, src, len);
}

/* Bytes of SRC kept by a cut: the longest prefix that ends on a UTF-8
 * character boundary and takes at most TG_TEXT_MAX - TG_TEXT_SUFFIX bytes,
 * escaped when ESC. */
static size_t
tg_cut_point(const char *src, size_t len, int esc)
{
    size_t room = TG_TEXT_MAX - TG_TEXT_SUFFIX, n = 0, i;

    for (i = 0; i < len; i++) {
        size_t w = esc && TG_NEEDS_ESCAPE(src[i]) ? 4 : 1;
        if (n + w > room)
            break;
        n += w;
    }
    while (i > 0 && i < len && ((unsigned char)src[i] & 0xc0) == 0x80)
        i--;  /* not inside a character */
    return i;
}

/* Writes the cut's suffix "~" + 16 hex digits of SRC's hash at DST. */
static char *
tg_put_suffix(char *dst, const char *src, size_t len)
{
    uint64_t h = tg_text_hash(src, len);
    *dst++ = '~';
    for (int k = 15; k >= 0; k--)
        *dst++ = tg_hex_lower[(h >> (4 * k)) & 15];
    return dst;
}

size_t
tg_text_cap(const char *src, size_t len, char *out)
{
    size_t keep;
    if (len <= TG_TEXT_MAX) {
        memcpy(out, src, len);
        return len;
    }
    keep = tg_cut_point(src, len, 0);
    memcpy(out, src, keep);
    return (size_t)(tg_put_suffix(out + keep, src, len) - out);
}

size_t
tg_escaped_len(const char *src, size_t len)
{
    size_t n = tg_escaped_len_all(src, len);
    if (n <= TG_TEXT_MAX)
        return n;
    return tg_escaped_len_all(src, tg_cut_point(src, len, 1)) + TG_TEXT_SUFFIX;
}

/* Whether any byte of the 8 in X is below 0x20 or is 0x7f (TG_NEEDS_ESCAPE).
 * The borrow trick: (b - n) & ~b has its top bit set for some byte iff some
 * byte b < n (n <= 0x80), exactly; 0x7f is found as a zero of X ^ 0x7f..7f. */
static inline int
tg_word_needs_escape(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    uint64_t y = x ^ (ones * 0x7f);
    return (((x - ones * 0x20) & ~x) | ((y - ones) & ~y)) & high ? 1 : 0;
}

/* The same for the 4 bytes of X. */
static inline int
tg_word32_needs_escape(uint32_t x)
{
    const uint32_t ones = 0x01010101u, high = 0x80808080u;
    uint32_t y = x ^ (ones * 0x7f);
    return (((x - ones * 0x20) & ~x) | ((y - ones) & ~y)) & high ? 1 : 0;
}

static char *tg_escape_all(char *dst, const char *src, size_t len);

char *
tg_escape(char *dst, const char *src, size_t len)
{
    size_t keep;

    /* escaped, a text of TG_TEXT_MAX / 4 bytes or less cannot pass the cap */
    if (__builtin_expect(len <= TG_TEXT_MAX / 4, 1) ||
        tg_escaped_len_all(src, len) <= TG_TEXT_MAX)
        return tg_escape_all(dst, src, len);
    keep = tg_cut_point(src, len, 1);
    dst = tg_escape_all(dst, src, keep);
    return tg_put_suffix(dst, src, len);
}

/* tg_escape() without the cap. */
static char *
tg_escape_all(char *dst, const char *src, size_t len)
{
    size_t i = 0;

    /* Names almost never need escaping, and C calls escape theirs on every
     * record: whole words are checked and copied at once (overlapping loads
     * for the tail, all inside SRC), byte by byte only from the first word
     * with something to escape. */
    if (len >= 8) {
        uint64_t w;
        for (; i + 8 <= len; i += 8) {
            memcpy(&w, src + i, 8);
            if (tg_word_needs_escape(w))
                goto bytewise;
            memcpy(dst, &w, 8);
            dst += 8;
        }
        if (i < len) {
            memcpy(&w, src + len - 8, 8);
            if (tg_word_needs_escape(w))
                goto bytewise;
            memcpy(dst + (len - i) - 8, &w, 8);
            dst += len - i;
        }
        return dst;
    }
    if (len >= 4) {
        uint32_t a, b;
        memcpy(&a, src, 4);
        memcpy(&b, src + len - 4, 4);
        if (tg_word32_needs_escape(a) || tg_word32_needs_escape(b))
            goto bytewise;
        memcpy(dst, &a, 4);
        memcpy(dst + len - 4, &b, 4);
        return dst + len;
    }
    if (len > 0) {
        char c0 = src[0], c1 = src[len / 2], c2 = src[len - 1];
        if (TG_NEEDS_ESCAPE(c0) || TG_NEEDS_ESCAPE(c1) || TG_NEEDS_ESCAPE(c2))
            goto bytewise;
        dst[0] = c0;
        dst[len / 2] = c1;
        dst[len - 1] = c2;
        return dst + len;
    }
    return dst;
bytewise:
    for (; i < len; i++) {
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
