/* selftime.c - a zone's self time: its duration minus the time of the
 * zones it enclosed. Collector side, runtime lock held. The per-depth sums
 * of a thread (struct prof_thread's child[], kept with the slot) and of
 * each lane (an asyncio task) are this file's alone. */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "map.h"
#include "registry.h"
#include "selftime.h"

/* A GAP record: the children seen so far at every depth ended before the
 * loss. (Two losses with no parent between them merge into one span.) */
void prof_self_gap(struct prof_thread *t)
{
    for (uint32_t d = 0; d < t->child_cap; d++) {
        struct prof_children *c = &t->child[d];

        if (c->last == 0)
            continue;
        if (c->before_last == 0 || c->first < c->before_first)
            c->before_first = c->first;
        if (c->last > c->before_last)
            c->before_last = c->last;
        c->before_ns += c->ns;
        c->ns = 0;
        c->last = 0;
    }
}

/* Room for depths [0, d + 1]: the per-depth sums grow with the deepest
 * zone seen (at most PROF_DEPTH_LIMIT_ levels), never with the run. */
int prof_self_grow_(struct prof_thread *t, uint32_t d)
{
    size_t old = (size_t)t->child_cap * sizeof *t->child, bytes = old ? old : 4096;
    void *c;

    while (bytes < (d + 2) * sizeof *t->child)
        bytes *= 2;
    /* Mapped, like the thread state that points to it (so that leak
     * checkers, which do not look inside mappings, never see a heap block
     * whose only pointer they cannot find); new pages come zeroed. */
    c = old ? mremap(t->child, old, bytes, MREMAP_MAYMOVE)
            : mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (c == MAP_FAILED)
        return -ENOMEM;
    t->child = c;
    t->child_cap = (uint32_t)(bytes / sizeof *t->child);
    return 0;
}

int prof_self_cpu_sample(struct prof_thread *t, uint32_t d, uint64_t ticks, uint64_t cpu_ns)
{
    struct prof_children *c;

    if (d + 2 > t->child_cap && prof_self_grow_(t, d) != 0)
        return -ENOMEM;
    c = &t->child[d];
    if (c->cpu_ns == 0)
        c->cpu_first = ticks;
    c->cpu_ns += cpu_ns;
    return 0;
}

int prof_self_peak_sample(struct prof_thread *t, uint32_t d, uint64_t bytes)
{
    if (d + 2 > t->child_cap && prof_self_grow_(t, d) != 0)
        return -ENOMEM;
    t->child[d].peak_bytes += bytes;
    return 0;
}

/* A zone of a lane (an asyncio task, registry.h): its children are the
 * lane's zones one level down, not those of other tasks that ran on the
 * thread meanwhile, so each lane keeps its own per-depth sums, found by
 * (thread, lane, depth). Bounded: lanes are reused, depths are the
 * task's. */
static struct prof_map lane_children;
static size_t lane_live;   /* values in lane_children (the map cannot delete) */

static struct prof_children *lane_child(const struct prof_thread *t, uint32_t lane, uint32_t d)
{
    uint64_t key = ((uint64_t)(t->index + 1) << 32) | (uint64_t)lane << 16 | (d & 0xffff);
    struct prof_children *c = prof_map_get(&lane_children, key);

    if (c == NULL) {
        if ((c = calloc(1, sizeof *c)) == NULL)
            return NULL;
        if (prof_map_put(&lane_children, key, c) != 0) {
            free(c);
            return NULL;
        }
        lane_live++;
    }
    return c;
}

int prof_self_lane_zone(struct prof_thread *t, uint32_t lane, uint32_t d, uint64_t start,
                        uint64_t end, uint64_t dur, uint64_t *self_ns)
{
    struct prof_children *c = lane_child(t, lane, d), *in = lane_child(t, lane, d + 1);
    uint64_t children = 0;

    if (c == NULL || in == NULL)
        return -ENOMEM;
    if (in->last != 0 && in->first >= start && in->last <= end)
        children = in->ns;
    in->ns = 0;
    in->last = 0;
    if (c->last == 0 || start < c->first)
        c->first = start;
    if (end > c->last)
        c->last = end;
    c->ns += dur;
    *self_ns = children < dur ? dur - children : 0;
    return 0;
}

/* A thread's lanes go with it. */
void prof_self_thread_gone(const struct prof_thread *t)
{
    for (size_t i = 0; i < lane_children.cap; i++) {
        if (lane_children.slots[i].key == 0 ||
            lane_children.slots[i].key >> 32 != (uint64_t)t->index + 1)
            continue;
        if (lane_children.slots[i].value != NULL)
            lane_live--;
        free(lane_children.slots[i].value);
        lane_children.slots[i].value = NULL;
    }
    if (lane_live == 0)
        prof_map_clear(&lane_children);
}
