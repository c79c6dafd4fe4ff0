/* signals.c - signals and abrupt ends (driven by signals_check.py).
 *
 *     signals handler             zones inside a SIGALRM handler (self-checking)
 *     signals pipe MODE           summary to a pipe whose reader has gone
 *     signals busy                record and trace until a signal ends it
 *     signals exit-in-zones MODE  exit while threads are inside zones
 *     signals exit-thread         exit() from a thread that is not main
 *     signals off                 everything prof offers, with prof off
 *     signals term-then-exit      SIGTERM, then prof_shutdown() and _exit()
 *                                 while the signal's final report is written
 *
 * "ready" on stdout (one write(2)) tells the driver that the runtime is up.
 * Details with each mode below. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <prof.h>

#include "../unit/check.h"

static void say_ready(void)
{
    if (write(STDOUT_FILENO, "ready\n", 6) != 6)
        exit(2);
}

/* ------------------------------------------------------------------------ */
/* handler: SIGALRM every 50 us (ITIMER_REAL) interrupts a loop of zones on
 * the main thread; the handler opens a zone and sets a counter. A handler
 * zone that interrupts a push is refused and counted as dropped, the
 * interrupted zone is never lost: afterwards the main loop's stage holds
 * exactly what it issued, and recorded + dropped == issued over everything.
 * The ring (PROF_BUFFER=1M, flushed every 50,000 iterations) never fills,
 * so every drop is a refused handler record. */

static volatile sig_atomic_t handler_zones, handler_counters;

static void on_alarm(int sig)
{
    (void)sig;
    {
        PROF_ZONE("handler");
        handler_zones++;
    }
    PROF_COUNTER("handler.value", 1.0);
    handler_counters++;
}

static int mode_handler(void)
{
    const long iters = test_scale(2000000);
    struct sigaction sa;
    struct itimerval it = {{0, 50}, {0, 50}}, off = {{0, 0}, {0, 0}};
    prof_counter_stats cs;
    uint64_t main_rec, handler_rec, counter_rec = 0, dropped;

    CHECK(prof_enabled());
    { PROF_ZONE("warmup"); }   /* attach outside the handler: attaching allocates */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
    CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
    for (long i = 0; i < iters; i++) {
        PROF_ZONE("main.loop");
        {
            PROF_ZONE("main.inner");
        }
        if (i % 50000 == 0)
            prof_flush();
    }
    CHECK(setitimer(ITIMER_REAL, &off, NULL) == 0);
    signal(SIGALRM, SIG_IGN);

    main_rec = test_count("main.loop");
    handler_rec = test_count("handler");
    if (prof_counter_stats_get("handler.value", &cs) == 0)
        counter_rec = cs.count;
    dropped = test_dropped();
    printf("handler: %ld main zones x2; %d signals: handler zones %llu recorded of %d, "
           "counters %llu of %d; dropped (refused while a push was under way) %llu\n",
           iters, (int)handler_zones, (unsigned long long)handler_rec, (int)handler_zones,
           (unsigned long long)counter_rec, (int)handler_counters, (unsigned long long)dropped);
    CHECK_EQ(main_rec, iters);
    CHECK_EQ(test_count("main.inner"), iters);
    CHECK_EQ(test_count("warmup"), 1);
    CHECK_LE(handler_rec, handler_zones);
    CHECK_LE(counter_rec, handler_counters);
    CHECK_EQ_U64(handler_rec + counter_rec + dropped,
                 (uint64_t)handler_zones + (uint64_t)handler_counters);
    CHECK_GT(handler_zones, 0);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* pipe MODE: stdout is a pipe (PROF_SUMMARY=stdout). After "ready" the
 * driver closes its end and writes "go" to stdin. Then:
 *   exit      return from main: the final summary meets EPIPE;
 *   periodic  keep recording 300 ms with PROF_SUMMARY_EVERY=20ms;
 *   print     prof_summary_print(stdout) from the program.
 * The process must exit 0 (not die of SIGPIPE). */

static int mode_pipe(const char *how)
{
    char buf[8];

    for (int i = 0; i < 1000; i++) {
        PROF_ZONE("before");
    }
    say_ready();
    if (read(STDIN_FILENO, buf, sizeof buf) <= 0)
        return 3;
    if (strcmp(how, "periodic") == 0) {
        uint64_t end = test_now_ns() + 300000000ull;
        while (test_now_ns() < end) {
            PROF_ZONE("after");
            test_spin_ns(1000);
        }
    } else if (strcmp(how, "print") == 0) {
        int err = prof_summary_print(stdout);
        fprintf(stderr, "prof_summary_print to a closed pipe: %d\n", err);
        CHECK(err == -EIO || err == -EPIPE);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* busy: two threads and main record nested zones (20 us of work each),
 * counters and steps, with the trace on (about 100,000 events a second, so
 * the collector writes on every wake), until a signal ends the process. */

static void *busy_thread(void *arg)
{
    (void)arg;
    for (;;) {
        PROF_ZONE("busy.outer");
        for (int i = 0; i < 8; i++) {
            PROF_ZONE("busy.inner");
            PROF_COUNTER("busy.counter", i);
            test_spin_ns(20000);
        }
    }
    return NULL;
}

static int mode_busy(void)
{
    pthread_t t[2];

    { PROF_ZONE("start"); }
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, busy_thread, NULL) == 0);
    say_ready();
    for (;;) {
        PROF_ZONE("busy.main");
        test_spin_ns(20000);
        prof_step();
    }
}

/* ------------------------------------------------------------------------ */
/* exit-in-zones MODE: THREADS threads each record INNER zones inside an
 * "outer" zone and then block inside it forever (parked), or keep
 * recording flat out (running). Main waits until every thread has ended
 * its INNER zones, then returns from main. The final summary (JSON, to
 * PROF_SUMMARY) must count exactly THREADS * INNER "inner" zones in the
 * parked mode, at least that many when they keep running; "outer" never
 * ended and must not be counted. */

#define EZ_THREADS 4
#define EZ_INNER 1000
static struct test_barrier ez_barrier;
static int ez_running;

static void *ez_thread(void *arg)
{
    (void)arg;
    PROF_ZONE("outer");
    for (int i = 0; i < EZ_INNER; i++) {
        PROF_ZONE("inner");
    }
    test_barrier_wait(&ez_barrier);
    if (ez_running) {
        for (;;) {
            PROF_ZONE("inner");
            test_spin_ns(1000);
        }
    }
    for (;;)
        pause();
    return NULL;
}

static int mode_exit_in_zones(const char *how)
{
    pthread_t t[EZ_THREADS];

    ez_running = strcmp(how, "running") == 0;
    test_barrier_init(&ez_barrier, EZ_THREADS + 1);
    for (int i = 0; i < EZ_THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, ez_thread, NULL) == 0);
    test_barrier_wait(&ez_barrier);
    return 0;   /* exit with the threads inside "outer" */
}

