/* sink.c - the outputs the collector feeds, in order (sink.h): the
 * output floor's list, installed by the floor above (start.c). */
#include <stddef.h>

#include "gpu_busy.h"
#include "kstats.h"
#include "live.h"
#include "memory.h"
#include "registry.h"
#include "sink.h"
#include "stats.h"
#include "trace.h"

_Static_assert(PROF_SIDES_ <= PROF_THREAD_SIDES_ && PROF_SIDES_ <= PROF_STAGE_SIDES_,
               "room for every sink's side state in a thread slot and a stage");

static const struct prof_sink *const all[] = {
    &prof_stats_sink,            /* stages, paths, counters, marks */
    &prof_trace_sink,            /* PROF_TRACE */
    &prof_live_sink,             /* PROF_LIVE, PROF_METRICS */
    &prof_gpu_busy_sink,         /* GPU busy share, NVML, the bottleneck check */
    &prof_kstats_sink,           /* PROF_CUDA=kernels: what each GPU stage ran */
    &prof_memory_sink,           /* RSS and its peak */
    NULL,
};

void prof_sinks_install(void)
{
    prof_sinks = all;
}
