/* live.c - the live table, for prof-top and the metrics.
 *
 * Once a second the collector takes a snapshot of the heaviest stages with
 * the runtime lock held (numbers and interned name pointers only), then,
 * with the lock released, writes it into this process's file in shared
 * memory (live_file.c) and, with PROF_METRICS, hands it to the metrics
 * thread (metrics.c formats it there). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "prof.h"
#include "clock.h"
#include "env.h"
#include "gpu_busy.h"
#include "live.h"
#include "live_file.h"
#include "memory.h"
#include "log.h"
#include "metrics.h"
#include "process.h"
#include "registry.h"
#include "runtime.h"
#include "sink.h"

static uint64_t next_ns;                /* the next tick publishes from then */

/* Two snapshots: the collector fills one (lock held) and writes it to the
 * live file (lock released) while the metrics thread formats the other,
 * so the collector never waits on a socket or the metrics' formatting. A
 * buffer is FREE, FILLING (the collector's), PENDING (for the metrics
 * thread, not taken yet) or BUSY (being formatted). */
enum { FREE, FILLING, PENDING, BUSY };
static struct prof_live_snap snaps[2];
static int state[2];
static pthread_mutex_t pub_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pub_cond = PTHREAD_COND_INITIALIZER;
static pthread_t pub_thread;
static int pub_running, pub_stop, pub_pid;
static uint64_t last_publish_ns;        /* the collector's */
static uint64_t last_metrics_ns;        /* under pub_lock */

static uint64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t real_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int prof_live_snap_take_locked(struct prof_live_snap *s)
{
    const struct prof_process *proc = prof_process_get();
    uint64_t now = prof_clock_now_ns();

    /* The stages' numbers: what the statistics publish (stats_snap.h). */
    if (prof_stats_snap_take_locked(&s->table, PROF_LIVE_MAX_ROWS) != 0)
        return -ENOMEM;
    s->pid = proc->pid;
    s->rank = proc->rank;
    memcpy(s->program, proc->program, sizeof s->program);
    memcpy(s->host, proc->host, sizeof s->host);
    s->real_ns = real_ns();
    s->run_ns = now > prof_rt.start_ns ? now - prof_rt.start_ns : 0;
    s->win_ns = now > prof_rt.window_start_ns ? now - prof_rt.window_start_ns : 0;
    s->win_start_step = prof_rt.window_start_step;
    s->steps = __atomic_load_n(&prof_steps, __ATOMIC_RELAXED);
    s->dropped = prof_rt.dropped;
    s->threads = 0;
    for (const struct prof_thread *t = prof_threads; t != NULL; t = t->next)
        s->threads += !__atomic_load_n(&t->exited, __ATOMIC_RELAXED);
    s->ngpus = prof_gpu_live_locked(s->gpus, PROF_LIVE_MAX_GPUS, s->win_ns, s->run_ns);
    {
        struct prof_mem_figures win, run;

        prof_mem_figures(1, &win);
        prof_mem_figures(0, &run);
        s->mem_known = win.known && run.known;
        s->rss = run.rss;
        s->rss_peak_win = win.peak;
        s->rss_peak_run = run.peak;
    }
    s->nkst = 0;
    for (size_t i = 0; i < s->table.len && s->nkst < PROF_LIVE_MAX_KSTAGES; i++) {
        const struct prof_stats_snap_row *r = &s->table.rows[i];

        if ((r->flags & PROF_STAGE_GPU) && prof_kstats_live_locked(r->stage, &s->kst[s->nkst].k))
            s->kst[s->nkst++].row = (uint32_t)i;
    }
    return 0;
}

void prof_live_snap_free(struct prof_live_snap *s)
{
    prof_stats_snap_free(&s->table);
    memset(s, 0, sizeof *s);
}

static int wanted(void)
{
    const struct prof_config *cfg = prof_config_get();

    return cfg->live || prof_metrics_wanted();
}

static void *publisher_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "prof-metrics-fmt");
    pthread_mutex_lock(&pub_lock);
    for (;;) {
        int i = state[0] == PENDING ? 0 : state[1] == PENDING ? 1 : -1;
        uint64_t t0;

        if (i < 0) {
            if (pub_stop)
                break;
            pthread_cond_wait(&pub_cond, &pub_lock);
            continue;
        }
        state[i] = BUSY;
        pthread_mutex_unlock(&pub_lock);
        t0 = mono_ns();
        prof_metrics_publish(&snaps[i]);
        pthread_mutex_lock(&pub_lock);
        last_metrics_ns = mono_ns() - t0;
        state[i] = FREE;
    }
    pthread_mutex_unlock(&pub_lock);
    return NULL;
}

