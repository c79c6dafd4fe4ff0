/* slab.c - fixed-size blocks: see slab.h. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "slab.h"

#define CHUNK (1u << 20)
#ifndef MADV_POPULATE_WRITE
#  define MADV_POPULATE_WRITE 23    /* Linux 5.14; older kernels refuse it */
#endif

void prof_populate(void *p, size_t bytes)
{
    uintptr_t lo = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
    uintptr_t hi = ((uintptr_t)p + bytes) & ~(uintptr_t)4095;

    if (hi <= lo || madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE) == 0)
        return;
    for (volatile char *q = (volatile char *)lo; (uintptr_t)q < hi; q += 4096)
        *q = *q;
}

static int chunk_new(struct prof_slab *s)
{
    char *c = malloc(CHUNK);

    if (c == NULL)
        return -1;
    /* Fault the chunk's pages in at once instead of one fault per page as
     * blocks are first touched. */
    prof_populate(c, CHUNK);
    *(void **)(void *)c = s->chunks;
    s->chunks = c;
    s->cur = c + 16;
    s->end = c + CHUNK;
    return 0;
}

void *prof_slab_alloc(struct prof_slab *s)
{
    void *p = s->free;

    if (p != NULL) {
        memcpy(&s->free, p, sizeof s->free);
    } else {
        if ((size_t)(s->end - s->cur) < s->size && chunk_new(s) != 0)
            return NULL;
        p = s->cur;
        s->cur += s->size;
    }
    memset(p, 0, s->size);
    return p;
}

void prof_slab_free(struct prof_slab *s, void *p)
{
    if (p == NULL)
        return;
    memcpy(p, &s->free, sizeof s->free);
    s->free = p;
}
