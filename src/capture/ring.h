/* ring.h - the consumer side of a thread's ring, and its geometry.
 *
 * The producer side is in prof_impl.h (prof_ring_push_, inline on the hot path,
 * and prof_ring_room_ in ring_room.c): the owning thread writes a record at
 * head and publishes it by storing head + 1 with release. The consumer
 * (the collector's drain, under the runtime lock; one consumer per ring at
 * a time) works in three steps:
 *
 *     struct prof_ring_reader rd;
 *     const prof_record_ *r;
 *     prof_ring_read(t, &rd);
 *     while ((r = prof_ring_next(&rd)) != NULL)
 *         use(r);
 *     prof_ring_release(t, rd.tail);
 *
 * Indices run free and are masked on access (capacity is a power of two),
 * so the fill level is head - tail and never wraps in practice. Records in
 * [tail, head) stay valid until they are released: the owner reuses a slot
 * only after it has seen, with acquire, a tail past it.
 *
 * Warm and cold slots. A ring is large (PROF_BUFFER, 128k records by
 * default: 4 MB of address space), so that it holds what a thread records
 * at 1 M zones/s while the collector is kept off the CPU for 100 ms (a
 * busy machine: every core taken by data loader workers), and at 10 M/s
 * for several milliseconds. Only its first `warm` slots (32k, 1 MB, unless
 * the user set PROF_BUFFER: then all of them) are populated when the
 * thread attaches. A slow thread stays in them: reaching their end with at
 * most half of them unread, having taken PROF_RING_WARM_LAP_NS or longer
 * to fill them, it writes a SKIP record and moves head to the start of the
 * next lap. The slots its unread records hold are pinned until the
 * collector passes the SKIP, so a stall then has half of the warm slots at
 * worst: 16k records, 100 ms at 164k records/s. A thread faster than that
 * (or one that finds more than half of them unread) runs through the cold
 * slots too, so that a stall finds all of the ring free but what the
 * collector has not read yet (it wakes at least every 20 ms): its resident
 * ring grows to 4 MB as it touches the cold slots, and shrinks back to
 * use (not to residence) only when it slows down. (A fast thread in the
 * cold slots costs up to 2 ns a zone in `prof-bench zone` on some
 * machines: 4 MB of records fall out of caches that 1 MB stays in;
 * docs/BENCHMARKS.md has the figures.) The skipped slots count as filled
 * until the consumer passes the SKIP record; the owner checks room
 * against the same free-running indices, so nothing it overwrites is
 * unread. */
#ifndef PROF_RING_H
#define PROF_RING_H

#include <stdint.h>
#include <time.h>

#include "prof.h"

/* A thread keeps to its warm slots only while it takes 200 ms or more to
 * fill them (164k records/s or less with 32k warm slots): then the half of
 * them a stall may find free holds 100 ms of its records. */
#define PROF_RING_WARM_LAP_NS 200000000u

/* Give t the ring `records` of `capacity` slots (a power of two, at least
 * 16) of which the first `warm` (at most capacity) are used alone while the
 * consumer keeps up, before anyone pushes or reads. Not thread-safe: the
 * state is not yet published. */
static inline void prof_ring_init(struct prof_thread_ *t, prof_record_ *records, uint64_t capacity,
                                  uint64_t warm)
{
    t->ring = records;
    t->mask = capacity - 1;
    t->warm = warm < capacity ? warm : capacity;
    t->warm_lap_ns = PROF_RING_WARM_LAP_NS;
    t->wake_fill = t->warm / 2;
    /* Laps are timed from now. */
    {
        struct timespec ts;
        if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) == 0)
            t->lap_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    }
    /* The owner looks at tail every quarter of the warm slots: often
     * enough to wake the consumer at half of them and to wrap at their
     * end. */
    t->check = t->warm / 4 - 1;
    t->check_base = t->head;
}

/* The owner's ring is empty as far as it knows (a new thread, a forked
 * child): its next push looks at tail and the warm boundary afresh. */
static inline void prof_ring_look_again(struct prof_thread_ *t)
{
    t->check_base = t->head - t->check - 1;
    t->woke_fill = 0;
}

/* The consumer's view of a ring for one drain. The geometry is copied out
 * of the thread state because the owner writes head, on the same cache
 * line, at every push: a drain that read ring and mask from there at every
 * record took a cache miss per record (100 ns each with the owner on
 * another core, a tenth of the 10 M zones/s a thread may produce). */
struct prof_ring_reader {
    const prof_record_ *ring;
    uint64_t mask;
    uint64_t tail;                 /* where the last release left it */
    uint64_t head;                 /* published: [tail, head) may be read */
};

/* Consumer only. */
static inline void prof_ring_read(const struct prof_thread_ *t, struct prof_ring_reader *rd)
{
    rd->ring = t->ring;
    rd->mask = t->mask;
    /* Only the consumer writes tail: its own last store, read plainly. */
    rd->tail = t->tail;
    /* Acquire, pairing with the release of head in prof_ring_push_: every
     * field of every record below head is visible from here on. */
    rd->head = __atomic_load_n(&t->head, __ATOMIC_ACQUIRE);
}

/* Consumer only. The next record, or NULL when all published ones are
 * read; rd->tail moves past it, and past the slots the owner skipped. The
 * record stays valid until prof_ring_release. */
static inline const prof_record_ *prof_ring_next(struct prof_ring_reader *rd)
{
    while (rd->tail != rd->head) {
        const prof_record_ *r = &rd->ring[rd->tail & rd->mask];

        if (r->kind != PROF_RECORD_SKIP_) {
            rd->tail++;
            return r;
        }
        rd->tail += r->end;
    }
    return NULL;
}

/* Consumer only. Give back every slot below tail (at most the head that
 * prof_ring_read returned); the owner may overwrite them from then on. */
static inline void prof_ring_release(struct prof_thread_ *t, uint64_t tail)
{
    /* Release, pairing with the acquire of tail in prof_ring_room_: the
     * reads of these slots are done before the owner can see them free. */
    __atomic_store_n(&t->tail, tail, __ATOMIC_RELEASE);
}

/* Records the owner dropped because the ring was full, since the ring was
 * set up (the owner counts them; any thread may read). Relaxed: a count,
 * ordered with nothing; a drop counted after the read shows next time. */
static inline uint64_t prof_ring_dropped(const struct prof_thread_ *t)
{
    return __atomic_load_n(&t->dropped, __ATOMIC_RELAXED);
}

#endif
