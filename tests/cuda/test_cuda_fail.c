/* Every failure path degrades with one message and no crash: the CPU side
 * of every zone is still timed, and the GPU side of the zones the failure
 * touches is dropped (or, for a passing failure, only those).
 *
 *   test_cuda_fail MODE      (the environment sets up the failure)
 *
 * nolib     PROF_CUDA_LIB names no library        "no CUDA driver"
 * off       PROF_CUDA=0                            "PROF_CUDA=0"
 * nosym     the driver lacks cuEventRecord         "lacks cuEventRecord"
 * initfail  the program's cuInit fails             "initialized CUDA"
 * uninit    the program has not started CUDA: prof does not call cuInit
 *           and the driver stays uninitialized; once the program starts
 *           it, zones time the GPU                 "initialized CUDA"
 * noctx     no context current                     "no CUDA context"
 * capture   the stream is being captured           "captured"
 * create    cuEventCreate fails                    "cuEventCreate failed"
 * record    one cuEventRecord fails                "failed"
 * query     one cuEventQuery fails                 "failed"
 * elapsed   one cuEventElapsedTime fails           "failed"
 * push      cuCtxPushCurrent fails from now on     "cuCtxPushCurrent failed"
 * ctxgone   the context is destroyed with zones pending, then a new one
 *           works                                  "failed"
 * reuse     a stream handle comes back in another context (prof remembers
 *           the last stream's context): retried, no message, nothing lost
 */
#include "cuda_test.h"

#define N 20

static void zones(CUstream s, const char *name, struct fake *f, int n)
{
    int i;

    for (i = 0; i < n; i++) {
        PROF_CUDA_ZONE(name, s);
        if (f != NULL && f->launch != NULL)
            f->launch(s, 2000);
    }
}

static void expect_one(const char *needle)
{
    if (log_total() != 1 || log_matching(needle) != 1) {
        log_dump();
        CHECKF(0, "expected exactly one message containing \"%s\", got %d messages", needle,
               log_total());
    }
}

