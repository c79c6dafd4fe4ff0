/* How busy the GPU was, and what it waited for, on scripted fake-driver
 * timelines: the summary's GPU line (text and JSON) has the union of the
 * GPU zones' spans over the wall time, NVML's utilization beside it, and
 * under 85% the checklist's band and the stage the launching thread was in
 * while the GPU was idle.
 *
 *   test_cuda_busy MODE
 *
 * starving     data 8 ms (CPU), then a 2 ms kernel (which runs during the
 *              next data stage): busy ~25%, the idle time in data,
 *              "under 30%"
 * oscillating  preprocess 5 ms, then a 2 ms kernel: busy ~40%, "30-60%"
 * smallops     a 4 ms CPU stage "launch", then a 3 ms kernel: ~75%, "60-85%"
 * gpubound     5 ms kernels kept queued: busy over 85%, no check
 * streams      data 6 ms, then 2 ms on stream a and 3 ms on stream b at
 *              once: the device 50% (the union), streams ~33% and ~50%
 * stepped      as starving, each iteration a zone "train" around data and
 *              the CUDA zone, after prof_step() and 1 ms outside every
 *              zone: the idle time is still data's, not train's (the
 *              time outside stages, "(no stage)", is not train's child)
 * nocheck      as starving with PROF_GPU_CHECK=0: the busy line only
 * nvml_present, nvml_missing, nvml_initfail, nvml_readfail, nvml_off:
 *              as starving, with NVML there (utilization 41% beside the
 *              zones' 25%, and the band from NVML's), absent, failing at
 *              init, failing its reads, or switched off: one line each
 *              where it fails, and the zones' figure
 * nvml_nocuda  no CUDA zone: NVML is never opened, nothing said
 *
 * What the summary says is checked against what happened, not against
 * the script: the CPU stages are sleeps, which a loaded machine lengthens,
 * and a preemption inside a CUDA zone lengthens its GPU span (the fake
 * driver's clock is the real one). So the test takes the GPU spans from
 * the fake driver's log of event stamps, the CPU stages' times from its
 * own clock reads inside and around each zone, and asks that the busy
 * time, each stream's, the band and the idle time's stage be those of
 * that timeline; the scripted shape (25%, 40%, ...) is only what a quiet
 * machine gives. The band is NVML's where the fake NVML is there, and
 * then exact.
 */
#include "cuda_test.h"
#include "../fuzz/json_strict.h"

#define MS 1000000ull

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};

    nanosleep(&ts, NULL);
}

/* A time span on CLOCK_MONOTONIC, prof's time domain and the fake GPU's. */
struct span {
    uint64_t a, b;
};

/* The CPU stage's zones as the test saw them: in[i] read inside zone i
 * (it covers at least this), out[i] read around it (at most this). */
#define CPU_MAX 512
static struct span cpu_in[CPU_MAX], cpu_out[CPU_MAX];
static int ncpu;
static uint64_t run_from;          /* inside the first zone */

static void cpu_begin(void)
{
    CHECK(ncpu < CPU_MAX);
    cpu_out[ncpu].a = now_ns();
}

static void cpu_inside_from(void)
{
    if ((cpu_in[ncpu].a = now_ns()) < run_from)
        run_from = cpu_in[ncpu].a;
}

static void cpu_inside_to(void)
{
    cpu_in[ncpu].b = now_ns();
}

static void cpu_end(void)
{
    cpu_out[ncpu++].b = now_ns();
}

/* One CUDA zone, waited for: prof holds a thread's CPU zones for the idle
 * time's stage once it knows the thread launches GPU work, which is when a
 * GPU zone of it arrived (tens of ms after it ended), so the zones
 * measured come after. Returns the GPU zones so far. */
static uint64_t warm_up(struct fake *f, CUstream s)
{
    {
        PROF_CUDA_ZONE("step", s);
        f->launch(s, 1000);
    }
    CHECKF(wait_count("step [gpu]", 1, 20000) == 1, "the first GPU zone missing");
    return 1;
}

