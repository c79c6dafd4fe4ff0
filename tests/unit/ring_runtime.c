/* ring_runtime.c - the rings through the runtime, with PROF_BUFFER=16
 * (set by meson), the smallest ring there is.
 *
 *   wrap:    10 zones then prof_flush(), thousands of times: the indices
 *            run far past the capacity, every zone is counted, none dropped.
 *   drop:    a burst of zones with no flush: the ring overflows between two
 *            drains; recorded + dropped == issued exactly (prof_stats count
 *            and the JSON summary's "dropped"), and the text summary says
 *            how many were dropped.
 *   threads: two threads bursting at once into their own rings: the same
 *            closed form over both. */
#include <prof.h>

#include "check.h"

static void check_ring_is_16(void)
{
    /* The premise of every mode: the environment set a 16-record ring. */
    const char *b = getenv("PROF_BUFFER");

    if (b == NULL || strcmp(b, "16") != 0)
        SKIP("run with PROF_BUFFER=16");
}

static void test_wrap(void)
{
    long rounds = test_scale(5000);

    for (long r = 0; r < rounds; r++) {
        for (int i = 0; i < 10; i++) {
            PROF_ZONE("wrap");
        }
        CHECK_EQ(prof_flush(), 0);
    }
    CHECK_EQ(test_count("wrap"), rounds * 10);
    CHECK_EQ(test_dropped(), 0);
}

static void burst(const char *name, long n)
{
    for (long i = 0; i < n; i++) {
        PROF_ZONE(name);
    }
}

static void test_drop(void)
{
    long n = 200000;
    uint64_t dropped;
    char *text, want[64];

    burst("burst", n);
    CHECK_EQ(prof_flush(), 0);
    dropped = test_dropped();
    fprintf(stderr, "burst of %ld: %llu counted, %llu dropped\n", n,
            (unsigned long long)test_count("burst"), (unsigned long long)dropped);
    CHECK_EQ(test_count("burst") + dropped, n);
    /* 16 slots cannot hold a burst between two drains 20 ms apart. */
    CHECK_GT(dropped, 0);
    text = test_summary(PROF_FORMAT_TEXT);
    snprintf(want, sizeof want, " %llu dropped", (unsigned long long)dropped);
    CHECK_STR_CONTAINS(text, want);
    free(text);

    /* Drops are counted, never stuck: after a flush the ring takes zones
     * again and nothing more is lost. */
    for (int r = 0; r < 100; r++) {
        burst("after", 8);
        CHECK_EQ(prof_flush(), 0);
    }
    CHECK_EQ(test_count("after"), 800);
    CHECK_EQ(test_dropped(), dropped);
}

static void *burst_thread(void *arg)
{
    burst("threads", *(long *)arg);
    return NULL;
}

static void test_threads(void)
{
    long n = 100000;
    pthread_t t[2];
    uint64_t dropped;

    for (int i = 0; i < 2; i++)
        CHECK_EQ(pthread_create(&t[i], NULL, burst_thread, &n), 0);
    for (int i = 0; i < 2; i++)
        CHECK_EQ(pthread_join(t[i], NULL), 0);
    CHECK_EQ(prof_flush(), 0);
    dropped = test_dropped();
    fprintf(stderr, "2 x %ld: %llu counted, %llu dropped\n", n,
            (unsigned long long)test_count("threads"), (unsigned long long)dropped);
    CHECK_EQ(test_count("threads") + dropped, 2 * n);
    CHECK_GT(dropped, 0);
}

int main(int argc, char **argv)
{
    check_ring_is_16();
    CHECK_EQ(prof_enable(1), 0);
    if (argc > 1 && strcmp(argv[1], "wrap") == 0)
        test_wrap();
    else if (argc > 1 && strcmp(argv[1], "drop") == 0)
        test_drop();
    else if (argc > 1 && strcmp(argv[1], "threads") == 0)
        test_threads();
    else
        CHECK_MSG(0, "usage: ring_runtime wrap|drop|threads");
    return 0;
}
