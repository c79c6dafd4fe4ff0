/* selftime.h - a zone's self time (selftime.c). Collector side, runtime
 * lock held. Per thread, records come in the order their zones ended, so
 * a zone's children (which end first) have been seen when it arrives. */
#ifndef PROF_SELFTIME_H
#define PROF_SELFTIME_H

#include <stdint.h>

struct prof_thread;

/* A zone of thread t at depth d, [start, end] in ticks, dur ns long:
 * *self_ns is dur minus what its children at depth d + 1 added up to since
 * the last zone at depth d, when they lie inside it. 0, or -ENOMEM (the
 * zone is not counted). */
int prof_self_zone(struct prof_thread *t, uint32_t d, uint64_t start, uint64_t end,
                   uint64_t dur, uint64_t *self_ns);

/* The same for a zone of a lane (an asyncio task's track on t), whose
 * children are the lane's own. */
int prof_self_lane_zone(struct prof_thread *t, uint32_t lane, uint32_t d, uint64_t start,
                        uint64_t end, uint64_t dur, uint64_t *self_ns);

/* A GAP record (records lost): the children seen so far ended before the
 * loss, and count only toward a parent they lie inside. */
void prof_self_gap(struct prof_thread *t);

/* t has exited and is about to be freed: its lanes' sums go. */
void prof_self_thread_gone(const struct prof_thread *t);

#endif
