/* lib.c - where the public API meets the runtime: switching on and off,
 * starting and stopping, results, fork and signals. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prof.h"
#include "children.h"
#include "clock.h"
#include "collector.h"
#include "cuda.h"
#include "env.h"
#include "fdio.h"
#include "intern.h"
#include "live.h"
#include "log.h"
#include "loss.h"
#include "nvtx.h"
#include "order.h"
#include "process.h"
#include "ranks.h"
#include "registry.h"
#include "runtime.h"
#include "sigchain.h"
#include "site.h"
#include "stats.h"
#include "summary.h"
#include "trace.h"
#include "wake.h"

PROF_API int prof_on_;

struct prof_runtime prof_rt = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
};

/* prof_enable and prof_shutdown one at a time: an enable in the middle of
 * a shutdown must not leave recording on with the collector gone. */
static pthread_mutex_t control_lock = PTHREAD_MUTEX_INITIALIZER;

uint64_t prof_steps;
uint64_t prof_trace_open_ticks;
uint64_t prof_trace_close_ticks;
uint64_t prof_summary_step_due;

static int nvtx_ok;     /* NVTX loaded: zones take the hooked path */

PROF_API const char *prof_version(void)
{
    return PROF_VERSION_STRING;
}

/* ------------------------------------------------------------------------ */
/* Signals: SIGINT and SIGTERM end the run cleanly (final summary, trace
 * closed) when the program left them at their default action. The handler
 * only sets a flag and wakes the collector; the collector does the work and
 * then re-raises the signal with its default action. Supervisors (GNU
 * timeout, Slurm, Kubernetes) send SIGTERM to the process and then to its
 * group, so one repeat of the same signal within PROF_SIGNAL_GRACE_NS lets
 * the drain finish; a different signal, a third one, a later repeat, or a
 * signal with no collector closes the trace with async-signal-safe calls
 * and dies at once. */

#define PROF_SIGNAL_GRACE_NS (2 * 1000000000ull)

