/* outputs_golden_gpu.c - the GPU paths' fixed run, every output known to
 * the byte (outputs_golden.c's principle, golden.h's clock).
 *
 * The runtime is compiled in with its CLOCK_MONOTONIC the program's
 * (golden_clock_gettime), and so is the fake CUDA driver (fakecuda.c,
 * built for this test with the same -Dclock_gettime=golden_clock_gettime;
 * this program exports the function to it): the fake GPU's clock, which
 * stamps its events and kernels, is the one this program moves. The fake
 * CUPTI reads prof's clock (its timestamp callback), the fake NVML none.
 * PROF_CUDA=1 (events) or PROF_CUDA=kernels (CUPTI) is the runner's.
 *
 * The run: 6 steps on the main thread, one device, two streams. A step is
 * a CPU stage "data" (the GPU idle: the bottleneck check names it), a CUDA
 * zone "forward" on stream a (gemm, relu), a CUDA zone "h2d" on stream b
 * (a memcpy, overlapping forward's kernels), a CUDA zone "optimizer" on
 * stream a (a memset and adam, queued behind forward's), then a CPU stage
 * "sync" until the GPU is done; steps run back to back. Step 4 adds a
 * zone "flaky" whose event record fails (PROF_CUDA=1: a GPU side lost,
 * said once); after the last step a kernel runs outside every zone ("(no
 * zone)" with kernels).
 * PROF_SUMMARY_EVERY=3steps: two periodic summaries; NVML's utilization
 * and memory change after the first. Then, as outputs_golden.c: a second
 * past the live view's last tick, the demand summaries, prof_stats_list,
 * and the final summary at prof_shutdown (kernels: the last zones' GPU
 * sides, which no later launch closed, arrive there).
 *
 * What the clock cannot fix by itself, and how this program fixes it:
 *
 *   - A pass of the collector (drain, GPU poll, the GPU busy bins) and its
 *     tick (NVML samples, the live view) read the clock several times: the
 *     clock moves with the runtime's lock held (at()), so each pass and
 *     tick sees one time.
 *   - What is recorded at one time is drained at it (prof_flush before the
 *     move), and the first passes at the new time are made before anything
 *     new is recorded (two prof_flush after it: the first poll of a CUDA
 *     context takes its reference event, the second places its zones), so
 *     each time's trace lines come in one order.
 *   - NVML is sampled on the collector's tick every 100 ms of the clock,
 *     from the tick after the first GPU side arrived: after each move that
 *     makes a sample due, the program waits for it (the fake NVML counts
 *     its reads) before going on.
 *   - cuEventElapsedTime says float milliseconds: every time and length
 *     is a multiple of 125 us (1/8 ms, exact in a float), so the GPU zones
 *     are placed to the nanosecond whatever the reference's age.
 *
 *     outputs_golden_gpu DIR   writes DIR/demand.txt, DIR/demand.json,
 *                              DIR/stats.txt (PROF_SUMMARY, PROF_TRACE,
 *                              PROF_METRICS, PROF_CUDA, PROF_CUDA_LIB,
 *                              PROF_NVML_LIB, PROF_CUPTI_LIB: the runner's)
 */
#include <prof.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "golden.h"
#include "runtime.h"

#define MS 1000u                        /* us */
#define NVML_PERIOD_NS 100000000ull     /* nvml.c's PROF_NVML_PERIOD_NS */

typedef void *CUcontext;
typedef void *CUstream;

/* The fake driver and NVML, as the tests reach them (dlsym on the
 * library prof loads too: one state). */
static struct {
    int (*init)(unsigned);
    int (*ctx_set_current)(CUcontext);
    int (*stream_create)(CUstream *, unsigned);
    CUcontext (*ctx_create)(int device);
    void (*launch_kind)(CUstream, uint64_t ns, int kind, const char *name);
    int (*fail)(const char *name, uint64_t nth, int relative, int sticky, int code);
} cu;

enum { KIND_MEMCPY = 1, KIND_MEMSET = 2, KIND_KERNEL = 10 };

static void *nvml;                      /* once prof opened it */
static unsigned long long (*nvml_samples)(void);
static uint64_t nvml_due_ns;            /* the tick at or after which it samples */
static unsigned long long nvml_want;

static void *sym(void *h, const char *name)
{
    void *p = dlsym(h, name);

    CHECK_MSG(p != NULL, "the fake lacks %s", name);
    return p;
}

static void fake_open(void)
{
    const char *path = getenv("PROF_CUDA_LIB");
    void *h;

    CHECK_MSG(path != NULL, "PROF_CUDA_LIB is not set");
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK_MSG(h != NULL, "dlopen %s: %s", path, dlerror());
    *(void **)&cu.init = sym(h, "cuInit");
    *(void **)&cu.ctx_set_current = sym(h, "cuCtxSetCurrent");
    *(void **)&cu.stream_create = sym(h, "cuStreamCreate");
    *(void **)&cu.ctx_create = sym(h, "fakecuda_ctx_create");
    *(void **)&cu.launch_kind = sym(h, "fakecuda_launch_kind");
    *(void **)&cu.fail = sym(h, "fakecuda_fail");
}

/* prof opens NVML when the first GPU side arrives; from then on it
 * samples on the collector's tick, at its first and then every 100 ms of
 * the clock. A sample due now is waited for. */
