/* nvml.c - the GPU's own counters, sampled.
 *
 * NVML (libnvidia-ml.so.1, what nvidia-smi reads) is opened with dlopen
 * like the CUDA driver: no link, no header; the few types and entry points
 * used are declared here. gpu_busy.c's sink tells it the devices the
 * process runs GPU zones on, and samples them on the collector thread
 * every PROF_NVML_PERIOD_NS (an NVML call costs 2-8 us on an H200, with
 * rare spikes to 4 ms: never on an application thread). Each sample goes
 * to the trace (counter tracks per device), into the window's and the
 * run's means for the summary, and to the metrics.
 *
 * A CUDA device ordinal is not an NVML index (CUDA_VISIBLE_DEVICES, and
 * CUDA's fastest-first order): a device is found by its PCI bus id
 * (cuDeviceGetPCIBusId, cuda.h), by index only when the driver cannot say.
 *
 * Failure: no library, a missing entry point or nvmlInit failing is said in
 * one line, when the first GPU zone arrives (a process without CUDA zones
 * never hears of NVML), and then nothing else; a device NVML cannot find,
 * or whose reads fail, is said once and left out. PROF_NVML=0: nothing. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "prof.h"
#include "clock.h"
#include "cuda.h"
#include "env.h"
#include "log.h"
#include "nvml.h"
#include "trace.h"

#define PROF_NVML_PERIOD_NS 100000000ull   /* 100 ms */
#define NVML_DEVICES 16

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
    unsigned gpu, memory;                   /* percent over the driver's sample period */
} nvmlUtilization_t;
typedef struct {
    unsigned long long total, free, used;   /* bytes */
} nvmlMemory_t;
#define NVML_SUCCESS 0
#define NVML_CLOCK_SM 1

static struct {
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*by_index)(unsigned index, nvmlDevice_t *dev);
    nvmlReturn_t (*by_pci)(const char *bus_id, nvmlDevice_t *dev);    /* optional */
    nvmlReturn_t (*utilization)(nvmlDevice_t dev, nvmlUtilization_t *u);
    nvmlReturn_t (*memory)(nvmlDevice_t dev, nvmlMemory_t *m);
    nvmlReturn_t (*power)(nvmlDevice_t dev, unsigned *mw);
    nvmlReturn_t (*clock)(nvmlDevice_t dev, int type, unsigned *mhz);
    const char *(*error_string)(nvmlReturn_t rc);                      /* optional */
} nv;

enum { NVML_UNTRIED, NVML_READY, NVML_UNAVAILABLE };

struct acc {
    double util_sum, power_sum, mhz_sum;
    uint64_t mem_used, samples;
    uint64_t mem_peak;           /* the largest sample */
};

struct dev {
    int device;                  /* CUDA ordinal */
    int state;                   /* 0: not looked up, 1: ok, -1: left out */
    nvmlDevice_t handle;
    struct acc win, run;
    /* The last sample, for the metrics (under pub_lock). */
    double util, power_w;
    uint64_t mem_used;
    unsigned mhz;
    int have_last;
};

static int state;                /* collector only */
static struct dev devs[NVML_DEVICES];
static int ndevs;
static uint64_t next_ns;
static pthread_mutex_t pub_lock = PTHREAD_MUTEX_INITIALIZER;
static int note_open, note_device;

static const char *nvml_error(nvmlReturn_t rc, char *buf, size_t size)
{
    const char *s = nv.error_string != NULL ? nv.error_string(rc) : NULL;

    if (s != NULL)
        return s;
    snprintf(buf, size, "NVML error %d", rc);
    return buf;
}

static void *sym(void *h, const char *name, const char *alt)
{
    void *f = dlsym(h, name);

    return f == NULL && alt != NULL ? dlsym(h, alt) : f;
}

static int nvml_open(void)
{
    const struct prof_config *cfg = prof_config_get();
    const char *lib = cfg->nvml_lib != NULL && cfg->nvml_lib[0] != '\0' ? cfg->nvml_lib
                                                                         : "libnvidia-ml.so.1";
    const char *missing = NULL;
    char buf[32], q[PROF_LOG_VALUE_SIZE], r[PROF_LOG_QUOTE_SIZE];
    int named = lib == cfg->nvml_lib;
    nvmlReturn_t rc;
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);

    if (h == NULL) {
        const char *err = dlerror();

        prof_log_once(&note_open, "no NVML (%s: %s): the summary shows the GPU zones' busy "
                      "share only, not the device's own utilization",
                      named ? prof_log_value(q, sizeof q, "PROF_NVML_LIB", lib) : lib,
                      prof_log_dlerror(r, sizeof r, lib, err));
        return -ENODEV;
    }