static void on_signal(int sig)
{
    /* Atomics: a supervisor's two signals may land on two threads at once;
     * a first_ns still 0 means the first one is being handled right now. */
    static uint64_t first_ns;
    static int repeats;
    uint64_t first;
    int prev = __atomic_exchange_n(&prof_pending_signal, sig, __ATOMIC_ACQ_REL);
    int running = __atomic_load_n(&prof_rt.collector_running, __ATOMIC_RELAXED);
    struct timespec ts;
    uint64_t now;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    if (running && prev == 0) {
        __atomic_store_n(&first_ns, now, __ATOMIC_RELEASE);
        prof_wake_collector();
        return;
    }
    first = __atomic_load_n(&first_ns, __ATOMIC_ACQUIRE);
    if (running && prev == sig && __atomic_add_fetch(&repeats, 1, __ATOMIC_ACQ_REL) == 1 &&
        (first == 0 || now - first < PROF_SIGNAL_GRACE_NS))
        return;
    prof_trace_close_from_signal();
    signal(sig, SIG_DFL);
    raise(sig);
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

static pid_t fork_parent;   /* the forking process, for its child */

static void atfork_prepare(void)
{
    fork_parent = getpid();
    prof_rt_lock();
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
 * record (fork_setup): until then zones take the out-of-line path, which
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

static int on_value(void);

/* A forked child's first record: open its trace, start its collector. */
static void fork_setup(void)
{
    prof_rt_lock();
    if (prof_rt.fork_pending) {
        prof_trace_open();
        prof_rt.start_ns = prof_rt.window_start_ns = prof_clock_now_ns();
        prof_rt.next_summary_ns = prof_rt.start_ns + prof_config_get()->every_ns;
        __atomic_store_n(&prof_rt.fork_pending, 0, __ATOMIC_RELEASE);
        if (prof_on_)
            __atomic_store_n(&prof_on_, on_value(), __ATOMIC_RELAXED);
        prof_collector_start_locked();
    }
    prof_rt_unlock();
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

    prof_process_start();
    prof_rt_lock();
    if (!prof_rt.started) {
        prof_clock_init();
        prof_process_refresh();
        prof_rt.start_ns = prof_rt.window_start_ns = prof_clock_now_ns();
        prof_rt.next_summary_ns = prof_rt.start_ns + cfg->every_ns;
        prof_trace_open();
        prof_registry_init();
        if (!once_done) {
            once_done = 1;
            atexit(at_exit);
            install_signal(SIGINT);
            install_signal(SIGTERM);
            prof_sigchain_own(on_signal);
        }
        prof_rt.started = 1;
    }
    if (!prof_rt.shut_down && !prof_rt.fork_pending)
        err = prof_collector_start_locked();
    prof_rt_unlock();
    return err;
}

int prof_runtime_ready(void)
{
    /* Acquire pairs with the release in prof_collector_start_locked. */
    if (__atomic_load_n(&prof_rt.ready, __ATOMIC_ACQUIRE))
        return 0;
    if (__atomic_load_n(&prof_rt.fork_pending, __ATOMIC_ACQUIRE))
        fork_setup();
    else
        prof_runtime_start();
    return __atomic_load_n(&prof_rt.ready, __ATOMIC_ACQUIRE) ? 0 : -ESRCH;
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
         * runtime through this, never by calling up into lib.c. */
        prof_registry_set_start(prof_runtime_ready);
        __atomic_store_n(&prof_on_, on_value(), __ATOMIC_RELAXED);
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
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);

    /* NVTX is set up here or never: the zones' path is chosen when
     * recording switches on, and loading a library from inside a later
     * prof_enable() is not worth the risk of the loader's lock. */
    if (cfg->nvtx && cfg->prof == PROF_SWITCH_ON)
        nvtx_ok = prof_nvtx_init() == 0;
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
        fork_setup();
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
        fork_setup();
    if (nvtx_ok)
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
    prof_rt_lock();
    if (!prof_rt.started) {
        prof_rt_unlock();
        return -ESRCH;
    }
    prof_collect_all_locked();
    /* The collector writes what this drain gave the trace: this thread
     * never waits on the disk. */
    if (prof_trace_pending())
        prof_wake_collector();
    return 0;
}

PROF_API int prof_flush(void)
{
    int err = lock_flushed();

    if (err == 0) {
        /* A step summary that became due before the call is out when it
         * returns, not at the collector's next wake, and so is one the
         * collector is writing right now. */
        prof_periodic_locked(prof_clock_now_ns());
        prof_summary_wait_written_locked();
        prof_rt_unlock();
        /* And the trace holds them on disk when it returns: written here,
         * with the runtime lock released (other threads go on). */
        prof_trace_write();
    }
    return err;
}

PROF_API int prof_stats(const char *name, prof_stage_stats *out)
{
    struct prof_stage *s;
    int err;

    if (name == NULL || out == NULL)
        return -EINVAL;
    if ((err = lock_flushed()) != 0)
        return err;
    err = -ENOENT;
    if ((s = prof_stats_find(name)) != NULL) {
        prof_stats_tree();
        prof_stats_fill(s, 0, prof_clock_now_ns() - prof_rt.start_ns, out);
        /* The tree has no cycle: the walk ends. */
        for (const struct prof_stage *p = s->parent; p != NULL; p = p->parent)
            out->depth++;
        err = s->run.count ? 0 : -ENOENT;
    }
    prof_rt_unlock();
    return err;
}

/* Rows out[k] = out[order[k]] for k < n, in place, following each cycle
 * of the permutation once (order[] is spent). */
static void permute(prof_stage_stats *out, uint32_t *order, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        prof_stage_stats first;
        size_t j = k;

        if (order[k] == k)
            continue;
        first = out[k];
        while (order[j] != k) {
            size_t from = order[j];
            out[j] = out[from];
            order[j] = (uint32_t)j;
            j = from;
        }
        out[j] = first;
        order[j] = (uint32_t)j;
    }
}

/* A million stages is 150 MB of rows and a second of sorting and page
 * faults: the caller's rows are touched before the lock, the stages are
 * filled under it in no order, and put in summary order after it, so the
 * collector (and every thread waiting on the lock) is held only for the
 * copy. */
PROF_API int prof_stats_list(prof_stage_stats *out, size_t cap)
{
    struct prof_stage **all = NULL;
    struct prof_order_item *items = NULL;
    uint32_t *order = NULL;
    size_t n, len = 0;
    uint64_t wall;
    int err;

    if (out == NULL && cap > 0)
        return -EINVAL;
    if (prof_collector_is_self())
        return -EDEADLK;
    if (cap > 0) {
        prof_rt_lock();
        n = prof_rt.started ? prof_stats_nstages() : 0;
        prof_rt_unlock();
        memset(out, 0, (n < cap ? n : cap) * sizeof *out);
    }
    if ((err = lock_flushed()) != 0)
        return err;
    n = prof_stats_nstages();
    if (cap == 0 || n == 0) {
        prof_rt_unlock();
        return (int)n;
    }
    prof_stats_tree();
    wall = prof_clock_now_ns() - prof_rt.start_ns;
    if ((all = prof_stats_all(&n)) != NULL)
        items = prof_stats_items(all, n, 0);
    order = malloc(n * 2 * sizeof *order);
    err = -ENOMEM;
    if (items == NULL || order == NULL) {
        prof_rt_unlock();
    } else if (n <= cap) {
        for (size_t i = 0; i < n; i++)
            prof_stats_fill(all[i], 0, wall, &out[i]);
        prof_rt_unlock();
        err = prof_order_tree(items, n, order, order + n, &len);
        if (err == 0) {
            for (size_t k = 0; k < len; k++)
                out[order[k]].depth = order[n + k];
            permute(out, order, len);
        }
    } else {
        /* Which stages fill the first cap rows depends on the order. */
        err = prof_order_tree(items, n, order, order + n, &len);
        for (size_t k = 0; err == 0 && k < len && k < cap; k++) {
            prof_stats_fill(all[order[k]], 0, wall, &out[k]);
            out[k].depth = order[n + k];
        }
        prof_rt_unlock();
    }
    free(order);
    free(items);
    free(all);
    return err != 0 ? err : (int)len;
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
    prof_rt_unlock();
    return c != NULL ? 0 : -ENOENT;
}

