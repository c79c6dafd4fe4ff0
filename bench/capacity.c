/* capacity.c - what the collector keeps up with (issue 11), measured in
 * one process with the default ring:
 *
 *   nodrop_rate_1t / _2t  the highest paced rate (zones/s per producer,
 *                         each producer pacing itself with the clock for
 *                         SECONDS) at which the median of RUNS runs drops
 *                         nothing, with one and with two producer threads;
 *   drain_10k / drain_10  records a drain takes in per second when half a
 *                         ring holds zones of 10,000 / 10 stages
 *                         (prof_flush timed on the calling thread);
 *   trace_events_per_s    the same drain of 10 stages with a trace being
 *                         written (PROF_TRACE to a temporary file);
 *   traced nodrop_rate_1t nodrop_rate_1t with a trace being formatted and
 *                         written to /dev/null (on the line before the
 *                         last): what the collector keeps up with when it
 *                         also traces. Not to a file: at millions of
 *                         events a second (93 bytes each) that measures
 *                         the disk, whose dirty-page throttling stalls
 *                         the writer after a few GB.
 *
 *     build/bench/capacity            (PROF_BENCH_QUICK=1: shorter runs)
 *
 * Last line, for scripts:
 * prof-bench capacity: nodrop_rate_1t=<M/s> nodrop_rate_2t=<M/s>
 *     drain_10k=<M records/s> drain_10=<M records/s> trace_events_per_s=<M/s> */
#include <pthread.h>

#include <prof.h>

#include "bench.h"

#define RUNS 5
/* Half the warm slots of a ring (src/capture/ring.h): a drain of this many records
 * is timed whole, no wake on fill starting the collector mid-fill. */
#define HALF_WARM (32768 / 2 - 1)

static double seconds = 2.0;

struct producer {
    double rate;              /* zones per second */
    pthread_t id;
};

static void *produce(void *arg)
{
    struct producer *p = arg;

    bench_pace(p->rate, seconds);
    return NULL;
}

/* Records dropped in one run of n producers at rate each. */
static uint64_t run_paced(int n, double rate)
{
    struct producer p[2];
    uint64_t d0;

    prof_flush();
    d0 = bench_dropped();
    for (int i = 0; i < n; i++) {
        p[i].rate = rate;
        pthread_create(&p[i].id, NULL, produce, &p[i]);
    }
    for (int i = 0; i < n; i++)
        pthread_join(p[i].id, NULL);
    prof_flush();
    return bench_dropped() - d0;
}

static double nodrop_rate(int n)
{
    static const double rates[] = {0.5e6, 1e6, 2e6, 3e6, 5e6, 7e6, 10e6, 14e6, 20e6, 28e6};
    double best = 0;

    for (size_t r = 0; r < sizeof rates / sizeof rates[0]; r++) {
        double drops[RUNS];

        for (int i = 0; i < RUNS; i++)
            drops[i] = (double)run_paced(n, rates[r]);
        if (bench_median(drops, RUNS) > 0)
            break;
        best = rates[r];
    }
    return best / 1e6;
}

/* Records per second a drain takes in: fill HALF_WARM slots with zones of
 * nstages names, then time prof_flush on this thread. */
static double drain_rate(int nstages)
{
    static const char *names[10000];
    double rates[RUNS];

    for (int i = 0; i < nstages; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "stage%05d", i);
        names[i] = prof_intern(buf);
    }
    for (int run = -1; run < RUNS; run++) {   /* run -1 creates the stages */
        uint64_t t0;

        prof_flush();
        for (int i = 0; i < HALF_WARM; i++) {
            PROF_ZONE(names[i % nstages]);
        }
        t0 = bench_now_ns();
        prof_flush();
        if (run >= 0)
            rates[run] = HALF_WARM / ((double)(bench_now_ns() - t0) / 1e9);
    }
    return bench_median(rates, RUNS) / 1e6;
}

int main(int argc, char **argv)
{
    char tmp[] = "/tmp/prof-capacity-XXXXXX.json";

    if (getenv("PROF_BENCH_QUICK"))
        seconds = 0.5;
    bench_require_env(argv, "PROF", "1");
    bench_require_env(argv, "PROF_SUMMARY", "off");
    if (argc > 2 && strcmp(argv[1], "--traced-null") == 0) {
        /* Third part: PROF_TRACE=/dev/null. */
        printf("traced to /dev/null: nodrop_rate_1t=%.1f M/s\n", nodrop_rate(1));
        printf("prof-bench capacity: %s\n", argv[2]);
        return 0;
    } else if (argc > 2 && strcmp(argv[1], "--traced") == 0) {
        /* Second part, re-executed with PROF_TRACE set to a file. */
        char line[320];
        char *args[] = {argv[0], "--traced-null", line, NULL};
        double tr = drain_rate(10);

        prof_shutdown();
        bench_remove_trace(getenv("PROF_TRACE"));
        snprintf(line, sizeof line, "%s trace_events_per_s=%.1f", argv[2], tr);
        fflush(stdout);
        setenv("PROF_TRACE", "/dev/null", 1);
        execv("/proc/self/exe", args);
        perror("exec");
        return 1;
    } else {
        char line[256];
        double r1 = nodrop_rate(1), r2 = nodrop_rate(2), d10k = drain_rate(10000),
               d10 = drain_rate(10);
        int fd = mkstemps(tmp, 5);
        char *args[] = {argv[0], "--traced", line, NULL};

        printf("nodrop_rate_1t=%.1f M/s  nodrop_rate_2t=%.1f M/s  drain_10k=%.1f M/s  "
               "drain_10=%.1f M/s\n", r1, r2, d10k, d10);
        fflush(stdout);
        snprintf(line, sizeof line, "nodrop_rate_1t=%.1f nodrop_rate_2t=%.1f drain_10k=%.1f "
                 "drain_10=%.1f", r1, r2, d10k, d10);
        if (fd >= 0)
            close(fd);
        setenv("PROF_TRACE", tmp, 1);
        execv("/proc/self/exe", args);
        perror("exec");
        return 1;
    }
}
