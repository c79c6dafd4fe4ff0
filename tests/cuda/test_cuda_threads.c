/* Several threads, streams and devices at once: 4 threads on 2 contexts
 * (devices 0 and 1), each with two streams, CUDA zones nested in a CPU
 * zone, one stream destroyed and replaced every 100 iterations right after
 * its zone ended. Every GPU zone arrives, with the simulated durations. */
#include <unistd.h>

#include "cuda_test.h"

#define THREADS 4
#define ITERS 300
#define MAXSTREAMS 8

struct worker {
    pthread_t tid;
    struct fake *f;
    CUcontext ctx;
    CUstream fwd;
    CUstream bwd[MAXSTREAMS];   /* every stream bwd ran on, in order */
    int nbwd;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    struct fake *f = w->f;
    int i;

    CHECK(f->ctx_set_current(w->ctx) == 0);
    w->fwd = fake_stream(f);
    w->bwd[w->nbwd++] = fake_stream(f);
    prof_thread_name("worker");
    for (i = 0; i < ITERS; i++) {
        PROF_ZONE("iter");
        {
            PROF_CUDA_ZONE("fwd", w->fwd);
            f->launch(w->fwd, 20000u + 1000u * (unsigned)(i % 7));
        }
        {
            PROF_CUDA_ZONE("bwd", w->bwd[w->nbwd - 1]);
            f->launch(w->bwd[w->nbwd - 1], 40000u);
        }
        if (i % 100 == 99) {
            CHECK(f->stream_destroy(w->bwd[w->nbwd - 1]) == 0);
            w->bwd[w->nbwd++] = fake_stream(f);
        }
    }
    return NULL;
}

/* Sum of end - start over the event pairs logged on s. */
static uint64_t simulated(struct fake *f, CUstream s, uint64_t *zones)
{
    static uint64_t stamps[2 * ITERS];
    size_t n = f->stream_log(s, stamps, 2 * ITERS), i;
    uint64_t sum = 0;

    CHECK(n % 2 == 0 && n <= 2 * ITERS);
    for (i = 0; i < n; i += 2)
        sum += stamps[i + 1] - stamps[i];
    *zones += n / 2;
    return sum;
}

int main(void)
{
    struct worker w[THREADS];
    uint64_t fwd_sum = 0, bwd_sum = 0, nf = 0, nb = 0;
    prof_stage_stats st;
    CUcontext ctx[2];
    struct fake f;
    int i, j;

    fake_open(&f);
    log_capture();
    prof_enable(1);
    CHECK((ctx[0] = fake_context(&f, 0)) != NULL);
    CHECK((ctx[1] = f.ctx_create(1)) != NULL);
    memset(w, 0, sizeof w);
    for (i = 0; i < THREADS; i++) {
        w[i].f = &f;
        w[i].ctx = ctx[i % 2];
        CHECK(pthread_create(&w[i].tid, NULL, work, &w[i]) == 0);
    }
    for (i = 0; i < THREADS; i++)
        CHECK(pthread_join(w[i].tid, NULL) == 0);

    nf = wait_count("fwd [gpu]", THREADS * ITERS, 30000);
    nb = wait_count("bwd [gpu]", THREADS * ITERS, 30000);
    if (nf != THREADS * ITERS || nb != THREADS * ITERS) {
        log_dump();
        fprintf(stderr, "CPU zones: %llu fwd, %llu bwd\n", (unsigned long long)stage_count("fwd"),
                (unsigned long long)stage_count("bwd"));
        prof_summary_print(stderr);
        if (getenv("PROF_TEST_HANG") != NULL) {
            fprintf(stderr, "HANG pid %d\n", (int)getpid());
            pause_ms(600000);
        }
        CHECKF(0, "%llu fwd, %llu bwd GPU zones", (unsigned long long)nf, (unsigned long long)nb);
    }
    nf = nb = 0;
    CHECK(stage_count("iter") == THREADS * ITERS);
    CHECK(stage_count("fwd") == THREADS * ITERS);
    CHECK(stage_count("bwd") == THREADS * ITERS);
    for (i = 0; i < THREADS; i++) {
        fwd_sum += simulated(&f, w[i].fwd, &nf);
        for (j = 0; j < w[i].nbwd; j++)
            bwd_sum += simulated(&f, w[i].bwd[j], &nb);
    }
    CHECK(nf == THREADS * ITERS && nb == THREADS * ITERS);
    CHECK(prof_stats("fwd [gpu]", &st) == 0);
    CHECKF(st.total_ns + 2u * nf >= fwd_sum && st.total_ns <= fwd_sum + 2u * nf,
           "fwd total %llu, simulated %llu", (unsigned long long)st.total_ns,
           (unsigned long long)fwd_sum);
    /* A kernel starts when launched, a little after the start event. */
    CHECK(st.min_ns + 2 >= 20000);
    CHECK(prof_stats("bwd [gpu]", &st) == 0);
    CHECKF(st.total_ns + 2u * nb >= bwd_sum && st.total_ns <= bwd_sum + 2u * nb,
           "bwd total %llu, simulated %llu", (unsigned long long)st.total_ns,
           (unsigned long long)bwd_sum);
    LOG_EXPECT_NONE();
    return 0;
}
