/*
 * tg_fnv.h - FNV-1a, 64 bits: the one string hash of the recorder and the
 * analysis library (hash tables keyed by texts, a site's fingerprint, the
 * suffix that keeps two cut names apart, a flame's colour).
 *
 * Header only and plain C, so both halves include it.  Where a value leaves
 * the process (names.c's suffix, flamesvg.c's colours) it is FNV-1a with the
 * standard basis: changing the seed there changes outputs.
 */
#ifndef TG_FNV_H
#define TG_FNV_H

#include <stddef.h>
#include <stdint.h>

#define TG_FNV_BASIS UINT64_C(0xcbf29ce484222325)
#define TG_FNV_PRIME UINT64_C(0x100000001b3)

/* H carried on over the N bytes at P. */
static inline uint64_t
tg_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    size_t i;

    for (i = 0; i < n; i++)
        h = (h ^ s[i]) * TG_FNV_PRIME;
    return h;
}

/* H carried on over two texts with a byte between them that no text holds
 * (0xff is not UTF-8), so that ("ab", "c") and ("a", "bc") differ. */
static inline uint64_t
tg_fnv1a_pair(uint64_t h, const char *a, size_t an, const char *b, size_t bn)
{
    h = tg_fnv1a(h, a, an);
    h = (h ^ 0xff) * TG_FNV_PRIME;
    return tg_fnv1a(h, b, bn);
}

#endif /* TG_FNV_H */