/* ------------------------------------------------------------------------ */
/* exit-thread: one thread calls exit(0) after 50 ms while main records
 * zones and flushes in a loop and another thread records flat out. */

static void *exiting_thread(void *arg)
{
    (void)arg;
    {
        PROF_ZONE("exiter");
        test_spin_ns(50000000);
    }
    exit(0);
}

static int mode_exit_thread(void)
{
    pthread_t t[2];

    CHECK(pthread_create(&t[0], NULL, busy_thread, NULL) == 0);
    CHECK(pthread_create(&t[1], NULL, exiting_thread, NULL) == 0);
    for (long i = 0;; i++) {
        PROF_ZONE("main.loop");
        test_spin_ns(1000);
        if (i % 1000 == 0)
            prof_flush();
    }
}

/* ------------------------------------------------------------------------ */
/* off: prof is off (no PROF, no prof_enable) and PROF_TRACE is set. Every
 * call a shipped, instrumented program makes must leave no trace: no extra
 * thread, no trace file, nothing printed at exit. */

static int mode_off(void)
{
    prof_stage_stats st;
    const char *trace = getenv("PROF_TRACE");

    CHECK(!prof_enabled());
    CHECK(trace != NULL);
    {
        PROF_ZONE("off.zone");
        PROF_COUNTER("off.counter", 1);
        PROF_MARK("off.mark");
    }
    prof_step();
    CHECK(prof_intern("off.name") != NULL);
    CHECK_EQ(prof_thread_name("off-main"), 0);
    CHECK_EQ(test_threads_now(), 1);
    CHECK_MSG(access(trace, F_OK) != 0, "prof is off but the trace file %s exists", trace);
    CHECK_EQ(prof_flush(), -ESRCH);
    CHECK_EQ(prof_stats("off.zone", &st), -ESRCH);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* term-then-exit: what a multiprocessing worker does when its pool's
 * terminate() lands as it finishes: SIGTERM starts the final report on the
 * collector; the main thread's exit hook calls prof_shutdown() and then
 * _exit() (os._exit). The final summary goes to a handler that takes
 * 400 ms (the writer thread runs it), so the report is still under way
 * when prof_shutdown is called 100 ms after the signal: prof_shutdown must
 * wait for it, or _exit cuts the summary. The handler says "final" on
 * stdout when it has the final summary whole. */

static void slow_final(void *user, const char *text, int kind)
{
    struct timespec slow = {0, 400000000};

    (void)user;
    if (kind != PROF_SUMMARY_FINAL || strstr(text, "term.zone") == NULL)
        return;
    nanosleep(&slow, NULL);
    if (write(STDOUT_FILENO, "final\n", 6) != 6)
        _exit(3);
}

static int mode_term_then_exit(void)
{
    struct timespec settle = {0, 100000000};

    prof_set_summary_handler(slow_final, NULL);
    for (int i = 0; i < 1000; i++) {
        PROF_ZONE("term.zone");
    }
    CHECK_EQ(prof_flush(), 0);
    say_ready();
    raise(SIGTERM);
    nanosleep(&settle, NULL);
    prof_shutdown();
    _exit(0);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    const char *arg = argc > 2 ? argv[2] : "";

    if (strcmp(mode, "handler") == 0)
        return mode_handler();
    if (strcmp(mode, "pipe") == 0)
        return mode_pipe(arg);
    if (strcmp(mode, "busy") == 0)
        return mode_busy();
    if (strcmp(mode, "exit-in-zones") == 0)
        return mode_exit_in_zones(arg);
    if (strcmp(mode, "exit-thread") == 0)
        return mode_exit_thread();
    if (strcmp(mode, "off") == 0)
        return mode_off();
    if (strcmp(mode, "term-then-exit") == 0)
        return mode_term_then_exit();
    fprintf(stderr, "usage: signals handler|pipe MODE|busy|exit-in-zones MODE|exit-thread|off|term-then-exit\n");
    return 2;
}
