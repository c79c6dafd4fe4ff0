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

static int chunk_new(struct prof_slab *s)
{
    char *c = malloc(CHUNK);
    uintptr_t lo, hi;

    if (c == NULL)
        return -1;
    /* Fault the chunk's pages in with one call instead of one fault per
     * page as blocks are first touched. Failure only costs those faults. */
    lo = ((uintptr_t)c + 4095) & ~(uintptr_t)4095;
    hi = ((uintptr_t)c + CHUNK) & ~(uintptr_t)4095;
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
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
