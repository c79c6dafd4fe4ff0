/* cuda_pool.c - CUDA event pairs: where they come from and where they go
 * back.
 *
 * Events belong to a context, so each context has a pool: a mutex-protected
 * free list of pairs, created on demand up to CUDA_POOL_MAX pairs (beyond
 * that the GPU side of a zone is skipped and counted: the GPU is far behind
 * and more events would only grow memory). Pairs come back only when the
 * collector sees their zones complete, and it sleeps up to its period
 * (20 ms: 6,000 zones at 300k zones/s); so a refill that finds the free
 * list empty wakes it, as a ring past its fill mark does, and creates
 * pairs meanwhile (with a fixed 4,096 pairs and no wake, 20.8% of GPU
 * sides are lost at 147k zones/s). Only then: a collector woken while
 * pairs are still free runs beside the launching thread for nothing, and
 * on the fake driver that cost 2.2 us a zone in bench/cuda_zone (a wake at
 * a quarter of the pool left: 2,280 ns a zone against 238). Once the pool
 * holds the zones of one collector period, a steady loop wakes nobody and
 * creates nothing. Each thread keeps a small cache
 * of pairs per context (up to CUDA_CACHE_BATCH) and refills it from the
 * pool in one locked step only when it is empty; the collector (cuda_poll.c)
 * gives completed pairs back to the pool, one lock per context per poll. So
 * the steady state of a zone takes no lock and allocates nothing: one cache
 * pop, and the pair returns through the pool. The pool's size is bounded by
 * the zones in flight.
 *
 * Threads: an application thread touches its own cache, a pool's free list
 * under the pool's lock (one refill per CUDA_CACHE_BATCH zones) and the
 * registry of pools under reg_lock (a thread's first zone in a context).
 * The registry is append-only: the collector reads it without the lock,
 * through the release/acquire of prof_cuda_npools. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "prof.h"
#include "cuda.h"
#include "cuda_driver.h"
#include "cuda_pool.h"
#include "log.h"
#include "wake.h"

struct cuda_pool *prof_cuda_pools[CUDA_MAX_POOLS];
unsigned prof_cuda_npools;              /* atomic; pools[0..npools) are published */
__thread struct cuda_tls *prof_cuda_tls;
int prof_cuda_note_ctx;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t tls_key;
static uint64_t lost;                   /* atomic: GPU sides that could not be timed */

/* One notice each. */
static int note_keys, note_exhausted, note_pools, note_create;

void prof_cuda_count_lost(uint64_t n)
{
    __atomic_fetch_add(&lost, n, __ATOMIC_RELAXED);
}

uint64_t prof_cuda_lost(void)
{
    return __atomic_load_n(&lost, __ATOMIC_RELAXED);
}

static void pair_destroy(struct cuda_pair *p)
{
    /* Destroying an event that is still pending is allowed: the driver
     * releases it once it completes. */
    prof_cu.event_destroy(p->start);
    prof_cu.event_destroy(p->end);
    free(p);
}

void prof_cuda_pool_forget(struct cuda_pool *pool, struct cuda_pair *list, unsigned n, int destroy)
{
    while (list != NULL) {
        struct cuda_pair *next = list->next;

        if (destroy)
            pair_destroy(list);
        else
            free(list);
        list = next;
    }
    pthread_mutex_lock(&pool->lock);
    pool->total -= n;
    pthread_mutex_unlock(&pool->lock);
}

/* The pool of ctx, created on first use. Slow path: a thread's first zone
 * in a context. */
static struct cuda_pool *pool_find(CUcontext ctx)
{
    struct cuda_pool *p = NULL;
    unsigned i, n;

