/* cuda.c - GPU zones timed with CUDA events: the application side.
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
 * The parts, bottom up:
 *   cuda_driver.c  the driver API declared by hand, dlopen'd at run time
 *   cuda_pool.c    event pairs: a pool per context, a cache per thread
 *   cuda.c         this file: bringing CUDA up on the first zone, the
 *                  zone's begin and end on the application's thread
 *   cuda_poll.c    the collector: pending zones, the GPU clock placed on
 *                  the CPU clock, completed zones to the sink
 * cuda.h is what the rest of src/ sees; the other headers are theirs.
 *
 * A zone's CPU side is an ordinary zone, begun and ended with the inline
 * zone path of prof_impl.h (prof_zone_begin_inline_, prof_zone_end_inline_), not
 * with zone.c's prof_zone_begin/prof_zone_end: the parts under the API do not
 * call back up into it.
 *
 * Threads: the application side touches its own cache, a pool's free list
 * under the pool's lock (one refill per CUDA_CACHE_BATCH zones), the
 * registry of pools under its lock (a thread's first zone in a context) and
 * load_lock (the first zones of the process). The collector side runs with
 * the runtime's lock held, so on one thread at a time. Pairs change hands
 * through the ring (the record's release/acquire publishes the pair's
 * fields) and the pool's lock. */
#include <pthread.h>
#include <stdint.h>

#include "prof.h"
#include "cuda.h"
#include "cuda_driver.h"
#include "cuda_pool.h"
#include "cupti.h"
#include "env.h"
#include "log.h"

enum cuda_state {
    CUDA_UNTRIED = 0,   /* nothing tried yet */
    CUDA_LOADING,       /* a thread is loading the driver */
    CUDA_READY,
    CUDA_UNAVAILABLE,   /* off, absent or broken: CPU side only */
    CUDA_FORKED,        /* a child of a process that used CUDA */
    CUDA_KERNELS        /* PROF_CUDA=kernels: CUPTI, no events (READY's
                           pools are there too, for a fallback) */
};

static int state;                       /* enum cuda_state; atomic */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

/* One notice each. */
static int note_forked, note_noctx, note_capture, note_record, note_uninit;

/* A zone whose GPU side was lost at its begin keeps &lost_mark[cause] as
 * its events: its end pushes a CUDA record with no pair and the cause, so
 * that the collector counts the loss for its stage (gpu_busy.c). */
static char lost_mark[PROF_CUDA_LOST_CAUSES_];

static prof_cuda_zone lost(prof_cuda_zone z, int cause)
{
    z.events = &lost_mark[cause];
    return z;
}

/* Push the CUDA record of a zone whose GPU side was lost. */
static void push_lost(struct prof_thread_ *t, const prof_cuda_zone *z, int cause)
{
    if (t != NULL && prof_busy_enter_(t)) {
        prof_ring_push_(t, 0, (uint64_t)cause, z->cpu.name, z->cpu.parent, z->cpu.depth,
                        PROF_RECORD_CUDA_);
        prof_busy_leave_(t);
    }
}

/* Called by an application thread while the state is not READY. Threads
 * that come while another one loads wait for it (once per process: a
 * dlopen, of a library the application has usually loaded already, and
 * no cuInit); otherwise their zones would
 * silently lose the GPU side. The thread's busy flag is held meanwhile, so
 * a signal handler that interrupts the loading thread gets a CPU-only zone
 * instead of a deadlock. */
