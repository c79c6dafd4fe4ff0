/* cuda_poll.c - the collector side of CUDA zones: pending zones, the GPU
 * clock's place on the CPU clock, and delivering completed zones.
 *
 * The collector hands each drained PROF_RECORD_CUDA_ record to
 * prof_cuda_submit(), which appends its pair to its context's pending list.
 * prof_cuda_poll() then asks the driver about each pending zone's end event
 * (cuEventQuery, never a wait); when it completed, cuEventElapsedTime gives
 * its times, the zone goes to the sink, and the pair back to its pool.
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
 * Threads: everything here runs with the runtime's lock held, so on one
 * thread at a time: the collector thread, a thread flushing (prof_flush,
 * prof_stats), or the one shutting down. A pair arrives through its
 * thread's ring (the record's release/acquire publishes the pair's fields)
 * and goes back through its pool's lock. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "prof.h"
#include "clock.h"
#include "cuda.h"
#include "cuda_driver.h"
#include "cuda_poll.h"
#include "cuda_pool.h"
#include "log.h"

#define CUDA_REF_PERIOD_NS 1000000000ull      /* re-take the reference every 1 s */
#define CUDA_REF_MAX_AGE_NS 10000000000ull    /* accept any probe after 10 s */
#define CUDA_REF_SLACK_NS 20000ll             /* a probe this much later is "delayed" */
#define CUDA_REF_PPM 100                      /* allowance for clock drift */
#define CUDA_REF_RECORD_MAX_NS 50000ull       /* a slower record call is not a probe */
#define CUDA_REF_MAX_REJECT 4                 /* ...unless it keeps happening */
#define CUDA_PLACE_MAX_MS 2000.0f             /* re-reference farther zones first */
#define CUDA_BLOCKED_STREAMS 16

static void lost_nowhere(void *ctx, const char *raw_name, int cause)
{
    (void)ctx;
    (void)raw_name;
    (void)cause;
}

static size_t npending;                 /* zones in every pending list */
/* Where lost GPU sides go: the drain's, set by each prof_cuda_poll (the
 * only caller of what loses them). */
static prof_gpu_lost_sink lost_sink = lost_nowhere;
static void *lost_ctx;
static int driver_gone;                 /* the driver shut down (exit) */

/* One notice each. */
static int note_query, note_elapsed, note_probe, note_deinit;

const char *prof_cuda_lost_cause_name(int cause)
{
    static const char *const names[PROF_CUDA_LOST_CAUSES_] = {
        "unknown", "no CUDA context current",
        "event pool full (the GPU far behind) or cuEventCreate failing",
        "cuEventRecord failed", "cuEventQuery failed",
        "its CUDA context went away",
    };

    return cause > 0 && cause < PROF_CUDA_LOST_CAUSES_ ? names[cause] : names[0];
}

static int64_t ms_to_ns(float ms)
{
    double v = (double)ms * 1e6;

    return (int64_t)(v < 0 ? v - 0.5 : v + 0.5);
}

int prof_cuda_submit(const prof_record_ *r)
{
    struct cuda_pair *p = (struct cuda_pair *)(uintptr_t)r->start;
    struct cuda_pool *pool;

    if (p == NULL)
        return -2 - (int)(r->end < PROF_CUDA_LOST_CAUSES_ ? r->end : PROF_CUDA_LOST_NONE);
    pool = p->pool;
    p->name = r->name;
    p->wait_gen = 0;
    p->next = NULL;
    *pool->pend_tail = p;
    pool->pend_tail = &p->next;
    pool->npend++;
    npending++;
    return pool->device;
}

/* Drop every pending zone of a dead pool. The events are not destroyed:
 * their context is gone or unusable. */
