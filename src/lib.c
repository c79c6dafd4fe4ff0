/* lib.c - where the public API meets the runtime: switching on and off,
 * starting and stopping, results, fork and signals. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prof.h"
#include "clock.h"
#include "collector.h"
#include "cuda.h"
#include "env.h"
#include "intern.h"
#include "log.h"
#include "nvtx.h"
#include "process.h"
#include "registry.h"
#include "runtime.h"
#include "stats.h"
#include "summary.h"
#include "trace.h"

PROF_API int prof_on_;

struct prof_runtime prof_rt = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
};

uint64_t prof_steps;
uint64_t prof_trace_open_ticks;
uint64_t prof_trace_close_ticks;
uint64_t prof_summary_step_due;
prof_summary_fn prof_summary_handler;
void *prof_summary_handler_user;

static int nvtx_ok;     /* NVTX loaded: zones take the hooked path */

PROF_API const char *prof_version(void)
{
    return PROF_VERSION_STRING;
}

/* ------------------------------------------------------------------------ */
/* Signals: SIGINT and SIGTERM end the run cleanly (final summary, trace
 * closed) when the program left them at their default action. The handler
 * only sets a flag; the collector does the work and then re-raises the
 * signal with its default action. A second signal, or one arriving with no
 * collector, closes the trace with async-signal-safe calls and dies at
 * once. */

static void on_signal(int sig)
{
    if (__atomic_exchange_n(&prof_pending_signal, sig, __ATOMIC_ACQ_REL) != 0 ||
        !__atomic_load_n(&prof_rt.collector_running, __ATOMIC_RELAXED)) {
        prof_trace_close_from_signal();
        signal(sig, SIG_DFL);
        raise(sig);
    }
}

static void install_signal(int sig)
{
    struct sigaction old, sa;

    if (sigaction(sig, NULL, &old) != 0 || old.sa_handler != SIG_DFL ||
        (old.sa_flags & SA_SIGINFO))
        return;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(sig, &sa, NULL);
}

/* ------------------------------------------------------------------------ */
/* fork: the prepare handler takes every lock so that the child inherits
 * them in a known state; the child then keeps only itself. */

static void atfork_prepare(void)
{
    pthread_mutex_lock(&prof_rt.lock);
    prof_collector_atfork_prepare();
    prof_intern_atfork_prepare();
}

static void atfork_parent(void)
{
    prof_intern_atfork_parent();
    prof_collector_atfork_parent();
    pthread_mutex_unlock(&prof_rt.lock);
}

static void atfork_child(void)
{
    uint32_t parent = (uint32_t)prof_process_get()->pid;

    prof_intern_atfork_child();
    prof_collector_atfork_child();
    prof_process_refresh();
    if (!prof_rt.started) {
        pthread_mutex_unlock(&prof_rt.lock);
        return;
    }
    prof_rt.forked_from = parent;
    __atomic_store_n(&prof_rt.collector_running, 0, __ATOMIC_RELAXED);
    prof_rt.stopping = 0;
    prof_registry_atfork_child();
    prof_stats_reset();
    prof_cuda_atfork_child();
    prof_trace_atfork_child();
    prof_rt.start_ns = prof_rt.window_start_ns = prof_clock_now_ns();
    /* The child's summary period starts with the child. */
    prof_rt.next_summary_ns = prof_rt.start_ns + prof_config_get()->every_ns;
    prof_rt.window_start_step = prof_rt.summary_step_done = prof_steps;
    prof_rt.dropped = prof_rt.dropped_window = 0;
    __atomic_store_n(&prof_pending_signal, 0, __ATOMIC_RELAXED);
    {
        /* The parent's collector was most likely waiting on this condition
         * variable when we forked: its waiter count came along, and the
         * pthread_cond_destroy() in prof_collector_start_locked() would
         * wait forever for a waiter that does not exist in the child. */
        pthread_cond_t fresh = PTHREAD_COND_INITIALIZER;
        prof_rt.wake = fresh;
    }
    if (!prof_rt.shut_down && prof_on_)
        prof_collector_start_locked();
    pthread_mutex_unlock(&prof_rt.lock);
}

