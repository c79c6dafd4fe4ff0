/* collector.c - the collector thread and what it drives, on the lifecycle
 * floor: the drain (drain.c) on each wake, the summaries it marks due
 * queued after it, periodic and final reports, start, stop and fork.
 *
 * The thread sleeps on the wake word (wake.h) for PROF_COLLECT_PERIOD_NS
 * (or less when a timed summary is due), is woken early by prof_step when
 * a step summary is due and by any thread whose ring is half full, and on
 * each wake, under the runtime lock, drains every ring. */
#include <signal.h>
#include <string.h>
#include <time.h>

#include "prof.h"
#include "children.h"
#include "clock.h"
#include "collector.h"
#include "cuda.h"
#include "drain.h"
#include "drain_gpu.h"
#include "drain_window.h"
#include "env.h"
#include "gpu_busy.h"
#include "kstats.h"
#include "log.h"
#include "loss.h"
#include "memory.h"
#include "runtime.h"
#include "sigchain.h"
#include "stats.h"
#include "summary_out.h"
#include "trace.h"
#include "wake.h"

int prof_pending_signal;

/* The collector has taken the runtime lock once (see
 * prof_collector_start_locked). */
static int collector_ready;
static pthread_cond_t collector_ready_cond = PTHREAD_COND_INITIALIZER;

int prof_collector_is_self(void)
{
    return prof_summary_in_handler() || prof_rt_on_collector();
}

/* The latest due step whose summary was not made because the queue was
 * full (0: none; PROF_SUMMARY_EVERY=Nsteps). The drain marks a step due
 * once, so the summary is owed here, never forgotten: its window stays
 * open, the next due step's summary covers it (merged_windows), and if no
 * due step comes after it (the run's last ones came while the writer was
 * behind), the run's end makes it before the final summary, whatever the
 * queue holds. A prof_reset() forgets it with the window's numbers. */
static uint64_t owed_step;

/* A summary as of step `step`, queued. A periodic one closes its window:
 * the next starts at cut_ns (the step's own time when a step record cut
 * it). The wall time shown runs to now, not to the cut: other threads'
 * zones are in up to where the drain is, so the wall time must cover them
 * too (shares never pass 100% for a stage on one thread). `force`: made
 * even when the queue is full (the run's end: one more, bounded). */
static void summary_queue_locked(enum prof_summary_kind kind, uint64_t step, uint64_t cut_ns,
                                 int force)
{
    uint64_t now = prof_clock_now_ns();
    int err;

    /* The writer is behind: the window stays open and the next summary
     * covers it too (merged_windows); the collector never waits. */
    if (kind == PROF_KIND_PERIODIC && !force && prof_summary_queue_full()) {
        if (prof_config_get()->every_steps && step > owed_step)
            owed_step = step;
        return;
    }
    err = prof_summary_queue_locked(kind, step, now);

    if (kind != PROF_KIND_PERIODIC)
        return;
    owed_step = 0;
    if (err != 0)
        prof_stats_tree();    /* built by the summary, when there is one */
    /* The rows the summary's JSON window section has. */
    prof_stats_window_keep(now > prof_rt.window_start_ns ? now - prof_rt.window_start_ns : 0,
                           PROF_SUMMARY_JSON_MAX_ROWS);
    prof_stats_window_reset();
    prof_rt.window_start_ns = cut_ns < now ? cut_ns : now;
    prof_rt.window_start_step = step;
    prof_rt.dropped_window = 0;
    prof_loss_window_reset();
    prof_gpu_window_close();
    prof_kstats_window_close();
    prof_mem_window_close();
}

/* The drain, and the summary it marked due queued. */
void prof_collect_locked(void)
{
    uint64_t step, cut_ns;

    prof_drain_locked();
    if (prof_drain_due_take(&step, &cut_ns))
        summary_queue_locked(PROF_KIND_PERIODIC, step, cut_ns, 0);
}

void prof_summary_emit_locked(enum prof_summary_kind kind)
{
    uint64_t step, cut_ns;
    int end = kind == PROF_KIND_FINAL;

    prof_drain_window_release_locked();   /* an earlier step's window comes first */
    if (prof_drain_due_take(&step, &cut_ns))
        summary_queue_locked(PROF_KIND_PERIODIC, step, cut_ns, end);
    /* The windows of due steps whose summaries the queue refused, with
     * no due step after them: theirs comes before the final one. */
    if (end && owed_step > prof_rt.window_start_step)
        summary_queue_locked(PROF_KIND_PERIODIC, owed_step, prof_clock_now_ns(), 1);
    summary_queue_locked(kind, __atomic_load_n(&prof_steps, __ATOMIC_RELAXED),
                         prof_clock_now_ns(), 0);
}

