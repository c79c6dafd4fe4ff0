/* bench.h - helpers shared by the C benchmarks: a monotonic clock, the
 * median of repeated runs, re-running the program with its environment
 * set (prof reads the environment once, when the library loads), and a
 * producer paced at a given rate (capacity, busy_capacity). */
#ifndef PROF_BENCH_H
#define PROF_BENCH_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <prof.h>

static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* If name is not set to value, set it and exec this program again, so the
 * library sees it when it loads. Returns only when the variable is set. */
static inline void bench_require_env(char **argv, const char *name, const char *value)
{
    const char *cur = getenv(name);

    if (cur != NULL && strcmp(cur, value) == 0)
        return;
    setenv(name, value, 1);
    execv("/proc/self/exe", argv);
    perror("exec");
    exit(1);
}

/* Remove a trace the benchmark wrote, and only a regular file: a path the
 * user gave may be /dev/null or a FIFO, which unlink would take away. */
static inline void bench_remove_trace(const char *path)
{
    struct stat st;

    if (path != NULL && lstat(path, &st) == 0 && S_ISREG(st.st_mode))
        unlink(path);
}

/* ns per zone over n empty zones named name. noinline keeps the loop
 * honest: one zone per iteration, nothing merged or hoisted across it. */
__attribute__((noinline, unused)) static double bench_zones(int n, const char *name)
{
    uint64_t t0 = bench_now_ns();

    for (int i = 0; i < n; i++) {
        PROF_ZONE(name);
        __asm__ __volatile__("" ::: "memory");
    }
    return (double)(bench_now_ns() - t0) / n;
}

static inline double run_zones(int n)
{
    return bench_zones(n, "bench");
}

/* Records dropped so far in this process, as the JSON summary says. */
static inline uint64_t bench_dropped(void)
{
    static char buf[1 << 16];
    const char *p;

    prof_summary_snprint(buf, sizeof buf, PROF_FORMAT_JSON);
    p = strstr(buf, "\"dropped\":");
    return p ? strtoull(p + 10, NULL, 10) : 0;
}

/* Zones named "paced" on the calling thread at rate per second for
 * seconds, paced with the clock; returns how many were made. Behind, it
 * catches up in bursts of at most 64: a paced rate, not a flood. */
static inline uint64_t bench_pace(double rate, double seconds)
{
    uint64_t t0 = bench_now_ns(), dur = (uint64_t)(seconds * 1e9), done = 0;

    for (;;) {
        uint64_t el = bench_now_ns() - t0;
        uint64_t due = (uint64_t)((double)el * rate / 1e9);

        if (el >= dur)
            break;
        for (int k = 0; done < due && k < 64; k++, done++) {
            PROF_ZONE("paced");
            __asm__ __volatile__("" ::: "memory");
        }
    }
    return done;
}

#endif
