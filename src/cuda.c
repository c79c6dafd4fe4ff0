/* cuda.c - GPU zones timed with CUDA events, with the driver loaded at run
 * time.
 *
 * Design
 * ------
 * A CUDA zone is a CPU zone plus a pair of CUDA events recorded on the
 * application's stream at begin and at end. The GPU writes each event's
 * timestamp when it reaches it in the stream, so end - start is the GPU time
 * of the work enqueued in between; nobody waits for it.
 *
 *   application thread                       collector thread
 *   ------------------                       ----------------
 *   begin: take a pair from the thread's     prof_cuda_submit(record):
 *          cache, cuEventRecord(start, s)      append the pair to its
 *   end:   cuEventRecord(end, s), push one      context's pending list
 *          PROF_RECORD_CUDA_ record whose    prof_cuda_poll():
 *          start is the pair                   cuEventQuery(end); when done,
 *                                              cuEventElapsedTime, place on
 *                                              the CPU clock, sink(), give
 *                                              the pair back to the pool
 *
 * The driver (libcuda.so.1, or PROF_CUDA_LIB) is dlopen'd on the first CUDA
 * zone and never linked, so one build serves machines with and without a
 * GPU. The types and the dozen entry points we use are declared here; no
 * CUDA header is needed to build. Anything missing (no library, a missing
 * symbol, cuInit failing, PROF_CUDA=0) leaves CUDA zones timing their CPU
 * side only, with one message.
 *
 * Event pools. Events belong to a context, so each context has a pool: a
 * mutex-protected free list of pairs, created on demand up to
 * CUDA_POOL_MAX pairs (beyond that the GPU side of a zone is skipped and
 * counted: the GPU is far behind and more events would only grow memory).
 * Each thread keeps a small cache of pairs per context (up to
 * CUDA_CACHE_BATCH) and refills it from the pool in one locked step only
 * when it is empty; the collector gives completed pairs back to the pool,
 * one lock per context per poll. So the steady state of a zone takes no
 * lock and allocates nothing: one cache pop, and the pair returns through
 * the pool. The pool's size is bounded by the zones in flight.
 *
 * Placing GPU time on the CPU clock. cuEventElapsedTime only gives the time
 * between two events of one context, so each context has a reference: an
 * event recorded by the collector on a private non-blocking stream at a
 * known CLOCK_MONOTONIC time. On an idle stream the GPU timestamps such an
 * event a few microseconds after the record call returns (the time for the
 * command to reach the GPU), so
 *
 *     zone_end_ns   = ref_cpu_ns + elapsed(ref, end)
 *     zone_start_ns = zone_end_ns - elapsed(start, end)
 *
 * The zone is placed from its end event, which has just completed when we
 * see it, so elapsed(ref, end) stays short and the float milliseconds that
 * the driver returns keep sub-microsecond precision.
 *
 * A new reference (a "probe") is taken every CUDA_REF_PERIOD_NS while zones
 * are pending, which bounds the drift between the GPU timer and
 * CLOCK_MONOTONIC. A probe can be late: the private stream may share a
 * hardware queue with busy application streams, and then the GPU stamps it
 * only when that queue drains. Such a probe would shift every later zone.
 * Each probe is therefore checked against the current reference: the GPU
 * time between them should equal the CPU time between them, up to drift. A
 * probe more than CUDA_REF_SLACK_NS (+ CUDA_REF_PPM of the interval) later
 * than expected was delayed and is rejected; one that is earlier than
 * expected replaces the reference (the reference itself was the late one).
 * After CUDA_REF_MAX_AGE_NS without an accepted probe the next one is taken
 * whatever it says, so a real jump cannot wedge us on an old reference.
 * docs/CUDA.md states the resulting accuracy.
 *
 * Threads: the application side touches its own cache, a pool's free list
 * under the pool's lock (one refill per CUDA_CACHE_BATCH zones), the
 * registry of pools under reg_lock (a thread's first zone in a context) and
 * load_lock (the first zones of the process). Everything under "Collector"
 * below runs with the runtime's lock held, so on one thread at a time: the
 * collector thread, a thread flushing (prof_flush, prof_stats), or the one
 * shutting down. Pairs change hands through the ring (the record's
 * release/acquire publishes the pair's fields) and the pool's lock. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "prof.h"
#include "clock.h"
#include "cuda.h"
#include "env.h"
#include "log.h"

/* ------------------------------------------------------------------------ */
/* The driver API, declared by hand (cuda.h of the toolkit is not needed).   */

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

enum {
    CU_SUCCESS = 0,
    CU_ERROR_DEINITIALIZED = 4,
    CU_ERROR_NOT_READY = 600,
};

/* CU_EVENT_DEFAULT: timing on (we need elapsed times), blocking sync off
 * (nobody waits on these events, and the collector only queries them). */
#define CU_EVENT_FLAGS 0u
#define CU_STREAM_NON_BLOCKING 1u
/* Special stream handles: CU_STREAM_LEGACY and CU_STREAM_PER_THREAD. */
#define CU_STREAM_SPECIAL_MAX ((uintptr_t)2)

