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
 * whole).
 *
 *     writer_stall summary DIR SECONDS [AFTER]
 *
 * Records zones at about 1 M a second (under a sanitizer 250 k, 50 k with
 * a trace) for SECONDS and then until DIR/stop exists (the reader makes it
 * once what it waits for happened: how long that takes is the scheduler's),
 * with PROF_SUMMARY=stdout on a pipe nobody reads (and maybe a trace to a
 * FIFO nobody reads). Without AFTER: writes the zones made to DIR/made,
 * then creates DIR/done (the reader starts reading). With AFTER: creates
 * DIR/done, records AFTER seconds more while the reader reads, then writes
 * DIR/made. Then it exits normally; the final summary must count every
 * zone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#  define UNDER_SANITIZER 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#    define UNDER_SANITIZER 1
#  endif
#endif
#ifndef UNDER_SANITIZER
#  define UNDER_SANITIZER 0
#endif

/* Zones at a steady rate (bursts of 1,000 kept on schedule, a short sleep
 * when ahead) for `seconds`, and then until the file stop exists (NULL:
 * not); returns how many. */
static long long zones_for(double seconds, const char *stop)
{
    const char *name = prof_intern("stall_zone");
    /* Under a sanitizer the collector is several times slower, and more
     * so when it formats every zone as a trace event: the rate is one it
     * keeps up with when nothing is stuck. */
    const double rate = !UNDER_SANITIZER ? 1e6 : getenv("PROF_TRACE") ? 50e3 : 250e3;
    struct timespec nap = {0, 100 * 1000};
    double t0 = now_ms(), t;
    long long made = 0;

    while ((t = now_ms() - t0) < seconds * 1e3 || (stop != NULL && access(stop, F_OK) != 0)) {
        if (made >= (long long)(rate * t / 1e3)) {
            nanosleep(&nap, NULL);
            continue;
        }
        for (int i = 0; i < 1000; i++) {
            PROF_ZONE(name);
        }
        made += 1000;
    }
    return made;
}

/* Zones while stdout and the trace are not read, then maybe while they
 * are. */
static int stall_summary(const char *dir, double seconds, double after)
{
    char made_path[4096], done_path[4096], stop_path[4096];
    double t0 = now_ms();
    long long made;
    FILE *f;

    snprintf(made_path, sizeof made_path, "%s/made", dir);
    snprintf(done_path, sizeof done_path, "%s/done", dir);
    snprintf(stop_path, sizeof stop_path, "%s/stop", dir);
    made = zones_for(seconds, stop_path);
    if (after > 0) {
        f = fopen(done_path, "w");
        CHECK(f != NULL);
        fclose(f);
        made += zones_for(after, NULL);
    }
    f = fopen(made_path, "w");
    CHECK(f != NULL);
    fprintf(f, "%lld %.3f\n", made, (now_ms() - t0) / 1e3);
    fclose(f);
    if (after <= 0) {
        f = fopen(done_path, "w");
        CHECK(f != NULL);
        fclose(f);
    }
    return 0;   /* the final summary at exit */
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

    if ((argc == 4 || argc == 5) && strcmp(argv[1], "summary") == 0)
        return stall_summary(argv[2], atof(argv[3]), argc == 5 ? atof(argv[4]) : 0);
    if (argc < 2)
        SKIP("usage: writer_stall DIR | writer_stall summary DIR SECONDS");
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