/* Iterations of: `cpu` ns in stage cpu_name, then a CUDA zone "step"
 * around a kernel of gpu ns. */
static uint64_t loop(struct fake *f, CUstream s, const char *cpu_name, uint64_t cpu, uint64_t gpu,
                     int n)
{
    for (int i = 0; i < n; i++) {
        cpu_begin();
        {
            PROF_ZONE(cpu_name);
            cpu_inside_from();
            sleep_ns(cpu);
            cpu_inside_to();
        }
        cpu_end();
        {
            PROF_CUDA_ZONE("step", s);
            f->launch(s, gpu);
        }
    }
    return (uint64_t)n;
}

static char text[16384], json[65536];
static uint64_t text_at, json_at;  /* before each summary */

/* The summary once every GPU side arrived. The wait is the CPU stage's
 * (cpu_name): the loop's next stage, as far as the GPU can tell, so that
 * the time a loaded machine adds to it reads as that stage. */
static void summaries(uint64_t gpu_zones, const char *cpu_name)
{
    char err[128];

    cpu_begin();
    {
        PROF_ZONE(cpu_name);
        cpu_inside_from();
        CHECKF(wait_count("step [gpu]", gpu_zones, 20000) == gpu_zones, "GPU zones missing");
        cpu_inside_to();
    }
    cpu_end();
    text_at = now_ns();
    CHECK(prof_summary_snprint(text, sizeof text, PROF_FORMAT_TEXT) > 0);
    json_at = now_ns();
    CHECK(prof_summary_snprint(json, sizeof json, PROF_FORMAT_JSON) > 0);
    CHECKF(json_strict_check(json, strlen(json), NULL, NULL, err, sizeof err) == 0,
           "summary JSON: %s", err);
    if (getenv("PROF_TEST_VERBOSE") != NULL)
        fprintf(stderr, "%s\n%s\n", text, json);
}

/* The GPU line of the text summary for device 0. */
static const char *gpu_line(char *buf, size_t size)
{
    const char *p = strstr(text, "\nGPU 0 busy ");
    size_t n;

    CHECKF(p != NULL, "no GPU line in:\n%s", text);
    p++;
    n = strcspn(p, "\n");
    CHECK(n < size);
    memcpy(buf, p, n);
    buf[n] = '\0';
    return buf;
}

static int busy_pct(const char *line)
{
    int v = -1;

    CHECK(sscanf(line, "GPU 0 busy %d%%", &v) == 1);
    return v;
}

/* A number after "key": in the "total" section's "gpus" entry. */
static double gpus_number(const char *key)
{
    const char *p = strstr(json, "\"total\":");
    double v;

    CHECK(p != NULL && (p = strstr(p, "\"gpus\":[{")) != NULL);
    CHECKF(json_number(p, key, &v) == 0, "no %s in the gpus entry", key);
    return v;
}

static void expect_line(const char *line, const char *needle)
{
    CHECKF(strstr(line, needle) != NULL, "\"%s\" not in the line: %s", needle, line);
}

static void expect_no(const char *line, const char *needle)
{
    CHECKF(strstr(line, needle) == NULL, "\"%s\" in the line: %s", needle, line);
}

/* ---- the timeline that happened ---- */

#define SPANS_MAX 4096

static int by_start(const void *x, const void *y)
{
    const struct span *a = x, *b = y;

    return a->a < b->a ? -1 : a->a > b->a;
}

/* The GPU spans of the CUDA zones on stream s (their start and end
 * events' stamps, two per zone) appended to out[*n]; returns their union's
 * length. */