struct cuda_api {
    CUresult (*init)(unsigned flags);
    CUresult (*ctx_get_current)(CUcontext *ctx);
    CUresult (*ctx_push)(CUcontext ctx);
    CUresult (*ctx_pop)(CUcontext *ctx);
    CUresult (*ctx_get_device)(CUdevice *dev);
    CUresult (*event_create)(CUevent *ev, unsigned flags);
    CUresult (*event_record)(CUevent ev, CUstream stream);
    CUresult (*event_query)(CUevent ev);
    CUresult (*event_elapsed)(float *ms, CUevent start, CUevent end);
    CUresult (*event_destroy)(CUevent ev);
    /* Optional: prof works without them, a little less well. */
    CUresult (*stream_get_ctx)(CUstream stream, CUcontext *ctx);
    CUresult (*stream_create)(CUstream *stream, unsigned flags);
    CUresult (*stream_is_capturing)(CUstream stream, int *status);
    CUresult (*get_error_name)(CUresult err, const char **name);
};

/* ------------------------------------------------------------------------ */
/* Tunables                                                                  */

#define CUDA_POOL_MAX 4096u            /* event pairs per context */
#define CUDA_CACHE_BATCH 8u            /* pairs a thread takes from the pool at once */
#define CUDA_CACHE_SLOTS 4             /* contexts a thread caches pairs for */
#define CUDA_MEMO 4                    /* streams a thread remembers the context of */
#define CUDA_MAX_POOLS 64              /* contexts in a process */
#define CUDA_REF_PERIOD_NS 1000000000ull      /* re-take the reference every 1 s */
#define CUDA_REF_MAX_AGE_NS 10000000000ull    /* accept any probe after 10 s */
#define CUDA_REF_SLACK_NS 20000ll             /* a probe this much later is "delayed" */
#define CUDA_REF_PPM 100                      /* allowance for clock drift */
#define CUDA_REF_RECORD_MAX_NS 50000ull       /* a slower record call is not a probe */
#define CUDA_REF_MAX_REJECT 4                 /* ...unless it keeps happening */
#define CUDA_PLACE_MAX_MS 2000.0f             /* re-reference farther zones first */
#define CUDA_BLOCKED_STREAMS 16

/* ------------------------------------------------------------------------ */
/* State                                                                     */

enum cuda_state {
    CUDA_UNTRIED = 0,   /* nothing tried yet */
    CUDA_LOADING,       /* a thread is loading the driver */
    CUDA_READY,
    CUDA_UNAVAILABLE,   /* off, absent or broken: CPU side only */
    CUDA_FORKED         /* a child of a process that used CUDA */
};

struct cuda_pool;

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

    pthread_mutex_t lock;       /* guards free, total */
    struct cuda_pair *free;
    unsigned total;             /* pairs in existence (or being created) */

    /* Collector only. */
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

struct cuda_tls {
    struct cuda_slot slot[CUDA_CACHE_SLOTS];
    CUstream memo_stream[CUDA_MEMO];    /* the last streams zones used... */
    CUcontext memo_ctx[CUDA_MEMO];      /* ...and their contexts */
    unsigned memo_next;                 /* the entry to replace next */
};

static struct cuda_api api;
static int state;                       /* enum cuda_state; atomic */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cuda_pool *pools[CUDA_MAX_POOLS];
static unsigned npools;                 /* atomic; pools[0..npools) are published */
static pthread_key_t tls_key;
static __thread struct cuda_tls *tls;   /* one pointer: the library may be dlopen'd */
static uint64_t lost;                   /* atomic: GPU sides that could not be timed */
static size_t npending;                 /* collector: zones in every pending list */
static int driver_gone;                 /* collector: the driver shut down (exit) */

/* One notice each. */
static int note_unavailable, note_forked, note_noctx, note_capture, note_exhausted,
    note_pools, note_create, note_record, note_query, note_elapsed, note_ctx,
    note_probe, note_deinit;

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */

/* The name of a driver error, e.g. "CUDA_ERROR_INVALID_HANDLE"; buf (32
 * bytes) holds "CUDA error N" when the driver has no name for it. */
static const char *cu_error_name_in(CUresult rc, char *buf)
{
    const char *name = NULL;

    if (api.get_error_name != NULL && api.get_error_name(rc, &name) == CU_SUCCESS && name != NULL)
        return name;
    snprintf(buf, 32, "CUDA error %d", rc);
    return buf;
}
#define cu_error_name(rc) cu_error_name_in((rc), (char[32]){0})

static void count_lost(uint64_t n)
{
    __atomic_fetch_add(&lost, n, __ATOMIC_RELAXED);
}

static int64_t ms_to_ns(float ms)
{
    double v = (double)ms * 1e6;

    return (int64_t)(v < 0 ? v - 0.5 : v + 0.5);
}

