/* selftime.h - a zone's self time (selftime.c). Collector side, runtime
 * lock held. Per thread, records come in the order their zones ended, so
 * a zone's children (which end first) have been seen when it arrives. */
#ifndef PROF_SELFTIME_H
#define PROF_SELFTIME_H

#include <errno.h>
#include <stdint.h>

#include "registry.h"
#include "side.h"

/* Per depth, the zones that ended since the last zone one level up (its
 * children, if they lie inside it): their total and span, and the same for
 * the ones that ended before the last loss of records (a GAP record),
 * whose parent may have been lost. */
struct prof_children {
    uint64_t ns, first, last;
    uint64_t before_ns, before_first, before_last;
    /* On-CPU samples (sampler.c) taken at this depth since its last zone
     * ended: their CPU time, and the ticks of the first of them. */
    uint64_t cpu_ns, cpu_first;
    /* The rises of the process's peak resident memory those samples
     * claimed (PROF_RECORD_PEAK_), in bytes. */
    uint64_t peak_bytes;
};

/* A thread's own sums: this file's side state of its slot
 * (side[PROF_SIDE_SELF]), made on its first drain, freed when it is gone
 * and, for every thread but the caller, in a forked child. */
struct prof_self_thread {
    struct prof_side side;                   /* every thread's (side.h) */
    /* Per depth, the zones ended since their parent last ended. Grown to
     * the deepest depth seen (mapped); cap: the depths it has room for. */
    struct prof_children *child;
    uint32_t cap;
};

/* t's sums, made on the first call: the drain asks once per pass over t,
 * and hands the answer to every call below. Out of memory: a state that
 * refuses every zone (-ENOMEM), until a later pass makes one. */
struct prof_self_thread *prof_self_thread(struct prof_thread *t);

/* Room in st->child for depths [0, d + 1] (out of line: rarely needed). 0
 * or -ENOMEM. */
int prof_self_grow_(struct prof_self_thread *st, uint32_t d);

/* A zone of the thread whose sums are st, at depth d, [start, end] in
 * ticks, dur ns long: *self_ns is dur minus what its children at depth
 * d + 1 added up to since the last zone at depth d, when they lie inside
 * it. 0, or -ENOMEM (the zone is not counted).
 *
 * Inline: the drain runs it for every zone, and out of line the call (its
 * arguments, the result through memory) cost as much as the work, 60
 * instructions a record against d03103e's inline 25 (docs/BENCHMARKS.md).
 *
 * Within a thread zones nest, so the zones that ended at depth d + 1 since
 * the last zone at depth d are its children. Code that ends zones out of
 * order (Python generators and asyncio tasks) can leave a zone at depth
 * d + 1 ending after its parent; such time is not subtracted from the next
 * zone at depth d, because it does not lie inside it. Nor are the children
 * seen before a loss of records if they do not lie inside it: their parent
 * was lost (dropped with a full ring), and without the GAP record that
 * separates them the zone's own children would go unsubtracted too. */
static inline int prof_self_zone(struct prof_self_thread *st, uint32_t d, uint64_t start,
                                 uint64_t end, uint64_t dur, uint64_t *self_ns)
{
    struct prof_children *c, *in;
    uint64_t children = 0;

    if (__builtin_expect(d + 2 > st->cap, 0) && prof_self_grow_(st, d) != 0)
        return -ENOMEM;
    c = &st->child[d];
    in = c + 1;
    if (in->last != 0 && in->first >= start && in->last <= end)
        children += in->ns;
    /* Nothing before a loss: the common case skips the second span. */
    if (__builtin_expect(in->before_last != 0, 0)) {
        if (in->before_first >= start && in->before_last <= end)
            children += in->before_ns;
        in->before_ns = 0;
        in->before_last = 0;
    }
    in->ns = 0;
    in->last = 0;    /* empty: no zone ends at tick 0 */
    if (c->last == 0 || start < c->first)
        c->first = start;
    if (end > c->last)
        c->last = end;
    c->ns += dur;
    *self_ns = children < dur ? dur - children : 0;
    return 0;
}

/* The same for a zone of a lane (an asyncio task's track on t), whose
 * children are the lane's own. */
int prof_self_lane_zone(struct prof_thread *t, uint32_t lane, uint32_t d, uint64_t start,
                        uint64_t end, uint64_t dur, uint64_t *self_ns);

/* An on-CPU sample of st's thread (sampler.c): cpu_ns of CPU time, taken at ticks
 * while the innermost open zone was at depth d. It waits at that depth for
 * the zone's record (prof_self_cpu_take). 0 or -ENOMEM. */
int prof_self_cpu_sample(struct prof_self_thread *st, uint32_t d, uint64_t ticks,
                         uint64_t cpu_ns);

/* A rise of the process's peak resident memory, bytes, claimed by the
 * sample of st's thread just before it (same depth d): it waits with that sample's
 * CPU time for the zone's record. 0 or -ENOMEM. */
int prof_self_peak_sample(struct prof_self_thread *st, uint32_t d, uint64_t bytes);

/* The CPU time sampled in the zone of st's thread at depth d that began at start and
 * whose record is being taken: the samples waiting at its depth, all taken
 * after it began (older ones belonged to a zone whose record was lost, and
 * are forgotten). Cheap when there are none. The peak rises those samples
 * claimed are added to *peak_bytes (a rise always comes with a sample, so
 * a zone without samples has none). */
static inline uint64_t prof_self_cpu_take(struct prof_self_thread *st, uint32_t d,
                                          uint64_t start, uint64_t *peak_bytes)
{
    struct prof_children *c;
    uint64_t ns, peak;

    if (d >= st->cap || (c = &st->child[d])->cpu_ns == 0)
        return 0;
    ns = c->cpu_ns;
    peak = c->peak_bytes;
    c->cpu_ns = 0;
    c->peak_bytes = 0;
    if (c->cpu_first < start)
        return 0;
    *peak_bytes += peak;
    return ns;
}

/* A GAP record (records lost): the children seen so far ended before the
 * loss, and count only toward a parent they lie inside. */
void prof_self_gap(struct prof_self_thread *st);

/* t has exited and is about to be freed: its sums and its lanes' go. */
void prof_self_thread_gone(struct prof_thread *t);

/* In a forked child: the other threads' sums go, the caller's are
 * emptied (they summed the parent's zones). */
void prof_self_atfork_child(void);

#endif