static uint64_t stream_spans(struct fake *f, CUstream s, struct span *out, size_t *n)
{
    static uint64_t stamps[2 * SPANS_MAX];
    size_t k = f->stream_log(s, stamps, 2 * SPANS_MAX), from = *n;
    uint64_t sum = 0;

    CHECKF(k % 2 == 0 && k / 2 + *n <= SPANS_MAX, "%zu stamps on a stream", k);
    for (size_t i = 0; i < k; i += 2) {
        CHECK(stamps[i + 1] >= stamps[i]);
        out[(*n)++] = (struct span){stamps[i], stamps[i + 1]};
    }
    /* A stream runs in order: its spans never overlap. */
    for (size_t i = from; i < *n; i++) {
        CHECK(i == from || out[i].a >= out[i - 1].b);
        sum += out[i].b - out[i].a;
    }
    return sum;
}

/* Sort and merge s[0..n) into disjoint spans in place; returns how many. */
static size_t merge_spans(struct span *s, size_t n)
{
    size_t m = 0;

    qsort(s, n, sizeof *s, by_start);
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && s[i].a <= s[m - 1].b) {
            if (s[i].b > s[m - 1].b)
                s[m - 1].b = s[i].b;
        } else {
            s[m++] = s[i];
        }
    }
    return m;
}

/* The time of c that no span of u (merged) covers: GPU idle time. */
static uint64_t idle_in(struct span c, const struct span *u, size_t nu)
{
    uint64_t idle = c.b > c.a ? c.b - c.a : 0;

    for (size_t i = 0; i < nu; i++) {
        uint64_t a = u[i].a > c.a ? u[i].a : c.a, b = u[i].b < c.b ? u[i].b : c.b;

        if (b > a)
            idle -= b - a;
    }
    return idle;
}

/* The number after "key": in the text from p on (the first one). */
static double number_after(const char *p, const char *key)
{
    double v;

    CHECKF(p != NULL && json_number(p, key, &v) == 0, "no \"%s\" in the gpus entry", key);
    return v;
}

static double dist(double x, double y)
{
    return x > y ? x - y : y - x;
}

static const char *band_of(double u)
{
    return u < 0.30 ? "under 30%: data loading starves the GPU"
           : u < 0.60 ? "30-60%: Python or CPU preprocessing"
                      : "60-85%: too many small ops";
}

/* The summary against the timeline that happened: streams[0..nstreams)
 * the streams the zones ran on, each with at least kernel_ns[i] of
 * kernels; cpu_name the launching thread's CPU stage (cpu_in, cpu_out);
 * check_on: PROF_GPU_CHECK is not 0. Clock reads of two sources (prof's
 * tick conversion, the test's and the fake's clock_gettime) agree within
 * microseconds; TOL_NS covers that per span, SHARE_TOL a share's. */
#define TOL_NS 20000u
#define SHARE_TOL 0.01

