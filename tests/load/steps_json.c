/* steps_json.c - short steps with a summary due at every one (issue 20):
 *
 *     steps_json <steps> <ns of work per step>
 *
 * Each step is an outer zone around an inner one that spins; the driver
 * (steps_json.py) sets PROF_SUMMARY_EVERY, PROF_SUMMARY_FORMAT=json and
 * PROF_SUMMARY=<file> and judges the summaries. Prints the peak resident
 * memory as a figure. */
#include <stdio.h>
#include <stdlib.h>

#include <prof.h>

#include "../unit/check.h"
#include "load.h"

int main(int argc, char **argv)
{
    uint64_t steps = argc > 1 ? strtoull(argv[1], NULL, 10) : 100000;
    uint64_t work = argc > 2 ? strtoull(argv[2], NULL, 10) : 2000;

    for (uint64_t i = 0; i < steps; i++) {
        PROF_ZONE("step.outer");
        {
            PROF_ZONE("step.inner");
            test_spin_ns(work);
        }
        prof_step();
    }
    prof_shutdown();
    printf("figure: steps=%llu peak_rss_kb=%ld\n", (unsigned long long)steps, load_rss_peak_kb());
    return 0;
}
