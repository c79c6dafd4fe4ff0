/* load.h - what the load tests share: memory figures from /proc and the
 * heap, and a line format for the figures docs/RELIABILITY.md quotes. */
#ifndef PROF_TEST_LOAD_H
#define PROF_TEST_LOAD_H

#include <malloc.h>
#include <stdio.h>
#include <string.h>

/* A "Name:   N kB" field of /proc/self/status, in kB, or -1. */
static inline long load_status_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    size_t n = strlen(field);
    long kb = -1;

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            kb = strtol(line + n + 1, NULL, 10);
    fclose(f);
    return kb;
}

/* Resident memory of the process in kB (VmRSS), and its peak (VmHWM). */
static inline long load_rss_kb(void)
{
    return load_status_kb("VmRSS");
}

static inline long load_rss_peak_kb(void)
{
    return load_status_kb("VmHWM");
}

/* Bytes allocated with malloc and not freed (glibc's count). */
static inline size_t load_heap_bytes(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 mi = mallinfo2();

    return mi.uordblks + mi.hblkhd;
#else
    return 0;
#endif
}

/* Threads of this process now. */
static inline int load_threads(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    int n = -1;

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "Threads:", 8) == 0)
            n = (int)strtol(line + 8, NULL, 10);
    fclose(f);
    return n;
}

/* "figure: NAME = VALUE UNIT": one line per measured figure. */
#define FIGURE(name, unit, fmt, ...) \
    printf("figure: %s = " fmt " %s\n", name, __VA_ARGS__, unit)

#endif