static void pair_destroy(struct cuda_pair *p)
{
    /* Destroying an event that is still pending is allowed: the driver
     * releases it once it completes. */
    api.event_destroy(p->start);
    api.event_destroy(p->end);
    free(p);
}

/* Forget pairs for good (errors, shutdown): destroy them and shrink the
 * pool's count. The context must be current, or gone (destroy=0). */
static void pool_forget(struct cuda_pool *pool, struct cuda_pair *list, unsigned n, int destroy)
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

/* ------------------------------------------------------------------------ */
/* Loading the driver                                                        */

static void tls_release(void *arg);

static void *sym(void *h, const char *name, const char *alt)
{
    void *f = dlsym(h, name);

    if (f == NULL && alt != NULL)
        f = dlsym(h, alt);
    return f;
}

/* Returns the new state. Runs once, on the first CUDA zone's thread. */
static int cuda_load_locked(void)
{
    const struct prof_config *cfg = prof_config_get();
    const char *lib = cfg->cuda_lib != NULL && cfg->cuda_lib[0] != '\0' ? cfg->cuda_lib
                                                                         : "libcuda.so.1";
    const char *missing = NULL;
    struct cuda_api a;
    void *h;
    CUresult rc;

    if (cfg->cuda == PROF_CUDA_OFF) {
        prof_log_once(&note_unavailable, "PROF_CUDA=0: CUDA zones time the CPU side only");
        return CUDA_UNAVAILABLE;
    }
    h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *err = dlerror();

        prof_log_once(&note_unavailable, "%sno CUDA driver (%s); CUDA zones time the CPU side only",
                      cfg->cuda == PROF_CUDA_ON ? "PROF_CUDA=1 but " : "",
                      err != NULL ? err : lib);
        return CUDA_UNAVAILABLE;
    }

    memset(&a, 0, sizeof a);
#define REQUIRE(field, name, alt) \
    do { \
        *(void **)&a.field = sym(h, name, alt); \
        if (a.field == NULL && missing == NULL) \
            missing = name; \
    } while (0)
    REQUIRE(init, "cuInit", NULL);
    REQUIRE(ctx_get_current, "cuCtxGetCurrent", NULL);
    REQUIRE(ctx_push, "cuCtxPushCurrent_v2", "cuCtxPushCurrent");
    REQUIRE(ctx_pop, "cuCtxPopCurrent_v2", "cuCtxPopCurrent");
    REQUIRE(ctx_get_device, "cuCtxGetDevice", NULL);
    REQUIRE(event_create, "cuEventCreate", NULL);
    REQUIRE(event_record, "cuEventRecord", NULL);
    REQUIRE(event_query, "cuEventQuery", NULL);
    /* CUDA 12.8 added cuEventElapsedTime_v2 (what cuda.h of 13 maps the name
     * to); older drivers have only the original. Same signature. */
    REQUIRE(event_elapsed, "cuEventElapsedTime_v2", "cuEventElapsedTime");
    REQUIRE(event_destroy, "cuEventDestroy_v2", "cuEventDestroy");
#undef REQUIRE
    *(void **)&a.stream_get_ctx = sym(h, "cuStreamGetCtx", NULL);
    *(void **)&a.stream_create = sym(h, "cuStreamCreate", NULL);
    *(void **)&a.stream_is_capturing = sym(h, "cuStreamIsCapturing", NULL);
    *(void **)&a.get_error_name = sym(h, "cuGetErrorName", NULL);

    if (missing != NULL) {
        prof_log_once(&note_unavailable,
                      "CUDA driver %s lacks %s; CUDA zones time the CPU side only", lib, missing);
        dlclose(h);
        return CUDA_UNAVAILABLE;
    }
    api = a;
    rc = api.init(0);
    if (rc != CU_SUCCESS) {
        /* Keep the library loaded: unloading a driver is never worth it. */
        prof_log_once(&note_unavailable, "cuInit failed (%s); CUDA zones time the CPU side only",
                      cu_error_name(rc));
        return CUDA_UNAVAILABLE;
    }
    if (pthread_key_create(&tls_key, tls_release) != 0) {
        prof_log_once(&note_unavailable, "out of thread keys; CUDA zones time the CPU side only");
        return CUDA_UNAVAILABLE;
    }
    return CUDA_READY;
}

/* Called by an application thread while the state is not READY. Threads
 * that come while another one loads wait for it (once per process: the
 * application already initialized CUDA, so this is a dlopen of a loaded
 * library and a cuInit that returns at once); otherwise their zones would
 * silently lose the GPU side. The thread's busy flag is held meanwhile, so
 * a signal handler that interrupts the loading thread gets a CPU-only zone
 * instead of a deadlock. */