static void nvml_wait(void)
{
    uint64_t now = __atomic_load_n(&fake_ns, __ATOMIC_RELAXED);

    if (nvml == NULL) {
        const char *path = getenv("PROF_NVML_LIB");

        CHECK_MSG(path != NULL, "PROF_NVML_LIB is not set");
        if ((nvml = dlopen(path, RTLD_NOW | RTLD_NOLOAD)) == NULL)
            return;
        *(void **)&nvml_samples = sym(nvml, "fakenvml_samples");
    }
    if (now >= nvml_due_ns) {
        nvml_want++;                    /* one device */
        nvml_due_ns = now + NVML_PERIOD_NS;
    }
    for (int i = 0; i < 2000 && nvml_samples() < nvml_want; i++) {
        wake_collector();
        usleep(5000);
    }
    CHECK_MSG(nvml_samples() == nvml_want, "NVML sampled %llu times, not %llu",
              nvml_samples(), nvml_want);
}

static void flush(void)
{
    CHECK_EQ(prof_flush(), 0);
}

/* The clock moves to T0 + t microseconds (never back, on the 125 us
 * grid): see the header. */
static void at(uint64_t t_us)
{
    uint64_t ns = T0 + t_us * 1000u;

    CHECK_MSG(t_us % 125 == 0, "%llu us is off the 125 us grid", (unsigned long long)t_us);
    flush();
    prof_rt_lock();
    CHECK(ns >= __atomic_load_n(&fake_ns, __ATOMIC_RELAXED));
    __atomic_store_n(&fake_ns, ns, __ATOMIC_RELEASE);
    prof_rt_unlock();
    flush();
    flush();
    nvml_wait();
}

/* Work of dur_us queued on a stream (kind: a kernel, memcpy or memset). */
static void launch(CUstream s, uint64_t dur_us, int kind, const char *name)
{
    CHECK(dur_us % 125 == 0);
    cu.launch_kind(s, dur_us * 1000u, kind, name);
}

static CUstream stream_a, stream_b;

static void gpu_step(int s)
{
    prof_zone step = prof_zone_begin("step");
    prof_cuda_zone z;
    uint64_t launched;

    zone("data", 40 * MS + (uint64_t)(s % 3) * MS);
    launched = now_us();
    z = prof_cuda_zone_begin("forward", stream_a);
    launch(stream_a, 6 * MS, KIND_KERNEL, "_Z4gemmPKfS0_Pfi");
    launch(stream_a, 1500, KIND_KERNEL, "_Z4reluPf");
    at(now_us() + 250);
    prof_cuda_zone_end(&z);
    z = prof_cuda_zone_begin("h2d", stream_b);
    launch(stream_b, 2 * MS + (uint64_t)s * 125, KIND_MEMCPY, NULL);
    at(now_us() + 125);
    prof_cuda_zone_end(&z);
    z = prof_cuda_zone_begin("optimizer", stream_a);
    launch(stream_a, 250, KIND_MEMSET, NULL);
    launch(stream_a, 1 * MS, KIND_KERNEL, "_Z4adamPfS_f");
    at(now_us() + 125);
    prof_cuda_zone_end(&z);
    if (s == 4) {
        /* Its start event's record fails, and again with the context
         * asked afresh (PROF_CUDA=1; kernels records none): the GPU side
         * lost. Nothing else records meanwhile: the collector has its
         * reference, so it takes no new one before a second has passed. */
        CHECK_EQ(cu.fail("cuEventRecord", 1, 1, 1, 999), 0);
        z = prof_cuda_zone_begin("flaky", stream_b);
        CHECK_EQ(cu.fail("cuEventRecord", 0, 0, 0, 999), 0);
        launch(stream_b, 500, KIND_KERNEL, "_Z5flakyv");
        at(now_us() + 125);
        prof_cuda_zone_end(&z);
    }
    /* Until the GPU is done (stream a: 8.75 ms of work from the launch),
     * and a little past it. */
    zone("sync", launched + 12 * MS - now_us());
    prof_zone_end(&step);
    prof_step();
}

int main(int argc, char **argv)
{
    prof_zone first;
    CUcontext ctx;

    CHECK_MSG(argc == 2, "usage: outputs_golden_gpu DIR");
    CHECK_EQ(prof_thread_name("main"), 0);
    fake_open();
    CHECK_EQ(cu.init(0), 0);
    ctx = cu.ctx_create(0);
    CHECK_EQ(cu.ctx_set_current(ctx), 0);
    CHECK_EQ(cu.stream_create(&stream_a, 0), 0);
    CHECK_EQ(cu.stream_create(&stream_b, 0), 0);

    /* The first zone starts the runtime: the live view's first tick comes
     * with the clock still (outputs_golden.c says why). */
    first = prof_zone_begin("setup");
    wait_metrics(0);
    at(now_us() + 1 * MS);
    prof_zone_end(&first);
    for (int s = 0; s < 6; s++) {
        if (s == 3) {
            /* The second window's NVML figures differ from the first's. */
            void (*set_util)(int);
            void (*set_mem)(long long);

            CHECK_MSG(nvml != NULL, "NVML not opened by the third step");
            *(void **)&set_util = sym(nvml, "fakenvml_set_util");
            *(void **)&set_mem = sym(nvml, "fakenvml_set_mem_mib");
            set_util(63);
            set_mem(3072);
        }
        gpu_step(s);
    }
    launch(stream_a, 375, KIND_KERNEL, "_Z7cleanupv");
    at(now_us() + 2 * MS);
    /* A second past the last tick: the live view publishes, the metrics
     * file is written. */
    at(now_us() + 1100 * MS);
    wait_metrics(6);
    if (getenv("GOLDEN_LIVE") != NULL)
        live_handshake(argv[1]);
    demand(argv[1], "demand.txt", PROF_FORMAT_TEXT);
    demand(argv[1], "demand.json", PROF_FORMAT_JSON);
    stats_list(argv[1]);
    at(now_us() + 250);
    prof_shutdown();
    return 0;
}
