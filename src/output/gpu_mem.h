/* gpu_mem.h - device memory from the CUDA driver (gpu_mem.c), where NVML
 * gives none (no NVML, PROF_NVML=0, a device NVML cannot find): the
 * collector asks cuMemGetInfo every 100 ms, inside a context prof already
 * uses (an event pool's: never one of its own), for the devices that ran
 * GPU zones. Collector side, the runtime lock held (gpu_busy.c's hooks). */
#ifndef PROF_GPU_MEM_H
#define PROF_GPU_MEM_H

#include <stdint.h>

/* The first GPU zone of device arrived: sample it from now on. */
void prof_gpu_mem_note_device(int device);

/* Once per wake of the collector: samples are due every 100 ms. */
void prof_gpu_mem_tick(uint64_t now_ns);

/* Device memory used over the current window (window != 0) or the run:
 * the last sample and the largest, bytes. 0, or -ENOENT where the driver
 * gave none for it. */
int prof_gpu_mem_figures(int device, int window, uint64_t *used, uint64_t *peak);

/* A periodic summary closed the window; the run started again. */
void prof_gpu_mem_window_close(void);
void prof_gpu_mem_run_reset(void);

/* A device's last sample of the driver's, for the metrics. */
struct prof_gpu_mem_pub {
    int device;
    uint64_t used;               /* bytes */
};

/* The driver's last sample of each device it gave one for, at most max,
 * in the order they first came, into out; how many. Any thread (its own
 * lock). */
int prof_gpu_mem_published(struct prof_gpu_mem_pub *out, int max);

/* In a forked child: no devices (the parent's contexts are not its). */
void prof_gpu_mem_atfork_child(void);

#endif
