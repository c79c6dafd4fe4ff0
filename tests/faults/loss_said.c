/* loss_said.c - a burst into a tiny ring (run with PROF_BUFFER=16): 50
 * outer zones of 2,000 inner ones each, as a hot lambda in a loop. Prints
 * "outer count=<n> lossy=<0|1>" from prof_stats(); loss_said.py judges
 * the log line, the summary's marks and the JSON. */
#include <stdio.h>
#include <time.h>

#include <prof.h>

int main(void)
{
    prof_stage_stats st;

    for (int i = 0; i < 50; i++) {
        struct timespec ms = {0, 1000000};
        {
            PROF_ZONE("outer");
            for (int k = 0; k < 2000; k++) {
                PROF_ZONE("inner");
                __asm__ __volatile__("" ::: "memory");
            }
            /* Most outer zones find room: the collector, woken by the
             * full ring, empties it meanwhile. */
            nanosleep(&ms, NULL);
        }
    }
    if (prof_stats("outer", &st) != 0) {
        printf("outer missing\n");
        return 1;
    }
    printf("outer count=%llu lossy=%d\n", (unsigned long long)st.count,
           (st.flags & PROF_STAGE_LOSSY) != 0);
    return 0;
}
