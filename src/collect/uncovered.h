/* uncovered.h - the time no zone of a thread covers: the stage
 * "(no stage)". Collector side, runtime lock held.
 *
 * Per thread, the zones at depth 0 of its own track come in the order
 * they ended, which is also the order they began (they do not overlap),
 * so the time between one's end and the next one's start is the thread's
 * time outside every stage. Only a thread that has called prof_step()
 * counts: its time between stages is time its steps lost, where a worker's
 * idle time between tasks is not (docs/ARCHITECTURE.md). A step taken
 * outside every zone cuts that time there, so that a step window holds its
 * own share of it. The drain (drain.c's take_uncovered) hands each span of
 * at least PROF_UNCOVERED_SLICE_NS to every sink as a zone of the stage
 * "(no stage)" at depth 0 on the thread's track (the trace draws it); the
 * shorter ones are summed per thread and given to the statistics as one
 * zone per drain of the thread and at its steps, so that a thread of
 * back-to-back zones neither doubles its trace nor adds a stage update to
 * every record. */
#ifndef PROF_UNCOVERED_H
#define PROF_UNCOVERED_H

#include <stdint.h>

/* The stage's name; the cross-rank straggler line says "outside stages". */
extern const char prof_no_stage[];

#define PROF_UNCOVERED_SLICE_NS 10000ull

/* A thread's time outside every zone, kept by the drain (drain.c's side
 * state of the thread, zeroed when made): the latest end of its zones at
 * depth 0 in ticks (0: none yet), the short spans not yet counted
 * (ticks), and whether it has stepped (only then is that time counted). */
struct prof_uncovered {
    uint64_t top_end, uncov_short;
    uint32_t steps;
};

/* A zone at depth 0 of the thread's own track, [start, end] in ticks:
 * the start (in ticks) of the uncovered span that ends at its start, or 0
 * (none, or the thread does not step). One compare and store for a
 * thread that does not step. */
static inline uint64_t prof_uncovered_zone(struct prof_uncovered *u, uint64_t start, uint64_t end)
{
    uint64_t from = u->top_end;

    if (end > from)
        u->top_end = end;
    return u->steps && from != 0 && start > from ? from : 0;
}

/* A step record of the thread at tick `at`, taken with depth zones open:
 * it steps from now on. Outside every zone, the span since the last zone
 * ends at the step and the next one starts there: its start is returned
 * (0: none). */
static inline uint64_t prof_uncovered_step(struct prof_uncovered *u, uint64_t at, uint32_t depth)
{
    uint64_t from = u->top_end;

    u->steps = 1;
    if (depth != 0 || at <= from)
        return 0;
    u->top_end = at;
    return from;
}

#endif