    pthread_mutex_lock(&reg_lock);
    n = __atomic_load_n(&prof_cuda_npools, __ATOMIC_RELAXED);
    for (i = 0; i < n; i++) {
        if (prof_cuda_pools[i]->ctx == ctx &&
            !__atomic_load_n(&prof_cuda_pools[i]->dead, __ATOMIC_RELAXED)) {
            p = prof_cuda_pools[i];
            break;
        }
    }
    if (p == NULL && n < CUDA_MAX_POOLS && (p = calloc(1, sizeof *p)) != NULL) {
        CUdevice dev = -1;
        CUcontext popped;

        if (prof_cu.ctx_push(ctx) == CU_SUCCESS) {
            if (prof_cu.ctx_get_device(&dev) != CU_SUCCESS)
                dev = -1;
            prof_cu.ctx_pop(&popped);
        }
        p->ctx = ctx;
        p->device = dev;
        pthread_mutex_init(&p->lock, NULL);
        p->pend_tail = &p->pend_head;
        prof_cuda_pools[n] = p;
        /* Release: the pool's fields are visible to the collector, which
         * loads npools with acquire. */
        __atomic_store_n(&prof_cuda_npools, n + 1, __ATOMIC_RELEASE);
    } else if (p == NULL) {
        prof_log_once(&note_pools, "more than %d CUDA contexts; GPU sides of zones in the others are skipped",
                      CUDA_MAX_POOLS);
    }
    pthread_mutex_unlock(&reg_lock);
    return p;
}

/* Fill an empty cache slot: pairs from the pool's free list, or new ones
 * while the pool is under CUDA_POOL_MAX. */
static void slot_refill(struct cuda_slot *s)
{
    struct cuda_pool *pool = s->pool;
    unsigned want = 0, made = 0;
    CUcontext popped;
    CUresult rc;

    int wake = 0;

    pthread_mutex_lock(&pool->lock);
    while (pool->free != NULL && s->n < CUDA_CACHE_BATCH) {
        struct cuda_pair *p = pool->free;

        pool->free = p->next;
        pool->nfree--;
        p->next = s->free;
        s->free = p;
        s->n++;
    }
    if (s->n == 0) {
        want = CUDA_POOL_MAX - pool->total;
        if (want > CUDA_CACHE_BATCH)
            want = CUDA_CACHE_BATCH;
        pool->total += want;    /* reserved; created below, unlocked */
    }
    pool->taken += s->n > 0 ? s->n : want;
    if (s->n == 0 && pool->taken - pool->taken_at_wake >= CUDA_POOL_WAKE_EVERY) {
        pool->taken_at_wake = pool->taken;
        wake = 1;
    }
    pthread_mutex_unlock(&pool->lock);
    /* The collector gives back what completed; an atomic exchange when it
     * is awake, a futex wake when it sleeps. */
    if (wake)
        prof_wake_collector();
    if (s->n > 0)
        return;
    if (want == 0) {
        prof_cuda_count_lost(1);
        prof_log_once(&note_exhausted,
                      "%u CUDA zones in flight on device %d (event pool full: the GPU is that "
                      "far behind the launches): the GPU side of further zones is skipped "
                      "until some complete", CUDA_POOL_MAX, pool->device);
        return;
    }
    /* Events are created in the pool's context, whatever is current. */
    if ((rc = prof_cu.ctx_push(pool->ctx)) != CU_SUCCESS) {
        prof_log_once(&prof_cuda_note_ctx, "cuCtxPushCurrent failed (%s) for the CUDA context of "
                      "device %d: the GPU side of zones in it is skipped",
                      cu_error_name(rc), pool->device);
    } else {
        for (; made < want; made++) {
            struct cuda_pair *p = calloc(1, sizeof *p);

            rc = p == NULL ? -ENOMEM : prof_cu.event_create(&p->start, CU_EVENT_FLAGS);

            if (rc == CU_SUCCESS &&
                (rc = prof_cu.event_create(&p->end, CU_EVENT_FLAGS)) != CU_SUCCESS)
                prof_cu.event_destroy(p->start);
            if (rc != CU_SUCCESS) {
                if (p != NULL)
                    prof_log_once(&note_create, "cuEventCreate failed (%s) on device %d; "
                                  "the GPU side of such zones is skipped",
                                  cu_error_name(rc), pool->device);
                free(p);
                break;
            }
            p->pool = pool;
            p->next = s->free;
            s->free = p;
            s->n++;
        }
        prof_cu.ctx_pop(&popped);
    }
    if (made < want) {
        pthread_mutex_lock(&pool->lock);
        pool->total -= want - made;
        pthread_mutex_unlock(&pool->lock);
    }
    if (made == 0)
        prof_cuda_count_lost(1);
}

