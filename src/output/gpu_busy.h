/* gpu_busy.h - how busy each GPU was, and what it waited for (gpu_busy.c).
 *
 * A sink (prof_gpu_busy_sink): from the completed GPU zones, per device and per
 * stream, the share of a window during which a zone's work was on the GPU
 * (the union of their spans, gpu_spans.c); from the CPU zones of the
 * threads that launched GPU work, the stage those threads were in while
 * the GPU was idle (the ML profiling checklist's bottleneck check,
 * gpu_idle.c). The figures are computed here once; gpu_format.c writes
 * them. Collector side: every call with the runtime lock held, except
 * prof_gpu_pub_figures_get. */
#ifndef PROF_GPU_BUSY_H
#define PROF_GPU_BUSY_H

#include <stdint.h>

#include "gpu_mem.h"
#include "nvml.h"
#include "sink.h"

struct prof_thread;

#define GPU_TRACKS 64               /* devices and streams followed */
#define GPU_LOST_STAGES 16          /* stages whose lost GPU sides are named */

extern const struct prof_sink prof_gpu_busy_sink;

/* A summary's GPU figures (prof_gpu_figures_get). */
struct prof_gpu_stream_figures {
    int stream_no;                  /* as the trace numbers it */
    double busy;                    /* share of the wall time, 0-1 */
};

struct prof_gpu_device_figures {
    int device;
    double busy;                    /* the zones' busy share of the wall time, 0-1 */
    uint64_t busy_ns, wall_ns;
    uint64_t gap_ns;                /* the largest gap merged into busy time */
    int have_nv;                    /* nv holds NVML's figures */
    struct prof_nvml_figures nv;
    int have_drv;                   /* no NVML figures: the driver's memory (gpu_mem.h) */
    uint64_t drv_used, drv_peak;    /* its last sample and largest, bytes */
    double util;                    /* NVML's utilization where there, else busy */
    int check;                      /* the bottleneck check applies (util under 85%) */
    const char *band, *cause;       /* the checklist's band and its usual cause */
    const char *top_stage;          /* the stage launchers were in most while idle, or NULL */
    double top_share;               /* its share of the idle time */
    int first_stream, nstreams;     /* its streams in prof_gpu_figures.str */
};

struct prof_gpu_lost_figures {
    const char *stage;
    uint64_t count;
    const char *cause;              /* prof_cuda_lost_cause_name of the last */
};

struct prof_gpu_figures {
    int window;                     /* the current window's, else the run's */
    int ndevices, nstreams, nlost;
    struct prof_gpu_device_figures dev[GPU_TRACKS];
    struct prof_gpu_stream_figures str[GPU_TRACKS];
    struct prof_gpu_lost_figures lost[GPU_LOST_STAGES];   /* stages with a count */
    uint64_t lost_other;            /* GPU sides lost of stages beyond these */
};

/* The devices that ran GPU zones, in the order they first did, with their
 * streams, and the GPU sides lost per stage, over the current window
 * (window != 0) or the whole run; wall_ns: the summary's wall time. The
 * held CPU zones are settled first. Names point at interned stage names. */
void prof_gpu_figures_get(struct prof_gpu_figures *out, int window, uint64_t wall_ns);

/* The whole run's summary (at exit, or asked for): the trace gets the
 * device tracks' last busy bins now, on what has arrived. */
void prof_gpu_bins_final(uint64_t wall_ns);

/* Each device's busy ratio over the last second, for the metrics thread. */
struct prof_gpu_busy_pub {
    int device;
    double busy;
};

/* The GPU figures the metrics write (metrics_text.c), the last published
 * samples, each list in the order its devices arrived: the busy ratios
 * over the last second; NVML's last sample of each device it has one of;
 * the driver's device memory (gpu_mem.h), only where NVML has a sample of
 * no device (nmem 0 otherwise: NVML's memory figure is the same one). */
struct prof_gpu_pub_figures {
    int nbusy, nnvml, nmem;
    struct prof_gpu_busy_pub busy[GPU_TRACKS];
    struct prof_nvml_pub nvml[GPU_TRACKS];
    struct prof_gpu_mem_pub mem[GPU_TRACKS];
};

/* Fill out. Any thread: takes only the publication locks of gpu_busy.c,
 * nvml.c and gpu_mem.c, one at a time. */
void prof_gpu_pub_figures_get(struct prof_gpu_pub_figures *out);

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

#endif
