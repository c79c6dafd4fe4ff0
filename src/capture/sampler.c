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
#include <fcntl.h>
#include <stdlib.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
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

/* The process's peak resident memory (getrusage's ru_maxrss, KiB) up to
 * which rises have been claimed: a sample claims (compare-exchange) its
 * thread's part of what the peak rose above it, so that each part of a
 * rise goes to one sample of one thread. Set when the handler is
 * installed: what the process reached before is no stage's. */
static long peak_seen_kib;

/* The page faults of the thread (who RUSAGE_THREAD) or of the process. */
static uint64_t faults(const struct rusage *ru)
{
    return (uint64_t)ru->ru_minflt + (uint64_t)ru->ru_majflt;
}

/* ru_maxrss counts the peak of the image the process exec'd from (Linux
 * keeps the larger across exec: a program started by a large Python
 * process starts with Python's peak), which hides every rise below it.
 * Where it is found higher than the process's own VmHWM at install, the
 * peak is instead the largest resident size the samples read, from
 * /proc/self/statm (pread is async-signal-safe): it misses a rise that
 * is freed again between two samples. */
static int statm_fd = -1;
static long page_kib = 4;
static long statm_peak_kib;      /* the largest resident size read */

/* The process's peak resident memory in KiB, ru: its getrusage. */
static long peak_now(const struct rusage *ru)
{
    char buf[96];
    ssize_t n;
    long pages = 0, rss, top;
    int i = 0;

    if (statm_fd < 0)
        return ru->ru_maxrss;
    if ((n = pread(statm_fd, buf, sizeof buf - 1, 0)) <= 0)
        return __atomic_load_n(&statm_peak_kib, __ATOMIC_RELAXED);
    /* "size resident shared ...": the second field, in pages. */
    while (i < n && buf[i] != ' ')
        i++;
    for (i++; i < n && buf[i] >= '0' && buf[i] <= '9'; i++)
        pages = pages * 10 + (buf[i] - '0');
    rss = pages * page_kib;
    top = __atomic_load_n(&statm_peak_kib, __ATOMIC_RELAXED);
    while (rss > top && !__atomic_compare_exchange_n(&statm_peak_kib, &top, rss, 0,
                                                     __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    return rss > top ? rss : top;
}

/* Whether ru_maxrss counts an exec'd image's peak (above this process's
 * own VmHWM): then open statm, once per process (not in a handler). */
static void peak_source(void)
{
    char buf[4096];
    const char *p;
    struct rusage ru;
    long hwm = -1;
    ssize_t n;
    int fd;

    if (statm_fd >= 0) {
        close(statm_fd);         /* a forked child's is its parent's */
        statm_fd = -1;
    }
    __atomic_store_n(&statm_peak_kib, 0, __ATOMIC_RELAXED);
    if (getrusage(RUSAGE_SELF, &ru) != 0 ||
        (fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC)) < 0)
        return;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    if ((p = strstr(buf, "\nVmHWM:")) != NULL)
        hwm = strtol(p + 7, NULL, 10);
    if (hwm < 0 || ru.ru_maxrss <= hwm + 1024)
        return;
    if (sysconf(_SC_PAGESIZE) >= 1024)
        page_kib = sysconf(_SC_PAGESIZE) / 1024;
    statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
}

/* The part of the peak's rise that t's sample claims, in bytes; 0 when
 * none. A rise is made resident by page faults, on the thread that
 * touches the pages, so a sample claims, of the rise since its thread's
 * previous sample (less what others claimed), the share its thread's
 * faults are of the process's over that time: a thread that faulted
 * nothing (that only computes, or waits) claims nothing, and two threads
 * faulting at once share a rise by what each faulted (a thread that
 * faults pages it frees again, an allocator's churn, takes a share it did
 * not keep). What no sampled thread faulted (prof's collector's tables, a
 * thread without a timer) is left to none. Both getrusage calls are
 * async-signal-safe. */
static uint64_t peak_claim(struct prof_thread *t)
{
    struct rusage ru;
    uint64_t own, all, f, p;
    long seen, from, last, want, now;

    if (getrusage(RUSAGE_THREAD, &ru) != 0)
        return 0;
    own = faults(&ru);
    f = own - t->flt_own;
    t->flt_own = own;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    all = faults(&ru);
    p = all - t->flt_all;
    t->flt_all = all;
    now = peak_now(&ru);
    last = t->rss_last;
    t->rss_last = now;
    if (f == 0)
        return 0;
    seen = __atomic_load_n(&peak_seen_kib, __ATOMIC_RELAXED);
    for (;;) {
        long rise;

        /* The rise since this thread's previous sample, or since the
         * claims of others reached, whichever is later. */
        from = seen > last ? seen : last;
        if (now <= from)
            return 0;
        rise = f >= p ? now - from : (long)((double)(now - from) * (double)f / (double)p);
        if (rise <= 0)
            return 0;
        /* peak_seen_kib counts what was claimed above the baseline: a
         * share left unclaimed below this interval stays for the threads
         * whose samples span it. */
        want = seen + rise < now ? seen + rise : now;
        if (want <= seen)
            return 0;
        if (__atomic_compare_exchange_n(&peak_seen_kib, &seen, want, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
            return (uint64_t)(want - seen) * 1024u;
    }
}

/* Where t's counts of faults start (on t, its ring just made resident):
 * the peak that a thread's ring raised is prof's, no stage's. */
static void peak_thread_start(struct prof_thread *t)
{
    struct rusage ru;
    long seen;

    t->flt_own = getrusage(RUSAGE_THREAD, &ru) == 0 ? faults(&ru) : 0;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return;
    t->flt_all = faults(&ru);
    t->rss_last = peak_now(&ru);
    seen = __atomic_load_n(&peak_seen_kib, __ATOMIC_RELAXED);
    while (t->rss_last > seen &&
           !__atomic_compare_exchange_n(&peak_seen_kib, &seen, t->rss_last, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
        ;
}

static void peak_baseline(void)
{
    struct rusage ru;

    peak_source();
    __atomic_store_n(&peak_seen_kib, getrusage(RUSAGE_SELF, &ru) == 0 ? peak_now(&ru) : 0,
                     __ATOMIC_RELAXED);
}

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
    if (!(__atomic_load_n(&prof_on_, __ATOMIC_RELAXED) & PROF_ON_RECORD_)) {
        s->cpu_carry = 0;
        goto out;
    }
    if (level == 0) {
        s->cpu_carry = 0;        /* outside every zone: no stage's time */
        (void)peak_claim(s);     /* nor a rise of the peak */
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

        uint64_t ticks = prof_ticks_now_(), rise;

        prof_ring_push_(t, ticks, ns, name, t->path, level - 1, PROF_RECORD_CPU_);
        /* A full ring dropped it: counted with the drops; its time goes
         * with the next sample, and so does a rise of the peak. */
        if (t->dropped != dropped)
            s->cpu_carry = ns;
        /* The process's peak resident memory rose since the last sample
         * of any thread: this zone's, with the sample just pushed (the
         * collector adds it to the zone that sample goes to). A record
         * dropped here loses its rise (counted with the drops). */
        else if ((rise = peak_claim(s)) != 0)
            prof_ring_push_(t, ticks, rise, name, t->path, level - 1, PROF_RECORD_PEAK_);
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
    peak_baseline();
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
    peak_thread_start(t);
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
    /* The child's peak starts at what it inherited, not at its parent's
     * last figure. */
    peak_baseline();
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