static void check_timeline(struct fake *f, const CUstream *streams, int nstreams,
                           const uint64_t *kernel_ns, const char *cpu_name, int check_on)
{
    static struct span spans[SPANS_MAX];
    uint64_t stream_busy[4], busy_ns, wall_ns, union_ns = 0, tol, lo_idle = 0, hi_idle = 0;
    size_t n = 0, nu;
    const char *g = strstr(json, "\"total\":"), *p, *c;
    double busy, util, share;
    char line[512], want[96];
    int b;

    CHECK(nstreams <= 4);
    for (int i = 0; i < nstreams; i++) {
        stream_busy[i] = stream_spans(f, streams[i], spans, &n);
        /* The kernels' lengths are exact; anything else only adds. */
        CHECKF(stream_busy[i] >= kernel_ns[i], "stream %d: %llu ns of spans", i,
               (unsigned long long)stream_busy[i]);
    }
    nu = merge_spans(spans, n);
    for (size_t i = 0; i < nu; i++)
        union_ns += spans[i].b - spans[i].a;
    tol = TOL_NS * (uint64_t)(n + 1);

    CHECK(g != NULL && (g = strstr(g, "\"gpus\":[{")) != NULL);
    busy = number_after(g, "busy");
    busy_ns = (uint64_t)number_after(g, "busy_ns");
    wall_ns = (uint64_t)number_after(g, "wall_ns");
    /* The device's busy time is the union of every stream's spans. */
    CHECKF(busy_ns + tol >= union_ns && busy_ns <= union_ns + tol,
           "busy_ns %llu, the spans' union %llu", (unsigned long long)busy_ns,
           (unsigned long long)union_ns);
    /* The run's wall time reaches back to its first zone's start. */
    CHECKF(wall_ns + TOL_NS >= json_at - run_from, "wall_ns %llu, %llu ns since the first zone",
           (unsigned long long)wall_ns, (unsigned long long)(json_at - run_from));
    CHECK(dist(busy, (double)busy_ns / (double)wall_ns) < 1e-6);
    /* Each stream's share is its own spans' union. */
    CHECK((p = strstr(g, "\"streams\":[")) != NULL);
    for (int i = 0; i < nstreams; i++) {
        double sb;

        CHECK((p = strstr(p, "{\"stream\":")) != NULL);
        CHECK((int)number_after(p, "stream") == i);
        sb = number_after(p, "busy") * (double)wall_ns;
        CHECKF(dist(sb, (double)stream_busy[i]) <= (double)tol, "stream %d busy %.0f ns, its spans %llu",
               i, sb, (unsigned long long)stream_busy[i]);
        p++;
    }

    /* The text summary came first, on a wall time at least from inside the
     * first zone to it and at most the JSON's. */
    gpu_line(line, sizeof line);
    b = busy_pct(line);
    CHECKF(b >= (int)(100.0 * (double)busy_ns / (double)wall_ns + 0.5) &&
           b <= (int)(100.0 * (double)busy_ns / (double)(text_at - run_from) + 0.5),
           "busy %d%% in the text, %llu of %llu ns in the JSON: %s", b,
           (unsigned long long)busy_ns, (unsigned long long)wall_ns, line);

    /* The check where the utilization (NVML's, else the zones') is under
     * 85%, with the band of that utilization. */
    c = strstr(g, "\"check\":");
    CHECK(c != NULL);
    util = strncmp(strstr(g, "\"nvml\":"), "\"nvml\":null", 11) == 0 ? busy
           : number_after(strstr(g, "\"nvml\":"), "utilization");
    if (!check_on || util >= 0.85) {
        CHECKF(strncmp(c, "\"check\":null", 12) == 0, "utilization %.3f: %.200s", util, c);
        expect_no(line, "of it in");
        expect_no(line, "starves");
        return;
    }
    CHECKF(strncmp(c, "\"check\":{", 9) == 0, "utilization %.3f: %.200s", util, c);
    expect_line(line, band_of(util));

    /* The idle time's stage: the CPU stage's zones were idle GPU time for
     * at least their inside and at most their outside, less the spans
     * (every one of them: the thread was a launcher before, warm_up). */
    for (int i = 0; i < ncpu; i++) {
        lo_idle += idle_in(cpu_in[i], spans, nu);
        hi_idle += idle_in(cpu_out[i], spans, nu);
    }
    share = number_after(c, "stage_share");
    {
        double idle = (double)(wall_ns - busy_ns), lo = (double)lo_idle / idle,
               hi = (double)hi_idle / idle;
        snprintf(want, sizeof want, "\"stage\":\"%s\"", cpu_name);
        /* The stage named has the most idle time: at least cpu_name's. */
        CHECKF(share >= lo - SHARE_TOL, "stage_share %.4f, %s's at least %.4f: %.300s", share,
               cpu_name, lo, c);
        if (strstr(c, want) != NULL) {
            CHECKF(share <= hi + SHARE_TOL, "stage_share %.4f, %s's at most %.4f", share,
                   cpu_name, hi);
            snprintf(want, sizeof want, "%% of it in %s;", cpu_name);
            expect_line(line, want);
        } else {
            /* Another stage can pass cpu_name only if cpu_name had under
             * half of the idle time. */
            CHECKF(lo <= 0.5 + SHARE_TOL, "%s has %.4f of the idle time at least, but: %.300s",
                   cpu_name, lo, c);
        }
        if (getenv("PROF_TEST_VERBOSE") != NULL)
            fprintf(stderr, "busy_ns %llu union %llu; share %.4f in [%.4f, %.4f]\n",
                    (unsigned long long)busy_ns, (unsigned long long)union_ns, share, lo, hi);
    }
}