static void pool_drop_pending(struct cuda_pool *pool)
{
    size_t n = pool->npend;
    struct cuda_pair *p;

    for (p = pool->pend_head; p != NULL; p = p->next)
        lost_sink(lost_ctx, p->name, PROF_CUDA_LOST_CTX);
    prof_cuda_count_lost(n);
    prof_cuda_pool_forget(pool, pool->pend_head, (unsigned)n, 0);
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
    prof_log_once(&prof_cuda_note_ctx, "%s failed (%s) for the CUDA context of device %d: %zu "
                  "pending GPU zones dropped, later ones in it are skipped",
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
        if (prof_cu.stream_create == NULL ||
            prof_cu.stream_create(&pool->ref_stream, CU_STREAM_NON_BLOCKING) != CU_SUCCESS)
            pool->ref_stream = NULL;    /* the legacy stream: see docs/CUDA.md */
        *what = "cuEventCreate (reference event)";
        if ((*err = prof_cu.event_create(&pool->ref_ev, CU_EVENT_FLAGS)) != CU_SUCCESS)
            pool->ref_ev = NULL;
        else if ((*err = prof_cu.event_create(&pool->probe_ev, CU_EVENT_FLAGS)) != CU_SUCCESS)
            pool->probe_ev = NULL;
    }
    if (pool->ref_ev == NULL || pool->probe_ev == NULL)
        return -1;

    if (pool->probe_pending) {
        rc = prof_cu.event_query(pool->probe_ev);
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

                rc = prof_cu.event_elapsed(&ms, pool->ref_ev, pool->probe_ev);
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

        rc = prof_cu.event_record(pool->probe_ev, pool->ref_stream);
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

    rc = prof_cu.ctx_push(pool->ctx);
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
        prof_cu.ctx_pop(&popped);
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
        rc = prof_cu.event_query(p->end);
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
            rc = prof_cu.event_elapsed(&dur_ms, p->start, p->end);
            if (rc == CU_SUCCESS)
                rc = prof_cu.event_elapsed(&off_ms, pool->ref_ev, p->end);
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
            prof_cuda_count_lost(1);
            lost_sink(lost_ctx, p->name, PROF_CUDA_LOST_QUERY);
            p->next = NULL;
            prof_cuda_pool_forget(pool, p, 1, 1);
        }
    }
    pool->pend_tail = link;
    while (*pool->pend_tail != NULL)
        pool->pend_tail = &(*pool->pend_tail)->next;
    prof_cu.ctx_pop(&popped);

    if (pool->done != NULL) {
        /* Give the pairs back, one lock for the whole poll. Their events
         * completed, so they can be recorded again right away. */
        struct cuda_pair *last = pool->done;

        while (last->next != NULL)
            last = last->next;
        pthread_mutex_lock(&pool->lock);
        last->next = pool->free;
        pool->free = pool->done;
        pool->nfree += ndone;
        pthread_mutex_unlock(&pool->lock);
        pool->done = NULL;
    }
}

void prof_cuda_poll(prof_gpu_sink sink, prof_gpu_lost_sink lost, void *ctx)
{
    /* Acquire: pools[0..n) were published before npools. */
    unsigned n = __atomic_load_n(&prof_cuda_npools, __ATOMIC_ACQUIRE), i;
    uint64_t now;

    lost_sink = lost;
    lost_ctx = ctx;
    if (n == 0 || npending == 0 || driver_gone)
        return;
    now = prof_clock_now_ns();
    for (i = 0; i < n && !driver_gone; i++) {
        struct cuda_pool *pool = prof_cuda_pools[i];

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

int prof_cuda_waiting(void)
{
    return npending > 0 && !driver_gone;
}

size_t prof_cuda_abandon(void)
{
    unsigned n = __atomic_load_n(&prof_cuda_npools, __ATOMIC_ACQUIRE), i;
    size_t left = npending;

    /* Let the rest go. Their events may still complete on the GPU; the
     * driver frees them then. */
    for (i = 0; i < n && left > 0; i++) {
        struct cuda_pool *pool = prof_cuda_pools[i];
        CUcontext popped;
        int cur;

        if (pool->npend == 0)
            continue;
        cur = !driver_gone && prof_cu.ctx_push(pool->ctx) == CU_SUCCESS;
        prof_cuda_pool_forget(pool, pool->pend_head, (unsigned)pool->npend, cur);
        if (cur)
            prof_cu.ctx_pop(&popped);
        pool->pend_head = NULL;
        pool->pend_tail = &pool->pend_head;
        pool->npend = 0;
    }
    npending = 0;
    return left;
}

void prof_cuda_poll_atfork_child(void)
{
    npending = 0;
    driver_gone = 0;
}