/* Warm up: one zone delivered, so the pool and the reference exist. */
static void warm(struct fake *f, CUstream s)
{
    zones(s, "warm", f, 1);
    CHECK(wait_count("warm [gpu]", 1, 20000) == 1);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    struct fake f;
    CUstream s = NULL;
    CUcontext ctx0;
    uint64_t got;

    log_capture();
    prof_enable(1);

    if (strcmp(mode, "nolib") == 0) {
        zones(NULL, "cpu", NULL, N);
        CHECK(stage_count("cpu") == N);
        CHECK(stage_count("cpu [gpu]") == 0);
        expect_one("no CUDA driver");
        return 0;
    }

    fake_open(&f);
    if (strcmp(mode, "initfail") == 0) {
        CHECK(fake_context(&f, 0) == NULL);     /* the application's own cuInit fails too */
        zones(NULL, "cpu", NULL, N);
        CHECK(stage_count("cpu") == N);
        CHECK(stage_count("cpu [gpu]") == 0);
        expect_one("initialized CUDA");
        return 0;
    }
    if (strcmp(mode, "uninit") == 0) {
        CUcontext cur = NULL;

        zones(NULL, "cpu", NULL, N);
        CHECK(prof_flush() == 0);
        CHECK(stage_count("cpu") == N);
        CHECK(stage_count("cpu [gpu]") == 0);
        /* The driver as prof found it: never started. */
        CHECKF(f.calls("cuInit") == 0, "prof called cuInit %llu times",
               (unsigned long long)f.calls("cuInit"));
        CHECK(f.ctx_get_current(&cur) == 3 /* CUDA_ERROR_NOT_INITIALIZED */);
        expect_one("initialized CUDA");
        /* The program starts CUDA: from then on zones time the GPU. */
        CHECK((ctx0 = fake_context(&f, 0)) != NULL);
        s = fake_stream(&f);
        zones(s, "gpu", &f, N);
        CHECK(wait_count("gpu [gpu]", N, 20000) == N);
        CHECK(f.calls("cuInit") == 1);
        expect_one("initialized CUDA");
        return 0;
    }
    if (strcmp(mode, "noctx") == 0) {
        CHECK(f.init(0) == 0);
        zones(NULL, "cpu", NULL, N);
        CHECK(stage_count("cpu") == N);
        CHECK(stage_count("cpu [gpu]") == 0);
        expect_one("no CUDA context");
        return 0;
    }

    CHECK((ctx0 = fake_context(&f, 0)) != NULL);
    s = fake_stream(&f);

    if (strcmp(mode, "off") == 0 || strcmp(mode, "nosym") == 0 || strcmp(mode, "create") == 0) {
        if (strcmp(mode, "create") == 0)
            CHECK(f.fail("cuEventCreate", 1, 1, 1, 2 /* CUDA_ERROR_OUT_OF_MEMORY */) == 0);
        zones(s, "cpu", &f, N);
        CHECK(stage_count("cpu") == N);
        pause_ms(50);
        CHECK(stage_count("cpu [gpu]") == 0);
        expect_one(strcmp(mode, "off") == 0 ? "PROF_CUDA=0"
                   : strcmp(mode, "nosym") == 0 ? "lacks cuEventRecord" : "cuEventCreate failed");
        return 0;
    }
    if (strcmp(mode, "capture") == 0) {
        f.set_capturing(s, 1);
        zones(s, "cpu", &f, N);
        f.set_capturing(s, 0);
        zones(s, "gpu", &f, N);
        CHECK(stage_count("cpu") == N);
        CHECK(wait_count("gpu [gpu]", N, 20000) == N);
        CHECK(stage_count("cpu [gpu]") == 0);
        expect_one("captured");
        return 0;
    }

    warm(&f, s);
    if (strcmp(mode, "record") == 0 || strcmp(mode, "query") == 0 || strcmp(mode, "elapsed") == 0) {
        const char *fn = strcmp(mode, "record") == 0 ? "cuEventRecord"
                         : strcmp(mode, "query") == 0 ? "cuEventQuery" : "cuEventElapsedTime";

        CHECK(f.fail(fn, 1, 1, 0, 999) == 0);
        zones(s, "z", &f, N);
        CHECK(stage_count("z") == N);
        /* The failed call dropped one zone, or (if it hit the collector's
         * reference event) none. */
        got = wait_count("z [gpu]", N - 1, 20000);
        if (got == N - 1)
            got = wait_count("z [gpu]", N, 300);
        CHECKF(got == N - 1 || got == N, "%llu GPU zones", (unsigned long long)got);
        expect_one("failed");
        if (got == N - 1) {
            /* Counted for its stage, with its cause. */
            static char text[16384];
            const char *want = strcmp(mode, "record") == 0 ? "GPU sides lost: z 1 (cuEventRecord failed)"
                                                           : "GPU sides lost: z 1 (cuEventQuery failed)";

            CHECK(prof_summary_snprint(text, sizeof text, PROF_FORMAT_TEXT) > 0);
            CHECKF(strstr(text, want) != NULL, "no \"%s\" in:\n%s", want, text);
        }
        return 0;
    }
    if (strcmp(mode, "push") == 0) {
        CHECK(f.fail("cuCtxPushCurrent", 1, 1, 1, 201 /* CUDA_ERROR_INVALID_CONTEXT */) == 0);
        zones(s, "z", &f, N);
        CHECK(stage_count("z") == N);
        pause_ms(100);
        CHECK(stage_count("z [gpu]") == 0);
        zones(s, "z", &f, N);                   /* the pool is dead now: skipped */
        CHECK(stage_count("z") == 2 * N);
        expect_one("cuCtxPushCurrent failed");
        return 0;
    }
    if (strcmp(mode, "ctxgone") == 0) {
        f.set_delay_us(200000);
        zones(s, "z", &f, N);
        CHECK(prof_flush() == 0);               /* submitted and pending */
        /* The application tears its context down with work in flight. */
        f.ctx_destroy(ctx0);
        pause_ms(300);
        CHECK(stage_count("z [gpu]") == 0);
        expect_one("failed");
        /* A new context works. */
        f.set_delay_us(0);
        CHECK(fake_context(&f, 0) != NULL);
        s = fake_stream(&f);
        zones(s, "after", &f, N);
        CHECK(wait_count("after [gpu]", N, 20000) == N);
        CHECK(stage_count("z") == N);
        expect_one("failed");
        return 0;
    }
    if (strcmp(mode, "reuse") == 0) {
        CUcontext other = f.ctx_create(1);

        uint64_t lookups;

        zones(s, "a", &f, N);
        lookups = f.calls("cuStreamGetCtx");
        zones(s, "a", &f, N);
        CHECK(wait_count("a [gpu]", 2 * N, 20000) == 2 * N);
        /* Remembered: no more lookups. */
        CHECK(f.calls("cuStreamGetCtx") == lookups);
        f.stream_move(s, other);    /* s is now a stream of device 1 */
        zones(s, "b", &f, N);
        CHECK(wait_count("b [gpu]", N, 20000) == N);
        /* The first record failed on the remembered context: looked up once
         * more, and remembered again. */
        CHECK(f.calls("cuStreamGetCtx") == lookups + 1);
        LOG_EXPECT_NONE();
        return 0;
    }
    fprintf(stderr, "unknown mode '%s'\n", mode);
    return 1;
}
