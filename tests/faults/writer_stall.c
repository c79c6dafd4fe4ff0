/* writer_stall.c - a trace whose disk has stalled (driven by
 * writer_stall.py: PROF_TRACE is a FIFO whose reader pauses) must not stall
 * the threads that take the runtime lock: the collector writes the trace
 * with the lock released. Records ZONES zones (a trace of about 2 MB, under
 * the writer's queue bound), then times prof_stats() every 50 ms for 2 s
 * while the reader sleeps, prints the slowest call, and exits normally (the
 * final report then waits for the reader, and the trace is whole). */
#include <stdio.h>
#include <time.h>

#include <prof.h>

#include "../unit/check.h"

#define ZONES 20000

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(void)
{
    /* A name made at run time: no call site, so the program also runs
     * against a library built before call sites (to see the test fail). */
    const char *name = prof_intern("stall_zone");
    struct timespec pause = {0, 50 * 1000 * 1000};
    double slowest = 0;
    prof_stage_stats st;

    for (int i = 0; i < ZONES; i++) {
        PROF_ZONE(name);
    }
    for (int i = 0; i < 40; i++) {
        double t0 = now_ms(), dt;

        CHECK_EQ(prof_stats("stall_zone", &st), 0);
        dt = now_ms() - t0;
        if (dt > slowest)
            slowest = dt;
        CHECK_EQ(st.count, ZONES);
        nanosleep(&pause, NULL);
    }
    printf("slowest_stats_ms=%.1f\n", slowest);
    return 0;
}
