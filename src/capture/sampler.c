/* sampler.c - on-CPU samples for each stage, at no cost to the zone.
 *
 * Design. Each thread that records gets, when it attaches, a POSIX timer
 * on its own CPU-time clock (timer_create(CLOCK_THREAD_CPUTIME_ID) with
 * SIGEV_THREAD_ID: the Go runtime's profiler uses the same timer). Such a
 * timer advances only while its thread runs, so it fires only on a thread
 * that is on a CPU: a thread blocked in read, poll, a sleep, a futex (a
 * queue, a lock, the GIL) or preempted by another process takes no signal
 * and is never interrupted by prof. Its handler writes one record into the
 * thread's own ring, in order with the zone records: the CPU time the
 * signal stands for ((1 + overruns) periods: the kernel fires the timer at
 * its tick, so one signal may stand for several periods), and the depth
 * of the innermost zone open at that instant. The collector adds it to
 * that depth of the thread and gives it to the next zone record of that
 * depth, the zone that was open (selftime.c): a zone's CPU samples come
 * with its self time, in the same window, to the same stage and path.
 *
 * The zone's path does not change: it neither reads a clock nor tests a
 * flag for this. The handler uses the ring's re-entry guard: a signal that
 * lands inside a push (the close, a slow path) finds `busy` set and keeps
 * its CPU time for the thread's next sample instead (cpu_carry), so a
 * sample never tears a record; so does one that finds half of the ring in
 * use, so that samples never take the slots a waiting collector leaves
 * to the zones; one that lands in the few instructions of
 * an open between its level store and its name store counts for the zone
 * being opened, whose level is already claimed. A thread with no zone
 * open pushes nothing.
 *
 * Safe to leave on: the handler is installed with SA_RESTART, so reads,
 * waits and condition waits restart; calls the kernel never restarts
 * (nanosleep, poll, epoll_wait) are interrupted only by a signal that
 * arrives while the thread is in them, and this one arrives only while the
 * thread runs (tests/integration/test_cpu_eintr counts them). The signal
 * is a realtime one (PROF_SAMPLER_SIGNAL), not SIGPROF, so a program's own
 * profiler (setitimer, gperftools) keeps its signal. If the program
 * installs a handler of its own for ours, the collector sees it at its
 * next pass, deletes every timer and says so once: the column then shows
 * what was sampled before. Timers are not inherited across fork: the
 * forked child's thread starts its own (registry.c), and threads created
 * later do at their attach. A thread's timer is deleted when it exits.
 * While recording is off (prof_enable(0), after prof_shutdown) the
 * collector disarms every timer at its next pass, and arms them again
 * when recording is back on. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prof.h"
#include "env.h"
#include "log.h"
#include "registry.h"
#include "process.h"
#include "sampler.h"

/* A realtime signal near the top of the range: glibc keeps the lowest ones
 * for itself, and libraries that take a realtime signal take SIGRTMIN. */
#define PROF_SAMPLER_SIGNAL (SIGRTMAX - 3)

#ifndef sigev_notify_thread_id
#  define sigev_notify_thread_id _sigev_un._tid
#endif

static int installed;            /* the handler is ours */
static int stopped;              /* the program took the signal over */
static int stop_said;

