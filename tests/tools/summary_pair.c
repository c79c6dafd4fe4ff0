/* summary_pair.c - one state of the runtime printed twice, as its text
 * table and as its JSON summary, for tests/tools/test_library_format.py:
 * prof-report reading the JSON must print the numbers the table shows.
 * Durations are spread over the units (ns, us, ms, s would take too long:
 * the s branch is covered by the Python side's own cases). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <prof.h>

static void spin(long ns)
{
    struct timespec a, b;

    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < ns);
}

int main(void)
{
    static char text[1 << 16], json[1 << 18];

    for (int i = 0; i < 60; i++) {
        PROF_ZONE_BEGIN(step, "step");
        {
            PROF_ZONE_BEGIN(tiny, "tiny");
            PROF_ZONE_END(tiny);
        }
        {
            PROF_ZONE_BEGIN(mid, "mid");
            spin(20000 + 1000 * (i % 7));
            {
                PROF_ZONE_BEGIN(inner, "inner");
                spin(3000 * (1 + i % 3));
                PROF_ZONE_END(inner);
            }
            PROF_ZONE_END(mid);
        }
        if (i % 20 == 0) {
            PROF_ZONE_BEGIN(slow, "slow");
            spin(1200000);
            PROF_ZONE_END(slow);
        }
        PROF_ZONE_END(step);
        prof_step();
    }
    if (prof_flush() != 0)
        return 77;
    if (prof_summary_snprint(text, sizeof text, PROF_FORMAT_TEXT) < 0 ||
        prof_summary_snprint(json, sizeof json, PROF_FORMAT_JSON) < 0)
        return 1;
    fputs(text, stdout);
    fputs("----\n", stdout);
    fputs(json, stdout);
    return 0;
}
