/* cpu_prog.c - a running prof process for the on-CPU figure in the live
 * outputs: a loop of "spin" (2 ms of busy loop) and "sleep" (20 ms of
 * nanosleep) zones, a step each, for SECONDS seconds. "ready" once the
 * first loop is done. The sleep is the longer: a sample whose CPU time
 * was spent in the spin may be taken at the sleep's edge (the kernel
 * notices an expired CPU timer at its tick), and such a sample weighs
 * against 20 ms of sleep, not 2. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <prof.h>

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 30, end;
    int ready = 0;

    prof_enable(1);
    end = now_s() + seconds;
    while (now_s() < end) {
        {
            PROF_ZONE("spin");
            double until = now_s() + 0.002;

            while (now_s() < until)
                ;
        }
        {
            PROF_ZONE("sleep");
            struct timespec ts = { 0, 20000000 };

            nanosleep(&ts, NULL);
        }
        prof_step();
        if (!ready) {
            printf("ready\n");
            fflush(stdout);
            ready = 1;
        }
    }
    return 0;
}
