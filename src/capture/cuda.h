/* cuda.h - GPU zones timed with CUDA events; the driver is dlopen'd.
 *
 * Application thread: prof_cuda_zone_begin/_end (prof.h) record a pooled
 * start/end event pair on the stream and push one PROF_RECORD_CUDA_ record
 * (start = the pair) into the thread's ring. Collector thread: hands each
 * such record to prof_cuda_submit(), then calls prof_cuda_poll() on every
 * wake, which delivers the zones whose end event completed to a sink. */
#ifndef PROF_CUDA_H
#define PROF_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "prof.h"

/* A completed GPU zone, in the CLOCK_MONOTONIC ns domain. */
typedef void (*prof_gpu_sink)(void *ctx, const char *name, int device, uint64_t stream,
                              uint64_t start_ns, uint64_t end_ns);

/* Why a zone's GPU side was lost (counted per stage: gpu_busy.c). */
enum prof_cuda_lost_cause {
    PROF_CUDA_LOST_NONE = 0,
    PROF_CUDA_LOST_NOCTX,       /* no current context, or an invalid stream */
    PROF_CUDA_LOST_NOPAIR,      /* no event pair: pool full, or creating failed */
    PROF_CUDA_LOST_RECORD,      /* cuEventRecord failed */
    PROF_CUDA_LOST_QUERY,       /* cuEventQuery or cuEventElapsedTime failed */
    PROF_CUDA_LOST_CTX,         /* its context went away with it pending */
    PROF_CUDA_LOST_CAUSES_
};

/* The cause in words, for the summary. */
const char *prof_cuda_lost_cause_name(int cause);

/* Collector: take a drained PROF_RECORD_CUDA_ record. Returns the device
 * of its GPU side (-1 when the driver did not say which), or, for a zone
 * whose GPU side was lost on the application thread, -2 - its cause (enum
 * prof_cuda_lost_cause). */
int prof_cuda_submit(const prof_record_ *r);

/* A GPU side lost on the collector's side, for the stage raw_name, with
 * its cause (enum prof_cuda_lost_cause). */
typedef void (*prof_gpu_lost_sink)(void *ctx, const char *raw_name, int cause);

/* Collector: deliver every pending zone whose events completed to sink,
 * and every zone whose GPU side was lost meanwhile to lost. */
void prof_cuda_poll(prof_gpu_sink sink, prof_gpu_lost_sink lost, void *ctx);

/* Shutdown: the caller polls while prof_cuda_waiting() (zones pending and
 * the driver still there), sleeping between polls with its lock released,
 * then releases the rest with prof_cuda_abandon(), which returns how many
 * were still incomplete (the caller reports). */
int prof_cuda_waiting(void);
size_t prof_cuda_abandon(void);

/* After fork, in the child: forget pending zones and pools (the child has
 * no CUDA context of its own). */
void prof_cuda_atfork_child(void);

/* GPU sides that could not be timed (driver errors, event pool full, no
 * current context, a context destroyed with zones pending); their CPU
 * sides were recorded. Any thread; for the summary's drop count. Zones
 * dropped this way are also reported once through prof_log. */
uint64_t prof_cuda_lost(void);

/* The PCI bus id of CUDA device `device` ("0000:3b:00.0"), which is how
 * NVML finds it (nvml.c). Collector, after a GPU zone of that device.
 * 0, or -ENOENT when the driver cannot say. */
int prof_cuda_device_pci(int device, char *buf, int len);

#endif