static int cuda_load(struct prof_thread_ *t)
{
    int s;

    if (!prof_busy_enter_(t))
        return CUDA_LOADING;
    pthread_mutex_lock(&load_lock);
    s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (s == CUDA_UNTRIED) {
        __atomic_store_n(&state, CUDA_LOADING, __ATOMIC_RELAXED);
        /* Either failing has said why, once: CPU side only from now on. */
        s = CUDA_UNAVAILABLE;
        if (prof_cuda_driver_open() == 0 && prof_cuda_cache_init() == 0) {
            s = CUDA_READY;
            if (prof_config_get()->cuda == PROF_CUDA_KERNELS && prof_cupti_open() == 0)
                s = CUDA_KERNELS;
        }
        /* Release: prof_cu and the cache key are visible to whoever
         * sees READY. */
        __atomic_store_n(&state, s, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&load_lock);
    prof_busy_leave_(t);
    return s;
}

/* The context whose events can be recorded on stream: the stream's own
 * (cuStreamGetCtx, remembered for the last CUDA_MEMO streams this thread
 * used), or the current one for the legacy and per-thread default streams.
 * NULL when there is none; *rc is then the driver's answer
 * (CU_ERROR_NOT_INITIALIZED: the program has not started CUDA). *memo is
 * the remembered entry the answer came from, or -1: a destroyed stream's
 * handle may since name a stream of another context, so a record that
 * fails after a remembered answer is retried with a fresh one. */
static CUcontext stream_context(CUstream stream, int use_memo, int *memo, CUresult *rc)
{
    struct cuda_tls *c = prof_cuda_tls;
    CUcontext ctx = NULL;
    int i;

    *memo = -1;
    *rc = CU_SUCCESS;
    if ((uintptr_t)stream <= CU_STREAM_SPECIAL_MAX || prof_cu.stream_get_ctx == NULL)
        return (*rc = prof_cu.ctx_get_current(&ctx)) == CU_SUCCESS ? ctx : NULL;
    for (i = 0; use_memo && c != NULL && i < CUDA_MEMO; i++) {
        if (c->memo_stream[i] == stream) {
            *memo = i;
            return c->memo_ctx[i];
        }
    }
    if ((*rc = prof_cu.stream_get_ctx(stream, &ctx)) != CU_SUCCESS)
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

/* A record on the application's stream failed: this zone's GPU side is
 * lost, and the pair is not trusted again. */
static void record_failed(struct cuda_pair *p, CUresult rc)
{
    CUcontext popped;

    prof_cuda_count_lost(1);
    prof_log_once(&note_record, "cuEventRecord failed (%s) on device %d: the GPU side of "
                  "such zones is skipped", cu_error_name(rc), p->pool->device);
    if (prof_cu.ctx_push(p->pool->ctx) == CU_SUCCESS) {
        prof_cuda_pool_forget(p->pool, p, 1, 1);
        prof_cu.ctx_pop(&popped);
    } else {
        prof_cuda_pool_forget(p->pool, p, 1, 0);
    }
}

/* PROF_CUDA=kernels: CUPTI's id of each stream this thread used last
 * (the legacy stream's depends on the current context). */
#define KMEMO 4
static __thread struct {
    void *stream, *ctx;
    uint32_t id;
} kmemo[KMEMO];
static __thread unsigned kmemo_next;

/* Push a PROF_RECORD_KZONE_ record: the zone's begin (its start ticks) or
 * end (now), on CUPTI's stream sid. */
static void push_kzone(struct prof_thread_ *t, const prof_zone *cpu, uint32_t sid, int is_end)
{
    if (prof_busy_enter_(t)) {
        prof_ring_push_(t, is_end ? prof_ticks_now_() : cpu->start,
                        (uint64_t)sid | ((uint64_t)is_end << 32), cpu->name, cpu->parent,
                        cpu->depth, PROF_RECORD_KZONE_);
        prof_busy_leave_(t);
    }
}

/* The zone's begin with PROF_CUDA=kernels: no event, one record with its
 * stream's CUPTI id (events keep the end's record for the end). Returns
 * 1 when it took the zone, 0 when CUPTI failed since (the caller goes on
 * with events). */
static int kernels_begin(prof_cuda_zone *z, struct prof_thread_ *t, CUstream stream)
{
    CUcontext ctx = NULL;
    CUresult rc;
    uint32_t id = 0;
    int memo, i;

    if (prof_cupti_failed()) {
        int expect = CUDA_KERNELS;

        __atomic_compare_exchange_n(&state, &expect, CUDA_READY, 0, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED);
        return 0;
    }
    ctx = stream_context(stream, 1, &memo, &rc);
    if (ctx == NULL) {
        if (rc == CU_ERROR_NOT_INITIALIZED)
            prof_log_once(&note_uninit, "a CUDA zone ran before the program initialized CUDA "
                          "(cuInit): prof does not start CUDA itself, so such zones time the "
                          "CPU side only");
        else
            prof_log_once(&note_noctx, "a CUDA zone ran with no CUDA context current (or an "
                          "invalid stream): its GPU side is skipped");
        return 1;
    }
    for (i = 0; i < KMEMO && !(kmemo[i].stream == stream && kmemo[i].ctx == ctx); i++)
        ;
    if (i < KMEMO) {
        id = kmemo[i].id;
    } else if (prof_cupti_stream_id(ctx, stream, &id) == 0) {
        i = (int)(kmemo_next++ % KMEMO);
        kmemo[i].stream = stream;
        kmemo[i].ctx = ctx;
        kmemo[i].id = id;
    } else {
        prof_log_once(&note_noctx, "a CUDA zone ran with no CUDA context current (or an "
                      "invalid stream): its GPU side is skipped");
        return 1;
    }
    push_kzone(t, &z->cpu, id, 0);
    /* Odd: never a pair's address nor lost_mark's range (checked first). */
    z->events = (void *)(((uintptr_t)id << 1) | 1);
    return 1;
}

PROF_API prof_cuda_zone prof_cuda_zone_begin(const char *name, void *stream)
{
    prof_cuda_zone z;
    struct prof_thread_ *t;
    struct cuda_pair *p;
    CUcontext ctx;
    CUresult rc;
    int st, memo, attempt;

    z.cpu = prof_zone_begin_inline_(name);
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
        if (st == CUDA_KERNELS && kernels_begin(&z, t, (CUstream)stream))
            return z;
        if (st != CUDA_READY && st != CUDA_KERNELS)
            return z;
    }

    for (attempt = 0;; attempt++) {
        ctx = stream_context((CUstream)stream, attempt == 0, &memo, &rc);
        if (PROF_UNLIKELY_(ctx == NULL && rc == CU_ERROR_NOT_INITIALIZED)) {
            /* Not lost: there is no GPU work to time. Asked again on every
             * zone (a thread-local read in the driver), so zones time the
             * GPU once the program has started CUDA. */
            prof_log_once(&note_uninit, "a CUDA zone ran before the program initialized CUDA "
                          "(cuInit): prof does not start CUDA itself, so such zones time the "
                          "CPU side only");
            return z;
        }
        if (PROF_UNLIKELY_(ctx == NULL)) {
            prof_cuda_count_lost(1);
            prof_log_once(&note_noctx, "a CUDA zone ran with no CUDA context current (or an "
                          "invalid stream): its GPU side is skipped");
            return lost(z, PROF_CUDA_LOST_NOCTX);
        }
        if (attempt == 0 && prof_cu.stream_is_capturing != NULL) {
            int capturing = 0;

            /* Events recorded into a graph capture are not timed launches,
             * and querying them from another thread may invalidate the
             * capture. */
            if (prof_cu.stream_is_capturing((CUstream)stream, &capturing) == CU_SUCCESS &&
                capturing != 0) {
                prof_log_once(&note_capture, "CUDA zones on a stream being captured into a "
                              "CUDA graph time the CPU side only");
                return z;
            }
        }
        if ((p = prof_cuda_pair_take(t, ctx)) == NULL)
            return lost(z, PROF_CUDA_LOST_NOPAIR);
        rc = prof_cu.event_record(p->start, (CUstream)stream);
        if (PROF_LIKELY_(rc == CU_SUCCESS))
            break;
        if (memo < 0) {
            record_failed(p, rc);
            return lost(z, PROF_CUDA_LOST_RECORD);
        }
        /* The remembered context was stale: try again with a fresh one. */
        prof_cuda_tls->memo_stream[memo] = NULL;
        if (prof_busy_enter_(t)) {
            prof_cuda_pair_put_back(p);
            prof_busy_leave_(t);
        } else {
            prof_cuda_count_lost(1);
        }
    }
    z.events = p;
    return z;
}

PROF_API void prof_cuda_zone_end(prof_cuda_zone *z)
{
    struct cuda_pair *p = z->events;
    struct prof_thread_ *t;
    CUresult rc;

    if (PROF_UNLIKELY_((uintptr_t)p - (uintptr_t)lost_mark < PROF_CUDA_LOST_CAUSES_)) {
        int cause = (int)((uintptr_t)p - (uintptr_t)lost_mark);

        z->events = NULL;
        t = prof_thread_self_;
        if ((struct prof_thread_ *)((uintptr_t)z->cpu.thread & ~(uintptr_t)1) == t)
            push_lost(t, z, cause);
    } else if (p != NULL) {
        z->events = NULL;
        t = prof_thread_self_;
        if (PROF_UNLIKELY_((uintptr_t)p & 1)) {
            /* PROF_CUDA=kernels: its end, on this thread (the CPU side
             * refuses another one's). */
            if ((struct prof_thread_ *)((uintptr_t)z->cpu.thread & ~(uintptr_t)1) == t)
                push_kzone(t, &z->cpu, (uint32_t)((uintptr_t)p >> 1), 1);
            prof_zone_end_inline_(&z->cpu);
            return;
        }
        if (PROF_UNLIKELY_((struct prof_thread_ *)((uintptr_t)z->cpu.thread & ~(uintptr_t)1) != t)) {
            /* Ended on another thread than it began on: refused, like its
             * CPU side (its end below counts the zone once). The pair
             * goes back to this thread's cache when it has one; otherwise
             * it is lost, and counted. */
            if (t != NULL && prof_busy_enter_(t)) {
                prof_cuda_pair_put_back(p);
                prof_busy_leave_(t);
            } else {
                prof_cuda_count_lost(1);
            }
            prof_zone_end_inline_(&z->cpu);
            return;
        }
        rc = prof_cu.event_record(p->end, (CUstream)z->stream);
        if (PROF_UNLIKELY_(rc != CU_SUCCESS)) {
            record_failed(p, rc);
            push_lost(t, z, PROF_CUDA_LOST_RECORD);
        } else if (PROF_LIKELY_(t != NULL && prof_busy_enter_(t))) {
            uint64_t head;

            p->stream = (CUstream)z->stream;
            head = t->head;
            /* The record's release-publication of head also publishes
             * p->stream to the collector. end is unused: the CPU side is
             * the zone's own record, pushed by its end below. */
            prof_ring_push_(t, (uint64_t)(uintptr_t)p, 0, z->cpu.name, z->cpu.parent,
                            z->cpu.depth, PROF_RECORD_CUDA_);
            if (PROF_UNLIKELY_(t->head == head))
                prof_cuda_pair_put_back(p);   /* ring full: dropped and counted by the push */
            prof_busy_leave_(t);
        } else {
            /* Only reachable if a signal handler interrupted prof itself
             * between this zone's begin and end: give up the pair. */
            prof_cuda_count_lost(1);
        }
    }
    prof_zone_end_inline_(&z->cpu);
}

void prof_cuda_atfork_child(void)
{
    int s = __atomic_load_n(&state, __ATOMIC_RELAXED);

    /* A CUDA context does not survive fork(): the child cannot use the
     * parent's, and the driver refuses to initialize again in it. Locks
     * held by other (now gone) threads are re-made; pools, pending zones
     * and this thread's cache are forgotten (not freed: their contents
     * belong to the parent's contexts). */
    if (s == CUDA_READY || s == CUDA_LOADING || s == CUDA_KERNELS)
        __atomic_store_n(&state, CUDA_FORKED, __ATOMIC_RELAXED);
    prof_cupti_atfork_child();
    pthread_mutex_init(&load_lock, NULL);
    prof_cuda_pool_atfork_child();
    /* Pending zones, the collector's side: fork.c forgets them. */
}
