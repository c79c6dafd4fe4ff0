/* fork.c - a fork in a recording process. The prepare handler takes every
 * lock so that the child inherits them in a known state; the child then
 * keeps only itself, and sets itself up on its first record. */
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

void prof_fork_install(void)
{
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}
