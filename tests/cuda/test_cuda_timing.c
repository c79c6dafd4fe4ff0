/* GPU durations and placement equal what the fake driver simulated: on an
 * idle stream, behind a 30 ms backlog (GPU start far from the CPU begin),
 * and on the legacy default stream. Durations come from prof_stats(),
 * placement from the trace (PROF_TRACE). */
#include "cuda_test.h"

#define N 40
#define NLEGACY 10
#define PLACE_TOL_NS 200000.0   /* reference error bound; see docs/CUDA.md */

struct expect {
    uint64_t start, dur;
};

static void zone_stats(const char *name, const uint64_t *stamps, int first, int n)
{
    uint64_t sum = 0, lo = UINT64_MAX, hi = 0;
    prof_stage_stats st;
    int i;

    for (i = first; i < first + n; i++) {
        uint64_t d = stamps[2 * i + 1] - stamps[2 * i];

        sum += d;
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
    }
    CHECK(prof_stats(name, &st) == 0);
    CHECKF(st.count == (uint64_t)n, "%s: %llu zones", name, (unsigned long long)st.count);
    CHECK(st.flags & PROF_STAGE_GPU);
    /* The driver reports float milliseconds: within a nanosecond each. */
    CHECKF(st.total_ns + 2u * n >= sum && st.total_ns <= sum + 2u * n, "%s: total %llu, simulated %llu",
           name, (unsigned long long)st.total_ns, (unsigned long long)sum);
    CHECKF(st.min_ns + 2 >= lo && st.min_ns <= lo + 2, "%s: min %llu, simulated %llu", name,
           (unsigned long long)st.min_ns, (unsigned long long)lo);
    CHECKF(st.max_ns + 2 >= hi && st.max_ns <= hi + 2, "%s: max %llu, simulated %llu", name,
           (unsigned long long)st.max_ns, (unsigned long long)hi);
}

static int by_start(const void *a, const void *b)
{
    const struct expect *x = a, *y = b;

    return x->start < y->start ? -1 : x->start > y->start;
}

static int by_ts(const void *a, const void *b)
{
    const struct gpu_event *x = a, *y = b;

    return x->ts_us < y->ts_us ? -1 : x->ts_us > y->ts_us;
}

int main(void)
{
    static uint64_t stamps[4 * N], legacy[2 * NLEGACY];
    static struct expect want[2 * N + NLEGACY];
    static struct gpu_event got[4 * N];
    const char *trace = getenv("PROF_TRACE");
    uint64_t backlog_begin[N];
    struct fake f;
    CUstream s;
    long n;
    int i;

    s = fake_start(&f);

    /* Idle stream: each zone's GPU time is its kernel. */
    for (i = 0; i < N; i++) {
        PROF_CUDA_ZONE("step", s);
        f.launch(s, 25000u * (unsigned)(i + 1));
    }
    /* A 30 ms backlog: the GPU runs these zones long after their CPU side. */
    f.launch(s, 30000000u);
    for (i = 0; i < N; i++) {
        backlog_begin[i] = now_ns();
        PROF_CUDA_ZONE("backlog", s);
        f.launch(s, 100000u + 10000u * (unsigned)i);
    }
    /* The legacy default stream (NULL). */
    for (i = 0; i < NLEGACY; i++) {
        PROF_CUDA_ZONE("legacy", NULL);
        f.launch(NULL, 50000u);
    }

    CHECK(wait_count("step [gpu]", N, 20000) == N);
    CHECK(wait_count("backlog [gpu]", N, 20000) == N);
    CHECK(wait_count("legacy [gpu]", NLEGACY, 20000) == NLEGACY);
    CHECK(stage_count("step") == N);
    CHECK(stage_count("backlog") == N);

    CHECK(f.stream_log(s, stamps, 4 * N) == 4 * N);
    CHECK(f.stream_log(NULL, legacy, 2 * NLEGACY) == 2 * NLEGACY);
    zone_stats("step [gpu]", stamps, 0, N);
    zone_stats("backlog [gpu]", stamps, N, N);
    zone_stats("legacy [gpu]", legacy, 0, NLEGACY);
    for (i = 0; i < N; i++)
        CHECK(stamps[2 * (N + i)] >= backlog_begin[i] + 29000000u);   /* really behind */
    LOG_EXPECT_NONE();

    if (trace == NULL || *trace == '\0') {
        prof_shutdown();
        return 0;
    }
    CHECK(prof_shutdown() == 0);
    for (i = 0; i < 2 * N; i++) {
        want[i].start = stamps[2 * i];
        want[i].dur = stamps[2 * i + 1] - stamps[2 * i];
    }
    for (i = 0; i < NLEGACY; i++) {
        want[2 * N + i].start = legacy[2 * i];
        want[2 * N + i].dur = legacy[2 * i + 1] - legacy[2 * i];
    }
    qsort(want, 2 * N + NLEGACY, sizeof want[0], by_start);
    n = trace_gpu_events(trace, got, 4 * N);
    CHECKF(n == 2 * N + NLEGACY, "%ld GPU events in %s", n, trace);
    qsort(got, (size_t)n, sizeof got[0], by_ts);
    for (i = 0; i < n; i++) {
        double ts = got[i].ts_us * 1000.0, dur = got[i].dur_us * 1000.0;

        CHECKF(ts > (double)want[i].start - PLACE_TOL_NS && ts < (double)want[i].start + PLACE_TOL_NS,
               "zone %d placed at %.0f ns, simulated %llu (off by %.0f ns)", i, ts,
               (unsigned long long)want[i].start, ts - (double)want[i].start);
        CHECKF(dur > (double)want[i].dur - 3 && dur < (double)want[i].dur + 3,
               "zone %d lasts %.0f ns, simulated %llu", i, dur, (unsigned long long)want[i].dur);
    }
    return 0;
}
