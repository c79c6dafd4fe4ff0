/* registry.h - one state per instrumented thread: its ring, its open-zone
 * stack, and the collector's per-thread bookkeeping. */
#ifndef PROF_REGISTRY_H
#define PROF_REGISTRY_H

#include <stdint.h>

#include "prof.h"

struct prof_thread {
    struct prof_thread_ hot;     /* first: prof.h's fast path sees only this */
    uint32_t tid;                /* kernel thread id */
    uint32_t index;              /* order of attachment: trace sort index */
    const char *name;            /* interned; set by prof_thread_name (atomic) */
    int exited;                  /* set (release) by the thread's destructor */
    struct prof_thread *next;    /* registry list; guarded by the runtime lock */
    /* Collector-private from here on. */
    /* Zones ended at each depth since their parent last ended: their total
     * time and the span [first start, last end] in ticks. */
    uint64_t child_ns[PROF_MAX_DEPTH_ + 2];
    uint64_t child_first[PROF_MAX_DEPTH_ + 2];
    uint64_t child_last[PROF_MAX_DEPTH_ + 2];
    uint64_t dropped_seen;
    uint64_t reentered_seen;
    const char *traced_name;     /* the name last written to the trace */
    /* The trace's placement of this thread's zones (trace.c): the latest
     * end written, and per depth, for the zones written since their parent
     * ended, the earliest start and what that start could not precede.
     * 0 = none. */
    uint64_t trace_end;
    uint64_t trace_first[PROF_MAX_DEPTH_ + 1];
    uint64_t trace_floor[PROF_MAX_DEPTH_ + 1];
    uint32_t trace_depth;        /* deepest depth with a trace_first */
};

/* Every attached thread, newest first. Walk and modify only under the
 * runtime lock (runtime.h). */
extern struct prof_thread *prof_threads;

/* Number of threads that ever attached, and that are attached now. */
extern uint64_t prof_threads_seen;

/* Name the calling thread (an interned string); a thread that has not
 * attached yet gets the name when it does. */
int prof_thread_set_name(const char *interned);

/* Free a thread's state (the collector, after its last drain). */
void prof_thread_free(struct prof_thread *t);

/* In a forked child: every other thread is gone, and the calling thread's
 * ring still holds the parent's records. Keep only the caller, emptied. */
void prof_registry_atfork_child(void);

#endif
