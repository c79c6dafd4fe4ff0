/* nvml.h - the GPU's own counters from NVML (nvml.c): utilization (the
 * figure nvidia-smi shows), memory used, power and SM clock, sampled by the
 * collector every 100 ms for the devices that ran GPU zones. NVML
 * (libnvidia-ml.so.1, or PROF_NVML_LIB) is dlopen'd and declared by hand:
 * no link, no header; PROF_NVML=0 leaves it alone. Collector side (the
 * runtime lock held), except prof_nvml_published. */
#ifndef PROF_NVML_H
#define PROF_NVML_H

#include <stdint.h>

/* The first GPU zone of device arrived (gpu_busy.c's sink): sample it
 * from now on. The first call opens NVML. */
void prof_nvml_note_device(int device);

/* Once per wake of the collector thread: samples are due every 100 ms. */
void prof_nvml_tick(uint64_t now_ns);

struct prof_nvml_figures {
    double util;                 /* mean utilization, 0-1 */
    uint64_t mem_used;           /* bytes, the last sample */
    uint64_t mem_peak;           /* bytes, the largest sample */
    double power_w;              /* mean */
    unsigned sm_mhz;             /* mean */
    uint64_t samples;
};

/* A device's figures over the current window (window != 0) or the run.
 * 0, or -ENOENT when NVML gave none for it. */
int prof_nvml_figures(int device, int window, struct prof_nvml_figures *out);

/* A periodic summary closed the window; the run started again
 * (prof_reset, the warm-up's end). gpu_busy.c. */
void prof_nvml_window_close(void);
void prof_nvml_run_reset(void);

/* In a forked child: no devices, the publication lock made anew. */
void prof_nvml_atfork_child(void);

/* A device's last sample, for the metrics. */
struct prof_nvml_pub {
    int device;
    double util;                 /* utilization, 0-1 */
    uint64_t mem_used;           /* bytes */
    double power_w;
    unsigned sm_mhz;
};

/* The last sample of each device that has one, at most max, in the order
 * the devices arrived, into out; how many. Any thread (its own lock). */
int prof_nvml_published(struct prof_nvml_pub *out, int max);

#endif