static int cuda_load(struct prof_thread_ *t)
{
    int s;

    if (t->busy)
        return CUDA_LOADING;
    t->busy = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    pthread_mutex_lock(&load_lock);
    s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (s == CUDA_UNTRIED) {
        __atomic_store_n(&state, CUDA_LOADING, __ATOMIC_RELAXED);
        s = cuda_load_locked();
        /* Release: api and tls_key are visible to whoever sees READY. */
        __atomic_store_n(&state, s, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&load_lock);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->busy = 0;
    return s;
}

/* ------------------------------------------------------------------------ */
/* Pools (any thread)                                                        */

/* The pool of ctx, created on first use. Slow path: a thread's first zone
 * in a context. */
static struct cuda_pool *pool_find(CUcontext ctx)
{
    struct cuda_pool *p = NULL;
    unsigned i, n;

    pthread_mutex_lock(&reg_lock);
    n = __atomic_load_n(&npools, __ATOMIC_RELAXED);
    for (i = 0; i < n; i++) {
        if (pools[i]->ctx == ctx && !__atomic_load_n(&pools[i]->dead, __ATOMIC_RELAXED)) {
            p = pools[i];
            break;
        }
    }
    if (p == NULL && n < CUDA_MAX_POOLS && (p = calloc(1, sizeof *p)) != NULL) {
        CUdevice dev = -1;
        CUcontext popped;

        if (api.ctx_push(ctx) == CU_SUCCESS) {
            if (api.ctx_get_device(&dev) != CU_SUCCESS)
                dev = -1;
            api.ctx_pop(&popped);
        }
        p->ctx = ctx;
        p->device = dev;
        pthread_mutex_init(&p->lock, NULL);
        p->pend_tail = &p->pend_head;
        pools[n] = p;
        /* Release: the pool's fields are visible to the collector, which
         * loads npools with acquire. */
        __atomic_store_n(&npools, n + 1, __ATOMIC_RELEASE);
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

    pthread_mutex_lock(&pool->lock);
    while (pool->free != NULL && s->n < CUDA_CACHE_BATCH) {
        struct cuda_pair *p = pool->free;

        pool->free = p->next;
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
    pthread_mutex_unlock(&pool->lock);
    if (s->n > 0)
        return;
    if (want == 0) {
        count_lost(1);
        prof_log_once(&note_exhausted,
                      "%u CUDA zones in flight on device %d (event pool full): the GPU side of "
                      "further zones is skipped until some complete",
                      CUDA_POOL_MAX, pool->device);
        return;
    }
    /* Events are created in the pool's context, whatever is current. */
    if ((rc = api.ctx_push(pool->ctx)) != CU_SUCCESS) {
        prof_log_once(&note_ctx, "cuCtxPushCurrent failed (%s) for the CUDA context of device %d: "
                      "the GPU side of zones in it is skipped", cu_error_name(rc), pool->device);
    } else {
        for (; made < want; made++) {
            struct cuda_pair *p = calloc(1, sizeof *p);

            rc = p == NULL ? -ENOMEM : api.event_create(&p->start, CU_EVENT_FLAGS);

            if (rc == CU_SUCCESS && (rc = api.event_create(&p->end, CU_EVENT_FLAGS)) != CU_SUCCESS)
                api.event_destroy(p->start);
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
        api.ctx_pop(&popped);
    }
    if (made < want) {
        pthread_mutex_lock(&pool->lock);
        pool->total -= want - made;
        pthread_mutex_unlock(&pool->lock);
    }
    if (made == 0)
        count_lost(1);
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
    tls = NULL;
}

static struct cuda_slot *slot_for(CUcontext ctx)
{
    struct cuda_tls *c = tls;
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
        tls = c;
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

/* ------------------------------------------------------------------------ */
/* Application thread                                                        */

/* The context whose events can be recorded on stream: the stream's own
 * (cuStreamGetCtx, remembered for the last CUDA_MEMO streams this thread
 * used), or the current one for the legacy and per-thread default streams.
 * NULL when there is none. *memo is the remembered entry the answer came
 * from, or -1: a destroyed stream's handle may since name a stream of
 * another context, so a record that fails after a remembered answer is
 * retried with a fresh one. */
static CUcontext stream_context(CUstream stream, int use_memo, int *memo)
{
    struct cuda_tls *c = tls;
    CUcontext ctx = NULL;
    int i;

    *memo = -1;
    if ((uintptr_t)stream <= CU_STREAM_SPECIAL_MAX || api.stream_get_ctx == NULL)
        return api.ctx_get_current(&ctx) == CU_SUCCESS ? ctx : NULL;
    for (i = 0; use_memo && c != NULL && i < CUDA_MEMO; i++) {
        if (c->memo_stream[i] == stream) {
            *memo = i;
            return c->memo_ctx[i];
        }
    }
    if (api.stream_get_ctx(stream, &ctx) != CU_SUCCESS)
        ctx = NULL;
    if (c != NULL && ctx != NULL) {
        for (i = 0; i < CUDA_MEMO && c->memo_stream[i] != stream; i++)
            ;
        if (i == CUDA_MEMO) {
            i = (int)(c->memo_next++ % CUDA_MEMO);
            c->memo_stream[i] = stream;
        }
        c->memo_ctx[i] = ctx;
    }
    return ctx;
}

/* Take a pair for ctx from this thread's cache. */
static struct cuda_pair *pair_take(struct prof_thread_ *t, CUcontext ctx)
{
    struct cuda_slot *s;
    struct cuda_pair *p = NULL;

    /* The cache is this thread's, but a signal handler running a zone could
     * interrupt us here: the busy flag keeps it out, as in prof.h. */
    t->busy = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
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
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->busy = 0;
    return p;
}

/* Put an unused pair back into this thread's cache (or its pool when the
 * slot was evicted meanwhile). The caller holds t->busy. */
static void pair_put_back(struct cuda_pair *p)
{
    struct cuda_slot *s = NULL;
    int i;

    for (i = 0; tls != NULL && i < CUDA_CACHE_SLOTS; i++)
        if (tls->slot[i].pool == p->pool)
            s = &tls->slot[i];
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

/* A record on the application's stream failed: this zone's GPU side is
 * lost, and the pair is not trusted again. */
static void record_failed(struct cuda_pair *p, CUresult rc)
{
    CUcontext popped;

    count_lost(1);
    prof_log_once(&note_record, "cuEventRecord failed (%s) on device %d: the GPU side of "
                  "such zones is skipped", cu_error_name(rc), p->pool->device);
    if (api.ctx_push(p->pool->ctx) == CU_SUCCESS) {
        pool_forget(p->pool, p, 1, 1);
        api.ctx_pop(&popped);
    } else {
        pool_forget(p->pool, p, 1, 0);
    }
}

PROF_API prof_cuda_zone prof_cuda_zone_begin(const char *name, void *stream)
{
    prof_cuda_zone z;
    struct prof_thread_ *t;
    struct cuda_pair *p;
    CUcontext ctx;
    CUresult rc;
    int st, memo, attempt;

    z.cpu = prof_zone_begin(name);
    z.stream = stream;
    z.events = NULL;
    if (z.cpu.start == 0)
        return z;
    /* A zone begun inside prof (a signal handler) keeps out of the cache. */
    t = prof_thread_self_;
    if (PROF_UNLIKELY_(t == NULL || t->busy))
        return z;
    /* Acquire: pairs with the release in cuda_load. */
    st = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (PROF_UNLIKELY_(st != CUDA_READY)) {
        if (st == CUDA_UNTRIED || st == CUDA_LOADING)
            st = cuda_load(t);
        else if (st == CUDA_FORKED)
            prof_log_once(&note_forked, "CUDA zones in a child forked from a process that used "
                          "CUDA time the CPU side only");
        if (st != CUDA_READY)
            return z;
    }

    for (attempt = 0;; attempt++) {
        ctx = stream_context((CUstream)stream, attempt == 0, &memo);
        if (PROF_UNLIKELY_(ctx == NULL)) {
            count_lost(1);
            prof_log_once(&note_noctx, "a CUDA zone ran with no CUDA context current (or an "
                          "invalid stream): its GPU side is skipped");
            return z;
        }
        if (attempt == 0 && api.stream_is_capturing != NULL) {
            int capturing = 0;

            /* Events recorded into a graph capture are not timed launches,
             * and querying them from another thread may invalidate the
             * capture. */
            if (api.stream_is_capturing((CUstream)stream, &capturing) == CU_SUCCESS &&
                capturing != 0) {
                prof_log_once(&note_capture, "CUDA zones on a stream being captured into a "
                              "CUDA graph time the CPU side only");
                return z;
            }
        }
        if ((p = pair_take(t, ctx)) == NULL)
            return z;
        rc = api.event_record(p->start, (CUstream)stream);
        if (PROF_LIKELY_(rc == CU_SUCCESS))
            break;
        if (memo < 0) {
            record_failed(p, rc);
            return z;
        }
        /* The remembered context was stale: try again with a fresh one. */
        tls->memo_stream[memo] = NULL;
        t->busy = 1;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        pair_put_back(p);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        t->busy = 0;
    }
    z.events = p;
    return z;
}

PROF_API void prof_cuda_zone_end(prof_cuda_zone *z)
{
    struct cuda_pair *p = z->events;
    struct prof_thread_ *t;
    CUresult rc;

    if (p != NULL) {
        z->events = NULL;
        t = prof_thread_self_;
        if (PROF_UNLIKELY_((struct prof_thread_ *)((uintptr_t)z->cpu.thread & ~(uintptr_t)1) != t)) {
            /* Ended on another thread than it began on: refused, like its
             * CPU side (prof_zone_end below counts the zone once). The pair
             * goes back to this thread's cache when it has one; otherwise
             * it is lost, and counted. */
            if (t != NULL && !t->busy) {
                t->busy = 1;
                __atomic_signal_fence(__ATOMIC_SEQ_CST);
                pair_put_back(p);
                __atomic_signal_fence(__ATOMIC_SEQ_CST);
                t->busy = 0;
            } else {
                count_lost(1);
            }
            prof_zone_end(&z->cpu);
            return;
        }
        rc = api.event_record(p->end, (CUstream)z->stream);
        if (PROF_UNLIKELY_(rc != CU_SUCCESS)) {
            record_failed(p, rc);
        } else if (PROF_LIKELY_(t != NULL && !t->busy)) {
            uint64_t head;

            p->stream = (CUstream)z->stream;
            t->busy = 1;
            __atomic_signal_fence(__ATOMIC_SEQ_CST);
            head = t->head;
            /* The record's release-publication of head also publishes
             * p->stream to the collector. end is unused: the CPU side is
             * the zone's own record, pushed by prof_zone_end below. */
            prof_ring_push_(t, (uint64_t)(uintptr_t)p, 0, z->cpu.name, z->cpu.parent,
                            z->cpu.depth, PROF_RECORD_CUDA_);
            if (PROF_UNLIKELY_(t->head == head))
                pair_put_back(p);   /* ring full: dropped and counted by the push */
            __atomic_signal_fence(__ATOMIC_SEQ_CST);
            t->busy = 0;
        } else {
            /* Only reachable if a signal handler interrupted prof itself
             * between this zone's begin and end: give up the pair. */
            count_lost(1);
        }
    }
    prof_zone_end(&z->cpu);
}

/* ------------------------------------------------------------------------ */
/* Collector                                                                 */

void prof_cuda_submit(const prof_record_ *r)
{
    struct cuda_pair *p = (struct cuda_pair *)(uintptr_t)r->start;
    struct cuda_pool *pool;

    if (p == NULL)
        return;
    pool = p->pool;
    p->name = r->name;
    p->wait_gen = 0;
    p->next = NULL;
    *pool->pend_tail = p;
    pool->pend_tail = &p->next;
    pool->npend++;
    npending++;
}

/* Drop every pending zone of a dead pool. The events are not destroyed:
 * their context is gone or unusable. */
static void pool_drop_pending(struct cuda_pool *pool)
{
    size_t n = pool->npend;

    count_lost(n);
    pool_forget(pool, pool->pend_head, (unsigned)n, 0);
    npending -= n;
    pool->pend_head = NULL;
    pool->pend_tail = &pool->pend_head;
    pool->npend = 0;
}

/* The context went away (or cannot be made current): drop what is pending
 * in it, with one message; application threads stop using the pool. */
static void pool_fail(struct cuda_pool *pool, CUresult rc, const char *what)
{
    __atomic_store_n(&pool->dead, 1, __ATOMIC_RELAXED);
    prof_log_once(&note_ctx, "%s failed (%s) for the CUDA context of device %d: %zu pending "
                  "GPU zones dropped, later ones in it are skipped",
                  what, cu_error_name(rc), pool->device, pool->npend);
    pool_drop_pending(pool);
}

/* Maintain the pool's reference event (see the design notes above). The
 * context is current. Returns 0; 1 when the driver shut down; -1 when no
 * reference can be had (*err says why, *what which call). */
static int ref_update(struct cuda_pool *pool, uint64_t now, CUresult *err, const char **what)
{
    CUresult rc;

    if (!pool->stream_tried) {
        pool->stream_tried = 1;
        if (api.stream_create == NULL ||
            api.stream_create(&pool->ref_stream, CU_STREAM_NON_BLOCKING) != CU_SUCCESS)
            pool->ref_stream = NULL;    /* the legacy stream: see docs/CUDA.md */
        *what = "cuEventCreate (reference event)";
        if ((*err = api.event_create(&pool->ref_ev, CU_EVENT_FLAGS)) != CU_SUCCESS)
            pool->ref_ev = NULL;
        else if ((*err = api.event_create(&pool->probe_ev, CU_EVENT_FLAGS)) != CU_SUCCESS)
            pool->probe_ev = NULL;
    }
    if (pool->ref_ev == NULL || pool->probe_ev == NULL)
        return -1;

    if (pool->probe_pending) {
        rc = api.event_query(pool->probe_ev);
        if (rc == CU_SUCCESS) {
            int adopt = 0;

            pool->probe_pending = 0;
            if (!pool->probe_usable) {
                /* The record call itself was slow: we do not know when
                 * the command left. */
            } else if (!pool->have_ref || now - pool->ref_adopted_ns > CUDA_REF_MAX_AGE_NS ||
                       pool->rejected >= CUDA_REF_MAX_REJECT) {
                adopt = 1;
            } else {
                float ms;

                rc = api.event_elapsed(&ms, pool->ref_ev, pool->probe_ev);
                if (rc == CU_SUCCESS) {
                    int64_t cpu_dt = (int64_t)(pool->probe_ns - pool->ref_ns);
                    int64_t late = ms_to_ns(ms) - cpu_dt;

                    adopt = late <= CUDA_REF_SLACK_NS + cpu_dt / (1000000 / CUDA_REF_PPM);
                } else {
                    prof_log_once(&note_probe, "cuEventElapsedTime failed (%s) on the reference "
                                  "event of device %d; retrying", cu_error_name(rc), pool->device);
                }
            }
            if (adopt) {
                CUevent ev = pool->ref_ev;

                pool->ref_ev = pool->probe_ev;
                pool->probe_ev = ev;
                pool->ref_ns = pool->probe_ns;
                pool->ref_adopted_ns = now;
                pool->have_ref = 1;
                pool->rejected = 0;
                pool->ref_gen++;
            } else {
                pool->rejected++;
            }
        } else if (rc == CU_ERROR_DEINITIALIZED) {
            return 1;
        } else if (rc != CU_ERROR_NOT_READY) {
            pool->probe_pending = 0;
            prof_log_once(&note_probe, "cuEventQuery failed (%s) on the reference event of "
                          "device %d; retrying", cu_error_name(rc), pool->device);
        }
    }

    if (!pool->probe_pending && pool->npend > 0 &&
        (!pool->have_ref || pool->want_probe || pool->rejected > 0 ||
         now - pool->probe_taken_ns >= CUDA_REF_PERIOD_NS)) {
        uint64_t t0 = prof_clock_now_ns(), t1;

        rc = api.event_record(pool->probe_ev, pool->ref_stream);
        t1 = prof_clock_now_ns();
        if (rc == CU_SUCCESS) {
            pool->probe_pending = 1;
            /* The GPU stamps the event after the command left, i.e. near
             * the end of the call: t1 is its CPU time. A slow call leaves
             * that uncertain; such a probe is not used (but rejections
             * count, so a slow driver still gets a reference). */
            pool->probe_usable = t1 - t0 <= CUDA_REF_RECORD_MAX_NS || pool->rejected >= CUDA_REF_MAX_REJECT;
            if (!pool->probe_usable)
                pool->rejected++;
            pool->probe_ns = t1;
            pool->probe_taken_ns = t1;
            pool->want_probe = 0;
        } else if (rc == CU_ERROR_DEINITIALIZED) {
            return 1;
        } else {
            if (!pool->have_ref) {
                *err = rc;
                *what = "cuEventRecord (reference event)";
                return -1;
            }
            prof_log_once(&note_probe, "cuEventRecord failed (%s) on the reference event of "
                          "device %d; retrying", cu_error_name(rc), pool->device);
        }
    }
    return 0;
}

static void pool_poll(struct cuda_pool *pool, prof_gpu_sink sink, void *ctx, uint64_t now)
{
    CUstream blocked[CUDA_BLOCKED_STREAMS];
    unsigned nblocked = 0, i, ndone = 0;
    struct cuda_pair **link, *p;
    CUcontext popped;
    CUresult rc, err = -1;
    const char *what = "";
    int r;

    rc = api.ctx_push(pool->ctx);
    if (rc == CU_ERROR_DEINITIALIZED) {
        driver_gone = 1;
        return;
    }
    if (rc != CU_SUCCESS) {
        pool_fail(pool, rc, "cuCtxPushCurrent");
        return;
    }
    r = ref_update(pool, now, &err, &what);
    if (r > 0) {
        driver_gone = 1;
    } else if (r < 0) {
        api.ctx_pop(&popped);
        pool_fail(pool, err, what);
        return;
    }

    link = &pool->pend_head;
    while (!driver_gone && pool->have_ref && (p = *link) != NULL) {
        float dur_ms, off_ms;
        int64_t end_ns, start_ns;
        int skip = 0;

        for (i = 0; i < nblocked; i++)
            skip |= blocked[i] == p->stream;
        if (p->wait_gen != 0 && pool->ref_gen < p->wait_gen)
            skip = 1;           /* completed, waiting for a nearer reference */
        if (skip) {
            /* A stream completes in order: a later zone on a stream whose
             * earlier zone is not done is not done either. */
            link = &p->next;
            continue;
        }
        rc = api.event_query(p->end);
        if (rc == CU_ERROR_NOT_READY) {
            if (nblocked < CUDA_BLOCKED_STREAMS)
                blocked[nblocked++] = p->stream;
            link = &p->next;
            continue;
        }
        if (rc == CU_ERROR_DEINITIALIZED) {
            driver_gone = 1;
            break;
        }
        if (rc == CU_SUCCESS) {
            rc = api.event_elapsed(&dur_ms, p->start, p->end);
            if (rc == CU_SUCCESS)
                rc = api.event_elapsed(&off_ms, pool->ref_ev, p->end);
            if (rc == CU_SUCCESS && p->wait_gen == 0 &&
                (off_ms > CUDA_PLACE_MAX_MS || off_ms < -CUDA_PLACE_MAX_MS)) {
                /* Far from the reference (the stream was idle for long):
                 * float milliseconds lose precision and the clocks drift.
                 * Wait for a reference taken now. */
                p->wait_gen = pool->ref_gen + 1;
                pool->want_probe = 1;
                link = &p->next;
                continue;
            }
            if (rc != CU_SUCCESS)
                prof_log_once(&note_elapsed, "cuEventElapsedTime failed (%s) on device %d: "
                              "GPU zone \"%s\" dropped", cu_error_name(rc), pool->device, p->name);
        } else {
            prof_log_once(&note_query, "cuEventQuery failed (%s) on device %d: GPU zone \"%s\" "
                          "dropped", cu_error_name(rc), pool->device, p->name);
        }

        /* Done with p, one way or the other. */
        *link = p->next;
        pool->npend--;
        npending--;
        if (rc == CU_SUCCESS) {
            int64_t dur = ms_to_ns(dur_ms);

            end_ns = (int64_t)pool->ref_ns + ms_to_ns(off_ms);
            start_ns = end_ns - (dur > 0 ? dur : 0);
            if (start_ns < 1)
                start_ns = 1;
            if (end_ns < start_ns)
                end_ns = start_ns;
            p->next = pool->done;
            pool->done = p;
            ndone++;
            sink(ctx, p->name, pool->device, (uint64_t)(uintptr_t)p->stream,
                 (uint64_t)start_ns, (uint64_t)end_ns);
        } else {
            /* An event that failed may stay broken: do not reuse it. */
            count_lost(1);
            p->next = NULL;
            pool_forget(pool, p, 1, 1);
        }
    }
    pool->pend_tail = link;
    while (*pool->pend_tail != NULL)
        pool->pend_tail = &(*pool->pend_tail)->next;
    api.ctx_pop(&popped);

    if (pool->done != NULL) {
        /* Give the pairs back, one lock for the whole poll. Their events
         * completed, so they can be recorded again right away. */
        struct cuda_pair *last = pool->done;

        while (last->next != NULL)
            last = last->next;
        pthread_mutex_lock(&pool->lock);
        last->next = pool->free;
        pool->free = pool->done;
        pthread_mutex_unlock(&pool->lock);
        pool->done = NULL;
    }
    (void)ndone;
}

void prof_cuda_poll(prof_gpu_sink sink, void *ctx)
{
    /* Acquire: pools[0..n) were published before npools. */
    unsigned n = __atomic_load_n(&npools, __ATOMIC_ACQUIRE), i;
    uint64_t now;

    if (n == 0 || npending == 0 || driver_gone)
        return;
    now = prof_clock_now_ns();
    for (i = 0; i < n && !driver_gone; i++) {
        struct cuda_pool *pool = pools[i];

        if (pool->npend == 0)
            continue;
        if (__atomic_load_n(&pool->dead, __ATOMIC_RELAXED)) {
            pool_drop_pending(pool);    /* zones begun before it died */
            continue;
        }
        pool_poll(pool, sink, ctx, now);
    }
    if (driver_gone)
        prof_log_once(&note_deinit, "the CUDA driver shut down with %zu GPU zones pending", npending);
}

size_t prof_cuda_finish(prof_gpu_sink sink, void *ctx, unsigned timeout_ms)
{
    uint64_t deadline = prof_clock_now_ns() + (uint64_t)timeout_ms * 1000000u;
    unsigned n = __atomic_load_n(&npools, __ATOMIC_ACQUIRE), i;
    size_t left;

    for (;;) {
        struct timespec ts = {0, 1000000};

        prof_cuda_poll(sink, ctx);
        if (npending == 0 || driver_gone || prof_clock_now_ns() >= deadline)
            break;
        nanosleep(&ts, NULL);
    }
    left = npending;
    /* Let the rest go. Their events may still complete on the GPU; the
     * driver frees them then. */
    for (i = 0; i < n && left > 0; i++) {
        struct cuda_pool *pool = pools[i];
        CUcontext popped;
        int cur;

        if (pool->npend == 0)
            continue;
        cur = !driver_gone && api.ctx_push(pool->ctx) == CU_SUCCESS;
        pool_forget(pool, pool->pend_head, (unsigned)pool->npend, cur);
        if (cur)
            api.ctx_pop(&popped);
        pool->pend_head = NULL;
        pool->pend_tail = &pool->pend_head;
        pool->npend = 0;
    }
    npending = 0;
    return left;
}

void prof_cuda_atfork_child(void)
{
    int s = __atomic_load_n(&state, __ATOMIC_RELAXED);

    /* A CUDA context does not survive fork(): the child cannot use the
     * parent's, and the driver refuses to initialize again in it. Locks
     * held by other (now gone) threads are re-made; pools, pending zones
     * and this thread's cache are forgotten (not freed: their contents
     * belong to the parent's contexts). */
    if (s == CUDA_READY || s == CUDA_LOADING)
        __atomic_store_n(&state, CUDA_FORKED, __ATOMIC_RELAXED);
    pthread_mutex_init(&load_lock, NULL);
    pthread_mutex_init(&reg_lock, NULL);
    __atomic_store_n(&npools, 0, __ATOMIC_RELAXED);
    npending = 0;
    driver_gone = 0;
    tls = NULL;
}

uint64_t prof_cuda_lost(void)
{
    return __atomic_load_n(&lost, __ATOMIC_RELAXED);
}
