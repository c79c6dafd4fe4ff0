/* registry.h - one state per instrumented thread: its ring, its open-zone
 * stack, and the collector's per-thread bookkeeping. */
#ifndef PROF_REGISTRY_H
#define PROF_REGISTRY_H

#include <stdint.h>

#include "prof.h"

/* Per depth, the zones that ended since the last zone one level up (its
 * children, if they lie inside it): their total and span, and the same for
 * the ones that ended before the last loss of records (a GAP record),
 * whose parent may have been lost (collector.c). */
struct prof_children {
    uint64_t ns, first, last;
    uint64_t before_ns, before_first, before_last;
};

struct prof_thread {
    struct prof_thread_ hot;     /* first: prof.h's fast path sees only this */
    uint32_t tid;                /* kernel thread id */
    uint32_t index;              /* order of attachment: trace sort index */
    const char *name;            /* interned; set by prof_thread_name (atomic) */
    int exited;                  /* set (release) by the thread's destructor */
    struct prof_thread *next;    /* registry list; guarded by the runtime lock */
    /* Collector-private from here on. */
    /* Per depth, the zones ended since their parent last ended: their
     * total time and the span [first start, last end] in ticks. Grown to
     * the deepest depth seen (mapped). */
    struct prof_children *child;
    uint32_t child_cap;
    uint64_t dropped_seen;
    uint64_t refused_seen;
    uint64_t loss_window;        /* the window it last lost records in (loss.c) */
    const char *traced_name;     /* the name last written to the trace */
    /* The trace's placement of this thread's zones (trace.c): the latest
     * end written, and per depth, for the zones written since their parent
     * ended, the earliest start and what that start could not precede.
     * 0 = none. */
    uint64_t trace_end;
    uint64_t trace_end_start;    /* the start of the zone that ended there */
    uint64_t trace_first[PROF_MAX_DEPTH_ + 1];
    uint64_t trace_floor[PROF_MAX_DEPTH_ + 1];
    uint32_t trace_depth;        /* deepest depth with a trace_first */
};

/* Every attached thread, newest first. Walk and modify only under the
 * runtime lock (runtime.h), after prof_registry_splice_locked(). */
extern struct prof_thread *prof_threads;

/* Move the threads that attached since the last call into prof_threads. */
void prof_registry_splice_locked(void);

/* Create the thread-exit key (runtime start, before any thread attaches). */
void prof_registry_init(void);

/* Install what a thread's first zone calls before it attaches: start()
 * returns 0 once the runtime and its collector run (starting them if need
 * be), else nonzero, and the zone is then not recorded (the next one tries
 * again). The API layer (lib.c) installs it before it first switches
 * recording on; until then no thread attaches. Any thread. */
void prof_registry_set_start(int (*start)(void));

/* A zone of owner's at this depth was ended on another thread: if owner
 * still lives and the zone still holds that level, tell owner the level is
 * free. Any thread; takes the runtime lock (trylock). */
void prof_registry_mark_foreign(struct prof_thread_ *owner, uint32_t depth, const char *name);

/* Records of a thread that has no ring to push them to: not recorded,
 * counted (atomic), like every record prof refuses. A zone (or counter,
 * mark, step) begun in a signal handler, or an instrumented allocator,
 * while its thread attaches (the first zone of a thread maps and
 * populates its ring, about a millisecond: a handler that fires every
 * 20 us lost some 70 zones there, uncounted, before this was counted);
 * after the thread's ring could not be mapped; in a thread-exit
 * destructor that ran after prof's own (the thread is gone from the
 * registry). */
extern uint64_t prof_records_unattached;

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
