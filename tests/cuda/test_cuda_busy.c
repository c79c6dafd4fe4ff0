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
 * nocheck      as starving with PROF_GPU_CHECK=0: the busy line only
 * nvml_present, nvml_missing, nvml_initfail, nvml_readfail, nvml_off:
 *              as starving, with NVML there (utilization 41% beside the
 *              zones' 25%, and the band from NVML's), absent, failing at
 *              init, failing its reads, or switched off: one line each
 *              where it fails, and the zones' figure
 * nvml_nocuda  no CUDA zone: NVML is never opened, nothing said
 *
 * The kernels' lengths are the fake GPU's, exact; the CPU stages are
 * sleeps, which a loaded machine can only lengthen: bounds are one-sided
 * where that moves them. The idle time's share named for the CPU stage is
 * 95-97% on a quiet machine; a loaded one stretches the CUDA zones' own
 * launches (86% at a load of 15 on 2 cores), so the test asks that the
 * stage be named, with at least 60%. */
#include "cuda_test.h"
#include "../fuzz/json_strict.h"

#define MS 1000000ull

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};

    nanosleep(&ts, NULL);
}

/* Iterations of: `cpu` ns in stage cpu_name, then a CUDA zone "step"
 * around a kernel of gpu ns. */
static uint64_t loop(struct fake *f, CUstream s, const char *cpu_name, uint64_t cpu, uint64_t gpu,
                     int n)
{
    for (int i = 0; i < n; i++) {
        {
            PROF_ZONE(cpu_name);
            sleep_ns(cpu);
        }
        {
            PROF_CUDA_ZONE("step", s);
            f->launch(s, gpu);
        }
    }
    return (uint64_t)n;
}

static char text[16384], json[65536];

/* The summary once every GPU side arrived. The wait is the CPU stage's
 * (cpu_name): the loop's next stage, as far as the GPU can tell, so that
 * the time a loaded machine adds to it reads as that stage. */
