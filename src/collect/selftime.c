/* selftime.c - a zone's self time: its duration minus the time of the
 * zones it enclosed. Collector side, runtime lock held. The per-depth sums
 * of a thread (its slot's side[PROF_SIDE_SELF]) and of each lane (an
 * asyncio task) are this file's alone. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "map.h"
#include "registry.h"
#include "selftime.h"
#include "sink.h"

_Static_assert(PROF_SIDES_THREAD_ <= PROF_THREAD_SIDES_, "a thread slot's side state");

/* Every thread's sums, newest first: what a forked child forgets, and
 * where leak checkers find them (the slot that points to them is a
 * mapping, which they do not read). */
static struct prof_sides self_threads = PROF_SIDES_INIT(PROF_SIDE_SELF, struct prof_self_thread);

/* The state of a thread there was no memory for: room for no depth, and
 * none to grow (prof_self_grow_ refuses it). */
static struct prof_self_thread no_memory;

struct prof_self_thread *prof_self_thread(struct prof_thread *t)
{
    struct prof_self_thread *st = prof_side_get(&self_threads, t);

    return st != NULL ? st : &no_memory;
}

static void self_thread_release(void *side)
{
    struct prof_self_thread *st = side;

    if (st->child != NULL)
        munmap(st->child, st->cap * sizeof *st->child);
}

/* A GAP record: the children seen so far at every depth ended before the
 * loss. (Two losses with no parent between them merge into one span.) */
void prof_self_gap(struct prof_self_thread *st)
{
    for (uint32_t d = 0; d < st->cap; d++) {
        struct prof_children *c = &st->child[d];

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
int prof_self_grow_(struct prof_self_thread *st, uint32_t d)
{
    size_t old = (size_t)st->cap * sizeof *st->child, bytes = old ? old : 4096;
    void *c;

    if (st == &no_memory)
        return -ENOMEM;
    while (bytes < (d + 2) * sizeof *st->child)
        bytes *= 2;
    /* Mapped: grown without a copy (mremap), new pages zeroed. */
    c = old ? mremap(st->child, old, bytes, MREMAP_MAYMOVE)
            : mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (c == MAP_FAILED)
        return -ENOMEM;
    st->child = c;
    st->cap = (uint32_t)(bytes / sizeof *st->child);
    return 0;
}

int prof_self_cpu_sample(struct prof_self_thread *st, uint32_t d, uint64_t ticks,
                         uint64_t cpu_ns)
{
    struct prof_children *c;

    if (d + 2 > st->cap && prof_self_grow_(st, d) != 0)
        return -ENOMEM;
    c = &st->child[d];
    if (c->cpu_ns == 0)
        c->cpu_first = ticks;
    c->cpu_ns += cpu_ns;
    return 0;
}

int prof_self_peak_sample(struct prof_self_thread *st, uint32_t d, uint64_t bytes)
{
    if (d + 2 > st->cap && prof_self_grow_(st, d) != 0)
        return -ENOMEM;
    st->child[d].peak_bytes += bytes;
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

/* A thread's sums and its lanes' go with it. */
void prof_self_thread_gone(struct prof_thread *t)
{
    struct prof_self_thread *st = prof_side_of(&self_threads, t);

    if (st != NULL) {
        self_thread_release(st);
        prof_side_free(&self_threads, st);
    }
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

void prof_self_atfork_child(void)
{
    const struct prof_thread *self = (const struct prof_thread *)prof_thread_self_;
    struct prof_self_thread *st = prof_side_atfork_child(&self_threads, self,
                                                         self_thread_release);

    if (st != NULL && st->child != NULL)
        memset(st->child, 0, st->cap * sizeof *st->child);
}
