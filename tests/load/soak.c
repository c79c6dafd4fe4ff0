/* soak.c - long runs, a realistic rate, a starved collector.
 *
 *     soak soak       4 threads record 1e8 zones in all (1e9 with
 *                     PROF_TEST_SOAK=1; about 40 M zones/s here, so 2.5 s),
 *                     tracing off, as fast as they can, so most records are
 *                     dropped. Resident memory is sampled every 10 ms: after
 *                     the warm-up (every thread attached, 10% done) it must
 *                     stay flat (growth < 2 MB, plus the cold part of each
 *                     ring, which a collector the machine holds back may
 *                     populate late). Every zone is accounted
 *                     for: recorded + dropped == issued.
 *     soak realistic  4 threads, each zone wrapping 10 us of work (about
 *                     100,000 zones/s per thread when it has a core), 1e5
 *                     zones per thread, default ring: nothing may be dropped,
 *                     and resident memory stays flat here too.
 *     soak starved    PROF_BUFFER=16 (set by the test) and 4 threads in a
 *                     tight loop: most records are dropped, and counted
 *                     exactly, in prof_stats() and the JSON "dropped".
 *     soak blocked    default ring; a summary handler blocks
 *                     (PROF_SUMMARY_EVERY=1steps) while 4 threads each record
 *                     1.5 rings of zones: the handler runs on the output
 *                     writer thread (issue 28), so the collector goes on
 *                     draining; whatever is dropped (a loaded machine) is
 *                     counted exactly. Before the writer thread the handler
 *                     held the collector and every record beyond what the
 *                     rings hold was dropped.
 *
 * Each mode prints "figure:" lines (docs/RELIABILITY.md). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <prof.h>

#include "../unit/check.h"
#include "load.h"

#define THREADS 4
/* The default ring: 128k records of 32 bytes, the first 32k populated when
 * the thread starts, the other 96k (3 MB) only when needed. */
#define RING_COLD_KB 3072L

struct worker {
    pthread_t id;
    uint64_t target;         /* iterations */
    uint64_t work_ns;        /* spin inside the inner zone */
    uint64_t done;           /* iterations done (relaxed, read by the monitor) */
};

static struct test_barrier start_line;

