/* api.c - where the public API enters: switching recording on and off,
 * the records other than zones, steps, thread names, and the zone's
 * hooked variant. Results are in api_results.c, windows and ranks in
 * api_ranks.c. The API files are the top floor: nothing else in src/ calls
 * a function they define (tests/unit/src_layering.py). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "prof.h"
#include "clock.h"
#include "collector.h"
#include "env.h"
#include "fork.h"
#include "intern.h"
#include "live.h"
#include "log.h"
#include "nvtx.h"
#include "registry.h"
#include "runtime.h"
#include "site.h"
#include "start.h"
#include "wake.h"

/* prof_enable and prof_shutdown one at a time: an enable in the middle of
 * a shutdown must not leave recording on with the collector gone. */
static pthread_mutex_t control_lock = PTHREAD_MUTEX_INITIALIZER;

PROF_API const char *prof_version(void)
{
    return PROF_VERSION_STRING;
}

static void at_exit(void)
{
    prof_shutdown();
}

PROF_API int prof_enable(int on)
{
    const struct prof_config *cfg = prof_config_get();
    int err = 0;

    if (on && cfg->prof == PROF_SWITCH_OFF)
        return -EPERM;
    if (!on) {
        __atomic_store_n(&prof_on_, 0, __ATOMIC_RELAXED);
        return 0;
    }
    if (prof_collector_is_self())
        return -EDEADLK;   /* a summary handler inside prof_shutdown */
    pthread_mutex_lock(&control_lock);
    prof_log_hold();
    prof_rt_lock();
    prof_rt.shut_down = 0;
    /* The runtime starts on the first zone (nothing runs in a program
     * that switches on and never records); once it has, switching on again
     * restarts the collector. */
    if (prof_rt.started && !prof_rt.fork_pending)
        err = prof_collector_start_locked();
    if (err == 0) {
        /* Before any zone can attach a thread: the registry starts the
         * runtime through this, never by calling up into the API. */
        prof_registry_set_start(prof_runtime_ready);
        __atomic_store_n(&prof_on_, prof_on_value(), __ATOMIC_RELAXED);
    }
    prof_rt_unlock();
    pthread_mutex_unlock(&control_lock);
    prof_log_release();
    return err;
}

PROF_API int prof_enabled(void)
{
    return __atomic_load_n(&prof_on_, __ATOMIC_RELAXED) != 0;
}

__attribute__((constructor)) static void prof_load(void)
{
    const struct prof_config *cfg = prof_config_get();

    /* At load, not at start: a child forked before the first record must
     * still know it is a child. */
    prof_fork_install();
    prof_runtime_on_exit(at_exit);

    /* NVTX is set up here or never: the zones' path is chosen when
     * recording switches on, and loading a library from inside a later
     * prof_enable() is not worth the risk of the loader's lock. */
    if (cfg->nvtx && cfg->prof == PROF_SWITCH_ON)
        prof_nvtx_ok = prof_nvtx_init() == 0;
    else if (cfg->nvtx)
        prof_log("PROF_NVTX=1 is ignored without PROF=1 when the library loads: zones that a "
                 "program switches on itself (prof_enable) emit no NVTX ranges");
    if (cfg->prof == PROF_SWITCH_ON)
        prof_enable(1);
}

/* ------------------------------------------------------------------------ */
/* Records other than zones. */

static void push(uint32_t kind, uint64_t end, const char *name)
{
    struct prof_thread_ *t;

    if (PROF_UNLIKELY_(__atomic_load_n(&prof_rt.fork_pending, __ATOMIC_ACQUIRE)))
        prof_fork_setup();
    if ((t = prof_thread_self_) == NULL && (t = prof_thread_attach_()) == NULL)
        return;
    if (!prof_busy_enter_(t)) {
        __atomic_store_n(&t->refused, t->refused + 1, __ATOMIC_RELAXED);
        return;
    }
    prof_ring_push_(t, prof_ticks_now_(), end, name, t->path, t->depth & PROF_DEPTH_LEVEL_, kind);
    prof_busy_leave_(t);
}

PROF_API void prof_counter(const char *name, double value)
{
    uint64_t bits;

    if (!__atomic_load_n(&prof_on_, __ATOMIC_RELAXED))
        return;
    memcpy(&bits, &value, sizeof bits);
    push(PROF_RECORD_COUNTER_, bits, name);
}

