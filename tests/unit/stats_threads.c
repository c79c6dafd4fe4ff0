/* stats_threads.c - counts are exact with several threads: N threads each
 * record M zones of a stage (and one outer zone around them); after the
 * threads are joined, count == N * M exactly, the outer stage counts N, and
 * the nesting is right. Repeated with prof_reset() between rounds: a reset
 * forgets everything before it and nothing after it. */
#include <prof.h>

#include "check.h"

#define NTHREADS 4

static long per_thread;

static void *worker(void *arg)
{
    (void)arg;
    PROF_ZONE("thread_body");
    for (long i = 0; i < per_thread; i++) {
        PROF_ZONE("work");
    }
    return NULL;
}

int main(void)
{
    long rounds = test_scale(20);

    /* 20000 zones fit the default ring (32k) even if the collector slept
     * through the whole burst: no drop is possible, so the count is exact. */
    per_thread = 20000;
    CHECK_EQ(prof_enable(1), 0);
    for (long r = 0; r < rounds; r++) {
        pthread_t t[NTHREADS];
        prof_stage_stats st, body;

        CHECK_EQ(prof_reset(), 0);
        for (int i = 0; i < NTHREADS; i++)
            CHECK_EQ(pthread_create(&t[i], NULL, worker, NULL), 0);
        for (int i = 0; i < NTHREADS; i++)
            CHECK_EQ(pthread_join(t[i], NULL), 0);
        st = test_stats("work");
        CHECK_EQ(st.count, NTHREADS * per_thread);
        CHECK_STR_EQ(st.parent, "thread_body");
        CHECK_LE(st.min_ns, st.max_ns);
        CHECK_EQ_U64(st.self_ns, st.total_ns);       /* a leaf */
        body = test_stats("thread_body");
        CHECK_EQ(body.count, NTHREADS);
        CHECK(body.parent == NULL);
        CHECK_EQ_U64(body.self_ns, body.total_ns - st.total_ns);
        CHECK_EQ(test_dropped(), 0);
    }
    return 0;
}
