/* drain_gpu.c - GPU zones polled and handed on (drain_gpu.h): each
 * completed GPU zone (cuda_poll.c) and kernel (kernels.c) resolved to its
 * stages once and handed to every sink. */
#include <stdint.h>

#include "prof.h"
#include "cuda.h"
#include "dispatch.h"
#include "drain_gpu.h"
#include "env.h"
#include "kernels.h"
#include "runtime.h"
#include "sink.h"
#include "stats.h"

/* A completed GPU zone (cuda_poll.c): its GPU stage and its CPU one. */
static void gpu_sink(void *ctx, const char *name, int device, uint64_t stream, uint64_t start_ns,
                     uint64_t end_ns)
{
    struct prof_stage *gpu = prof_stats_stage(name, PROF_STAGE_GPU);
    /* Kernels outside every zone have no CPU stage: a row of their own. */
    struct prof_stage *cpu = name == prof_kernels_no_zone ? NULL : prof_stats_stage(name, 0);

    (void)ctx;
    if (gpu == NULL || (cpu == NULL && name != prof_kernels_no_zone)) {
        prof_rt.lost_memory++;
        return;
    }
    SINKS_ALL(gpu_zone, gpu, cpu, device, stream, start_ns, end_ns);
}

int prof_gpu_from_kernels;

static void gpu_lost_sink(void *ctx, const char *raw_name, int cause);

/* PROF_CUDA=kernels (kernels.c): a zone's GPU side, the span of its
 * kernels. The same stages and sinks as the events' GPU zones; the
 * busy share takes the kernels themselves instead (prof_gpu_from_kernels). */
static void kzone_sink(const char *name, int device, uint64_t stream, uint64_t start_ns,
                       uint64_t end_ns)
{
    prof_gpu_from_kernels = 1;
    gpu_sink(NULL, name, device, stream, start_ns, end_ns);
    prof_gpu_from_kernels = 0;
}

/* One kernel, for the GPU stage of its zone. Outside every zone, each
 * kernel is a GPU zone of its own, of the stage "(no zone)". */
static void kernel_sink(const char *zone_raw, int device, uint64_t stream, const char *kname,
                        uint64_t start_ns, uint64_t end_ns)
{
    struct prof_stage *gpu = prof_stats_stage(zone_raw, PROF_STAGE_GPU);

    if (gpu == NULL) {
        prof_rt.lost_memory++;
        return;
    }
    if (zone_raw == prof_kernels_no_zone)
        kzone_sink(zone_raw, device, stream, start_ns, end_ns);
    SINKS_ALL(gpu_kernel, gpu, device, stream, kname, start_ns, end_ns);
}

void prof_drain_gpu_poll_locked(void)
{
    prof_cuda_poll(gpu_sink, gpu_lost_sink, NULL);
    if (prof_config_get()->cuda == PROF_CUDA_KERNELS)
        prof_kernels_poll(kernel_sink, kzone_sink, 0);
}

/* A GPU side lost on the collector's side (cuda_poll.c). */
static void gpu_lost_sink(void *ctx, const char *raw_name, int cause)
{
    (void)ctx;
    SINKS_ALL(gpu_lost, raw_name, cause);
}

void prof_drain_gpu_final_locked(void)
{
    if (prof_config_get()->cuda == PROF_CUDA_KERNELS)
        prof_kernels_poll(kernel_sink, kzone_sink, 1);
}