void prof_collector_atfork_prepare(void)
{
    prof_summary_out_atfork_prepare();
}

void prof_collector_atfork_parent(void)
{
    prof_summary_out_atfork_parent();
}

void prof_collector_atfork_child(void)
{
    pthread_cond_t fresh = PTHREAD_COND_INITIALIZER;

    /* A thread of the parent may have been waiting on it. */
    collector_ready_cond = fresh;
    prof_summary_out_atfork_child();
    prof_drain_atfork_child();
    owed_step = 0;      /* the parent's window */
}

void prof_collect_all_locked(void)
{
    /* Windows are cut at their steps here too, one summary written at a
     * time, while the rings have little waiting; a thread that steps on
     * meanwhile is not chased for ever: past 64 windows, one drain to the
     * end merges the rest. */
    prof_drain_exact_steps = 1;
    for (int i = 0; i < 64; i++) {
        prof_drain_stopped = 0;
        prof_collect_locked();
        if (!prof_drain_stopped)
            break;
    }
    prof_drain_exact_steps = 0;
    if (prof_drain_stopped) {
        prof_drain_stopped = 0;
        prof_collect_locked();
    }
}

void prof_final_report_locked(void)
{
    uint64_t deadline;
    size_t incomplete;

    prof_rt.final_reporting = 1;
    prof_collect_all_locked();
    /* GPU zones still running get 2 s, waited for with the lock released
     * (threads that still record or flush go on meanwhile). */
    for (deadline = prof_clock_now_ns() + 2000000000u;;) {
        struct timespec ms = {0, 1000000};

        prof_drain_gpu_poll_locked();
        if (!prof_cuda_waiting() || prof_clock_now_ns() >= deadline)
            break;
        prof_rt_unlock();
        nanosleep(&ms, NULL);
        prof_rt_lock();
    }
    prof_drain_gpu_final_locked();
    incomplete = prof_cuda_abandon();
    if (incomplete)
        prof_log("%zu GPU zones had not completed 2 s after shutdown began; they are not counted",
                 incomplete);
    /* The windows since the last step summary whose step records were
     * dropped get theirs before the final one. */
    prof_periodic_locked(0);
    /* A forked child that recorded nothing stays silent. */
    if (!prof_rt.forked_from || prof_stats_nstages() > 0)
        prof_summary_emit_locked(PROF_KIND_FINAL);
    prof_trace_close();
    prof_children_finished();
    prof_summary_out_close();
    prof_rt.final_reporting = 0;
}

void prof_periodic_locked(uint64_t now)
{
    const struct prof_config *cfg = prof_config_get();
    uint64_t due = prof_rt.step_due_drained;

    /* A forked child that has recorded nothing stays silent (as at exit). */
    int quiet = prof_rt.forked_from && prof_stats_nstages() == 0;

    /* A step whose record was dropped (full ring) still gets its summary,
     * labelled with that step. Only a step marked due before the last
     * drain began counts, and only if that drain went to the end of every
     * ring: a later one's record may still be in its ring, and taking it
     * here would swallow the summaries of the steps before it. */
    if (cfg->every_steps && due > prof_rt.summary_step_done && !prof_drain_stopped) {
        prof_rt.summary_step_done = due;
        if (!quiet)
            summary_queue_locked(PROF_KIND_PERIODIC, due, prof_clock_now_ns(), 0);
    }
    /* Timed summaries come from the process that was started, not from
     * each of its forked workers (8 DataLoader workers would make 9 tables
     * a period); a worker keeps its final summary (docs/CONFIG.md). */
    if (cfg->every_ns && now >= prof_rt.next_summary_ns) {
        if (!quiet && !prof_rt.forked_from)
            prof_summary_emit_locked(PROF_KIND_PERIODIC);
        prof_rt.next_summary_ns = now + cfg->every_ns;
    }
}

static void end_by_signal(int sig)
{
    prof_rt.shut_down = 1;
    __atomic_store_n(&prof_on_, 0, __ATOMIC_RELAXED);
    prof_final_report_locked();
    prof_rt_unlock();
    /* Let the signal do what it would have done without us. */
    prof_signal_resend(sig);
    prof_rt_lock();
}