/* ------------------------------------------------------------------------ */

static void at_exit(void)
{
    prof_shutdown();
}

int prof_runtime_start(void)
{
    static int once_done;
    const struct prof_config *cfg = prof_config_get();
    int err = 0;

    pthread_mutex_lock(&prof_rt.lock);
    if (!prof_rt.started) {
        prof_clock_init();
        prof_process_refresh();
        prof_rt.start_ns = prof_rt.window_start_ns = prof_clock_now_ns();
        prof_rt.next_summary_ns = prof_rt.start_ns + cfg->every_ns;
        prof_trace_open();
        if (!once_done) {
            once_done = 1;
            pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
            atexit(at_exit);
            install_signal(SIGINT);
            install_signal(SIGTERM);
        }
        prof_rt.started = 1;
    }
    if (!prof_rt.shut_down)
        err = prof_collector_start_locked();
    pthread_mutex_unlock(&prof_rt.lock);
    return err;
}

/* Zones take the out-of-line (hooked) path when they must emit NVTX
 * ranges, or when the CPU counter is not trusted and they must read the
 * fallback clock. */
static int on_value(void)
{
    prof_clock_init();
    return PROF_ON_RECORD_ | (nvtx_ok || !prof_clock_is_tsc_ ? PROF_ON_HOOKS_ : 0);
}

PROF_API int prof_enable(int on)
{
    const struct prof_config *cfg = prof_config_get();

    if (on && cfg->prof == PROF_SWITCH_OFF)
        return -EPERM;
    if (on) {
        pthread_mutex_lock(&prof_rt.lock);
        prof_rt.shut_down = 0;
        if (prof_rt.started)
            prof_collector_start_locked();
        pthread_mutex_unlock(&prof_rt.lock);
    }
    __atomic_store_n(&prof_on_, on ? on_value() : 0, __ATOMIC_RELAXED);
    return 0;
}

PROF_API int prof_enabled(void)
{
    return __atomic_load_n(&prof_on_, __ATOMIC_RELAXED) != 0;
}

__attribute__((constructor)) static void prof_load(void)
{
    const struct prof_config *cfg = prof_config_get();

    if (cfg->nvtx && cfg->prof == PROF_SWITCH_ON)
        nvtx_ok = prof_nvtx_init() == 0;
    if (cfg->prof == PROF_SWITCH_ON)
        prof_enable(1);
}

/* ------------------------------------------------------------------------ */
/* Records other than zones. */

