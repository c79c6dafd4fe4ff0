/* stages.c - what a run with very many distinct names costs (issue 11):
 * one zone on each of N interned names (flushed every 20,000), then the
 * calls that read the table.
 *
 *     build/bench/stages [N, default 1000000]
 *
 * Last line, for scripts:
 * prof-bench stages: n=<N> new_stage_us=<collector+zone us per new stage>
 *   stats_one_s=<prof_stats(name)> stats_list_s=<prof_stats_list, all N>
 *   text_s=<text summary> json_s=<JSON summary> json_mb=<its size>
 *   list_block_s=<longest prof_flush() of another thread during the list>
 *   window_all_s=<a step summary whose window ran every stage>
 *   window_idle_s=<the next one, whose window ran none of them>
 *
 * list_block_s is what the list costs everyone else: the collector and
 * every thread that needs the runtime lock wait that long. */
#include <prof.h>

#include <pthread.h>

#include "bench.h"

static double since(uint64_t t0)
{
    return (double)(bench_now_ns() - t0) / 1e9;
}

static int stop;
static uint64_t longest_flush_ns;

static void *flusher(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
        uint64_t t0 = bench_now_ns(), dt;

        prof_flush();
        dt = bench_now_ns() - t0;
        if (dt > __atomic_load_n(&longest_flush_ns, __ATOMIC_RELAXED))
            __atomic_store_n(&longest_flush_ns, dt, __ATOMIC_RELAXED);
        usleep(1000);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000000;
    const char **names = malloc((size_t)n * sizeof *names);
    prof_stage_stats one, *all = malloc((size_t)n * sizeof *all);
    size_t cap = 512u << 20;
    char *buf = malloc(cap);
    double new_us, one_s, list_s, text_s, json_s, block_s, window_s[2];
    pthread_t thread;
    int json_len;
    uint64_t t0;

    bench_require_env(argv, "PROF_SUMMARY", "off");
    bench_require_env(argv, "PROF_SUMMARY_EVERY", "1steps");
    if (n <= 0 || names == NULL || all == NULL || buf == NULL)
        return 1;
    prof_enable(1);
    for (int i = 0; i < n; i++) {
        char b[32];
        snprintf(b, sizeof b, "stage_%d", i);
        names[i] = prof_intern(b);
    }
    t0 = bench_now_ns();
    for (int i = 0; i < n; i++) {
        PROF_ZONE(names[i]);
        if (i % 20000 == 0)
            prof_flush();
    }
    prof_flush();
    new_us = since(t0) / n * 1e6;
    t0 = bench_now_ns();
    prof_stats("stage_5", &one);
    one_s = since(t0);
    if (pthread_create(&thread, NULL, flusher, NULL) != 0)
        return 1;
    usleep(20000);
    __atomic_store_n(&longest_flush_ns, 0, __ATOMIC_RELAXED);
    t0 = bench_now_ns();
    prof_stats_list(all, (size_t)n);
    list_s = since(t0);
    usleep(20000);
    block_s = (double)__atomic_load_n(&longest_flush_ns, __ATOMIC_RELAXED) / 1e9;
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    pthread_join(thread, NULL);
    t0 = bench_now_ns();
    prof_summary_snprint(buf, cap, PROF_FORMAT_TEXT);
    text_s = since(t0);
    t0 = bench_now_ns();
    json_len = prof_summary_snprint(buf, cap, PROF_FORMAT_JSON);
    json_s = since(t0);
    /* A step summary (formatted, though PROF_SUMMARY=off writes it
     * nowhere) closes a window; prof_flush() waits until it is made. */
    for (int w = 0; w < 2; w++) {
        t0 = bench_now_ns();
        prof_step();
        prof_flush();
        window_s[w] = since(t0);
    }
    printf("prof-bench stages: n=%d new_stage_us=%.2f stats_one_s=%.3f stats_list_s=%.3f "
           "text_s=%.3f json_s=%.3f json_mb=%.1f list_block_s=%.3f window_all_s=%.3f "
           "window_idle_s=%.3f\n", n, new_us, one_s, list_s, text_s, json_s, json_len / 1e6,
           block_s, window_s[0], window_s[1]);
    return 0;
}
