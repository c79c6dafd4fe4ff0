/* memory.h - the process's resident memory (memory.c): RSS now, and its
 * peak over the window and the run, for the summary, the trace, the live
 * file and the metrics. Sampled by the collector (a sink's tick, every
 * PROF_MEM_PERIOD_NS); the peak comes from the kernel's own high-water
 * mark (VmHWM). Linux's /proc/self; elsewhere, or where /proc cannot be
 * read, no figures (known 0). Runtime lock held, as every sink. */
#ifndef PROF_MEMORY_H
#define PROF_MEMORY_H

#include <stdint.h>

#include "sink.h"

#define PROF_MEM_PERIOD_NS 100000000ull    /* 100 ms */

extern const struct prof_sink prof_memory_sink;

struct prof_mem_figures {
    int known;                   /* 0: /proc/self could not be read */
    uint64_t rss;                /* bytes resident now */
    /* window: the most of the samples taken in it and of rss now, or the
     * kernel's high-water mark where that rose in the window; run: the
     * kernel's high-water mark (the process's, since it started). */
    uint64_t peak;
    uint64_t run_peak;           /* the kernel's high-water mark, either way */
};

/* The figures of the current window (window != 0) or of the run, read
 * now (a read of /proc/self/statm and /proc/self/status). */
void prof_mem_figures(int window, struct prof_mem_figures *out);

/* A periodic summary closed the window (collector.c). */
void prof_mem_window_close(void);

#endif
