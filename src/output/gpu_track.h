/* gpu_track.h - one device's or stream's GPU track, as gpu_busy.c keeps
 * it and gpu_idle.c settles the check on it. */
#ifndef PROF_GPU_TRACK_H
#define PROF_GPU_TRACK_H

#include <stdint.h>

#include "gpu_idle.h"
#include "gpu_spans.h"

#define GPU_BINS_METRIC 10          /* the metric: the last second of 100 ms bins */

struct prof_gpu_track {
    int device;
    int stream_no;                  /* -1: the device; else as the trace numbers it */
    uint64_t stream;
    struct prof_spans sp;           /* the busy union; sp.gap_win: the window's largest merge */
    uint64_t gap_run;               /* the largest gap merged in the run */
    uint64_t run_busy_ns;           /* busy in closed windows */
    /* Device tracks only. */
    uint64_t bin_at;                /* the next trace bin's start */
    double bins[GPU_BINS_METRIC];
    unsigned nbins;
    struct prof_gpu_idle idle_win, idle_run;
};

#endif
