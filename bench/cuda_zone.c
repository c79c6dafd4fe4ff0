/* cuda_zone.c - what a CUDA zone costs on the application thread.
 *
 * A CUDA zone is a CPU zone plus two cuEventRecord calls on the stream,
 * which any event-based GPU timer has to make. The figure that is prof's own
 * is the rest: taking and returning pooled events, finding the stream's
 * context, checking for graph capture, and pushing the record. So the run
 * measures, with the same driver and stream:
 *
 *   zone           PROF_CUDA_ZONE("bench", stream) with nothing inside
 *   event_records  two cuEventRecord calls on pre-created events
 *   capture query  one cuStreamIsCapturing call (prof makes one per zone)
 *   cpu_zone       PROF_ZONE, for reference
 *
 * and overhead = zone - event_records. Each figure is the median over RUNS
 * runs of ZONES; between runs (untimed) the collector delivers the GPU
 * zones, so the events go back to the pool as in a steady training loop.
 *
 * With PROF_CUDA=kernels the zone records no events (its GPU side comes
 * from CUPTI), and one more figure matters: what CUPTI adds to each launch.
 *
 *   launch         one cuMemsetD8Async of a byte on the stream: with
 *                  PROF_CUDA=kernels CUPTI records it (its API and memset
 *                  records), without, it is the plain launch; run both
 *                  modes to compare
 *
 * Between kernels-mode runs one memset (untimed) follows the zones: a
 * stream runs in order, so the zones' spans are final once it is read, and
 * the run need not wait out the 2 s a zone that launched nothing is held.
 *
 * The driver is PROF_CUDA_LIB (the test suite's fake, under `meson test
 * --benchmark`) or libcuda.so.1: on a machine with a GPU, run it with
 * PROF_CUDA_LIB unset to measure the real driver.
 *
 * Last line, for scripts:
 * prof-bench cuda: zone=<ns> event_records=<ns> overhead=<ns> ratio=<x>
 *                  launch=<ns> mode=<events|kernels> */
#include <dlfcn.h>

#include <prof.h>

#include "bench.h"

#define ZONES 1000
#define RUNS 101

typedef int CUresult;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUevent;
typedef unsigned long long CUdeviceptr;

static CUresult (*cu_record)(CUevent, CUstream);
static CUresult (*cu_capturing)(CUstream, int *);
static CUresult (*cu_memset)(CUdeviceptr, unsigned char, size_t, CUstream);
static CUdeviceptr dev_byte;
static int kernels_mode;
static CUstream stream;
static CUevent ev_a, ev_b;
static uint64_t delivered;

__attribute__((noinline)) static double run_records(int n)
{
    uint64_t t0 = bench_now_ns();

    for (int i = 0; i < n; i++) {
        cu_record(ev_a, stream);
        cu_record(ev_b, stream);
    }
    return (double)(bench_now_ns() - t0) / n;
}

__attribute__((noinline)) static double run_capture_queries(int n)
{
    uint64_t t0 = bench_now_ns();
    int status;

    for (int i = 0; i < n; i++)
        cu_capturing(stream, &status);
    return (double)(bench_now_ns() - t0) / n;
}

__attribute__((noinline)) static double run_cuda_zones(int n)
{
    uint64_t t0 = bench_now_ns();

    for (int i = 0; i < n; i++) {
        PROF_CUDA_ZONE("bench_cuda", stream);
        __asm__ __volatile__("" ::: "memory");
    }
    return (double)(bench_now_ns() - t0) / n;
}

__attribute__((noinline)) static double run_launches(int n)
{
    uint64_t t0 = bench_now_ns();

    for (int i = 0; i < n; i++)
        cu_memset(dev_byte, 0, 1, stream);
    return (double)(bench_now_ns() - t0) / n;
}

static double run_cpu_zones(int n)
{
    return bench_zones(n, "bench_cpu");
}

/* Untimed: wait until the collector delivered every GPU zone so far. */
static int settle(void)
{
    prof_stage_stats st;
    uint64_t deadline = bench_now_ns() + 10000000000ull;

    if (kernels_mode)
        cu_memset(dev_byte, 0, 1, stream);
    for (;;) {
        if (prof_stats("bench_cuda [gpu]", &st) == 0 && st.count >= delivered)
            return 0;
        if (bench_now_ns() > deadline)
            return -1;
        usleep(200);
    }
}

static double median_run(double (*fn)(int), int cuda)
{
    double v[RUNS];

    for (int r = 0; r < RUNS; r++) {
        v[r] = fn(ZONES);
        if (cuda) {
            delivered += ZONES;
            if (settle() != 0) {
                fprintf(stderr, "cuda_zone: GPU zones were not delivered\n");
                exit(1);
            }
        } else {
            prof_flush();
        }
    }
    return bench_median(v, RUNS);
}

