/* flush_stuck.c - the calls a program makes that wait for prof's output
 * (prof_flush: the summaries due and the trace's events; prof_ranks_emit:
 * the cross-rank table) return while the output's reader reads nothing
 * (driven by flush_stuck.py, which holds the read end of stdout's pipe or
 * of the trace's FIFO open and never reads it until told).
 *
 *     flush_stuck MODE DIR CALLS
 *
 * MODE summary: zones, a step and prof_flush() CALLS times, with
 *   PROF_SUMMARY=stdout and PROF_SUMMARY_EVERY=1steps on the stuck pipe.
 * MODE trace: zones and prof_flush() CALLS times, with PROF_TRACE on the
 *   stuck FIFO: first a burst of zones larger than the trace's queue, so
 *   that a flush also finds the queue full.
 * MODE ranks: a one-rank cross-rank table (prof_ranks_*) each step, CALLS
 *   times, printed where the summaries go (stdout, stuck).
 *
 * After each call prof_stats() must count every zone made so far (the
 * numbers are complete whatever the output does). Then the figures go to
 * DIR/result, DIR/done is made (the reader starts reading) and the program
 * exits normally. A call that waits for the stuck reader never returns: the
 * alarm below (and the driver's timeout) ends the program, and the test
 * fails. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <prof.h>
#include <prof_ranks.h>

#include "../unit/check.h"

#define WATCHDOG_S 60
#define BURST 1200000      /* zones: more than the trace's 64 MB queue holds */

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void on_alarm(int sig)
{
    static const char msg[] = "flush_stuck: a call waited for the stuck reader "
                              "(watchdog fired)\n";

    (void)sig;
    if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) {
        /* Nothing more to do in a handler. */
    }
    _exit(3);
}

static void zones(const char *name, long n)
{
    for (long i = 0; i < n; i++) {
        PROF_ZONE(name);
    }
}

static void ranks_table(void)
{
    static uint64_t state[PROF_RANKS_STATE_SIZE / 8];
    static uint64_t buf[PROF_RANKS_BUF_SIZE / 8];

    CHECK_EQ(prof_ranks_snapshot(state, sizeof state, 0), 0);
    for (int round = 0; round < PROF_RANKS_ROUNDS; round++) {
        int len = prof_ranks_contribute(state, round, buf, sizeof buf, NULL);

        CHECK(len > 0);
        /* One rank: the combined buffer is its own. */
        CHECK_EQ(prof_ranks_result(state, round, buf, (size_t)len), 0);
    }
    CHECK_EQ(prof_ranks_emit(state), 0);
}

int main(int argc, char **argv)
{
    const char *name = prof_intern("stuck_zone");
    double slowest = 0, t0 = now_ms();
    long made = 0;
    int calls, rc;
    char path[4096];
    FILE *f;

    if (argc != 4)
        SKIP("usage: flush_stuck summary|trace|ranks DIR CALLS");
    calls = atoi(argv[3]);
    signal(SIGALRM, on_alarm);
    alarm(WATCHDOG_S);
    if (strcmp(argv[1], "ranks") == 0) {
        uint64_t every = 0;

        zones(name, 10);
        made += 10;
        CHECK_EQ(prof_ranks_start(&every, NULL), 0);
        CHECK_EQ(every, 1);
    }
    if (strcmp(argv[1], "trace") == 0) {
        zones(name, BURST);
        made += BURST;
    }
    for (int i = 0; i < calls; i++) {
        prof_stage_stats st;
        double t;

        zones(name, 100);
        made += 100;
        prof_step();
        t = now_ms();
        if (strcmp(argv[1], "ranks") == 0)
            ranks_table();
        else
            CHECK_EQ(prof_flush(), 0);
        t = now_ms() - t;
        slowest = t > slowest ? t : slowest;
        /* What prof_flush promises, whatever the output does (the rings
         * hold the burst: PROF_BUFFER=2M). */
        rc = prof_stats("stuck_zone", &st);
        CHECK_EQ(rc, 0);
        CHECK_EQ((long)st.count, made);
    }
    alarm(0);
    snprintf(path, sizeof path, "%s/result", argv[2]);
    f = fopen(path, "w");
    CHECK(f != NULL);
    fprintf(f, "calls=%d slowest_ms=%.1f total_ms=%.1f made=%ld\n", calls, slowest,
            now_ms() - t0, made);
    fclose(f);
    snprintf(path, sizeof path, "%s/done", argv[2]);
    f = fopen(path, "w");
    CHECK(f != NULL);
    fclose(f);
    return 0;   /* the final summary and the trace's end once the reader reads */
}
