/* start.c - the runtime's process-wide state, and starting it: the clock,
 * the trace file, the registry, the exit and signal handlers, the collector
 * thread. Nothing starts before the first zone (or a forked child's first
 * record), so a program that switches prof on and never records runs
 * nothing. */
#include <errno.h>
#include <stdlib.h>

#include "prof.h"
#include "children.h"
#include "clock.h"
#include "collector.h"
#include "env.h"
#include "process.h"
#include "registry.h"
#include "runtime.h"
#include "sampler.h"
#include "signals.h"
#include "sink.h"
#include "start.h"
#include "trace.h"

PROF_API int prof_on_;

struct prof_runtime prof_rt = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
};

uint64_t prof_steps;
uint64_t prof_trace_open_ticks;
uint64_t prof_trace_close_ticks;
uint64_t prof_summary_step_due;

int prof_nvtx_ok;

/* The API layer's exit handler (prof_shutdown), registered with atexit at
 * the first start: after the program's own handlers registered before it,
 * so they may still record. */
static void (*exit_fn)(void);

void prof_runtime_on_exit(void (*fn)(void))
{
    exit_fn = fn;
}

int prof_runtime_start(void)
{
    static int once_done;
    const struct prof_config *cfg = prof_config_get();
    int err = 0;

    prof_process_start();
    prof_rt_lock();
    if (!prof_rt.started) {
        prof_clock_init();
        prof_process_refresh();
        prof_rt.start_ns = prof_rt.window_start_ns = prof_clock_now_ns();
        prof_rt.next_summary_ns = prof_rt.start_ns + cfg->every_ns;
        /* The outputs, and what the summary lists from up here. */
        prof_sinks_install();
        prof_summary_children_hook(prof_children_check_locked);
        prof_trace_open();
        prof_registry_init();
        if (!once_done) {
            once_done = 1;
            if (exit_fn != NULL)
                atexit(exit_fn);
            prof_signals_install();
            prof_sampler_install();
        }
        prof_rt.started = 1;
    }
    if (!prof_rt.shut_down && !prof_rt.fork_pending)
        err = prof_collector_start_locked();
    prof_rt_unlock();
    return err;
}

/* A forked child's first record: open its trace, start its collector. */
void prof_fork_setup(void)
{
    prof_rt_lock();
    if (prof_rt.fork_pending) {
        prof_trace_open();
        prof_rt.start_ns = prof_rt.window_start_ns = prof_clock_now_ns();
        prof_rt.next_summary_ns = prof_rt.start_ns + prof_config_get()->every_ns;
        __atomic_store_n(&prof_rt.fork_pending, 0, __ATOMIC_RELEASE);
        if (prof_on_)
            __atomic_store_n(&prof_on_, prof_on_value(), __ATOMIC_RELAXED);
        prof_collector_start_locked();
    }
    prof_rt_unlock();
}

int prof_runtime_ready(void)
{
    /* Acquire pairs with the release in prof_collector_start_locked. */
    if (__atomic_load_n(&prof_rt.ready, __ATOMIC_ACQUIRE))
        return 0;
    if (__atomic_load_n(&prof_rt.fork_pending, __ATOMIC_ACQUIRE))
        prof_fork_setup();
    else
        prof_runtime_start();
    return __atomic_load_n(&prof_rt.ready, __ATOMIC_ACQUIRE) ? 0 : -ESRCH;
}

/* Zones take the out-of-line (hooked) path when they must emit NVTX
 * ranges, or when the CPU counter is not trusted and they must read the
 * fallback clock. */
int prof_on_value(void)
{
    prof_clock_init();
    return PROF_ON_RECORD_ | (prof_nvtx_ok || !prof_clock_is_tsc_ ? PROF_ON_HOOKS_ : 0);
}
