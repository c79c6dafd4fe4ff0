/* cpu_sampler.c - what the on-CPU sampler (PROF_CPU=1) costs a CPU-bound
 * thread: a loop of zones of 10 us of arithmetic, timed by the thread's
 * own CPU clock (the signals and their handler run on it and are counted;
 * time the thread spends preempted by other load is not).
 *
 *     PROF=1 PROF_CPU=0 bench/cpu_sampler [ZONES]
 *     PROF=1 PROF_CPU=1 bench/cpu_sampler [ZONES]
 *
 * Prints "prof-bench cpu_sampler: cpu_ns_per_zone=X zones=N"; run the two
 * alternated (docs/BENCHMARKS.md has the loop) and compare medians. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <prof.h>

#include "bench.h"

static uint64_t cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Dependent arithmetic: 9000 rounds are about 10 us on this kind of VM. */
static volatile uint64_t sink;

static void work(unsigned iters)
{
    uint64_t x = sink;

    for (unsigned i = 0; i < iters; i++)
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    sink = x;
}

int main(int argc, char **argv)
{
    long zones = argc > 1 ? atol(argv[1]) : 50000;
    unsigned iters = 9000;   /* fixed, so every run does the same work: ~10 us here */
    uint64_t t0, t1;

    {
        PROF_ZONE("warm");
        work(iters);
    }
    t0 = cpu_ns();
    for (long i = 0; i < zones; i++) {
        PROF_ZONE("zone10us");
        work(iters);
    }
    t1 = cpu_ns();
    printf("prof-bench cpu_sampler: cpu_ns_per_zone=%.1f zones=%ld\n",
           (double)(t1 - t0) / (double)zones, zones);
    return 0;
}
