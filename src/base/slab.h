/* slab.h - fixed-size blocks for the collector's many small objects
 * (stages, call-path nodes, histogram groups). A run with a million
 * distinct names makes millions of them; from malloc each is a search of
 * the allocator's bins and, for fresh memory, a page fault of its own
 * (several microseconds on a virtual machine). Here they are carved from
 * 1 MB chunks faulted in by one madvise call and recycled through a free
 * list. Chunks come from malloc, so leak checkers see the pointers that
 * blocks hold, and are never given back: memory follows the most objects
 * alive at once. Not thread-safe: the collector's (runtime lock). */
#ifndef PROF_SLAB_H
#define PROF_SLAB_H

#include <stddef.h>

struct prof_slab {
    size_t size;          /* block size, a multiple of 16 */
    void *free;           /* freed blocks, linked through their first word */
    char *cur, *end;      /* the unused rest of the newest chunk */
    void *chunks;         /* every chunk, linked through its first word */
};

#define PROF_SLAB_INIT(bytes) { ((bytes) + 15) / 16 * 16, NULL, NULL, NULL, NULL }

/* A zeroed block, or NULL when memory is exhausted. */
void *prof_slab_alloc(struct prof_slab *s);
/* Give a block back (NULL is ignored). */
void prof_slab_free(struct prof_slab *s, void *p);

/* Fault in the whole pages of [p, p + bytes) now, contents kept: one
 * madvise where the kernel has MADV_POPULATE_WRITE (Linux 5.14), else a
 * store per page. Async-signal-safe (a thread's ring is populated on its
 * first zone, which may be in a signal handler). */
void prof_populate(void *p, size_t bytes);

#endif