typedef void (*set_util_fn)(int);

static void nvml_util(int percent)
{
    const char *path = getenv("PROF_NVML_LIB");
    void *h = path != NULL ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
    set_util_fn set;

    if (h == NULL && path != NULL)
        h = dlopen(path, RTLD_NOW);
    if (h == NULL)
        return;
    *(void **)&set = dlsym(h, "fakenvml_set_util");
    if (set != NULL)
        set(percent);
}

/* The fake NVML's device memory used from now on, once it has been
 * sampled at least twice at that figure (the collector samples every
 * 100 ms, later on a loaded machine). */
static uint64_t nvml_mem(long long mib, struct fake *f, CUstream s)
{
    uint64_t n = 0;
    const char *path = getenv("PROF_NVML_LIB");
    void *h = path != NULL ? dlopen(path, RTLD_NOW) : NULL;
    void (*set)(long long);
    unsigned long long (*samples)(void);
    unsigned long long at;

    CHECK(h != NULL);
    *(void **)&set = dlsym(h, "fakenvml_set_mem_mib");
    *(void **)&samples = dlsym(h, "fakenvml_samples");
    CHECK(set != NULL && samples != NULL);
    set(mib);
    at = samples();
    for (int i = 0; i < 2000 && samples() < at + 2; i++)
        n += loop(f, s, "data", 2 * MS, 1 * MS, 1);
    CHECKF(samples() >= at + 2, "NVML not sampled at %lld MiB", mib);
    return n;
}

/* The fake driver's device memory used from now on, once prof has asked
 * cuMemGetInfo at least twice at that figure. */
