/* trace_throughput.c - how fast the collector turns records into trace
 * events, and whether tracing changes what a zone costs (it must not: all
 * formatting happens on the collector).
 *
 *     build/bench/trace_throughput [trace path, default /tmp/prof-bench-trace.json]
 *
 * The program times RUNS runs of ZONES zones with tracing off, then runs
 * itself again with PROF_TRACE set and does the same, then once more with
 * PROF_TRACE=<path>.gz (gzip, zlib loaded at run time). Between runs it calls
 * prof_flush(), which drains the run's records on the calling thread: the
 * time of those flushes is the collector's cost per record, with and
 * without trace output. The ring is the default size in both passes. Last
 * line, for scripts:
 * prof-bench trace: events_per_s=<n> mb_per_s=<n> zone_tracing=<ns> zone_not_tracing=<ns>
 *   bytes_per_event=<plain> gz_events_per_s=<n> gz_bytes_per_event=<n> */
#include <sys/stat.h>

#include <prof.h>

#include "bench.h"

#define ZONES 16000   /* under half a ring's warm slots: no wake on fill mid-run */
#define RUNS 51

/* Median ns per zone; *drain_s gets the total time spent flushing. */
static double measure(double *drain_s)
{
    double v[RUNS];
    uint64_t drain = 0, t0;

    run_zones(1000);
    prof_flush();
    for (int r = 0; r < RUNS; r++) {
        v[r] = run_zones(ZONES);
        t0 = bench_now_ns();
        prof_flush();
        drain += bench_now_ns() - t0;
    }
    *drain_s = (double)drain / 1e9;
    return bench_median(v, RUNS);
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/tmp/prof-bench-trace.json";
    double zone_ns, drain_s, events = (double)ZONES * RUNS;
    char buf[64];
    struct stat st;

    bench_require_env(argv, "PROF", "1");
    bench_require_env(argv, "PROF_SUMMARY", "off");
    if (getenv("PROF_BENCH_UNTRACED") == NULL) {
        /* First pass: no trace. */
        if (getenv("PROF_TRACE") != NULL) {
            unsetenv("PROF_TRACE");
            execv("/proc/self/exe", argv);
        }
        zone_ns = measure(&drain_s);
        printf("without trace: zone %.2f ns, collector %.0f records/s\n", zone_ns,
               events / drain_s);
        fflush(stdout);
        snprintf(buf, sizeof buf, "%.2f", zone_ns);
        setenv("PROF_BENCH_UNTRACED", buf, 1);
        setenv("PROF_TRACE", path, 1);
        execv("/proc/self/exe", argv);
        perror("exec");
        return 1;
    }

    zone_ns = measure(&drain_s);
    prof_shutdown();
    if (stat(getenv("PROF_TRACE"), &st) != 0) {
        perror(getenv("PROF_TRACE"));
        return 1;
    }
    if (getenv("PROF_BENCH_PLAIN") == NULL) {
        /* Second pass done: the plain trace. Now the same into .gz. */
        char gzpath[4096];
        printf("with trace:    zone %.2f ns, collector %.0f events/s, %.1f MB/s (%.0f bytes/event)\n",
               zone_ns, events / drain_s, (double)st.st_size / drain_s / 1e6,
               (double)st.st_size / events);
        fflush(stdout);
        snprintf(buf, sizeof buf, "%.0f %.1f %.2f %.1f", events / drain_s,
                 (double)st.st_size / drain_s / 1e6, zone_ns, (double)st.st_size / events);
        setenv("PROF_BENCH_PLAIN", buf, 1);
        bench_remove_trace(path);
        snprintf(gzpath, sizeof gzpath, "%s.gz", path);
        setenv("PROF_TRACE", gzpath, 1);
        execv("/proc/self/exe", argv);
        perror("exec");
        return 1;
    }
    {
        double ev_s, mb_s, ztr, bpe;
        if (sscanf(getenv("PROF_BENCH_PLAIN"), "%lf %lf %lf %lf", &ev_s, &mb_s, &ztr, &bpe) != 4)
            return 1;
        printf("with gz trace: zone %.2f ns, collector %.0f events/s (%.1f bytes/event on disk)\n",
               zone_ns, events / drain_s, (double)st.st_size / events);
        printf("prof-bench trace: events_per_s=%.0f mb_per_s=%.1f zone_tracing=%.2f "
               "zone_not_tracing=%s bytes_per_event=%.1f gz_events_per_s=%.0f "
               "gz_bytes_per_event=%.1f\n",
               ev_s, mb_s, ztr, getenv("PROF_BENCH_UNTRACED"), bpe, events / drain_s,
               (double)st.st_size / events);
        bench_remove_trace(getenv("PROF_TRACE"));
    }
    return 0;
}
