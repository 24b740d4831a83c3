/*
 * ptrpage.c - the GIL table's page map (ptrpage.h): its reservation, its
 * shadow pages' lists and trim, and its clearing, out of the hooks' inlined
 * path.
 */
#include "ptrpage.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

struct tg_ptrpage tg_ptrpage_gil;

/* Bytes of the three arrays covering addresses below 2^BITS: the entries,
 * then the counts, then the listed flags, each shadow page's 4 KiB aligned. */
static size_t
tg_ptrpage_span(unsigned bits, size_t *neg_at, size_t *listed_at)
{
    uint64_t granules = UINT64_C(1) << (bits - 4);
    uint64_t spages = granules >> TG_PP_SPAGE_SHIFT;

    *neg_at = (size_t)(granules * sizeof(uint16_t));
    *listed_at = *neg_at + (size_t)(spages * sizeof(uint32_t));
    return *listed_at + (size_t)spages;
}

/* Whether the kernel charges MAP_NORESERVE mappings against its commit
 * limit (vm.overcommit_memory 2): a reservation would then take the
 * program's own room to allocate. */
static int
tg_ptrpage_strict_commit(void)
{
    char c = 0;
    int fd = open("/proc/sys/vm/overcommit_memory", O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return 0;
    if (read(fd, &c, 1) != 1)
        c = 0;
    close(fd);
    return c == '2';
}

int
tg_ptrpage_reserve(struct tg_ptrpage *m)
{
    struct rlimit rl;
    unsigned bits, min_bits = TG_PP_MIN_BITS;

    if (m->word1 != NULL)
        return 0;
    if (m->unmapped)  /* not tried per block */
        return -1;
    m->keep = sysconf(_SC_PAGESIZE) != (long)TG_PP_SPAGE_BYTES;
    /* Address space or commit the program may need itself is not taken:
     * under vm.overcommit_memory 2 no map at all, under a limit of address
     * space (ulimit -v) only the whole range (which no such limit allows).
     * The smaller ranges are for tools that cap one mapping's size (valgrind,
     * ThreadSanitizer), not the process's. */
    if (tg_ptrpage_strict_commit()) {
        m->unmapped = 1;
        return -1;
    }
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        min_bits = TG_PP_ADDR_BITS;
    for (bits = TG_PP_ADDR_BITS; bits >= min_bits; bits--) {
        size_t neg_at, listed_at, span = tg_ptrpage_span(bits, &neg_at, &listed_at);
        char *a = mmap(NULL, span, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

        if (a == MAP_FAILED)
            continue;
#ifdef MADV_DONTDUMP
        (void)madvise(a, span, MADV_DONTDUMP);  /* a core without 16 TiB of zeros */
#endif
        m->word1 = (uint16_t *)a;
        m->neg = (uint32_t *)(a + neg_at);
        m->listed = (uint8_t *)(a + listed_at);
        m->span = span;
        m->glimit = UINT64_C(1) << (bits - 4);
        /* No block lies in the first page of the address space: granule 0
         * holds a mark (not counted), so that the hooks' fast paths take a
         * NULL from a failed allocation for no free entry without a test of
         * their own. */
        m->word1[0] = TG_PP_MARK;
        return 0;
    }
    m->unmapped = 1;
    return -1;
}

int
tg_ptrpage_set(struct tg_ptrpage *m, uintptr_t p, size_t word)
{
    uint16_t *e;
    uint64_t g;

    if (tg_ptrpage_reserve(m) < 0 || !tg_ptrpage_find(m, p, &g))
        return -1;
    e = tg_ptrpage_entry(m, g);
    if (*e == 0)
        tg_ptrpage_fill(m, e, g, word);
    else
        *e = (uint16_t)word;
    return 0;
}

__attribute__((noinline, cold)) void
tg_ptrpage_list(struct tg_ptrpage *m, uint64_t sp)
{
    if (m->idle > TG_PP_IDLE_MIN && m->idle > m->pages - m->idle && !m->keep)
        tg_ptrpage_trim(m);  /* SP has an entry already: it stays */
    if (m->pages == m->touched_cap) {
        size_t cap = m->touched_cap ? 2 * m->touched_cap : 1024;
        uint32_t *t = realloc(m->touched, cap * sizeof(*t));

        if (t == NULL)
            return;  /* not listed: its memory stays until clear, and the
                        next page that gets a first entry tries again */
        m->touched = t;
        m->touched_cap = cap;
    }
    m->touched[m->pages++] = (uint32_t)sp;
    m->listed[sp] = 1;
}

static int
tg_ptrpage_cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Give back the memory of the idle shadow pages [FIRST, FIRST + N). */
static void
tg_ptrpage_drop_run(struct tg_ptrpage *m, uint64_t first, uint64_t n)
{
    (void)madvise((char *)m->word1 + first * TG_PP_SPAGE_BYTES,
                  (size_t)(n * TG_PP_SPAGE_BYTES), MADV_DONTNEED);
}

__attribute__((noinline, cold)) void
tg_ptrpage_trim(struct tg_ptrpage *m)
{
    size_t i, kept = 0;
    uint64_t run_first = 0, run_n = 0;

    /* In address order, so that neighbouring idle pages go in one call. */
    qsort(m->touched, m->pages, sizeof(*m->touched), tg_ptrpage_cmp_u32);
    for (i = 0; i < m->pages; i++) {
        uint64_t sp = m->touched[i];

        if (m->neg[sp] != 0) {
            m->touched[kept++] = (uint32_t)sp;
            continue;
        }
        m->listed[sp] = 0;
        m->idle--;
        if (run_n != 0 && run_first + run_n == sp) {
            run_n++;
        } else {
            if (run_n != 0)
                tg_ptrpage_drop_run(m, run_first, run_n);
            run_first = sp;
            run_n = 1;
        }
    }
    if (run_n != 0)
        tg_ptrpage_drop_run(m, run_first, run_n);
    m->pages = kept;
    m->trims++;
}

void
tg_ptrpage_clear(struct tg_ptrpage *m)
{
    if (m->word1 != NULL)
        munmap(m->word1, m->span);
    free(m->touched);
    memset(m, 0, sizeof(*m));
}

size_t
tg_ptrpage_entries(const struct tg_ptrpage *m)
{
    size_t i, count = 0;

    for (i = 0; i < m->pages; i++)
        count += (uint32_t)-m->neg[m->touched[i]];
    return count;
}

size_t
tg_ptrpage_bytes(const struct tg_ptrpage *m)
{
    return m->pages * (TG_PP_SPAGE_BYTES + sizeof(uint32_t) + 1)
           + m->touched_cap * sizeof(*m->touched);
}
