/* trace_track.h - the trace's tracks (trace_track.c): its own state of each
 * thread, the thread's track (a tid of its own when the kernel's was
 * another thread's), an asyncio task's lane track, a GPU stream's track,
 * each named in the file before its first event. The runtime lock is held
 * for all of it. */
#ifndef PROF_TRACE_TRACK_H
#define PROF_TRACE_TRACK_H

#include <stdint.h>

#include "registry.h"
#include "sink.h"

struct trace_lane;

/* The trace's own state of a thread (sink.h), in the slot's side pointer,
 * and on a list of the trace's: a forked child frees the parent's other
 * threads without telling the sinks (prof_trace_forget_parent). */
struct trace_thread {
    struct prof_thread *thread;
    struct trace_thread *next;
    const char *named;           /* the name last written to the trace */
    /* Placement (prof_trace_place): the latest end written and the start
     * of the zone that ended there, and per depth, for the zones written
     * since their parent ended, the earliest start and what that start
     * could not precede. 0 = none. */
    uint64_t end, end_start;
    uint64_t first[PROF_MAX_DEPTH_ + 1];
    uint64_t floor[PROF_MAX_DEPTH_ + 1];
    uint32_t depth;              /* deepest depth with a first */
    struct trace_lane *lanes;    /* per lane of the thread seen: its track */
    uint32_t nlanes;
    uint32_t track;              /* the thread's own track (thread_track) */
    /* The on-CPU counter (prof_trace_cpu_sample): the CPU time sampled
     * since cpu_from_ns, where its next point goes. */
    uint64_t cpu_from_ns, cpu_sum_ns, cpu_last_ns;
};

/* t's state made and listed; NULL when out of memory. */
struct trace_thread *prof_trace_thread_new(struct prof_thread *t);
/* Its state unlisted and freed (the thread is gone). */
void prof_trace_thread_free(struct prof_thread *t, struct trace_thread *tt);
/* Every thread's state freed, and the tids seen forgotten: a forked
 * child's trace is its own. */
void prof_trace_threads_forget(void);
/* The slow sides of thread_track() and thread_meta() below. */
uint32_t prof_trace_thread_track_new(const struct prof_thread *t, struct trace_thread *tt);
void prof_trace_thread_meta_write(struct prof_thread *t, struct trace_thread *tt,
                                  const char *name);
/* Lane `lane` of t's track, named once per trace file. */
uint32_t prof_trace_lane_track(struct prof_thread *t, struct trace_thread *tt, uint32_t lane);
/* A GPU stream's track, named on its first event in a trace file. */
uint32_t prof_trace_gpu_track(int device, uint64_t stream);
/* A new trace file: its GPU tracks are named anew. */
void prof_trace_gpu_tracks_reset(void);

/* NULL when out of memory: the thread's events are left out. */
static inline struct trace_thread *tthread(struct prof_thread *t)
{
    struct trace_thread *tt = t->side[PROF_SIDE_TRACE];

    return tt != NULL ? tt : prof_trace_thread_new(t);
}

static inline uint32_t thread_track(const struct prof_thread *t, struct trace_thread *tt)
{
    return tt->track != 0 ? tt->track : prof_trace_thread_track_new(t, tt);
}

/* t's name and sort order, before its first event and when its name
 * changes (a thread that never names itself gets one by its index). */
static inline void thread_meta(struct prof_thread *t, struct trace_thread *tt)
{
    const char *name = __atomic_load_n(&t->name, __ATOMIC_RELAXED);

    if (tt->named == NULL || (name != NULL && name != tt->named))
        prof_trace_thread_meta_write(t, tt, name);
}

#endif
