/* Zones still pending at shutdown: prof waits a bounded time, then reports
 * them as incomplete (not silently lost), and the ones that completed are
 * counted. The application destroys its streams right after the zones
 * ended, which must not matter. */
#include "cuda_test.h"

#define N 20

int main(void)
{
    struct fake f;
    CUstream a, b;
    uint64_t t0, dt;
    int i;

    a = fake_start(&f);
    b = fake_stream(&f);

    for (i = 0; i < N; i++) {
        PROF_CUDA_ZONE("quick", a);
        f.launch(a, 5000);
    }
    {
        PROF_CUDA_ZONE("hung", b);
        f.launch(b, 3600ull * 1000000000ull);   /* an hour-long kernel */
    }
    CHECK(f.stream_destroy(a) == 0);
    CHECK(f.stream_destroy(b) == 0);

    CHECK(wait_count("quick [gpu]", N, 20000) == N);
    CHECK(stage_count("hung") == 1);
    CHECK(stage_count("hung [gpu]") == 0);
    LOG_EXPECT_NONE();

    t0 = now_ns();
    CHECK(prof_shutdown() == 0);
    dt = now_ns() - t0;
    CHECKF(dt < 15000000000ull, "shutdown took %llu ns", (unsigned long long)dt);
    if (log_matching("not completed") != 1 || log_matching("1 GPU zone") != 1) {
        log_dump();
        CHECKF(0, "expected one message about 1 incomplete GPU zone");
    }
    return 0;
}