PROF_API int prof_counter_stats_list(prof_counter_stats *out, size_t cap)
{
    struct prof_counter **counters;
    size_t n;
    int err;

    if (out == NULL && cap > 0)
        return -EINVAL;
    if ((err = lock_flushed()) != 0)
        return err;
    counters = prof_stats_counters(&n);
    for (size_t i = 0; counters != NULL && i < n && i < cap; i++)
        counter_fill(counters[i], &out[i]);
    prof_rt_unlock();
    free(counters);
    return counters != NULL ? (int)n : -ENOMEM;
}

/* Hand b's text to an snprintf-style caller and free b: the length the
 * whole text needs, the text cut to size - 1 bytes and NUL-terminated. */
static int snprint_out(struct prof_buf *b, char *buf, size_t size)
{
    int n = (int)b->len;

    if (size > 0) {
        size_t k = b->len < size - 1 ? b->len : size - 1;
        memcpy(buf, b->data, k);
        buf[k] = '\0';
    }
    prof_buf_free(b);
    return n;
}

PROF_API int prof_summary_snprint(char *buf, size_t size, int format)
{
    struct prof_buf b = {0};
    int err;

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
    prof_rt_unlock();
    if (b.failed) {
        prof_buf_free(&b);
        return -ENOMEM;
    }
    return snprint_out(&b, buf, size);
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
    prof_rt_unlock();
    err = b.failed ? -ENOMEM : 0;
    if (!err) {
        /* A pipe whose reader has gone gives -EIO, not death by SIGPIPE
         * (docs/CONFIG.md): block it while writing, consume the one we
         * caused. */
        sigset_t old;
        int saved = 0;

        prof_sigpipe_block(&old);
        errno = 0;
        if (fwrite(b.data, 1, b.len, f) != b.len || fflush(f) != 0) {
            saved = errno;
            err = -EIO;
        }
        prof_sigpipe_restore(&old, -saved);
    }
    prof_buf_free(&b);
    return err;
}

PROF_API void prof_set_summary_handler(prof_summary_fn fn, void *user)
{
    prof_rt_lock();
    prof_collector_set_summary_handler_locked(fn, user);
    prof_rt_unlock();
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
    prof_loss_reset();
    prof_rt_unlock();
    return 0;
}

