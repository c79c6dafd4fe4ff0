/* zone_overhead.c - what a zone costs on the instrumented thread.
 *
 * Beside every figure it prints the floor measured in the same run: two raw
 * timestamp reads and one 24-byte store into a thread-local array, which is
 * the least any timing zone can do. Each figure is the median over RUNS runs
 * of ZONES zones; the ring is big enough that no run drops, and the
 * collector drains between runs, outside the timed part. The ring is the
 * default size, so the records land in cache the way they do in a program.
 *
 *     build/bench/zone_overhead        (or: meson test --benchmark -C build)
 *
 * Last line, for scripts:
 * prof-bench zone: enabled=<ns> floor=<ns> ratio=<x> off=<ns> threads2=<ns> */
#include <pthread.h>

#include <prof.h>

#include "bench.h"

#define ZONES 16000   /* under half a ring's warm slots: no wake on fill mid-run */
#define RUNS 51

struct floor_rec {
    uint64_t start, end;
    const char *name;
};

static __thread struct floor_rec floor_buf[4096];

/* noinline keeps each loop honest: the compiler sees one zone per
 * iteration and cannot merge or hoist anything across calls. */
__attribute__((noinline)) static double run_floor(int n)
{
    uint64_t t0 = bench_now_ns();

    for (int i = 0; i < n; i++) {
        struct floor_rec *r = &floor_buf[i & 4095];
        uint64_t s = prof_ticks_();
        __asm__ __volatile__("" ::: "memory");
        r->end = prof_ticks_();
        r->start = s;
        r->name = "floor";
        /* The stores must happen: tell the compiler the array is read. */
        __asm__ __volatile__("" : : "r"(r) : "memory");
    }
    return (double)(bench_now_ns() - t0) / n;
}

static double median_of(double (*fn)(int), int flush_between)
{
    double v[RUNS];

    for (int r = 0; r < RUNS; r++) {
        if (flush_between)
            prof_flush();
        v[r] = fn(ZONES);
    }
    return bench_median(v, RUNS);
}

static pthread_barrier_t barrier;

static void *thread_main(void *arg)
{
    double *out = arg, v[RUNS];

    run_zones(1000);   /* attach outside the timed part */
    for (int r = 0; r < RUNS; r++) {
        pthread_barrier_wait(&barrier);
        v[r] = run_zones(ZONES);
        pthread_barrier_wait(&barrier);
        /* One thread flushes while both wait. */
        if (out == NULL)
            prof_flush();
        pthread_barrier_wait(&barrier);
    }
    if (out != NULL)
        *out = bench_median(v, RUNS);
    return NULL;
}

int main(int argc, char **argv)
{
    double floor_ns, on_ns, off_ns, two_ns, a, b;
    pthread_t th[2];

    (void)argc;
    /* The default ring (128k records) holds a whole run: nothing drops
     * while timed. */
    bench_require_env(argv, "PROF_SUMMARY", "off");
    bench_require_env(argv, "PROF", "1");

    run_zones(1000);
    prof_flush();
    floor_ns = median_of(run_floor, 0);
    on_ns = median_of(run_zones, 1);

    pthread_barrier_init(&barrier, NULL, 2);
    pthread_create(&th[0], NULL, thread_main, &a);
    pthread_create(&th[1], NULL, thread_main, NULL);
    pthread_join(th[0], NULL);
    pthread_join(th[1], NULL);
    pthread_barrier_destroy(&barrier);
    /* The second thread's median, measured the same way. */
    pthread_barrier_init(&barrier, NULL, 2);
    pthread_create(&th[0], NULL, thread_main, NULL);
    pthread_create(&th[1], NULL, thread_main, &b);
    pthread_join(th[0], NULL);
    pthread_join(th[1], NULL);
    two_ns = (a + b) / 2;

    prof_enable(0);
    off_ns = median_of(run_zones, 0);

    {
        prof_stage_stats st;
        prof_enable(1);
        prof_flush();
        prof_enable(0);
        if (prof_stats("bench", &st) == 0)
            printf("zones recorded: %llu (dropped in the summary: see PROF_SUMMARY)\n",
                   (unsigned long long)st.count);
    }
    printf("floor (2 clock reads + 24-byte store): %6.2f ns\n", floor_ns);
    printf("zone, enabled, 1 thread:               %6.2f ns  (%.2fx floor)\n", on_ns, on_ns / floor_ns);
    printf("zone, enabled, 2 threads (each):       %6.2f ns  (%.2fx floor)\n", two_ns, two_ns / floor_ns);
    printf("zone, disabled:                        %6.2f ns\n", off_ns);
    printf("prof-bench zone: enabled=%.2f floor=%.2f ratio=%.2f off=%.2f threads2=%.2f\n", on_ns,
           floor_ns, on_ns / floor_ns, off_ns, two_ns);
    return 0;
}
