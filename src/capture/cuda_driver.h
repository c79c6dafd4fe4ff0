/* cuda_driver.h - the CUDA driver API as prof uses it, declared by hand (no
 * toolkit header is needed to build), and loading it at run time
 * (cuda_driver.c). Private to the cuda*.c files. */
#ifndef PROF_CUDA_DRIVER_H
#define PROF_CUDA_DRIVER_H

#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

enum {
    CU_SUCCESS = 0,
    CU_ERROR_NOT_INITIALIZED = 3,
    CU_ERROR_DEINITIALIZED = 4,
    CU_ERROR_NOT_READY = 600,
};

/* CU_EVENT_DEFAULT: timing on (we need elapsed times), blocking sync off
 * (nobody waits on these events, and the collector only queries them). */
#define CU_EVENT_FLAGS 0u
#define CU_STREAM_NON_BLOCKING 1u
/* Special stream handles: CU_STREAM_LEGACY and CU_STREAM_PER_THREAD. */
#define CU_STREAM_SPECIAL_MAX ((uintptr_t)2)

struct cuda_api {
    CUresult (*ctx_get_current)(CUcontext *ctx);
    CUresult (*ctx_push)(CUcontext ctx);
    CUresult (*ctx_pop)(CUcontext *ctx);
    CUresult (*ctx_get_device)(CUdevice *dev);
    CUresult (*event_create)(CUevent *ev, unsigned flags);
    CUresult (*event_record)(CUevent ev, CUstream stream);
    CUresult (*event_query)(CUevent ev);
    CUresult (*event_elapsed)(float *ms, CUevent start, CUevent end);
    CUresult (*event_destroy)(CUevent ev);
    /* Optional (NULL when the driver lacks them): prof works without them,
     * a little less well. */
    CUresult (*stream_get_ctx)(CUstream stream, CUcontext *ctx);
    CUresult (*stream_create)(CUstream *stream, unsigned flags);
    CUresult (*stream_is_capturing)(CUstream stream, int *status);
    CUresult (*get_error_name)(CUresult err, const char **name);
    CUresult (*device_pci)(char *bus_id, int len, CUdevice dev);
    CUresult (*mem_get_info)(size_t *free_bytes, size_t *total_bytes);
};

/* The driver's entry points. Written once by prof_cuda_driver_open(); the
 * caller publishes them (cuda.c: the release store of its state), and
 * nothing reads them before seeing that. */
extern struct cuda_api prof_cu;

/* dlopen the driver (PROF_CUDA_LIB, or libcuda.so.1) and resolve its entry
 * points into prof_cu. Never cuInit: the program starts CUDA, or it stays
 * unstarted. Once per process, by one thread. Returns 0, or -ENODEV when
 * CUDA zones must time their CPU side only (PROF_CUDA=0, no library, a
 * missing entry point); that case has said why, once, through prof_log. */
int prof_cuda_driver_open(void);

/* The name of a driver error, e.g. "CUDA_ERROR_INVALID_HANDLE"; buf (32
 * bytes) holds "CUDA error N" when the driver has no name for it. Any
 * thread, once prof_cu is loaded. */
const char *prof_cu_error_name_in(CUresult rc, char *buf);
#define cu_error_name(rc) prof_cu_error_name_in((rc), (char[32]){0})

#endif