PROF_API int prof_shutdown(void)
{
    if (prof_collector_is_self())
        return -EDEADLK;
    pthread_mutex_lock(&control_lock);
    prof_log_hold();
    prof_rt_lock();
    if (!prof_rt.started || prof_rt.shut_down || prof_rt.fork_pending) {
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

/* ------------------------------------------------------------------------ */
/* Windows and ranks (docs/DISTRIBUTED.md). The reduction itself belongs to
 * the caller's communicator; here are only the window's numbers, read
 * under the lock for ranks.c, and the delivery of its table. */

PROF_API int prof_window_stats_list(prof_stage_stats *out, size_t cap, uint64_t *window_end_step)
{
    const prof_stage_stats *rows;
    size_t n;

    if (out == NULL && cap > 0)
        return -EINVAL;
    prof_rt_lock();
    if (!prof_rt.started) {
        prof_rt_unlock();
        return -ESRCH;
    }
    if ((rows = prof_stats_window_last(&n, NULL, NULL)) == NULL) {
        prof_rt_unlock();
        return -ENOENT;
    }
    if (cap > 0)
        memcpy(out, rows, (n < cap ? n : cap) * sizeof *out);
    /* The kept window ended where the current one began. */
    if (window_end_step != NULL)
        *window_end_step = prof_rt.window_start_step;
    prof_rt_unlock();
    return (int)n;
}

PROF_API uint64_t prof_step_count(void)
{
    return __atomic_load_n(&prof_steps, __ATOMIC_RELAXED);
}

/* 0: not started, 1: cross-rank summaries on, -1: abandoned for good.
 * Runtime lock. */
static int ranks_state;
static uint64_t ranks_timeout_ns;

#define PROF_RANKS_TIMEOUT_DEFAULT_NS (60ull * 1000000000ull)

PROF_API int prof_ranks_start(uint64_t *every_steps, uint64_t *timeout_ns)
{
    static int logged_time, logged_none, logged_timeout;
    const struct prof_config *cfg = prof_config_get();
    const char *v = getenv("PROF_RANKS");
    int err = 0;

    if (v != NULL && strcmp(v, "0") == 0)
        return -EPERM;
    if (cfg->every_ns) {
        prof_log_once(&logged_time, "cross-rank summaries need step windows, and "
                      "PROF_SUMMARY_EVERY is time-based (ranks agree on steps, not on seconds): "
                      "set PROF_SUMMARY_EVERY=Nsteps; each rank prints its own summaries");
        return -EINVAL;
    }
    if (!cfg->every_steps) {
        prof_log_once(&logged_none, "cross-rank summaries need PROF_SUMMARY_EVERY=Nsteps; "
                      "none will be printed");
        return -ENOENT;
    }
    prof_rt_lock();
    if (ranks_state < 0) {
        err = -ECANCELED;
    } else if (ranks_state == 0) {
        const char *t = getenv("PROF_RANKS_TIMEOUT");
        uint64_t ns = 0, steps = 0;
        ranks_timeout_ns = PROF_RANKS_TIMEOUT_DEFAULT_NS;
        if (t != NULL && *t != '\0') {
            if (prof_parse_every(t, &ns, &steps) == 0 && ns > 0)
                ranks_timeout_ns = ns;
            else
                prof_log_once(&logged_timeout, "PROF_RANKS_TIMEOUT=%s: not a duration such as "
                              "30s or 500ms; using 60s", t);
        }
        ranks_state = 1;
        __atomic_store_n(&prof_ranks_muted, 1, __ATOMIC_RELAXED);
    }
    prof_rt_unlock();
    if (err == 0) {
        if (every_steps != NULL)
            *every_steps = cfg->every_steps;
        if (timeout_ns != NULL)
            *timeout_ns = ranks_timeout_ns;
    }
    return err;
}

PROF_API int prof_ranks_snapshot(void *state, size_t size, int rank)
{
    const prof_stage_stats *rows = NULL;
    uint64_t start = 0, wall = 0, end;
    size_t n = 0;
    int err;

    if (state == NULL || size < PROF_RANKS_STATE_SIZE)
        return -EINVAL;
    prof_flush();
    prof_rt_lock();
    if (prof_rt.started)
        rows = prof_stats_window_last(&n, &start, &wall);
    end = prof_rt.window_start_step;
    err = prof_ranks_snapshot_rows(state, size, rank, rows, n, rows ? end : 0,
                                   end > start ? end - start : 0, wall);
    prof_rt_unlock();
    return err;
}

static int ranks_format_buf(struct prof_buf *b, const void *state, int format)
{
    if (state == NULL || ((uintptr_t)state % 8) != 0)
        return -EINVAL;
    if (format == PROF_FORMAT_DEFAULT)
        format = prof_config_get()->format;
    if (format != PROF_FORMAT_TEXT && format != PROF_FORMAT_JSON)
        return -EINVAL;
    return prof_ranks_format_state(b, state, format);
}

PROF_API int prof_ranks_format(const void *state, int format, char *buf, size_t size)
{
    struct prof_buf b = {0};
    int err;

    if (buf == NULL && size > 0)
        return -EINVAL;
    if ((err = ranks_format_buf(&b, state, format)) != 0) {
        prof_buf_free(&b);
        return err;
    }
    return snprint_out(&b, buf, size);
}

PROF_API int prof_ranks_emit(const void *state)
{
    struct prof_buf b = {0};
    int err;

    if (prof_collector_is_self())
        return -EDEADLK;
    if ((err = ranks_format_buf(&b, state, PROF_FORMAT_DEFAULT)) != 0) {
        prof_buf_free(&b);
        return err;
    }
    prof_rt_lock();
    err = prof_summary_deliver_locked(&b);
    prof_rt_unlock();
    return err;
}

PROF_API void prof_ranks_abandon(const char *why)
{
    int was;

    prof_rt_lock();
    was = ranks_state;
    ranks_state = -1;
    __atomic_store_n(&prof_ranks_muted, 0, __ATOMIC_RELAXED);
    prof_rt_unlock();
    if (was >= 0)
        prof_log("cross-rank summary failed (%s); each rank prints its own summaries again",
                 why != NULL ? why : "no reason given");
}
