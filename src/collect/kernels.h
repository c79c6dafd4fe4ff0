/* kernels.h - PROF_CUDA=kernels on the collector side (kernels.c): CUPTI's
 * kernel, memcpy and memset records read, each given to the CUDA zone it
 * ran in, and the zones' GPU sides made from their kernels. Every call
 * with the runtime lock held (the collector, or a thread flushing). */
#ifndef PROF_KERNELS_H
#define PROF_KERNELS_H

#include <stdint.h>

struct prof_thread;

/* The stage name of the kernels that ran outside every CUDA zone. */
extern const char prof_kernels_no_zone[];

/* One kernel (memcpy, memset) for the GPU stage of the zone named
 * zone_raw (prof_kernels_no_zone: outside every zone), on stream (CUPTI's
 * id) of device; kname: its short name, interned for the process. */
typedef void (*prof_kernel_sink)(const char *zone_raw, int device, uint64_t stream,
                                 const char *kname, uint64_t start_ns, uint64_t end_ns);
/* A zone's GPU side: the span of its kernels (start_ns == end_ns == its
 * CPU end when its stream ran nothing in it). */
typedef void (*prof_kzone_sink)(const char *zone_raw, int device, uint64_t stream,
                                uint64_t start_ns, uint64_t end_ns);

/* A CUDA zone of thread t (a PROF_RECORD_KZONE_ record) began or ended
 * on CUPTI stream sid at CPU time ns. Returns the device its stream last
 * ran on (0 before any kernel was seen on it). */
int prof_kernels_zone(struct prof_thread *t, const char *name, uint32_t sid, uint32_t depth,
                      int is_end, uint64_t ns);

/* Before a drain of the rings: flush CUPTI when due and take the
 * completed buffers (their kernels were launched before any record the
 * drain is about to take, so every zone that was open at a launch is in
 * this drain). */
void prof_kernels_pass_begin(void);

/* After the drain: read the buffers taken, give their kernels to zones,
 * and deliver the zones that can get no more kernels. final: flush now
 * and deliver every zone (shutdown). */
void prof_kernels_poll(prof_kernel_sink kernel, prof_kzone_sink zone, int final);

/* Kernel records lost (CUPTI's buffers full, prof's tables full). */
uint64_t prof_kernels_lost(void);

/* In a forked child: the parent's zones and records are forgotten. */
void prof_kernels_atfork_child(void);

#endif
