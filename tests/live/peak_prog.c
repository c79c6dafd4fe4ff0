/* peak_prog.c - a running prof process for the peak rise in the live
 * outputs: a "load" stage maps and touches 64 MiB once (kept) and then
 * computes 40 ms of its own CPU time, so that the sampler sees the risen
 * peak inside it; then "ready", and a loop of "work" zones (1 ms of CPU
 * each, nothing allocated) and 5 ms sleeps, a step each, for SECONDS
 * seconds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <prof.h>

#include "../integration/mem_check.h"

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 30, end;
    size_t bytes = 64u << 20;
    char *loaded;

    prof_enable(1);
    end = now_s() + seconds;
    {
        PROF_ZONE("load");
        loaded = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (loaded == MAP_FAILED) {
            perror("mmap");
            return 2;
        }
        memset(loaded, 1, bytes);    /* every page resident */
        (void)spin_cpu_ms(40);
    }
    printf("ready\n");
    fflush(stdout);
    while (now_s() < end) {
        {
            PROF_ZONE("work");
            (void)spin_cpu_ms(1);
        }
        {
            struct timespec ts = { 0, 5000000 };

            nanosleep(&ts, NULL);
        }
        prof_step();
    }
    munmap(loaded, bytes);
    return 0;
}