/* Give a slot's pairs back to its pool. */
static void slot_release(struct cuda_slot *s)
{
    struct cuda_pair *p = s->free;

    if (s->pool != NULL && p != NULL) {
        pthread_mutex_lock(&s->pool->lock);
        while (p != NULL) {
            struct cuda_pair *next = p->next;

            p->next = s->pool->free;
            s->pool->free = p;
            s->pool->nfree++;
            p = next;
        }
        pthread_mutex_unlock(&s->pool->lock);
    }
    memset(s, 0, sizeof *s);
}

/* Thread exit: the thread's cached pairs go back to their pools. */
static void tls_release(void *arg)
{
    struct cuda_tls *c = arg;
    int i;

    for (i = 0; i < CUDA_CACHE_SLOTS; i++)
        slot_release(&c->slot[i]);
    free(c);
    prof_cuda_tls = NULL;
}

int prof_cuda_cache_init(void)
{
    int err = pthread_key_create(&tls_key, tls_release);

    if (err != 0) {
        prof_log_once(&note_keys, "out of thread keys; CUDA zones time the CPU side only");
        return -err;
    }
    return 0;
}

static struct cuda_slot *slot_for(CUcontext ctx)
{
    struct cuda_tls *c = prof_cuda_tls;
    struct cuda_slot *s;
    struct cuda_pool *pool;
    int i;

    if (PROF_LIKELY_(c != NULL)) {
        for (i = 0; i < CUDA_CACHE_SLOTS; i++) {
            s = &c->slot[i];
            if (s->ctx == ctx && s->pool != NULL) {
                if (PROF_UNLIKELY_(__atomic_load_n(&s->pool->dead, __ATOMIC_RELAXED))) {
                    /* Its context is gone; so are the events. */
                    slot_release(s);
                    break;
                }
                return s;
            }
        }
    } else {
        /* The thread's first CUDA zone: the one allocation. */
        if ((c = calloc(1, sizeof *c)) == NULL)
            return NULL;
        prof_cuda_tls = c;
        pthread_setspecific(tls_key, c);
    }
    if ((pool = pool_find(ctx)) == NULL)
        return NULL;
    for (i = 0; i < CUDA_CACHE_SLOTS - 1 && c->slot[i].pool != NULL; i++)
        ;
    s = &c->slot[i];
    slot_release(s);            /* evicts the last slot when all are taken */
    s->ctx = ctx;
    s->pool = pool;
    return s;
}

struct cuda_pair *prof_cuda_pair_take(struct prof_thread_ *t, CUcontext ctx)
{
    struct cuda_slot *s;
    struct cuda_pair *p = NULL;

    /* The cache is this thread's, but a signal handler running a zone could
     * interrupt us here: the busy flag keeps it out, as in prof_impl.h. */
    if (!prof_busy_enter_(t))
        return NULL;
    s = slot_for(ctx);
    if (s != NULL) {
        if (s->n == 0)
            slot_refill(s);
        if (s->n > 0) {
            p = s->free;
            s->free = p->next;
            p->next = NULL;
            s->n--;
        }
    }
    prof_busy_leave_(t);
    return p;
}

void prof_cuda_pair_put_back(struct cuda_pair *p)
{
    struct cuda_tls *c = prof_cuda_tls;
    struct cuda_slot *s = NULL;
    int i;

    for (i = 0; c != NULL && i < CUDA_CACHE_SLOTS; i++)
        if (c->slot[i].pool == p->pool)
            s = &c->slot[i];
    if (s != NULL) {
        p->next = s->free;
        s->free = p;
        s->n++;
    } else {
        struct cuda_slot tmp = {NULL, p->pool, p, 1};

        p->next = NULL;
        slot_release(&tmp);
    }
}

void prof_cuda_pool_atfork_child(void)
{
    /* The parent's pools and this thread's cache are forgotten, not freed:
     * their contents belong to the parent's contexts. */
    pthread_mutex_init(&reg_lock, NULL);
    __atomic_store_n(&prof_cuda_npools, 0, __ATOMIC_RELAXED);
    prof_cuda_tls = NULL;
}
