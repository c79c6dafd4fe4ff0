/* steps_json.c - short steps with a summary due at every one (issue 20):
 *
 *     steps_json <steps> <ns of work per step>
 *
 * Each step is an outer zone around an inner one that spins; the driver
 * (steps_json.py) sets PROF_SUMMARY_EVERY, PROF_SUMMARY_FORMAT=json and
 * PROF_SUMMARY=<file> and judges the summaries. Prints the peak resident
 * memory as a figure, and the share of the loop's wall time this thread
 * was on a CPU (cpu_share): under 0.5 the machine is busier than the
 * loop, and the collector beside it may have been kept off the CPU long
 * enough for the ring to fill, whatever prof does. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <prof.h>

#include "../unit/check.h"
#include "load.h"

int main(int argc, char **argv)
{
    uint64_t steps = argc > 1 ? strtoull(argv[1], NULL, 10) : 100000;
    uint64_t work = argc > 2 ? strtoull(argv[2], NULL, 10) : 2000;

    struct timespec c0, c1;
    uint64_t w0, w1;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    w0 = test_now_ns();
    for (uint64_t i = 0; i < steps; i++) {
        PROF_ZONE("step.outer");
        {
            PROF_ZONE("step.inner");
            test_spin_ns(work);
        }
        prof_step();
    }
    w1 = test_now_ns();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    prof_shutdown();
    printf("figure: steps=%llu peak_rss_kb=%ld cpu_share=%.2f\n", (unsigned long long)steps,
           load_rss_peak_kb(),
           w1 > w0 ? ((double)(c1.tv_sec - c0.tv_sec) * 1e9 + (double)(c1.tv_nsec - c0.tv_nsec)) /
                         (double)(w1 - w0)
                   : 1.0);
    return 0;
}