PROF_API void prof_mark(const char *name)
{
    if (__atomic_load_n(&prof_on_, __ATOMIC_RELAXED))
        push(PROF_RECORD_MARK_, 0, name);
}

PROF_API uint64_t prof_step(void)
{
    uint64_t n = __atomic_add_fetch(&prof_steps, 1, __ATOMIC_RELAXED);
    const struct prof_config *cfg;
    uint64_t now;

    if (!__atomic_load_n(&prof_on_, __ATOMIC_RELAXED))
        return n;
    cfg = prof_config_get();
    now = prof_ticks_now_();
    /* Release: a collector that sees the boundary also sees the steps. */
    if (n == cfg->trace_step_first)
        __atomic_store_n(&prof_trace_open_ticks, now, __ATOMIC_RELEASE);
    if (cfg->trace_step_last != UINT64_MAX && n == cfg->trace_step_last + 1)
        __atomic_store_n(&prof_trace_close_ticks, now, __ATOMIC_RELEASE);
    push(PROF_RECORD_STEP_, n, "step");
    if (cfg->every_steps && n % cfg->every_steps == 0) {
        __atomic_store_n(&prof_summary_step_due, n, __ATOMIC_RELEASE);
        prof_wake_collector();
    }
    return n;
}

PROF_API int prof_thread_name(const char *name)
{
    const char *interned;
    char buf[64];

    if (name == NULL)
        return -EINVAL;
    snprintf(buf, sizeof buf, "%s", name);
    if ((interned = prof_intern(buf)) == NULL)
        return -ENOMEM;
    return prof_thread_set_name(interned);
}

/* ------------------------------------------------------------------------ */
/* The fast path's hooked variant (its out-of-line copies for FFI,
 * prof_zone_begin and prof_zone_end, are in zone.c). */

/* The out-of-line zone path: with PROF_NVTX=1 every zone also pushes and
 * pops an NVTX range, and without a trusted CPU counter zones read the
 * fallback clock. A zone that records nothing still has its range to pop:
 * start is then 1, a tick value no clock returns. */
PROF_API prof_zone prof_zone_begin_hooked_(const char *name)
{
    prof_zone z;

    if (PROF_UNLIKELY_(__atomic_load_n(&prof_rt.fork_pending, __ATOMIC_ACQUIRE)))
        prof_fork_setup();
    if (prof_nvtx_ok)
        prof_nvtx_push(prof_site_name(name));
    z = prof_zone_open_(name, 0);
    if (z.start == 0)
        z.start = 1;
    z.thread = (void *)((uintptr_t)z.thread | 1);
    return z;
}

PROF_API void prof_zone_end_hooked_(prof_zone *zone)
{
    zone->thread = (void *)((uintptr_t)zone->thread & ~(uintptr_t)1);
    if (zone->start != 1 && zone->thread != NULL)
        prof_zone_close_(zone, 0);
    zone->start = 0;
    if (prof_nvtx_ok)
        prof_nvtx_pop();
}

PROF_API int prof_shutdown(void)
{
    if (prof_collector_is_self())
        return -EDEADLK;
    pthread_mutex_lock(&control_lock);
    prof_log_hold();
    prof_rt_lock();
    if (!prof_rt.started || prof_rt.shut_down || prof_rt.fork_pending) {
        /* A signal's final report under way (SIGTERM from a pool's
         * terminate() on the collector thread) is waited for: returning
         * at once let the caller's os._exit cut the summary and the
         * trace's end (2 of 44 runs). Bounded by the report's own waits
         * (GPU zones 2 s, the writer 30 s). */
        for (int ms = 0; prof_rt.final_reporting && ms < 40000; ms++) {
            struct timespec one = {0, 1000000};

            prof_rt_unlock();
            nanosleep(&one, NULL);
            prof_rt_lock();
        }
        /* A forked child that never recorded has nothing to report. */
        prof_rt.shut_down = 1;
        __atomic_store_n(&prof_on_, 0, __ATOMIC_RELAXED);
        prof_rt_unlock();
        pthread_mutex_unlock(&control_lock);
        prof_log_release();
        return 0;
    }
    prof_rt.shut_down = 1;
    __atomic_store_n(&prof_on_, 0, __ATOMIC_RELAXED);
    prof_rt_unlock();

    prof_collector_stop();

    prof_rt_lock();
    prof_final_report_locked();
    prof_rt_unlock();
    prof_live_stop();
    pthread_mutex_unlock(&control_lock);
    prof_log_release();
    return 0;
}