static void on_sample(int sig, siginfo_t *si, void *ctx)
{
    struct prof_thread_ *t = prof_thread_self_;
    struct prof_thread *s = (struct prof_thread *)t;
    int saved = errno;
    uint64_t ns;
    uint32_t level;

    (void)sig;
    (void)ctx;
    /* Only our timers' signals, on the thread that owns the timer (a
     * signal queued by its previous owner's timer, or sent by kill, is
     * not a sample). */
    if (t == NULL || si == NULL || si->si_code != SI_TIMER || si->si_value.sival_ptr != s)
        goto out;
    ns = (1 + (uint64_t)(si->si_overrun > 0 ? si->si_overrun : 0)) * PROF_SAMPLER_PERIOD_NS +
         s->cpu_carry;
    level = __atomic_load_n(&t->depth, __ATOMIC_RELAXED) & PROF_DEPTH_LEVEL_;
    /* Outside every zone, or with recording switched off (prof_enable(0),
     * after prof_shutdown: the rings may not be drained any more). */
    if (level == 0 || !(__atomic_load_n(&prof_on_, __ATOMIC_RELAXED) & PROF_ON_RECORD_)) {
        s->cpu_carry = 0;        /* outside every zone: no stage's time */
        goto out;
    }
    /* Inside a push, or with half of the ring's slots in use (the
     * collector is behind: the slots left are the zones'), the next sample
     * carries it. Acquire on tail, as the ring's own check of room. */
    if (t->head - __atomic_load_n(&t->tail, __ATOMIC_ACQUIRE) >= t->wake_fill ||
        !prof_busy_enter_(t)) {
        s->cpu_carry = ns;
        goto out;
    }
    s->cpu_carry = 0;
    {
        /* Read after the level: an open claims its level before it names
         * it, so a name read here may be the previous zone's of that
         * level. The collector goes by the depth; the name is for the
         * record's readers only. */
        const char *name = level <= PROF_MAX_DEPTH_
                               ? __atomic_load_n(&t->names[level - 1], __ATOMIC_RELAXED)
                               : NULL;
        uint64_t dropped = t->dropped;

        prof_ring_push_(t, prof_ticks_now_(), ns, name, t->path, level - 1, PROF_RECORD_CPU_);
        /* A full ring dropped it: counted with the drops; its time goes
         * with the next sample. */
        if (t->dropped != dropped)
            s->cpu_carry = ns;
    }
    prof_busy_leave_(t);
out:
    errno = saved;
}

