/* drain_gpu.h - GPU zones polled and handed on (drain_gpu.c): each GPU
 * zone completed since the last poll (PROF_CUDA) and each kernel
 * (PROF_CUDA=kernels) resolved to its stages and handed to every sink.
 * Runtime lock held. */
#ifndef PROF_DRAIN_GPU_H
#define PROF_DRAIN_GPU_H

/* Completed GPU zones polled and handed to the sinks (the drain calls it
 * at each pass's end). */
void prof_drain_gpu_poll_locked(void);

/* Shutdown (PROF_CUDA=kernels): CUPTI flushed, every kernel read and
 * every zone's GPU side delivered. */
void prof_drain_gpu_final_locked(void);

#endif
