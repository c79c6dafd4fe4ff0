/* mem_check.h - what the memory tests' programs read for themselves: the
 * kernel's own peak (VmHWM), the ground truth prof's figures are held to. */
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

#endif