static void push(uint32_t kind, uint64_t end, const char *name)
{
    struct prof_thread_ *t = prof_thread_self_;

    if (t == NULL && (t = prof_thread_attach_()) == NULL)
        return;
    if (t->busy) {
        __atomic_store_n(&t->reentered, t->reentered + 1, __ATOMIC_RELAXED);
        return;
    }
    t->busy = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    prof_ring_push_(t, prof_ticks_now_(), end, name,
                    t->path[t->depth < PROF_MAX_DEPTH_ ? t->depth : PROF_MAX_DEPTH_], t->depth, kind);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->busy = 0;
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
        pthread_cond_signal(&prof_rt.wake);
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
/* The out-of-line copies of the fast path (FFI) and its hooked variant. */

PROF_API prof_zone prof_zone_begin(const char *name)
{
    return prof_zone_begin_inline_(name);
}

PROF_API void prof_zone_end(prof_zone *zone)
{
    if (zone != NULL)
        prof_zone_end_inline_(zone);
}

/* The out-of-line zone path: with PROF_NVTX=1 every zone also pushes and
 * pops an NVTX range, and without a trusted CPU counter zones read the
 * fallback clock. A zone that records nothing still has its range to pop:
 * start is then 1, a tick value no clock returns. */
PROF_API prof_zone prof_zone_begin_hooked_(const char *name)
{
    prof_zone z;

    if (nvtx_ok)
        prof_nvtx_push(name);
    z = prof_zone_open_(name, 0);
    if (z.start == 0)
        z.start = 1;
    z.thread = (void *)((uintptr_t)z.thread | 1);
    return z;
}

PROF_API void prof_zone_end_hooked_(prof_zone *zone)
{
    uint64_t end = prof_ticks_now_();

    zone->thread = (void *)((uintptr_t)zone->thread & ~(uintptr_t)1);
    if (zone->start != 1 && zone->thread != NULL)
        prof_zone_close_(zone, end);
    zone->start = 0;
    if (nvtx_ok)
        prof_nvtx_pop();
}

/* ------------------------------------------------------------------------ */
/* Results. */

/* Take the lock with everything drained. Returns 0, or -ESRCH / -EDEADLK
 * (lock not taken). */
static int lock_flushed(void)
{
    if (prof_collector_is_self())
        return -EDEADLK;
    pthread_mutex_lock(&prof_rt.lock);
    if (!prof_rt.started) {
        pthread_mutex_unlock(&prof_rt.lock);
        return -ESRCH;
    }
    prof_collect_locked();
    return 0;
}

PROF_API int prof_flush(void)
{
    int err = lock_flushed();

    if (err == 0) {
        /* A step summary that became due before the call is out when it
         * returns, not at the collector's next wake. */
        prof_periodic_locked(prof_clock_now_ns());
        pthread_mutex_unlock(&prof_rt.lock);
    }
    return err;
}

PROF_API int prof_stats(const char *name, prof_stage_stats *out)
{
    struct prof_rows rows;
    struct prof_stage *s;
    int err;

    if (name == NULL || out == NULL)
        return -EINVAL;
    if ((err = lock_flushed()) != 0)
        return err;
    err = -ENOENT;
    if ((s = prof_stats_find(name)) != NULL && prof_stats_rows(&rows, 0, 0) == 0) {
        prof_stats_fill(s, 0, prof_clock_now_ns() - prof_rt.start_ns, out);
        prof_rows_free(&rows);
        err = s->run.count ? 0 : -ENOENT;
    }
    pthread_mutex_unlock(&prof_rt.lock);
    return err;
}

PROF_API int prof_stats_list(prof_stage_stats *out, size_t cap)
{
    struct prof_rows rows;
    int err, n;

    if (out == NULL && cap > 0)
        return -EINVAL;
    if ((err = lock_flushed()) != 0)
        return err;
    if (prof_stats_rows(&rows, 0, 0) != 0) {
        pthread_mutex_unlock(&prof_rt.lock);
        return -ENOMEM;
    }
    for (size_t i = 0; i < rows.len && i < cap; i++) {
        prof_stats_fill(rows.rows[i].stage, 0, prof_clock_now_ns() - prof_rt.start_ns, &out[i]);
        out[i].depth = rows.rows[i].depth;
    }
    n = (int)rows.len;
    prof_rows_free(&rows);
    pthread_mutex_unlock(&prof_rt.lock);
    return n;
}

static void counter_fill(const struct prof_counter *c, prof_counter_stats *out)
{
    memset(out, 0, sizeof *out);
    out->name = c->name;
    out->count = c->run.count;
    out->last = c->run.last;
    out->min = c->run.min;
    out->max = c->run.max;
    out->avg = c->run.count ? c->run.sum / (double)c->run.count : 0;
}

PROF_API int prof_counter_stats_get(const char *name, prof_counter_stats *out)
{
    struct prof_counter *c;
    int err;

    if (name == NULL || out == NULL)
        return -EINVAL;
    if ((err = lock_flushed()) != 0)
        return err;
    c = prof_counter_find(name);
    if (c != NULL)
        counter_fill(c, out);
    pthread_mutex_unlock(&prof_rt.lock);
    return c != NULL ? 0 : -ENOENT;
}

PROF_API int prof_counter_stats_list(prof_counter_stats *out, size_t cap)
{
    struct prof_rows rows;
    int err, n;

    if (out == NULL && cap > 0)
        return -EINVAL;
    if ((err = lock_flushed()) != 0)
        return err;
    if (prof_stats_rows(&rows, 0, 0) != 0) {
        pthread_mutex_unlock(&prof_rt.lock);
        return -ENOMEM;
    }
    for (size_t i = 0; i < rows.ncounters && i < cap; i++)
        counter_fill(rows.counters[i], &out[i]);
    n = (int)rows.ncounters;
    prof_rows_free(&rows);
    pthread_mutex_unlock(&prof_rt.lock);
    return n;
}

PROF_API int prof_summary_snprint(char *buf, size_t size, int format)
{
    struct prof_buf b = {0};
    int err, n;

    if (buf == NULL && size > 0)
        return -EINVAL;
    if (format == PROF_FORMAT_DEFAULT)
        format = prof_config_get()->format;
    if (format != PROF_FORMAT_TEXT && format != PROF_FORMAT_JSON)
        return -EINVAL;
    if ((err = lock_flushed()) != 0)
        return err;
    prof_summary_format(&b, format, PROF_KIND_DEMAND,
                        __atomic_load_n(&prof_steps, __ATOMIC_RELAXED), prof_clock_now_ns());
    pthread_mutex_unlock(&prof_rt.lock);
    if (b.failed) {
        prof_buf_free(&b);
        return -ENOMEM;
    }
    n = (int)b.len;
    if (size > 0) {
        size_t k = b.len < size - 1 ? b.len : size - 1;
        memcpy(buf, b.data, k);
        buf[k] = '\0';
    }
    prof_buf_free(&b);
    return n;
}

PROF_API int prof_summary_print(FILE *f)
{
    struct prof_buf b = {0};
    int err;

    if (f == NULL)
        return -EINVAL;
    if ((err = lock_flushed()) != 0)
        return err;
    prof_summary_format(&b, prof_config_get()->format, PROF_KIND_DEMAND,
                        __atomic_load_n(&prof_steps, __ATOMIC_RELAXED), prof_clock_now_ns());
    pthread_mutex_unlock(&prof_rt.lock);
    err = b.failed ? -ENOMEM : 0;
    if (!err) {
        /* A pipe whose reader has gone gives -EIO, not death by SIGPIPE
         * (docs/CONFIG.md): block it while writing, consume the one we
         * caused. */
        sigset_t pipe_set, old;
        int saved = 0;

        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
        errno = 0;
        if (fwrite(b.data, 1, b.len, f) != b.len || fflush(f) != 0) {
            saved = errno;
            err = -EIO;
        }
        if (saved == EPIPE && !sigismember(&old, SIGPIPE)) {
            struct timespec zero = {0, 0};
            sigtimedwait(&pipe_set, NULL, &zero);
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    prof_buf_free(&b);
    return err;
}

PROF_API void prof_set_summary_handler(prof_summary_fn fn, void *user)
{
    pthread_mutex_lock(&prof_rt.lock);
    prof_summary_handler = fn;
    prof_summary_handler_user = user;
    pthread_mutex_unlock(&prof_rt.lock);
}

PROF_API int prof_reset(void)
{
    int err = lock_flushed();

    if (err == -ESRCH)
        return 0;
    if (err != 0)
        return err;
    prof_stats_reset();
    prof_rt.start_ns = prof_rt.window_start_ns = prof_clock_now_ns();
    prof_rt.window_start_step = __atomic_load_n(&prof_steps, __ATOMIC_RELAXED);
    prof_rt.dropped = prof_rt.dropped_window = 0;
    pthread_mutex_unlock(&prof_rt.lock);
    return 0;
}

PROF_API int prof_shutdown(void)
{
    if (prof_collector_is_self())
        return -EDEADLK;
    pthread_mutex_lock(&prof_rt.lock);
    if (!prof_rt.started || prof_rt.shut_down) {
        __atomic_store_n(&prof_on_, 0, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&prof_rt.lock);
        return 0;
    }
    prof_rt.shut_down = 1;
    __atomic_store_n(&prof_on_, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&prof_rt.lock);

    prof_collector_stop();

    pthread_mutex_lock(&prof_rt.lock);
    prof_final_report_locked();
    pthread_mutex_unlock(&prof_rt.lock);
    return 0;
}