int prof_sampler_install(void)
{
    struct sigaction sa;

    if (installed)
        return stopped ? -1 : 0;
    if (!prof_config_get()->cpu)
        return -1;
    /* A signal someone else holds is never taken: the program's own use of
     * it, or another copy of the runtime in this process (a plugin that
     * carries a static libprof), whose timers would then run this copy's
     * handler on that copy's threads. Another copy's is said in the
     * two-copies line already. */
    if (sigaction(PROF_SAMPLER_SIGNAL, NULL, &sa) == 0 &&
        ((sa.sa_flags & SA_SIGINFO) ? sa.sa_sigaction != NULL
                                     : sa.sa_handler != SIG_DFL)) {
        if (!prof_process_other_copy())
            prof_log("signal %d already has a handler (the program's): the on-CPU sampler "
                     "leaves it alone, no cpu%% column (PROF_CPU=0 says this is wanted)",
                     PROF_SAMPLER_SIGNAL);
        return -1;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sample;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    if (sigaction(PROF_SAMPLER_SIGNAL, &sa, NULL) != 0) {
        prof_log("cannot install the on-CPU sampler's signal handler (%s): no cpu%% column",
                 strerror(errno));
        return -1;
    }
    __atomic_store_n(&installed, 1, __ATOMIC_RELEASE);
    return 0;
}

int prof_sampler_installed(void)
{
    return __atomic_load_n(&installed, __ATOMIC_ACQUIRE);
}

int prof_sampler_on(void)
{
    return __atomic_load_n(&installed, __ATOMIC_ACQUIRE) &&
           !__atomic_load_n(&stopped, __ATOMIC_ACQUIRE);
}

void prof_sampler_thread_start(struct prof_thread *t)
{
    struct sigevent ev;
    struct itimerspec it;
    timer_t id;

    if (!prof_sampler_on() || __atomic_load_n(&t->cpu_timed, __ATOMIC_ACQUIRE))
        return;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = PROF_SAMPLER_SIGNAL;
    ev.sigev_value.sival_ptr = t;
    ev.sigev_notify_thread_id = (pid_t)t->tid;
    t->cpu_carry = 0;
    if (timer_create(CLOCK_THREAD_CPUTIME_ID, &ev, &id) != 0)
        return;                  /* out of timers: this thread's stages show no cpu% */
    it.it_interval.tv_sec = it.it_value.tv_sec = 0;
    it.it_interval.tv_nsec = it.it_value.tv_nsec = PROF_SAMPLER_PERIOD_NS;
    if (timer_settime(id, 0, &it, NULL) != 0) {
        timer_delete(id);
        return;
    }
    t->cpu_timer = id;
    __atomic_store_n(&t->cpu_ever, 1, __ATOMIC_RELAXED);
    /* Release: a deleter that sees the flag sees the id. */
    __atomic_store_n(&t->cpu_timed, 1, __ATOMIC_RELEASE);
}

void prof_sampler_thread_stop(struct prof_thread *t)
{
    /* One of the owner's exit and the collector's stop deletes it (the
     * compare-exchange from 1), and never while the collector is setting
     * it (2): a timer id deleted is free for the program's next timer,
     * which the collector must never touch. */
    for (;;) {
        int v = __atomic_load_n(&t->cpu_timed, __ATOMIC_ACQUIRE);

        if (v == 0)
            return;
        if (v == 1 && __atomic_compare_exchange_n(&t->cpu_timed, &v, 0, 0, __ATOMIC_ACQ_REL,
                                                  __ATOMIC_ACQUIRE)) {
            timer_delete(t->cpu_timer);
            return;
        }
        sched_yield();           /* the collector's timer_settime, a moment */
    }
}

/* Arm (on) or disarm t's timer from the collector, unless its thread is
 * deleting it. */
static void thread_arm(struct prof_thread *t, int on)
{
    int one = 1;
    struct itimerspec it;

    if (!__atomic_compare_exchange_n(&t->cpu_timed, &one, 2, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_RELAXED))
        return;
    memset(&it, 0, sizeof it);
    if (on)
        it.it_interval.tv_nsec = it.it_value.tv_nsec = PROF_SAMPLER_PERIOD_NS;
    timer_settime(t->cpu_timer, 0, &it, NULL);
    t->cpu_paused = !on;
    /* Release: the owner's exit sees 1 again only after the call. */
    __atomic_store_n(&t->cpu_timed, 1, __ATOMIC_RELEASE);
}

void prof_sampler_atfork_child(struct prof_thread *t)
{
    if (t == NULL)
        return;
    __atomic_store_n(&t->cpu_timed, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&t->cpu_ever, 0, __ATOMIC_RELAXED);
    t->cpu_paused = 0;
    prof_sampler_thread_start(t);
}

int prof_sampler_check_locked(struct prof_thread *threads)
{
    struct sigaction cur;

    if (!__atomic_load_n(&installed, __ATOMIC_ACQUIRE))
        return 0;
    if (!stopped) {
        if (sigaction(PROF_SAMPLER_SIGNAL, NULL, &cur) != 0 ||
            ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sample)) {
            /* While recording is off (prof_enable(0), prof_shutdown) no
             * sample is kept: the timers are disarmed, so that a program
             * that switched prof off takes no signal from it. */
            int on = (__atomic_load_n(&prof_on_, __ATOMIC_RELAXED) & PROF_ON_RECORD_) != 0;

            for (struct prof_thread *t = threads; t != NULL; t = t->next)
                if (t->cpu_paused == on && __atomic_load_n(&t->cpu_timed, __ATOMIC_RELAXED))
                    thread_arm(t, on);
            return 1;
        }
        __atomic_store_n(&stopped, 1, __ATOMIC_RELEASE);
        prof_log_once(&stop_said, "the program installed its own handler for signal %d, which "
                      "prof's on-CPU sampler uses: sampling stopped (cpu%% shows what was "
                      "sampled before; PROF_CPU=0 keeps prof off that signal)",
                      PROF_SAMPLER_SIGNAL);
    }
    for (struct prof_thread *t = threads; t != NULL; t = t->next)
        prof_sampler_thread_stop(t);
    return 0;
}