#define SYM(var, name) \
    do { \
        *(void **)&var = dlsym(h, name); \
        if (var == NULL) { \
            printf("prof-bench cuda: skipped (driver %s lacks %s)\n", lib, name); \
            return 77; \
        } \
    } while (0)

int main(int argc, char **argv)
{
    const char *lib;
    CUresult (*cu_init)(unsigned);
    CUresult (*cu_device_get)(int *, int);
    CUresult (*cu_primary_ctx)(CUcontext *, int);
    CUresult (*cu_set_current)(CUcontext);
    CUresult (*cu_stream_create)(CUstream *, unsigned);
    CUresult (*cu_event_create)(CUevent *, unsigned);
    CUresult (*cu_mem_alloc)(CUdeviceptr *, size_t);
    CUcontext ctx;
    double zone, records, cpu, capture, launch;
    const char *mode = getenv("PROF_CUDA");
    void *h;
    int dev;

    (void)argc;
    bench_require_env(argv, "PROF", "1");
    bench_require_env(argv, "PROF_SUMMARY", "off");
    lib = getenv("PROF_CUDA_LIB");
    if (lib == NULL || *lib == '\0')
        lib = "libcuda.so.1";
    if ((h = dlopen(lib, RTLD_NOW | RTLD_LOCAL)) == NULL) {
        printf("prof-bench cuda: skipped (no CUDA driver: %s)\n", dlerror());
        return 77;
    }
    SYM(cu_init, "cuInit");
    SYM(cu_device_get, "cuDeviceGet");
    SYM(cu_primary_ctx, "cuDevicePrimaryCtxRetain");
    SYM(cu_set_current, "cuCtxSetCurrent");
    SYM(cu_stream_create, "cuStreamCreate");
    SYM(cu_event_create, "cuEventCreate");
    SYM(cu_record, "cuEventRecord");
    SYM(cu_capturing, "cuStreamIsCapturing");
    SYM(cu_mem_alloc, "cuMemAlloc_v2");
    SYM(cu_memset, "cuMemsetD8Async");
    kernels_mode = mode != NULL && strcmp(mode, "kernels") == 0;
    if (cu_init(0) != 0 || cu_device_get(&dev, 0) != 0 || cu_primary_ctx(&ctx, dev) != 0 ||
        cu_set_current(ctx) != 0 || cu_stream_create(&stream, 1 /* non-blocking */) != 0 ||
        cu_event_create(&ev_a, 0) != 0 || cu_event_create(&ev_b, 0) != 0 ||
        cu_mem_alloc(&dev_byte, 256) != 0) {
        printf("prof-bench cuda: skipped (no usable CUDA device behind %s)\n", lib);
        return 77;
    }
    prof_enable(1);

    /* Warm up: the driver load, the pool, the thread's cache. */
    run_cuda_zones(ZONES);
    delivered += ZONES;
    if (settle() != 0) {
        fprintf(stderr, "cuda_zone: GPU zones were not delivered\n");
        return 1;
    }
    run_records(ZONES);
    run_cpu_zones(ZONES);

    records = median_run(run_records, 0);
    zone = median_run(run_cuda_zones, 1);
    cpu = median_run(run_cpu_zones, 0);
    capture = median_run(run_capture_queries, 0);
    launch = median_run(run_launches, 0);

    printf("driver: %s, PROF_CUDA=%s\n", lib, kernels_mode ? "kernels" : "events");
    printf("%-44s %8.1f ns\n", "CUDA zone (begin + end)", zone);
    printf("%-44s %8.1f ns\n", "two cuEventRecord calls (the floor)", records);
    printf("%-44s %8.1f ns\n", "prof's own part of a CUDA zone", zone - records);
    printf("%-44s %8.1f ns\n", "  of which cuStreamIsCapturing", capture);
    printf("%-44s %8.1f ns\n", "  of which a CPU zone", cpu);
    /* What a user compares: a CUDA zone against the least any event-based
     * timer pays (on an H200, issue 29: ~2.4 us, nearly all of it the two
     * records, so the ratio is near 1). */
    printf("%-44s %8.2f x\n", "CUDA zone / the two-record floor", records > 0 ? zone / records : 0);
    printf("%-44s %8.1f ns\n", kernels_mode ? "a memset launch, CUPTI recording it"
                                            : "a memset launch (no CUPTI)", launch);
    printf("prof-bench cuda: zone=%.1f event_records=%.1f overhead=%.1f ratio=%.2f launch=%.1f "
           "mode=%s\n", zone, records, zone - records, records > 0 ? zone / records : 0, launch,
           kernels_mode ? "kernels" : "events");
    return 0;
}
