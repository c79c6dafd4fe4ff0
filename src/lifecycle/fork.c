/* fork.c - a fork in a recording process. The prepare handler takes every
 * lock so that the child inherits them in a known state; the child then
 * keeps only itself, and sets itself up on its first record. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "children.h"
#include "clock.h"
#include "collector.h"
#include "cuda.h"
#include "cuda_poll.h"
#include "kernels.h"
#include "env.h"
#include "fork.h"
#include "intern.h"
#include "log.h"
#include "loss.h"
#include "process.h"
#include "registry.h"
#include "runtime.h"
#include "selftime.h"
#include "stats.h"
#include "trace.h"
#include "wake.h"

static pid_t fork_parent;   /* the forking process, for its child */

static void atfork_prepare(void)
{
    /* Under the lock: two threads may fork at once. */
    prof_rt_lock();
    fork_parent = getpid();
    prof_children_prepare(__atomic_load_n(&prof_on_, __ATOMIC_RELAXED) != 0);
    prof_collector_atfork_prepare();
    prof_intern_atfork_prepare();
    prof_trace_atfork_prepare();
}

static void atfork_parent(void)
{
    prof_trace_atfork_parent();
    prof_intern_atfork_parent();
    prof_collector_atfork_parent();
    prof_rt_unlock();
}

/* The child keeps only what is its own, and starts nothing: a child that
 * execs (subprocess, shell-outs) or exits without recording leaves no
 * thread, no file and no output. The child sets itself up on its first
 * record (start.c's prof_fork_setup): until then zones take the out-of-line path, which
 * looks for the pending setup, so the fast path pays nothing for it. */
static void atfork_child(void)
{
    uint32_t parent = (uint32_t)fork_parent;

    prof_log_atfork_child();
    prof_intern_atfork_child();
    prof_trace_atfork_child();
    prof_collector_atfork_child();
    prof_wake_atfork_child();
    prof_process_refresh();
    /* The child's header names its parent also when the parent had not
     * started recording yet (DataLoader workers fork before the first
     * zone), and the child counts its own steps from the fork. */
    prof_rt.forked_from = parent;
    prof_rt.final_reporting = 0;        /* the parent's, not the child's */
    prof_steps = prof_summary_step_due = 0;
    prof_trace_open_ticks = prof_trace_close_ticks = 0;
    if (!prof_rt.started) {
        prof_rt_unlock();
        return;
    }
    __atomic_store_n(&prof_rt.collector_running, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&prof_rt.ready, 0, __ATOMIC_RELAXED);
    prof_rt.stopping = 0;
    prof_registry_atfork_child();
    prof_self_atfork_child();
    prof_loss_atfork_child();
    prof_stats_reset();
    prof_cuda_atfork_child();
    prof_cuda_poll_atfork_child();
    prof_kernels_atfork_child();
    prof_trace_forget_parent();
    /* Windows and losses count from the fork too. */
    prof_rt.start_ns = prof_rt.window_start_ns = prof_clock_now_ns();
    prof_rt.next_summary_ns = prof_rt.start_ns + prof_config_get()->every_ns;
    prof_rt.window_start_step = prof_rt.summary_step_done = prof_rt.step_due_drained = 0;
    prof_rt.dropped = prof_rt.dropped_window = 0;
    prof_rt.loss_seen = 0;
    prof_loss_reset();
    __atomic_store_n(&prof_pending_signal, 0, __ATOMIC_RELAXED);
    if (!prof_rt.shut_down && prof_on_) {
        __atomic_store_n(&prof_rt.fork_pending, 1, __ATOMIC_RELEASE);
        __atomic_store_n(&prof_on_, prof_on_ | PROF_ON_HOOKS_, __ATOMIC_RELAXED);
    }
    prof_rt_unlock();
}

/* PROF_PARENT_PID: what a fork handler cannot see. A process started
 * below a recording one by exec (multiprocessing's spawn and forkserver,
 * subprocess) inherits its environment, PROF_TRACE included, and would
 * open the same file again (O_TRUNC, under a writer that still has it
 * open). The inherited value says it was started below that process; then
 * this process's own pid goes to its children. Only a process with PROF=1
 * exports it: one that switches itself on (a test harness) leaves the
 * programs it starts as they were. */

/* "PID" or "PID:RANK": 0, or -1 when v is neither. */
static int parse_marker(const char *v, unsigned long *pid, long *rank)
{
    char *end;

    *rank = -1;
    if (v[0] < '0' || v[0] > '9')
        return -1;
    errno = 0;
    *pid = strtoul(v, &end, 10);
    if (*end == ':') {
        if (end[1] < '0' || end[1] > '9')
            return -1;
        *rank = (long)strtoul(end + 1, &end, 10);
    }
    return *end != '\0' || errno != 0 || *pid == 0 || *pid > INT32_MAX ||
           *rank >= PROF_RANK_LIMIT ? -1 : 0;
}

static void lineage(void)
{
    const char *v = getenv("PROF_PARENT_PID");
    pid_t me = getpid();
    int rank = prof_process_get()->rank;
    char text[48];
    unsigned long p;
    long r;

    prof_rt.parent_rank = -1;
    if (v != NULL && *v != '\0') {
        if (parse_marker(v, &p, &r) != 0) {
            char q[PROF_LOG_QUOTE_SIZE];

            prof_log("PROF_PARENT_PID=\"%s\" is not a pid (PID or PID:RANK); ignored (prof "
                     "sets it for the processes a recording process starts)",
                     prof_log_quote(q, sizeof q, v));
        } else if ((pid_t)p != me) {
            prof_rt.parent_env = (uint32_t)p;
            prof_rt.parent_rank = (int)r;
            prof_rt.mp_worker = prof_process_is_mp_child();
        }
    }
    /* With its rank: a multiprocessing child of the same rank is a worker
     * (a DataLoader's), one of another rank is not (a launcher's ranks). */
    if (prof_config_get()->prof == PROF_SWITCH_ON) {
        if (rank >= 0)
            snprintf(text, sizeof text, "%d:%d", (int)me, rank);
        else
            snprintf(text, sizeof text, "%d", (int)me);
        setenv("PROF_PARENT_PID", text, 1);
    }
}

void prof_fork_install(void)
{
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    lineage();
}
