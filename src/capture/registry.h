/* registry.h - one state per instrumented thread: its ring, its open-zone
 * stack, and pointers to the collector's own state of the thread. */
#ifndef PROF_REGISTRY_H
#define PROF_REGISTRY_H

#include <stdint.h>
#include <time.h>

#include "prof.h"

/* The nesting state a thread needs only off the fast path (zone.c), for
 * every level up to PROF_DEPTH_LIMIT_: mapped with the slot, untouched
 * (not resident) until a thread nests or ends zones out of order that
 * deep. */
#define PROF_LEVEL_WORDS_ ((PROF_DEPTH_LIMIT_ + 64) / 64)
struct prof_levels {
    uint64_t dead[PROF_LEVEL_WORDS_];     /* owner only: levels whose zone
                                             ended while zones inside it
                                             were still open */
    uint64_t foreign[PROF_LEVEL_WORDS_];  /* set by other threads (atomic
                                             or): levels whose zone they
                                             ended; the owner moves them to
                                             dead */
    uint32_t inner[PROF_DEPTH_LIMIT_ + 1];  /* path hash inside the zone
                                               at each level, where the
                                               names cannot give it */
};

/* A thread slot. Slots are never unmapped: a thread that exits gives its
 * ring back, and its slot goes to a free list with its generation
 * advanced, to be taken by a later thread. So a zone's `thread` pointer
 * always points at a slot, and its `gen` says whether the slot still holds
 * the thread that began it. Generations run from 1 to 0xffff (the 16 bits
 * a zone has room for) and never wrap: a slot whose last generation has
 * exited is retired, never handed out again (its page stays, its level
 * tables and ring go), so no zone of a past thread ever matches a live
 * one. That costs a page per 65,535 thread lifetimes. */
#define PROF_THREAD_SIDES_ 5

struct prof_thread {
    struct prof_thread_ hot;     /* first: the fast path (prof_impl.h) sees only this */
    struct prof_levels *levels;  /* mapped with the slot, kept with it */
    uint32_t dead_count;         /* owner only: bits set in levels->dead */
    /* Owner only. The open levels are [lo, depth) modulo 65536: when the
     * lowest open level's zone has ended (zones ended oldest first, as
     * asyncio tasks do), lo moves up past it, so the levels in use are as
     * many as the zones open, however long the pattern goes on. shifted:
     * lo has moved since the thread last had nothing open; the names no
     * longer give the paths (levels->inner does). lo_path: the path hash
     * enclosing level lo. */
    uint32_t lo, lo_path;
    uint32_t shifted;
    struct prof_thread *free_next;   /* free list (registry.c) */
    uint32_t enders;             /* threads inside a foreign end of ours:
                                    the slot is not reused until 0 */
    uint32_t tid;                /* kernel thread id */
    uint32_t index;              /* order of attachment: trace sort index */
    const char *name;            /* interned; set by prof_thread_name (atomic) */
    int exited;                  /* set (release) by the thread's destructor */
    /* The on-CPU sampler (sampler.c): the thread's CPU-time timer, set up
     * by the owner; cpu_timed is nonzero while it exists (1, release
     * after cpu_timer is written; 2 while the collector sets it; cleared
     * by whoever deletes it). cpu_paused: the collector disarmed it
     * (recording off). cpu_ever: the thread's timer was set up (kept
     * after its exit deletes it: its last records are drained later).
     * cpu_carry: CPU time of samples the handler could not push, owner's
     * handler only. flt_own, flt_all, rss_last: the thread's and the
     * process's page faults and the process's peak resident memory (KiB)
     * at its last sample (owner only), to give a rise of the peak to the
     * threads that faulted its pages in. */
    timer_t cpu_timer;
    int cpu_timed;
    int cpu_paused;
    int cpu_ever;
    uint64_t cpu_carry;
    uint64_t flt_own, flt_all;
    long rss_last;
    struct prof_thread *next;    /* registry list; guarded by the runtime lock */
    /* The collector's own state for this thread (sink.h's PROF_SIDE_*):
     * side[k] belongs to one part of the collect floor or one sink, which
     * allocates it, reads it, and frees it when the thread is gone and in
     * a forked child. The slot only carries it (cleared when the slot is
     * handed out again). */
    void *side[PROF_THREAD_SIDES_];
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
 * again). The API layer (api.c) installs it before it first switches
 * recording on; until then no thread attaches. Any thread. */
void prof_registry_set_start(int (*start)(void));

/* A zone begun by the thread in slot owner, generation gen, at this depth,
 * was ended on another thread: if that thread still lives and the zone
 * still holds its level, tell the thread the level is free. Any thread,
 * signal handlers included; takes no lock. */
void prof_registry_mark_foreign(struct prof_thread_ *owner, uint32_t gen, uint32_t depth);

/* The collector, at each drain of t: if another thread marked a level of
 * t's and the owner overwrote the repair flag in the same instant, set it
 * again. */
void prof_registry_repair_pending(struct prof_thread *t);

/* Records of a thread that has no ring to push them to: not recorded,
 * counted (atomic), like every record prof refuses. A zone (or counter,
 * mark, step) begun in a signal handler, or an instrumented allocator,
 * while its thread attaches (the first zone of a thread maps and
 * populates its ring, about a millisecond: a handler that fires every
 * 20 us begins some 70 zones there);
 * after the thread's ring could not be mapped; in a thread-exit
 * destructor that ran after prof's own (the thread is gone from the
 * registry). */
extern uint64_t prof_records_unattached;

/* Slots retired after their last generation (atomic). */
extern uint64_t prof_slots_retired;

/* Number of threads that ever attached, and that are attached now. */
extern uint64_t prof_threads_seen;

/* Name the calling thread (an interned string); a thread that has not
 * attached yet gets the name when it does. */
int prof_thread_set_name(const char *interned);

/* Give back an exited thread's ring and put its slot on the free list
 * with a new generation, or retire it after its last (the collector,
 * after its last drain). */
void prof_thread_free(struct prof_thread *t);

/* In a forked child: every other thread is gone, and the calling thread's
 * ring still holds the parent's records. Keep only the caller, emptied. */
void prof_registry_atfork_child(void);

#endif
