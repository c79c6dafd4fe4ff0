/* ring.h - the consumer side of a thread's ring, and its geometry.
 *
 * The producer side is in prof.h (prof_ring_push_, inline on the hot path,
 * and prof_ring_room_ in zone.c): the owning thread writes a record at
 * head and publishes it by storing head + 1 with release. The consumer
 * (the collector's drain, under the runtime lock; one consumer per ring at
 * a time) works in three steps:
 *
 *     uint64_t tail, head = prof_ring_read(t, &tail);
 *     for (; tail != head; tail++)
 *         use(prof_ring_record(t, tail));
 *     prof_ring_release(t, tail);
 *
 * Indices run free and are masked on access (capacity is a power of two),
 * so the fill level is head - tail and never wraps in practice. Records in
 * [tail, head) stay valid until they are released: the owner reuses a slot
 * only after it has seen, with acquire, a tail past it. */
#ifndef PROF_RING_H
#define PROF_RING_H

#include <stdint.h>

#include "prof.h"

/* Give t the ring `records` of `capacity` slots (a power of two, at least
 * 2) before anyone pushes or reads. Not thread-safe: the state is not yet
 * published. */
static inline void prof_ring_init(struct prof_thread_ *t, prof_record_ *records, uint64_t capacity)
{
    t->ring = records;
    t->mask = capacity - 1;
    /* Past this fill (as the producer last saw it) a push goes out of line
     * to look at tail again and wake the consumer. */
    t->half = capacity / 2 - 1;
}

/* Consumer only. The records published and not yet released are
 * [*tail, return value); *tail is where the last release left it. */
static inline uint64_t prof_ring_read(const struct prof_thread_ *t, uint64_t *tail)
{
    /* Only the consumer writes tail: its own last store, read plainly. */
    *tail = t->tail;
    /* Acquire, pairing with the release of head in prof_ring_push_: every
     * field of every record below head is visible from here on. */
    return __atomic_load_n(&t->head, __ATOMIC_ACQUIRE);
}

/* Consumer only. The record at free-running index i, in [tail, head) as
 * prof_ring_read gave them. */
static inline const prof_record_ *prof_ring_record(const struct prof_thread_ *t, uint64_t i)
{
    return &t->ring[i & t->mask];
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
