/* fakenvml.c - a stand-in for libnvidia-ml.so.1, so NVML sampling runs on
 * machines without a GPU. Tests point prof at it with PROF_NVML_LIB.
 *
 *   FAKENVML_UTIL=N       utilization every device reports, percent (41)
 *   FAKENVML_FAIL=init    nvmlInit_v2 fails (NVML_ERROR_DRIVER_NOT_LOADED)
 *   FAKENVML_FAIL=read    every device read fails (NVML_ERROR_GPU_IS_LOST)
 *   fakenvml_set_util(n)  the same as FAKENVML_UTIL, from a test
 *   fakenvml_samples()    utilization reads so far
 *
 * Devices are found by index or by the PCI bus id the fake CUDA driver
 * gives device d ("00000000:%02x:00.0", bus 0x10 + d). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_API __attribute__((visibility("default")))

typedef int nvmlReturn_t;
typedef struct {
    unsigned gpu, memory;
} nvmlUtilization_t;
typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_GPU_IS_LOST = 15,
};

struct fdev {
    int index;
};

static struct fdev devs[8] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};
static int inited;
static int util = -1;
static long long mem_mib = -1;   /* fakenvml_set_mem_mib; -1: 1 GiB per device index + 1 */
static unsigned long long samples;

static const char *fail_mode(void)
{
    const char *v = getenv("FAKENVML_FAIL");

    return v != NULL ? v : "";
}

static unsigned util_now(void)
{
    const char *v;

    if (util >= 0)
        return (unsigned)util;
    v = getenv("FAKENVML_UTIL");
    return v != NULL ? (unsigned)atoi(v) : 41u;
}

FAKE_API void fakenvml_set_util(int percent)
{
    __atomic_store_n(&util, percent, __ATOMIC_RELAXED);
}

/* Every device's memory used from now on, in MiB. */
FAKE_API void fakenvml_set_mem_mib(long long mib)
{
    __atomic_store_n(&mem_mib, mib, __ATOMIC_RELAXED);
}

FAKE_API unsigned long long fakenvml_samples(void)
{
    return __atomic_load_n(&samples, __ATOMIC_RELAXED);
}

FAKE_API nvmlReturn_t nvmlInit_v2(void)
{
    if (strcmp(fail_mode(), "init") == 0)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    inited = 1;
    return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlShutdown(void)
{
    return NVML_SUCCESS;
}

FAKE_API const char *nvmlErrorString(nvmlReturn_t rc)
{
    switch (rc) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    default: return "Unknown Error";
    }
}

FAKE_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, struct fdev **dev)
{
    if (!inited)
        return NVML_ERROR_UNINITIALIZED;
    if (index >= 8)
        return NVML_ERROR_NOT_FOUND;
    *dev = &devs[index];
    return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, struct fdev **dev)
{
    unsigned domain, bus, slot;

    if (!inited)
        return NVML_ERROR_UNINITIALIZED;
    if (sscanf(bus_id, "%x:%x:%x", &domain, &bus, &slot) != 3 || bus < 0x10 || bus >= 0x18)
        return NVML_ERROR_NOT_FOUND;
    *dev = &devs[bus - 0x10];
    return NVML_SUCCESS;
}

static int reads_fail(void)
{
    return strcmp(fail_mode(), "read") == 0;
}

FAKE_API nvmlReturn_t nvmlDeviceGetUtilizationRates(struct fdev *d, nvmlUtilization_t *u)
{
    (void)d;
    if (reads_fail())
        return NVML_ERROR_GPU_IS_LOST;
    u->gpu = util_now();
    u->memory = 10;
    __atomic_fetch_add(&samples, 1, __ATOMIC_RELAXED);
    return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlDeviceGetMemoryInfo(struct fdev *d, nvmlMemory_t *m)
{
    if (reads_fail())
        return NVML_ERROR_GPU_IS_LOST;
    m->total = 80ull << 30;
    long long mib = __atomic_load_n(&mem_mib, __ATOMIC_RELAXED);

    m->used = mib >= 0 ? (unsigned long long)mib << 20 : (1ull << 30) * (unsigned)(d->index + 1);
    m->free = m->total - m->used;
    return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlDeviceGetPowerUsage(struct fdev *d, unsigned *mw)
{
    (void)d;
    if (reads_fail())
        return NVML_ERROR_GPU_IS_LOST;
    *mw = 250000;
    return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlDeviceGetClockInfo(struct fdev *d, int type, unsigned *mhz)
{
    (void)d;
    if (reads_fail())
        return NVML_ERROR_GPU_IS_LOST;
    if (type != 1)
        return NVML_ERROR_INVALID_ARGUMENT;
    *mhz = 1980;
    return NVML_SUCCESS;
}
