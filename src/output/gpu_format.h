/* gpu_format.h - the GPU figures (gpu_busy.h) as Prometheus lines
 * (gpu_format.c). */
#ifndef PROF_GPU_FORMAT_H
#define PROF_GPU_FORMAT_H

#include <stdint.h>

#include "json.h"

/* Prometheus text for the metrics thread (metrics_text.c): each device's
 * busy ratio over the last second, NVML's gauges. Any thread; takes only
 * gpu_busy.c's publication lock. rank: the process's (0 without one). */
void prof_gpu_metrics(struct prof_buf *b, int rank);

#endif