/* One iteration: an outer zone and two inner ones: three zones. */
static void *worker_main(void *arg)
{
    struct worker *w = arg;

    { PROF_ZONE("soak.attach"); }
    test_barrier_wait(&start_line);
    for (uint64_t i = 0; i < w->target; i++) {
        PROF_ZONE("soak.step");
        {
            PROF_ZONE("soak.a");
            if (w->work_ns)
                test_spin_ns(w->work_ns);
        }
        {
            PROF_ZONE("soak.b");
        }
        if ((i & 1023) == 0)
            __atomic_store_n(&w->done, i, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&w->done, w->target, __ATOMIC_RELAXED);
    return NULL;
}

static uint64_t recorded(void)
{
    return test_count("soak.step") + test_count("soak.a") + test_count("soak.b");
}

/* Run the workers; returns the zones issued (3 per iteration). With
 * monitor, sample RSS while they run and check it stays flat. */
static uint64_t run_workers(uint64_t per_thread, uint64_t work_ns, int monitor)
{
    struct worker w[THREADS];
    long warm_kb = -1, max_kb = 0, kb;
    uint64_t t0, issued = 0;
    int samples = 0;

    memset(w, 0, sizeof w);
    test_barrier_init(&start_line, THREADS + 1);
    for (int i = 0; i < THREADS; i++) {
        w[i].target = per_thread;
        w[i].work_ns = work_ns;
        CHECK(pthread_create(&w[i].id, NULL, worker_main, &w[i]) == 0);
    }
    test_barrier_wait(&start_line);
    t0 = test_now_ns();
    for (;;) {
        uint64_t done = 0;
        for (int i = 0; i < THREADS; i++)
            done += __atomic_load_n(&w[i].done, __ATOMIC_RELAXED);
        if (done >= per_thread * THREADS)
            break;
        if (monitor && (kb = load_rss_kb()) > 0) {
            if (warm_kb < 0 && done >= per_thread * THREADS / 10)
                warm_kb = kb;
            if (warm_kb >= 0) {
                max_kb = kb > max_kb ? kb : max_kb;
                samples++;
            }
        }
        struct timespec p = {0, 10000000};
        nanosleep(&p, NULL);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(w[i].id, NULL);
        issued += 3 * w[i].target;
    }
    printf("%llu zones on %d threads in %.2f s: %.1f M zones/s\n", (unsigned long long)issued,
           THREADS, (test_now_ns() - t0) / 1e9, issued / ((test_now_ns() - t0) / 1e3));
    if (monitor) {
        if (warm_kb < 0)
            warm_kb = max_kb = load_rss_kb();
        FIGURE("rss_after_warmup", "MB", "%.1f", warm_kb / 1024.0);
        FIGURE("rss_max", "MB", "%.1f", max_kb / 1024.0);
        FIGURE("rss_growth", "kB", "%ld", max_kb - warm_kb);
        FIGURE("rss_samples", "samples", "%d", samples);
        /* Flat: what a ring may still add after the warm-up is its cold
         * part, populated only while the collector is behind the thread
         * (docs/CONFIG.md, PROF_BUFFER), which a loaded machine decides;
         * anything past that and 2 MB is growth with the zones recorded. */
        CHECK_MSG(max_kb - warm_kb < 2048 + THREADS * RING_COLD_KB,
                  "RSS grew by %ld kB after warm-up: more than 2 MB and %d rings' cold part "
                  "(%ld kB each)", max_kb - warm_kb, THREADS, RING_COLD_KB);
    }
    return issued;
}

static int mode_soak(void)
{
    const char *big = getenv("PROF_TEST_SOAK");
    uint64_t total = big != NULL && strcmp(big, "1") == 0 ? 1000000000ull : 100000000ull;
    uint64_t per_thread = total / 3 / THREADS + 1;
    uint64_t issued, rec, dropped;

    issued = run_workers(per_thread, 0, 1);
    CHECK_EQ(prof_flush(), 0);
    rec = recorded();
    dropped = test_dropped();
    FIGURE("soak.zones", "zones", "%llu", (unsigned long long)issued);
    FIGURE("soak.recorded", "zones", "%llu", (unsigned long long)rec);
    FIGURE("soak.dropped", "zones", "%llu", (unsigned long long)dropped);
    CHECK_EQ_U64(rec + dropped, issued);
    CHECK_EQ(test_count("soak.attach"), THREADS);
    return 0;
}

static int mode_realistic(void)
{
    uint64_t per_thread = (uint64_t)test_scale(100000) / 3;
    uint64_t t0 = test_now_ns(), issued, dropped;
    double secs;

    issued = run_workers(per_thread, 10000, 1);
    secs = (test_now_ns() - t0) / 1e9;
    CHECK_EQ(prof_flush(), 0);
    dropped = test_dropped();
    FIGURE("realistic.zones", "zones", "%llu", (unsigned long long)issued);
    FIGURE("realistic.rate", "zones/s", "%.0f", issued / secs);
    FIGURE("realistic.dropped", "zones", "%llu", (unsigned long long)dropped);
    CHECK_EQ_U64(recorded(), issued);
    CHECK_EQ(dropped, 0);
    return 0;
}

static int mode_starved(void)
{
    uint64_t issued, rec, dropped;

    issued = run_workers(1000000 / 3, 0, 0);
    CHECK_EQ(prof_flush(), 0);
    rec = recorded();
    dropped = test_dropped();
    FIGURE("starved.zones", "zones", "%llu", (unsigned long long)issued);
    FIGURE("starved.recorded", "zones", "%llu", (unsigned long long)rec);
    FIGURE("starved.dropped", "zones", "%llu", (unsigned long long)dropped);
    CHECK_GT(dropped, 0);
    CHECK_EQ_U64(rec + dropped, issued);
    return 0;
}

/* The collector, inside a periodic summary's handler, waits here. */
static pthread_mutex_t block_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t block_cond = PTHREAD_COND_INITIALIZER;
static int block_entered, block_released;

static void blocking_handler(void *user, const char *text, int kind)
{
    (void)user;
    (void)text;
    if (kind != PROF_SUMMARY_PERIODIC)
        return;
    pthread_mutex_lock(&block_lock);
    block_entered = 1;
    pthread_cond_broadcast(&block_cond);
    while (!block_released)
        pthread_cond_wait(&block_cond, &block_lock);
    pthread_mutex_unlock(&block_lock);
}

static int mode_blocked(void)
{
    uint64_t per_thread, capacity, issued, rec, dropped, floor;

    prof_set_summary_handler(blocking_handler, NULL);
    { PROF_ZONE("soak.attach"); }
    /* Every thread's ring has the main thread's capacity (PROF_BUFFER). */
    capacity = prof_thread_self_->mask + 1;
    per_thread = capacity + capacity / 2;
    prof_step();   /* PROF_SUMMARY_EVERY=1steps: the collector enters the handler */
    pthread_mutex_lock(&block_lock);
    while (!block_entered)
        pthread_cond_wait(&block_cond, &block_lock);
    pthread_mutex_unlock(&block_lock);

    issued = run_workers(per_thread, 0, 0);

    pthread_mutex_lock(&block_lock);
    block_released = 1;
    pthread_cond_broadcast(&block_cond);
    pthread_mutex_unlock(&block_lock);
    CHECK_EQ(prof_flush(), 0);
    rec = recorded();
    dropped = test_dropped();
    /* What a held collector would have dropped at least: each ring
     * keeping only its capacity (its first zone included). The collector
     * drains on while the handler blocks, so this is a figure now. */
    floor = issued - THREADS * (capacity - 1);
    FIGURE("blocked.zones", "zones", "%llu", (unsigned long long)issued);
    FIGURE("blocked.recorded", "zones", "%llu", (unsigned long long)rec);
    FIGURE("blocked.dropped", "zones", "%llu", (unsigned long long)dropped);
    FIGURE("blocked.held_floor", "zones", "%llu", (unsigned long long)floor);
    CHECK_EQ_U64(rec + dropped, issued);
    CHECK(dropped < floor);   /* the collector was not held */
    prof_set_summary_handler(NULL, NULL);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "soak";

    CHECK(prof_enabled());
    if (strcmp(mode, "soak") == 0)
        return mode_soak();
    if (strcmp(mode, "realistic") == 0)
        return mode_realistic();
    if (strcmp(mode, "starved") == 0)
        return mode_starved();
    if (strcmp(mode, "blocked") == 0)
        return mode_blocked();
    fprintf(stderr, "usage: soak soak|realistic|starved|blocked\n");
    return 2;
}
