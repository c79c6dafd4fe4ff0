/* ring_room.c - the producer's slow path of a thread's ring: what
 * prof_ring_push_ (prof_impl.h) calls every few thousand pushes, and at every
 * push while the ring is full. It wakes the collector, wraps early to keep
 * to the warm slots, and drops and counts a record that finds no room. The
 * ring's layout (warm and cold slots) and its consumer side are in ring.h. */
#include <time.h>

#include "prof.h"
#include "ring.h"
#include "wake.h"

/* Whether a thread reaching the end of its warm slots with the collector
 * keeping up may wrap early and stay in them: only if it took warm_lap_ns
 * (ring.h) or longer to fill them, or as long for as many records since it
 * last looked. After an early wrap a stall of the collector has only the
 * warm slots the unread records leave (half of them, at worst), so a
 * faster thread runs through all the slots before any stall, not only
 * after the first one has cost it records. Called at every look past the
 * warm slots, so that the time is always recent. The coarse clock (a few
 * ms resolution, no system call) is enough to tell a 200 ms lap. */
static int slow_enough_to_wrap(struct prof_thread_ *t, uint64_t head)
{
    struct timespec ts;
    uint64_t now, records = head - t->lap_head, elapsed;

    /* Judged over a warm lap's worth of records at least: over the
     * quarter lap between two looks, a thread that was itself kept off
     * the CPU for 50 ms looked slow at 1 M/s, wrapped early, and lost
     * records to the next stall of the collector. */
    if (records < t->warm)
        return 0;
    if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0)
        return 0;
    now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    elapsed = now - t->lap_ns;
    t->lap_head = head;
    t->lap_ns = now;
    /* records / elapsed <= warm / warm_lap_ns, without a division by 0
     * (in double: an hour in ns times 32k would overflow 64 bits). */
    return (double)records * (double)t->warm_lap_ns <= (double)elapsed * (double)t->warm;
}

/* The out-of-line half of prof_ring_push_ (prof_impl.h); the ring's layout,
 * warm and cold slots, is in ring.h. Returns 0 when the ring is full (the
 * record is dropped and counted); otherwise the push goes on at t->head,
 * which has moved if the ring wrapped early. */
PROF_API int prof_ring_room_(struct prof_thread_ *t, uint64_t head)
{
    /* Acquire: the collector finished reading the slots it gave back. */
    uint64_t tail = __atomic_load_n(&t->tail, __ATOMIC_ACQUIRE);
    uint64_t fill = head - tail, pos = head & t->mask, step = t->check + 1, next;
    /* The records waiting, without the slots of a SKIP the collector has
     * not reached (they hold nothing to drain; at most one is pending:
     * the next early wrap is a warm lap after it). */
    uint64_t backlog = tail < t->skip_end ? fill - t->skip_len : fill;

    /* Wake the collector once per crossing of the mark, and again if the
     * ring has gained another half of the warm slots since: the
     * collector drains what was there when it looked, then sleeps, so it
     * may sleep with the ring still above the mark. (Waking it again at
     * every look that finds it has drained some drops far more at 10 M
     * zones/s: a collector woken that often runs late.) */
    if (backlog <= t->wake_fill) {
        t->woke_fill = 0;
    } else if (t->woke_fill == 0 || backlog >= t->woke_fill + 2 * step) {
        t->woke_fill = backlog;
        prof_wake_collector();
    }
    /* Full: look again at the next push. The first push after a loss
     * needs a second slot, for the GAP record that marks where the loss
     * was: the collector pairs no zone with children across it. */
    if (fill > t->mask || (t->dropped != t->gap_dropped && fill + 1 > t->mask)) {
        t->check_base = head - step;
        __atomic_store_n(&t->dropped, t->dropped + 1, __ATOMIC_RELAXED);
        return 0;
    }
    if (t->dropped != t->gap_dropped) {
        prof_record_ *r = &t->ring[pos];

        r->start = 0;
        r->end = t->dropped;
        r->name = NULL;
        r->parent = 0;
        r->depth = 0;
        r->kind = PROF_RECORD_GAP_;
        t->gap_dropped = t->dropped;
        head++;
        fill++;
        pos = head & t->mask;
        __atomic_store_n(&t->head, head, __ATOMIC_RELEASE);
    }
    if (pos < t->warm) {
        /* In the warm slots, whatever the lap. */
    } else if (fill > t->warm / 2 || !slow_enough_to_wrap(t, head)) {
        /* A lap through all the slots: the collector fell behind, or the
         * thread records too fast for a warm lap to ride out a stall of
         * the collector (ring.h). The collector is woken only at half of
         * them. (Waking it at every quarter of the warm slots instead
         * dropped records at 10 M zones/s on a 2-vCPU VM, where waking it
         * at half of a 128k ring dropped none.) */
        t->wake_fill = (t->mask + 1) / 2;
    } else {
        /* Back to the warm slots. The skipped ones are free (fill <= pos),
         * and the SKIP record and the new head are published together. */
        prof_record_ *r = &t->ring[pos];
        uint64_t skip = t->mask + 1 - pos;

        r->start = 0;
        r->end = skip;
        r->name = NULL;
        r->parent = 0;
        r->depth = 0;
        r->kind = PROF_RECORD_SKIP_;
        head += skip;
        fill += skip;
        pos = 0;
        t->skip_end = head;
        t->skip_len = skip - 1;
        __atomic_store_n(&t->head, head, __ATOMIC_RELEASE);
        t->lap_head = head;
        t->wake_fill = t->warm / 2;
    }
    /* Look again after a quarter of the warm slots, at their end, and
     * before the ring can be full: no push in between can overwrite. */
    next = t->mask + 1 - fill;
    if (next > step)
        next = step;
    if (pos < t->warm && t->warm - pos < next)
        next = t->warm - pos;
    t->check_base = head + next - step;
    return 1;
}
