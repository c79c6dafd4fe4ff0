/* mem_check.h - what the memory tests' programs read for themselves: the
 * kernel's own peak (VmHWM), the ground truth prof's figures are held to;
 * and the CPU time they spend so that the on-CPU sampler sees them
 * (tests/integration/peak_prog.c, tests/live/peak_prog.c). */
#ifndef PROF_TEST_MEM_CHECK_H
#define PROF_TEST_MEM_CHECK_H

#include <stdio.h>
#include <time.h>

#define MB (1024ull * 1024ull)

/* The process's peak resident memory in bytes; 0 without /proc. */
static inline unsigned long long vm_hwm(void)
{
    char line[256];
    unsigned long long kb = 0;
    FILE *f = fopen("/proc/self/status", "r");

    if (f == NULL)
        return 0;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "VmHWM: %llu kB", &kb) == 1)
            break;
    fclose(f);
    return kb * 1024;
}

static inline void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

    nanosleep(&ts, NULL);
}

static inline double thread_cpu_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Compute until this thread has used ms of CPU: its CPU-time timer fires
 * in it however busy the machine is. */
static inline unsigned long spin_cpu_ms(double ms)
{
    volatile unsigned long sink = 0;
    double end = thread_cpu_ms() + ms;

    while (thread_cpu_ms() < end)
        for (int i = 0; i < 10000; i++)
            sink = sink + (unsigned long)i;
    return sink;
}

#endif
