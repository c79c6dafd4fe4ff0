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
 *            closed form over both.
 *
 * With the default ring (128k records, of which the first 32k are warm):
 *
 *   warm:    a thread that records 100k zones (three laps of the warm
 *            slots) at under 0.3 M zones/s: only the warm megabyte of its
 *            ring was ever resident (mincore), and every zone is counted.
 *   cold:    a thread that records 300k zones as fast as it can: it runs
 *            through the cold slots too, and counted + dropped == issued. */
#include <prof.h>

#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

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

/* Resident pages of the calling thread's ring from record `from` on. */
static size_t resident_from(uint64_t from)
{
    const struct prof_thread_ *t = prof_thread_self_;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)&t->ring[from] + page - 1) & ~(page - 1);
    uintptr_t hi = (uintptr_t)&t->ring[t->mask + 1];
    size_t n = (hi - lo) / page, got = 0;
    unsigned char *v = malloc(n);

    CHECK(v != NULL);
    CHECK_EQ(mincore((void *)lo, hi - lo, v), 0);
    for (size_t i = 0; i < n; i++)
        got += v[i] & 1;
    free(v);
    return got;
}

struct paced {
    long n;
    long pause_every;          /* zones between pauses of 1 ms; 0: none */
    size_t cold_resident;      /* pages past the warm slots, afterwards */
    uint64_t capacity;
};

static void *paced_thread(void *arg)
{
    struct paced *p = arg;
    struct timespec ms = {0, 1000000};

    for (long i = 0; i < p->n; i++) {
        PROF_ZONE("paced");
        if (p->pause_every && i % p->pause_every == p->pause_every - 1)
            nanosleep(&ms, NULL);
    }
    p->capacity = prof_thread_self_->mask + 1;
    p->cold_resident = resident_from(32 * 1024 + 1);
    return NULL;
}

static void run_paced(struct paced *p, const char *what)
{
    pthread_t t;

    CHECK_EQ(prof_reset(), 0);
    CHECK_EQ(pthread_create(&t, NULL, paced_thread, p), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(prof_flush(), 0);
    CHECK_EQ_U64(p->capacity, 128 * 1024);
    fprintf(stderr, "%s: %llu counted, %llu dropped, %zu cold pages resident\n", what,
            (unsigned long long)test_count("paced"), (unsigned long long)test_dropped(),
            p->cold_resident);
    CHECK_EQ(test_count("paced") + test_dropped(), p->n);
}

static void test_resident(int fast)
{
    /* Slow: 100 zones a millisecond at most, a 32k lap in 330 ms or more
     * (a thread stays in its warm slots below 164k zones/s, src/capture/ring.h),
     * so that only a collector held up for 80 ms lets a quarter of the
     * ring fill. */
    struct paced p = {fast ? 300000 : 100000, fast ? 0 : 100, 0, 0};

    if (fast) {
        /* A fresh thread at full speed outruns the collector, unless the
         * machine is so busy that the thread itself barely runs: up to 5
         * threads (one did not, once, beside four sanitizer tests on 2
         * cores). */
        for (int attempt = 0; attempt < 5 && p.cold_resident == 0; attempt++)
            run_paced(&p, "fast");
        CHECK_GT(p.cold_resident, 0);
    } else {
        run_paced(&p, "slow");
        CHECK_EQ(test_dropped(), 0);
        CHECK_EQ(p.cold_resident, 0);
    }
}

int main(int argc, char **argv)
{
    CHECK_EQ(prof_enable(1), 0);
    if (argc > 1 && strcmp(argv[1], "warm") == 0) {
        test_resident(0);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "cold") == 0) {
        test_resident(1);
        return 0;
    }
    check_ring_is_16();
    if (argc > 1 && strcmp(argv[1], "wrap") == 0)
        test_wrap();
    else if (argc > 1 && strcmp(argv[1], "drop") == 0)
        test_drop();
    else if (argc > 1 && strcmp(argv[1], "threads") == 0)
        test_threads();
    else
        CHECK_MSG(0, "usage: ring_runtime wrap|drop|threads|warm|cold");
    return 0;
}