/* In a forked child the publisher thread is gone, and its lock may have
 * been held at the fork: start afresh (the collector is the only caller). */
static void publisher_check_fork(void)
{
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    int pid = prof_process_get()->pid;

    if (pub_pid == pid)
        return;
    pub_lock = m;
    pub_cond = c;
    state[0] = state[1] = FREE;
    pub_running = pub_stop = 0;
    pub_pid = pid;
}

static int publisher_start(void)
{
    sigset_t all, old;
    int err;

    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    err = pthread_create(&pub_thread, NULL, publisher_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0) {
        static int logged;

        prof_log_once(&logged, "PROF_METRICS: cannot start its thread (%s); no metrics",
                      strerror(err));
        return -err;
    }
    pub_running = 1;
    return 0;
}

void prof_live_tick_locked(uint64_t now)
{
    static int metrics_failed;
    int metrics = prof_metrics_wanted();
    uint64_t t0, t1, t2;
    int i;

    if (now < next_ns || !wanted())
        return;
    next_ns = now + PROF_LIVE_PERIOD_NS;
    publisher_check_fork();
    if (metrics && !pub_running && !metrics_failed && publisher_start() != 0)
        metrics_failed = 1;
    pthread_mutex_lock(&pub_lock);
    i = state[0] == FREE ? 0 : state[1] == FREE ? 1 : -1;
    if (i >= 0)
        state[i] = FILLING;
    pthread_mutex_unlock(&pub_lock);
    if (i < 0)
        return;    /* the metrics thread is behind: this second is skipped */
    t0 = mono_ns();
    if (prof_live_snap_take_locked(&snaps[i]) != 0) {
        pthread_mutex_lock(&pub_lock);
        state[i] = FREE;
        pthread_mutex_unlock(&pub_lock);
        return;
    }
    t1 = mono_ns();
    snaps[i].snap_ns = t1 - t0;
    snaps[i].publish_ns = last_publish_ns;
    pthread_mutex_lock(&pub_lock);
    snaps[i].metrics_ns = last_metrics_ns;
    pthread_mutex_unlock(&pub_lock);
    prof_rt_unlock();
    prof_live_publish(&snaps[i]);
    t2 = mono_ns();
    prof_rt_lock();
    last_publish_ns = t2 - t1;
    pthread_mutex_lock(&pub_lock);
    if (pub_running) {
        /* An older snapshot not taken yet is replaced by this one. */
        if (state[!i] == PENDING)
            state[!i] = FREE;
        state[i] = PENDING;
        pthread_cond_signal(&pub_cond);
    } else {
        state[i] = FREE;
    }
    pthread_mutex_unlock(&pub_lock);
    /* The snapshot holds the lock (a table of 100k stages: tens of ms):
     * publish less often then, so that it holds it for at most a
     * PROF_LIVE_LOCK_SHARE-th of the time. */
    if ((t1 - t0) * PROF_LIVE_LOCK_SHARE > PROF_LIVE_PERIOD_NS)
        next_ns = now + (t1 - t0) * PROF_LIVE_LOCK_SHARE;
}

void prof_live_stop(void)
{
    int took = -1;

    if (!wanted())
        return;
    if (pub_running && pub_pid == prof_process_get()->pid) {
        pthread_mutex_lock(&pub_lock);
        pub_stop = 1;
        pthread_cond_signal(&pub_cond);
        pthread_mutex_unlock(&pub_lock);
        pthread_join(pub_thread, NULL);
        pub_running = pub_stop = 0;
        state[0] = state[1] = FREE;
    }
    /* The metrics file gets the final numbers; the server and the live
     * file go. */
    if (prof_config_get()->metrics == PROF_METRICS_FILE && prof_metrics_wanted()) {
        prof_rt_lock();
        if (prof_rt.started)
            took = prof_live_snap_take_locked(&snaps[0]);
        prof_rt_unlock();
        if (took == 0)
            prof_metrics_publish(&snaps[0]);
    }
    prof_metrics_stop();
    prof_live_file_remove();
    prof_live_snap_free(&snaps[0]);
    prof_live_snap_free(&snaps[1]);
    next_ns = 0;
}

/* The live view as a sink of the collector (sink.h): periodic only. */
const struct prof_sink prof_live_sink = {
    .name = "live",
    .tick = prof_live_tick_locked,
};
