/* The application thread never waits for the GPU: with events that complete
 * only 400 ms after they are reached, thousands of CUDA zones still take
 * microseconds each, and their GPU sides arrive later, all of them. */
#include "cuda_test.h"

#define N 3000
#define DELAY_US 400000u

int main(void)
{
    uint64_t t0, first, worst = 0, elapsed, got;
    prof_stage_stats st;
    struct fake f;
    CUstream s;
    int i;

    s = fake_start(&f);
    f.set_delay_us(DELAY_US);

    /* The first zone loads the driver and makes the pool: not measured. */
    first = now_ns();
    {
        PROF_CUDA_ZONE("nowait", s);
        f.launch(s, 1000);
    }
    t0 = now_ns();
    for (i = 0; i < N; i++) {
        uint64_t a = now_ns(), b;
        {
            PROF_CUDA_ZONE("nowait", s);
            f.launch(s, 1000);
        }
        b = now_ns();
        worst = b - a > worst ? b - a : worst;
    }
    elapsed = now_ns() - t0;
    /* Waiting for one event would take 400 ms. */
    CHECKF(elapsed < DELAY_US * 1000u / 2, "%d zones took %llu ns", N, (unsigned long long)elapsed);
    CHECKF(worst < DELAY_US * 1000u / 2, "slowest zone %llu ns", (unsigned long long)worst);
    /* None can have been delivered yet: their events are not complete. */
    if (now_ns() - first < DELAY_US * 1000u * 3 / 4)
        CHECK(stage_count("nowait [gpu]") == 0);
    CHECK(stage_count("nowait") == N + 1);

    got = wait_count("nowait [gpu]", N + 1, 30000);
    CHECKF(got == N + 1, "%llu GPU zones delivered", (unsigned long long)got);
    CHECK(prof_stats("nowait [gpu]", &st) == 0);
    /* Each zone holds a 1 us kernel (plus the stream's idle time until the
     * launch call); the 400 ms completion delay is not GPU time. */
    CHECK(st.min_ns >= 900 && st.max_ns < DELAY_US * 1000u / 2);
    LOG_EXPECT_NONE();
    printf("cuda nowait: %d zones in %.1f us each on average, slowest %.1f us\n", N,
           (double)elapsed / N / 1000.0, (double)worst / 1000.0);
    return 0;
}
