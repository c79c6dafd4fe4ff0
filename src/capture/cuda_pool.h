/* cuda_pool.h - CUDA event pairs: a pool per context, a cache per thread
 * (cuda_pool.c), and the count of GPU sides lost. Private to the cuda*.c
 * files. */
#ifndef PROF_CUDA_POOL_H
#define PROF_CUDA_POOL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "prof.h"
#include "cuda_driver.h"

/* Event pairs per context, at most: the zones in flight (launched, not yet
 * seen complete by the collector). 65,536 pairs hold 218 ms of zones at
 * 300k zones/s; beyond that the GPU is far behind its launches and more
 * events would only grow memory (docs/CUDA.md). */
#define CUDA_POOL_MAX 65536u
/* A refill that finds no free pair (and creates some) wakes the collector,
 * which gives completed pairs back; at most once per CUDA_POOL_WAKE_EVERY
 * pairs taken, so a GPU that is behind does not keep the collector
 * spinning. */
#define CUDA_POOL_WAKE_EVERY 256u
#define CUDA_CACHE_BATCH 8u            /* pairs a thread takes from the pool at once */
#define CUDA_CACHE_SLOTS 4             /* contexts a thread caches pairs for */
#define CUDA_MEMO 4                    /* streams a thread remembers the context of */
#define CUDA_MAX_POOLS 64              /* contexts in a process */

struct cuda_pool;

/* A zone's start and end events. Owned by one party at a time: a pool's
 * free list, a thread's cache, a zone in flight, or the collector's pending
 * list; they hand it over through the pool's lock or the thread's ring. */
struct cuda_pair {
    struct cuda_pair *next;     /* free list, thread cache or pending list */
    struct cuda_pool *pool;     /* immutable */
    CUevent start, end;         /* immutable */
    CUstream stream;            /* set by the application thread at end */
    const char *name;           /* collector */
    unsigned wait_gen;          /* collector: placed only once ref_gen reaches it */
};

struct cuda_pool {
    CUcontext ctx;              /* immutable */
    int device;                 /* immutable */
    int dead;                   /* atomic: the context went away */

    pthread_mutex_t lock;       /* guards free, nfree, total, taken, taken_at_wake */
    struct cuda_pair *free;
    unsigned nfree;             /* pairs on the free list */
    unsigned total;             /* pairs in existence (or being created) */
    unsigned taken, taken_at_wake;  /* pairs taken by threads; at the last wake */

    /* Collector only (cuda_poll.c). */
    struct cuda_pair *pend_head, **pend_tail;
    size_t npend;
    struct cuda_pair *done;     /* pairs to give back at the end of the poll */
    int stream_tried;
    CUstream ref_stream;        /* private non-blocking stream, or NULL */
    CUevent ref_ev, probe_ev;
    int have_ref, probe_pending, probe_usable, rejected;
    unsigned ref_gen;           /* references adopted so far */
    uint64_t ref_ns;            /* CPU time of ref_ev */
    uint64_t ref_adopted_ns;
    uint64_t probe_ns;          /* CPU time of probe_ev */
    uint64_t probe_taken_ns;    /* when the last probe was recorded */
    int want_probe;
};

struct cuda_slot {
    CUcontext ctx;
    struct cuda_pool *pool;
    struct cuda_pair *free;
    unsigned n;
};

/* A thread's CUDA state: its caches of pairs (cuda_pool.c) and the streams
 * whose context it looked up last (cuda.c). Allocated on its first CUDA
 * zone, freed at its exit. */
struct cuda_tls {
    struct cuda_slot slot[CUDA_CACHE_SLOTS];
    CUstream memo_stream[CUDA_MEMO];    /* the last streams zones used... */
    CUcontext memo_ctx[CUDA_MEMO];      /* ...and their contexts */
    unsigned memo_next;                 /* the entry to replace next */
};

/* Every context's pool. Pools are never freed (a dead one stays, marked);
 * pools[0..npools) are published by a release store of npools: load it
 * with acquire before reading them. */
extern struct cuda_pool *prof_cuda_pools[CUDA_MAX_POOLS];
extern unsigned prof_cuda_npools;

/* This thread's state, NULL before its first CUDA zone. One pointer of
 * TLS, as the library may be dlopen'd; hidden on the declaration too, so
 * that the other cuda*.c files reach it as cheaply as a static. */
extern __thread struct cuda_tls *prof_cuda_tls __attribute__((visibility("hidden")));

/* The notice for a context that cannot be made current, whichever side
 * meets it first (a thread making events, the collector polling). */
extern int prof_cuda_note_ctx;

/* Set up per-thread caches (the key whose destructor gives a thread's
 * pairs back). Once, while the driver is being loaded. Returns 0, or a
 * negative errno after saying, once, that CUDA zones time the CPU side
 * only. */
int prof_cuda_cache_init(void);

/* Application thread: take a pair for ctx from this thread's cache,
 * refilling it from ctx's pool (created on first use). NULL when none can
 * be had: a full pool or failing event creation is counted in
 * prof_cuda_lost() and said once; more than CUDA_MAX_POOLS contexts is
 * only said once; no memory is silent. Sets and clears t->busy itself. */
struct cuda_pair *prof_cuda_pair_take(struct prof_thread_ *t, CUcontext ctx);

/* Application thread: put an unused pair back into this thread's cache (or
 * its pool when the slot was evicted meanwhile). The caller holds
 * t->busy. */
void prof_cuda_pair_put_back(struct cuda_pair *p);

/* Forget n pairs for good (errors, shutdown): destroy them and shrink the
 * pool's count. The pool's context must be current, or gone (destroy=0:
 * only the memory is freed). Any thread. */
void prof_cuda_pool_forget(struct cuda_pool *pool, struct cuda_pair *list, unsigned n,
                           int destroy);

/* Count n GPU sides that could not be timed (read by prof_cuda_lost()).
 * Any thread. */
void prof_cuda_count_lost(uint64_t n);

/* In a forked child: no pools, no cache on this thread, the registry lock
 * re-made. */
void prof_cuda_pool_atfork_child(void);

#endif
