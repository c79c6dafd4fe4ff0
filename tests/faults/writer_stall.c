/* writer_stall.c - a trace whose disk has stalled (driven by
 * writer_stall.py: PROF_TRACE is a FIFO whose reader stops reading) must
 * not stall the threads that take the runtime lock: the collector writes
 * the trace with the lock released.
 *
 *     writer_stall DIR
 *
 * Records ZONES zones (a trace of about 2 MB, under the writer's queue
 * bound, far over a pipe's), then calls prof_stats() every 50 ms until the
 * reader says the pipe is full (DIR/full: the writer is blocked in
 * write(2)), then CALLS more times, and says so (DIR/stats-done). The
 * reader reads nothing until then: a prof_stats() that waits for the
 * writer never returns, and the reader's hang guard fails the test. The
 * slowest call is printed as a figure, not judged (load moves it). Then it
 * exits normally (the final report waits for the reader; the trace is
 * whole). */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include <prof.h>

#include "../unit/check.h"

#define ZONES 20000
#define CALLS 10

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double timed_stats(void)
{
    prof_stage_stats st;
    double t0 = now_ms();

    CHECK_EQ(prof_stats("stall_zone", &st), 0);
    CHECK_EQ(st.count, ZONES);
    return now_ms() - t0;
}

int main(int argc, char **argv)
{
    /* A name made at run time: no call site, so the program also runs
     * against a library built before call sites (to see the test fail). */
    const char *name = prof_intern("stall_zone");
    struct timespec pause = {0, 50 * 1000 * 1000};
    char full[4096], done[4096];
    double slowest = 0, dt;
    FILE *f;

    if (argc < 2)
        SKIP("usage: writer_stall DIR");
    snprintf(full, sizeof full, "%s/full", argv[1]);
    snprintf(done, sizeof done, "%s/stats-done", argv[1]);
    for (int i = 0; i < ZONES; i++) {
        PROF_ZONE(name);
    }
    /* Until the pipe is full, and CALLS times once it is: each call while
     * the writer is blocked (the reader reads nothing before stats-done). */
    for (int after = 0; after < CALLS; after += access(full, F_OK) == 0) {
        dt = timed_stats();
        slowest = dt > slowest ? dt : slowest;
        nanosleep(&pause, NULL);
    }
    f = fopen(done, "w");
    CHECK(f != NULL);
    fclose(f);
    printf("slowest_stats_ms=%.1f\n", slowest);
    return 0;
}