static void *collector_main(void *arg)
{
    (void)arg;
    /* Named, so that top -H, gdb and py-spy say what it is. */
    pthread_setname_np(pthread_self(), "prof-collector");
    prof_rt_lock();
    collector_ready = 1;
    pthread_cond_broadcast(&collector_ready_cond);
    while (!prof_rt.stopping) {
        const struct prof_config *cfg = prof_config_get();
        uint64_t now = prof_clock_now_ns();
        uint64_t wait = PROF_COLLECT_PERIOD_NS;
        int sig, again = prof_drain_stopped;

        if (cfg->every_ns && prof_rt.next_summary_ns > now && prof_rt.next_summary_ns - now < wait)
            wait = prof_rt.next_summary_ns - now;
        prof_rt_unlock();
        /* The trace is written here, with the lock released: threads that
         * take it (a first zone, prof_flush, fork) never wait on the disk. */
        prof_trace_write();
        /* A drain that stopped at a due step goes on at once. */
        if (!again)
            prof_wake_wait(now + wait);
        prof_rt_lock();
        if (prof_rt.stopping)
            break;
        prof_drain_exact_steps = 1;
        prof_drain_stopped = 0;
        prof_collect_locked();
        prof_drain_exact_steps = 0;
        if ((sig = __atomic_load_n(&prof_pending_signal, __ATOMIC_ACQUIRE)) != 0) {
            end_by_signal(sig);
            break;
        }
        prof_periodic_locked(prof_clock_now_ns());
        now = prof_clock_now_ns();
        prof_drain_tick(now);    /* prof-top, PROF_METRICS */
    }
    prof_rt_unlock();
    return NULL;
}

int prof_collector_start_locked(void)
{
    pthread_attr_t attr;
    sigset_t all, old;
    int err;

    if (prof_rt.collector_running) {
        /* Another thread started it and waits for it below (with the lock
         * released): wait with it, so that every caller returns with the
         * collector up. */
        while (!collector_ready)
            pthread_cond_wait(&collector_ready_cond, &prof_rt.lock);
        __atomic_store_n(&prof_rt.ready, 1, __ATOMIC_RELEASE);
        return 0;
    }

    /* The collector takes no signals: the program's handlers must run on
     * the program's threads. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_attr_init(&attr);
    collector_ready = 0;
    err = pthread_create(&prof_rt.collector_id, &attr, collector_main, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0) {
        static int logged;
        /* Nothing would drain the rings: switch recording off rather than
         * have every thread's first zone try (and report) again. */
        __atomic_store_n(&prof_on_, 0, __ATOMIC_RELAXED);
        prof_log_once(&logged, "cannot start the collector thread (%s); recording is off",
                      strerror(err));
        return -err;
    }
    prof_rt.stopping = 0;
    __atomic_store_n(&prof_rt.collector_running, 1, __ATOMIC_RELEASE);
    /* Wait until the new thread holds the lock (the wait releases it), so
     * that it has finished starting: from then on the collector runs only
     * with a lock that the fork handlers take, and a fork can never catch
     * it halfway through thread start-up or an allocation. That matters
     * under allocators that are not fork-safe (GCC 12's AddressSanitizer:
     * the child's first allocation waited forever for a lock a starting
     * thread held at the fork). */
    while (!collector_ready)
        pthread_cond_wait(&collector_ready_cond, &prof_rt.lock);
    /* Release: a thread that sees ready may attach without the lock. */
    __atomic_store_n(&prof_rt.ready, 1, __ATOMIC_RELEASE);
    prof_children_join(prof_rt.forked_from);   /* a forked worker: its parent watches it */
    return 0;
}

void prof_collector_stop(void)
{
    prof_rt_lock();
    if (!__atomic_load_n(&prof_rt.collector_running, __ATOMIC_RELAXED) || prof_collector_is_self()) {
        prof_rt_unlock();
        return;
    }
    prof_rt.stopping = 1;
    __atomic_store_n(&prof_rt.ready, 0, __ATOMIC_RELAXED);
    prof_rt_unlock();
    prof_wake_collector();
    pthread_join(prof_rt.collector_id, NULL);
    prof_rt_lock();
    __atomic_store_n(&prof_rt.collector_running, 0, __ATOMIC_RELEASE);
    prof_rt.stopping = 0;
    prof_rt_unlock();
}

