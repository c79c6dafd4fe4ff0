/* gpu_mem.c - device memory from the CUDA driver, where NVML gives none
 * (gpu_mem.h). cuMemGetInfo says the device's free and total bytes as the
 * context sees them; used = total - free, every process's allocations
 * included, as NVML's figure is. It needs a current context: the collector
 * pushes the event pool's context of that device (the one the program's
 * CUDA zones use, as cuda_poll.c does for its events) and pops it, so no
 * context is ever created. The driver call costs a few us; it is made
 * every 100 ms for each device, only while NVML has no figures for it. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cuda_driver.h"
#include "cuda_pool.h"
#include "gpu_mem.h"
#include "log.h"
#include "nvml.h"
#include "trace.h"

#define GPU_MEM_PERIOD_NS 100000000ull     /* 100 ms */
#define GPU_MEM_DEVICES 16

struct acc {
    uint64_t used, peak, samples;
};

static struct {
    int device;
    int failed;                  /* the driver refused: left out */
    struct acc win, run;
} devs[GPU_MEM_DEVICES];
static int ndevs;
static uint64_t next_ns;
/* The last samples, for the metrics thread. */
static pthread_mutex_t pub_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int device;
    uint64_t used;
} pub[GPU_MEM_DEVICES];
static int npub;
static int note_failed;

void prof_gpu_mem_note_device(int device)
{
    for (int i = 0; i < ndevs; i++)
        if (devs[i].device == device)
            return;
    if (ndevs == GPU_MEM_DEVICES)
        return;
    memset(&devs[ndevs], 0, sizeof devs[0]);
    devs[ndevs++].device = device;
}

/* Free and total bytes of device, through a pool's context. */
static int driver_info(int device, size_t *free_b, size_t *total)
{
    unsigned n = __atomic_load_n(&prof_cuda_npools, __ATOMIC_ACQUIRE);

    if (prof_cu.mem_get_info == NULL)
        return -ENOSYS;
    for (unsigned i = 0; i < n; i++) {
        struct cuda_pool *p = prof_cuda_pools[i];
        CUcontext popped;
        CUresult rc;

        if (p->device != device || __atomic_load_n(&p->dead, __ATOMIC_RELAXED))
            continue;
        if (prof_cu.ctx_push(p->ctx) != CU_SUCCESS)
            continue;
        rc = prof_cu.mem_get_info(free_b, total);
        prof_cu.ctx_pop(&popped);
        if (rc == CU_SUCCESS && *free_b <= *total)
            return 0;
        if (rc != CU_SUCCESS) {
            char buf[32];

            prof_log_once(&note_failed, "cuMemGetInfo failed (%s) on CUDA device %d: its "
                          "memory is not sampled", prof_cu_error_name_in(rc, buf), device);
            return -EIO;
        }
    }
    return -ENOENT;
}

static void publish(int device, uint64_t used)
{
    int i;

    pthread_mutex_lock(&pub_lock);
    for (i = 0; i < npub && pub[i].device != device; i++)
        ;
    if (i < GPU_MEM_DEVICES) {
        pub[i].device = device;
        pub[i].used = used;
        if (i == npub)
            npub++;
    }
    pthread_mutex_unlock(&pub_lock);
}

void prof_gpu_mem_tick(uint64_t now)
{
    struct prof_nvml_figures nv;

    if (ndevs == 0 || now < next_ns)
        return;
    next_ns = now + GPU_MEM_PERIOD_NS;
    for (int i = 0; i < ndevs; i++) {
        size_t free_b, total;
        uint64_t used;
        char name[64];
        int err;

        if (devs[i].failed || prof_nvml_figures(devs[i].device, 0, &nv) == 0)
            continue;    /* NVML says it (the same figure, with its peak) */
        if ((err = driver_info(devs[i].device, &free_b, &total)) != 0) {
            devs[i].failed = err != -ENOENT;
            continue;
        }
        used = (uint64_t)(total - free_b);
        devs[i].win.used = used;
        if (used > devs[i].win.peak)
            devs[i].win.peak = used;
        devs[i].win.samples++;
        snprintf(name, sizeof name, "GPU %d memory used MiB", devs[i].device);
        prof_trace_counter(NULL, name, now, (double)used / (1024.0 * 1024.0));
        publish(devs[i].device, used);
    }
}

int prof_gpu_mem_published(struct prof_gpu_mem_pub *out, int max)
{
    int n;

    pthread_mutex_lock(&pub_lock);
    for (n = 0; n < npub && n < max; n++) {
        out[n].device = pub[n].device;
        out[n].used = pub[n].used;
    }
    pthread_mutex_unlock(&pub_lock);
    return n;
}

int prof_gpu_mem_figures(int device, int window, uint64_t *used, uint64_t *peak)
{
    for (int i = 0; i < ndevs; i++) {
        struct acc a = devs[i].win;

        if (devs[i].device != device)
            continue;
        if (!window) {
            if (a.samples == 0)
                a.used = devs[i].run.used;
            if (devs[i].run.peak > a.peak)
                a.peak = devs[i].run.peak;
            a.samples += devs[i].run.samples;
        }
        if (a.samples == 0)
            return -ENOENT;
        *used = a.used;
        *peak = a.peak;
        return 0;
    }
    return -ENOENT;
}

void prof_gpu_mem_window_close(void)
{
    for (int i = 0; i < ndevs; i++) {
        struct acc *w = &devs[i].win, *r = &devs[i].run;

        if (w->samples)
            r->used = w->used;
        if (w->peak > r->peak)
            r->peak = w->peak;
        r->samples += w->samples;
        memset(w, 0, sizeof *w);
    }
}

void prof_gpu_mem_run_reset(void)
{
    for (int i = 0; i < ndevs; i++) {
        memset(&devs[i].win, 0, sizeof devs[i].win);
        memset(&devs[i].run, 0, sizeof devs[i].run);
    }
}

void prof_gpu_mem_atfork_child(void)
{
    pthread_mutex_init(&pub_lock, NULL);
    npub = 0;
    ndevs = 0;
    next_ns = 0;
}
