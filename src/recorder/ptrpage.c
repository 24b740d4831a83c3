/*
 * ptrpage.c - the GIL table's page map (ptrpage.h): its reservation, the
 * memory given back with the heap's, its walk for statistics and its
 * clearing, out of the hooks' inlined path.
 */
#include "ptrpage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

/* The kernel's value (Linux 5.14), for C libraries whose headers predate it:
 * a kernel without it refuses it with EINVAL (tg_ptrpage_prefault). */
#if defined(__linux__) && !defined(MADV_POPULATE_WRITE)
#define MADV_POPULATE_WRITE 23
#endif

struct tg_ptrpage tg_ptrpage_gil;
const char *tg_ptrpage_maps_path = "/proc/self/maps";

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
        size_t span = (size_t)(UINT64_C(1) << (bits - 4)) * sizeof(uint16_t);
        char *a = mmap(NULL, span, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

        if (a == MAP_FAILED)
            continue;
#ifdef MADV_DONTDUMP
        (void)madvise(a, span, MADV_DONTDUMP);  /* a core without 16 TiB of zeros */
#endif
        m->word1 = (uint16_t *)a;
        m->span = span;
        m->glimit = UINT64_C(1) << (bits - 4);
        /* No block lies in the first page of the address space: granule 0
         * holds a mark (not in marks), so that the hooks' fast paths take a
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

/* The map's pages that shadow the heap's [ADDR, ADDR + LEN), in [*LO, *HI):
 * those wholly inside the range's shadow (INNER: an edge page also shadows
 * the neighbouring blocks), or every page that shadows part of it.  0 when
 * M has no map there or no page qualifies. */
static int
tg_ptrpage_shadow_pages(const struct tg_ptrpage *m, uintptr_t addr, size_t len, int inner,
                        uintptr_t *lo, uintptr_t *hi)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uint64_t g0 = (uint64_t)addr >> 4, g1;

    if (m->word1 == NULL || len == 0 || g0 >= m->glimit)
        return 0;
    g1 = ((uint64_t)addr + len + (inner ? 0 : 15)) >> 4;
    if (g1 > m->glimit)
        g1 = m->glimit;
    *lo = (uintptr_t)&m->word1[g0];
    *hi = (uintptr_t)&m->word1[g1];
    if (inner) {
        *lo = (*lo + page - 1) & ~(page - 1);
        *hi &= ~(page - 1);
    } else {
        *lo &= ~(page - 1);
        *hi = (*hi + page - 1) & ~(page - 1);
    }
    return *hi > *lo;
}

__attribute__((cold)) void
tg_ptrpage_forget(struct tg_ptrpage *m, uintptr_t addr, size_t len)
{
    uintptr_t lo, hi;

    if (!tg_ptrpage_shadow_pages(m, addr, len, 1, &lo, &hi))
        return;
    if (madvise((void *)lo, hi - lo, MADV_DONTNEED) == 0) {
        m->forgets++;
        m->forgot += hi - lo;
    }
}

__attribute__((cold)) void
tg_ptrpage_prefault(struct tg_ptrpage *m, uintptr_t addr, size_t len)
{
#ifdef MADV_POPULATE_WRITE
    uintptr_t lo, hi;

    /* Every page of the range's shadow, the edges too: a neighbour's entries
     * there are kept (populating leaves a page in memory as it is). */
    if (m->populate_off || !tg_ptrpage_shadow_pages(m, addr, len, 0, &lo, &hi))
        return;
    if (madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE) == 0) {
        m->prefaults++;
        m->prefaulted += hi - lo;
    } else if (errno == EINVAL) {
        m->populate_off = 1;  /* a kernel before 5.14: not asked again */
    }
#else
    (void)m;
    (void)addr;
    (void)len;
#endif
}

/* Add to *ENTRIES and *BYTES what M holds in the shadow of [LO, HI), which
 * M covers, from the map's address *FROM on (the map's pages before it were
 * counted: a page shadows 32 KiB, so neighbouring mappings may share one);
 * *FROM moved past them.  mincore says which pages are in memory, and only
 * those are read (reading the others would fill them). */
static void
tg_ptrpage_walk_range(const struct tg_ptrpage *m, uint64_t lo, uint64_t hi,
                      uintptr_t page, uintptr_t *from, size_t *entries,
                      size_t *bytes)
{
    enum { CHUNK = 4096 };           /* pages of the map per mincore call */
    unsigned char vec[CHUNK];
    uintptr_t a = (uintptr_t)&m->word1[lo >> 4] & ~(page - 1);
    uintptr_t end = (uintptr_t)&m->word1[(hi + 15) >> 4];

    if (a < *from)
        a = *from;
    while (a < end) {
        size_t n = (end - a + page - 1) / page, i;

        if (n > CHUNK)
            n = CHUNK;
        if (mincore((void *)a, n * page, vec) != 0)
            return;
        for (i = 0; i < n; i++) {
            const uint16_t *e = (const uint16_t *)(a + i * page);
            size_t k;

            if (!(vec[i] & 1))
                continue;
            *bytes += page;
            for (k = 0; k < page / sizeof(*e); k++)
                *entries += e[k] != 0;
        }
        a += n * page;
        *from = a;
    }
}

int
tg_ptrpage_walk(const struct tg_ptrpage *m, size_t *entries, size_t *bytes)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), from = 0;
    uint64_t top = m->glimit << 4;
    char line[512];
    int first = 0;   /* the map's first page walked: it holds granule 0's mark */
    FILE *f;

    *entries = *bytes = 0;
    if (m->word1 == NULL)
        return 0;
    f = fopen(tg_ptrpage_maps_path, "re");
    if (f == NULL)
        return -1;
    /* In address order, and so the map's pages. */
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long long lo, hi;
        size_t len = strlen(line);

        if (len > 0 && line[len - 1] != '\n') {  /* a long path: its rest */
            int c;
            while ((c = getc(f)) != EOF && c != '\n')
                ;
        }
        if (sscanf(line, "%llx-%llx", &lo, &hi) != 2 || lo >= top
                || (uintptr_t)lo == (uintptr_t)m->word1)  /* the map: no block */
            continue;
        if (hi > top)
            hi = top;
        if ((lo >> 4) * sizeof(uint16_t) < page)
            first = 1;
        tg_ptrpage_walk_range(m, lo, hi, page, &from, entries, bytes);
    }
    fclose(f);
    /* granule 0's mark (tg_ptrpage_reserve) is no entry */
    if (first && m->word1[0] == TG_PP_MARK && *entries > 0)
        (*entries)--;
    return 0;
}

void
tg_ptrpage_clear(struct tg_ptrpage *m)
{
    if (m->word1 != NULL)
        munmap(m->word1, m->span);
    memset(m, 0, sizeof(*m));
}