static void summaries(uint64_t gpu_zones, const char *cpu_name)
{
    char err[128];

    {
        PROF_ZONE(cpu_name);
        CHECKF(wait_count("step [gpu]", gpu_zones, 20000) == gpu_zones, "GPU zones missing");
    }
    CHECK(prof_summary_snprint(text, sizeof text, PROF_FORMAT_TEXT) > 0);
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

/* The share named after "N% of it in": the idle time in that stage. */
static int idle_share(const char *line, const char *stage)
{
    char pat[64];
    const char *p;
    int v = -1;

    snprintf(pat, sizeof pat, "%% of it in %s;", stage);
    CHECKF((p = strstr(line, pat)) != NULL, "no \"of it in %s\" in: %s", stage, line);
    while (p > line && p[-1] >= '0' && p[-1] <= '9')
        p--;
    CHECK(sscanf(p, "%d", &v) == 1);
    return v;
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
    uint64_t n;
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

    if (strcmp(mode, "starving") == 0 || strcmp(mode, "nocheck") == 0 ||
        strncmp(mode, "nvml_", 5) == 0) {
        nvml_util(strcmp(mode, "nvml_present") == 0 ? 41 : 18);
        n = loop(&f, s, "data", 8 * MS, 2 * MS, 60);
        summaries(n, "data");
        gpu_line(line, sizeof line);
        b = busy_pct(line);
        /* 2 ms of every 8 (the kernel runs during the next data stage):
         * sleeps only get longer. */
        CHECKF(b >= 8 && b <= 26, "busy %d%%: %s", b, line);
        CHECK(gpus_number("busy") > 0.08 && gpus_number("busy") < 0.26);
        if (strcmp(mode, "nocheck") == 0) {
            expect_no(line, "of it in");
            expect_no(line, "starves");
            CHECK(strstr(json, "\"check\":null") != NULL);
            LOG_EXPECT_NONE();
            return 0;
        }
        if (strcmp(mode, "nvml_present") == 0) {
            /* The band from NVML's 41%, not the zones' 20%. */
            expect_line(line, "(nvidia-smi 41%)");
            expect_line(line, "30-60%: Python or CPU preprocessing");
            expect_line(line, "memory 1024 MiB (peak 1024 MiB), 250 W, SM 1980 MHz");
            CHECK(strstr(json, "\"utilization_source\":\"nvml\"") != NULL);
            CHECK(gpus_number("utilization") > 0.40 && gpus_number("utilization") < 0.42);
            CHECK(gpus_number("sm_clock_mhz") == 1980);
            LOG_EXPECT_NONE();
            return 0;
        }
        if (strcmp(mode, "starving") == 0)
            expect_line(line, "(nvidia-smi 18%)");
        else
            expect_no(line, "nvidia-smi");
        expect_line(line, "under 30%: data loading starves the GPU");
        CHECKF(idle_share(line, "data") >= 60, "%s", line);
        CHECK(strstr(json, "\"stage\":\"data\"") != NULL);
        if (strcmp(mode, "starving") != 0) {
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
    if (strcmp(mode, "oscillating") == 0) {
        nvml_util(40);
        n = loop(&f, s, "preprocess", 5 * MS, 2 * MS, 100);
        summaries(n, "preprocess");
        gpu_line(line, sizeof line);
        b = busy_pct(line);
        CHECKF(b >= 20 && b <= 41, "busy %d%%: %s", b, line);
        expect_line(line, "(nvidia-smi 40%)");
        expect_line(line, "30-60%: Python or CPU preprocessing");
        CHECKF(idle_share(line, "preprocess") >= 60, "%s", line);
        LOG_EXPECT_NONE();
        return 0;
    }
    if (strcmp(mode, "smallops") == 0) {
        nvml_util(75);
        n = loop(&f, s, "launch", 4 * MS, 3 * MS, 120);
        summaries(n, "launch");
        gpu_line(line, sizeof line);
        b = busy_pct(line);
        CHECKF(b >= 40 && b <= 76, "busy %d%%: %s", b, line);
        expect_line(line, "(nvidia-smi 75%)");
        expect_line(line, "60-85%: too many small ops");
        LOG_EXPECT_NONE();
        return 0;
    }
    if (strcmp(mode, "gpubound") == 0) {
        uint64_t until = now_ns(), t0 = until;

        nvml_util(99);
        for (n = 0; now_ns() - t0 < 600 * MS; n++) {
            uint64_t now = now_ns();

            if (until < now)
                until = now;
            {
                PROF_CUDA_ZONE("step", s);
                f.launch(s, 5 * MS);
            }
            until += 5 * MS;
            /* A queue two kernels deep, as a real launch queue blocks. */
            if (until - now > 10 * MS)
                sleep_ns(until - now - 10 * MS);
        }
        summaries(n, "wait");
        gpu_line(line, sizeof line);
        b = busy_pct(line);
        CHECKF(b >= 85, "busy %d%%: %s", b, line);
        expect_no(line, "of it in");
        CHECK(strstr(json, "\"check\":null") != NULL);
        LOG_EXPECT_NONE();
        return 0;
    }
    if (strcmp(mode, "streams") == 0) {
        CUstream a = s, c = fake_stream(&f);
        int sa = -1, sb = -1, da = -1, db = -1;
        const char *p;

        nvml_util(45);
        for (n = 0; n < 60; n++) {
            {
                PROF_ZONE("data");
                sleep_ns(6 * MS);
            }
            {
                PROF_CUDA_ZONE("step", a);
                f.launch(a, 2 * MS);
            }
            {
                PROF_CUDA_ZONE("step", c);
                f.launch(c, 3 * MS);
            }
        }
        summaries(2 * n, "data");
        gpu_line(line, sizeof line);
        b = busy_pct(line);
        /* The union: stream b's 3 ms mostly covers stream a's 2 ms. */
        CHECKF(b >= 25 && b <= 51, "busy %d%%: %s", b, line);
        CHECK((p = strstr(line, "; streams ")) != NULL);
        CHECKF(sscanf(p, "; streams %d %d%%, %d %d%%", &sa, &da, &sb, &db) == 4, "%s", line);
        CHECK(sa == 0 && sb == 1);
        /* b's kernels cover a's (launched a moment before them, up to
         * rounding): the device's union lies between b's and their sum. */
        CHECKF(db <= b && b <= db + 3 && da * 3 >= db * 2 - 3 && da * 3 <= db * 2 + 3, "%s", line);
        CHECKF(idle_share(line, "data") >= 60, "%s", line);
        LOG_EXPECT_NONE();
        return 0;
    }
    fprintf(stderr, "unknown mode '%s'\n", mode);
    return 1;
}