#define NVSYM(field, name, alt, required)                                     \
    do {                                                                      \
        *(void **)&nv.field = sym(h, name, alt);                              \
        if (nv.field == NULL && (required) && missing == NULL)                \
            missing = name;                                                   \
    } while (0)
    NVSYM(init, "nvmlInit_v2", "nvmlInit", 1);
    NVSYM(by_index, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex", 1);
    NVSYM(by_pci, "nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByPciBusId", 0);
    NVSYM(utilization, "nvmlDeviceGetUtilizationRates", NULL, 1);
    NVSYM(memory, "nvmlDeviceGetMemoryInfo", NULL, 1);
    NVSYM(power, "nvmlDeviceGetPowerUsage", NULL, 1);
    NVSYM(clock, "nvmlDeviceGetClockInfo", NULL, 1);
    NVSYM(error_string, "nvmlErrorString", NULL, 0);
#undef NVSYM
    if (missing != NULL) {
        prof_log_once(&note_open, "NVML %s lacks %s: the summary shows the GPU zones' busy "
                      "share only",
                      named ? prof_log_value(q, sizeof q, "PROF_NVML_LIB", lib) : lib, missing);
        dlclose(h);
        return -ENODEV;
    }
    /* nvmlInit is reference counted and has none of cuInit's side effects
     * on the program's CUDA; it is never shut down (the program may use
     * NVML too, and exit frees it). */
    if ((rc = nv.init()) != NVML_SUCCESS) {
        prof_log_once(&note_open, "nvmlInit failed (%s): the summary shows the GPU zones' "
                      "busy share only", nvml_error(rc, buf, sizeof buf));
        return -ENODEV;
    }
    return 0;
}

static int dev_lookup(struct dev *d)
{
    char bus[64], buf[32];
    nvmlReturn_t rc;

    if (nv.by_pci != NULL && prof_cuda_device_pci(d->device, bus, sizeof bus) == 0)
        rc = nv.by_pci(bus, &d->handle);
    else
        rc = d->device >= 0 ? nv.by_index((unsigned)d->device, &d->handle) : -1;
    if (rc != NVML_SUCCESS) {
        prof_log_once(&note_device, "NVML has no device for CUDA device %d (%s): its "
                      "utilization is not sampled", d->device, nvml_error(rc, buf, sizeof buf));
        return -1;
    }
    return 1;
}

static void sample(struct dev *d, uint64_t now)
{
    nvmlUtilization_t u;
    nvmlMemory_t m;
    unsigned mw = 0, mhz = 0;
    nvmlReturn_t rc;
    char name[64], buf[32];

    if ((rc = nv.utilization(d->handle, &u)) != NVML_SUCCESS ||
        (rc = nv.memory(d->handle, &m)) != NVML_SUCCESS ||
        (rc = nv.power(d->handle, &mw)) != NVML_SUCCESS ||
        (rc = nv.clock(d->handle, NVML_CLOCK_SM, &mhz)) != NVML_SUCCESS) {
        prof_log_once(&note_device, "NVML failed (%s) on CUDA device %d: its utilization is "
                      "not sampled", nvml_error(rc, buf, sizeof buf), d->device);
        d->state = -1;
        return;
    }
    d->win.util_sum += u.gpu / 100.0;
    d->win.power_sum += mw / 1000.0;
    d->win.mhz_sum += mhz;
    d->win.mem_used = m.used;
    if (m.used > d->win.mem_peak)
        d->win.mem_peak = m.used;
    d->win.samples++;
    snprintf(name, sizeof name, "GPU %d utilization %% (NVML)", d->device);
    prof_trace_counter(NULL, name, now, (double)u.gpu);
    snprintf(name, sizeof name, "GPU %d memory used MiB", d->device);
    prof_trace_counter(NULL, name, now, (double)m.used / (1024.0 * 1024.0));
    snprintf(name, sizeof name, "GPU %d power W", d->device);
    prof_trace_counter(NULL, name, now, mw / 1000.0);
    snprintf(name, sizeof name, "GPU %d SM clock MHz", d->device);
    prof_trace_counter(NULL, name, now, (double)mhz);
    pthread_mutex_lock(&pub_lock);
    d->util = u.gpu / 100.0;
    d->power_w = mw / 1000.0;
    d->mem_used = m.used;
    d->mhz = mhz;
    d->have_last = 1;
    pthread_mutex_unlock(&pub_lock);
}

