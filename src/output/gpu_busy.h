/* gpu_busy.h - how busy each GPU was, and what it waited for (gpu_busy.c).
 *
 * A sink (prof_gpu_busy_sink): from the completed GPU zones, per device and per
 * stream, the share of a window during which a zone's work was on the GPU
 * (the union of their spans); from the CPU zones of the threads that
 * launched GPU work, the stage those threads were in while the GPU was
 * idle (the ML profiling checklist's bottleneck check). Collector side:
 * every call with the runtime lock held, except prof_gpu_metrics. */
#ifndef PROF_GPU_BUSY_H
#define PROF_GPU_BUSY_H

#include <stdint.h>

#include "json.h"
#include "sink.h"

struct prof_thread;

extern const struct prof_sink prof_gpu_busy_sink;

/* The summary's lines, one per device that ran GPU zones, under the
 * header: its busy share (and its streams'), NVML's figures where there
 * are some, and the bottleneck line under 85%. window: the current
 * window's, else the whole run's; wall_ns: the summary's wall time. */
void prof_gpu_summary_text(struct prof_buf *b, int window, uint64_t wall_ns);

/* The same as the JSON member ,"gpus":[...] of a summary section. */
void prof_gpu_summary_json(struct prof_buf *b, int window, uint64_t wall_ns);

/* The drain took a CUDA zone of thread t, called raw_name, whose GPU side
 * runs on device (prof_cuda_submit's answer): t launches GPU work, and its
 * CPU zones count in the bottleneck check from now on. An answer of -2 or
 * less is a GPU side lost on the application thread, counted for its
 * stage with its cause (-2 - the answer). */
void prof_gpu_launcher(struct prof_thread *t, const char *raw_name, int device);

/* A GPU side lost on the collector's side (cuda_poll.c), counted for the
 * stage raw_name with its cause (enum prof_cuda_lost_cause). */
void prof_gpu_lost(const char *raw_name, int cause);

/* A periodic summary closed the window (collector.c, after the summary
 * was formatted): the window's figures go into the run's. */
void prof_gpu_window_close(void);

/* One device's figures for the live view (live.c's snapshot). */
struct prof_gpu_live {
    int device;
    unsigned nvml;               /* bit 0: nvml_win is known, bit 1: nvml_run, bit 2: mem_* */
    double busy_win, busy_run;   /* share of the window's, the run's wall time, 0-1 */
    double nvml_win, nvml_run;   /* NVML's mean utilization (nvidia-smi's figure), 0-1 */
    uint64_t mem_used, mem_peak_win;   /* device memory used (NVML's, else the driver's):
                                          the last sample and the window's largest, bytes
                                          (with bit 2) */
};

/* The devices that ran GPU zones, at most max of them, into out: their
 * busy share over the current window (win_ns of wall time) and over the
 * run (run_ns), and NVML's utilization where it has samples. Lock held.
 * Returns how many (0 for a process with no GPU zone). */
int prof_gpu_live_locked(struct prof_gpu_live *out, int max, uint64_t win_ns, uint64_t run_ns);

/* Prometheus text for the metrics thread (metrics.c): each device's busy
 * ratio over the last second, NVML's gauges. Any thread; takes only this
 * file's own publication lock. rank: the process's (0 without one). */
void prof_gpu_metrics(struct prof_buf *b, int rank);

#endif
