/* cuda_driver.c - the CUDA driver, loaded at run time.
 *
 * The driver (libcuda.so.1, or PROF_CUDA_LIB) is dlopen'd on the first CUDA
 * zone and never linked, so one build serves machines with and without a
 * GPU. The types and the dozen entry points we use are declared by hand in
 * cuda_driver.h; no CUDA header is needed to build. Anything missing (no
 * library, a missing symbol, PROF_CUDA=0) leaves CUDA zones
 * timing their CPU side only, with one message. Entry points that only
 * make prof better (stream contexts, a private stream, capture checks,
 * error names) are optional and stay NULL on drivers without them.
 *
 * When to load, and who waits for it, is cuda.c's business: this file only
 * knows how. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cuda.h"
#include "cuda_driver.h"
#include "env.h"
#include "log.h"

struct cuda_api prof_cu;

static int note_unavailable;

const char *prof_cu_error_name_in(CUresult rc, char *buf)
{
    const char *name = NULL;

    if (prof_cu.get_error_name != NULL && prof_cu.get_error_name(rc, &name) == CU_SUCCESS &&
        name != NULL)
        return name;
    snprintf(buf, 32, "CUDA error %d", rc);
    return buf;
}

int prof_cuda_device_pci(int device, char *buf, int len)
{
    /* prof_cu was published before the first GPU zone reached the
     * collector (cuda.c's state, then the record's ring). */
    if (prof_cu.device_pci == NULL || device < 0 || len < 13)
        return -ENOENT;
    return prof_cu.device_pci(buf, len, device) == CU_SUCCESS ? 0 : -ENOENT;
}

static void *sym(void *h, const char *name, const char *alt)
{
    void *f = dlsym(h, name);

    if (f == NULL && alt != NULL)
        f = dlsym(h, alt);
    return f;
}

int prof_cuda_driver_open(void)
{
    const struct prof_config *cfg = prof_config_get();
    const char *lib = cfg->cuda_lib != NULL && cfg->cuda_lib[0] != '\0' ? cfg->cuda_lib
                                                                         : "libcuda.so.1";
    const char *missing = NULL;
    char q[PROF_LOG_VALUE_SIZE], r[PROF_LOG_QUOTE_SIZE];
    int named = lib == cfg->cuda_lib;
    struct cuda_api a;
    void *h;

    if (cfg->cuda == PROF_CUDA_OFF) {
        prof_log_once(&note_unavailable, "PROF_CUDA=0: CUDA zones time the CPU side only");
        return -ENODEV;
    }
    h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *err = dlerror();

        prof_log_once(&note_unavailable, "%sno CUDA driver (%s: %s); CUDA zones time the CPU "
                      "side only", cfg->cuda == PROF_CUDA_ON ? "PROF_CUDA=1 but " : "",
                      named ? prof_log_value(q, sizeof q, "PROF_CUDA_LIB", lib) : lib,
                      prof_log_dlerror(r, sizeof r, lib, err));
        return -ENODEV;
    }

    memset(&a, 0, sizeof a);
#define REQUIRE(field, name, alt) \
    do { \
        *(void **)&a.field = sym(h, name, alt); \
        if (a.field == NULL && missing == NULL) \
            missing = name; \
    } while (0)
    REQUIRE(ctx_get_current, "cuCtxGetCurrent", NULL);
    REQUIRE(ctx_push, "cuCtxPushCurrent_v2", "cuCtxPushCurrent");
    REQUIRE(ctx_pop, "cuCtxPopCurrent_v2", "cuCtxPopCurrent");
    REQUIRE(ctx_get_device, "cuCtxGetDevice", NULL);
    REQUIRE(event_create, "cuEventCreate", NULL);
    REQUIRE(event_record, "cuEventRecord", NULL);
    REQUIRE(event_query, "cuEventQuery", NULL);
    /* CUDA 12.8 added cuEventElapsedTime_v2 (what cuda.h of 13 maps the name
     * to); older drivers have only the original. Same signature. */
    REQUIRE(event_elapsed, "cuEventElapsedTime_v2", "cuEventElapsedTime");
    REQUIRE(event_destroy, "cuEventDestroy_v2", "cuEventDestroy");
#undef REQUIRE
    *(void **)&a.stream_get_ctx = sym(h, "cuStreamGetCtx", NULL);
    *(void **)&a.stream_create = sym(h, "cuStreamCreate", NULL);
    *(void **)&a.stream_is_capturing = sym(h, "cuStreamIsCapturing", NULL);
    *(void **)&a.get_error_name = sym(h, "cuGetErrorName", NULL);
    *(void **)&a.device_pci = sym(h, "cuDeviceGetPCIBusId", NULL);
    *(void **)&a.mem_get_info = sym(h, "cuMemGetInfo_v2", "cuMemGetInfo");

    if (missing != NULL) {
        prof_log_once(&note_unavailable,
                      "CUDA driver %s lacks %s; CUDA zones time the CPU side only",
                      named ? prof_log_value(q, sizeof q, "PROF_CUDA_LIB", lib) : lib, missing);
        dlclose(h);
        return -ENODEV;
    }
    /* No cuInit: starting CUDA is the program's business. It starts the
     * driver's threads and memory, and a process that forks afterwards can
     * no longer use CUDA in its children; a profiler must not cause that.
     * A zone in a process whose driver is not initialized yet finds out
     * from cuCtxGetCurrent (CUDA_ERROR_NOT_INITIALIZED, cuda.c) and times
     * its CPU side only. */
    prof_cu = a;
    return 0;
}