void prof_nvml_note_device(int device)
{
    int i;

    if (state == NVML_UNAVAILABLE)
        return;
    for (i = 0; i < ndevs; i++)
        if (devs[i].device == device)
            return;
    if (ndevs == NVML_DEVICES)
        return;
    if (state == NVML_UNTRIED) {
        state = prof_config_get()->nvml_off || nvml_open() != 0 ? NVML_UNAVAILABLE : NVML_READY;
        if (state == NVML_UNAVAILABLE)
            return;
    }
    memset(&devs[ndevs], 0, sizeof devs[0]);
    pthread_mutex_lock(&pub_lock);
    devs[ndevs].device = device;
    ndevs++;
    pthread_mutex_unlock(&pub_lock);
}

void prof_nvml_tick(uint64_t now)
{
    int i;

    if (state != NVML_READY || ndevs == 0 || now < next_ns)
        return;
    next_ns = now + PROF_NVML_PERIOD_NS;
    for (i = 0; i < ndevs; i++) {
        struct dev *d = &devs[i];

        if (d->state == 0)
            d->state = dev_lookup(d);
        if (d->state > 0)
            sample(d, prof_clock_now_ns());
    }
}

int prof_nvml_figures(int device, int window, struct prof_nvml_figures *out)
{
    int i;

    for (i = 0; i < ndevs; i++) {
        const struct dev *d = &devs[i];
        struct acc a = d->win;

        if (d->device != device || d->state <= 0)
            continue;
        if (!window) {
            a.util_sum += d->run.util_sum;
            a.power_sum += d->run.power_sum;
            a.mhz_sum += d->run.mhz_sum;
            a.samples += d->run.samples;
            if (d->win.samples == 0)
                a.mem_used = d->run.mem_used;
            if (d->run.mem_peak > a.mem_peak)
                a.mem_peak = d->run.mem_peak;
        }
        if (a.samples == 0)
            return -ENOENT;
        out->util = a.util_sum / (double)a.samples;
        out->power_w = a.power_sum / (double)a.samples;
        out->sm_mhz = (unsigned)(a.mhz_sum / (double)a.samples + 0.5);
        out->mem_used = a.mem_used;
        out->mem_peak = a.mem_peak;
        out->samples = a.samples;
        return 0;
    }
    return -ENOENT;
}

void prof_nvml_window_close(void)
{
    int i;

    for (i = 0; i < ndevs; i++) {
        struct dev *d = &devs[i];

        d->run.util_sum += d->win.util_sum;
        d->run.power_sum += d->win.power_sum;
        d->run.mhz_sum += d->win.mhz_sum;
        d->run.samples += d->win.samples;
        if (d->win.samples)
            d->run.mem_used = d->win.mem_used;
        if (d->win.mem_peak > d->run.mem_peak)
            d->run.mem_peak = d->win.mem_peak;
        memset(&d->win, 0, sizeof d->win);
    }
}

void prof_nvml_atfork_child(void)
{
    pthread_mutex_init(&pub_lock, NULL);
    ndevs = 0;
}

void prof_nvml_run_reset(void)
{
    int i;

    for (i = 0; i < ndevs; i++) {
        memset(&devs[i].win, 0, sizeof devs[i].win);
        memset(&devs[i].run, 0, sizeof devs[i].run);
    }
}

int prof_nvml_published(struct prof_nvml_pub *out, int max)
{
    int i, n = 0;

    pthread_mutex_lock(&pub_lock);
    for (i = 0; i < ndevs && n < max; i++) {
        const struct dev *d = &devs[i];

        if (!d->have_last)
            continue;
        out[n].device = d->device;
        out[n].util = d->util;
        out[n].mem_used = d->mem_used;
        out[n].power_w = d->power_w;
        out[n].sm_mhz = d->mhz;
        n++;
    }
    pthread_mutex_unlock(&pub_lock);
    return n;
}
