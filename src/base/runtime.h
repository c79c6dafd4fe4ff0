/* runtime.h - the process-wide state shared by the parts of the runtime,
 * and the one lock that guards it.
 *
 * The lock is never taken by the zone fast path. It guards the thread
 * registry, the statistics, the trace writer and the collector's control
 * fields. Order: the runtime lock before the intern lock. */
#ifndef PROF_RUNTIME_H
#define PROF_RUNTIME_H

#include <pthread.h>
#include <stdint.h>

#include "log.h"
#include "process.h"

struct prof_runtime {
    pthread_mutex_t lock;
    int started;                  /* runtime initialised (clock, atexit) */
    int collector_running;
    pthread_t collector_id;       /* the collector thread, while running */
    int ready;                    /* started, collector running: a thread may
                                     attach without a lock (atomic) */
    int fork_pending;             /* forked child not set up yet (atomic) */
    int stopping;                 /* the collector is asked to exit */
    int shut_down;                /* prof_shutdown ran */
    int final_reporting;          /* the final report is being written (it
                                     releases the lock while it waits) */
    uint64_t start_ns;            /* CLOCK_MONOTONIC at start: wall time base */
    uint64_t window_start_ns;
    uint64_t window_start_step;
    uint64_t next_summary_ns;     /* PROF_SUMMARY_EVERY=Ns */
    uint64_t summary_step_done;   /* last step a periodic summary covered */
    uint64_t step_due_drained;    /* prof_summary_step_due as the last drain began */
    uint64_t dropped;             /* records lost, all threads, whole run */
    uint64_t dropped_window;
    uint64_t lost_memory;         /* records the collector could not keep */
    uint64_t cuda_lost_seen;      /* prof_cuda_lost() already counted in dropped */
    uint64_t loss_seen;           /* process-wide refusals already counted */
    uint32_t forked_from;         /* parent pid in a forked child, else 0 */
    uint32_t parent_env;          /* PROF_PARENT_PID at load: a prof process with
                                     PROF=1 this one was started below (spawn,
                                     forkserver, exec), else 0 */
    int parent_rank;              /* the rank PROF_PARENT_PID gives with it, or -1 */
    int mp_worker;                /* started by Python's multiprocessing */
};

extern struct prof_runtime prof_rt;

/* Started below another prof process, by a fork its handlers saw or
 * through the environment (PROF_PARENT_PID): a path without %p is that
 * process's, never this one's (docs/TRACE.md). That process's pid, or 0. */
static inline uint32_t prof_rt_below(void)
{
    return prof_rt.forked_from ? prof_rt.forked_from : prof_rt.parent_env;
}

/* Whether pattern (PROF_TRACE, PROF_SUMMARY) names a file of another
 * process: without %p, in a process started below another; %r gives a
 * process exec'd with another rank than that one's (a launcher's spawned
 * ranks) a file of its own. */
static inline int prof_rt_path_is_parents(const char *pattern)
{
    if (prof_rt_below() == 0 || prof_path_has_pid(pattern))
        return 0;
    return prof_rt.forked_from != 0 || !prof_path_has_rank(pattern) ||
           prof_process_get()->rank == prof_rt.parent_rank;
}

/* A worker of another prof process: forked, or a multiprocessing worker
 * started below one with the same rank (a DataLoader's spawned worker;
 * not the ranks a launcher spawns). Its summary goes only where
 * PROF_SUMMARY sends it explicitly; a forked one's parent counts it
 * (docs/CONFIG.md). */
static inline int prof_rt_is_worker(void)
{
    return prof_rt.forked_from != 0 ||
           (prof_rt.parent_env != 0 && prof_rt.mp_worker &&
            prof_process_get()->rank == prof_rt.parent_rank);
}

/* Take and release the runtime lock. Messages the runtime logs while this
 * thread holds it wait, and reach the user's logger once it is released
 * (log.h), so a logger may call any API function. */
static inline void prof_rt_lock(void)
{
    pthread_mutex_lock(&prof_rt.lock);
    prof_log_hold();
}

static inline void prof_rt_unlock(void)
{
    pthread_mutex_unlock(&prof_rt.lock);
    prof_log_release();
}

/* Whether the calling thread is the collector thread. Acquire pairs with
 * the release that sets collector_running after collector_id. */
static inline int prof_rt_on_collector(void)
{
    return __atomic_load_n(&prof_rt.collector_running, __ATOMIC_ACQUIRE) &&
           pthread_equal(pthread_self(), prof_rt.collector_id);
}

/* Global step counter (prof_step), read by the collector. */
extern uint64_t prof_steps;
/* Trace step window boundaries, in ticks, set by prof_step (0 = not yet). */
extern uint64_t prof_trace_open_ticks;
extern uint64_t prof_trace_close_ticks;
/* A periodic summary was asked for at this step (0 = none). */
extern uint64_t prof_summary_step_due;

#endif
