/* gpu_format.h - the GPU figures (gpu_busy.h) as the summary's text and
 * JSON (gpu_format.c). */
#ifndef PROF_GPU_FORMAT_H
#define PROF_GPU_FORMAT_H

#include <stdint.h>

#include "json.h"

/* The summary's lines, one per device that ran GPU zones, under the
 * header: its busy share (and its streams'), NVML's figures where there
 * are some, and the bottleneck line under 85%. window: the current
 * window's, else the whole run's; wall_ns: the summary's wall time. Lock
 * held. */
void prof_gpu_summary_text(struct prof_buf *b, int window, uint64_t wall_ns);

/* The same as the JSON member ,"gpus":[...] of a summary section. */
void prof_gpu_summary_json(struct prof_buf *b, int window, uint64_t wall_ns);

#endif