static uint64_t driver_mem(long long mib, struct fake *f, CUstream s)
{
    void (*set)(long long);
    unsigned long long (*calls)(void);
    unsigned long long at;
    uint64_t n = 0;

    *(void **)&set = dlsym(f->h, "fakecuda_set_mem_used_mib");
    *(void **)&calls = dlsym(f->h, "fakecuda_mem_info_calls");
    CHECK(set != NULL && calls != NULL);
    set(mib);
    at = calls();
    for (int i = 0; i < 2000 && calls() < at + 2; i++)
        n += loop(f, s, "data", 2 * MS, 1 * MS, 1);
    CHECKF(calls() >= at + 2, "cuMemGetInfo not asked at %lld MiB", mib);
    return n;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    char line[512];
    struct fake f;
    CUstream s;
    uint64_t n, w, kern[2];
    int b;

    if (strcmp(mode, "nvml_nocuda") == 0) {
        log_capture();
        prof_enable(1);
        for (int i = 0; i < 100; i++) {
            PROF_ZONE("cpu");
        }
        sleep_ns(300 * MS);
        CHECK(prof_summary_snprint(text, sizeof text, PROF_FORMAT_TEXT) > 0);
        CHECK(strstr(text, "GPU") == NULL);
        LOG_EXPECT_NONE();
        return 0;
    }
    s = fake_start(&f);
    /* NVML's utilization before anything samples it. */
    nvml_util(strcmp(mode, "nvml_present") == 0 ? 41 : strcmp(mode, "oscillating") == 0 ? 40
              : strcmp(mode, "smallops") == 0 ? 75 : strcmp(mode, "gpubound") == 0 ? 99
              : strcmp(mode, "streams") == 0 ? 45 : 18);
    run_from = UINT64_MAX;
    w = warm_up(&f, s);

    if (strcmp(mode, "starving") == 0 || strcmp(mode, "nocheck") == 0 ||
        strncmp(mode, "nvml_", 5) == 0) {
        n = loop(&f, s, "data", 8 * MS, 2 * MS, 60);
        summaries(w + n, "data");
        gpu_line(line, sizeof line);
        kern[0] = n * 2 * MS;
        check_timeline(&f, &s, 1, kern, "data", strcmp(mode, "nocheck") != 0);
        if (strcmp(mode, "nocheck") == 0) {
            CHECK(strstr(json, "\"check\":null") != NULL);
            LOG_EXPECT_NONE();
            return 0;
        }
        if (strcmp(mode, "nvml_present") == 0) {
            /* The band from NVML's 41%, not the zones' figure. */
            expect_line(line, "(nvidia-smi 41%)");
            expect_line(line, "30-60%: Python or CPU preprocessing");
            expect_line(line, "memory 1024 MiB (peak 1024 MiB), 250 W, SM 1980 MHz");
            CHECK(strstr(json, "\"utilization_source\":\"nvml\"") != NULL);
            CHECK(gpus_number("utilization") > 0.40 && gpus_number("utilization") < 0.42);
            CHECK(gpus_number("sm_clock_mhz") == 1980);
            LOG_EXPECT_NONE();
            return 0;
        }
        if (strcmp(mode, "starving") == 0) {
            expect_line(line, "(nvidia-smi 18%)");
            expect_line(line, "under 30%: data loading starves the GPU");
        } else {
            /* The band is the zones' (check_timeline). */
            expect_no(line, "nvidia-smi");
            CHECK(strstr(json, "\"utilization_source\":\"zones\"") != NULL);
            CHECK(strstr(json, "\"nvml\":null") != NULL);
        }
        if (strcmp(mode, "nvml_missing") == 0 || strcmp(mode, "nvml_initfail") == 0 ||
            strcmp(mode, "nvml_readfail") == 0) {
            const char *want = strcmp(mode, "nvml_missing") == 0 ? "no NVML"
                               : strcmp(mode, "nvml_initfail") == 0 ? "nvmlInit failed (Driver Not Loaded)"
                               : "NVML failed (GPU is lost) on CUDA device 0";

            if (log_total() != 1 || log_matching(want) != 1) {
                log_dump();
                CHECKF(0, "expected one message with \"%s\"", want);
            }
            return 0;
        }
        LOG_EXPECT_NONE();       /* starving (NVML present), nvml_off */
        return 0;
    }
    if (strcmp(mode, "gpu_memory") == 0) {
        /* Ground truth: 3 GiB used for a while, then 1.5 GiB: the summary
         * says the last sample and the largest. */
        nvml_util(41);
        n = nvml_mem(3072, &f, s);
        n += nvml_mem(1536, &f, s);
        summaries(n, "data");
        gpu_line(line, sizeof line);
        expect_line(line, "memory 1536 MiB (peak 3072 MiB)");
        CHECK(gpus_number("memory_used_bytes") == 1536.0 * 1048576.0);
        CHECK(gpus_number("memory_peak_bytes") == 3072.0 * 1048576.0);
        CHECK(strstr(json, "\"source\":\"nvml\"") != NULL);
        LOG_EXPECT_NONE();
        return 0;
    }
    if (strcmp(mode, "driver_memory") == 0) {
        /* No NVML (PROF_NVML=0): the driver's figure, through the pool's
         * context, 3 GiB then 1.5 GiB used. */
        n = driver_mem(3072, &f, s);
        n += driver_mem(1536, &f, s);
        summaries(n, "data");
        gpu_line(line, sizeof line);
        expect_line(line, "memory 1536 MiB (peak 3072 MiB, driver)");
        expect_no(line, "nvidia-smi");
        CHECK(strstr(json, "\"source\":\"driver\"") != NULL);
        CHECK(gpus_number("peak_bytes") == 3072.0 * 1048576.0);
        CHECK(gpus_number("used_bytes") == 1536.0 * 1048576.0);
        LOG_EXPECT_NONE();
        return 0;
    }
    if (strcmp(mode, "stepped") == 0) {
        n = 0;
        for (int i = 0; i < 60; i++) {
            prof_step();
            sleep_ns(1 * MS);
            {
                PROF_ZONE("train");
                n += loop(&f, s, "data", 8 * MS, 2 * MS, 1);
            }
        }
        summaries(w + n, "data");
        gpu_line(line, sizeof line);
        kern[0] = n * 2 * MS;
        check_timeline(&f, &s, 1, kern, "data", 1);
        expect_no(line, "of it in train");
        LOG_EXPECT_NONE();
        return 0;
    }
    if (strcmp(mode, "oscillating") == 0) {
        n = loop(&f, s, "preprocess", 5 * MS, 2 * MS, 100);
        summaries(w + n, "preprocess");
        gpu_line(line, sizeof line);
        kern[0] = n * 2 * MS;
        check_timeline(&f, &s, 1, kern, "preprocess", 1);
        expect_line(line, "(nvidia-smi 40%)");
        expect_line(line, "30-60%: Python or CPU preprocessing");
        LOG_EXPECT_NONE();
        return 0;
    }
    if (strcmp(mode, "smallops") == 0) {
        n = loop(&f, s, "launch", 4 * MS, 3 * MS, 120);
        summaries(w + n, "launch");
        gpu_line(line, sizeof line);
        kern[0] = n * 3 * MS;
        check_timeline(&f, &s, 1, kern, "launch", 1);
        expect_line(line, "(nvidia-smi 75%)");
        expect_line(line, "60-85%: too many small ops");
        LOG_EXPECT_NONE();
        return 0;
    }
    if (strcmp(mode, "gpubound") == 0) {
        uint64_t until = now_ns(), t0 = until;

        for (n = 0; now_ns() - t0 < 600 * MS; n++) {
            uint64_t now = now_ns();

            if (until < now)
                until = now;
            {
                PROF_CUDA_ZONE("step", s);
                if (n == 0)
                    run_from = now_ns();
                f.launch(s, 5 * MS);
            }
            until += 5 * MS;
            /* A queue two kernels deep, as a real launch queue blocks. */
            if (until - now > 10 * MS)
                sleep_ns(until - now - 10 * MS);
        }
        summaries(w + n, "wait");
        gpu_line(line, sizeof line);
        kern[0] = n * 5 * MS;
        /* NVML's 99%: no check, whatever the zones' figure. */
        check_timeline(&f, &s, 1, kern, "wait", 1);
        CHECK(strstr(json, "\"check\":null") != NULL);
        LOG_EXPECT_NONE();
        return 0;
    }
    if (strcmp(mode, "streams") == 0) {
        CUstream st[2] = {s, fake_stream(&f)};
        int sa = -1, sb = -1, da = -1, db = -1;
        const char *p;

        for (n = 0; n < 60; n++) {
            cpu_begin();
            {
                PROF_ZONE("data");
                cpu_inside_from();
                sleep_ns(6 * MS);
                cpu_inside_to();
            }
            cpu_end();
            {
                PROF_CUDA_ZONE("step", st[0]);
                f.launch(st[0], 2 * MS);
            }
            {
                PROF_CUDA_ZONE("step", st[1]);
                f.launch(st[1], 3 * MS);
            }
        }
        summaries(w + 2 * n, "data");
        gpu_line(line, sizeof line);
        kern[0] = n * 2 * MS;
        kern[1] = n * 3 * MS;
        check_timeline(&f, st, 2, kern, "data", 1);
        b = busy_pct(line);
        CHECK((p = strstr(line, "; streams ")) != NULL);
        CHECKF(sscanf(p, "; streams %d %d%%, %d %d%%", &sa, &da, &sb, &db) == 4, "%s", line);
        CHECK(sa == 0 && sb == 1);
        /* One line, one wall time: the device's union lies between its
         * largest stream and their sum (up to rounding). */
        CHECKF(b >= da && b >= db && b <= da + db + 1, "%s", line);
        expect_line(line, "30-60%: Python or CPU preprocessing");
        LOG_EXPECT_NONE();
        return 0;
    }
    fprintf(stderr, "unknown mode '%s'\n", mode);
    return 1;
}
